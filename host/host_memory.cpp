// host_memory.cpp — regions of this process's memory, host copies and fills, machine facts.
#include "host_memory.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

namespace rig::host {

namespace {

std::size_t page_bytes() {
  static const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  return page;
}

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

std::optional<edge::Region> HostMemory::alloc(Memory memory, std::size_t bytes) {
  if (memory == Memory::Pinned) {
    throw std::invalid_argument(
        "a device whose memory is host memory has no pinned memory; allocate Device memory");
  }
  // Whole 4-byte words, so that word-wise kernels and fills never run past the end.
  const std::size_t size = bytes == 0 ? 4 : round_up(bytes, 4);
  if (size < bytes) return std::nullopt;  // the rounding overflowed: no such memory

  const std::size_t page = page_bytes();
  std::lock_guard lock(mutex_);
  if (size >= 64 * 1024 && size >= 4 * page) {
    // Large regions get their own pages: they start on a page (what map_host and DMA
    // want), come zeroed, and go back to the system when freed.
    const std::size_t length = round_up(size, page);
    void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return std::nullopt;
    blocks_.insert_or_assign(reinterpret_cast<std::uintptr_t>(p), Block{Source::Pages, length, 0});
    return edge::Region{reinterpret_cast<std::uintptr_t>(p)};
  }
  // Smaller ones come from the heap; 128 bytes keeps a buffer on its own cache lines.
  const std::size_t align = size >= 128 ? 128 : kRegionAlignment;
  void* p = nullptr;
  if (posix_memalign(&p, align, size) != 0) return std::nullopt;
  blocks_.insert_or_assign(reinterpret_cast<std::uintptr_t>(p), Block{Source::Heap, size, 0});
  return edge::Region{reinterpret_cast<std::uintptr_t>(p)};
}

void HostMemory::free(edge::Region region) {
  std::lock_guard lock(mutex_);
  const auto it = blocks_.find(region.id);
  if (it == blocks_.end()) return;  // not ours: nothing to release
  Block& block = it->second;
  switch (block.source) {
    case Source::Heap:
      std::free(reinterpret_cast<void*>(region.id));
      break;
    case Source::Pages:
      munmap(reinterpret_cast<void*>(region.id), block.bytes);
      break;
    case Source::Host:
      // An identity mapping: the memory stays the caller's.
      if (--block.maps > 0) return;
      break;
  }
  blocks_.erase(it);
}

edge::Location HostMemory::locate(edge::Region region) {
  return edge::Location{region.id, region.id, std::intptr_t(region.id)};
}

edge::Mapping HostMemory::map_host(std::uintptr_t host, std::size_t bytes) {
  if (host == 0 || bytes == 0) return edge::Never{};
  std::lock_guard lock(mutex_);
  auto [it, made] = blocks_.try_emplace(host, Block{Source::Host, bytes, 0});
  // Memory this driver allocated is already the device's: mapping it changes nothing and
  // freeing the mapping must not release it, so such a request maps nothing new.
  if (!made && it->second.source != Source::Host) return edge::Never{};
  ++it->second.maps;
  return edge::Region{host};
}

std::byte* copy_destination(const rig_copy& copy) noexcept {
  return reinterpret_cast<std::byte*>(
      copy.dst != 0 ? copy.dst : std::uint64_t(copy.dst_handle) + copy.dst_offset);
}

const std::byte* copy_source(const rig_copy& copy) noexcept {
  return reinterpret_cast<const std::byte*>(
      copy.src != 0 ? copy.src : std::uint64_t(copy.src_handle) + copy.src_offset);
}

void run_boxes(std::byte* dst_base, const std::byte* src_base, const rig_box* boxes,
               std::uint32_t count, std::int32_t fill) noexcept {
  for (std::uint32_t b = 0; b < count; ++b) {
    const rig_box& box = boxes[b];
    if (box.width == 0 || box.rows == 0) continue;
    std::byte* dst = dst_base + box.dst_offset;
    if (fill >= 0) {
      const int byte = fill & 0xff;
      if (box.dst_pitch == box.width || box.rows == 1) {
        std::memset(dst, byte, box.width * box.rows);  // the rows are one run of bytes
      } else {
        for (std::uint64_t r = 0; r < box.rows; ++r)
          std::memset(dst + r * box.dst_pitch, byte, box.width);
      }
      continue;
    }
    const std::byte* src = src_base + box.src_offset;
    if ((box.src_pitch == box.width && box.dst_pitch == box.width) || box.rows == 1) {
      std::memmove(dst, src, box.width * box.rows);
    } else {
      for (std::uint64_t r = 0; r < box.rows; ++r) {
        std::memmove(dst + r * box.dst_pitch, src + r * box.src_pitch, box.width);
      }
    }
  }
}

std::size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return std::size_t(pages) * std::size_t(page);
}

std::optional<std::size_t> last_level_cache_bytes() {
  // sysfs states a cache's size as "32768K" (or "32M").
  for (const char* index : {"index3", "index2"}) {
    std::ifstream in(std::string("/sys/devices/system/cpu/cpu0/cache/") + index + "/size");
    std::string text;
    if (!(in >> text)) continue;
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || n == 0) continue;
    const std::string_view unit(end, text.data() + text.size());
    if (unit == "K") {
      n *= 1024;
    } else if (unit == "M") {
      n *= 1024 * 1024;
    } else if (unit == "G") {
      n *= std::size_t(1024) * 1024 * 1024;
    } else if (!unit.empty()) {
      continue;
    }
    return n;
  }
  return std::nullopt;
}

std::string_view host_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
#error "the host device runs on x86_64 and aarch64 only"
#endif
}

}  // namespace rig::host
