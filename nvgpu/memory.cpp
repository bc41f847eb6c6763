// The NVIDIA driver's memory (device.hpp): RM memory mapped in the GPU's VA space through
// UVM external ranges, and for the CPU through RM_MAP_MEMORY.
#include "device.hpp"

#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace rig::nv::driver {

std::uint64_t Device::take_heap(std::uint64_t bytes) {
  if (auto it = heap_free_.lower_bound(bytes); it != heap_free_.end() && it->first == bytes) {
    const std::uint64_t at = it->second;
    heap_free_.erase(it);
    return at;
  }
  if (heap_top_ + bytes > kHeapEnd) return 0;
  const std::uint64_t at = heap_top_;
  heap_top_ += bytes;
  return at;
}

void Device::give_heap(std::uint64_t address, std::uint64_t bytes) { heap_free_.emplace(bytes, address); }

Result<std::uint32_t> Device::make_memory(std::uint32_t klass, std::uint64_t bytes) {
  MemoryParams m{};
  m.owner = rm_.root, m.flags = kMemoryFlags, m.size = bytes;
  return rm_.alloc(device_, klass, &m, sizeof m, klass == kVidmem ? "allocating video memory" : "allocating system memory");
}

Result<std::byte*> Device::map_cpu(std::uint32_t parent, std::uint32_t memory, std::uint64_t bytes, int& fd,
                                   std::uint64_t& linear) {
  // Each CPU mapping goes through a /dev/nvidia<minor> file of its own (one mapping context a
  // file), registered to the control file.
  os::Seam& seam = rm_.seam();
  const std::string path = fmt::format("/dev/nvidia{}", minor_);
  const int file = seam.open(path.c_str(), O_RDWR);
  if (file < 0) return std::unexpected(fmt::format("opening {}: {}", path, os::describe(file)));
  std::int32_t ctl_fd = rm_.ctl;
  if (auto r = rm_.escape(file, kEscRegisterFd, &ctl_fd, sizeof ctl_fd, "REGISTER_FD"); !r) {
    seam.close(file);
    return std::unexpected(r.error());
  }
  Nvos33WithFd m{rm_.root, parent, memory, 0, 0, bytes, 0, ~0u, 0, file, 0};
  auto r = rm_.escape(rm_.ctl, kEscMapMemory, &m, sizeof m, "RM_MAP_MEMORY");
  if (!r || m.status != kOk) {
    seam.close(file);
    return std::unexpected(r ? fmt::format("RM_MAP_MEMORY: RM refused it with {}", status_name(m.status)) : r.error());
  }
  auto v = seam.mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, file, 0);
  if (!v) {
    Nvos34 u{rm_.root, parent, memory, 0, m.pLinearAddress, ~0u, 0};
    rm_.escape(rm_.ctl, kEscUnmapMemory, &u, sizeof u, "RM_UNMAP_MEMORY");
    seam.close(file);
    return std::unexpected(fmt::format("mmap of {}: {}", path, os::describe(v.error())));
  }
  fd = file, linear = m.pLinearAddress;
  return static_cast<std::byte*>(*v);
}

void Device::unmap_cpu(std::uint32_t parent, std::uint32_t memory, std::byte* host, std::uint64_t bytes, int fd,
                       std::uint64_t linear) {
  os::Seam& seam = rm_.seam();
  seam.munmap(host, bytes);
  Nvos34 u{rm_.root, parent, memory, 0, linear, ~0u, 0};
  rm_.escape(rm_.ctl, kEscUnmapMemory, &u, sizeof u, "RM_UNMAP_MEMORY");
  seam.close(fd);
}

Result<Block> Device::place(std::uint32_t memory, std::uint64_t bytes, bool cpu, std::uint64_t at) {
  Block b;
  b.memory = memory, b.bytes = bytes;
  b.from_heap = at == 0;
  b.address = at ? at : take_heap(bytes);
  if (!b.address) return std::unexpected(std::string("the driver's part of the GPU's VA space is full"));
  auto undo = [&](std::string why) -> Result<Block> {
    if (b.ranged) {
      UvmRange f{b.address, b.bytes, ~0u, 0};
      rm_.uvm_call(kUvmFree, &f, &f.rmStatus, "UVM_FREE");
    }
    if (b.from_heap) give_heap(b.address, b.bytes);
    return std::unexpected(std::move(why));
  };
  UvmRange range{b.address, bytes, ~0u, 0};
  if (auto r = rm_.uvm_call(kUvmCreateRange, &range, &range.rmStatus, "UVM_CREATE_EXTERNAL_RANGE"); !r)
    return undo(r.error());
  b.ranged = true;
  auto m = std::make_unique<UvmMapExternal>();
  std::memset(m.get(), 0, sizeof *m);
  m->base = b.address, m->length = bytes, m->offset = 0;
  std::memcpy(m->perGpuAttributes[0].uuid, uuid_, sizeof uuid_);
  m->gpuAttributesCount = 1, m->rmCtrlFd = rm_.ctl, m->hClient = rm_.root, m->hMemory = memory, m->rmStatus = ~0u;
  if (auto r = rm_.uvm_call(kUvmMapExternal, m.get(), &m->rmStatus, "UVM_MAP_EXTERNAL_ALLOCATION"); !r)
    return undo(r.error());
  if (cpu) {
    auto host = map_cpu(device_, memory, bytes, b.map_fd, b.linear);
    if (!host) return undo(host.error());
    b.host = *host;
  }
  return b;
}

void Device::drop(Block& b) {
  if (b.share) {
    auto it = host_maps_.find(b.share);
    if (it != host_maps_.end() && --it->second.refs == 0) {
      drop(it->second.block);
      host_maps_.erase(it);
    }
    b.share = 0;
    return;
  }
  if (b.host) unmap_cpu(device_, b.memory, b.host, b.bytes, b.map_fd, b.linear);
  b.host = nullptr;
  if (b.ranged) {
    UvmRange f{b.address, b.bytes, ~0u, 0};
    rm_.uvm_call(kUvmFree, &f, &f.rmStatus, "UVM_FREE");
    b.ranged = false;
  }
  if (b.from_heap) give_heap(b.address, b.bytes);
  if (b.memory) rm_.free(b.memory);
  b.memory = 0;
}

std::optional<edge::Region> Device::alloc(Memory memory, std::size_t bytes) {
  if (!open_) throw edge::Fault(name_ + ": the device is closed");
  const std::uint64_t size = round_up(std::max<std::uint64_t>(bytes, 1), kPage);
  std::lock_guard lock(memory_lock_);
  auto handle = make_memory(memory == Memory::Pinned ? kSysmem : kVidmem, size);
  if (!handle) return std::nullopt;  // RM has no room (NV_ERR_NO_MEMORY): rig reclaims and asks again
  auto b = place(*handle, size, memory != Memory::Device);
  if (b) b->system = memory == Memory::Pinned;
  if (!b) {
    rm_.free(*handle);
    throw edge::Fault(fmt::format("{}: mapping {} bytes of {}: {}", name_, size,
                                  memory == Memory::Pinned ? "system memory" : "video memory", b.error()));
  }
  const std::uintptr_t id = next_region_++;
  blocks_.emplace(id, *b);
  return edge::Region{id};
}

void Device::free(edge::Region r) {
  {
    std::lock_guard lock(memory_lock_);
    auto it = blocks_.find(r.id);
    if (it == blocks_.end()) return;
    drop(it->second);
    blocks_.erase(it);
    if (!stopped_ || !blocks_.empty()) return;
  }
  close();  // a stopped device's last region: nothing is left to keep the client for
}

edge::Location Device::locate(edge::Region r) {
  std::lock_guard lock(memory_lock_);
  auto it = blocks_.find(r.id);
  if (it == blocks_.end()) return {};
  const Block& b = it->second;
  edge::Location l;
  l.address = b.address;
  if (b.host) l.host = reinterpret_cast<std::uintptr_t>(b.host);
  if (b.borrowed) l.host = b.borrowed;
  l.handle = std::intptr_t(b.share ? host_maps_.at(b.share).block.memory : b.memory);
  return l;
}

edge::Mapping Device::map_host(std::uintptr_t host, std::size_t bytes) {
  if (!open_ || host % kPage || bytes == 0) return edge::Never{};
  const std::uint64_t size = round_up(bytes, kPage);
  if (host < kWindowsEnd && host + size > kHeapBase) return edge::Never{};  // the driver's regions and windows
  std::lock_guard lock(memory_lock_);
  const std::uintptr_t id = next_region_++;
  Block region;
  region.address = host, region.bytes = size, region.borrowed = host;
  // Inside a mapping made already: share it. Over part of one: the VA space cannot take it.
  auto after = host_maps_.upper_bound(host);
  if (after != host_maps_.begin()) {
    auto& [start, m] = *std::prev(after);
    if (host + size <= start + m.block.bytes) {
      ++m.refs;
      region.share = start;
      blocks_.emplace(id, region);
      return edge::Region{id};
    }
    if (host < start + m.block.bytes) return edge::Never{};
  }
  if (after != host_maps_.end() && after->first < host + size) return edge::Never{};
  // The host's pages as an OS descriptor, on the GPU's file, then in the VA space at their
  // own address.
  Nvos02WithFd a{rm_.root, device_, 0, kOsDescriptor, kOsDescriptorFlags, 0, host, size - 1, ~0u, 0, -1, 0};
  auto r = rm_.escape(rm_.dev, kEscAllocMemory, &a, sizeof a, "RM_ALLOC_MEMORY");
  if (!r || a.status != kOk) return edge::Never{};
  auto b = place(a.hObjectNew, size, false, host);
  if (!b) {
    rm_.free(a.hObjectNew);
    return edge::Never{};
  }
  host_maps_.emplace(host, HostMap{*b, 1});
  region.share = host;
  blocks_.emplace(id, region);
  return edge::Region{id};
}

Result<edge::Dma> Device::dma(edge::Region r, std::string_view) {
  std::lock_guard lock(memory_lock_);
  auto it = blocks_.find(r.id);
  if (it == blocks_.end()) return std::unexpected(fmt::format("{}: dma of a region the driver does not hold", name_));
  const Block& region = it->second;
  // A map_host region is a piece of its host mapping's OS-descriptor memory.
  const Block& whole = region.share ? host_maps_.at(region.share).block : region;
  const std::uint64_t offset = region.share ? region.address - region.share : 0;
  const char* kind = region.share ? "host memory mapped for the GPU" : whole.system ? "system memory" : "video memory";
  const std::string what = fmt::format("{}: the dma-buf of {} at {:#x} ({} bytes, RM handle {:#x})", name_, kind,
                                       region.address, region.bytes, whole.memory);
  auto a = std::make_unique<ExportDmabuf>();
  std::memset(a.get(), 0, sizeof *a);
  a->fd = -1, a->hClient = rm_.root, a->totalObjects = 1, a->numObjects = 1, a->index = 0;
  a->totalSize = region.bytes, a->mappingType = kDmabufMappingDefault, a->bAllowMmap = 0;
  a->handles[0] = whole.memory, a->offsets[0] = offset, a->sizes[0] = region.bytes, a->status = ~0u;
  if (auto e = rm_.escape(rm_.dev, kEscExportDmabuf, a.get(), sizeof *a, "NV_ESC_EXPORT_TO_DMABUF_FD"); !e)
    return std::unexpected(fmt::format("{}: {}", what, e.error()));
  if (a->status != kOk)
    return std::unexpected(fmt::format(
        "{}: NV_ESC_EXPORT_TO_DMABUF_FD: the kernel module refused it with {}{}", what, status_name(a->status),
        whole.system || region.share ? " (it exports only video memory from a GPU with memory of its own)" : ""));
  return edge::Dmabuf{a->fd, 0};
}

}  // namespace rig::nv::driver
