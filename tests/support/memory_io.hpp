// memory_io.hpp — an io library over regions of host memory, for tests: what an io device
// (edge::Io) is without a file system. It counts its calls, and with `pages` gives each
// region's page-aligned memory to borrows, as a file's mmap would.
#pragma once

#include <rig/edge.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace rig::test {

class MemoryIo final : public edge::Io {
 public:
  explicit MemoryIo(bool pages = false) : give_pages_(pages) {}
  static inline int key = 0;
  const void* region_key() const override { return &key; }
  edge::IoRegion alloc(std::size_t n) override {
    std::lock_guard g(m_);
    const std::size_t rounded = (n + 4095) / 4096 * 4096 + 4096;
    auto* bytes = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
    if (!bytes) throw std::bad_alloc();
    std::fill_n(bytes, rounded, std::byte{0});
    regions_.emplace(next_, Region{std::unique_ptr<std::byte, Free>(bytes), n});
    live_bytes_ += n;
    return {next_++};
  }
  void free(edge::IoRegion r) override {
    std::lock_guard g(m_);
    if (auto it = regions_.find(r.id); it != regions_.end()) {
      live_bytes_ -= it->second.n;
      regions_.erase(it);
    }
  }
  void read(edge::IoRegion r, std::uint64_t at, std::span<std::byte> into) override {
    std::lock_guard g(m_);
    auto bytes = region(r);
    if (at > bytes.size() || into.size() > bytes.size() - at) throw std::runtime_error("read past the end of the region");
    std::copy_n(bytes.begin() + std::ptrdiff_t(at), into.size(), into.begin());
    ++reads;
  }
  void write(edge::IoRegion r, std::uint64_t at, std::span<const std::byte> from) override {
    std::lock_guard g(m_);
    auto bytes = region(r);
    if (at > bytes.size() || from.size() > bytes.size() - at) throw std::runtime_error("write past the end of the region");
    std::copy(from.begin(), from.end(), bytes.begin() + std::ptrdiff_t(at));
    ++writes;
  }
  std::optional<std::span<std::byte>> pages(edge::IoRegion r) override {
    std::lock_guard g(m_);
    ++pages_asked;
    if (!give_pages_) return std::nullopt;
    return region(r);
  }
  void prefetch(edge::IoRegion, std::uint64_t, std::size_t) override {}
  void stop(std::string_view why) override {
    std::lock_guard g(m_);
    stopped = std::string(why);
  }
  // Regions made and not freed, and their bytes.
  std::size_t live() {
    std::lock_guard g(m_);
    return regions_.size();
  }
  std::size_t live_bytes() {
    std::lock_guard g(m_);
    return live_bytes_;
  }

  int reads = 0, writes = 0, pages_asked = 0;
  std::string stopped;

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  struct Region {
    std::unique_ptr<std::byte, Free> bytes;
    std::size_t n;
  };
  std::span<std::byte> region(edge::IoRegion r) {
    auto it = regions_.find(r.id);
    if (it == regions_.end()) throw std::invalid_argument("no such io region");
    return {it->second.bytes.get(), it->second.n};
  }

  bool give_pages_;
  std::mutex m_;
  std::map<std::uintptr_t, Region> regions_;
  std::size_t live_bytes_ = 0;
  std::uintptr_t next_ = 1;
};

}  // namespace rig::test
