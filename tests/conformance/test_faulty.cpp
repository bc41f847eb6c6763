// The fault-injecting wrapper (tests/support/faulty.hpp): it forwards every call, presents
// its own C table, and fails the calls a test arms.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <atomic>

#include "../../host/host_driver.hpp"
#include "fake_driver.hpp"
#include "faulty.hpp"

using namespace rig;

namespace {

std::string unique(std::string_view base) {
  static std::atomic<int> n{0};
  return std::string(base) + "-f" + std::to_string(n++);
}

Submission copy_of(const Device& d, const Buffer& src, const Buffer& dst) {
  Submission::Part part{"", {}, Submission::Copy{{src, 0}, {dst, 0}, {Box::row(src.length())}, {}}};
  std::pair<Buffer, Access> fixed[] = {{src, Access::Read}, {dst, Access::ReadWrite}};
  return Submission::make(d, std::span(&part, 1), 0, 0, fixed);
}

}  // namespace

TEST_CASE("a wrapped driver forwards every call through a C table of its own") {
  auto [inner, fake_control] = fake::opener(unique("FAKE"), {.commit_every = 4});
  auto [opener, control] = faulty::wrap(inner);
  CHECK(opener.name == inner.name);
  Device d = *open(opener);
  const auto& f = d.facts();
  auto* table = *static_cast<const rig_driver* const*>(f.edge);
  CHECK(bool(table->settle));     // the fake has settle
  CHECK(!table->measures);   // and no counters
  CHECK(f.queues.size() == 2);
  CHECK(bool(f.word == &rig_words[d.index()]));
  Buffer a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
  std::vector<std::byte> bytes(4096, std::byte{9});
  a.blit_from(bytes, 0);
  auto s = copy_of(d, a, b);
  Run run;
  Point p;
  for (int i = 0; i < 6; ++i) p = submit(s, run, {}, {});
  p.wait();
  std::vector<std::byte> out(4096);
  b.blit_to(0, out);
  CHECK(out == bytes);
  CHECK(control->calls(faulty::Call::Room) == 6);
  CHECK(control->calls(faulty::Call::Submit) == 6);
  CHECK(control->calls(faulty::Call::Commit) >= 1);
  CHECK(control->calls(faulty::Call::Alloc) == 2);
  CHECK(control->injected() == 0);
  d.close();
  CHECK(fake_control->stopped());
  CHECK(fake_control->violations().empty());
}

TEST_CASE("an injected submit failure loses the device with the reason, and the inner driver is stopped") {
  auto [inner, fake_control] = fake::opener(unique("FAKE"));
  auto [opener, control] = faulty::wrap(inner, unique("WRAPPED"));
  Device d = *open(opener);
  CHECK(d.name() != inner.name);
  Buffer a = Buffer::create(d, 64), b = Buffer::create(d, 64);
  auto s = copy_of(d, a, b);
  Run run;
  submit(s, run, {}, {}).wait();
  control->fail_nth(faulty::Call::Submit, 2, "ring full of sand");
  CHECK_THROWS_WITH_AS(submit(s, run, {}, {}), doctest::Contains("lost: ring full of sand (faulty: submit call 2)"),
                       Lost);
  CHECK(control->injected(faulty::Call::Submit) == 1);
  CHECK(fake_control->stopped());
  CHECK(fake_control->stop_reason().find("ring full of sand") != std::string::npos);
  CHECK(fake_control->violations().empty());
}

TEST_CASE("injected faults in the C++ calls throw edge::Fault, and rig loses the device") {
  for (auto call : {faulty::Call::Alloc, faulty::Call::Image, faulty::Call::Map}) {
    CAPTURE(faulty::name(call));
    auto [opener, control] = faulty::wrap(fake::opener(unique("FAKE")).first);
    Device d = *open(opener);
    control->fail_with_probability(call, 1.0, 7, "bad luck");
    if (call == faulty::Call::Alloc) CHECK_THROWS_AS(Buffer::create(d, 64), Lost);
    if (call == faulty::Call::Image) CHECK_THROWS_AS((void)Image::load(d, std::vector<std::byte>(8)), Lost);
    if (call == faulty::Call::Map) {
      Buffer h = Buffer::create(host(), 1 << 20);
      CHECK_THROWS_AS(Buffer::borrow(d, h), Lost);
    }
    REQUIRE(d.lost());
    CHECK(d.lost()->find("bad luck") != std::string::npos);
  }
}

TEST_CASE("no room answers are retried; calls without one refuse to arm it") {
  auto [opener, control] = faulty::wrap(fake::opener(unique("FAKE")).first);
  Device d = *open(opener);
  control->no_room_nth(faulty::Call::Alloc, 1);
  Buffer a = Buffer::create(d, 64);
  CHECK(control->calls(faulty::Call::Alloc) == 2);
  CHECK(!d.lost());
  CHECK_THROWS_AS(control->no_room_nth(faulty::Call::Submit, 1), std::invalid_argument);
  control->fail_next(faulty::Call::Room);
  Buffer b = Buffer::create(d, 64);
  const std::string injected = std::string(d.name()) + ": injected fault (faulty: room call ";
  CHECK_THROWS_WITH_AS(submit(copy_of(d, a, b), *std::make_unique<Run>(), {}, {}),
                       doctest::Contains(injected.c_str()), std::invalid_argument);
  CHECK(!d.lost());
  d.close();
}

TEST_CASE("a wrapped driver's reason for a NEVER passes through, and the device goes on") {
  auto [opener, control] = faulty::wrap(fake::opener(unique("FAKE"), {.capacity = 2, .grow_to = 2}).first);
  Device d = *open(opener);
  Buffer a = Buffer::create(d, 64), b = Buffer::create(d, 64);
  Submission::Part part{"", {}, Submission::Copy{{a, 0}, {b, 0}, {Box::row(64)}, {}}};
  std::vector<Submission::Part> parts(3, part);
  std::pair<Buffer, Access> fixed[] = {{a, Access::Read}, {b, Access::ReadWrite}};
  auto three = Submission::make(d, parts, 0, 0, fixed);
  Run run;
  const std::string reason =
      std::string(d.name()) + ": 3 parts and 0 waits take 3 queue entries, over the 2 its queues grow to";
  CHECK_THROWS_WITH_AS(submit(three, run, {}, {}), doctest::Contains(reason.c_str()), std::invalid_argument);
  CHECK(control->injected(faulty::Call::Room) == 0);
  CHECK(!d.lost());
  submit(copy_of(d, a, b), run, {}, {}).wait();
  d.close();
}

TEST_CASE("the memory device's driver and the host's driver wrap too") {
  {
    edge::Opener<> mem{unique("MEM"), [](volatile std::uint64_t* w) -> Result<std::unique_ptr<edge::Driver>> {
                         return cpu::make_memory_driver(w);
                       }};
    auto [opener, control] = faulty::wrap(mem);
    Device d = *open(opener);
    CHECK(bool(*static_cast<const rig_driver* const*>(d.facts().edge)));
    Buffer a = Buffer::create(d, 256), b = Buffer::create(d, 256);
    std::vector<std::byte> bytes(256, std::byte{3}), out(256);
    a.blit_from(bytes, 0);
    Run run;
    submit(copy_of(d, a, b), run, {}, {}).wait();
    b.blit_to(0, out);
    CHECK(out == bytes);
    control->fail_next(faulty::Call::Submit, "memory fault");
    CHECK_THROWS_AS(submit(copy_of(d, a, b), run, {}, {}), Lost);
  }
  {
    edge::Opener<> cpu{unique("CPU"), [](volatile std::uint64_t* w) -> Result<std::unique_ptr<edge::Driver>> {
                         return cpu::make_host_driver(w);
                       }};
    auto [opener, control] = faulty::wrap(cpu);
    Device d = *open(opener);
    Buffer a = Buffer::create(d, 256), b = Buffer::create(d, 256);
    Run run;
    submit(copy_of(d, a, b), run, {}, {}).wait();
    CHECK(control->calls(faulty::Call::Submit) == 1);
    control->fail_next(faulty::Call::Commit);  // its submit commits every value: never asked
    submit(copy_of(d, a, b), run, {}, {}).wait();
    CHECK(control->calls(faulty::Call::Commit) == 0);
    d.close();
    CHECK(d.lost() == std::optional<std::string>("closed"));
  }
}
