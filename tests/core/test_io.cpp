// Io devices: memory the host reads and writes through calls, as Buffer::of_io wraps it.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <cstdlib>
#include <map>
#include <mutex>

#include "../support/fake_driver.hpp"
#include "../support/memory_io.hpp"

using namespace rig;

namespace {

using test::MemoryIo;

struct Opened {
  Device device;
  MemoryIo* io;
};

Opened open_memory_io(std::string name, bool pages = false) {
  MemoryIo* raw = nullptr;
  edge::IoOpener<MemoryIo> opener{name, [&]() -> Result<std::unique_ptr<MemoryIo>> {
                                    auto io = std::make_unique<MemoryIo>(pages);
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

TEST_CASE("a borrow of an io device's memory is its pages: the host reads and writes them in place") {
  auto [io, lib] = open_memory_io("IO-PAGES-1", true);
  Buffer f = Buffer::of_io(io, lib->alloc(64), Access::ReadWrite, 64);
  f.blit_from(std::as_bytes(std::span("0123456789abcdef", 16)), 0);
  auto on_host = Buffer::borrow(host(), f);
  REQUIRE(on_host);
  CHECK(on_host->is_borrowed());
  CHECK(on_host->device() == host());
  REQUIRE(on_host->host_address());
  CHECK(*on_host->host_address() % 4096 == 0);
  CHECK(!f.host_address());  // the io memory itself moves only through the io device
  on_host->read<char>([](auto bytes) { CHECK(std::string(bytes.data(), 16) == "0123456789abcdef"); });
  on_host->view(4, 4).write<char>([](auto bytes) { std::fill(bytes.begin(), bytes.end(), '#'); });
  CHECK(text(f).substr(0, 16) == "0123####89abcdef");  // the io device's read sees the pages
  // One mapping per device: a second borrow asks the io device for nothing more.
  const int asked = lib->pages_asked;
  auto again = Buffer::borrow(host(), f);
  REQUIRE(again);
  CHECK(*again->host_address() == *on_host->host_address());
  CHECK(lib->pages_asked == asked);
  io.close();
}

TEST_CASE("a borrow of an io device's pages on a device maps them; on another io device there is none") {
  auto [io, lib] = open_memory_io("IO-PAGES-2", true);
  auto [other, other_lib] = open_memory_io("IO-PAGES-2B", true);
  Buffer f = Buffer::of_io(io, lib->alloc(8192), Access::ReadWrite, 8192);
  Device m = memory_device("IO-PAGES-MEM");
  auto on_memory_device = Buffer::borrow(m, f);
  REQUIRE(on_memory_device);
  CHECK(on_memory_device->address() == reinterpret_cast<std::uintptr_t>(lib->pages(*f.io(&MemoryIo::key))->data()));
  auto [opener, control] = fake::opener("IO-PAGES-FAKE");
  Device fake = *open(opener);
  auto on_fake = Buffer::borrow(fake, f);
  REQUIRE(on_fake);
  CHECK(control->live_regions() >= 1);  // the fake's driver mapped the pages
  CHECK(!Buffer::borrow(other, f));
  // A borrow of the borrow maps the same memory.
  auto through = Buffer::borrow(host(), *on_memory_device);
  REQUIRE(through);
  CHECK(*through->host_address() == on_memory_device->address());
  CHECK(control->violations().empty());
  fake.close();
  m.close();
  other.close();
  io.close();
}

TEST_CASE("copies of io memory go through the io device, also through a borrow of its pages") {
  auto [io, lib] = open_memory_io("IO-PAGES-3", true);
  Buffer f = Buffer::of_io(io, lib->alloc(16), Access::ReadWrite, 16);
  f.blit_from(std::as_bytes(std::span("abcdefghijklmnop", 16)), 0);
  auto on_host = *Buffer::borrow(host(), f);
  Buffer h = Buffer::create(host(), 16);
  const int reads = lib->reads, writes = lib->writes;
  Buffer::copy(on_host, h);
  CHECK(text(h) == "abcdefghijklmnop");
  CHECK(lib->reads > reads);
  h.fill(std::byte{'x'});
  Buffer::copy(h, on_host);
  CHECK(lib->writes > writes);
  CHECK(text(f) == std::string(16, 'x'));
  CHECK_THROWS_AS(Buffer::copy(f, on_host), std::invalid_argument);  // io memory and a borrow of it
  io.close();
}

TEST_CASE("io memory whose device gives no pages, or read-only pages, is refused as the spec says") {
  auto [io, lib] = open_memory_io("IO-PAGES-4");
  Buffer f = Buffer::of_io(io, lib->alloc(16), Access::ReadWrite, 16);
  CHECK(!Buffer::borrow(host(), f));
  CHECK(lib->pages_asked == 1);
  io.close();
  auto [ro, ro_lib] = open_memory_io("IO-PAGES-5", true);
  Buffer r = Buffer::of_io(ro, ro_lib->alloc(16), Access::Read, 16);
  auto on_host = Buffer::borrow(host(), r);
  REQUIRE(on_host);
  CHECK(on_host->access() == Access::Read);
  CHECK_THROWS_WITH_AS(on_host->write<char>([](auto) {}), doctest::Contains("read-only"), std::invalid_argument);
  on_host->read<char>([](auto bytes) { CHECK(bytes[0] == 0); });
  ro.close();
  CHECK_THROWS_AS(Buffer::borrow(host(), r), Lost);
}
