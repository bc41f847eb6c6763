// The seam bound to the real system calls (rig/os.hpp).
#include <rig/os.hpp>

#include <fmt/format.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>

#include <dirent.h>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace rig::os {
namespace {

// Runs a system call, retrying it while a signal interrupts it, and gives -errno on failure.
template <class Call>
auto retry(Call call, bool again = false) {
  for (;;) {
    auto r = call();
    if (r >= 0) return r;
    if (errno == EINTR || (again && errno == EAGAIN)) continue;
    return decltype(r)(-errno);
  }
}

class System final : public Seam {
 public:
  int open(const char* path, int flags) override {
    int saved = errno;
    int r = retry([&] { return ::open(path, flags | O_CLOEXEC); });
    errno = saved;
    return r;
  }
  int close(int fd) override {
    int saved = errno;
    // close(2) must not be retried on EINTR: the descriptor is gone either way.
    int r = ::close(fd) == 0 || errno == EINTR ? 0 : -errno;
    errno = saved;
    return r;
  }
  int ioctl(int fd, unsigned long request, void* arg) override {
    int saved = errno;
    int r = retry([&] { return ::ioctl(fd, request, arg); }, true);
    errno = saved;
    return r;
  }
  std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags, int fd,
                                 off_t offset) override {
    int saved = errno;
    void* p = ::mmap(addr, length, prot, flags, fd, offset);
    int error = errno;
    errno = saved;
    if (p == MAP_FAILED) return std::unexpected(-error);
    return p;
  }
  int munmap(void* addr, std::size_t length) override {
    int saved = errno;
    int r = ::munmap(addr, length) == 0 ? 0 : -errno;
    errno = saved;
    return r;
  }
  int poll(pollfd* fds, nfds_t count, int timeout_ms) override {
    int saved = errno;
    int r = retry([&] { return ::poll(fds, count, timeout_ms); });
    errno = saved;
    return r;
  }
  ssize_t read(int fd, void* buffer, std::size_t n) override {
    int saved = errno;
    ssize_t r = retry([&] { return ::read(fd, buffer, n); });
    errno = saved;
    return r;
  }
  int eventfd(unsigned initial, int flags) override {
    int saved = errno;
    int r = ::eventfd(initial, flags | EFD_CLOEXEC);
    if (r < 0) r = -errno;
    errno = saved;
    return r;
  }
  ssize_t pread(int fd, void* buffer, std::size_t n, off_t offset) override {
    int saved = errno;
    ssize_t r = retry([&] { return ::pread(fd, buffer, n, offset); });
    errno = saved;
    return r;
  }
  ssize_t pwrite(int fd, const void* buffer, std::size_t n, off_t offset) override {
    int saved = errno;
    ssize_t r = retry([&] { return ::pwrite(fd, buffer, n, offset); });
    errno = saved;
    return r;
  }
  std::expected<std::string, int> readlink(const char* path) override {
    int saved = errno;
    char target[PATH_MAX];
    ssize_t n = ::readlink(path, target, sizeof target);
    int error = errno;
    errno = saved;
    if (n < 0) return std::unexpected(-error);
    return std::string(target, std::size_t(n));
  }
  std::expected<std::vector<std::string>, int> list(const char* path) override {
    int saved = errno;
    DIR* folder = ::opendir(path);
    if (!folder) {
      int error = errno;
      errno = saved;
      return std::unexpected(-error);
    }
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(folder)) {
      std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(folder);
    errno = saved;
    return names;
  }
};

}  // namespace

ssize_t Seam::pread(int, void*, std::size_t, off_t) { return -ENOSYS; }
ssize_t Seam::pwrite(int, const void*, std::size_t, off_t) { return -ENOSYS; }
std::expected<std::string, int> Seam::readlink(const char*) { return std::unexpected(-ENOSYS); }
std::expected<std::vector<std::string>, int> Seam::list(const char*) { return std::unexpected(-ENOSYS); }

Seam& system() {
  static System* seam = new System;  // never destroyed: drivers may outlive static destruction
  return *seam;
}

std::string describe(int negative_errno) {
  if (negative_errno >= 0) return fmt::format("error {}", negative_errno);
  const char* name = strerrorname_np(-negative_errno);
  if (!name) return fmt::format("error {}", negative_errno);
  return fmt::format("{} ({})", name, strerrordesc_np(-negative_errno));
}

std::expected<std::string, int> read_text(Seam& seam, const char* path) {
  int fd = seam.open(path, O_RDONLY);
  if (fd < 0) return std::unexpected(fd);
  std::string text;
  char chunk[4096];
  for (;;) {
    ssize_t n = seam.read(fd, chunk, sizeof chunk);
    if (n < 0) {
      seam.close(fd);
      return std::unexpected(int(n));
    }
    if (n == 0) break;
    text.append(chunk, std::size_t(n));
  }
  seam.close(fd);
  return text;
}

}  // namespace rig::os
