// Tests of the fake driver itself, called as rig calls a driver: through edge::Driver and
// the C table its facts' edge points to.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "fake_driver.hpp"

using namespace rig;
using fake::Call;

namespace {

// One fake device, held and called as rig would hold and call it.
struct Device {
  alignas(8) std::uint64_t word;
  std::shared_ptr<fake::Control> control;
  std::unique_ptr<edge::Driver> driver;
  edge::Facts facts;
  const rig_driver* table;
  std::uint64_t next;
  const char* failure = nullptr;

  explicit Device(fake::Options o = {}, std::uint64_t start = 0) : word(start), next(start + 1) {
    auto [open, c] = fake::opener("FAKE:0", std::move(o));
    control = c;
    driver = std::move(open.make(&word).value());
    facts = driver->facts();
    table = *static_cast<const rig_driver* const*>(facts.edge);
  }
  ~Device() {
    if (!control->stopped()) driver->stop("the test is over");
  }
  char why[RIG_WHY] = "";  // room's reason of its last RIG_NEVER
  int room(std::vector<rig_part>& parts, std::uint32_t waits = 0) {
    why[0] = 0;
    return table->room(facts.edge, parts.data(), parts.size(), waits, why);
  }
  int submit(std::vector<rig_part> parts, std::vector<rig_wait> waits = {},
             std::uint64_t* times = nullptr) {
    return table->submit(facts.edge, parts.data(), parts.size(), waits.data(), waits.size(), next++,
                         times, &failure);
  }
  int commit(std::uint64_t v) { return table->commit(facts.edge, v, &failure); }
  std::uint64_t shown() const { return __atomic_load_n(facts.word, __ATOMIC_ACQUIRE); }
  std::byte* alloc(std::size_t n) {
    auto r = driver->alloc(Memory::Device, n);
    REQUIRE(r);
    return reinterpret_cast<std::byte*>(*driver->locate(*r).host);
  }
  edge::Entry entry(std::string_view binary, std::string_view name) {
    auto code = driver->image(std::as_bytes(std::span(binary)));
    REQUIRE(code);
    return std::get<edge::Entry>(driver->entry(std::get<edge::Loaded>(*code).image, name));
  }
};

rig_part part(Kind kind, std::uint32_t queue = 0) {
  rig_part p;
  std::memset(&p, 0, sizeof p);
  p.kind = std::uint32_t(kind), p.queue = queue;
  return p;
}
rig_part words(const std::vector<std::uint32_t>& w, std::uint32_t queue = 0) {
  auto p = part(Kind::Words, queue);
  p.work.words = {w.data(), w.size()};
  return p;
}
rig_part copy_part(const void* src, void* dst, const std::vector<rig_box>& boxes, int fill = -1) {
  auto p = part(Kind::Copy, 1);
  p.work.copy.src = std::uint64_t(src), p.work.copy.dst = std::uint64_t(dst);
  p.work.copy.boxes = boxes.data(), p.work.copy.count = boxes.size(), p.work.copy.fill = fill;
  return p;
}
rig_part launch(const edge::Entry& e, const std::vector<std::byte>& params,
                std::uint32_t threads = 1) {
  auto p = part(Kind::Launch);
  p.work.launch.code = e.code, p.work.launch.launch = e.launch;
  for (int k = 0; k < 3; ++k) p.work.launch.groups[k] = p.work.launch.threads[k] = 1;
  p.work.launch.threads[0] = threads;
  p.work.launch.params = params.data(), p.work.launch.param_bytes = params.size();
  return p;
}
template <class T>
std::vector<std::byte> bytes_of(const T& value) {
  std::vector<std::byte> b(sizeof value);
  std::memcpy(b.data(), &value, sizeof value);
  return b;
}
const char* kImage = "fake-image\nstore 16 64\nfree - -\n";

}  // namespace

TEST_CASE("facts are well formed") {
  Device d;
  CHECK(d.facts.arch == "fake");
  CHECK(d.facts.budget == 64 << 20);
  REQUIRE(d.facts.queues.size() == 2);
  CHECK(d.facts.queues[0] ==
        Queue{"COMPUTE:0", {Kind::Words, Kind::Fill, Kind::Copy, Kind::Launch}});
  CHECK(d.facts.queues[1] == Queue{"COPY:0", {Kind::Words, Kind::Copy, Kind::Fill}});
  CHECK(d.facts.copy_engine == 1);
  CHECK(d.facts.completion == edge::Completion::Store);
  CHECK((d.facts.waits.stores && d.facts.waits.hosts));
  CHECK((d.facts.maps_host && d.facts.host_addresses));
  CHECK(d.facts.alignment == 256);
  CHECK((d.facts.word == &d.word));
  REQUIRE(d.table);
  CHECK((d.table->room && d.table->submit && d.table->commit && d.table->settle));
  // counters "is [] iff the device measures none, whose measures is NULL"
  CHECK((d.table->measures == nullptr));

  Device lone({.copy_queue = false, .counters = {{"cycles", 1}}});
  CHECK(lone.facts.queues.size() == 1);
  CHECK(lone.facts.copy_engine == 0);
  CHECK((lone.table->measures != nullptr));
  CHECK(lone.facts.counters == std::vector<std::pair<std::string, int>>{{"cycles", 1}});

  Device own({.own_word = true}, 41);
  CHECK((own.facts.word != &own.word));
  CHECK(own.driver->signaled() == 41);
  CHECK(own.control->live_regions() == 1);  // the own word is a region rig frees after stop
  CHECK(own.control->violations().empty());
}

TEST_CASE("room answers each case, and each NEVER with its reason") {
  Device d({.capacity = 4, .grow_to = 8});
  auto e = d.entry(kImage, "store");
  std::vector<std::byte> params(16);
  std::vector<std::uint32_t> w{1};
  auto answer = [&](std::vector<rig_part> parts, std::uint32_t waits = 0) {
    return d.room(parts, waits);
  };
  auto never = [&](std::vector<rig_part> parts, std::string_view reason) {
    CHECK(d.room(parts) == RIG_NEVER);
    CHECK(std::string_view(d.why) == reason);
  };
  never({part(Kind(0))}, "part 0: kind 0, no kind of work");
  never({words(w), words(w, 2)}, "part 1: queue 2, but the device has 2 queues");
  auto on_copy = launch(e, params);
  on_copy.queue = 1;
  never({on_copy}, "part 0: queue COPY:0 does not run Launch");
  auto empty_grid = launch(e, params);
  empty_grid.work.launch.groups[1] = 0;
  never({empty_grid}, "part 0: a launch of 1x0x1 groups of 1x1x1 threads has an empty dimension");
  never({launch(e, params, 0)}, "part 0: a launch of 1x1x1 groups of 0x1x1 threads has an empty dimension");
  never({launch(e, params, 65)}, "part 0: 65 threads per group, over store's limit of 64");
  auto shared = launch(e, params);
  shared.work.launch.shared = 1u << 30;
  never({shared}, "part 0: 1 GiB of shared memory, over the limit of 64 KiB");
  CHECK(answer({launch(e, params, 64)}) == RIG_FITS);
  CHECK(std::string_view(d.why).empty());
  CHECK(answer({words(w), words(w), words(w)}, 1) == RIG_FITS);            // 4 entries
  CHECK(answer({words(w), words(w), words(w), words(w)}, 1) == RIG_GROW);  // 5
  never(std::vector<rig_part>(9, words(w)), "9 parts and 0 waits take 9 queue entries, over the 8 its queues grow to");

  REQUIRE(d.submit({words(w), words(w)}) == RIG_COMMITTED);
  CHECK(answer({words(w), words(w), words(w)}) == RIG_LATER);  // fits once value 1 is reached
  CHECK(d.control->step() == 1);
  CHECK(answer({words(w), words(w), words(w)}) == RIG_FITS);

  CHECK(std::holds_alternative<edge::Grown>(d.driver->grow()));
  CHECK(answer(std::vector<rig_part>(8, words(w))) == RIG_FITS);
  CHECK(std::holds_alternative<edge::Grown>(d.driver->grow()));  // grown to grow_to: no further
  CHECK(answer(std::vector<rig_part>(9, words(w))) == RIG_NEVER);
  CHECK(d.control->violations().empty());
}

TEST_CASE("values run only when stepped, in order, and the word never moves backwards") {
  Device d({}, 5);
  std::vector<std::uint32_t> a{6}, b{7}, c1{8}, c2{80};
  CHECK(d.submit({words(a)}) == RIG_COMMITTED);
  CHECK(d.submit({words(b)}) == RIG_COMMITTED);
  CHECK(d.submit({words(c1, 0), words(c2, 1)}) == RIG_COMMITTED);
  CHECK(d.shown() == 5);
  CHECK(d.control->pending() == 3);
  CHECK(d.control->step(1) == 1);
  CHECK(d.shown() == 6);
  CHECK(d.control->step() == 2);
  CHECK(d.shown() == 8);
  CHECK(d.control->step() == 0);
  CHECK(d.shown() == 8);
  auto log = d.control->log();
  REQUIRE(log.size() == 4);
  CHECK((log[0].value == 6 && log[0].words == a));
  CHECK((log[1].value == 7 && log[1].words == b));
  CHECK((log[2].value == 8 && log[2].queue == 0 && log[2].words == c1));
  CHECK(
      (log[3].value == 8 && log[3].queue == 1 && log[3].kind == Kind::Words && log[3].words == c2));
  CHECK(d.control->violations().empty());
}

TEST_CASE(
    "with commit_every k, submit returns RIG_OK until the k-th value, and commit lets work run") {
  Device d({.commit_every = 3});
  std::vector<std::uint32_t> w{0};
  CHECK(d.submit({words(w)}) == RIG_OK);
  CHECK(d.control->step() == 0);  // encoded, not committed
  CHECK(d.submit({words(w)}) == RIG_OK);
  CHECK(d.submit({words(w)}) == RIG_COMMITTED);
  CHECK(d.submit({words(w)}) == RIG_OK);
  CHECK(d.control->step() == 3);
  CHECK(d.shown() == 3);
  CHECK(d.commit(4) == RIG_OK);
  CHECK(d.commit(4) == RIG_OK);  // committing a committed value does nothing
  CHECK(d.commit(2) == RIG_OK);
  CHECK(d.control->step() == 1);
  CHECK(d.shown() == 4);
  CHECK(d.control->violations().empty());
}

TEST_CASE("a value waits in the queue until its producer's word reaches the wait's value") {
  Device d;
  alignas(8) std::uint64_t producer = 0;
  std::vector<std::uint32_t> w{0};
  CHECK(d.submit({words(w)}, {{&producer, 2, 7, 1}}) == RIG_COMMITTED);
  CHECK(d.submit({words(w)}) == RIG_COMMITTED);
  CHECK(d.control->step() == 0);
  producer = 1;
  CHECK(d.control->step() == 0);
  CHECK(d.shown() == 0);
  producer = 2;
  CHECK(d.control->step() == 2);
  CHECK(d.control->violations().empty());

  Device stores_only({.waits = {true, false}});
  stores_only.submit({words(w)},
                     {{&producer, 1, 7, 0}});  // a Host producer: rig waits for it itself
  CHECK(stores_only.control->violations().size() == 1);
}

TEST_CASE("an injected failure of each kind of call fails that call") {
  auto check = [](Call call, auto&& make_the_call) {
    Device d({.own_word = true});
    std::vector<std::uint32_t> w{0};
    if (call == Call::Settle) {
      std::uint64_t times[2] = {};
      REQUIRE(d.submit({words(w)}, {}, times) == RIG_COMMITTED);
      d.control->step();
    }
    d.control->fail_nth(call, 1, "boom");
    make_the_call(d);
    CHECK(d.control->calls(call) == 1);
  };
  auto c_fails = [](int rc, Device& d) {
    CHECK(rc == RIG_FAILED);
    CHECK(std::string(d.failure) == "boom");
  };
  std::vector<std::uint32_t> w{0};
  check(Call::Room, [&](Device& d) {
    std::vector<rig_part> parts{words(w)};
    CHECK(d.room(parts) == RIG_NEVER);
    CHECK(std::string_view(d.why) == "boom");
  });
  check(Call::Submit, [&](Device& d) { c_fails(d.submit({words(w)}), d); });
  check(Call::Commit, [&](Device& d) { c_fails(d.commit(0), d); });
  check(Call::Settle, [&](Device& d) {
    std::uint64_t times[2] = {};
    c_fails(d.table->settle(d.facts.edge, 1, times, &d.failure), d);
  });
  check(Call::Alloc, [](Device& d) {
    CHECK_THROWS_WITH_AS(d.driver->alloc(Memory::Device, 1), "boom", edge::Fault);
  });
  check(Call::Map, [](Device& d) { CHECK_THROWS_AS(d.driver->map_host(4096, 4096), edge::Fault); });
  check(Call::Image, [](Device& d) {
    auto code = d.driver->image(std::as_bytes(std::span(std::string_view(kImage))));
    CHECK(code.error() == "boom");
  });
  check(Call::Entry, [](Device& d) {
    auto code = d.driver->image(std::as_bytes(std::span(std::string_view(kImage))));
    CHECK_THROWS_AS(d.driver->entry(std::get<edge::Loaded>(*code).image, "store"), edge::Fault);
  });
  check(Call::Grow, [](Device& d) { CHECK_THROWS_AS(d.driver->grow(), edge::Fault); });
  check(Call::Signaled, [](Device& d) { CHECK_THROWS_AS(d.driver->signaled(), edge::Fault); });
}

TEST_CASE("an injected \"no room\" answer, and failures drawn with a seeded probability") {
  Device d;
  auto code = d.driver->image(std::as_bytes(std::span(std::string_view(kImage))));
  auto image = std::get<edge::Loaded>(*code).image;
  for (auto call : {Call::Room, Call::Alloc, Call::Map, Call::Entry, Call::Grow})
    d.control->no_room_nth(call, 1);
  std::vector<std::uint32_t> w{0};
  std::vector<rig_part> parts{words(w)};
  CHECK(d.room(parts) == RIG_LATER);
  CHECK(d.room(parts) == RIG_FITS);  // only the first
  CHECK(!d.driver->alloc(Memory::Device, 1));
  CHECK(std::holds_alternative<edge::NoRoom>(d.driver->map_host(4096, 4096)));
  CHECK(std::holds_alternative<edge::NoMemory>(d.driver->entry(image, "store")));
  CHECK(std::holds_alternative<edge::Short>(d.driver->grow()));
  CHECK_THROWS_AS(d.control->no_room_nth(Call::Submit, 1), std::invalid_argument);

  auto pattern = [](std::uint64_t seed) {
    Device p;
    p.control->fail_with_probability(Call::Alloc, 0.5, seed);
    std::string fails;
    for (int i = 0; i < 64; ++i) {
      try {
        p.driver->free(*p.driver->alloc(Memory::Device, 1));
        fails += '.';
      } catch (const edge::Fault&) {
        fails += 'x';
      }
    }
    return fails;
  };
  auto once = pattern(42);
  CHECK(once == pattern(42));
  CHECK(once.find('x') != std::string::npos);
  CHECK(once.find('.') != std::string::npos);
}

TEST_CASE("a fill is called during submit with its queue, and a failing fill fails the submit") {
  Device d;
  auto writes = +[](void* queue, void* arg, std::uint64_t v) {
    auto* ring = static_cast<fake::FillQueue*>(queue);
    ring->words = {ring->queue, std::uint32_t(v), *static_cast<std::uint32_t*>(arg)};
    return 0;
  };
  std::uint32_t arg = 99;
  auto fill = part(Kind::Fill, 1);
  fill.work.fill = {writes, &arg, 3, 0};
  CHECK(d.submit({fill}) == RIG_COMMITTED);
  d.control->step();
  auto log = d.control->log();
  REQUIRE(log.size() == 1);
  CHECK((log[0].kind == Kind::Fill && log[0].words == std::vector<std::uint32_t>{1, 1, 99}));

  Device e;
  fill.work.fill = {+[](void*, void*, std::uint64_t) { return 7; }, nullptr, 0, 0};
  CHECK(e.submit({fill}) == RIG_FAILED);
  CHECK(std::string(e.failure) == "the fill of value 1 returned 7");
}

TEST_CASE("copies move pitched boxes, fills set bytes, and a copy outside its regions faults") {
  Device d;
  auto* src = d.alloc(64);
  auto* dst = d.alloc(64);
  for (int i = 0; i < 64; ++i) src[i] = std::byte(i), dst[i] = std::byte(0);
  std::vector<rig_box> boxes{{1, 2, 3, 2, 8, 5}};  // rows 2 of 3 bytes: src 1, 9; dst 2, 7
  std::vector<rig_box> fills{{0, 20, 4, 2, 0, 10}};
  auto by_handle = copy_part(nullptr, nullptr, {{0, 0, 2, 1, 0, 0}});
  by_handle.work.copy.src_handle = std::intptr_t(src), by_handle.work.copy.src_offset = 40;
  by_handle.work.copy.dst_handle = std::intptr_t(dst), by_handle.work.copy.dst_offset = 50;
  std::vector<rig_box> by_handle_boxes{{0, 0, 2, 1, 0, 0}};
  by_handle.work.copy.boxes = by_handle_boxes.data();
  CHECK(d.submit({copy_part(src, dst, boxes), copy_part(nullptr, dst, fills, 0xab), by_handle}) ==
        RIG_COMMITTED);
  CHECK(d.control->step() == 1);
  std::vector<int> got;
  for (int i = 0; i < 64; ++i) got.push_back(int(dst[i]));
  std::vector<int> want(64, 0);
  want[2] = 1, want[3] = 2, want[4] = 3, want[7] = 9, want[8] = 10, want[9] = 11;
  for (int i : {20, 21, 22, 23, 30, 31, 32, 33}) want[i] = 0xab;
  want[50] = 40, want[51] = 41;
  CHECK(got == want);

  std::vector<rig_box> past{{0, 252, 8, 1, 0, 0}};  // regions are 256 bytes
  CHECK(d.submit({copy_part(src, dst, past)}) == RIG_COMMITTED);
  CHECK(d.control->step() == 0);
  CHECK(d.control->violations().size() == 1);
  CHECK(d.submit({copy_part(src, dst, boxes)}) == RIG_FAILED);  // the fault shows at the next call
  CHECK(std::string(d.failure) == "a copy of value 2 reaches outside its regions");
  CHECK_THROWS_AS(d.driver->sleep(2, std::chrono::milliseconds(1)), edge::Fault);
}

TEST_CASE(
    "live_regions counts regions until they are freed, and alloc answers no room over its memory") {
  Device d({.memory = 1024});
  auto a = d.driver->alloc(Memory::Device, 512),
       b = d.driver->alloc(Memory::Mapped, 300);  // 512 bytes each
  REQUIRE((a && b));
  CHECK(!d.driver->alloc(Memory::Device, 1));
  CHECK(d.control->live_regions() == 2);
  CHECK(d.control->live_bytes() == 1024);
  CHECK(d.driver->locate(*a).address.value() % 256 == 0);
  d.driver->free(*a);
  CHECK(d.control->live_regions() == 1);
  CHECK(d.driver->alloc(Memory::Device, 1));
  d.control->set_memory(0);
  CHECK(!d.driver->alloc(Memory::Device, 1));
  auto m = std::get<edge::Region>(d.driver->map_host(0x10000, 4096));
  CHECK(d.driver->locate(m).host == 0x10000);
  CHECK(d.control->live_regions() == 3);
  d.driver->free(m);
  CHECK(d.control->live_regions() == 2);
  CHECK(d.control->violations().empty());
  CHECK_THROWS_AS(d.driver->free(m), edge::Fault);  // freed twice
  CHECK(d.control->violations().size() == 1);
}

TEST_CASE(
    "a launch runs the kernel defined under its function's name, with a copy of its parameters") {
  Device d;
  d.control->define("store", [](std::span<const std::byte> params, const rig_launch& l) {
    std::uint64_t* at;
    std::uint64_t value;
    std::memcpy(&at, params.data(), 8), std::memcpy(&value, params.data() + 8, 8);
    *at = value + l.threads[0];
  });
  auto e = d.entry(kImage, "store");
  auto* out = reinterpret_cast<std::uint64_t*>(d.alloc(8));
  struct {
    std::uint64_t* at;
    std::uint64_t value;
  } args{out, 40};
  auto params = bytes_of(args);
  CHECK(d.submit({launch(e, params, 2)}) == RIG_COMMITTED);
  std::fill(params.begin(), params.end(), std::byte(0));  // "only valid during the call"
  CHECK(d.control->step() == 1);
  CHECK(*out == 42);

  CHECK(d.submit({launch(d.entry(kImage, "free"), params)}) == RIG_COMMITTED);
  CHECK(d.control->step() == 0);
  CHECK(d.commit(2) == RIG_FAILED);
  CHECK(std::string(d.failure) == "no kernel defined for free");
}

TEST_CASE("timed values are settled, and their launches measured") {
  Device d({.counters = {{"a", 1}, {"b", 2}}});
  d.control->define("store", [](auto, auto&) {});
  auto e = d.entry(kImage, "store");
  std::vector<std::byte> params(16);
  std::vector<std::uint32_t> w{0};
  std::uint64_t times[2] = {}, untimed[2] = {};
  CHECK(d.submit({words(w), launch(e, params)}, {}, times) == RIG_COMMITTED);
  CHECK(d.submit({launch(e, params)}) == RIG_COMMITTED);
  d.control->step();
  CHECK((times[0] != 0 && times[0] <= times[1]));  // written before the word showed 1
  CHECK(d.table->settle(d.facts.edge, 1, times, &d.failure) == RIG_OK);
  CHECK(d.table->settle(d.facts.edge, 2, untimed, &d.failure) == RIG_FAILED);

  std::vector<std::uint64_t> row(6);
  CHECK(d.table->measures(d.facts.edge, 1, row.data(), &d.failure) == RIG_OK);
  CHECK(row[0] == 1);
  CHECK((times[0] <= row[1] && row[1] <= row[2] && row[2] <= times[1]));
  CHECK(std::vector(row.begin() + 3, row.end()) == std::vector<std::uint64_t>{1, 2, 3});
  CHECK(d.table->measures(d.facts.edge, 1, nullptr, &d.failure) == RIG_OK);
  CHECK(d.control->violations().empty());
  d.table->measures(d.facts.edge, 1, row.data(), &d.failure);  // "later calls do not name v"
  CHECK(d.control->violations().size() == 1);
}

TEST_CASE(
    "stop drops the queue, the word shows the last submitted value, and later calls are breaches") {
  Device d;
  auto region = d.driver->alloc(Memory::Device, 8);
  std::vector<std::uint32_t> w{0};
  d.submit({words(w)});
  d.submit({words(w)});
  d.control->fail_nth(Call::Submit, 3);
  CHECK(d.submit({words(w)}) == RIG_FAILED);  // value 3 was given to submit all the same
  d.driver->stop("lost: test");
  CHECK(d.control->stopped());
  CHECK(d.control->stop_reason() == "lost: test");
  CHECK(d.shown() == 3);
  CHECK(d.control->pending() == 0);
  CHECK(d.control->step() == 0);
  CHECK(d.control->log().empty());
  d.driver->free(*region);  // free and unload may follow stop
  CHECK(d.control->violations().empty());
  CHECK(d.submit({words(w)}) == RIG_FAILED);
  CHECK(d.control->violations().size() == 1);
}

TEST_CASE("sleep runs committed work, or waits for another thread's step") {
  std::vector<std::uint32_t> w{0};
  Device d;
  d.submit({words(w)});
  d.driver->sleep(1, std::chrono::milliseconds(1));
  CHECK(d.shown() == 1);

  Device idle({.runs_when_asleep = false});
  idle.submit({words(w)});
  idle.driver->sleep(1, std::chrono::milliseconds(1));
  CHECK(idle.shown() == 0);
  std::thread stepper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    idle.control->step();
  });
  idle.driver->sleep(1, std::chrono::seconds(10));
  CHECK(idle.shown() == 1);
  stepper.join();
}

TEST_CASE("a fake image lists its functions, and entry finds them") {
  Device d;
  auto load = [&](std::string_view text) {
    return d.driver->image(std::as_bytes(std::span(text)));
  };
  CHECK(!load("ELF"));
  CHECK(load("fake-image\nk 16\n").error().find("bad line \"k 16\"") != std::string::npos);
  CHECK(load("fake-image\nk x 1\n").error().find("bad line") != std::string::npos);
  auto free = d.entry(kImage, "free");
  CHECK((!free.params && !free.threads));
  auto store = d.entry(kImage, "store");
  CHECK((store.params == 16 && store.threads == 64));
  auto code = load(kImage);
  auto image = std::get<edge::Loaded>(*code).image;
  CHECK(std::holds_alternative<edge::Absent>(d.driver->entry(image, "missing")));
  CHECK(d.control->live_images() == 3);
  d.driver->unload(image);
  CHECK(d.control->live_images() == 2);

  Device placed({.place_images = true});
  auto placing = placed.driver->image(std::as_bytes(std::span(std::string_view(kImage))));
  auto& place = std::get<edge::Place>(*placing);
  CHECK(place.bytes == std::string_view(kImage).size());
  CHECK(placed.control->live_images() ==
        0);  // "nothing on the device before the function is called"
  auto [id, text] = place.place(*placed.driver->alloc(Memory::Device, place.bytes));
  CHECK(text == kImage);
  CHECK(std::holds_alternative<edge::Entry>(placed.driver->entry(id, "store")));
}

TEST_CASE("rig's breaches of the contract are recorded") {
  Device d;
  std::vector<std::uint32_t> w{0};
  d.next = 3;
  d.submit({words(w)});  // values must follow 0: 1, 2, …
  CHECK(d.control->violations().size() == 1);
  d.commit(9);
  CHECK(d.control->violations().size() == 2);
  auto [open, control] = fake::opener("FAKE:1");
  std::uint64_t word = 0;
  open.make(&word).value().reset();  // dropped without stop
  CHECK(control->violations() == std::vector<std::string>{"the driver was dropped without stop"});
}
