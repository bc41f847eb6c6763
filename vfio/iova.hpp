// iova.hpp — the I/O virtual addresses a device may be given for DMA, and which are taken.
//
// A device reaches host memory at IOVAs the IOMMU translates. An IOVA is usable only where
// both the IOMMU allows it (its usable ranges; the kernel reserves others, such as the MSI
// window at 0xfee00000 on x86) and the device can drive it (its DMA mask: a device with a
// 28-bit mask reaches only IOVAs below 256 MiB). IovaSpace is pure bookkeeping: it touches no
// device and no kernel.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rig::vfio {

// A closed range of IOVAs [first, last], as the kernel reports an IOMMU's usable ranges.
struct IovaRange {
  std::uint64_t first = 0, last = 0;
};

class IovaSpace {
 public:
  // The IOVAs of `usable` (all 64-bit IOVAs where it is empty) below 2^`dma_bits`, handed
  // out in multiples of `page` bytes (a power of two), and never IOVA 0, which a device's
  // bug would write. Throws std::invalid_argument for `dma_bits` outside 12..64 or a `page`
  // that is not a power of two.
  IovaSpace(std::vector<IovaRange> usable, unsigned dma_bits, std::uint64_t page);

  // The lowest IOVA where `bytes` (a multiple of the page) fit free, or nullopt where no gap
  // of the space holds them.
  std::optional<std::uint64_t> pick(std::uint64_t bytes) const;
  // Why [iova, iova + bytes) cannot be taken, in words ("0x10000000 + 0x1000 is outside the
  // device's 28-bit DMA mask"), or nullopt when it can: it must be page-aligned, non-empty,
  // inside a usable range and the mask, and overlap nothing taken.
  std::optional<std::string> refuse(std::uint64_t iova, std::uint64_t bytes) const;
  // Takes [iova, iova + bytes), which refuse() accepted.
  void take(std::uint64_t iova, std::uint64_t bytes);
  // Gives back the range taken at exactly `iova`; returns its size, or nullopt (and changes
  // nothing) where no range starts there.
  std::optional<std::uint64_t> give_back(std::uint64_t iova);

  // The ranges taken, by first IOVA: their sizes.
  const std::map<std::uint64_t, std::uint64_t>& taken() const { return taken_; }
  unsigned dma_bits() const { return dma_bits_; }
  std::uint64_t page() const { return page_; }

 private:
  std::vector<IovaRange> usable_;  // clipped to the mask, sorted, page-aligned inward
  unsigned dma_bits_;
  std::uint64_t page_;
  std::map<std::uint64_t, std::uint64_t> taken_;
};

}  // namespace rig::vfio
