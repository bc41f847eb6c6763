// laws_memory.cpp — the laws of facts, refusals, memory and copies.
#include <bit>
#include <regex>
#include <set>

#include "laws.hpp"

namespace rig::conformance::detail {

namespace {

std::string_view memory_name(Memory m) {
  switch (m) {
    case Memory::Device: return "Device";
    case Memory::Pinned: return "Pinned";
    case Memory::Mapped: return "Mapped";
  }
  return "?";
}

// The memory kinds a program may ask of d: Pinned only where the host does not address its
// memory.
std::vector<Memory> memory_kinds(const Device& d) {
  std::vector<Memory> out{Memory::Device, Memory::Mapped};
  if (!d.facts().host_addresses) out.push_back(Memory::Pinned);
  return out;
}

std::vector<std::byte> bytes_of(std::string_view s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

// The first n bytes of b: b itself where it has no more.
Buffer head(const Buffer& b, std::size_t n) { return n == b.length() ? b : b.view(0, n); }

// A round trip through d's memory and, where it has a copy engine, a copy on it: the device
// is usable.
void usable(const Device& d, std::string_view after, std::uint64_t seed) {
  require(!d.lost(), "after {} the device is lost: {}", after, d.lost().value_or(""));
  Buffer a = Buffer::create(d, 4096);
  auto bytes = pattern(4096, seed);
  put(a, bytes);
  if (d.facts().copy_engine) {
    Buffer b = Buffer::create(d, 4096);
    go(copy_submission(d, a, b)).wait();
    expect_bytes(b, bytes, fmt::format("a copy on the device after {}", after));
  } else {
    expect_bytes(a, bytes, fmt::format("a round trip through its memory after {}", after));
  }
}

}  // namespace

void facts_are_well_formed(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  const edge::Facts& f = d.facts();
  std::vector<std::string> wrong;
  auto bad = [&](std::string s) { wrong.push_back(std::move(s)); };

  if (d.name().empty()) bad("its name is empty");
  if (d.computes() != !f.queues.empty()) bad("computes() disagrees with its queues");
  if (std::vector<Queue>(d.queues().begin(), d.queues().end()) != f.queues) bad("queues() differs from its facts");
  std::set<std::string> names;
  for (std::size_t i = 0; i < f.queues.size(); ++i) {
    const auto& q = f.queues[i];
    if (q.name.empty()) bad(fmt::format("queue {} has no name", i));
    if (!names.insert(q.name).second) bad(fmt::format("two queues are named {}", q.name));
    if (q.runs.empty()) bad(fmt::format("queue {} runs nothing", q.name));
    std::set<Kind> kinds;
    for (Kind k : q.runs) {
      if (std::uint32_t(k) < 1 || std::uint32_t(k) > 4) bad(fmt::format("queue {} runs kind {}", q.name, std::uint32_t(k)));
      if (!kinds.insert(k).second) bad(fmt::format("queue {} lists kind {} twice", q.name, std::uint32_t(k)));
    }
  }
  if (f.copy_engine) {
    int i = *f.copy_engine;
    if (i < 0 || std::size_t(i) >= f.queues.size())
      bad(fmt::format("its copy engine {} names no queue", i));
    else if (std::find(f.queues[std::size_t(i)].runs.begin(), f.queues[std::size_t(i)].runs.end(), Kind::Copy) ==
             f.queues[std::size_t(i)].runs.end())
      bad(fmt::format("its copy engine {} runs no Copy", f.queues[std::size_t(i)].name));
  }
  if (d.computes() && f.budget == 0) bad("its budget is 0");
  if (!std::has_single_bit(f.alignment)) bad(fmt::format("its alignment {} is not a power of two", f.alignment));
  if (f.hang_ms && *f.hang_ms < 1) bad(fmt::format("its hang_ms {} is below 1", *f.hang_ms));
  if (f.cache_bytes && *f.cache_bytes < 1) bad("its cache_bytes is 0");
  if (d.cache_bytes() != f.cache_bytes) bad("cache_bytes() differs from its facts");
  for (const auto& [name, n] : f.counters) {
    if (name.empty()) bad("a counter has no name");
    if (n < 1) bad(fmt::format("counter {} has {} values", name, n));
  }
  if (runs(d, Kind::Launch) && f.arch.empty()) bad("it runs launches, but its arch is empty");
  if (d.arch() != f.arch) bad("arch() differs from its facts");
  if (!f.edge) {
    bad("its edge is null");
  } else if (const rig_driver* table = *static_cast<const rig_driver* const*>(f.edge); !table) {
    bad("its edge's first member is null");
  } else {
    if (!table->room || !table->submit || !table->commit) bad("its driver table lacks room, submit or commit");
    if (f.counters.empty() != (table->measures == nullptr))
      bad(fmt::format("its measures is {} but its facts list {} counters", table->measures ? "set" : "NULL",
                      f.counters.size()));
  }
  if (f.bus && !std::regex_match(*f.bus, std::regex("[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]")))
    bad(fmt::format("its bus address {} is not of the form 0000:03:00.0", *f.bus));
  if (std::uint64_t s = d.signaled(); s > d.submitted())
    bad(fmt::format("its word shows {}, past the {} values submitted", s, d.submitted()));
  // Its memory keeps the facts: every region on the alignment, and addressed by the host
  // where it says so.
  if (d.computes()) {
    for (Memory m : memory_kinds(d))
      for (std::size_t n : {std::size_t(1), std::size_t(100), std::size_t(4096), std::size_t(65536 + 8)}) {
        Buffer b = Buffer::create(d, n, m);
        if (!b.aligned(0, std::min<std::size_t>(f.alignment, 4096)))
          bad(fmt::format("a region of {} bytes of {} memory lies off its alignment of {}", n, memory_name(m),
                          f.alignment));
        if (f.host_addresses && !b.host_address())
          bad(fmt::format("a region of {} memory has no host address, though its facts say host_addresses",
                          memory_name(m)));
      }
  }
  if (!wrong.empty()) {
    std::string all;
    for (auto& w : wrong) all += (all.empty() ? "" : "; ") + w;
    fail("{}", all);
  }
}

// Refusals of one device: each raises E naming the device, and leaves it usable.
struct Refusals {
  Device d;
  std::string name;
  std::uint64_t seed = 100;
  void names(std::string_view what, const std::string& message) const {
    require(message.find(name) != std::string::npos, "{}: the message does not name the device: {}", what, message);
  }
  template <class E, class F>
  void expect(std::string_view what, F&& f) {
    names(what, expect_throw<E>(what, std::forward<F>(f)));
    usable(d, what, seed++);
  }
};

void refusals_leave_the_device_usable(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  Refusals refused{d, std::string(d.name())};
  auto names = [&](std::string_view what, const std::string& message) { refused.names(what, message); };
  std::uint64_t& seed = refused.seed;

  refused.expect<OutOfMemory>("an allocation over its budget",
                              [&] { Buffer::create(d, d.budget() + (std::size_t(1) << 20)); });
  if (d.facts().host_addresses)
    refused.expect<std::invalid_argument>("Pinned memory of a device whose memory the host addresses",
                                          [&] { Buffer::create(d, 64, Memory::Pinned); });
  refused.expect<std::invalid_argument>("a submission of no parts", [&] {
    Submission::make(d, std::span<const Submission::Part>{}, 0, 0);
  });
  refused.expect<std::invalid_argument>("a wait for a value not yet submitted", [&] { d.wait(d.submitted() + 1); });
  Buffer a = Buffer::create(d, 256), b = Buffer::create(d, 256), small = Buffer::create(d, 128);
  refused.expect<std::invalid_argument>("a view past the buffer's bytes", [&] { a.view(200, 100); });
  refused.expect<std::invalid_argument>("a copy between buffers of different lengths",
                                                     [&] { Buffer::copy(a, small); });
  refused.expect<std::invalid_argument>("a copy whose ends share bytes", [&] {
    Box row = Box::row(128);
    Buffer::submit_copy(a.view(0, 128), a.view(64, 128), std::span(&row, 1));
  });
  refused.expect<std::invalid_argument>("a copy with a box past its ends", [&] {
    Box box{0, 0, 200, 2, 200, 200};
    Buffer::submit_copy(a, b, std::span(&box, 1));
  });
  if (!runs(d, Kind::Words)) {
    refused.expect<std::invalid_argument>("a part of a kind no queue runs (Words)", [&] {
      Submission::Part part{"", {}, Submission::Words{Buffer::of_string("abcd")}};
      Submission::make(d, std::span(&part, 1), 0, 0);
    });
  }
  if (d.facts().copy_engine) {
    refused.expect<std::invalid_argument>("a part on a queue the device does not have",
                                                       [&] { copy_submission(d, a, b, "NO-SUCH-QUEUE:9"); });
    Device m = c.memory();
    refused.expect<std::invalid_argument>("a wait for another device's value not yet submitted", [&] {
      Point future(m, m.submitted() + 1);
      go(copy_submission(d, a, b), std::span(&future, 1));
    });
    // A submission of many parts: it runs, or the queues can never hold it and it is refused.
    const int parts = 3000;
    std::vector<Submission::Part> many;
    for (int i = 0; i < parts; ++i)
      many.push_back({"", {}, Submission::Copy{{std::nullopt, 0}, {b, 0}, {Box::row(256)}, std::byte(i % 251)}});
    std::pair<Buffer, Access> fixed[] = {{b, Access::ReadWrite}};
    try {
      Point p = go(Submission::make(d, many, 0, 0, fixed));
      p.wait();
      expect_all(b, std::uint8_t((parts - 1) % 251), "a submission of 3000 fills the device took");
      c.note("it runs a submission of 3000 parts");
    } catch (const std::invalid_argument& e) {
      names("a submission of 3000 parts", e.what());
      c.note("it refuses a submission of 3000 parts");
    } catch (const OutOfMemory& e) {
      names("a submission of 3000 parts", e.what());
      c.note("it has no memory to grow its queues for 3000 parts");
    }
    usable(d, "a submission of 3000 parts", seed++);
  }
  // A binary it does not take is an Error, not an exception, and the device goes on.
  if (d.computes()) {
    auto image = Image::load(d, bytes_of("\x7fnot a binary of any device"));
    require(!image, "Image::load took a binary of no device");
    names("a binary it does not take", image.error());
    usable(d, "a binary it does not take", seed++);
  }
  if (!c.target.image.empty()) {
    auto image = Image::load(d, c.target.image);
    require(bool(image), "the target's image did not load: {}", image ? "" : image.error());
    require(!image->resolve("conformance_no_such_function"), "resolve found a function the image lacks");
    require(bool(image->resolve(c.target.function)), "resolve did not find {} in the target's image", c.target.function);
    usable(d, "a resolve of a function the image lacks", seed++);
  }
}

void copies_are_the_identity(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  if (!d.computes()) skip("it is an io device");
  Device m = c.memory();
  std::optional<Opened> other;
  if (c.target.open) other = c.fresh();
  // A byte, a page and a byte, several pages, and at the full scale megabytes; on a target
  // whose copies are slow, the larger sizes only where it copies them in about a quarter of a
  // second (copy_size): every memory kind is still crossed, by copies of more than one page.
  std::vector<std::size_t> sizes{1, 4097};
  const std::size_t several = (64 << 10) + 13, megabytes = (std::size_t(3) << 20) + 5;
  if (copy_size(c, several) == several) sizes.push_back(several);
  if (scale() >= 1 && copy_size(c, megabytes) == megabytes) sizes.push_back(megabytes);
  std::uint64_t seed = 1;
  for (Memory kind : memory_kinds(d))
    for (std::size_t n : sizes) {
      const std::string what = fmt::format("{} bytes of {} memory", n, memory_name(kind));
      Buffer a = Buffer::create(d, n, kind);
      auto p = pattern(n, seed++);
      put(a, p);
      expect_bytes(a, p, fmt::format("{}: from the host and back", what));
      for (Memory kind2 : memory_kinds(d)) {
        Buffer b = Buffer::create(d, n, kind2);
        Buffer::copy(a, b);
        expect_bytes(b, p, fmt::format("{}: into {} memory of the device", what, memory_name(kind2)));
      }
      Buffer h = Buffer::create(host(), n);
      Buffer::copy(a, h);
      expect_bytes(h, p, fmt::format("{}: into a host buffer", what));
      p = pattern(n, seed++);
      put(h, p);
      Buffer::copy(h, a);
      expect_bytes(a, p, fmt::format("{}: from a host buffer", what));
      Buffer mb = Buffer::create(m, n);
      Buffer::copy(a, mb);
      expect_bytes(mb, p, fmt::format("{}: into a memory device's buffer", what));
      p = pattern(n, seed++);
      put(mb, p);
      Buffer::copy(mb, a);
      expect_bytes(a, p, fmt::format("{}: from a memory device's buffer", what));
      if (other) {
        // Staged copies between two devices: one's queue waits for the other's value.
        Clock clock({o, *other});
        Buffer ob = Buffer::create(other->device, n, kind);
        Buffer::copy(a, ob);
        expect_bytes(ob, p, fmt::format("{}: into another device of its driver", what));
        p = pattern(n, seed++);
        put(ob, p);
        Buffer::copy(ob, a);
        expect_bytes(a, p, fmt::format("{}: from another device of its driver", what));
      }
    }
  // Rows with pitches, between two of its buffers and between it and the host.
  const std::size_t rows = 20, width = 50, sp = 64, dp = 70, so = 3, dof = 5;
  auto src_bytes = pattern(sp * rows + 16, seed++);
  auto dst_bytes = pattern(dp * rows + 16, seed++);
  auto expected = dst_bytes;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < width; ++i) expected[dof + r * dp + i] = src_bytes[so + r * sp + i];
  Box box{so, dof, width, rows, sp, dp};
  for (bool to_host : {false, true}) {
    Buffer s = Buffer::create(d, src_bytes.size());
    Buffer t = Buffer::create(to_host ? host() : d, dst_bytes.size());
    put(s, src_bytes);
    put(t, dst_bytes);
    Buffer::submit_copy(s, t, std::span(&box, 1)).wait();
    expect_bytes(t, expected, fmt::format("a copy of {} rows of {} bytes with pitches {}", rows, width,
                                          to_host ? "into a host buffer" : "on the device"));
  }
  // Views at odd offsets, and a fill of a view (in the first 4096 bytes, so that buffers of
  // copy_size hold them).
  const std::size_t length = copy_size(c, 8192);
  Buffer big = Buffer::create(d, length), big2 = Buffer::create(d, length);
  auto bytes = pattern(length, seed++);
  put(big, bytes);
  put(big2, std::vector<std::uint8_t>(length, 0));
  Buffer::copy(big.view(7, 1000), big2.view(3001, 1000));
  std::vector<std::uint8_t> want(length, 0);
  std::copy(bytes.begin() + 7, bytes.begin() + 1007, want.begin() + 3001);
  expect_bytes(big2, want, "a copy between views at odd offsets");
  big2.view(11, 333).fill(std::byte{0x5a});
  std::fill(want.begin() + 11, want.begin() + 344, 0x5a);
  expect_bytes(big2, want, "a fill of a view");
}

void a_reader_sees_the_last_writer(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  need_copy_engine(d);
  const std::size_t n = copy_size(c, 64 << 10);
  Buffer a = Buffer::create(d, n), b = Buffer::create(d, n), h = Buffer::create(host(), n);
  Device m = c.memory();
  Buffer mb = Buffer::create(m, n), mb2 = Buffer::create(m, n);
  auto borrowed = Buffer::borrow(d, mb);  // m's memory, read by d's work
  auto a_on_m = Buffer::borrow(m, a);     // d's memory, read by m's work
  const int rounds = std::max(3, int(10 * scale()));
  for (int r = 1; r <= rounds; ++r) {
    const auto x = std::uint8_t(3 * r), y = std::uint8_t(3 * r + 1), z = std::uint8_t(3 * r + 2);
    // The host writes, the device copies, the host reads.
    put(a, std::vector<std::uint8_t>(n, x));
    go(copy_submission(d, a, b));
    expect_all(b, x, fmt::format("round {}: a host read after the device copied the host's write", r));
    // The device writes, the host copies out.
    go(fill_submission(d, a, y));
    Buffer::copy(a, h);
    expect_all(h, y, fmt::format("round {}: a host copy after the device's fill", r));
    // The device reads, then the host writes: the device read the earlier bytes.
    go(copy_submission(d, a, b));
    put(a, std::vector<std::uint8_t>(n, z));
    expect_all(b, y, fmt::format("round {}: a device copy followed by a host write of its source", r));
    // Another device writes, this device reads through a borrow.
    if (borrowed) {
      go(fill_submission(m, mb, x));
      go(copy_submission(d, *borrowed, b));
      expect_all(b, x, fmt::format("round {}: the device's copy of a memory device's fill", r));
    }
    // This device writes, another device reads through a borrow.
    if (a_on_m) {
      go(fill_submission(d, a, z));
      go(copy_submission(m, *a_on_m, mb2));
      expect_all(mb2, z, fmt::format("round {}: a memory device's copy of the device's fill", r));
    }
  }
  if (!borrowed) c.note("it cannot borrow a memory device's memory: that part did not run");
  if (!a_on_m) c.note("a memory device cannot borrow its memory: that part did not run");
}

void memory_returns_once_its_stamps_allow(Context& c) {
  Opened o = c.fresh();
  if (!o.live_bytes) skip("the target gives no count of its driver's memory (Opened::live_bytes)");
  Device d = o.device;
  const std::size_t base = o.live_bytes();
  {
    std::vector<Buffer> keep;
    for (std::size_t n : {std::size_t(64), std::size_t(4096), std::size_t(100000), std::size_t(1) << 20})
      for (Memory kind : memory_kinds(d)) {
        Buffer b = Buffer::create(d, n, kind);
        // Its bytes written, or on a target whose copies are slow its first copy_size(n):
        // the work stamps its allocation either way.
        Buffer written = head(b, copy_size(c, n));
        put(written, pattern(written.length(), n));
        keep.push_back(b);
        keep.push_back(b.view(n / 2, n / 2));
      }
    Buffer h = Buffer::create(host(), 1 << 20);
    if (auto borrowed = Buffer::borrow(d, h)) keep.push_back(*borrowed);
    if (d.facts().copy_engine)
      for (std::size_t i = 0; i + 2 < keep.size(); i += 2)
        if (const std::size_t n = keep[i].length(); n == keep[i + 2].length())
          go(copy_submission(d, head(keep[i], copy_size(c, n)), head(keep[i + 2], copy_size(c, n))));
  }
  d.wait(d.submitted());
  d.free_cache();
  require(o.live_bytes() == base, "after every buffer went and its work was done, its driver holds {} bytes, not {}",
          o.live_bytes(), base);
  // Memory that unreached work uses does not return early: seen where the work waits to be
  // stepped, or where the target's copies are so slow that the check comes before the copy
  // is done.
  if ((o.step || c.target.copy_bytes_per_second) && d.facts().copy_engine) {
    const std::size_t n = copy_size(c, 1 << 20);
    Point p;
    {
      Buffer a = Buffer::create(d, n), b = Buffer::create(d, n);
      p = go(copy_submission(d, a, b));
    }
    d.free_cache();
    // Counted first: a copy not reached after the count was not reached during it.
    const std::size_t held = o.live_bytes();
    if (!p.reached())
      require(held > base, "the memory of work not yet done returned to the driver before the work ran");
    else
      c.note("the copy was done before its memory was counted: its return before the work was not tried");
    require(settle(o, p, copy_limit(c, n)), "the copy did not complete");
    d.free_cache();
    require(o.live_bytes() == base, "after its work was done, its driver holds {} bytes, not {}", o.live_bytes(), base);
  }
}

void no_room_is_not_a_fault(Context& c) {
  auto [o, fc] = c.faulty();
  Device d = o.device;
  fc->no_room_nth(faulty::Call::Alloc, fc->calls(faulty::Call::Alloc) + 1);
  Buffer a = Buffer::create(d, 12345);
  require(fc->injected(faulty::Call::Alloc) == 1, "an allocation did not ask its driver");
  require(!d.lost(), "an allocation its driver had no room for lost the device: {}", d.lost().value_or(""));
  put(a, pattern(12345, 7));
  expect_bytes(a, pattern(12345, 7), "an allocation made after its driver had no room");
  if (d.facts().maps_host) {
    Buffer h = Buffer::create(host(), 1 << 20);
    fc->no_room_nth(faulty::Call::Map, fc->calls(faulty::Call::Map) + 1);
    auto borrowed = Buffer::borrow(d, h);
    require(!d.lost(), "a borrow its driver had no room for lost the device: {}", d.lost().value_or(""));
    if (fc->injected(faulty::Call::Map)) require(bool(borrowed), "a borrow was refused after one answer of no room");
  }
  if (!c.target.image.empty()) {
    auto image = Image::load(d, c.target.image);
    require(bool(image), "the target's image did not load: {}", image ? "" : image.error());
    fc->no_room_nth(faulty::Call::Entry, fc->calls(faulty::Call::Entry) + 1);
    require(bool(image->resolve(c.target.function)), "resolve failed after one answer of no memory");
    require(!d.lost(), "an entry its driver had no memory for lost the device");
  }
  usable(d, "answers of no room", 9);
}

}  // namespace rig::conformance::detail
