// UVM's half of the simulated NVIDIA GPU (sim.hpp): /dev/nvidia-uvm's VA-space files, the
// GPU and its VA space registered in them, channels' ranges, external ranges and the RM
// memory mapped into them. Status codes and their checks follow OGKM 580.142's
// kernel-open/nvidia-uvm (uvm.c, uvm_map_external.c); every answer is in rmStatus and the
// ioctl returns 0, but for a request UVM does not know (-EINVAL... as uvm.c's default).
#include "state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rig::sim::nv {
namespace {

using namespace abi;

bool unaligned_4k(std::uint64_t base, std::uint64_t length) {
  return base % kPage || length % kPage || length == 0 || base + length < base;
}

std::string uuid_text(const std::uint8_t* u) {
  std::string s;
  for (unsigned i = 0; i < kUuidBytes; ++i) s += fmt::format("{:02x}", u[i]);
  return s;
}

}  // namespace

int Simulator::Impl::uvm_ioctl(int fd, File& file, unsigned long request, void* arg) {
  if (!arg) return refuse_errno(-EFAULT, fmt::format("UVM ioctl {} on file {}: no parameters", request, fd));
  std::size_t size = 0;  // each request's struct
  switch (request) {
    case UVM_INITIALIZE: size = sizeof(UVM_INITIALIZE_PARAMS); break;
    case UVM_MM_INITIALIZE: size = sizeof(UVM_MM_INITIALIZE_PARAMS); break;
    case UVM_REGISTER_GPU: size = sizeof(UVM_REGISTER_GPU_PARAMS); break;
    case UVM_REGISTER_GPU_VASPACE: size = sizeof(UVM_REGISTER_GPU_VASPACE_PARAMS); break;
    case UVM_REGISTER_CHANNEL: size = sizeof(UVM_REGISTER_CHANNEL_PARAMS); break;
    case UVM_UNREGISTER_CHANNEL: size = sizeof(UVM_UNREGISTER_CHANNEL_PARAMS); break;
    case UVM_CREATE_EXTERNAL_RANGE: size = sizeof(UVM_CREATE_EXTERNAL_RANGE_PARAMS); break;
    case UVM_MAP_EXTERNAL_ALLOCATION: size = sizeof(UVM_MAP_EXTERNAL_ALLOCATION_PARAMS); break;
    case UVM_FREE: size = sizeof(UVM_FREE_PARAMS); break;
    default: return refuse_errno(-EINVAL, fmt::format("UVM ioctl {:#x} on file {}: not one UVM answers here", request, fd));
  }
  if (!user_accessible(arg, size))  // copy_from_user fails: -EFAULT (uvm_ioctl.h's routing)
    return refuse_errno(-EFAULT, fmt::format("UVM ioctl {} on file {}: its {} bytes at {} are not the caller's",
                                             request, fd, size, arg));
  const bool is_va_space = file.uvm == File::Uvm::va_space;
  // Every ioctl but the two initializations needs a VA-space file (UVM_ROUTE_CMD_*_INIT_CHECK).
  auto needs_va_space = [&](std::uint32_t& status, const char* name) {
    if (is_va_space) return false;
    status = refuse(NV_ERR_ILLEGAL_ACTION, fmt::format("{} on UVM file {}: the file is not an initialized VA space",
                                                       name, fd));
    return true;
  };
  switch (request) {
    case UVM_INITIALIZE: {
      auto* p = static_cast<UVM_INITIALIZE_PARAMS*>(arg);
      if (file.uvm == File::Uvm::uninitialized) {
        file.uvm = File::Uvm::va_space, file.uvm_flags = p->flags;
        uvm[fd];
        p->rmStatus = NV_OK;
      } else if (file.uvm == File::Uvm::va_space) {
        p->rmStatus = p->flags == file.uvm_flags
                          ? NV_OK
                          : refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("UVM_INITIALIZE on file {}: flags {:#x}, it was "
                                                                        "initialized with {:#x}", fd, p->flags,
                                                                        file.uvm_flags));
      } else {
        p->rmStatus = refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("UVM_INITIALIZE on file {}: it is an mm file", fd));
      }
      return 0;
    }
    case UVM_MM_INITIALIZE: {
      auto* p = static_cast<UVM_MM_INITIALIZE_PARAMS*>(arg);
      auto other = files.find(p->uvmFd);
      if (other == files.end() || other->second.node != Node::uvm || other->second.uvm != File::Uvm::va_space)
        p->rmStatus = refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("UVM_MM_INITIALIZE on file {}: uvmFd {} is no "
                                                                  "initialized UVM VA-space file", fd, p->uvmFd));
      else if (file.uvm != File::Uvm::uninitialized)
        p->rmStatus = refuse(NV_ERR_INVALID_STATE, fmt::format("UVM_MM_INITIALIZE on file {}: the file is already "
                                                               "initialized", fd));
      else
        file.uvm = File::Uvm::mm, p->rmStatus = NV_OK;
      return 0;
    }
    case UVM_REGISTER_GPU: {
      auto* p = static_cast<UVM_REGISTER_GPU_PARAMS*>(arg);
      if (needs_va_space(p->rmStatus, "UVM_REGISTER_GPU")) return 0;
      UvmSpace& u = uvm[fd];
      if (std::memcmp(p->gpu_uuid, config.uuid.data(), kUuidBytes) != 0)
        p->rmStatus = refuse(NV_ERR_GPU_UUID_NOT_FOUND, fmt::format("UVM_REGISTER_GPU: no GPU has UUID {}",
                                                                    uuid_text(p->gpu_uuid)));
      else if (u.gpu_registered)
        p->rmStatus = refuse(NV_ERR_IN_USE, fmt::format("UVM_REGISTER_GPU: GPU {} is already registered in file {}",
                                                        uuid_text(p->gpu_uuid), fd));
      else
        u.gpu_registered = true, p->rmStatus = NV_OK;
      return 0;
    }
    case UVM_REGISTER_GPU_VASPACE: {
      auto* p = static_cast<UVM_REGISTER_GPU_VASPACE_PARAMS*>(arg);
      if (needs_va_space(p->rmStatus, "UVM_REGISTER_GPU_VASPACE")) return 0;
      UvmSpace& u = uvm[fd];
      const std::string what = fmt::format("UVM_REGISTER_GPU_VASPACE of {:#x}", p->hVaSpace);
      auto ctl = files.find(p->rmCtrlFd);
      Object* va = object(p->hClient, p->hVaSpace);
      if (std::memcmp(p->gpuUuid, config.uuid.data(), kUuidBytes) != 0 || !u.gpu_registered)
        p->rmStatus = refuse(NV_ERR_INVALID_DEVICE, fmt::format("{}: GPU {} is not registered", what,
                                                                uuid_text(p->gpuUuid)));
      else if (ctl == files.end() || ctl->second.node != Node::ctl)
        p->rmStatus = refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: rmCtrlFd {} is no /dev/nvidiactl file", what,
                                                                  p->rmCtrlFd));
      else if (!va || va->klass != FERMI_VASPACE_A)
        p->rmStatus = refuse(NV_ERR_OBJECT_NOT_FOUND, fmt::format("{}: client {:#x} has no FERMI_VASPACE_A {:#x}", what,
                                                                  p->hClient, p->hVaSpace));
      else if (!(va->va_flags & NV_VASPACE_ALLOCATION_FLAGS_IS_EXTERNALLY_OWNED))
        p->rmStatus = refuse(NV_ERR_INVALID_FLAGS, what + ": the VA space was not made IS_EXTERNALLY_OWNED");
      else if (u.space)
        p->rmStatus = refuse(NV_ERR_INVALID_DEVICE, what + ": the GPU already has a VA space in this file");
      else {
        u.space = va->va, u.va_client = p->hClient, u.va_handle = p->hVaSpace;
        p->rmStatus = NV_OK;
      }
      return 0;
    }
    case UVM_REGISTER_CHANNEL: {
      auto* p = static_cast<UVM_REGISTER_CHANNEL_PARAMS*>(arg);
      if (needs_va_space(p->rmStatus, "UVM_REGISTER_CHANNEL")) return 0;
      UvmSpace& u = uvm[fd];
      const std::string what = fmt::format("UVM_REGISTER_CHANNEL of {:#x}", p->hChannel);
      Object* ch = object(p->hClient, p->hChannel);
      if (std::memcmp(p->gpuUuid, config.uuid.data(), kUuidBytes) != 0 || !u.space)
        p->rmStatus = refuse(NV_ERR_INVALID_DEVICE, fmt::format("{}: GPU {} has no VA space registered", what,
                                                                uuid_text(p->gpuUuid)));
      else if (!ch || !ch->channel)
        p->rmStatus = refuse(NV_ERR_OBJECT_NOT_FOUND, fmt::format("{}: client {:#x} has no channel {:#x}", what,
                                                                  p->hClient, p->hChannel));
      else if (ch->channel->space != u.space)
        p->rmStatus = refuse(NV_ERR_INVALID_CHANNEL, what + ": the channel's VA space is not the one registered");
      else if (ch->channel->uvm_registered)
        p->rmStatus = refuse(NV_ERR_INVALID_CHANNEL, what + ": already registered");
      else if (unaligned_4k(p->base, p->length))
        p->rmStatus = refuse(NV_ERR_INVALID_ADDRESS, fmt::format("{}: [{:#x}, +{:#x}) is not whole 4 KiB pages", what,
                                                                 p->base, p->length));
      else {
        auto next = u.ranges.lower_bound(p->base);
        bool overlaps = next != u.ranges.end() && next->first < p->base + p->length;
        if (next != u.ranges.begin() && std::prev(next)->first + std::prev(next)->second.length > p->base) overlaps = true;
        if (overlaps) {
          p->rmStatus = refuse(NV_ERR_UVM_ADDRESS_IN_USE, fmt::format("{}: [{:#x}, +{:#x}) overlaps a range", what,
                                                                      p->base, p->length));
        } else {
          u.ranges.emplace(p->base, UvmSpace::Range{p->length, false, p->hClient, p->hChannel});
          ch->channel->uvm_registered = true;
          p->rmStatus = NV_OK;
        }
      }
      return 0;
    }
    case UVM_UNREGISTER_CHANNEL: {
      // UVM finds the channel by its client and handle (uvm_api_unregister_channel); the
      // channel's range goes with it.
      auto* p = static_cast<UVM_UNREGISTER_CHANNEL_PARAMS*>(arg);
      if (needs_va_space(p->rmStatus, "UVM_UNREGISTER_CHANNEL")) return 0;
      UvmSpace& u = uvm[fd];
      Object* ch = object(p->hClient, p->hChannel);
      const auto n = std::erase_if(u.ranges, [&](auto& r) {
        return !r.second.external && r.second.client == p->hClient && r.second.channel == p->hChannel;
      });
      if (n == 0) {
        p->rmStatus = refuse(NV_ERR_INVALID_CHANNEL, fmt::format("UVM_UNREGISTER_CHANNEL of {:#x}: client {:#x} has no "
                                                                 "channel of that handle registered in this file",
                                                                 p->hChannel, p->hClient));
        return 0;
      }
      if (ch && ch->channel) ch->channel->uvm_registered = false;
      p->rmStatus = NV_OK;
      return 0;
    }
    case UVM_CREATE_EXTERNAL_RANGE: {
      auto* p = static_cast<UVM_CREATE_EXTERNAL_RANGE_PARAMS*>(arg);
      if (needs_va_space(p->rmStatus, "UVM_CREATE_EXTERNAL_RANGE")) return 0;
      UvmSpace& u = uvm[fd];
      const std::string what = fmt::format("UVM_CREATE_EXTERNAL_RANGE [{:#x}, +{:#x})", p->base, p->length);
      if (unaligned_4k(p->base, p->length)) {
        p->rmStatus = refuse(NV_ERR_INVALID_ADDRESS, what + ": not whole 4 KiB pages");
        return 0;
      }
      auto next = u.ranges.lower_bound(p->base);
      bool overlaps = next != u.ranges.end() && next->first < p->base + p->length;
      if (next != u.ranges.begin() && std::prev(next)->first + std::prev(next)->second.length > p->base) overlaps = true;
      if (overlaps) {
        p->rmStatus = refuse(NV_ERR_UVM_ADDRESS_IN_USE, what + ": overlaps a range");
        return 0;
      }
      u.ranges.emplace(p->base, UvmSpace::Range{p->length, true});
      p->rmStatus = NV_OK;
      return 0;
    }
    case UVM_MAP_EXTERNAL_ALLOCATION: {
      auto* p = static_cast<UVM_MAP_EXTERNAL_ALLOCATION_PARAMS*>(arg);
      if (needs_va_space(p->rmStatus, "UVM_MAP_EXTERNAL_ALLOCATION")) return 0;
      UvmSpace& u = uvm[fd];
      const std::string what = fmt::format("UVM_MAP_EXTERNAL_ALLOCATION of {:#x} at [{:#x}, +{:#x})", p->hMemory,
                                           p->base, p->length);
      if (unaligned_4k(p->base, p->length)) {
        p->rmStatus = refuse(NV_ERR_INVALID_ADDRESS, what + ": not whole 4 KiB pages");
        return 0;
      }
      if (p->gpuAttributesCount == 0 || p->gpuAttributesCount > UVM_MAX_GPUS) {
        p->rmStatus = refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: gpuAttributesCount {}", what,
                                                                  p->gpuAttributesCount));
        return 0;
      }
      auto range = u.ranges.upper_bound(p->base);
      if (range == u.ranges.begin() || !std::prev(range)->second.external ||
          std::prev(range)->first + std::prev(range)->second.length < p->base + p->length) {
        p->rmStatus = refuse(NV_ERR_INVALID_ADDRESS, what + ": not inside one external range");
        return 0;
      }
      bool writable = true;
      for (std::uint64_t i = 0; i < p->gpuAttributesCount; ++i) {
        const UvmGpuMappingAttributes& a = p->perGpuAttributes[i];
        if (a.gpuMappingType >= kUvmGpuMappingTypeCount || a.gpuCachingType >= kUvmGpuCachingTypeCount ||
            a.gpuFormatType != 0 || a.gpuElementBits != 0 || a.gpuCompressionType != 0) {
          p->rmStatus = refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: attributes {} (mapping type {}, caching type "
                                                                    "{}, format {}, element bits {}, compression {})",
                                                                    what, i, a.gpuMappingType, a.gpuCachingType,
                                                                    a.gpuFormatType, a.gpuElementBits,
                                                                    a.gpuCompressionType));
          return 0;
        }
        if (std::memcmp(a.gpuUuid, config.uuid.data(), kUuidBytes) != 0 || !u.space) {
          p->rmStatus = refuse(NV_ERR_INVALID_DEVICE, fmt::format("{}: GPU {} has no VA space registered", what,
                                                                  uuid_text(a.gpuUuid)));
          return 0;
        }
        writable = a.gpuMappingType != UvmGpuMappingTypeReadOnly;
      }
      auto ctl = files.find(p->rmCtrlFd);
      if (ctl == files.end() || ctl->second.node != Node::ctl) {
        p->rmStatus = refuse(NV_ERR_INVALID_ARGUMENT, fmt::format("{}: rmCtrlFd {} is no /dev/nvidiactl file", what,
                                                                  p->rmCtrlFd));
        return 0;
      }
      Object* mem = object(p->hClient, p->hMemory);
      if (!mem || !mem->memory ||
          (mem->klass != NV01_MEMORY_LOCAL_USER && mem->klass != NV01_MEMORY_SYSTEM &&
           mem->klass != NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)) {
        p->rmStatus = refuse(NV_ERR_OBJECT_NOT_FOUND, fmt::format("{}: client {:#x} has no memory {:#x}", what,
                                                                  p->hClient, p->hMemory));
        return 0;
      }
      if (p->offset % kPage || p->offset >= mem->memory->size || p->length > mem->memory->size - p->offset) {
        p->rmStatus = refuse(NV_ERR_INVALID_OFFSET, fmt::format("{}: offset {:#x} and length do not lie in its {:#x} "
                                                                "bytes", what, p->offset, mem->memory->size));
        return 0;
      }
      std::vector<std::shared_ptr<Backing>> gone;
      u.space->insert(p->base, VaSpace::Map{p->length, mem->memory, p->offset, writable}, gone);
      retire(u.space, std::move(gone));
      p->rmStatus = NV_OK;
      return 0;
    }
    case UVM_FREE: {
      auto* p = static_cast<UVM_FREE_PARAMS*>(arg);
      if (needs_va_space(p->rmStatus, "UVM_FREE")) return 0;
      UvmSpace& u = uvm[fd];
      auto range = u.ranges.find(p->base);
      if (range == u.ranges.end() || range->second.length != p->length || !range->second.external) {
        p->rmStatus = refuse(NV_ERR_INVALID_ADDRESS, fmt::format("UVM_FREE [{:#x}, +{:#x}): no external range is "
                                                                 "exactly that", p->base, p->length));
        return 0;
      }
      if (u.space) {
        std::vector<std::shared_ptr<Backing>> gone;
        u.space->erase(p->base, p->length, gone);
        retire(u.space, std::move(gone));
      }
      u.ranges.erase(range);
      p->rmStatus = NV_OK;
      return 0;
    }
  }
  return refuse_errno(-EINVAL, fmt::format("UVM ioctl {:#x} on file {}: not one UVM answers here", request, fd));
}

void Simulator::Impl::uvm_forget_channel(std::uint32_t client, std::uint32_t channel) {
  for (auto& [fd, u] : uvm)
    std::erase_if(u.ranges, [&](auto& r) { return !r.second.external && r.second.client == client && r.second.channel == channel; });
}

}  // namespace rig::sim::nv
