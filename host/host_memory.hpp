// host_memory.hpp — what the host device and the memory devices share: regions of this
// process's memory, the copies and fills their queues run, and the machine's facts.
#pragma once

#include <rig/edge.hpp>
#include <rig/os.hpp>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace rig::host {

// The alignment every region HostMemory makes has at least (Facts::alignment).
inline constexpr std::size_t kRegionAlignment = 16;

// The device file through which memfd pages become a dma-buf (linux/udmabuf.h).
inline constexpr const char* kUdmabufPath = "/dev/udmabuf";

// Regions of this process's memory, as the host and memory devices allocate and map them.
// A region's id is its first byte's address: its address, its host address and its handle
// are all that pointer. Thread-safe.
class HostMemory {
 public:
  // `seam` is what dma reaches /dev/udmabuf through.
  explicit HostMemory(os::Seam& seam = os::system()) : seam_(seam) {}
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;
  // Regions still held are not released: rig frees every region before it drops a driver,
  // and a region it kept would still be in use.
  ~HostMemory() = default;

  // A region of at least `bytes` bytes (rounded up to whole 4-byte words, at least one) of
  // kind Device or Mapped, both plain host memory. It starts on a page when it is at least
  // 64 KiB and 4 pages, on 128 bytes when it is at least 128 bytes, and on 16 otherwise.
  // A region that starts on a page has pages of its own: those of a memfd sealed against
  // shrinking (F_SEAL_SHRINK), mapped shared, which dma can give as a dma-buf (a child of
  // fork shares them; each keeps a descriptor open while the process has fewer than half
  // its RLIMIT_NOFILE open), or anonymous pages where it may make no memfd (dma then says
  // why). nullopt when the operating system refuses the memory. Throws
  // std::invalid_argument for Memory::Pinned: a device whose memory is host memory has no
  // pinned memory.
  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes);

  // Returns a region that alloc or map_host made: alloc's memory goes back to the
  // operating system; a map_host region is an identity mapping, and freeing it releases
  // nothing (the caller keeps its memory).
  void free(edge::Region region);

  // Where a region lies: address == host == handle == its first byte.
  static edge::Location locate(edge::Region region);

  // The identity mapping of `bytes` bytes of host memory at `host`: a region whose id is
  // `host`. Mapping the same memory twice gives the same region, freed once per mapping.
  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes);

  // How PCI function `pci_function` reaches a region by DMA.
  // Bus, the frames' physical addresses (from /proc/self/pagemap, runs of consecutive frames
  // merged, in order), where all of these hold: the region is pages of its own (alloc's of at
  // least 64 KiB and 4 pages); they are locked (mlock: /proc/self/smaps's Locked covers the
  // mapping), so they stay where they are; the process reads their frame numbers (pagemap
  // shows them only to CAP_SYS_ADMIN, else 0); and the function's IOMMU group does not
  // translate (no IOMMU, or /sys/kernel/iommu_groups/N/type is "identity"), so the physical
  // address is the bus address it uses.
  // Else a new dma-buf (close-on-exec, offset 0) over the region's memfd pages, made by
  // /dev/udmabuf (UDMABUF_CREATE).
  // Error, naming the region, for a region alloc did not make or that was freed, and for one
  // that map_host made (the caller's memory, which only its owner can describe); where
  // neither way holds, naming why there is no dma-buf (heap memory: smaller than 64 KiB or 4
  // pages; anonymous pages and why they have no memfd; /dev/udmabuf absent or not to be
  // opened; UDMABUF_CREATE refused: the kernel's udmabuf.size_limit_mb, 64 MiB unless set,
  // caps one dma-buf) and each condition of Bus that fails.
  Result<edge::Dma> dma(edge::Region region, std::string_view pci_function);

 private:
  enum class Source { Heap, Pages, Host };
  struct Block {
    Source source;
    std::size_t bytes;  // Pages: the mapped length
    std::size_t maps;   // Host: how many map_host calls it has had
    int memfd = -1;     // Pages: the memfd whose pages they are, or -1 for anonymous pages
    int memfd_error = 0;  // Pages without a memfd: the -errno memfd_create gave
  };

  // Bus for the `bytes` bytes of pages at `address`, or each condition of it that fails.
  Result<edge::Bus> bus(std::uintptr_t address, std::size_t bytes, std::string_view pci_function);

  os::Seam& seam_;
  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, Block> blocks_;
};

// The first byte of a copy's destination and source in host memory. An end's address
// (dst, src) is its first byte, offset included; an end with address 0 is named by its
// handle (a host pointer) plus its offset.
std::byte* copy_destination(const rig_copy& copy) noexcept;
const std::byte* copy_source(const rig_copy& copy) noexcept;

// Copies each box's rows from src to dst (memmove), or with fill >= 0 sets the destination
// rows to that byte (memset).
void run_boxes(std::byte* dst, const std::byte* src, const rig_box* boxes, std::uint32_t count,
               std::int32_t fill) noexcept;

// Runs one copy part on host memory.
inline void run_copy(const rig_copy& copy) noexcept {
  run_boxes(copy_destination(copy), copy_source(copy), copy.boxes, copy.count, copy.fill);
}

// Bytes of physical memory of this machine (sysconf), the budget of host-memory devices.
std::size_t physical_memory_bytes();

// Bytes of this machine's last-level cache as sysfs states it for cpu0 (index3, else
// index2), or nullopt if it cannot be read.
std::optional<std::size_t> last_level_cache_bytes();

// The architecture this build runs on: "x86_64" or "aarch64".
std::string_view host_arch();

}  // namespace rig::host
