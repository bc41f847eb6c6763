// fake_udmabuf.hpp — /dev/udmabuf behind the OS seam, for tests of the host memory's dma on
// machines whose kernel has none. Every other call goes to the real system.
//
// UDMABUF_CREATE is checked as the kernel's udmabuf.c checks it: flags only
// UDMABUF_FLAGS_CLOEXEC; a memfd sealed against shrinking (F_SEAL_SHRINK) and not against
// writes (F_SEAL_WRITE); offset and size whole pages, size not 0, inside the memfd and at
// most `size_limit` bytes (the module's size_limit_mb, 64 MiB unless set). It answers
// -EINVAL for each refusal, as the kernel does, and otherwise a new close-on-exec descriptor
// of the memfd's pages (a duplicate of the memfd, which mmap reads as a dma-buf's pages).
#pragma once

#include <rig/os.hpp>

#include <cerrno>
#include <cstring>
#include <string_view>

#include <fcntl.h>
#include <linux/udmabuf.h>
#include <sys/stat.h>
#include <unistd.h>

namespace rig::test {

class FakeUdmabuf final : public os::Seam {
 public:
  enum class Node { Present, Absent, Denied };
  Node node = Node::Present;
  std::uint64_t size_limit = std::uint64_t(64) << 20;
  int creates = 0;                   // UDMABUF_CREATE calls that made a dma-buf
  udmabuf_create last{};             // the last UDMABUF_CREATE asked for
  int open_fds = 0;                  // /dev/udmabuf descriptors not yet closed

  int open(const char* path, int flags) override {
    if (std::string_view(path) != "/dev/udmabuf") return os::system().open(path, flags);
    if (node == Node::Absent) return -ENOENT;
    if (node == Node::Denied) return -EACCES;
    ++open_fds;
    return kDeviceFd;
  }
  int close(int fd) override {
    if (fd != kDeviceFd) return os::system().close(fd);
    --open_fds;
    return 0;
  }
  int ioctl(int fd, unsigned long request, void* arg) override {
    if (fd != kDeviceFd) return os::system().ioctl(fd, request, arg);
    if (request != UDMABUF_CREATE) return -ENOTTY;
    last = *static_cast<const udmabuf_create*>(arg);
    const auto page = std::uint64_t(sysconf(_SC_PAGESIZE));
    if (last.flags & ~std::uint32_t(UDMABUF_FLAGS_CLOEXEC)) return -EINVAL;
    const int seals = fcntl(int(last.memfd), F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK) || (seals & F_SEAL_WRITE)) return -EINVAL;
    struct stat st{};
    if (fstat(int(last.memfd), &st) != 0) return -EBADF;
    if (last.size == 0 || last.size % page || last.offset % page) return -EINVAL;
    if (last.offset + last.size > std::uint64_t(st.st_size) || last.size > size_limit) return -EINVAL;
    const int dmabuf = fcntl(int(last.memfd), (last.flags & UDMABUF_FLAGS_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
    if (dmabuf < 0) return -errno;
    ++creates;
    return dmabuf;
  }
  std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags, int fd,
                                 off_t offset) override {
    return os::system().mmap(addr, length, prot, flags, fd, offset);
  }
  int munmap(void* addr, std::size_t length) override { return os::system().munmap(addr, length); }
  int poll(pollfd* fds, nfds_t count, int timeout_ms) override { return os::system().poll(fds, count, timeout_ms); }
  ssize_t read(int fd, void* buffer, std::size_t n) override { return os::system().read(fd, buffer, n); }
  int eventfd(unsigned initial, int flags) override { return os::system().eventfd(initial, flags); }

 private:
  static constexpr int kDeviceFd = 1 << 20;  // above any descriptor the process has
};

}  // namespace rig::test
