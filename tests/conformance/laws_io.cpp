// laws_io.cpp — the laws of io devices (edge::Io: files and other memory the host reaches
// through calls), which run on targets that give io regions (Target::io_region), and the
// built-in io target over host memory.
#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "law.hpp"
#include "laws.hpp"
#include "memory_io.hpp"

namespace rig::conformance {
namespace detail {
namespace {

std::vector<std::byte> as_bytes(const std::vector<std::uint8_t>& v) {
  auto b = std::as_bytes(std::span(v));
  return {b.begin(), b.end()};
}

// A region of the io device holding `contents`, admitting `access`.
Buffer region(Context& c, const Device& io, const std::vector<std::uint8_t>& contents,
              Access access = Access::ReadWrite) {
  Buffer b = c.target.io_region(io, as_bytes(contents), access);
  require(b.device() == io, "the target's region is on {}, not on {}", b.device().name(), io.name());
  require(b.length() == contents.size(), "the target's region holds {} bytes, not {}", b.length(), contents.size());
  return b;
}

// The sizes and offsets the copies try: empty, single bytes, around a block, several MiB
// chunks' edges, and random ones.
std::vector<std::pair<std::size_t, std::size_t>> spans_to_try(std::size_t length, std::mt19937_64& rng) {
  std::vector<std::pair<std::size_t, std::size_t>> out{{0, 0}, {0, 1}, {1, 1}, {4095, 2}, {0, 4096}, {512, 4096},
                                                       {4096, 4097}, {0, length}, {1, length - 1}};
  const int random = std::max(2, int(8 * scale()));
  for (int i = 0; i < random; ++i) {
    std::size_t at = rng() % length;
    out.push_back({at, rng() % (length - at + 1)});
  }
  return out;
}

// A fake device whose memory the host does not address, with its work running on its own:
// copies between it and io memory pass through staging memory.
struct Vram {
  Device device;
  Opened held;
  Clock clock;
  static Vram open(Context& c) {
    auto [d, control] = c.held_fake({.host_addresses = false});
    Opened o(d);
    o.step = [control = control](std::size_t n) { return control->step(n); };
    return Vram{d, o, Clock({o})};
  }
};

}  // namespace

void io_facts_are_well_formed(Context& c) {
  Device io = c.device().device;
  require(!io.computes(), "an io device computes: computes() is true");
  require(io.queues().empty(), "an io device lists {} queues", io.queues().size());
  require(!io.runs_on_host(), "an io device says its work runs on the host");
  expect_throw<std::invalid_argument>("Buffer::create on an io device", [&] { Buffer::create(io, 16); });
  expect_throw<std::invalid_argument>("Image::load on an io device", [&] { (void)Image::load(io, {}); });
  Buffer f = region(c, io, pattern(64, 1));
  require(!f.host_address(), "its memory has a host address: the host must reach it only through the io device");
  expect_throw<std::invalid_argument>("host access to its memory", [&] { f.read<std::uint8_t>([](auto) {}); });
  require(f.access() == Access::ReadWrite, "a ReadWrite region admits only Read");
}

void io_copies_are_the_identity(Context& c) {
  Device io = c.device().device;
  std::mt19937_64 rng(11);
  const std::size_t length = (std::size_t(3) << 20) + 4099;  // several chunks and a tail
  const auto original = pattern(length, 2);
  Buffer f = region(c, io, original);
  Buffer other = region(c, io, std::vector<std::uint8_t>(length, 0));
  Device mem = c.memory();
  Vram vram = Vram::open(c);
  struct Side {
    std::string name;
    Buffer buffer;
  };
  std::vector<Side> sides{{"host memory", Buffer::create(host(), length)},
                          {"a memory device's memory", Buffer::create(mem, length)},
                          {"memory the host does not address (through staging)", Buffer::create(vram.device, length)},
                          {"another region of the io device", other}};
  for (auto& side : sides) {
    for (auto [at, n] : spans_to_try(length, rng)) {
      const std::size_t to = rng() % (length - n + 1);
      auto in = f.view(at, n);
      auto out = side.buffer.view(to, n);
      Buffer::copy(in, out);
      std::vector<std::uint8_t> want(original.begin() + std::ptrdiff_t(at), original.begin() + std::ptrdiff_t(at + n));
      expect_bytes(out, want, fmt::format("{} bytes at {} of the io memory copied into {} at {}", n, at, side.name, to));
      // And back, into a region of the io device that held something else.
      const auto fresh = pattern(n, rng());
      put(out, fresh);
      Buffer back = other.view(rng() % (length - n + 1), n);
      if (side.buffer.allocation() == other.allocation()) back = f.view(at, n);
      Buffer::copy(out, back);
      expect_bytes(back, fresh, fmt::format("{} bytes copied from {} into the io memory", n, side.name));
      if (back.allocation() == f.allocation()) put(back, want);  // f stays the original
    }
  }
  expect_bytes(f, original, "the io memory after copies out of it and its restorations");
}

void io_fills_and_blits_write_exactly_their_bytes(Context& c) {
  Device io = c.device().device;
  const std::size_t length = 3 * 4096 + 17;
  auto expected = pattern(length, 3);
  Buffer f = region(c, io, expected);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 12; ++i) {
    std::size_t at = rng() % length, n = rng() % (length - at + 1);
    if (i % 2) {
      auto byte = std::uint8_t(rng());
      f.view(at, n).fill(std::byte{byte});
      std::fill_n(expected.begin() + std::ptrdiff_t(at), n, byte);
    } else {
      auto bytes = pattern(n, rng());
      f.blit_from(std::as_bytes(std::span(bytes)), at);
      std::copy(bytes.begin(), bytes.end(), expected.begin() + std::ptrdiff_t(at));
    }
    expect_bytes(f, expected, fmt::format("the io memory after step {} ({} bytes at {})", i, n, at));
  }
}

void io_read_only_memory_refuses_writes(Context& c) {
  Device io = c.device().device;
  const auto contents = pattern(8192, 4);
  Buffer r = region(c, io, contents, Access::Read);
  require(r.access() == Access::Read, "a region opened Read admits {}", r.access() == Access::ReadWrite ? "ReadWrite" : "?");
  Buffer h = Buffer::create(host(), 8192);
  expect_throw<std::invalid_argument>("a copy into read-only io memory", [&] { Buffer::copy(h, r); });
  expect_throw<std::invalid_argument>("a fill of read-only io memory", [&] { r.fill(std::byte{1}); });
  expect_throw<std::invalid_argument>("a blit into read-only io memory",
                                      [&] { r.blit_from(std::as_bytes(std::span("x", 1)), 0); });
  if (auto on_host = Buffer::borrow(host(), r))
    expect_throw<std::invalid_argument>("a host write through a borrow of read-only io memory",
                                        [&] { on_host->write<std::uint8_t>([](auto) {}); });
  Buffer::copy(r, h);
  expect_bytes(h, contents, "read-only io memory copied out after the refusals");
}

void io_a_reader_sees_the_last_writer(Context& c) {
  Device io = c.device().device;
  const std::size_t n = 1 << 20;
  Buffer f = region(c, io, std::vector<std::uint8_t>(n, 0));
  Vram vram = Vram::open(c);
  Buffer v = Buffer::create(vram.device, n);
  Buffer h = Buffer::create(host(), n);
  for (int round = 0; round < 4; ++round) {
    const auto first = pattern(n, 100 + round), second = pattern(n, 200 + round);
    // A device's write, then a copy of it into the io memory that must wait for it.
    put(h, first);
    const Box row = Box::row(n);
    Point p = Buffer::submit_copy(h, v, std::span(&row, 1));
    Buffer::submit_copy(v, f, std::span(&row, 1), std::span(&p, 1));
    put(h, second);  // waits for the copy that reads h
    Buffer::copy(f, h);
    expect_bytes(h, first, fmt::format("round {}: the io memory after a device's copy into it", round));
    // The io device's write, then a device's read of it.
    put(h, second);
    Buffer::copy(h, f);
    Buffer::copy(f, v);
    Buffer out = Buffer::create(host(), n);
    Buffer::copy(v, out);
    expect_bytes(out, second, fmt::format("round {}: a device's copy of the io memory after the host's", round));
  }
}

void io_concurrent_copies_keep_every_byte(Context& c) {
  Device io = c.device().device;
  const std::size_t part = 256 * 1024;
  const int threads = 4;
  Buffer f = region(c, io, std::vector<std::uint8_t>(part * threads, 0));
  std::vector<std::string> errors(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      try {
        Buffer mine = f.view(std::size_t(t) * part, part);
        Buffer h = Buffer::create(host(), part);
        for (int i = 0; i < std::max(2, int(10 * scale())); ++i) {
          auto bytes = pattern(part, std::uint64_t(t) * 1000 + std::uint64_t(i));
          put(h, bytes);
          Buffer::copy(h, mine);
          Buffer back = Buffer::create(host(), part);
          Buffer::copy(mine, back);
          if (get(back) != bytes) {
            errors[std::size_t(t)] = fmt::format("thread {} round {}: its part of the io memory changed", t, i);
            return;
          }
        }
      } catch (const std::exception& e) {
        errors[std::size_t(t)] = fmt::format("thread {}: {}", t, e.what());
      }
    });
  for (auto& w : workers) w.join();
  for (const auto& e : errors) require(e.empty(), "{}", e);
}

void io_a_borrow_is_its_pages(Context& c) {
  Device io = c.device().device;
  const auto contents = pattern(3 * 4096 + 5, 6);
  Buffer f = region(c, io, contents);
  auto on_host = Buffer::borrow(host(), f);
  if (!on_host) skip("its regions give no pages (edge::Io::pages), so nothing borrows them");
  require(on_host->host_address().has_value(), "a borrow of its memory on the host has no host address");
  on_host->read<std::uint8_t>([&](auto bytes) {
    require(std::equal(bytes.begin(), bytes.end(), contents.begin(), contents.end()),
            "the borrowed pages differ from the bytes the region was made with");
  });
  on_host->view(10, 4).write<std::uint8_t>([](auto bytes) { std::fill(bytes.begin(), bytes.end(), 0xEE); });
  auto expected = contents;
  std::fill_n(expected.begin() + 10, 4, 0xEE);
  expect_bytes(f, expected, "the io memory read through the io device after a write in place through a borrow");
  Device mem = c.memory();
  auto on_memory_device = Buffer::borrow(mem, f);
  require(on_memory_device.has_value(), "a memory device does not borrow pages the host borrows");
  require(on_memory_device->address() == *on_host->host_address(),
          "a memory device's borrow of the pages is at {:#x}, the host's at {:#x}", on_memory_device->address(),
          *on_host->host_address());
}

void io_close_loses_it_and_returns_its_memory(Context& c) {
  Opened o = c.fresh();
  Device io = o.device;
  const std::size_t before = o.live_bytes ? o.live_bytes() : 0;
  {
    Buffer f = region(c, io, pattern(4096, 7));
    Buffer h = Buffer::create(host(), 4096);
    io.close();
    require(io.lost() == std::optional<std::string>("closed"), "after close, lost() is {}",
            io.lost().value_or("nullopt"));
    auto what = expect_throw<Lost>("a copy out of a closed io device's memory", [&] { Buffer::copy(f, h); });
    require(what.find("lost: closed") != std::string::npos, "the Lost says \"{}\", not \"… lost: closed\"", what);
    expect_throw<Lost>("a borrow of a closed io device's memory", [&] { (void)Buffer::borrow(host(), f); });
    io.close();  // a second close does nothing
  }
  if (!o.live_bytes) {
    c.note("the target counts no io memory (Opened::live_bytes): its return was not checked");
    return;
  }
  require(o.live_bytes() <= before, "after close and its buffers went, the io device holds {} bytes, not {}",
          o.live_bytes(), before);
}

void io_memory_returns_once_its_buffers_go(Context& c) {
  Opened o = c.fresh();
  if (!o.live_bytes) skip("the target counts no io memory (Opened::live_bytes)");
  const std::size_t before = o.live_bytes();
  {
    Buffer f = region(c, o.device, pattern(3 * 4096, 8));
    Buffer v = f.view(100, 100);
    require(o.live_bytes() >= before + 3 * 4096, "a region of {} bytes counts {} more bytes", 3 * 4096,
            o.live_bytes() - before);
    auto on_host = Buffer::borrow(host(), f);
    Buffer h = Buffer::create(host(), 100);
    Buffer::copy(v, h);
  }
  require(o.live_bytes() == before, "once its buffers went, the io device holds {} bytes, not {}", o.live_bytes(),
          before);
}

}  // namespace detail

namespace {

// The built-in io target's devices, by name, for its regions.
std::mutex memory_ios_mutex;
std::map<std::string, test::MemoryIo*, std::less<>> memory_ios;

}  // namespace

Target memory_io_target() {
  Target t;
  t.name = "IO-MEM";
  t.about = "an io device over regions of host memory that gives their pages to borrows";
  t.open = [](const Wrap&) {
    test::MemoryIo* made = nullptr;
    std::string name = detail::unique("IO-MEM");
    edge::IoOpener<test::MemoryIo> opener{name, [&]() -> Result<std::unique_ptr<test::MemoryIo>> {
                                            auto io = std::make_unique<test::MemoryIo>(true);
                                            made = io.get();
                                            return io;
                                          }};
    auto d = open_io(opener);
    if (!d) throw std::runtime_error(fmt::format("cannot open: {}", d.error()));
    {
      std::lock_guard g(memory_ios_mutex);
      memory_ios[name] = made;  // lives while the process does: rig keeps the handle
    }
    Opened o(*d);
    o.live_bytes = [made] { return made->live_bytes(); };
    return o;
  };
  t.io_region = [](const Device& d, std::span<const std::byte> contents, Access access) {
    test::MemoryIo* io;
    {
      std::lock_guard g(memory_ios_mutex);
      io = memory_ios.at(std::string(d.name()));
    }
    auto r = io->alloc(contents.size());
    io->write(r, 0, contents);
    return Buffer::of_io(d, r, access, contents.size());
  };
  return t;
}

}  // namespace rig::conformance
