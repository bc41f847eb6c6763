// The trace of the calls rig's NVIDIA driver makes of the kernel driver (rig/nv.hpp's
// TracingSeam): each call and its answer, with RM's or UVM's status read from the escape's or
// the ioctl's struct by rm.hpp's layouts.
#include <rig/nv.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "rm.hpp"

namespace rig::nv {
namespace {

using namespace driver;

// The 32-bit status at `offset` of the struct at `arg`, named.
std::string status_at(const void* arg, std::size_t offset) {
  std::uint32_t status;
  std::memcpy(&status, static_cast<const std::byte*>(arg) + offset, sizeof status);
  return status_name(status);
}

// An escape (_IOWR('F', nr, size)) in words: its name, what it names and RM's status.
std::string describe_escape(unsigned nr, std::size_t size, const void* arg, bool answered) {
  auto with = [&](std::string what, std::size_t status_offset) {
    return answered ? what + ": " + status_at(arg, status_offset) : what;
  };
  switch (nr) {
    case kEscAlloc: {
      Nvos21 a;
      std::memcpy(&a, arg, sizeof a);
      return with(fmt::format("RM_ALLOC class {:#x} under {:#x} -> {:#x}", a.hClass, a.hObjectParent, a.hObjectNew),
                  size == sizeof(Nvos21) ? offsetof(Nvos21, status) : size - 4);
    }
    case kEscControl: {
      Nvos54 c;
      std::memcpy(&c, arg, sizeof c);
      return with(fmt::format("RM_CONTROL {:#x} on {:#x} ({} bytes)", c.cmd, c.hObject, c.paramsSize),
                  offsetof(Nvos54, status));
    }
    case kEscFree: {
      Nvos00 f;
      std::memcpy(&f, arg, sizeof f);
      return with(fmt::format("RM_FREE {:#x}", f.hObjectOld), offsetof(Nvos00, status));
    }
    case kEscAllocMemory: return with("RM_ALLOC_MEMORY", offsetof(Nvos02WithFd, status));
    case kEscMapMemory: return with("RM_MAP_MEMORY", offsetof(Nvos33WithFd, status));
    case kEscUnmapMemory: return with("RM_UNMAP_MEMORY", offsetof(Nvos34, status));
    case kEscAllocOsEvent: return with("ALLOC_OS_EVENT", offsetof(OsEventParams, status));
    case kEscFreeOsEvent: return with("FREE_OS_EVENT", offsetof(OsEventParams, status));
    case kEscEventData: return with("GET_EVENT_DATA", offsetof(EventDataParams, status));
    case kEscCardInfo: return "CARD_INFO";
    case kEscRegisterFd: return "REGISTER_FD";
    case kEscCheckVersion: return "CHECK_VERSION_STR";
  }
  return fmt::format("escape {:#x} ({} bytes)", nr, size);
}

// A UVM ioctl in words, with UVM's status (rmStatus).
std::string describe_uvm(unsigned long request, const void* arg, bool answered) {
  auto with = [&](const char* what, std::size_t status_offset) {
    return answered ? fmt::format("{}: {}", what, status_at(arg, status_offset)) : std::string(what);
  };
  switch (request) {
    case kUvmInitialize: return with("UVM_INITIALIZE", offsetof(UvmInitialize, rmStatus));
    case kUvmMmInitialize: return with("UVM_MM_INITIALIZE", offsetof(UvmMmInitialize, rmStatus));
    case kUvmRegisterGpu: return with("UVM_REGISTER_GPU", offsetof(UvmRegisterGpu, rmStatus));
    case kUvmRegisterGpuVaSpace: return with("UVM_REGISTER_GPU_VASPACE", offsetof(UvmRegisterVaSpace, rmStatus));
    case kUvmRegisterChannel: return with("UVM_REGISTER_CHANNEL", offsetof(UvmRegisterChannel, rmStatus));
    case kUvmUnregisterChannel: return with("UVM_UNREGISTER_CHANNEL", offsetof(UvmUnregisterChannel, rmStatus));
    case kUvmCreateRange: return with("UVM_CREATE_EXTERNAL_RANGE", offsetof(UvmRange, rmStatus));
    case kUvmFree: return with("UVM_FREE", offsetof(UvmRange, rmStatus));
    case kUvmMapExternal: return with("UVM_MAP_EXTERNAL_ALLOCATION", offsetof(UvmMapExternal, rmStatus));
  }
  return fmt::format("UVM ioctl {:#x}", request);
}

}  // namespace

TracingSeam::TracingSeam(os::Seam& inner, const std::string& path)
    : inner_(inner), out_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}

TracingSeam::~TracingSeam() {
  if (out_ >= 0) ::close(out_);
}

std::string TracingSeam::describe(int fd, unsigned long request, const void* arg, int result) const {
  std::string path;
  {
    std::lock_guard g(lock_);
    auto it = paths_.find(fd);
    path = it != paths_.end() ? it->second : "?";
  }
  const bool answered = result >= 0 && arg;
  std::string what;
  if (path == "/dev/nvidia-uvm") what = describe_uvm(request, arg, answered);
  else if (((request >> 8) & 0xff) == 'F' && arg) what = describe_escape(unsigned(request & 0xff), (request >> 16) & 0x3fff, arg, answered);
  else what = fmt::format("request {:#x}", request);
  return fmt::format("ioctl {} ({}) {} -> {}", fd, path, what, result >= 0 ? std::to_string(result) : os::describe(result));
}

void TracingSeam::note(const std::string& line) {
  std::lock_guard g(lock_);
  lines_.push_back(line);
  if (lines_.size() > kKept) lines_.erase(lines_.begin(), lines_.begin() + long(lines_.size() - kKept));
  if (out_ >= 0) {
    const std::string text = line + "\n";
    [[maybe_unused]] ssize_t ignored = ::write(out_, text.data(), text.size());
  }
}

std::vector<std::string> TracingSeam::lines() const {
  std::lock_guard g(lock_);
  return lines_;
}

int TracingSeam::open(const char* path, int flags) {
  const int fd = inner_.open(path, flags);
  {
    std::lock_guard g(lock_);
    if (fd >= 0) paths_[fd] = path;
  }
  note(fmt::format("open {} -> {}", path, fd >= 0 ? std::to_string(fd) : os::describe(fd)));
  return fd;
}

int TracingSeam::close(int fd) {
  const int r = inner_.close(fd);
  {
    std::lock_guard g(lock_);
    paths_.erase(fd);
  }
  note(fmt::format("close {} -> {}", fd, r));
  return r;
}

int TracingSeam::ioctl(int fd, unsigned long request, void* arg) {
  const int r = inner_.ioctl(fd, request, arg);
  note(describe(fd, request, arg, r));
  return r;
}

std::expected<void*, int> TracingSeam::mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) {
  auto r = inner_.mmap(addr, length, prot, flags, fd, offset);
  note(fmt::format("mmap {} bytes of {} at offset {:#x} -> {}", length, fd, offset,
                   r ? fmt::format("{}", *r) : os::describe(r.error())));
  return r;
}

int TracingSeam::munmap(void* addr, std::size_t length) {
  const int r = inner_.munmap(addr, length);
  note(fmt::format("munmap {} bytes at {} -> {}", length, addr, r));
  return r;
}

int TracingSeam::poll(pollfd* fds, nfds_t count, int timeout_ms) { return inner_.poll(fds, count, timeout_ms); }
ssize_t TracingSeam::read(int fd, void* buffer, std::size_t n) { return inner_.read(fd, buffer, n); }
int TracingSeam::eventfd(unsigned initial, int flags) { return inner_.eventfd(initial, flags); }

}  // namespace rig::nv
