// Buffers: one test per promise of spec/Rig.Buffer.txt that rig keeps so far.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <atomic>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include <unistd.h>

#include "../support/fake_driver.hpp"
#include "support.hpp"

using namespace rig;
using Part = Submission::Part;

namespace {
std::string unique(std::string_view base) {
  static std::atomic<int> n{0};
  return std::string(base) + "-b" + std::to_string(n++);
}

std::vector<std::uint8_t> bytes_of(const Buffer& b) {
  std::vector<std::uint8_t> out(b.length());
  b.blit_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

void set_bytes(Buffer& b, std::uint8_t seed) {
  std::vector<std::uint8_t> in(b.length());
  std::iota(in.begin(), in.end(), seed);
  b.blit_from(std::as_bytes(std::span(in)), 0);
}

// A fake device whose memory the host does not address: copies to and from it stage.
std::pair<Device, std::shared_ptr<fake::Control>> open_vram(fake::Options o) {
  o.host_addresses = false;
  auto [opener, c] = fake::opener(unique("VRAM"), o);
  return {*open(opener), c};
}
struct Vram {
  Device device;
  std::shared_ptr<fake::Control> control;
  explicit Vram(fake::Options o = {}) : Vram(open_vram(o)) {}
  explicit Vram(std::pair<Device, std::shared_ptr<fake::Control>> p) : device(p.first), control(p.second) {}
  ~Vram() {
    CHECK(control->violations().empty());
    device.close();
  }
};
}  // namespace

TEST_CASE("create: host buffers start on a page from 64 KiB and four pages, on 128 bytes from 128") {
  Device cpu = host();
  CHECK(*Buffer::create(cpu, 64 << 10).host_address() % 4096 == 0);
  CHECK(*Buffer::create(cpu, 1 << 20).host_address() % 4096 == 0);
  CHECK(*Buffer::create(cpu, 128).host_address() % 128 == 0);
  CHECK(*Buffer::create(cpu, 5000).host_address() % 128 == 0);
  Buffer empty = Buffer::create(cpu, 0);
  CHECK(empty.length() == 0);
  empty.read<std::uint32_t>([](auto xs) { CHECK(xs.empty()); });
}

TEST_CASE("create refuses Pinned memory on a device whose memory the host addresses") {
  CHECK_THROWS_WITH_AS(Buffer::create(host(), 64, Memory::Pinned), doctest::Contains("CPU: Pinned memory"),
                       std::invalid_argument);
  // Mapped falls back to the device's own memory there.
  Buffer m = Buffer::create(host(), 64, Memory::Mapped);
  CHECK(m.host_address());
}

TEST_CASE("of_string copies its bytes; of_host wraps them without a copy") {
  Buffer s = Buffer::of_string("hello");
  CHECK(s.device() == host());
  CHECK(!s.is_borrowed());
  auto got = bytes_of(s);
  CHECK(std::string(got.begin(), got.end()) == "hello");
  auto storage = std::make_shared<std::vector<std::byte>>(16, std::byte{9});
  Buffer w = Buffer::of_host(*storage, storage);
  CHECK(*w.host_address() == reinterpret_cast<std::uintptr_t>(storage->data()));
  CHECK(w.is_borrowed());
  CHECK(!w.free());  // outside the claims
  w.write<std::uint8_t>([](auto b) { b[0] = 1; });
  CHECK((*storage)[0] == std::byte{1});
}

TEST_CASE("a view shares its memory and stamps, and refuses bytes outside its buffer") {
  Buffer b = Buffer::create(host(), 256);
  Buffer v = b.view(16, 32);
  CHECK(v.length() == 32);
  CHECK(*v.host_address() == *b.host_address() + 16);
  CHECK(v.overlaps(b));
  CHECK(!v.overlaps(b.view(48, 16)));
  CHECK(!v.spans());
  CHECK(b.spans());
  CHECK(b.view(0, 256).spans());
  CHECK_THROWS_WITH_AS(b.view(200, 100), doctest::Contains("a view of bytes 200..300 of a buffer of 256 bytes"),
                       std::invalid_argument);
  CHECK_THROWS_AS(v.view(33, 0), std::invalid_argument);
}

TEST_CASE("free: every buffer over the memory is dead with the reason; false where it cannot") {
  Buffer b = Buffer::create(host(), 256);
  Buffer v = b.view(0, 8);
  CHECK(!v.free());  // does not span its memory
  claim::read(b);
  CHECK(!b.free());  // another claim holds it
  claim::release(b);
  CHECK(b.free("moved into the model"));
  CHECK(b.dead() == std::optional<std::string>("moved into the model"));
  CHECK(v.dead() == std::optional<std::string>("moved into the model"));
  CHECK_THROWS_WITH_AS(v.read<std::uint8_t>([](auto) {}), doctest::Contains("dead buffer (moved into the model)"),
                       std::invalid_argument);
  CHECK_THROWS_AS(b.free(), std::invalid_argument);
}

TEST_CASE("borrow: a device maps host memory once per allocation, and the mapping goes after its work") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.runs_when_asleep = false});
  Device d = *open(opener);
  Buffer h = Buffer::create(host(), 1 << 20);
  CHECK(Buffer::borrow(host(), h) == h);  // on its own device: itself
  std::size_t before = control->live_regions();
  auto b1 = Buffer::borrow(d, h);
  REQUIRE(b1);
  CHECK(b1->device() == d);
  CHECK(b1->is_borrowed());
  CHECK(b1->address() == *h.host_address());
  auto b2 = Buffer::borrow(d, h.view(4096, 4096));
  REQUIRE(b2);
  CHECK(b2->address() == *h.host_address() + 4096);
  CHECK(control->live_regions() == before + 1);  // one mapping, shared
  CHECK(reaches(d, host()));
  // Work through the borrow is ordered as work on the memory.
  Part fill{"", {}, Submission::Copy{{std::nullopt, 0}, {*b1, 0}, {Box::row(16)}, std::byte{5}}};
  auto s = Submission::make(d, std::span(&fill, 1), 0, 0, std::vector{std::pair{*b1, Access::ReadWrite}});
  Run run;
  Point p = submit(s, run, {}, {});
  CHECK(!h.reached(Access::Read));
  b1.reset();
  b2.reset();
  s = Submission::make(d, std::span(&fill, 1), 0, 0, std::vector{std::pair{*Buffer::borrow(d, h), Access::Read}});
  control->step();
  h.read<std::uint8_t>([](auto bytes) { CHECK(bytes[15] == 5); });
  CHECK(p.reached());
  d.close();
}

TEST_CASE("borrow is nullopt where the device cannot map the memory") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  auto storage = std::make_shared<std::vector<std::byte>>(8192);
  const auto start = reinterpret_cast<std::uintptr_t>(storage->data());
  const std::size_t off_page = start % 4096 ? 0 : 256;
  Buffer small = Buffer::of_host(std::span(*storage).subspan(off_page, 256), storage);
  CHECK(!Buffer::borrow(d, small));  // host memory off a page
  Device m = memory_device(unique("MEM"));
  Buffer mine = Buffer::create(d, 64);
  auto on_memory_device = Buffer::borrow(m, mine);  // a host-run device reaches host-addressed memory
  REQUIRE(on_memory_device);
  CHECK(on_memory_device->address() == *mine.host_address());
  m.close();
  d.close();
}

TEST_CASE("unborrow ends a borrow unless a claim keeps it; the memory lives on") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  Buffer h = Buffer::create(host(), 1 << 16);
  auto b = *Buffer::borrow(d, h);
  CHECK_THROWS_WITH_AS(h.unborrow(), doctest::Contains("not a borrow"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(b.view(0, 16).unborrow(), doctest::Contains("a view of part"), std::invalid_argument);
  claim::read(b);
  CHECK(!b.unborrow());
  claim::release(b);
  CHECK(b.unborrow("done with it"));
  CHECK(b.dead() == std::optional<std::string>("done with it"));
  CHECK(!h.dead());
  h.fill(std::byte{1});
  d.close();
}

TEST_CASE("host copies follow boxes with pitches, and a byte two boxes write holds the later box's") {
  Buffer src = Buffer::of_string("abcdefghijklmnop");
  Buffer dst = Buffer::create(host(), 16);
  dst.fill(std::byte{'.'});
  Box boxes[] = {{0, 0, 2, 3, 4, 5}, {8, 1, 2, 1, 2, 2}};  // rows "ab","ef","ij" at 0,5,10; then "ij" at 1
  Point p = Buffer::submit_copy(src, dst, boxes);
  CHECK(p.reached());
  auto got = bytes_of(dst);
  CHECK(std::string(got.begin(), got.end()) == "aij..ef...ij....");
}

TEST_CASE("copies refuse bad input, change no byte, and leave the devices usable") {
  Buffer a = Buffer::of_string("0123456789");
  Buffer b = Buffer::of_string("abcdefghij");
  auto refuses = [&](const Buffer& s, const Buffer& d, std::vector<Box> boxes, std::string_view why,
                      bool look = true) {
    CAPTURE(why);
    auto before = look ? bytes_of(d) : std::vector<std::uint8_t>{};
    CHECK_THROWS_WITH_AS(Buffer::submit_copy(s, d, boxes), doctest::Contains(std::string(why).c_str()), std::invalid_argument);
    if (look) CHECK(bytes_of(d) == before);
  };
  refuses(a, b, {Box::row(11)}, "does not fit");
  refuses(a, b, {{0, 0, 4, 2, 3, 4}}, "pitch is below its width");
  refuses(a, a.view(2, 4), {Box::row(4)}, "share a byte");
  const std::vector<Buffer> donated[] = {{b}};
  claim::with({}, donated, [&](auto&) { refuses(a, b, {Box::row(4)}, "exclusive", false); });
  Buffer dead = Buffer::of_string("dead");
  dead.free();
  CHECK_THROWS_WITH_AS(Buffer::copy(dead, a.view(0, 4)), doctest::Contains("dead"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Buffer::copy(a, b.view(0, 4)), doctest::Contains("copy of 10 bytes into a buffer of 4"),
                       std::invalid_argument);
  Buffer::copy(a, b);
  CHECK(bytes_of(b) == bytes_of(a));
}

TEST_CASE("a device copies directly between memory on it, on its copy engine") {
  Vram v;
  Buffer x = Buffer::create(v.device, 4096), y = Buffer::create(v.device, 4096);
  CHECK(!x.host_address());
  set_bytes(x, 3);  // through staging
  std::size_t ran = v.control->log().size();
  Buffer::copy(x, y);
  auto log = v.control->log();
  REQUIRE(log.size() == ran + 1);
  CHECK(log.back().kind == Kind::Copy);
  CHECK(log.back().queue == 1);  // COPY:0, its copy engine
  CHECK(bytes_of(y) == bytes_of(x));
}

TEST_CASE("copies between a device the host does not address and host memory pass through staging") {
  Vram v;
  const std::size_t n = (40u << 20) + 123;  // more than one 32 MiB staging allocation
  Buffer dev = Buffer::create(v.device, n);
  Buffer in = Buffer::create(host(), n), out = Buffer::create(host(), n);
  in.write<std::uint8_t>([](auto b) {
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::uint8_t(i * 7 + i / 4096);
  });
  Buffer::copy(in, dev);
  Buffer::copy(dev, out);
  bool same = in.read<std::uint8_t>([&](auto a) { return out.read<std::uint8_t>([&](auto b) { return std::equal(a.begin(), a.end(), b.begin()); }); });
  CHECK(same);
  // A pitched box through staging.
  Buffer small = Buffer::create(v.device, 64);
  small.fill(std::byte{0});
  Buffer src = Buffer::of_string("ABCDEFGH");
  Box box{0, 1, 2, 4, 2, 16};
  Buffer::submit_copy(src, small, std::span(&box, 1)).wait();
  auto got = bytes_of(small);
  CHECK(got[1] == 'A');
  CHECK(got[2] == 'B');
  CHECK(got[17] == 'C');
  CHECK(got[49] == 'G');
  CHECK(got[0] == 0);
}

TEST_CASE("a device that maps no host memory stages its copies through its own Pinned memory") {
  const std::size_t n = (33u << 20) + 5;  // more than one 32 MiB staging allocation
  std::vector<std::uint8_t> pattern(n);
  for (std::size_t i = 0; i < n; ++i) pattern[i] = std::uint8_t(i * 13 + i / 4096);
  Buffer in = Buffer::create(host(), n), out = Buffer::create(host(), n);
  in.blit_from(std::as_bytes(std::span(pattern)), 0);
  std::shared_ptr<fake::Control> a_control;
  {
    Vram a({.budget = 256 << 20, .maps_host = false}), b({.budget = 256 << 20, .maps_host = false});
    Vram mapping;  // maps host memory: stages through the host's staging
    a_control = a.control;
    const std::size_t before = a.control->live_bytes();
    Buffer on_a = Buffer::create(a.device, n), on_b = Buffer::create(b.device, n),
           on_mapping = Buffer::create(mapping.device, n);
    Buffer::copy(in, on_a);
    CHECK(a.control->live_bytes() - before - n >= (std::size_t(32) << 20));  // its Pinned staging
    Buffer::copy(on_a, on_b);        // between two such devices: the host moves the bytes
    Buffer::copy(on_b, on_mapping);  // its own staging, then the host's
    Buffer::copy(on_mapping, on_a);
    on_a.view(0, 1).fill(std::byte{0});  // on its copy engine
    pattern[0] = 0;
    Buffer::copy(on_a, out);
    CHECK(bytes_of(out) == pattern);
    // Vram's end checks that no driver saw map_host, which a device that maps no host
    // memory must never be asked.
  }
  // Closed and its buffers gone: its staging memory returned too.
  CHECK(a_control->live_bytes() == 0);
}

// Steps a device whose work runs only when stepped, as hardware would run it, until dropped.
class Stepper {
 public:
  explicit Stepper(std::shared_ptr<fake::Control> c)
      : thread_([this, c] {
          while (!stop_.load()) {
            c->step();
            std::this_thread::sleep_for(std::chrono::microseconds(100));
          }
        }) {}
  ~Stepper() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_CASE("uploads through staging pack into one allocation and wait for no earlier transfer") {
  // A device that stages in its own memory, so the staging it takes shows in its driver's
  // bytes, and whose work runs only when stepped: an upload that waited for an earlier
  // one's transfer would block until the test steps it.
  Vram v({.budget = 256 << 20, .runs_when_asleep = false, .maps_host = false});
  constexpr int kUploads = 10;
  constexpr std::size_t kBytes = 1 << 20;
  std::vector<Buffer> sources, targets;
  for (int i = 0; i < kUploads; ++i) {
    sources.push_back(Buffer::create(host(), kBytes));
    sources.back().fill(std::byte(i + 1));
    targets.push_back(Buffer::create(v.device, kBytes));
  }
  const std::size_t before = v.control->live_bytes();
  auto uploads = std::async(std::launch::async, [&] {
    std::vector<Point> points;
    const Box row[] = {Box::row(kBytes)};
    for (int i = 0; i < kUploads; ++i)
      points.push_back(Buffer::submit_copy(sources[std::size_t(i)], targets[std::size_t(i)], row));
    return points;
  });
  const bool returned = uploads.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  CHECK_MESSAGE(returned, "an upload waited for an earlier upload's transfer");
  CHECK(v.control->live_bytes() - before == (std::size_t(32) << 20));  // one staging allocation
  // From here the device runs its work as it comes, as hardware would.
  Stepper hardware(v.control);
  for (auto& p : uploads.get()) p.wait();
  for (int i = 0; i < kUploads; ++i)
    CHECK(bytes_of(targets[std::size_t(i)]) == std::vector<std::uint8_t>(kBytes, std::uint8_t(i + 1)));
}

TEST_CASE("staging allocations that no copy took within the last n takes return; the rest stay") {
  // A device that stages in its own memory (so its staging shows in its driver's bytes)
  // and runs its work only when stepped.
  constexpr std::size_t kStaging = std::size_t(32) << 20, kBytes = 1 << 20;
  Vram v({.budget = 512 << 20, .runs_when_asleep = false, .maps_host = false});
  Buffer on_v = Buffer::create(v.device, kBytes), back = Buffer::create(host(), kBytes);
  Buffer source = Buffer::create(host(), kBytes), target = Buffer::create(v.device, kBytes);
  source.fill(std::byte{7});
  const std::size_t before = v.control->live_bytes();
  // Two allocations at once (n = 2): a download holds the first while it waits for the
  // device's transfer into it, and an upload meanwhile takes a second.
  auto download = std::async(std::launch::async, [&] { Buffer::copy(on_v, back); });
  while (v.control->live_bytes() - before < kStaging) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const Box row[] = {Box::row(kBytes)};
  Point upload = Buffer::submit_copy(source, target, row);
  CHECK(v.control->live_bytes() - before == 2 * kStaging);
  {
    Stepper hardware(v.control);
    download.get();
    upload.wait();
    // Uploads one after another take the second allocation each time: the first, which no
    // copy took within the last two takes, returns to the device's cache, which serves a
    // buffer of its size with no new memory from the driver.
    for (int i = 0; i < 4; ++i) Buffer::copy(source, target);
    const std::size_t live = v.control->live_bytes();
    Buffer served = Buffer::create(v.device, kStaging, Memory::Pinned);
    CHECK(v.control->live_bytes() == live);
    // The second stays with the staging: another such buffer is new memory.
    Buffer fresh = Buffer::create(v.device, kStaging, Memory::Pinned);
    CHECK(v.control->live_bytes() == live + kStaging);
    // And the copies kept going through it.
    for (int i = 0; i < 4; ++i) Buffer::copy(source, target);
    CHECK(v.control->live_bytes() == live + kStaging);
    CHECK(bytes_of(target) == std::vector<std::uint8_t>(kBytes, 7));
  }
}

TEST_CASE("staging no copy holds returns at a set_budget that leaves its device over budget") {
  constexpr std::size_t kStaging = std::size_t(32) << 20, kBytes = 1 << 20;
  Vram v({.budget = 256 << 20, .maps_host = false});
  Buffer source = Buffer::create(host(), kBytes), target = Buffer::create(v.device, kBytes);
  source.fill(std::byte{3});
  const std::size_t before = v.control->live_bytes();
  Buffer::copy(source, target);  // through an allocation of its own staging
  REQUIRE(v.control->live_bytes() - before == kStaging);
  const std::size_t budget = v.device.used() - kStaging / 2;
  v.device.set_budget(budget);
  CHECK(v.device.used() <= budget);
  CHECK(v.control->live_bytes() == before);
  v.device.set_budget(256 << 20);
  CHECK(bytes_of(target) == std::vector<std::uint8_t>(kBytes, 3));  // staging is made again as it is needed
  CHECK(v.control->live_bytes() - before == kStaging);
}

TEST_CASE("the host's free_cache returns the host's staging no copy holds") {
  // Copies between host memory and a device whose memory the host does not address, but
  // which maps host memory, stage through the host's staging.
  constexpr std::size_t kBytes = 1 << 20;
  Vram v;
  Buffer source = Buffer::create(host(), kBytes), target = Buffer::create(v.device, kBytes);
  source.fill(std::byte{5});
  Buffer::copy(source, target);
  Buffer::copy(target, source);
  host().free_cache();
  const std::size_t used = host().used();
  Buffer::copy(source, target);  // staging made again
  CHECK(host().used() >= used + (std::size_t(32) << 20));
  host().free_cache();
  CHECK(host().used() == used);
}

TEST_CASE("fills: the host sets host memory; the copy engine sets a device's, reading none") {
  Buffer h = Buffer::create(host(), 100);
  h.fill(std::byte{0xAB});
  for (auto b : bytes_of(h)) REQUIRE(b == 0xAB);
  Vram v;
  Buffer d = Buffer::create(v.device, 100);
  d.fill(std::byte{0x5C});
  for (auto b : bytes_of(d)) REQUIRE(b == 0x5C);
  CHECK(v.control->log().back().kind == Kind::Copy);
  Buffer part = d.view(10, 10);
  part.fill(std::byte{1});
  auto got = bytes_of(d);
  CHECK(got[9] == 0x5C);
  CHECK(got[10] == 1);
  CHECK(got[19] == 1);
  CHECK(got[20] == 0x5C);
}

TEST_CASE("blits copy to and from any memory and refuse ranges outside the buffer") {
  Vram v;
  Buffer d = Buffer::create(v.device, 32);
  d.fill(std::byte{0});
  std::array<std::byte, 4> four{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  d.blit_from(four, 28);
  std::array<std::byte, 4> back{};
  d.blit_to(28, back);
  CHECK(back == four);
  CHECK_THROWS_WITH_AS(d.blit_from(four, 29), doctest::Contains("blit of 4 bytes at 29 into a buffer of 32"),
                       std::invalid_argument);
  CHECK_THROWS_AS(d.blit_to(30, back), std::invalid_argument);
}

TEST_CASE("claims: a donation group is held exclusive whole; consume kills every earlier buffer over it") {
  Buffer a = Buffer::create(host(), 64), other = Buffer::create(host(), 64);
  Buffer view = a.view(0, 8);
  std::optional<Buffer> taken;
  const std::vector<Buffer> donated[] = {{a, view, other}};  // two memories, one named twice
  claim::with({}, donated, [&](claim::Claims& c) {
    CHECK(c.exclusive(a));
    CHECK(c.exclusive(other));
    CHECK(!c.reads(a));
    CHECK_THROWS_WITH_AS(claim::read(a), doctest::Contains("exclusive"), std::invalid_argument);
    CHECK_THROWS_AS(a.write<std::uint8_t>([](auto) {}), std::invalid_argument);
    CHECK_THROWS_AS(other.read<std::uint8_t>([](auto) {}), std::invalid_argument);
    taken = c.consume("donated", a);
  });
  CHECK(a.dead() == std::optional<std::string>("donated"));
  CHECK(view.dead() == std::optional<std::string>("donated"));
  CHECK(!other.dead());
  REQUIRE(taken);
  CHECK(!taken->dead());
  CHECK(taken->access() == Access::ReadWrite);
  taken->write<std::uint8_t>([](auto b) { b[0] = 9; });
  other.write<std::uint8_t>([](auto b) { b[0] = 1; });  // released with the call
  CHECK(taken->free());
  CHECK(other.free());
}

TEST_CASE("claims: a group another claim or the outside holds is only read, and consumes to Read") {
  Buffer a = Buffer::create(host(), 64), held = Buffer::create(host(), 64), free = Buffer::create(host(), 64);
  auto storage = std::make_shared<std::vector<std::byte>>(8);
  Buffer outside = Buffer::of_host(*storage, storage);
  held.write<std::uint8_t>([](auto b) { b[0] = 42; });
  claim::read(held);  // another claim, for example a host read on another thread
  const std::vector<Buffer> groups[] = {{a, held}, {free}, {outside}};
  std::optional<Buffer> consumed, consumed_held;
  claim::with({}, groups, [&](claim::Claims& c) {
    // The first group is not taken, not even its memory no claim held; the others are whole.
    CHECK(!c.exclusive(a));
    CHECK(!c.exclusive(held));
    CHECK(c.reads(a));
    CHECK(c.reads(held));
    CHECK(c.exclusive(free));
    CHECK(!c.exclusive(outside));
    CHECK(c.reads(outside));
    // Memory under a read claim is read by others too: its consume admits only Read.
    consumed = c.consume("moved", a);
    consumed_held = c.consume("moved", held);
    CHECK(consumed->access() == Access::Read);
    CHECK_THROWS_WITH_AS(consumed->write<std::uint8_t>([](auto) {}), doctest::Contains("read-only"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(c.consume("again", a), doctest::Contains("dead"), std::invalid_argument);
  });
  CHECK(a.dead() == std::optional<std::string>("moved"));
  consumed_held->read<std::uint8_t>([](auto b) { CHECK(b[0] == 42); });
  // The other claim, taken through the old buffer, still holds the new memory until released.
  CHECK(!consumed_held->free());
  claim::release(held);
  CHECK(consumed_held->free());
  CHECK(consumed->free());
  CHECK(free.free());
  // Memory these claims do not hold is not theirs to consume.
  Buffer stranger = Buffer::create(host(), 8);
  const std::vector<Buffer> none[] = {{Buffer::create(host(), 8)}};
  CHECK_THROWS_WITH_AS(claim::with({}, none, [&](claim::Claims& c) { return c.consume("x", stranger); }),
                       doctest::Contains("do not hold"), std::invalid_argument);
  CHECK(!stranger.dead());
}

TEST_CASE("claims: bad donations take nothing") {
  Buffer a = Buffer::create(host(), 64), b = Buffer::create(host(), 64);
  Buffer dead = Buffer::create(host(), 64);
  CHECK(dead.free());
  auto takes_nothing = [&](std::span<const Buffer> read, std::span<const std::vector<Buffer>> donate,
                           std::string_view why) {
    CAPTURE(why);
    CHECK_THROWS_WITH_AS(claim::with(read, donate, [](auto&) { FAIL("f ran"); }),
                         doctest::Contains(std::string(why).c_str()), std::invalid_argument);
    // Nothing stays held: a and b donate whole afterwards.
    const std::vector<Buffer> both[] = {{a, b}};
    claim::with({}, both, [&](claim::Claims& c) { CHECK((c.exclusive(a) && c.exclusive(b))); });
  };
  const std::vector<Buffer> with_dead[] = {{a}, {b, dead}};
  takes_nothing({}, with_dead, "dead buffer");
  const std::vector<Buffer> twice[] = {{a}, {b, a.view(1, 2)}};
  takes_nothing({}, twice, "one memory in two groups (0 and 1)");
  const std::vector<Buffer> just_b[] = {{b}};
  const Buffer read_b[] = {b.view(0, 4)};
  takes_nothing(read_b, just_b, "both read and donated");
  const Buffer read_dead[] = {dead};
  takes_nothing(read_dead, {}, "dead buffer");
  // Memory another call holds exclusive cannot be read for a group that is not whole: the
  // whole call is refused, and its first group released.
  const std::vector<Buffer> elsewhere[] = {{b}};
  claim::with({}, elsewhere, [&](claim::Claims&) {
    const std::vector<Buffer> groups[] = {{a}, {b}};
    CHECK_THROWS_WITH_AS(claim::with({}, groups, [](auto&) { FAIL("f ran"); }), doctest::Contains("exclusive"),
                         std::invalid_argument);
    const std::vector<Buffer> just_a[] = {{a}};
    claim::with({}, just_a, [&](claim::Claims& c) { CHECK(c.exclusive(a)); });
  });
}

TEST_CASE("export gives host memory for good; other memory is refused") {
  Buffer a = Buffer::create(host(), 16);
  auto span = a.export_as<std::uint32_t>();
  CHECK(span.size() == 4);
  CHECK(!a.free());  // outside the claims now
  Device m = memory_device(unique("MEM"));
  Buffer other = Buffer::create(m, 16);
  CHECK_THROWS_WITH_AS(other.export_as<std::uint8_t>(), doctest::Contains("not the host device's"), std::invalid_argument);
  m.close();
}

TEST_CASE("handle and aligned describe the memory, and refuse host memory; a driver that describes no DMA gives Error") {
  Buffer h = Buffer::create(host(), 4096);
  CHECK_THROWS_WITH_AS(h.handle(), doctest::Contains("host memory"), std::invalid_argument);
  CHECK(h.aligned(0, 128));
  CHECK(!h.view(1, 8).aligned(0, 2));
  CHECK(h.view(1, 8).aligned(-1, 128));
  CHECK_THROWS_WITH_AS(h.aligned(0, 3), doctest::Contains("not a positive power of two"), std::invalid_argument);
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  Buffer f = Buffer::create(d, 4096);
  CHECK(f.handle() != 0);
  CHECK(f.aligned(0, 256));
  auto dma = f.dma("0000:01:00.0");
  CHECK(!dma);  // the fake describes no DMA
  CHECK(!f.free());  // outside the claims for good
  d.close();
}

TEST_CASE("dma of host and memory-device memory is a dma-buf through /dev/udmabuf, or an Error saying why") {
  const bool udmabuf = access("/dev/udmabuf", R_OK | W_OK) == 0;
  Device m = memory_device(unique("MEM"));
  for (Device d : {host(), m}) {
    Buffer big = Buffer::create(d, 1 << 20);
    Buffer view = big.view(4096, 100);
    auto dma = view.dma("0000:00:03.0");  // the whole allocation, whatever part of it the buffer is
    if (udmabuf) {
      REQUIRE_MESSAGE(dma.has_value(), (dma ? "" : dma.error()));
      const auto* buf = std::get_if<edge::Dmabuf>(&*dma);
      REQUIRE(buf != nullptr);
      CHECK(buf->offset == 0);
      close(buf->fd);
    } else {
      REQUIRE_FALSE(dma.has_value());
      CHECK(dma.error().find("/dev/udmabuf") != std::string::npos);
      CHECK(dma.error().find("no bus addresses") != std::string::npos);
    }
    CHECK(!big.free());  // outside the claims for good, also where the driver refused
    Buffer small = Buffer::create(d, 64);
    auto heap = small.dma("0000:00:03.0");
    REQUIRE_FALSE(heap.has_value());
    CHECK(heap.error().find("heap memory") != std::string::npos);
  }
  std::vector<std::byte> mine(1 << 16);
  Buffer theirs = Buffer::of_host(std::span(mine), nullptr);
  CHECK_THROWS_WITH_AS(theirs.dma("0000:00:03.0"), doctest::Contains("of_host"), std::invalid_argument);
  Buffer empty = Buffer::create(host(), 0);
  CHECK_THROWS_WITH_AS(empty.dma("0000:00:03.0"), doctest::Contains("empty"), std::invalid_argument);
  m.close();
}

TEST_CASE("host access waits: a reader for the last write, a writer for every use") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.runs_when_asleep = false});
  Device d = *open(opener);
  Buffer b = Buffer::create(d, 64);
  Part fill{"", {}, Submission::Copy{{std::nullopt, 0}, {std::nullopt, 0}, {Box::row(64)}, std::byte{3}}};
  auto s = Submission::make(d, std::span(&fill, 1), 0, 1);
  Run run;
  Buffer w[] = {b};
  Point p = submit(s, run, {}, w);
  CHECK(!b.reached(Access::Read));
  std::thread stepper([control = control] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    control->step();
  });
  b.read<std::uint8_t>([](auto bytes) { CHECK(bytes[63] == 3); });
  stepper.join();
  CHECK(b.reached(Access::ReadWrite));
  CHECK(p.reached());
  d.close();
}

TEST_CASE("rig.h gives C code a buffer's bytes, reason, claims and waits") {
  Buffer b = Buffer::create(host(), 64);
  Buffer v = b.view(8, 16);
  const rig_buffer* c = c_buffer(v);
  CHECK(rig_buffer_host(c) == reinterpret_cast<void*>(*v.host_address()));
  CHECK(rig_buffer_bytes(c) == 16);
  std::size_t first = 0, total = 0;
  CHECK(rig_buffer_span(c, &first, &total) == 0);
  CHECK(first == 8);
  CHECK(total == 64);
  CHECK(rig_buffer_span(c_buffer(b), nullptr, nullptr) == 1);
  CHECK(rig_buffer_why(c) == nullptr);
  CHECK(rig_buffer_claim(c) == 0);
  CHECK(!b.free());  // the C claim holds it
  rig_buffer_release(c);
  CHECK(rig_buffer_wait(c, 1) == 0);
  CHECK(b.free("gone"));
  CHECK(std::string(rig_buffer_why(c)) == "gone");
  CHECK(rig_buffer_claim(c) == -1);
  CHECK(rig_buffer_wait(c, 0) == -1);
}

TEST_CASE("a device that maps host memory cheaply copies a large copy's host side itself, borrowed; small copies, and devices that map dearly, stage") {
  const std::size_t n = (2u << 20) + 4096;  // above the 1 MiB from which such a copy borrows
  Buffer in = Buffer::create(host(), n), out = Buffer::create(host(), n);
  in.write<std::uint8_t>([](auto b) {
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::uint8_t(i * 13 + i / 4096);
  });
  // Whether v's driver holds a mapping over b's bytes.
  auto mapped = [](const Vram& v, const Buffer& b) {
    const std::uintptr_t at = *b.host_address();
    for (auto [host, bytes] : v.control->mappings())
      if (host <= at && at + b.length() <= host + bytes) return true;
    return false;
  };
  Vram cheap(fake::Options{.maps_host_cheaply = true});
  Buffer dev = Buffer::create(cheap.device, n);
  const std::size_t copies = cheap.control->log().size();
  // Up: one copy part on the device's copy engine, straight from `in` mapped on it, the
  // mapping held until that part ran.
  Point up = Buffer::submit_copy(in, dev, std::vector{Box::row(n)});
  CHECK(mapped(cheap, in));
  up.wait();
  auto log = cheap.control->log();
  REQUIRE(log.size() == copies + 1);
  CHECK(log.back().kind == Kind::Copy);
  CHECK(log.back().queue == 1);
  // Down, the same way.
  Point down = Buffer::submit_copy(dev, out, std::vector{Box::row(n)});
  CHECK(mapped(cheap, out));
  down.wait();
  CHECK(cheap.control->log().size() == copies + 2);
  CHECK(bytes_of(out) == bytes_of(in));
  // Each borrow's mapping returns once its copy ran (the device's next work lets it go).
  Buffer::create(cheap.device, 64).fill(std::byte{1});
  CHECK(!mapped(cheap, in));
  CHECK(!mapped(cheap, out));
  // A small copy stages: the host packs its bytes into staging, which the device maps.
  Buffer small = Buffer::create(host(), 64 << 10);
  small.fill(std::byte{7});
  Point staged = Buffer::submit_copy(small, dev.view(0, 64 << 10), std::vector{Box::row(64 << 10)});
  CHECK(!mapped(cheap, small));
  staged.wait();
  // A device whose mappings cost more (pinning pages) stages even large copies.
  Vram dear;
  Buffer other = Buffer::create(dear.device, n);
  Point dearly = Buffer::submit_copy(in, other, std::vector{Box::row(n)});
  CHECK(!mapped(dear, in));
  dearly.wait();
  Buffer back = Buffer::create(host(), n);
  Buffer::copy(other, back);
  CHECK(bytes_of(back) == bytes_of(in));
}
