// host_memory.cpp — regions of this process's memory, host copies and fills, machine facts.
#include "host_memory.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

namespace rig::host {

namespace {

std::size_t page_bytes() {
  static const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  return page;
}

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// udmabuf takes a memfd whose size cannot shrink under the pages it pins (F_SEAL_SHRINK) and
// that is not sealed against writes (udmabuf.c, udmabuf_create); sealing growth and further
// seals keeps the region's size what it was made with.
constexpr unsigned kRegionSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// Regions keep their memfd open, so they take descriptors only below half the process's
// limit (RLIMIT_NOFILE), leaving the rest to the program; past it, anonymous pages.
int memfd_ceiling() {
  static const int ceiling = [] {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1 << 20;
    return int(std::min<rlim_t>(limit.rlim_cur / 2, 1 << 20));
  }();
  return ceiling;
}

// A memfd of `length` bytes with kRegionSeals, or -errno (-EMFILE past memfd_ceiling).
int make_region_memfd(std::size_t length) {
  int fd = memfd_create("rig-host", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -errno;
  if (fd >= memfd_ceiling()) {
    close(fd);
    return -EMFILE;
  }
  if (ftruncate(fd, off_t(length)) != 0 || fcntl(fd, F_ADD_SEALS, kRegionSeals) != 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  return fd;
}

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
    // They are a memfd's, so that dma can make a dma-buf of them; anonymous pages where
    // the process may make no memfd (out of descriptors, a seccomp filter).
    const std::size_t length = round_up(size, page);
    const int memfd = make_region_memfd(length);
    void* p = memfd >= 0 ? mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0)
                         : mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      if (memfd >= 0) close(memfd);
      return std::nullopt;
    }
    Block block{Source::Pages, length, 0, memfd >= 0 ? memfd : -1, memfd >= 0 ? 0 : memfd};
    blocks_.insert_or_assign(reinterpret_cast<std::uintptr_t>(p), block);
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
      // A dma-buf made of the pages holds them on its own: closing the memfd frees nothing
      // that a NIC's registration still uses.
      if (block.memfd >= 0) close(block.memfd);
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

namespace {

// /proc/self/pagemap: one 8-byte entry a page; bit 63 "present", bits 54:0 the frame number,
// which reads as 0 without CAP_SYS_ADMIN (the kernel's Documentation/admin-guide/mm/pagemap.rst).
constexpr const char* kPagemap = "/proc/self/pagemap";
constexpr std::uint64_t kPagemapPresent = 1ull << 63, kPagemapFrame = (1ull << 55) - 1;
// The bus works in 4 KiB pages (edge::Bus).
constexpr std::uint64_t kBusPage = 4096;

// The bytes /proc/self/smaps says are locked in the mapping that starts at `address`, or
// nullopt where no mapping starts there.
std::optional<std::uint64_t> locked_bytes(std::string_view smaps, std::uintptr_t address) {
  const std::string head = fmt::format("{:x}-", address);
  bool inside = false;  // past the mapping's own line, among its fields
  for (std::size_t at = 0; at < smaps.size();) {
    const std::size_t end = std::min(smaps.find('\n', at), smaps.size());
    const std::string_view line = smaps.substr(at, end - at);
    at = end + 1;
    if (!inside) {
      inside = line.starts_with(head);
    } else if (line.starts_with("Locked:")) {  // every mapping lists it
      std::uint64_t kb = 0;
      const std::string_view digits = line.substr(line.find_first_not_of(" \t", 7));
      std::from_chars(digits.data(), digits.data() + digits.size(), kb);
      return kb * 1024;
    }
  }
  return inside ? std::optional<std::uint64_t>(0) : std::nullopt;
}

}  // namespace

Result<edge::Bus> HostMemory::bus(std::uintptr_t address, std::size_t bytes, std::string_view fn) {
  std::vector<std::string> fails;
  // The function's IOMMU group, and whether it translates.
  const std::string device = fmt::format("/sys/bus/pci/devices/{}", fn);
  if (auto group = seam_.readlink((device + "/iommu_group").c_str())) {
    const std::string n = group->substr(group->rfind('/') + 1);
    auto type = os::read_text(seam_, fmt::format("/sys/kernel/iommu_groups/{}/type", n).c_str());
    const std::string kind = type ? type->substr(0, type->find_first_of("\n")) : std::string();
    if (!type)
      fails.push_back(fmt::format("{}'s IOMMU group {} has no type to read ({})", fn, n, os::describe(type.error())));
    else if (kind != "identity")
      fails.push_back(fmt::format("{}'s IOMMU group {} translates (type {}): the function's bus addresses are "
                                  "IOVAs, not the memory's",
                                  fn, n, kind));
  } else if (!seam_.readlink(device.c_str())) {
    fails.push_back(fmt::format("there is no PCI function {} ({} is absent)", fn, device));
  }
  // Locked pages.
  if (auto smaps = os::read_text(seam_, "/proc/self/smaps")) {
    const auto locked = locked_bytes(*smaps, address);
    if (!locked || *locked < bytes)
      fails.push_back(fmt::format("its pages are not locked ({} of {} bytes locked; mlock them), so the kernel may "
                                  "move them",
                                  locked.value_or(0), bytes));
  } else {
    fails.push_back(fmt::format("/proc/self/smaps cannot be read ({}), so whether its pages are locked is unknown",
                                os::describe(smaps.error())));
  }
  // Their frames.
  edge::Bus bus;
  const std::size_t pages = bytes / kBusPage;
  std::vector<std::uint64_t> entries(pages);
  const int map = seam_.open(kPagemap, O_RDONLY | O_CLOEXEC);
  const ssize_t got = map < 0 ? map
                              : seam_.pread(map, entries.data(), pages * 8, off_t(address / kBusPage * 8));
  if (map >= 0) seam_.close(map);
  if (got != ssize_t(pages * 8)) {
    fails.push_back(fmt::format("{} cannot be read ({})", kPagemap, got < 0 ? os::describe(int(got)) : "short"));
  } else {
    for (std::size_t i = 0; i < pages; ++i) {
      const std::uint64_t frame = entries[i] & kPagemapFrame;
      if (!(entries[i] & kPagemapPresent)) {
        fails.push_back(fmt::format("page {} is not present", i));
        break;
      }
      if (frame == 0) {
        fails.push_back(fmt::format("{} shows no frame numbers to this process (they need CAP_SYS_ADMIN)", kPagemap));
        break;
      }
      const std::uint64_t at = frame * kBusPage;
      if (!bus.ranges.empty() && bus.ranges.back().first + bus.ranges.back().second == at)
        bus.ranges.back().second += kBusPage;
      else
        bus.ranges.emplace_back(at, kBusPage);
    }
  }
  if (!fails.empty()) {
    std::string why = "no bus addresses: ";
    for (std::size_t i = 0; i < fails.size(); ++i) why += (i ? "; " : "") + fails[i];
    return std::unexpected(why);
  }
  return bus;
}

Result<edge::Dma> HostMemory::dma(edge::Region region, std::string_view pci_function) {
  std::lock_guard lock(mutex_);
  const auto it = blocks_.find(region.id);
  if (it == blocks_.end())
    return std::unexpected(fmt::format("host memory at {:#x}: no region of this device starts there (freed?)", region.id));
  const Block& block = it->second;
  const std::string where = fmt::format("{} bytes of host memory at {:#x}", block.bytes, region.id);
  switch (block.source) {
    case Source::Heap:
      return std::unexpected(fmt::format(
          "{}: heap memory, which shares its pages with other allocations; only regions of at least 64 KiB "
          "and 4 pages have pages of their own for a dma-buf or bus addresses",
          where));
    case Source::Host:
      return std::unexpected(fmt::format(
          "{}: the caller's memory, mapped as it is; only the memory's owner can describe it for DMA", where));
    case Source::Pages:
      break;
  }
  auto bus = this->bus(region.id, block.bytes, pci_function);
  if (bus) return edge::Dma{std::move(*bus)};
  if (block.memfd < 0)
    return std::unexpected(fmt::format("{}: anonymous pages, not a memfd's (memfd_create gave {} when they were "
                                       "allocated, or the process had half its RLIMIT_NOFILE descriptors open), "
                                       "so no dma-buf can hold them; and {}",
                                       where, os::describe(block.memfd_error), bus.error()));
  const int device = seam_.open(kUdmabufPath, O_RDWR);
  if (device < 0) {
    const char* what = device == -ENOENT ? "it is absent: the kernel has no udmabuf (CONFIG_UDMABUF; modprobe udmabuf)"
                       : device == -EACCES || device == -EPERM
                           ? "no permission: give this user access to it (its group, or a udev rule)"
                           : "it cannot be opened";
    return std::unexpected(fmt::format("{}: no dma-buf: {} {} ({}); and {}", where, kUdmabufPath, what,
                                       os::describe(device), bus.error()));
  }
  udmabuf_create create{};
  create.memfd = std::uint32_t(block.memfd);
  create.flags = UDMABUF_FLAGS_CLOEXEC;
  create.offset = 0;
  create.size = block.bytes;
  const int fd = seam_.ioctl(device, UDMABUF_CREATE, &create);
  seam_.close(device);
  if (fd < 0)
    return std::unexpected(fmt::format("{}: UDMABUF_CREATE refused it: {}{}; and {}", where, os::describe(fd),
                                       fd == -EINVAL ? " (udmabuf.size_limit_mb caps one dma-buf, 64 MiB unless set)" : "",
                                       bus.error()));
  return edge::Dma{edge::Dmabuf{fd, 0}};
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
