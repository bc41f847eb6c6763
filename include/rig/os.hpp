// os.hpp — the seam through which drivers reach the operating system.
//
// A driver that opens device files, issues ioctls or maps device memory does it through a
// Seam and never calls open/ioctl/mmap itself (DESIGN.md, "Drivers talk to the OS through a
// seam"). Production passes os::system(), which makes the real system calls; tests pass a
// simulator (tests/sim/) that implements the same kernel interface in process, so the driver
// code under test is exactly the production code. The seam knows nothing of any vendor.
//
// Errors: every call returns a negative errno on failure (-ENOENT, -EINVAL, ...), as the
// kernel does, and never throws; errno is left as it was. Calls interrupted by a signal
// (EINTR) are retried inside the seam, so callers never see -EINTR. describe() turns a
// negative errno into words for a message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <vector>

#include <poll.h>
#include <sys/types.h>

namespace rig::os {

class Seam {
 public:
  virtual ~Seam() = default;

  // Opens `path` with open(2) `flags` (O_CLOEXEC is always added). Returns the file
  // descriptor, or -errno (-ENOENT when the file does not exist).
  virtual int open(const char* path, int flags) = 0;
  // Closes `fd`. Returns 0, or -errno (-EBADF for a descriptor the seam did not open).
  virtual int close(int fd) = 0;
  // Issues ioctl(2) `request` on `fd` with `arg`, which the call may read and write.
  // Returns the ioctl's non-negative result, or -errno. EINTR and EAGAIN are retried.
  virtual int ioctl(int fd, unsigned long request, void* arg) = 0;
  // Maps `length` bytes as mmap(2) does: `fd` -1 with MAP_ANONYMOUS maps process memory,
  // else the file's bytes from `offset`. Returns the address, or the unexpected -errno.
  virtual std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags,
                                         int fd, off_t offset) = 0;
  // Unmaps [addr, addr + length) as munmap(2). Returns 0, or -errno.
  virtual int munmap(void* addr, std::size_t length) = 0;
  // Waits as poll(2) for events on `fds` for at most `timeout_ms` (-1: no limit). Returns
  // how many descriptors are ready (0 when the time ran out), or -errno.
  virtual int poll(pollfd* fds, nfds_t count, int timeout_ms) = 0;
  // Reads at most `n` bytes of `fd` at its position into `buffer`, as read(2). Returns the
  // bytes read (0 at the end), or -errno.
  virtual ssize_t read(int fd, void* buffer, std::size_t n) = 0;
  // A new eventfd(2) counter starting at `initial`, with EFD_* `flags` (EFD_CLOEXEC is always
  // added). Returns its descriptor, or -errno.
  virtual int eventfd(unsigned initial, int flags) = 0;

  // The calls below came later (for VFIO: config space at a region's offset, sysfs links and
  // folders). A seam that does not implement one answers -ENOSYS.

  // Reads at most `n` bytes of `fd` at `offset` into `buffer`, as pread(2). Returns the bytes
  // read, or -errno.
  virtual ssize_t pread(int fd, void* buffer, std::size_t n, off_t offset);
  // Writes `n` bytes of `buffer` to `fd` at `offset`, as pwrite(2). Returns the bytes written,
  // or -errno.
  virtual ssize_t pwrite(int fd, const void* buffer, std::size_t n, off_t offset);
  // The target of the symbolic link at `path`, as readlink(2), or the unexpected -errno
  // (-ENOENT when there is no such link, -EINVAL when `path` is not a link).
  virtual std::expected<std::string, int> readlink(const char* path);
  // The names in the folder at `path`, without "." and "..", in no particular order, or the
  // unexpected -errno (-ENOENT when there is no such folder).
  virtual std::expected<std::vector<std::string>, int> list(const char* path);
};

// The seam bound to the real system calls. It lives for the whole process.
Seam& system();

// A negative errno in words: describe(-ENOENT) is "ENOENT (No such file or directory)".
// A value that is not a negative errno reads "error N".
std::string describe(int negative_errno);

// The whole content of the file at `path` (such as a sysfs attribute), read through `seam`,
// or the unexpected -errno of the first call that failed.
std::expected<std::string, int> read_text(Seam& seam, const char* path);

}  // namespace rig::os
