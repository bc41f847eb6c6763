// Submissions and runs: what make and submit refuse, and what submit promises.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "../support/fake_driver.hpp"
#include "host_driver.hpp"
#include "support.hpp"

using namespace rig;
using Ref = Submission::Ref;
using Part = Submission::Part;

namespace {
std::string unique(std::string_view base) {
  static std::atomic<int> n{0};
  return std::string(base) + "-s" + std::to_string(n++);
}

constexpr std::uint32_t kAddParams = 24;  // struct add_params: data, n, add

// A submission of one add_u32 launch over the written buffer 0.
Submission add_submission(const Device& d) { return test::one_launch(d, test::kernel("add_u32"), kAddParams, 0, 1); }

void set_add(Run& run, const Submission& s, std::uint64_t n, std::uint32_t add, std::uint32_t threads = 256) {
  auto b = s.block(0);
  run.threads(b, threads);
  run.groups(b, std::uint32_t((n + threads - 1) / threads));
  run.set(b, 0, std::uint64_t(0));
  run.set(b, 8, n);
  run.set(b, 16, add);
}
}  // namespace

TEST_CASE("a launch runs its kernel over the grid and the point is reached once it is done") {
  Device cpu = host();
  const std::uint64_t n = 10000;
  Buffer data = Buffer::create(cpu, n * 4);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) {
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::uint32_t(i);
  });
  auto s = add_submission(cpu);
  Run run;
  set_add(run, s, n, 7);
  Buffer writes[] = {data};
  Point p = submit(s, run, {}, writes);
  CHECK(p.device() == cpu);
  CHECK(p.value() == cpu.submitted());
  p.wait();
  CHECK(p.reached());
  data.read<std::uint32_t>([](std::span<const std::uint32_t> xs) {
    for (std::size_t i = 0; i < xs.size(); ++i) REQUIRE(xs[i] == i + 7);
  });
}

TEST_CASE("a reader waits for the last write, and a host read waits for the writers") {
  Device cpu = host();
  const std::uint64_t n = 1 << 16;
  Buffer a = Buffer::create(cpu, n * 4), b = Buffer::create(cpu, n * 4);
  a.write<std::uint32_t>([](auto xs) { std::fill(xs.begin(), xs.end(), 1u); });
  auto add = add_submission(cpu);
  auto copy = test::one_launch(cpu, test::kernel("copy_u32"), 24, 1, 1);
  Run r1, r2;
  set_add(r1, add, n, 41);
  auto cb = copy.block(0);
  r2.set(cb, 0, std::uint64_t(0));
  r2.set(cb, 8, std::uint64_t(0));
  r2.set(cb, 16, n);
  Buffer wa[] = {a}, rb[] = {a}, wb[] = {b};
  submit(add, r1, {}, wa);
  submit(copy, r2, rb, wb);  // ordered after the add by a's stamp
  b.read<std::uint32_t>([](auto xs) {
    for (auto x : xs) REQUIRE(x == 42u);
  });
}

TEST_CASE("values complete in order and the kernel sees its value") {
  Device cpu = host();
  Buffer out = Buffer::create(cpu, 16);
  out.write<std::uint64_t>([](auto xs) { xs[0] = xs[1] = 0; });
  auto s = test::one_launch(cpu, test::kernel("record_value"), 8, 0, 1);
  Run run;
  Buffer w[] = {out};
  Point last;
  for (int i = 0; i < 1000; ++i) {
    Point p = submit(s, run, {}, w);
    if (i) CHECK(p.value() == last.value() + 1);
    last = p;
  }
  last.wait();
  out.read<std::uint64_t>([&](auto xs) {
    CHECK(xs[0] == last.value());
    CHECK(xs[1] == 1000);
  });
}

TEST_CASE("make refuses what the design lists, naming the device and the part") {
  Device cpu = host();
  auto add = test::kernel("add_u32");
  auto refuses = [&](std::vector<Part> parts, int reads, int writes, std::string_view reason,
                     std::span<const std::pair<Buffer, Access>> fixed = {}) {
    CAPTURE(reason);
    try {
      Submission::make(cpu, parts, reads, writes, fixed);
      FAIL("make accepted it");
    } catch (const std::invalid_argument& e) {
      std::string what = e.what();
      CAPTURE(what);
      CHECK(what.find("CPU") == 0);
      CHECK(what.find(reason) != std::string::npos);
    }
  };
  refuses({}, 0, 0, "at least one part");
  refuses({{"NOQUEUE:9", {}, Submission::Launch{add, kAddParams, {}}}}, 0, 0, "no queue is named NOQUEUE:9");
  refuses({{"", {}, Submission::Words{Buffer::of_string("abcd")}}}, 0, 0, "part 0: no queue of the device runs Words");
  refuses({{"", {1}, Submission::Launch{add, kAddParams, {}}}}, 0, 0, "part 0: after 1 is not an earlier part");
  refuses({{"", {}, Submission::Launch{add, 8, {}}}}, 0, 0, "8 parameter bytes, but add_u32 reads 24");
  refuses({{"", {}, Submission::Launch{add, 5000, {}}}}, 0, 0, "5000 parameter bytes, over the limit of 4096");
  refuses({{"", {}, Submission::Launch{add, kAddParams, {{4, Ref::What::Buffer, 0, {}}}}}}, 0, 1, "not a multiple of 8");
  refuses({{"", {}, Submission::Launch{add, kAddParams, {{24, Ref::What::Buffer, 0, {}}}}}}, 0, 1, "outside the 24 parameter bytes");
  refuses({{"", {}, Submission::Launch{add, kAddParams, {{0, Ref::What::Buffer, 0, {}}, {0, Ref::What::Buffer, 0, {}}}}}}, 0, 1,
          "two refs at byte 0");
  refuses({{"", {}, Submission::Launch{add, kAddParams, {{0, Ref::What::Buffer, 2, {}}}}}}, 1, 1, "names slot 2");
  refuses({{"", {}, Submission::Launch{add, kAddParams, {{0, Ref::What::Unordered, 0, {}}}}}}, 0, 0, "names fixed buffer 0");
  refuses({{"", {}, Submission::Launch{add, kAddParams, {{0, Ref::What::Entry, 0, {}}}}}}, 0, 0, "without a function");
  Device m = memory_device(unique("MEM"));
  Buffer other = Buffer::create(m, 64);
  std::pair<Buffer, Access> fixed[] = {{other, Access::Read}};
  refuses({{"", {}, Submission::Launch{add, kAddParams, {}}}}, 0, 0, "is on " + std::string(m.name()), fixed);
  m.close();
}

TEST_CASE("a box past its copy's ends is refused with its rows, offsets, pitches and the ends' lengths") {
  Device cpu = host();
  Buffer src = Buffer::create(cpu, 64), dst = Buffer::create(cpu, 32), slot = Buffer::create(cpu, 16);
  using Copy = Submission::Copy;
  // Both ends fixed: make refuses it.
  Part both{"", {}, Copy{{src, 0}, {dst, 0}, {Box::row(48, 8, 4)}, {}}};
  CHECK_THROWS_WITH_AS(Submission::make(cpu, std::span(&both, 1), 0, 0),
                       "CPU: part 0: a box of 1 rows of 48 bytes (source offset 8, pitch 48; destination offset 4, "
                       "pitch 48) does not fit the copy's source of 64 bytes and destination of 32 bytes",
                       std::invalid_argument);
  Part fill{"", {}, Copy{{}, {dst, 0}, {Box{0, 16, 8, 3, 8, 8}}, std::byte{7}}};
  CHECK_THROWS_WITH_AS(Submission::make(cpu, std::span(&fill, 1), 0, 0),
                       "CPU: part 0: a box of 3 rows of 8 bytes at offset 16, pitch 8, does not fit the fill's "
                       "destination of 32 bytes",
                       std::invalid_argument);
  // An end that is the run's buffer: submit refuses it, and the device goes on.
  Part to_slot{"", {}, Copy{{src, 0}, {{}, 0}, {Box::row(32)}, {}}};
  auto s = Submission::make(cpu, std::span(&to_slot, 1), 0, 1);
  Run run;
  Buffer small[] = {slot};
  CHECK_THROWS_WITH_AS(submit(s, run, {}, small),
                       "CPU: part 0: a box of 1 rows of 32 bytes (source offset 0, pitch 32; destination offset 0, "
                       "pitch 32) does not fit the copy's source of 64 bytes and destination of 16 bytes",
                       std::invalid_argument);
  Buffer large[] = {dst};
  submit(s, run, {}, large).wait();
}

TEST_CASE("make refuses a launch of another device's function") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  Part part{"", {}, Submission::Launch{test::kernel("add_u32"), kAddParams, {}}};
  CHECK_THROWS_WITH_AS(Submission::make(d, std::span(&part, 1), 0, 0), doctest::Contains("is loaded on CPU"),
                       std::invalid_argument);
  d.close();
}

TEST_CASE("a run refuses empty grids, too many threads and parameters out of range") {
  auto s = add_submission(host());
  auto b = s.block(0);
  Run run;
  CHECK_THROWS_WITH_AS(run.groups(b, 0), doctest::Contains("CPU: part 0: groups 0x1x1 has an empty dimension"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(run.threads(b, 1, 0), doctest::Contains("empty dimension"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(run.threads(b, 2048), doctest::Contains("over the function's limit of 1024"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(run.set(b, 20, std::uint64_t(1)), doctest::Contains("lie outside its 24 bytes"),
                       std::invalid_argument);
  CHECK_THROWS_AS(s.block(1), std::invalid_argument);
  run.threads(b, 1024);
  run.set(b, 16, std::uint64_t(1));
}

TEST_CASE("submit refuses buffers that do not match the submission") {
  Device cpu = host();
  auto s = add_submission(cpu);
  Run run;
  set_add(run, s, 4, 1);
  Buffer ok = Buffer::create(cpu, 16);
  CHECK_THROWS_WITH_AS(submit(s, run, {}, {}), doctest::Contains("0 reads and 0 writes, but the submission names 0 and 1"),
                       std::invalid_argument);
  Device m = memory_device(unique("MEM"));
  Buffer elsewhere = Buffer::create(m, 16);
  Buffer w[] = {elsewhere};
  CHECK_THROWS_WITH_AS(submit(s, run, {}, w), doctest::Contains("written buffer 0 is on"), std::invalid_argument);
  m.close();
  Buffer good[] = {ok};
  submit(s, run, {}, good).wait();
}

TEST_CASE("submit refuses a wait on a value not yet submitted") {
  Device cpu = host();
  Device m = memory_device(unique("MEM"));
  auto s = test::one_launch(cpu, test::kernel("nothing"), 0, 0, 0);
  Run run;
  Point future[] = {Point(m, m.submitted() + 1)};
  CHECK_THROWS_WITH_AS(submit(s, run, {}, {}, future), doctest::Contains("which has submitted only 0"),
                       std::invalid_argument);
  submit(s, run, {}, {}).wait();  // the device stays usable
  m.close();
}

TEST_CASE("work waits for another device's value, in the queue where the device can") {
  for (bool in_queue : {true, false}) {
    CAPTURE(in_queue);
    auto [opener, control] = fake::opener(unique("FAKE"), {.runs_when_asleep = false});
    Device producer = *open(opener);
    auto words = Buffer::of_string(std::string(8, '\0'));
    Part wpart{"", {}, Submission::Words{words}};
    auto ws = Submission::make(producer, std::span(&wpart, 1), 0, 0);
    Run prun;
    Point made = submit(ws, prun, {}, {});

    auto [copener, consumer_control] = fake::opener(unique("FAKE"), {.waits = {in_queue, in_queue}});
    Device consumer = *open(copener);
    auto cs = Submission::make(consumer, std::span(&wpart, 1), 0, 0);
    Run crun;
    Point waits[] = {made};
    std::thread stepper([&, control = control] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      control->step();
    });
    Point after = submit(cs, crun, {}, {}, waits);
    if (!in_queue) CHECK(made.reached());  // the host waited before the hand-over
    after.wait();
    stepper.join();
    CHECK(made.reached());
    auto log = consumer_control->log();
    CHECK(log.size() == 1);
    CHECK(control->violations().empty());
    CHECK(consumer_control->violations().empty());
    consumer.close();
    producer.close();
  }
}

TEST_CASE("room LATER waits for a value, GROW grows the queues, NEVER refuses") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.capacity = 2, .grow_to = 8});
  Device d = *open(opener);
  auto words = Buffer::of_string(std::string(8, '\0'));
  Part one{"", {}, Submission::Words{words}};
  std::vector<Part> four(4, one), many(9, one);
  Run run;
  auto s1 = Submission::make(d, std::span(&one, 1), 0, 0);
  for (int i = 0; i < 6; ++i) submit(s1, run, {}, {});  // LATER once the two entries are full
  auto s4 = Submission::make(d, four, 0, 0);
  submit(s4, run, {}, {}).wait();  // GROW, then fits
  CHECK(control->calls(fake::Call::Grow) >= 1);
  auto s9 = Submission::make(d, many, 0, 0);
  const std::string never = std::string(d.name()) + ": 9 parts and 0 waits take 9 queue entries, over the 8 its "
                                                    "queues grow to";
  CHECK_THROWS_WITH_AS(submit(s9, run, {}, {}), doctest::Contains(never.c_str()), std::invalid_argument);
  submit(s1, run, {}, {}).wait();  // still usable
  CHECK(control->violations().empty());
  d.close();
}

TEST_CASE("a NEVER refusal carries the device's name and its driver's reason, and the device goes on") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  auto words = Buffer::of_string(std::string(8, '\0'));
  Part one{"", {}, Submission::Words{words}};
  auto s = Submission::make(d, std::span(&one, 1), 0, 0);
  Run run;
  control->fail_nth(fake::Call::Room, control->calls(fake::Call::Room) + 1, "part 0: 3 widgets, over the limit of 2");
  try {
    submit(s, run, {}, {});
    FAIL("the submit was not refused");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == std::string(d.name()) + ": part 0: 3 widgets, over the limit of 2");
  }
  CHECK(!d.lost());
  submit(s, run, {}, {}).wait();
  CHECK(control->violations().empty());
  d.close();
}

TEST_CASE("a NEVER without a reason is refused with the generic sentence") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  auto words = Buffer::of_string(std::string(8, '\0'));
  Part one{"", {}, Submission::Words{words}};
  auto s = Submission::make(d, std::span(&one, 1), 0, 0);
  Run run;
  control->fail_nth(fake::Call::Room, control->calls(fake::Call::Room) + 1, "");
  const std::string generic = std::string(d.name()) + ": its queues can never hold this submission (1 parts, 0 "
                                                      "waits), and its driver gave no reason";
  CHECK_THROWS_WITH_AS(submit(s, run, {}, {}), doctest::Contains(generic.c_str()), std::invalid_argument);
  submit(s, run, {}, {}).wait();
  d.close();
}

TEST_CASE("the host device refuses shared memory past its limit with the driver's reason, and goes on") {
  Device cpu = host();
  Buffer data = Buffer::create(cpu, 4 * 256);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 0u); });
  auto s = add_submission(cpu);
  Run run;
  set_add(run, s, 256, 1);
  run.shared(s.block(0), 1u << 30);
  Buffer writes[] = {data};
  CHECK_THROWS_WITH_AS(submit(s, run, {}, writes),
                       doctest::Contains("CPU: part 0: 1 GiB of shared memory, over the limit of 64 KiB"),
                       std::invalid_argument);
  CHECK(!cpu.lost());
  run.shared(s.block(0), 0);
  submit(s, run, {}, writes).wait();
  data.read<std::uint32_t>([](std::span<const std::uint32_t> xs) { CHECK(xs[255] == 1); });
}

TEST_CASE("a memory device refuses work its queue does not run with the driver's reason, and goes on") {
  // Facts that claim the queue runs Words let the part past the core, to the driver's room.
  auto name = unique("MEM");
  edge::Opener<> inner{name, [](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
                         return cpu::make_memory_driver(word);
                       }};
  Device m = *open(test::twisted(name, inner, [](edge::Facts& f) { f.queues[0].runs.push_back(Kind::Words); }));
  Part words{"", {}, Submission::Words{Buffer::of_string(std::string(8, '\0'))}};
  auto refused = Submission::make(m, std::span(&words, 1), 0, 0);
  Run run;
  const std::string reason =
      name + ": part 0: Words, which the memory device does not run (it runs Copy and Fill)";
  CHECK_THROWS_WITH_AS(submit(refused, run, {}, {}), doctest::Contains(reason.c_str()), std::invalid_argument);
  CHECK(!m.lost());
  Buffer arg = Buffer::of_string("x");
  Part fill{"", {}, Submission::Fill{[](void*, void*, std::uint64_t) { return 0; }, arg}};
  submit(Submission::make(m, std::span(&fill, 1), 0, 0), run, {}, {}).wait();
  CHECK(!m.lost());
  m.close();
}

TEST_CASE("a driver that commits every k values is committed by waits") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.commit_every = 8});
  Device d = *open(opener);
  auto words = Buffer::of_string(std::string(8, '\0'));
  Part one{"", {}, Submission::Words{words}};
  auto s = Submission::make(d, std::span(&one, 1), 0, 0);
  Run run;
  Point p;
  for (int i = 0; i < 3; ++i) p = submit(s, run, {}, {});
  p.wait();
  CHECK(control->calls(fake::Call::Commit) >= 1);
  CHECK(control->violations().empty());
  d.close();
}

TEST_CASE("a failed submit loses the device and nothing else") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  auto words = Buffer::of_string(std::string(8, '\0'));
  Part one{"", {}, Submission::Words{words}};
  auto s = Submission::make(d, std::span(&one, 1), 0, 0);
  Run run;
  submit(s, run, {}, {}).wait();
  control->fail_nth(fake::Call::Submit, 2, "ring write failed");
  CHECK_THROWS_WITH_AS(submit(s, run, {}, {}), doctest::Contains("lost: ring write failed"), Lost);
  CHECK(d.lost() == std::optional<std::string>("ring write failed"));
  CHECK_THROWS_AS(submit(s, run, {}, {}), Lost);
  CHECK_THROWS_AS(Buffer::create(d, 64), Lost);
  CHECK(control->stopped());
  // The host goes on.
  auto n = test::one_launch(host(), test::kernel("nothing"), 0, 0, 0);
  submit(n, run, {}, {}).wait();
  CHECK(control->violations().empty());
}

TEST_CASE("a failing fill on a memory device loses it with the driver's message") {
  Device m = memory_device(unique("MEM"));
  Buffer arg = Buffer::of_string("x");
  Part fill{"", {}, Submission::Fill{[](void*, void*, std::uint64_t) { return 3; }, arg}};
  auto s = Submission::make(m, std::span(&fill, 1), 0, 0);
  Run run;
  CHECK_THROWS_AS(submit(s, run, {}, {}), Lost);
  REQUIRE(m.lost());
  CHECK(m.lost()->find("3") != std::string::npos);
}

TEST_CASE("a hold is released once the submission is gone and its work is done") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.runs_when_asleep = false});
  Device d = *open(opener);
  std::atomic<bool> released{false};
  Point p;
  {
    auto words = Buffer::of_string(std::string(8, '\0'));
    Part one{"", {}, Submission::Words{words}};
    auto s = Submission::make(d, std::span(&one, 1), 0, 0, {}, {}, Hold::make([&] { released = true; }));
    Run run;
    p = submit(s, run, {}, {});
  }
  CHECK(!released);  // the work still runs
  control->step();
  p.wait();
  Buffer::create(d, 64);  // an allocation returns what is due
  CHECK(released);
  d.close();
}

TEST_CASE("an allocation over the budget raises OutOfMemory at once") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  d.set_budget(1 << 20);
  Buffer a = Buffer::create(d, 1 << 19);
  CHECK_THROWS_AS(Buffer::create(d, 1 << 20), OutOfMemory);
  try {
    Buffer::create(d, 1 << 20);
  } catch (const OutOfMemory& e) {
    CHECK(e.bytes() == (1u << 20));
    CHECK(e.device() == d.name());
  }
  CHECK(d.used() == (1u << 19));
  d.close();
}

TEST_CASE("the memory of a collected buffer returns once its work is done") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.runs_when_asleep = false});
  Device d = *open(opener);
  Point p;
  {
    Buffer b = Buffer::create(d, 4096);
    Part cp{"", {}, Submission::Copy{{b, 0}, {std::nullopt, 0}, {Box::row(4096)}, {}}};
    auto s = Submission::make(d, std::span(&cp, 1), 0, 1);
    Buffer dst = Buffer::create(d, 4096);
    Buffer w[] = {dst};
    Run run;
    p = submit(s, run, {}, w);
    CHECK(control->live_regions() == 2);
  }
  d.free_cache();
  CHECK(control->live_regions() == 2);  // the copy has not run: nothing returns
  control->step();
  d.wait(p.value());
  d.free_cache();
  CHECK(control->live_regions() == 0);
  CHECK(d.used() == 0);
  d.close();
}

TEST_CASE("a reuse from the cache follows the work that last used the memory") {
  auto [opener, control] = fake::opener(unique("FAKE"), {.runs_when_asleep = false});
  Device d = *open(opener);
  Point p;
  std::uintptr_t first_address;
  {
    Buffer b = Buffer::create(d, 4096);
    first_address = *b.host_address();
    Part fill{"", {}, Submission::Copy{{std::nullopt, 0}, {std::nullopt, 0}, {Box::row(4096)}, std::byte{7}}};
    auto s = Submission::make(d, std::span(&fill, 1), 0, 1);
    Run run;
    Buffer w[] = {b};
    p = submit(s, run, {}, w);
  }
  Buffer again = Buffer::create(d, 4096);
  CHECK(*again.host_address() == first_address);  // served by the cache
  CHECK(!again.reached(Access::ReadWrite));       // the fill still holds it
  std::thread stepper([control = control] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    control->step();
  });
  again.write<std::uint8_t>([](auto bytes) { CHECK(bytes[0] == 7); bytes[0] = 1; });
  stepper.join();
  CHECK(p.reached());
  d.close();
}

TEST_CASE("cached memory counts in the budget and returns when the budget needs it") {
  auto [opener, control] = fake::opener(unique("FAKE"));
  Device d = *open(opener);
  d.set_budget(64 << 10);
  { Buffer a = Buffer::create(d, 48 << 10); }
  CHECK(d.used() == (48u << 10));  // kept in the cache
  CHECK(control->live_regions() == 1);
  Buffer b = Buffer::create(d, 32 << 10);  // another size: the cache returns to make room
  CHECK(control->live_regions() == 1);
  CHECK(d.used() == (32u << 10));
  d.set_budget(16 << 10);  // never frees live memory
  CHECK(control->live_regions() == 1);
  CHECK_THROWS_AS(Buffer::create(d, 4096), OutOfMemory);
  d.close();
}
