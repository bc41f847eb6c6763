// Devices: opening, facts, points, the timeline and waits.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <algorithm>
#include <atomic>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "../support/fake_driver.hpp"
#include "support.hpp"

using namespace rig;

namespace {
std::string unique(std::string_view base) {
  static std::atomic<int> n{0};
  return std::string(base) + ":" + std::to_string(n++);
}
}  // namespace

TEST_CASE("the host device is CPU, computes, and runs on the host") {
  Device cpu = host();
  CHECK(cpu.name() == "CPU");
  CHECK(cpu.computes());
  CHECK(cpu.runs_on_host());
  CHECK(!cpu.arch().empty());
  REQUIRE(!cpu.queues().empty());
  CHECK(cpu == host());
  CHECK(!cpu.lost());
}

TEST_CASE("a memory device has its own timeline and one copy queue") {
  Device m = memory_device(unique("MEM"));
  CHECK(m.runs_on_host());
  CHECK(m.submitted() == 0);
  REQUIRE(m.queues().size() == 1);
  CHECK(m.queues()[0].name == "COPY:0");
  CHECK(!(m == host()));
  m.close();
}

TEST_CASE("opening a live name gives the same device; after its loss a new one") {
  auto name = unique("FAKE");
  auto [opener, control] = fake::opener(name);
  Device a = *open(opener);
  Device b = *open(opener);
  CHECK(a == b);
  a.close();
  CHECK(a.lost() == std::optional<std::string>("closed"));
  Device c = *open(opener);
  CHECK(!(c == a));
  CHECK(!c.lost());
  c.close();
}

TEST_CASE("an opener that fails gives an Error naming the device") {
  edge::Opener<> failing{"NOPE", [](volatile std::uint64_t*) -> Result<std::unique_ptr<edge::Driver>> {
                           return std::unexpected("no such hardware");
                         }};
  auto d = open(failing);
  REQUIRE(!d);
  CHECK(d.error().find("NOPE") != std::string::npos);
  CHECK(d.error().find("no such hardware") != std::string::npos);
}

TEST_CASE("open refuses an opener made with another rig version's headers, and opens it with this one's") {
  std::string name = unique("FAKE");
  auto [opener, control] = fake::opener(name);
  CHECK(opener.rig_version == RIG_VERSION);  // made with these headers
  int made = 0;  // a refused opener's make is never called
  auto stale = opener;
  stale.make = [&made, make = opener.make](volatile std::uint64_t* word) { return ++made, make(word); };
  stale.rig_version = "0.0.7";
  auto refused = open(stale);
  REQUIRE(!refused);
  CHECK(refused.error().find(name) != std::string::npos);
  CHECK(refused.error().find("built against rig 0.0.7") != std::string::npos);
  CHECK(refused.error().find(std::string("this library is rig ") + RIG_VERSION) != std::string::npos);
  CHECK(made == 0);
  auto opened = open(opener);  // the refusal left nothing behind
  REQUIRE(opened);
  CHECK(opened->name() == name);
  opened->close();
  rig::edge::IoOpener<> io{"IO-STALE", [] { return rig::Result<std::unique_ptr<rig::edge::Io>>(nullptr); }};
  io.rig_version = "9.9.9";
  auto io_refused = open_io(io);
  REQUIRE(!io_refused);
  CHECK(io_refused.error().find("built against rig 9.9.9") != std::string::npos);
}

TEST_CASE("drivers() names the drivers rig/config.h says are built in, and version() the headers' version") {
  std::vector<std::string_view> built(drivers().begin(), drivers().end());
  REQUIRE(built.size() >= 2);
  CHECK(built[0] == "host");
  CHECK(built[1] == "memory");
  auto has = [&](std::string_view d) { return std::find(built.begin(), built.end(), d) != built.end(); };
  CHECK(has("amd") == bool(RIG_DRIVER_AMD));
  CHECK(has("nv") == bool(RIG_DRIVER_NV));
  CHECK(has("cuda") == bool(RIG_DRIVER_CUDA));
  CHECK(has("disk") == bool(RIG_DRIVER_DISK));
  CHECK(has("remote") == bool(RIG_DRIVER_REMOTE));
  CHECK(built.size() == 2u + RIG_DRIVER_AMD + RIG_DRIVER_NV + RIG_DRIVER_CUDA + RIG_DRIVER_DISK + RIG_DRIVER_REMOTE);
  CHECK(version() == RIG_VERSION);
  CHECK(std::string(RIG_VERSION) == std::to_string(RIG_VERSION_MAJOR) + "." + std::to_string(RIG_VERSION_MINOR) +
                                        "." + std::to_string(RIG_VERSION_PATCH));
}

TEST_CASE("open refuses facts that break the contract") {
  struct Case {
    const char* what;
    std::function<void(edge::Facts&)> twist;
  };
  Case cases[] = {
      {"a copy engine past the queues", [](edge::Facts& f) { f.copy_engine = 7; }},
      {"a copy engine that runs no Copy", [](edge::Facts& f) { f.queues[0].runs = {Kind::Launch}; f.copy_engine = 0; }},
      {"hang_ms below 1", [](edge::Facts& f) { f.hang_ms = 0; }},
      {"cache_bytes below 1", [](edge::Facts& f) { f.cache_bytes = 0; }},
      {"alignment not a power of two", [](edge::Facts& f) { f.alignment = 3; }},
      {"a null edge", [](edge::Facts& f) { f.edge = nullptr; }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    auto name = unique("BAD");
    auto [inner, control] = fake::opener(name);
    CHECK_THROWS_AS(open(test::twisted(name, inner, c.twist)), std::invalid_argument);
    CHECK(control->stopped());
  }
  // A null first member of the edge.
  static const rig_driver* null_table = nullptr;
  auto name = unique("BAD");
  auto [inner, control] = fake::opener(name);
  CHECK_THROWS_AS(open(test::twisted(name, inner, [](edge::Facts& f) { f.edge = &null_table; })),
                  std::invalid_argument);
}

TEST_CASE("a point packs a 16-bit device index and a 48-bit value") {
  Device m = memory_device(unique("MEM"));
  Point p(m, 12345);
  CHECK(p.value() == 12345);
  CHECK(p.device() == m);
  CHECK(Point::from_bits(p.bits()) == p);
  CHECK(p.index() == (p.bits() >> 48));
  CHECK_THROWS_AS(Point(m, Point::kValueMask + 1), std::invalid_argument);
  CHECK(Point().reached());
  m.close();
}

TEST_CASE("a wait on a value not yet submitted is refused") {
  Device m = memory_device(unique("MEM"));
  CHECK_THROWS_WITH_AS(m.wait(m.submitted() + 1), doctest::Contains("MEM"), std::invalid_argument);
  m.wait(0);
  m.close();
}

TEST_CASE("waits return once the device reaches the value, and signaled commits") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.commit_every = 4, .runs_when_asleep = false});
  Device d = *open(opener);
  auto s = test::words(d);
  Run run;
  Point p = submit(s, run, {}, {});
  CHECK(p.value() == 1);
  CHECK(d.submitted() == 1);
  CHECK(!p.reached());  // commits it, but the fake runs only when stepped
  std::thread stepper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    control->step();
  });
  p.wait();
  stepper.join();
  CHECK(p.reached());
  CHECK(d.signaled() == 1);
  CHECK(control->violations().empty());
  d.close();
}

TEST_CASE("close waits for submitted work, then the device is lost with reason closed") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  auto s = test::words(d);
  Run run;
  for (int i = 0; i < 5; ++i) submit(s, run, {}, {});
  d.close();  // the fake runs its work when rig sleeps in it
  CHECK(control->pending() == 0);
  CHECK(d.lost() == std::optional<std::string>("closed"));
  CHECK(control->stopped());
  CHECK(control->stop_reason() == "closed");
  const std::string lost = std::string(d.name()) + " lost: closed";
  CHECK_THROWS_WITH_AS(submit(s, run, {}, {}), lost.c_str(), Lost);
  CHECK(control->violations().empty());
}

TEST_CASE("a device whose word stalls past hang_ms is lost with no progress for n ms") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.hang_ms = 30, .runs_when_asleep = false});
  Device d = *open(opener);
  auto s = test::words(d);
  Run run;
  Point p = submit(s, run, {}, {});
  CHECK_THROWS_WITH_AS(p.wait(), doctest::Contains("no progress for 30 ms"), Lost);
  CHECK(d.lost() == std::optional<std::string>("no progress for 30 ms"));
  CHECK(control->stopped());
  // Other devices go on.
  Device m = memory_device(unique("MEM"));
  CHECK(!m.lost());
  m.close();
}

TEST_CASE("a device's own word is read through signaled") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.own_word = true});
  Device d = *open(opener);
  auto s = test::words(d);
  Run run;
  Point p = submit(s, run, {}, {});
  control->step();
  CHECK(p.reached());
  CHECK(d.signaled() == 1);
  CHECK(control->calls(fake::Call::Signaled) > 0);
  d.close();
}

TEST_CASE("the loss of a producer loses the queues that wait for its unreached values") {
  auto [popener, producer_control] = fake::opener(unique("FAKE"), {.runs_when_asleep = false});
  Device producer = *open(popener);
  auto [copener, consumer_control] = fake::opener(unique("FAKE"));
  Device consumer = *open(copener);
  Device bystander = memory_device(unique("MEM"));
  auto words = Buffer::of_string(std::string(8, '\0'));
  Submission::Part part{"", {}, Submission::Words{words}};
  Run run;
  Point made = submit(Submission::make(producer, std::span(&part, 1), 0, 0), run, {}, {});
  Point waits[] = {made};
  Point after = submit(Submission::make(consumer, std::span(&part, 1), 0, 0), run, {}, {}, waits);
  producer_control->fault("page fault at 0x1000");
  CHECK_THROWS_AS(made.wait(), Lost);
  REQUIRE(consumer.lost());
  CHECK(*consumer.lost() == std::string(producer.name()) + " lost");
  CHECK_THROWS_AS(after.wait(), Lost);
  CHECK(!bystander.lost());
  bystander.close();
}

TEST_CASE("in a child of fork every device is lost, and fail loses devices and later opens") {
  Device m = memory_device(unique("MEM"));
  auto words = Buffer::of_string(std::string(8, '\0'));
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int status = 0;
    if (m.lost() != std::optional<std::string>("forked")) status |= 1;
    if (host().lost() != std::optional<std::string>("forked")) status |= 2;
    fail("the job was cancelled");
    if (failure() != std::optional<std::string>("the job was cancelled")) status |= 4;
    auto [opener, control] = fake::opener("AFTER-FAIL");
    auto again = open(opener);
    if (again || again.error().find("rig failed: the job was cancelled") == std::string::npos) status |= 8;
    _exit(status);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(!m.lost());  // the parent's devices go on
  CHECK(!failure());
  m.close();
}
