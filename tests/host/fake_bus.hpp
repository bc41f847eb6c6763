// fake_bus.hpp — the files host memory's dma reads to give bus addresses, behind the OS seam:
// /proc/self/smaps, /proc/self/pagemap and a PCI function's sysfs links and IOMMU group type,
// answered from what a test sets. Every other call goes to `inner` (FakeUdmabuf, or the
// system), so one region can be tried both ways.
#pragma once

#include <rig/os.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

namespace rig::test {

class FakeBus final : public os::Seam {
 public:
  explicit FakeBus(os::Seam& inner) : inner_(inner) {}
  std::map<std::string, std::string> files;  // path -> contents
  std::map<std::string, std::string> links;  // path -> target
  // /proc/self/pagemap, while `pagemap` is set: its 8-byte entries by page number (absent
  // pages read as 0: not present).
  bool pagemap = true;
  std::map<std::uint64_t, std::uint64_t> entries;
  int pagemap_reads = 0;

  // Sets pagemap's entries for the pages from `address`: present, one a frame (0: no frame
  // number, as the kernel shows a process without CAP_SYS_ADMIN).
  void frames(std::uintptr_t address, std::initializer_list<std::uint64_t> frames) {
    std::uint64_t page = address / 4096;
    for (std::uint64_t f : frames) entries[page++] = (1ull << 63) | f;
  }

  int open(const char* path, int flags) override {
    if (std::string_view(path) == kPagemap) {
      if (!pagemap) return -ENOENT;
      open_[next_] = {kPagemap, 0};
      return next_++;
    }
    auto it = files.find(path);
    if (it == files.end()) return std::string_view(path).starts_with("/sys/") ? -ENOENT : inner_.open(path, flags);
    open_[next_] = {it->first, 0};
    return next_++;
  }
  int close(int fd) override { return open_.erase(fd) ? 0 : inner_.close(fd); }
  ssize_t read(int fd, void* buffer, std::size_t n) override {
    auto it = open_.find(fd);
    if (it == open_.end()) return inner_.read(fd, buffer, n);
    const std::string& text = files.at(it->second.path);
    const std::size_t k = std::min(n, text.size() - std::min(text.size(), it->second.at));
    std::memcpy(buffer, text.data() + it->second.at, k);
    it->second.at += k;
    return ssize_t(k);
  }
  ssize_t pread(int fd, void* buffer, std::size_t n, off_t offset) override {
    auto it = open_.find(fd);
    if (it == open_.end()) return inner_.pread(fd, buffer, n, offset);
    if (it->second.path != kPagemap || offset % 8 || n % 8) return -EINVAL;
    ++pagemap_reads;
    auto* out = static_cast<std::uint64_t*>(buffer);
    for (std::size_t i = 0; i < n / 8; ++i) {
      auto e = entries.find(std::uint64_t(offset) / 8 + i);
      out[i] = e == entries.end() ? 0 : e->second;
    }
    return ssize_t(n);
  }
  std::expected<std::string, int> readlink(const char* path) override {
    auto it = links.find(path);
    if (it != links.end()) return it->second;
    return std::unexpected(-ENOENT);
  }
  int ioctl(int fd, unsigned long request, void* arg) override { return inner_.ioctl(fd, request, arg); }
  std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags, int fd,
                                 off_t offset) override {
    return inner_.mmap(addr, length, prot, flags, fd, offset);
  }
  int munmap(void* addr, std::size_t length) override { return inner_.munmap(addr, length); }
  int poll(pollfd* fds, nfds_t count, int timeout_ms) override { return inner_.poll(fds, count, timeout_ms); }
  int eventfd(unsigned initial, int flags) override { return inner_.eventfd(initial, flags); }

 private:
  static constexpr const char* kPagemap = "/proc/self/pagemap";
  struct Open {
    std::string path;
    std::size_t at;
  };
  os::Seam& inner_;
  std::map<int, Open> open_;
  int next_ = 1 << 21;  // above any descriptor the process has
};

}  // namespace rig::test
