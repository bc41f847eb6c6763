// The kernel driver's calls (rm.hpp).
#include "rm.hpp"

#include <fmt/format.h>

namespace rig::nv::driver {

std::string status_name(std::uint32_t status) {
  // nvstatuscodes.h: the codes the driver's calls meet.
  const char* name = nullptr;
  switch (status) {
    case 0x00: name = "NV_OK"; break;
    case 0x12: name = "NV_ERR_GPU_UUID_NOT_FOUND"; break;
    case 0x16: name = "NV_ERR_ILLEGAL_ACTION"; break;
    case 0x17: name = "NV_ERR_IN_USE"; break;
    case 0x1A: name = "NV_ERR_INSUFFICIENT_RESOURCES"; break;
    case 0x1E: name = "NV_ERR_INVALID_ADDRESS"; break;
    case 0x1F: name = "NV_ERR_INVALID_ARGUMENT"; break;
    case 0x22: name = "NV_ERR_INVALID_CLASS"; break;
    case 0x23: name = "NV_ERR_INVALID_CLIENT"; break;
    case 0x26: name = "NV_ERR_INVALID_DEVICE"; break;
    case 0x31: name = "NV_ERR_INVALID_OBJECT"; break;
    case 0x33: name = "NV_ERR_INVALID_OBJECT_HANDLE"; break;
    case 0x36: name = "NV_ERR_INVALID_OBJECT_PARENT"; break;
    case 0x3A: name = "NV_ERR_INVALID_PARAM_STRUCT"; break;
    case 0x40: name = "NV_ERR_INVALID_STATE"; break;
    case 0x51: name = "NV_ERR_NO_MEMORY"; break;
    case 0x56: name = "NV_ERR_NOT_SUPPORTED"; break;
    case 0x57: name = "NV_ERR_OBJECT_NOT_FOUND"; break;
    case 0x59: name = "NV_ERR_OPERATING_SYSTEM"; break;
    case 0x68: name = "NV_ERR_UVM_ADDRESS_IN_USE"; break;
    case 0xFFFF: name = "NV_ERR_GENERIC"; break;
  }
  return name ? fmt::format("{} ({:#x})", name, status) : fmt::format("status {:#x}", status);
}

Result<std::uint32_t> Rm::escape(int fd, unsigned nr, void* arg, std::size_t size, const char* what) {
  const int r = seam_.ioctl(fd, driver::escape(nr, size), arg);
  if (r < 0) return std::unexpected(fmt::format("{}: the ioctl failed: {}", what, os::describe(r)));
  return std::uint32_t(r);
}

Result<std::uint32_t> Rm::alloc(std::uint32_t parent, std::uint32_t klass, void* params, std::size_t size,
                                const char* what) {
  Nvos21 a{root, parent, 0, klass, reinterpret_cast<std::uint64_t>(params), std::uint32_t(size), ~0u};
  if (auto r = escape(ctl, kEscAlloc, &a, sizeof a, what); !r) return std::unexpected(r.error());
  if (a.status != kOk)
    return std::unexpected(fmt::format("{} (class {:#x}): RM refused it with {}", what, klass, status_name(a.status)));
  return a.hObjectNew;
}

Result<void> Rm::control(std::uint32_t object, std::uint32_t cmd, void* params, std::size_t size, const char* what) {
  Nvos54 c{root, object, cmd, 0, reinterpret_cast<std::uint64_t>(params), std::uint32_t(size), ~0u};
  if (auto r = escape(ctl, kEscControl, &c, sizeof c, what); !r) return std::unexpected(r.error());
  if (c.status != kOk)
    return std::unexpected(fmt::format("{} (control {:#x}): RM refused it with {}", what, cmd, status_name(c.status)));
  return {};
}

std::uint32_t Rm::free(std::uint32_t handle) {
  Nvos00 f{root, 0, handle, ~0u};
  if (seam_.ioctl(ctl, driver::escape(kEscFree, sizeof f), &f) < 0) return ~0u;
  return f.status;
}

Result<void> Rm::uvm_call(unsigned long request, void* arg, std::uint32_t* status, const char* what, int fd) {
  const int r = seam_.ioctl(fd < 0 ? uvm : fd, request, arg);
  if (r < 0) return std::unexpected(fmt::format("{}: the ioctl failed: {}", what, os::describe(r)));
  if (*status != kOk) return std::unexpected(fmt::format("{}: UVM refused it with {}", what, status_name(*status)));
  return {};
}

}  // namespace rig::nv::driver
