// Tests of the host device's driver (host/host_driver.hpp), through edge::Driver and its C
// functions, without rig's core. Each test is named after the promise it checks.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN

#include "host_driver.hpp"
#include "host_queue.hpp"
#include "heap_count.hpp"

#include <doctest/doctest.h>
#include <rig/edge.hpp>
#include <rig/host_kernel.h>
#include <rig/rig_edge.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <linux/perf_event.h>
#include <time.h>
#include <unistd.h>


namespace {

using namespace std::chrono_literals;
using rig::Kind;
using rig::Memory;
namespace edge = rig::edge;

// What the kernels of tests/kernels/host_*.c take and write.
struct SaxpyParams {
  float a;
  std::uint32_t n;
  const float* x;
  float* y;
};
struct GridReport {
  std::uint32_t group[3];
  std::uint32_t threads;
  std::uint32_t shared_ok;
  std::uint32_t calls;
  std::uint64_t value;
};
struct GridParams {
  GridReport* out;
};
struct SlowParams {
  std::uint64_t microseconds;
  std::uint32_t* ran;
};

std::uint64_t load(const volatile std::uint64_t& w) {
  return __atomic_load_n(&w, __ATOMIC_ACQUIRE);
}
void store(volatile std::uint64_t& w, std::uint64_t v) {
  __atomic_store_n(&w, v, __ATOMIC_RELEASE);
}

std::vector<std::byte> read_object(const char* name) {
  std::ifstream in(std::string(RIG_HOST_KERNEL_DIR) + "/" + name, std::ios::binary);
  REQUIRE(in.good());
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

// A host driver with its word, its facts and its C table.
struct Host {
  alignas(8) volatile std::uint64_t word = 0;
  std::unique_ptr<edge::Driver> driver;
  edge::Facts facts;
  void* edge = nullptr;
  const rig_driver* table = nullptr;

  explicit Host(std::uint64_t start = 0) {
    word = start;
    driver = rig::cpu::make_host_driver(&word);
    facts = driver->facts();
    edge = facts.edge;
    table = *static_cast<const rig_driver* const*>(edge);
  }
  ~Host() { driver->stop("the test is over"); }

  std::uint64_t shown() const { return load(word); }

  char why[RIG_WHY] = "";  // room's reason of its last RIG_NEVER
  int room(rig_part* parts, std::uint32_t count, std::uint32_t waits = 0) {
    why[0] = 0;
    return table->room(edge, parts, count, waits, why);
  }
  // Submits value v, asking room first; fails the test unless room fits and submit commits.
  void submit(rig_part* parts, std::uint32_t count, std::uint64_t v,
              const rig_wait* waits = nullptr, std::uint32_t wait_count = 0,
              std::uint64_t* times = nullptr) {
    REQUIRE(room(parts, count, wait_count) == RIG_FITS);
    const char* failure = nullptr;
    REQUIRE(table->submit(edge, parts, count, waits, wait_count, v, times, &failure) ==
            RIG_COMMITTED);
  }
  // Waits (through the driver's sleep) until the word shows v; fails after 10 s.
  void wait(std::uint64_t v) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (shown() < v) {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      driver->sleep(v, 10ms);
    }
  }

  edge::ImageId load_image(const char* object) {
    const auto bytes = read_object(object);
    auto code = driver->image(bytes);
    REQUIRE(code.has_value());
    REQUIRE(std::holds_alternative<edge::Loaded>(*code));
    return std::get<edge::Loaded>(*code).image;
  }
  edge::Entry entry(edge::ImageId image, std::string_view name) {
    auto answer = driver->entry(image, name);
    REQUIRE(std::holds_alternative<edge::Entry>(answer));
    return std::get<edge::Entry>(answer);
  }
};

rig_part launch_part(const edge::Entry& e, std::array<std::uint32_t, 3> groups,
                     std::array<std::uint32_t, 3> threads, const void* params, std::uint32_t bytes,
                     std::uint32_t shared = 0) {
  rig_part p;
  std::memset(&p, 0, sizeof p);
  p.queue = 0;
  p.kind = RIG_KIND_LAUNCH;
  rig_launch& l = p.work.launch;
  l.code = e.code;
  l.launch = e.launch;
  std::copy(groups.begin(), groups.end(), l.groups);
  std::copy(threads.begin(), threads.end(), l.threads);
  l.shared = shared;
  l.param_bytes = bytes;
  l.params = params;
  return p;
}

rig_part fill_part(int (*fn)(void*, void*, std::uint64_t), void* arg) {
  rig_part p;
  std::memset(&p, 0, sizeof p);
  p.kind = RIG_KIND_FILL;
  p.work.fill.fn = fn;
  p.work.fill.arg = arg;
  return p;
}

rig_part copy_part(const void* src, void* dst, const rig_box* boxes, std::uint32_t count,
                   std::int32_t fill = -1) {
  rig_part p;
  std::memset(&p, 0, sizeof p);
  p.kind = RIG_KIND_COPY;
  rig_copy& c = p.work.copy;
  c.src = reinterpret_cast<std::uint64_t>(src);
  c.dst = reinterpret_cast<std::uint64_t>(dst);
  c.src_handle = std::intptr_t(c.src);
  c.dst_handle = std::intptr_t(c.dst);
  c.boxes = boxes;
  c.count = count;
  c.fill = fill;
  return p;
}

// The host device's test kernels, loaded.
struct Kernels {
  edge::Entry saxpy, empty, grid, slow;
  explicit Kernels(Host& h) {
    const auto saxpy_image = h.load_image("host_saxpy.o");
    const auto grid_image = h.load_image("host_grid.o");
    saxpy = h.entry(saxpy_image, "saxpy");
    empty = h.entry(saxpy_image, "empty");
    grid = h.entry(grid_image, "grid");
    slow = h.entry(grid_image, "slow");
  }
};

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Facts and memory.

TEST_CASE("the host driver states its facts") {
  Host h;
  const edge::Facts& f = h.facts;
#if defined(__x86_64__)
  CHECK(f.arch == "x86_64");
#elif defined(__aarch64__)
  CHECK(f.arch == "aarch64");
#endif
  CHECK(f.budget > 0);
  REQUIRE(f.queues.size() == 1);
  CHECK(f.queues[0] == rig::Queue{"COMPUTE:0", {Kind::Launch, Kind::Fill, Kind::Copy}});
  CHECK(f.copy_engine == 0);
  CHECK(f.completion == edge::Completion::Host);
  CHECK(f.waits.stores);
  CHECK(f.waits.hosts);
  CHECK_FALSE(f.may_block);
  CHECK_FALSE(f.hang_ms.has_value());
  CHECK(f.maps_host);
  CHECK(f.host_addresses);
  CHECK(f.alignment == 16);
  CHECK((f.alignment & (f.alignment - 1)) == 0);
  if (f.cache_bytes) CHECK(*f.cache_bytes >= 1);
  CHECK((f.word == &h.word));
  REQUIRE(f.edge != nullptr);
  REQUIRE(h.table != nullptr);
  CHECK((h.table->room != nullptr));
  CHECK((h.table->submit != nullptr));
  CHECK((h.table->commit != nullptr));
  CHECK((h.table->settle == nullptr));
}

TEST_CASE("the host lists instructions and cycles where it may count them, and else none with a NULL measures") {
  Host h;
  const auto refused = rig::host::probe_counters(rig::host::hardware_counters());
  if (refused) {
    MESSAGE("this machine counts nothing: " << *refused);
    CHECK(h.facts.counters.empty());
    CHECK((h.table->measures == nullptr));
  } else {
    using Counters = std::vector<std::pair<std::string, int>>;
    CHECK(h.facts.counters == Counters{{"instructions", 1}, {"cycles", 1}});
    CHECK((h.table->measures != nullptr));
  }
}

TEST_CASE("a refused counter is named with the kernel's reason") {
  // A hardware event no PMU has: the kernel refuses it with ENOENT or EINVAL.
  const rig::host::CounterEvent bogus[] = {{"bogus", PERF_TYPE_HARDWARE, 0xfff}};
  const auto refused = rig::host::probe_counters(bogus);
  REQUIRE(refused.has_value());
  CHECK(refused->find("perf_event_open of bogus: ") == 0);
  CHECK(rig::host::probe_counters({}).has_value());
}

TEST_CASE("alloc aligns regions by their size and rounds them to whole words") {
  Host h;
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  struct Case {
    std::size_t bytes, alignment;
  };
  for (const Case c :
       {Case{0, 16}, Case{1, 16}, Case{15, 16}, Case{127, 16}, Case{128, 128}, Case{4001, 128},
        Case{65535, 128}, Case{std::max<std::size_t>(65536, 4 * page), page},
        Case{(1u << 20) + 3, page}}) {
    for (const Memory m : {Memory::Device, Memory::Mapped}) {
      CAPTURE(c.bytes);
      const auto region = h.driver->alloc(m, c.bytes);
      REQUIRE(region.has_value());
      const edge::Location at = h.driver->locate(*region);
      REQUIRE(at.address.has_value());
      REQUIRE(at.host.has_value());
      CHECK(*at.address == *at.host);
      CHECK(std::uintptr_t(at.handle) == *at.host);
      CHECK(*at.host % c.alignment == 0);
      // The region holds whole 4-byte words: every one of them is writable.
      const std::size_t words = std::max<std::size_t>(1, (c.bytes + 3) / 4);
      std::memset(reinterpret_cast<void*>(*at.host), 0xab, words * 4);
      h.driver->free(*region);
    }
  }
}

TEST_CASE("alloc refuses pinned memory") {
  Host h;
  CHECK_THROWS_AS(h.driver->alloc(Memory::Pinned, 4096), std::invalid_argument);
}

TEST_CASE("map_host is the identity, and freeing the mapping leaves the memory") {
  Host h;
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  void* memory = std::aligned_alloc(page, 4 * page);
  std::memset(memory, 7, 4 * page);
  const auto host = reinterpret_cast<std::uintptr_t>(memory);
  const edge::Mapping m1 = h.driver->map_host(host, 4 * page);
  const edge::Mapping m2 = h.driver->map_host(host, 4 * page);
  REQUIRE(std::holds_alternative<edge::Region>(m1));
  REQUIRE(std::holds_alternative<edge::Region>(m2));
  const auto region = std::get<edge::Region>(m1);
  CHECK(region.id == host);
  CHECK(std::get<edge::Region>(m2) == region);
  const edge::Location at = h.driver->locate(region);
  CHECK(at.address == host);
  CHECK(at.host == host);
  h.driver->free(region);
  h.driver->free(region);
  CHECK(static_cast<unsigned char*>(memory)[4 * page - 1] == 7);
  std::free(memory);
}

// ---------------------------------------------------------------------------------------
// Images.

TEST_CASE("an ELF kernel loads and its entry states its params and threads") {
  Host h;
  const auto image = h.load_image("host_saxpy.o");
  const edge::Entry saxpy = h.entry(image, "saxpy");
  CHECK(saxpy.code != 0);
  CHECK(saxpy.launch != nullptr);
  CHECK(saxpy.params == sizeof(SaxpyParams));
  CHECK(saxpy.threads == 256);
  const edge::Entry empty = h.entry(image, "empty");
  CHECK(empty.code != 0);
  CHECK(empty.code != saxpy.code);
  CHECK_FALSE(empty.params.has_value());
  CHECK_FALSE(empty.threads.has_value());
  // Asking twice gives the same function.
  CHECK(h.entry(image, "saxpy").launch == saxpy.launch);
}

TEST_CASE("entry answers Absent for a name that is no defined function") {
  Host h;
  const auto image = h.load_image("host_saxpy.o");
  CHECK(std::holds_alternative<edge::Absent>(h.driver->entry(image, "missing")));
  CHECK(std::holds_alternative<edge::Absent>(h.driver->entry(image, "rig_params_saxpy")));
}

TEST_CASE("image gives the loader's reason for a binary it rejects") {
  Host h;
  const std::vector<std::byte> junk(64, std::byte{0x42});
  const auto code = h.driver->image(junk);
  REQUIRE_FALSE(code.has_value());
  CHECK_FALSE(code.error().empty());
  CHECK(code.error().rfind("CPU", 0) == std::string::npos);
}

TEST_CASE("unload frees the image: its functions are gone") {
  Host h;
  const auto image = h.load_image("host_saxpy.o");
  h.entry(image, "saxpy");
  h.driver->unload(image);
  const auto again = h.load_image("host_saxpy.o");
  CHECK(std::holds_alternative<edge::Entry>(h.driver->entry(again, "saxpy")));
}

// ---------------------------------------------------------------------------------------
// Launches and values.

TEST_CASE("a launch over many groups writes the right results and the word shows its value") {
  Host h;
  Kernels k(h);
  const std::uint32_t n = 100'003, threads = 256;
  std::vector<float> x(n), y(n, 1.0f);
  for (std::uint32_t i = 0; i < n; ++i) x[i] = float(i);
  SaxpyParams params{2.0f, n, x.data(), y.data()};
  rig_part part = launch_part(k.saxpy, {(n + threads - 1) / threads, 1, 1}, {threads, 1, 1},
                              &params, sizeof params);
  h.submit(&part, 1, 1);
  params.a = -100.0f;  // the parameters are the driver's copy once submit returns
  h.wait(1);
  CHECK(h.shown() == 1);
  std::uint32_t wrong = 0;
  for (std::uint32_t i = 0; i < n; ++i) wrong += y[i] != 2.0f * float(i) + 1.0f;
  CHECK(wrong == 0);
}

TEST_CASE("each group runs once and sees its place in the grid, its shared memory and the value") {
  Host h(41);
  Kernels k(h);
  const std::array<std::uint32_t, 3> groups{5, 4, 3};
  std::vector<GridReport> out(5 * 4 * 3, GridReport{});
  GridParams params{out.data()};
  rig_part part = launch_part(k.grid, groups, {8, 2, 1}, &params, sizeof params, 1000);
  h.submit(&part, 1, 42);
  h.wait(42);
  for (std::uint32_t i = 0; i < out.size(); ++i) {
    CAPTURE(i);
    CHECK(out[i].calls == 1);
    CHECK(out[i].group[0] == i % 5);
    CHECK(out[i].group[1] == i / 5 % 4);
    CHECK(out[i].group[2] == i / 20);
    CHECK(out[i].threads == 16);
    CHECK(out[i].shared_ok == 1);
    CHECK(out[i].value == 42);
  }
}

TEST_CASE("values complete in order: the word rises to the last and never moves backwards") {
  Host h;
  Kernels k(h);
  std::atomic<bool> done{false};
  std::atomic<bool> backwards{false};
  std::thread sampler([&] {
    std::uint64_t last = 0;
    while (!done.load(std::memory_order_acquire)) {
      const std::uint64_t now = h.shown();
      if (now < last) backwards.store(true);
      last = now;
    }
  });
  std::vector<GridReport> out(4);
  GridParams params{out.data()};
  for (std::uint64_t v = 1; v <= 1000; ++v) {
    rig_part parts[2] = {launch_part(k.empty, {4, 1, 1}, {1, 1, 1}, nullptr, 0),
                         launch_part(k.grid, {4, 1, 1}, {1, 1, 1}, &params, sizeof params)};
    while (h.room(parts, 2) == RIG_LATER) h.driver->sleep(h.shown() + 1, 1ms);
    h.submit(parts, 2, v);
  }
  h.wait(1000);
  done.store(true, std::memory_order_release);
  sampler.join();
  CHECK(h.shown() == 1000);
  CHECK_FALSE(backwards.load());
  for (const GridReport& r : out) {
    CHECK(r.calls == 1000);
    CHECK(r.value == 1000);
  }
}

TEST_CASE("times are written before the word shows the value") {
  Host h;
  Kernels k(h);
  std::vector<std::uint32_t> ran(2);
  SlowParams params{2000, ran.data()};
  rig_part part = launch_part(k.slow, {1, 1, 1}, {1, 1, 1}, &params, sizeof params);
  std::uint64_t times[2] = {0, 0};
  const std::uint64_t before = rig_now_ns();
  h.submit(&part, 1, 1, nullptr, 0, times);
  h.wait(1);
  const std::uint64_t after = rig_now_ns();
  CHECK(times[0] >= before);
  CHECK(times[1] >= times[0] + 2'000'000);
  CHECK(times[1] <= after);
}

TEST_CASE("copies and fills of the host queue give the right bytes") {
  Host h;
  std::vector<unsigned char> src(256), dst(256, 0);
  for (int i = 0; i < 256; ++i) src[i] = static_cast<unsigned char>(i);
  const rig_box boxes[2] = {
      {0, 0, 8, 3, 16, 32},     // three rows of 8 bytes, pitches 16 and 32
      {200, 150, 20, 1, 0, 0},  // one run of 20 bytes
  };
  const rig_box fill_box{0, 100, 4, 2, 0, 10};
  rig_part parts[2] = {copy_part(src.data(), dst.data(), boxes, 2),
                       copy_part(nullptr, dst.data(), &fill_box, 1, 0xee)};
  h.submit(parts, 2, 1);
  h.wait(1);
  std::vector<unsigned char> want(256, 0);
  for (int r = 0; r < 3; ++r) {
    for (int b = 0; b < 8; ++b) want[r * 32 + b] = src[r * 16 + b];
  }
  for (int b = 0; b < 20; ++b) want[150 + b] = src[200 + b];
  for (int r = 0; r < 2; ++r) {
    for (int b = 0; b < 4; ++b) want[100 + r * 10 + b] = 0xee;
  }
  CHECK(dst == want);
}

namespace {
struct FillCall {
  void* queue = nullptr;
  void* arg = nullptr;
  std::uint64_t v = 0;
};
int record_fill(void* queue, void* arg, std::uint64_t v) {
  auto* call = static_cast<FillCall*>(arg);
  call->queue = queue;
  call->arg = arg;
  call->v = v;
  return 0;
}
}  // namespace

TEST_CASE("a fill is called with the queue's context, its argument and the value") {
  Host h(6);
  FillCall call;
  rig_part part = fill_part(record_fill, &call);
  h.submit(&part, 1, 7);
  h.wait(7);
  CHECK(call.queue == h.edge);
  CHECK(call.arg == &call);
  CHECK(call.v == 7);
}

// ---------------------------------------------------------------------------------------
// Room.

TEST_CASE("room answers RIG_NEVER for work the queue never runs, saying which part and limit") {
  Host h;
  Kernels k(h);
  SaxpyParams params{};
  const rig_part good = launch_part(k.saxpy, {2, 1, 1}, {256, 1, 1}, &params, sizeof params);
  rig_part p = good;
  CHECK(h.room(&p, 1) == RIG_FITS);
  CHECK(std::string(h.why).empty());

  std::string reason;
  SUBCASE("a part of kind 0") { p.kind = 0, reason = "part 1: kind 0, no kind of work"; }
  SUBCASE("queue words") {
    static const std::uint32_t words[1] = {0};
    std::memset(&p.work, 0, sizeof p.work);
    p.kind = RIG_KIND_WORDS;
    p.work.words = {words, 1};
    reason = "part 1: Words, which the host queue does not run";
  }
  SUBCASE("a queue other than 0") { p.queue = 1, reason = "part 1: queue 1, but the device has only queue 0"; }
  SUBCASE("an empty grid in x") {
    p.work.launch.groups[0] = 0;
    reason = "part 1: a launch of 0x1x1 groups of 256x1x1 threads has an empty dimension";
  }
  SUBCASE("an empty grid in y") { p.work.launch.groups[1] = 0, reason = "2x0x1 groups"; }
  SUBCASE("an empty grid in z") { p.work.launch.groups[2] = 0, reason = "2x1x0 groups"; }
  SUBCASE("an empty group in x") { p.work.launch.threads[0] = 0, reason = "of 0x1x1 threads has an empty dimension"; }
  SUBCASE("an empty group in y") { p.work.launch.threads[1] = 0, reason = "of 256x0x1 threads"; }
  SUBCASE("an empty group in z") { p.work.launch.threads[2] = 0, reason = "of 256x1x0 threads"; }
  SUBCASE("more groups than the device counts") {
    p.work.launch.groups[0] = p.work.launch.groups[1] = p.work.launch.groups[2] = 0xffffffffu;
    reason = "part 1: 4294967295x4294967295x4294967295 groups, over the limit of 2^63 groups in all";
  }
  SUBCASE("more threads than the kernel states") {
    p.work.launch.threads[0] = 128;
    p.work.launch.threads[1] = 3;
    reason = "part 1: 128x3x1 threads per group, over the kernel's limit of 256";
  }
  SUBCASE("more shared memory than a group may have") {
    p.work.launch.shared = 1 << 20;
    reason = "part 1: 1 MiB of shared memory, over the limit of 64 KiB";
  }
  SUBCASE("more parameters than a launch carries") {
    p.work.launch.param_bytes = RIG_PARAMS_MAX + 1;
    reason = "part 1: 4097 parameter bytes, over the limit of 4096";
  }
  rig_part parts[2] = {good, p};
  CHECK(h.room(parts, 2) == RIG_NEVER);
  CHECK_MESSAGE(std::string(h.why).find(reason) != std::string::npos, h.why);
}

TEST_CASE("room answers RIG_LATER when the ring is full, and RIG_FITS once a value is reached") {
  Host h;
  Kernels k(h);
  alignas(8) volatile std::uint64_t other = 0;
  const rig_wait wait{&other, 1, 9, 0};
  rig_part part = launch_part(k.empty, {1, 1, 1}, {1, 1, 1}, nullptr, 0);
  h.submit(&part, 1, 1, &wait, 1);  // blocks the queue until `other` shows 1
  std::uint64_t v = 1;
  while (h.room(&part, 1) == RIG_FITS && v < 100'000) h.submit(&part, 1, ++v);
  CHECK(v < 100'000);
  CHECK(h.room(&part, 1) == RIG_LATER);
  CHECK(h.shown() == 0);
  store(other, 1);
  h.wait(v);
  CHECK(h.room(&part, 1) == RIG_FITS);
}

// ---------------------------------------------------------------------------------------
// Waits, failures, stop.

TEST_CASE("a job waiting on another device's word does not run before the word is raised") {
  Host h;
  Kernels k(h);
  alignas(8) volatile std::uint64_t other = 3;
  std::vector<GridReport> first(1), second(1);
  GridParams p1{first.data()}, p2{second.data()};
  rig_part a = launch_part(k.grid, {1, 1, 1}, {1, 1, 1}, &p1, sizeof p1);
  rig_part b = launch_part(k.grid, {1, 1, 1}, {1, 1, 1}, &p2, sizeof p2);
  const rig_wait wait{&other, 5, 3, 1};
  h.submit(&a, 1, 1, &wait, 1);
  h.submit(&b, 1, 2);  // queued behind the waiting value
  std::this_thread::sleep_for(30ms);
  CHECK(h.shown() == 0);
  CHECK(first[0].calls == 0);
  CHECK(second[0].calls == 0);
  store(other, 4);
  std::this_thread::sleep_for(10ms);
  CHECK(h.shown() == 0);
  store(other, 5);
  h.wait(2);
  CHECK(first[0].calls == 1);
  CHECK(second[0].calls == 1);
}

namespace {
std::atomic<bool> failing_fill_may_return{false};
int failing_fill(void*, void*, std::uint64_t) {
  while (!failing_fill_may_return.load()) std::this_thread::yield();
  return 3;
}
}  // namespace

TEST_CASE("a failing fill fails the device with a message naming the value") {
  Host h(11);
  Kernels k(h);
  std::vector<GridReport> out(1);
  GridParams params{out.data()};
  failing_fill_may_return = false;
  rig_part fill = fill_part(failing_fill, nullptr);
  rig_part later = launch_part(k.grid, {1, 1, 1}, {1, 1, 1}, &params, sizeof params);
  h.submit(&fill, 1, 12);
  h.submit(&later, 1, 13);
  failing_fill_may_return = true;

  const char* failure = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (h.table->commit(h.edge, 13, &failure) == RIG_OK) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(failure != nullptr);
  CHECK(std::string(failure) == "fill returned 3 at value 12");

  failure = nullptr;
  CHECK(h.table->submit(h.edge, &later, 1, nullptr, 0, 14, nullptr, &failure) == RIG_FAILED);
  REQUIRE(failure != nullptr);
  CHECK(std::string(failure) == "fill returned 3 at value 12");
  CHECK_THROWS_WITH_AS(h.driver->sleep(13, 1ms), "fill returned 3 at value 12", edge::Fault);

  std::this_thread::sleep_for(20ms);
  CHECK(h.shown() == 11);    // neither the failed value nor the one after it
  CHECK(out[0].calls == 0);  // the value after the failure never ran
}

TEST_CASE("stop with queued work returns promptly and never stores the dropped values") {
  Host h;
  Kernels k(h);
  std::vector<GridReport> out(1);
  GridParams params{out.data()};
  alignas(8) volatile std::uint64_t other = 0;
  const rig_wait wait{&other, 1, 2, 1};
  rig_part part = launch_part(k.grid, {1, 1, 1}, {1, 1, 1}, &params, sizeof params);
  h.submit(&part, 1, 1, &wait, 1);
  for (std::uint64_t v = 2; v <= 50; ++v) h.submit(&part, 1, v);
  std::this_thread::sleep_for(20ms);  // the dispatcher is backing off on `other`
  const auto start = std::chrono::steady_clock::now();
  h.driver->stop("closed");
  CHECK(std::chrono::steady_clock::now() - start < 1s);  // never, without stop; a loaded machine's margin
  store(other, 1);
  std::this_thread::sleep_for(10ms);
  CHECK(h.shown() == 0);
  CHECK(out[0].calls == 0);
  const char* failure = nullptr;
  CHECK(h.table->commit(h.edge, 50, &failure) == RIG_FAILED);
  CHECK(std::string(failure) == "stopped: closed");
}

TEST_CASE("stop during a long launch returns once the running groups end, and drops its value") {
  Host h;
  Kernels k(h);
  std::vector<std::uint32_t> ran(2000);
  SlowParams params{1000, ran.data()};  // 1 ms per group: 2 s in all on one core
  rig_part part = launch_part(k.slow, {2000, 1, 1}, {1, 1, 1}, &params, sizeof params);
  h.submit(&part, 1, 1);
  std::this_thread::sleep_for(30ms);
  const auto start = std::chrono::steady_clock::now();
  h.driver->stop("closed");
  // Well before the launch's 2 s, with a loaded machine's margin: its running groups' 1 ms.
  CHECK(std::chrono::steady_clock::now() - start < 1s);
  CHECK(h.shown() == 0);
  CHECK(std::count(ran.begin(), ran.end(), 1u) < 2000);
}

TEST_CASE("sleep returns once the word shows the value") {
  Host h;
  Kernels k(h);
  std::vector<std::uint32_t> ran(1);
  SlowParams params{30'000, ran.data()};
  rig_part part = launch_part(k.slow, {1, 1, 1}, {1, 1, 1}, &params, sizeof params);
  std::atomic<std::uint64_t> seen{0};
  std::chrono::steady_clock::duration took{};
  std::thread sleeper([&] {
    const auto start = std::chrono::steady_clock::now();
    h.driver->sleep(1, 10s);
    took = std::chrono::steady_clock::now() - start;
    seen = h.shown();
  });
  std::this_thread::sleep_for(5ms);
  h.submit(&part, 1, 1);
  sleeper.join();
  CHECK(seen == 1);
  CHECK(took < 5s);
}

TEST_CASE("submit allocates no heap memory after warm-up") {
  Host h;
  Kernels k(h);
  std::vector<GridReport> out(16);
  GridParams params{out.data()};
  std::vector<unsigned char> a(4096, 1), b(4096, 0);
  const rig_box box{0, 0, 4096, 1, 0, 0};
  FillCall call;
  alignas(8) volatile std::uint64_t other = 1;
  const rig_wait wait{&other, 1, 4, 1};
  rig_part parts[4] = {launch_part(k.empty, {1, 1, 1}, {1, 1, 1}, nullptr, 0),
                       launch_part(k.grid, {16, 1, 1}, {1, 1, 1}, &params, sizeof params, 256),
                       copy_part(a.data(), b.data(), &box, 1), fill_part(record_fill, &call)};
  // Submits values first..last, waiting for room when the ring is full; no test macros
  // inside (they may allocate).
  auto run = [&](std::uint64_t first, std::uint64_t last) {
    const char* failure = nullptr;
    for (std::uint64_t v = first; v <= last; ++v) {
      while (h.room(parts, 4, 1) == RIG_LATER) h.driver->sleep(h.shown() + 1, 1ms);
      if (h.table->submit(h.edge, parts, 4, &wait, 1, v, nullptr, &failure) != RIG_COMMITTED)
        return false;
    }
    while (h.shown() < last) h.driver->sleep(last, 1ms);
    return true;
  };
  REQUIRE(run(1, 600));  // more than twice round the ring
  const std::uint64_t before = rig::heap_count::process();
  const bool ok = run(601, 2000);
  const std::uint64_t after = rig::heap_count::process();
  REQUIRE(ok);
  CHECK(after - before == 0);
  CHECK(call.v == 2000);
}

TEST_CASE("an idle driver uses no CPU: its threads park") {
  Host h;
  Kernels k(h);
  rig_part part = launch_part(k.empty, {64, 1, 1}, {1, 1, 1}, nullptr, 0);
  h.submit(&part, 1, 1);
  h.wait(1);
  std::this_thread::sleep_for(100ms);  // past every spin
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(300ms);
  const double used = process_cpu_seconds() - before;
  CHECK(used < 0.015);
}

// ---------------------------------------------------------------------------------------
// Measures: the launches of timed values. The queue's machinery is checked with software
// perf events, which machines without a PMU (VMs) have too: task-clock, the nanoseconds a
// thread ran, is summed over the threads that ran a launch's groups.

namespace {

const rig::host::CounterEvent kSoftwareCounters[] = {
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
};

std::uint64_t thread_cpu_ns() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::uint64_t(t.tv_sec) * 1'000'000'000u + std::uint64_t(t.tv_nsec);
}

// A kernel in this program (a launch's code when it has no kernel record): each group runs
// on its thread's CPU for params->ns nanoseconds, and adds the time it ran and a mark of
// its thread to the params.
struct BurnParams {
  std::uint64_t ns;
  std::atomic<std::uint64_t>* ran_ns;
  std::atomic<std::uint64_t>* threads;  // a bit per thread seen (its id modulo 64)
};
extern "C" void burn(const void* p, const rig_host_group*) {
  const auto* params = static_cast<const BurnParams*>(p);
  const std::uint64_t start = thread_cpu_ns();
  std::uint64_t now = start;
  while (now - start < params->ns) now = thread_cpu_ns();
  params->ran_ns->fetch_add(now - start);
  params->threads->fetch_or(std::uint64_t(1) << (std::uint64_t(gettid()) % 64));
}

rig_part burn_part(const BurnParams& params, std::uint32_t groups) {
  edge::Entry e;
  e.code = reinterpret_cast<std::uint64_t>(&burn);
  return launch_part(e, {groups, 1, 1}, {1, 1, 1}, &params, sizeof params);
}

// A host queue that counts `events` with two helpers, on a word of its own.
struct CountingQueue {
  alignas(8) volatile std::uint64_t word = 0;
  rig::host::HostQueue queue;

  explicit CountingQueue(std::span<const rig::host::CounterEvent> events = kSoftwareCounters)
      : queue(&word, nullptr, 2, events) {}
  ~CountingQueue() { queue.stop("the test is over"); }

  void submit(rig_part* parts, std::uint32_t count, std::uint64_t v, std::uint64_t* times) {
    char why[RIG_WHY] = "";
    REQUIRE(queue.room(parts, count, 0, why) == RIG_FITS);
    const char* failure = nullptr;
    REQUIRE(queue.submit(parts, count, nullptr, 0, v, times, &failure) == RIG_COMMITTED);
  }
  void wait(std::uint64_t v) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (load(word) < v) {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      queue.sleep(v, 10ms);
    }
  }
  // measures(v) into rows of zeroes for `launches` launches.
  std::vector<std::uint64_t> measures(std::uint64_t v, std::size_t launches) {
    std::vector<std::uint64_t> out(launches * queue.row_words(), 0);
    const char* failure = nullptr;
    REQUIRE(queue.measures(v, out.data(), &failure) == RIG_OK);
    return out;
  }
  void release(std::uint64_t v) {
    const char* failure = nullptr;
    REQUIRE(queue.measures(v, nullptr, &failure) == RIG_OK);
  }
};

// Whether this process may count software events; says why not when it may not.
bool software_counting() {
  if (auto why = rig::host::probe_counters(kSoftwareCounters)) {
    MESSAGE("perf events are not allowed here, so the counted paths are not checked: " << *why);
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a timed launch's row holds its start and end inside the value's, and its counts summed over the threads that ran its groups") {
  if (!software_counting()) return;
  CountingQueue q;
  CHECK(q.queue.row_words() == 5);
  std::atomic<std::uint64_t> ran{0}, threads{0};
  const BurnParams params{2'000'000, &ran, &threads};  // 2 ms of CPU per group
  rig_part part = burn_part(params, 8);
  std::uint64_t times[2] = {0, 0};
  q.submit(&part, 1, 1, times);
  q.wait(1);
  const auto row = q.measures(1, 1);
  REQUIRE(row[0] == 1);
  CHECK(times[0] <= row[1]);
  CHECK(row[1] <= row[2]);
  CHECK(row[2] <= times[1]);
  // task-clock, summed: every group's time, whichever thread ran it, and little else.
  const std::uint64_t task_clock = row[3];
  MESSAGE("task-clock " << task_clock << " ns for " << ran.load() << " ns of groups on "
                        << __builtin_popcountll(threads.load()) << " threads");
  CHECK(task_clock >= ran.load() * 95 / 100);
  CHECK(task_clock <= ran.load() + 5'000'000);
  q.release(1);
}

TEST_CASE("measures writes a row per launch in the order of the parts, none for copies and fills") {
  if (!software_counting()) return;
  CountingQueue q;
  std::atomic<std::uint64_t> ran1{0}, ran2{0}, threads{0};
  const BurnParams one{1'000'000, &ran1, &threads}, two{1'000'000, &ran2, &threads};
  std::vector<unsigned char> a(64, 7), b(64, 0);
  const rig_box box{0, 0, 64, 1, 0, 0};
  FillCall call;
  rig_part parts[4] = {burn_part(one, 1), copy_part(a.data(), b.data(), &box, 1), burn_part(two, 2),
                       fill_part(record_fill, &call)};
  std::uint64_t times[2] = {0, 0};
  q.submit(parts, 4, 1, times);
  q.wait(1);
  const auto rows = q.measures(1, 2);
  const std::size_t n = q.queue.row_words();
  REQUIRE(rows[0] == 1);
  REQUIRE(rows[n] == 1);
  CHECK(times[0] <= rows[1]);
  CHECK(rows[2] <= rows[n + 1]);  // the second launch starts after the first ends
  CHECK(rows[n + 2] <= times[1]);
  CHECK(rows[3] >= ran1.load() * 95 / 100);
  CHECK(rows[n + 3] >= ran2.load() * 95 / 100);
  CHECK(ran2.load() >= 2'000'000);
  CHECK(b == a);
  CHECK(call.v == 1);
  q.release(1);
}

TEST_CASE("a value submit did not time is not measured: measures writes nothing") {
  if (!software_counting()) return;
  CountingQueue q;
  std::atomic<std::uint64_t> ran{0}, threads{0};
  const BurnParams params{100'000, &ran, &threads};
  rig_part part = burn_part(params, 4);
  q.submit(&part, 1, 1, nullptr);
  q.wait(1);
  const auto row = q.measures(1, 1);
  CHECK(std::all_of(row.begin(), row.end(), [](std::uint64_t w) { return w == 0; }));
  CHECK(ran.load() >= 400'000);
}

TEST_CASE("measures writes nothing before the word shows the value, and rows let go early are freed once it does") {
  if (!software_counting()) return;
  CountingQueue q;
  std::atomic<std::uint64_t> ran{0}, threads{0};
  const BurnParams slow{60'000'000, &ran, &threads};  // 60 ms of CPU
  rig_part part = burn_part(slow, 1);
  std::uint64_t times[2] = {0, 0};
  q.submit(&part, 1, 1, times);
  const auto early = q.measures(1, 1);
  CHECK(load(q.word) == 0);  // still running: the check above asked too early
  CHECK(std::all_of(early.begin(), early.end(), [](std::uint64_t w) { return w == 0; }));
  q.release(1);  // let go while the dispatcher may still write the row
  q.wait(1);
  const auto after = q.measures(1, 1);  // v was let go: nothing
  CHECK(std::all_of(after.begin(), after.end(), [](std::uint64_t w) { return w == 0; }));
  // The next timed value reuses the storage; under ASan a row freed too early would show.
  const BurnParams quick{100'000, &ran, &threads};
  rig_part next = burn_part(quick, 2);
  std::uint64_t times2[2] = {0, 0};
  q.submit(&next, 1, 2, times2);
  q.wait(2);
  CHECK(q.measures(2, 1)[0] == 1);
  q.release(2);
}

TEST_CASE("a launch whose threads cannot count is left unmeasured, and still runs") {
  const rig::host::CounterEvent bogus[] = {{"bogus", PERF_TYPE_HARDWARE, 0xfff}};
  CountingQueue q(bogus);
  std::atomic<std::uint64_t> ran{0}, threads{0};
  const BurnParams params{100'000, &ran, &threads};
  rig_part part = burn_part(params, 4);
  std::uint64_t times[2] = {0, 0};
  q.submit(&part, 1, 1, times);
  q.wait(1);
  CHECK(times[1] >= times[0]);
  CHECK(times[0] != 0);
  const auto row = q.measures(1, 1);
  CHECK(std::all_of(row.begin(), row.end(), [](std::uint64_t w) { return w == 0; }));
  CHECK(ran.load() >= 400'000);
  q.release(1);
}

TEST_CASE("a queue that counts allocates no heap memory for values submit does not time") {
  if (!software_counting()) return;
  CountingQueue q;
  std::atomic<std::uint64_t> ran{0}, threads{0};
  const BurnParams params{0, &ran, &threads};
  rig_part parts[2] = {burn_part(params, 1), burn_part(params, 4)};
  auto run = [&](std::uint64_t first, std::uint64_t last) {
    const char* failure = nullptr;
    for (std::uint64_t v = first; v <= last; ++v) {
      char why[RIG_WHY] = "";
      while (q.queue.room(parts, 2, 0, why) == RIG_LATER) q.queue.sleep(load(q.word) + 1, 1ms);
      if (q.queue.submit(parts, 2, nullptr, 0, v, nullptr, &failure) != RIG_COMMITTED) return false;
    }
    while (load(q.word) < last) q.queue.sleep(last, 1ms);
    return true;
  };
  REQUIRE(run(1, 600));
  const std::uint64_t before = rig::heap_count::process();
  const bool ok = run(601, 2000);
  const std::uint64_t after = rig::heap_count::process();
  REQUIRE(ok);
  CHECK(after - before == 0);
}

TEST_CASE("where the host counts, a timed launch's row holds its instructions and cycles") {
  Host h;
  if (h.table->measures == nullptr) {
    MESSAGE("this machine counts no instructions or cycles (facts list no counters)");
    return;
  }
  std::atomic<std::uint64_t> ran{0}, threads{0};
  const BurnParams params{2'000'000, &ran, &threads};
  rig_part part = burn_part(params, 4);
  std::uint64_t times[2] = {0, 0};
  h.submit(&part, 1, 1, nullptr, 0, times);
  h.wait(1);
  std::uint64_t row[5] = {};
  const char* failure = nullptr;
  REQUIRE(h.table->measures(h.edge, 1, row, &failure) == RIG_OK);
  REQUIRE(row[0] == 1);
  CHECK(times[0] <= row[1]);
  CHECK(row[2] <= times[1]);
  MESSAGE("instructions " << row[3] << ", cycles " << row[4]);
  CHECK(row[3] > 100'000);  // 8 ms of spinning on the clock
  CHECK(row[4] > 100'000);
  CHECK(h.table->measures(h.edge, 1, nullptr, &failure) == RIG_OK);
}

// ---------------------------------------------------------------------------------------
// The dispatcher's idle hook (cpu::DispatcherIdle).

namespace {

// Whether `done()` holds within 10 s.
template <class F>
bool eventually_true(F&& done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A hook that records on which thread and how often the dispatcher calls it, and submits,
// or stops the device, from a round when the test asks it to.
struct Idling {
  alignas(8) volatile std::uint64_t word = 0;
  std::unique_ptr<edge::Driver> driver;
  void* edge = nullptr;
  const rig_driver* table = nullptr;

  std::atomic<std::uint64_t> begins{0}, rounds{0}, ends{0}, parkings{0};
  std::atomic<bool> open{false};  // between a begin and its end
  std::atomic<bool> out_of_order{false};  // a round or end outside a begin .. end
  std::atomic<std::thread::id> round_thread{};
  std::atomic<std::uint64_t> submit_value{0};  // a round submits this value (a fill) after the one before it
  std::atomic<int> submit_answer{-1};
  std::atomic<bool> stop_asked{false}, stopped_in_round{false};
  std::atomic<std::thread::id> fill_thread{};

  static int record_fill(void*, void* arg, std::uint64_t) {
    static_cast<Idling*>(arg)->fill_thread.store(std::this_thread::get_id());
    return 0;
  }

  std::atomic<bool> ready{false};  // the driver is made: its dispatcher's rounds may use it

  Idling() {
    rig::cpu::DispatcherIdle idle;
    idle.context = this;
    idle.begin = [](void* c) {
      auto* self = static_cast<Idling*>(c);
      if (self->open.exchange(true)) self->out_of_order = true;
      ++self->begins;
    };
    idle.round = [](void* c) { return static_cast<Idling*>(c)->round(); };
    idle.end = [](void* c, bool parking) {
      auto* self = static_cast<Idling*>(c);
      if (!self->open.exchange(false)) self->out_of_order = true;
      ++self->ends;
      if (parking) ++self->parkings;
    };
    driver = rig::cpu::make_host_driver_idling(&word, idle);
    edge = driver->facts().edge;
    table = *static_cast<const rig_driver* const*>(edge);
    ready = true;
  }
  ~Idling() { driver->stop("the test is over"); }

  // Submits value v, a fill that counts into `ran`, from this thread.
  void submit_here(std::uint64_t v, int* ran) {
    rig_part part = fill_part([](void*, void* arg, std::uint64_t) { return ++*static_cast<int*>(arg), 0; }, ran);
    const char* failure = nullptr;
    REQUIRE(table->submit(edge, &part, 1, nullptr, 0, v, nullptr, &failure) == RIG_COMMITTED);
  }

  bool round() {
    if (!open.load()) out_of_order = true;
    // The dispatcher starts waiting while the driver is being made.
    if (!ready.load()) return false;
    round_thread.store(std::this_thread::get_id());
    ++rounds;
    if (stop_asked.exchange(false)) {
      driver->stop("stopped from its dispatcher's idle hook");
      stopped_in_round = true;
      return true;
    }
    // A round submits value v once the word shows the value before it.
    if (const std::uint64_t v = submit_value.load(); v != 0 && load(word) == v - 1) {
      submit_value = 0;
      rig_part part = fill_part(&Idling::record_fill, this);
      const char* failure = nullptr;
      submit_answer = table->submit(edge, &part, 1, nullptr, 0, v, nullptr, &failure);
      return true;
    }
    return false;
  }
};

}  // namespace

TEST_CASE("a host device's dispatcher calls its idle hook while it waits, and runs on that thread the work a round "
          "submits") {
  Idling h;
  // Value 1 from this thread; the round after it, value 2.
  h.submit_value = 2;
  int ran = 0;
  h.submit_here(1, &ran);
  REQUIRE(eventually_true([&] { return load(h.word) == 2; }));
  CHECK(ran == 1);
  CHECK(h.round_thread.load() != std::this_thread::get_id());
  CHECK(h.submit_answer.load() == RIG_COMMITTED);
  // The fill ran on the thread that submitted it from its round: no hand-off.
  CHECK(h.fill_thread.load() == h.round_thread.load());
  CHECK_FALSE(h.out_of_order.load());
}

TEST_CASE("a host device's dispatcher ends its idle rounds before it parks, and begins them again once a submit rings "
          "it") {
  Idling h;
  // Its spin is tens of microseconds: it parks, saying so, and its rounds stop.
  REQUIRE(eventually_true([&] { return h.parkings.load() >= 1; }));
  std::uint64_t rounds = h.rounds.load();
  std::this_thread::sleep_for(100ms);
  CHECK(h.rounds.load() == rounds);
  CHECK_FALSE(h.open.load());
  // A value from another thread wakes it: it runs the value, then rounds again.
  int ran = 0;
  h.submit_here(1, &ran);
  REQUIRE(eventually_true([&] { return load(h.word) == 1; }));
  CHECK(ran == 1);
  REQUIRE(eventually_true([&] { return h.rounds.load() > rounds; }));
  REQUIRE(eventually_true([&] { return h.parkings.load() >= 2; }));
  CHECK(h.begins.load() == h.ends.load());
  CHECK_FALSE(h.out_of_order.load());
}

TEST_CASE("a host device stopped from its dispatcher's idle hook stops: later work fails with the reason, and the "
          "driver is destroyed without waiting on itself") {
  auto h = std::make_unique<Idling>();
  h->stop_asked = true;
  // A dispatcher that parked rounds again once rung: a value rings it, and a round stops it.
  int ran = 0;
  h->submit_here(1, &ran);
  REQUIRE(eventually_true([&] { return h->stopped_in_round.load(); }));
  const char* failure = nullptr;
  CHECK(h->table->commit(h->edge, 2, &failure) == RIG_FAILED);
  REQUIRE(failure != nullptr);
  CHECK(std::string(failure).find("stopped from its dispatcher's idle hook") != std::string::npos);
  const std::uint64_t rounds = h->rounds.load();
  std::this_thread::sleep_for(50ms);
  CHECK(h->rounds.load() == rounds);  // the dispatcher ended
  h.reset();                          // joins it
}
