// Io devices: memory the host reads and writes through calls, as Buffer::of_io wraps it.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <map>
#include <mutex>

#include "../support/fake_driver.hpp"

using namespace rig;

namespace {

// An io library over regions of host memory, that counts its reads and writes.
class MemoryIo final : public edge::Io {
 public:
  static inline int key = 0;
  const void* region_key() const override { return &key; }
  edge::IoRegion alloc(std::size_t n) override {
    std::lock_guard g(m_);
    regions_[next_] = std::vector<std::byte>(n);
    return {next_++};
  }
  void free(edge::IoRegion r) override {
    std::lock_guard g(m_);
    regions_.erase(r.id);
  }
  void read(edge::IoRegion r, std::uint64_t at, std::span<std::byte> into) override {
    std::lock_guard g(m_);
    auto& bytes = regions_.at(r.id);
    if (at + into.size() > bytes.size()) throw std::runtime_error("read past the end of the region");
    std::copy_n(bytes.begin() + std::ptrdiff_t(at), into.size(), into.begin());
    ++reads;
  }
  void write(edge::IoRegion r, std::uint64_t at, std::span<const std::byte> from) override {
    std::lock_guard g(m_);
    auto& bytes = regions_.at(r.id);
    if (at + from.size() > bytes.size()) throw std::runtime_error("write past the end of the region");
    std::copy(from.begin(), from.end(), bytes.begin() + std::ptrdiff_t(at));
    ++writes;
  }
  std::optional<std::span<std::byte>> pages(edge::IoRegion) override { return std::nullopt; }
  void prefetch(edge::IoRegion, std::uint64_t, std::size_t) override {}
  void stop(std::string_view why) override { stopped = std::string(why); }
  std::size_t live() {
    std::lock_guard g(m_);
    return regions_.size();
  }

  int reads = 0, writes = 0;
  std::string stopped;

 private:
  std::mutex m_;
  std::map<std::uintptr_t, std::vector<std::byte>> regions_;
  std::uintptr_t next_ = 1;
};

struct Opened {
  Device device;
  MemoryIo* io;
};

Opened open_memory_io(std::string name) {
  MemoryIo* raw = nullptr;
  edge::IoOpener<MemoryIo> opener{name, [&]() -> Result<std::unique_ptr<MemoryIo>> {
                                    auto io = std::make_unique<MemoryIo>();
                                    raw = io.get();
                                    return io;
                                  }};
  return {*open_io(opener), raw};
}

std::string text(const Buffer& b) {
  std::string out(b.length(), '\0');
  b.blit_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

}  // namespace

TEST_CASE("an io device's memory is copied by the io device's reads and writes") {
  auto [io, lib] = open_memory_io("IO-1");
  CHECK(!io.computes());
  Buffer f = Buffer::of_io(io, lib->alloc(16), Access::ReadWrite, 16);
  CHECK(f.io(&MemoryIo::key));
  CHECK(!f.io(nullptr));
  CHECK(!f.host_address());
  f.blit_from(std::as_bytes(std::span("abcdefghijklmnop", 16)), 0);
  CHECK(lib->writes >= 1);
  CHECK(text(f) == "abcdefghijklmnop");
  CHECK(text(f.view(4, 4)) == "efgh");
  Buffer h = Buffer::create(host(), 8);
  Box box{2, 0, 2, 4, 4, 2};  // every other pair
  Buffer::submit_copy(f, h, std::span(&box, 1)).wait();
  CHECK(text(h) == "cdghklop");
  f.fill(std::byte{'z'});
  CHECK(text(f) == std::string(16, 'z'));
  CHECK(!f.free());  // outside the claims
  io.close();
  CHECK(lib->stopped == "closed");
}

TEST_CASE("copies between an io device and a device the host does not address pass through host memory") {
  auto [io, lib] = open_memory_io("IO-2");
  fake::Options o;
  o.host_addresses = false;
  auto [opener, control] = fake::opener("IO-VRAM", o);
  Device vram = *open(opener);
  Buffer f = Buffer::of_io(io, lib->alloc(64), Access::ReadWrite, 64);
  Buffer g = Buffer::of_io(io, lib->alloc(64), Access::ReadWrite, 64);
  std::string bytes(64, '\0');
  for (std::size_t i = 0; i < 64; ++i) bytes[i] = char('A' + i % 26);
  f.blit_from(std::as_bytes(std::span(bytes)), 0);
  Buffer v = Buffer::create(vram, 64);
  Buffer::copy(f, v);
  CHECK(text(v) == bytes);
  v.fill(std::byte{'#'});
  Buffer::copy(v, f);
  CHECK(text(f) == std::string(64, '#'));
  Buffer::copy(f, g);  // io to io
  CHECK(text(g) == std::string(64, '#'));
  CHECK(control->violations().empty());
  vram.close();
  io.close();
}

TEST_CASE("io memory is refused where the device is not an io device, and lost with it") {
  auto [io, lib] = open_memory_io("IO-3");
  CHECK_THROWS_WITH_AS(Buffer::of_io(host(), {1}, Access::Read, 4), doctest::Contains("not an io device"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(Buffer::create(io, 16), doctest::Contains("Buffer::of_io"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Image::load(io, {}), doctest::Contains("loads no code"), std::invalid_argument);
  Buffer f = Buffer::of_io(io, lib->alloc(8), Access::Read, 8);
  CHECK_THROWS_WITH_AS(f.fill(std::byte{1}), doctest::Contains("admits only Read"), std::invalid_argument);
  io.close();
  Buffer h = Buffer::create(host(), 8);
  CHECK_THROWS_WITH_AS(Buffer::copy(f, h), doctest::Contains("IO-3 lost: closed"), Lost);
}

TEST_CASE("an io region returns to its library once its buffers are gone") {
  auto [io, lib] = open_memory_io("IO-4");
  {
    Buffer f = Buffer::of_io(io, lib->alloc(8), Access::ReadWrite, 8);
    CHECK(lib->live() == 1);
  }
  CHECK(lib->live() == 0);
  io.close();
}
