// The IOVAs a device may be given (iova.hpp).
#include "iova.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace rig::vfio {
namespace {

std::uint64_t mask_last(unsigned bits) { return bits >= 64 ? ~std::uint64_t(0) : (std::uint64_t(1) << bits) - 1; }

}  // namespace

IovaSpace::IovaSpace(std::vector<IovaRange> usable, unsigned dma_bits, std::uint64_t page)
    : dma_bits_(dma_bits), page_(page) {
  if (dma_bits < 12 || dma_bits > 64)
    throw std::invalid_argument(fmt::format("a DMA mask of {} bits: a device's mask has 12 to 64 bits", dma_bits));
  if (page == 0 || (page & (page - 1)) != 0)
    throw std::invalid_argument(fmt::format("an IOMMU page of {} bytes: it must be a power of two", page));
  if (usable.empty()) usable.push_back({0, ~std::uint64_t(0)});
  const std::uint64_t last = mask_last(dma_bits);
  for (IovaRange r : usable) {
    // Page-align inward: the first whole page at or after `first`, never page 0.
    std::uint64_t first = std::max(r.first, page);
    if (first % page) {
      if (first > ~std::uint64_t(0) - page) continue;
      first += page - first % page;
    }
    std::uint64_t end = std::min(r.last, last);
    if (end < first || end - first + 1 < page) continue;
    std::uint64_t whole = (end - first + 1) / page * page;
    usable_.push_back({first, first + whole - 1});
  }
  std::sort(usable_.begin(), usable_.end(), [](IovaRange a, IovaRange b) { return a.first < b.first; });
}

std::optional<std::uint64_t> IovaSpace::pick(std::uint64_t bytes) const {
  if (bytes == 0 || bytes % page_) return std::nullopt;
  for (IovaRange r : usable_) {
    std::uint64_t at = r.first;  // the start of the gap being looked at
    bool past = false;
    for (const auto& [first, size] : taken_) {
      if (first + size <= at) continue;
      if (first > r.last) break;
      if (first >= at && first - at >= bytes) return at;
      at = first + size;
      if (at == 0 || at > r.last) {
        past = true;
        break;
      }
    }
    if (!past && r.last - at + 1 >= bytes) return at;
  }
  return std::nullopt;
}

std::optional<std::string> IovaSpace::refuse(std::uint64_t iova, std::uint64_t bytes) const {
  if (bytes == 0) return "an empty range";
  if (iova % page_ || bytes % page_)
    return fmt::format("{:#x} + {:#x} is not aligned to the IOMMU's {:#x}-byte pages", iova, bytes, page_);
  if (iova > ~std::uint64_t(0) - (bytes - 1)) return fmt::format("{:#x} + {:#x} wraps around", iova, bytes);
  std::uint64_t last = iova + bytes - 1;
  if (last > mask_last(dma_bits_))
    return fmt::format("{:#x} + {:#x} is outside the device's {}-bit DMA mask", iova, bytes, dma_bits_);
  bool inside = std::any_of(usable_.begin(), usable_.end(),
                            [&](IovaRange r) { return iova >= r.first && last <= r.last; });
  if (!inside) return fmt::format("{:#x} + {:#x} is not in a range the IOMMU lets the device use", iova, bytes);
  auto it = taken_.upper_bound(last);
  if (it != taken_.begin()) {
    --it;
    if (it->first + it->second > iova)
      return fmt::format("{:#x} + {:#x} overlaps the mapping at {:#x} + {:#x}", iova, bytes, it->first, it->second);
  }
  return std::nullopt;
}

void IovaSpace::take(std::uint64_t iova, std::uint64_t bytes) { taken_.emplace(iova, bytes); }

std::optional<std::uint64_t> IovaSpace::give_back(std::uint64_t iova) {
  auto it = taken_.find(iova);
  if (it == taken_.end()) return std::nullopt;
  std::uint64_t bytes = it->second;
  taken_.erase(it);
  return bytes;
}

}  // namespace rig::vfio
