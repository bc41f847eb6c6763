// The AMD driver's memory (device.hpp): KFD buffers mapped for host and GPU at one address,
// and host memory mapped for the GPU as userptrs.
#include "device.hpp"

#include <sys/mman.h>

namespace rig::amd::driver {

KfdResult<Block> Device::make_block(std::uint64_t bytes, std::uint32_t flags) {
  bytes = round_up(std::max<std::uint64_t>(bytes, 1), kPage);
  auto va = seam_.mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (!va) return std::unexpected(KfdError{"reserving an address range: " + os::describe(va.error()), va.error()});
  auto address = reinterpret_cast<std::uint64_t>(*va);
  auto buffer = kfd_.alloc(address, bytes, flags);
  if (!buffer) {
    seam_.munmap(*va, bytes);
    return std::unexpected(buffer.error());
  }
  auto host = seam_.mmap(*va, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, kfd_.render_fd(),
                         off_t(buffer->mmap_offset));
  if (!host || *host != *va) {
    kfd_.free(buffer->handle);
    seam_.munmap(*va, bytes);
    int e = host ? -EFAULT : host.error();
    return std::unexpected(KfdError{"mapping a buffer for the host: " + os::describe(e), e});
  }
  if (auto m = kfd_.map(buffer->handle); !m) {
    seam_.munmap(*va, bytes);
    kfd_.free(buffer->handle);
    return std::unexpected(m.error());
  }
  return Block{address, bytes, buffer->handle, false};
}

// Host memory, mapped for the GPU through a userptr buffer the process's devices on this GPU
// share (rig_words is mapped by every device, and KFD takes a range once per VM).
KfdResult<Block> Device::map_user(std::uint64_t host, std::uint64_t bytes) {
  auto handle = kfd_.map_userptr(host, bytes);
  if (!handle) return std::unexpected(handle.error());
  return Block{host, bytes, *handle, true};
}

void Device::drop_block(Block& b) {
  if (!b.bytes) return;
  if (b.userptr) {
    kfd_.unmap_userptr(b.address, b.bytes);
  } else {
    kfd_.unmap(b.handle);
    seam_.munmap(reinterpret_cast<void*>(b.address), b.bytes);
    kfd_.free(b.handle);
  }
  b = {};
}

std::optional<edge::Region> Device::alloc(Memory memory, std::size_t bytes) {
  auto block = make_block(bytes, memory == Memory::Pinned ? kGttFlags : kVramFlags);
  if (!block) {
    if (block.error().error == -ENOMEM) return std::nullopt;  // rig reclaims and asks again
    throw edge::Fault(fmt::format("allocating {} bytes: {}", bytes, block.error().what));
  }
  std::lock_guard g(mutex_);
  auto id = next_region_++;
  regions_[id] = *block;
  return edge::Region{id};
}

void Device::free(edge::Region r) {
  std::lock_guard g(mutex_);
  auto it = regions_.find(r.id);
  if (it == regions_.end()) throw edge::Fault(fmt::format("free of unknown region {}", r.id));
  drop_block(it->second);
  regions_.erase(it);
}

edge::Location Device::locate(edge::Region r) {
  std::lock_guard g(mutex_);
  auto it = regions_.find(r.id);
  if (it == regions_.end()) throw edge::Fault(fmt::format("locate of unknown region {}", r.id));
  return {it->second.address, it->second.address, std::intptr_t(it->second.handle)};
}

edge::Mapping Device::map_host(std::uintptr_t host, std::size_t bytes) {
  if (host % kPage) return edge::Never{};
  auto block = map_user(host, round_up(bytes, kPage));
  if (!block) {
    if (block.error().error == -ENOMEM) return edge::NoRoom{};
    return edge::Never{};
  }
  std::lock_guard g(mutex_);
  auto id = next_region_++;
  regions_[id] = *block;
  return edge::Region{id};
}

Result<edge::Dma> Device::dma(edge::Region r, std::string_view) {
  Block block;
  {
    std::lock_guard g(mutex_);
    auto it = regions_.find(r.id);
    if (it == regions_.end()) return std::unexpected(fmt::format("{}: no region {} (freed?)", name_, r.id));
    block = it->second;
  }
  if (block.userptr)
    return std::unexpected(fmt::format(
        "{}: {} bytes at {:#x} are host memory the GPU maps (a userptr buffer), which KFD does not export; "
        "the host memory's own device describes it",
        name_, block.bytes, block.address));
  const auto [major, minor] = kfd_.process().version();
  if (major == 1 && minor < kExportDmabufMinor)
    return std::unexpected(fmt::format(
        "{}: KFD interface {}.{} has no dma-buf export (AMDKFD_IOC_EXPORT_DMABUF came with 1.{}); a newer kernel has it",
        name_, major, minor, kExportDmabufMinor));
  auto fd = kfd_.export_dmabuf(block.handle);
  if (!fd) return std::unexpected(fmt::format("{}: {} bytes at {:#x}: {}", name_, block.bytes, block.address, fd.error().what));
  return edge::Dma{edge::Dmabuf{*fd, 0}};
}

}  // namespace rig::amd::driver
