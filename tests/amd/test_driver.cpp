// The AMD driver (amdgpu/) on the simulator (tests/sim/amd/), through rig's public API: each
// test is one promise of rig/amd.hpp.
#include <doctest/doctest.h>

#include <rig/amd_abi.hpp>
#include <rig/rig.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "decode.hpp"
#include "fake_driver.hpp"
#include "kfd.hpp"
#include "pm4.hpp"
#include "sdma.hpp"
#include "support.hpp"

using namespace rig;
using namespace rig::test::amd;
namespace pm4 = rig::amd::pm4;
namespace sdma = rig::amd::sdma;

namespace {

// PM4 WRITE_DATA of `values` at `address`.
std::vector<std::uint32_t> pm4_write(std::uint64_t address, std::vector<std::uint32_t> values) {
  std::vector<std::uint32_t> w(pm4::Pm4::write_data_size(std::uint32_t(values.size())));
  pm4::Pm4(pm4::Gen::Gfx11, w).write_data(address, values);
  return w;
}

std::uint32_t read_u32(const Buffer& b, std::size_t i = 0) {
  return b.read<std::uint32_t>([&](std::span<const std::uint32_t> x) { return x[i]; });
}

// Runs a Words part on d's compute queue that writes `value` into `out`, waits, and checks it.
void writes(const Device& d, const Buffer& out, std::uint32_t value) {
  auto words = words_buffer(d, pm4_write(out.address(), {value}));
  Run run;
  submit(words_part(d, words), run, {}, {}).wait();
  CHECK(read_u32(out) == value);
}

}  // namespace

TEST_CASE("the device's facts come from the KFD topology") {
  auto& sim = simulator();
  Opened d(sim);
  const auto& f = d->facts();
  CHECK(d->name() == "AMD:0");
  CHECK(f.arch == "gfx1100");
  CHECK(f.budget == sim.config().vram_bytes);
  REQUIRE(f.queues.size() == 2);
  CHECK(f.queues[0].name == "COMPUTE:0");
  CHECK(f.queues[0].runs == std::vector<Kind>{Kind::Words, Kind::Fill, Kind::Launch});
  CHECK(f.queues[1].name == "COPY:0");
  CHECK(f.queues[1].runs == std::vector<Kind>{Kind::Words, Kind::Copy, Kind::Fill});
  CHECK(f.copy_engine == std::optional<int>(1));
  CHECK(f.completion == edge::Completion::Store);
  CHECK((f.waits.stores && f.waits.hosts));
  CHECK(f.host_addresses);
  CHECK(f.maps_host);
  CHECK(f.alignment == 4096);
  CHECK(f.cache_bytes == std::optional<std::size_t>(4u << 20));
  CHECK(f.hang_ms == std::optional<int>(10'000));
  CHECK(f.bus == std::optional<std::string>("0000:03:00.0"));
  const auto* abi = d->capability(rig::amd::kAbi);
  REQUIRE(abi);
  CHECK(abi->arch == "gfx1100");
  CHECK(abi->wave_size == 32);
  CHECK(abi->compute_units == sim.config().compute_units);
  CHECK(abi->lds_bytes == 64 * 1024);
  CHECK(abi->timeline_word == reinterpret_cast<std::uint64_t>(&rig_words[d->index()]));
}

TEST_CASE("gpus lists the topology's GPUs, and a missing GPU makes make an Error") {
  auto& sim = simulator();
  auto list = rig::amd::gpus(sim);
  REQUIRE(list);
  REQUIRE(list->size() == 1);
  CHECK((*list)[0].arch == "gfx1100");
  CHECK((*list)[0].gpu_id == sim.config().gpu_id);
  auto& none = simulator({.gpu_present = false});
  CHECK(rig::amd::gpus(none)->empty());
  auto d = rig::open(rig::amd::opener(0, none));
  REQUIRE(!d);
  CHECK(d.error().find("lists 0 GPUs") != std::string::npos);
  CHECK_THROWS_AS(rig::amd::opener(0, sim, {.compute_ring_bytes = 5000}), std::invalid_argument);
}

TEST_CASE("an open that KFD refuses is an Error and leaves nothing behind") {
  auto& sim = simulator();
  sim.fail_next_ioctl(AMDKFD_IOC_CREATE_QUEUE, -ENOMEM);
  auto d = rig::open(rig::amd::opener(0, sim));
  REQUIRE(!d);
  CHECK(d.error().find("AMDKFD_IOC_CREATE_QUEUE: ENOMEM") != std::string::npos);
  CHECK(sim.live_queues() == 0);
  CHECK(sim.live_events() == 0);
  CHECK(sim.live_buffers() <= 1);  // at most the process's event page, which KFD keeps
}

TEST_CASE("gpus lists a GPU's compute units and XCCs as the topology gives them") {
  using sim::amd::Config;
  struct Part {
    Config config;
    const char* arch;
    std::uint64_t compute_units;
    std::uint32_t xccs;
  };
  for (const auto& part : {Part{Config::mi300x(), "gfx942", 304, 8}, Part{Config::mi300a(), "gfx942", 228, 6},
                           Part{Config::mi250x(), "gfx90a", 110, 1}, Part{Config{}, "gfx1100", 4, 1}}) {
    auto list = rig::amd::gpus(simulator(part.config));
    REQUIRE(list);
    REQUIRE(list->size() == 1);
    CHECK((*list)[0].arch == part.arch);
    CHECK((*list)[0].compute_units == part.compute_units);
    CHECK((*list)[0].xccs == part.xccs);
  }
}

namespace {

// The parts of several XCCs the simulator lists.
struct XccPart {
  sim::amd::Config config;
  std::uint32_t cus, xccs;
};
const XccPart kXccParts[] = {{sim::amd::Config::mi300x(), 304, 8}, {sim::amd::Config::mi300a(), 228, 6}};

// count_groups of amd_kernels_gfx942.co, its counts in `counts`: `groups` groups of 64, group
// `slow` spinning `spin` times first.
struct CountGroups {
  Submission s;
  Run run;
  CountGroups(const Device& d, const Function& f, std::uint32_t groups, std::uint32_t slow, std::uint32_t spin)
      : s(launch_part(d, f, 16, {0}, 0, 1)) {
    auto block = s.block(0);
    run.groups(block, groups);
    run.threads(block, 64);
    run.set(block, 8, slow);
    run.set(block, 12, spin);
  }
};

Function gfx942_kernel(const Device& d, const char* name) {
  auto image = Image::load(d, file_bytes(fmt::format("{}/amd_kernels_gfx942.co", RIG_AMD_KERNEL_DIR)));
  REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
  auto f = image->resolve(name);
  REQUIRE(f);
  return *f;
}

}  // namespace

TEST_CASE("a gfx942 device of several XCCs reads its compute ring on every XCC: a launch shares its grid among them and moves the word once") {
  for (const auto& part : kXccParts) {
    CAPTURE(part.xccs);
    auto& sim = simulator(part.config);
    Opened d(sim);
    CHECK(d->facts().arch == "gfx942");
    const auto* abi = d->capability(rig::amd::kAbi);
    REQUIRE(abi);
    CHECK(abi->wave_size == 64);
    CHECK(abi->compute_units == part.cus);
    CHECK(abi->xccs == part.xccs);
    CHECK(abi->lds_bytes == 64 * 1024);
    // A PM4 queue per XCC over the compute ring, each naming its XCC in queue_percentage.
    std::vector<std::uint32_t> xccs(part.xccs);
    for (std::uint32_t x = 0; x < part.xccs; ++x) xccs[x] = x;
    CHECK(sim.compute_queue_xccs() == xccs);
    // A Words part runs on XCC 0; the value's word is stored once.
    Buffer out = Buffer::create(d, 4);
    const auto word = reinterpret_cast<std::uint64_t>(d->facts().word);
    const std::uint64_t stored = sim.stores_to(word);
    writes(d, out, 7);
    CHECK(sim.faults().empty());
    CHECK(sim.stores_to(word) - stored == 1);
    auto f = gfx942_kernel(d, "vector_add");
    auto s = launch_part(d, f, 28, {0, 8, 16}, 2, 1);
    auto block = s.block(0);
    const std::uint32_t groups = 2 * part.xccs + 1, n = groups * 64;
    Run run;
    run.groups(block, groups);
    run.threads(block, 64);
    run.set(block, 24, n);
    Buffer a = Buffer::create(d, n * 4), b = Buffer::create(d, n * 4), c = Buffer::create(d, n * 4);
    a.write<float>([](std::span<float> x) { for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i); });
    b.write<float>([](std::span<float> x) { std::fill(x.begin(), x.end(), 0.5f); });
    const std::uint64_t before = sim.dispatches(), stores = sim.stores_to(word);
    Buffer reads[] = {a, b}, written[] = {c};
    for (int repeat = 0; repeat < 2; ++repeat) {  // the second launch is the built copy's
      auto p = submit(s, run, reads, written);
      p.wait();
      CHECK(*d->facts().word == p.value());
    }
    CHECK(sim.faults().empty());
    CHECK(sim.dispatches() - before == 2 * part.xccs);  // each XCC ran its share of each grid
    CHECK(sim.stores_to(word) - stores == 2);
    auto sums = c.read<float>([](std::span<const float> x) { return std::vector<float>(x.begin(), x.end()); });
    bool right = true;
    for (std::uint32_t i = 0; i < n; ++i) right = right && sums[i] == float(i) + 0.5f;
    CHECK(right);
    CHECK(!d->lost());
  }
}

TEST_CASE("on several XCCs each XCC's waves have scratch of their own: private arrays over every XCC match the host") {
  // The simulator runs an XCC's waves in the scratch its own packets named and faults a
  // dispatch whose XCCs' scratch overlaps, as waves of one dispatch run on every XCC at once.
  // gfx90a (one XCC, no scratch base register) runs the same kernel for comparison.
  const XccPart parts[] = {kXccParts[0], kXccParts[1], {sim::amd::Config::mi250x(), 110, 1}};
  for (const auto& part : parts) {
    CAPTURE(part.xccs);
    CAPTURE(part.config.arch);
    auto config = part.config;
    config.vram_bytes = 1ull << 30;  // scratch for every wave the GPU holds: 608 MiB on MI300X
    auto& sim = simulator(config);
    Opened d(sim);
    auto image = Image::load(d, file_bytes(fmt::format("{}/gfx9_kernels_{}.co", RIG_AMD_KERNEL_DIR, config.arch)));
    REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
    auto f = image->resolve("private_array");
    REQUIRE(f);
    auto s = launch_part(d, *f, 16, {0, 8}, 1, 1);
    auto block = s.block(0);
    const std::uint32_t groups = 2 * part.xccs + 1, n = groups * 64;
    Run run;
    run.groups(block, groups);
    run.threads(block, 64);
    Buffer in = Buffer::create(d, n * 4), out = Buffer::create(d, n * 4);
    in.write<std::uint32_t>([](std::span<std::uint32_t> x) {
      for (std::uint32_t i = 0; i < x.size(); ++i) x[i] = i * 2654435761u >> 7;
    });
    Buffer reads[] = {in}, written[] = {out};
    for (int repeat = 0; repeat < 2; ++repeat) {  // the second launch is the built copy's
      out.write<std::uint32_t>([](std::span<std::uint32_t> x) { std::fill(x.begin(), x.end(), 0u); });
      try {
        submit(s, run, reads, written).wait();
      } catch (const Lost&) {
        const auto faults = sim.faults();
        FAIL_CHECK((faults.empty() ? std::string("lost") : faults.back()));
        throw;
      }
      auto got = out.read<std::uint32_t>([](std::span<const std::uint32_t> x) { return std::vector(x.begin(), x.end()); });
      std::uint32_t wrong = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        std::uint32_t sum = 0, at = i * 2654435761u >> 7;
        for (std::uint32_t k = 0; k < 8; ++k) sum += ((at + 5 * k) % 48) * ((at + 5 * k) % 48) + i;
        wrong += got[i] != sum;
      }
      CHECK(wrong == 0);
    }
    const auto faults = sim.faults();
    CHECK_MESSAGE(faults.empty(), (faults.empty() ? std::string() : faults.back()));
    CHECK(!d->lost());
  }
}

TEST_CASE("on several XCCs the word reaches a launch's value only once every XCC's share has run, each group once") {
  // Every XCC reads every packet: without a barrier the first XCC done would store the word
  // while the slow group's XCC still runs, and each XCC would store it again.
  for (const auto& part : kXccParts) {
    CAPTURE(part.xccs);
    auto& sim = simulator(part.config);
    Opened d(sim);
    auto f = gfx942_kernel(d, "count_groups");
    const std::uint32_t groups = 3 * part.xccs;
    Buffer counts = Buffer::create(d, groups * 4);
    const auto word = reinterpret_cast<std::uint64_t>(d->facts().word);
    for (std::uint32_t slow : {groups - 1, 1u}) {  // a slow share on the last XCC, then on XCC 1
      CAPTURE(slow);
      counts.write<std::uint32_t>([](std::span<std::uint32_t> x) { std::fill(x.begin(), x.end(), 0u); });
      CountGroups launch(d, f, groups, slow, 40000);
      const std::uint64_t stores = sim.stores_to(word);
      Buffer written[] = {counts};
      auto p = submit(launch.s, launch.run, {}, written);
      // The moment the word shows the value, every group has added its 1.
      while (__atomic_load_n(d->facts().word, __ATOMIC_ACQUIRE) < p.value()) std::this_thread::yield();
      auto* seen = reinterpret_cast<const volatile std::uint32_t*>(counts.address());
      std::uint32_t ran = 0, twice = 0;
      for (std::uint32_t g = 0; g < groups; ++g) ran += seen[g] >= 1, twice += seen[g] > 1;
      CHECK(ran == groups);
      CHECK(twice == 0);
      p.wait();
      CHECK(sim.stores_to(word) - stores == 1);
    }
    CHECK(sim.faults().empty());
    CHECK(!d->lost());
  }
}

TEST_CASE("a foreign wait holds every XCC of a gfx942 device until the producer's word arrives") {
  auto& sim = simulator(sim::amd::Config::mi300x());
  Opened d(sim);
  auto [opener, control] = fake::opener("FAKE:amd-xcc-producer", {.runs_when_asleep = false});
  auto producer = rig::open(opener);
  REQUIRE(producer);
  Buffer nothing = Buffer::create(*producer, 4);
  Submission::Part pp{"", {}, Submission::Words{nothing}};
  auto ps = Submission::make(*producer, std::span(&pp, 1), 0, 0);
  Run prun;
  auto produced = submit(ps, prun, {}, {});
  auto f = gfx942_kernel(d, "count_groups");
  const std::uint32_t groups = 16;  // two groups on each XCC
  Buffer counts = Buffer::create(d, groups * 4);
  counts.write<std::uint32_t>([](std::span<std::uint32_t> x) { std::fill(x.begin(), x.end(), 0u); });
  CountGroups launch(d, f, groups, 0, 0);
  Buffer written[] = {counts};
  auto consumed = submit(launch.s, launch.run, {}, written, std::array<Point, 1>{produced});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  auto* seen = reinterpret_cast<const volatile std::uint32_t*>(counts.address());
  std::uint32_t ran = 0;
  for (std::uint32_t g = 0; g < groups; ++g) ran += seen[g];
  CHECK(ran == 0);  // no XCC ran its share: each one's queue waits on the producer's word
  CHECK(!consumed.reached());
  control->step();
  consumed.wait();
  for (std::uint32_t g = 0; g < groups; ++g) ran += seen[g] == 1;
  CHECK(ran == groups);
  CHECK(sim.faults().empty());
  producer->close();
}

TEST_CASE("on several XCCs a Words part runs once, on XCC 0, and PRED_EXEC in an indirect buffer picks XCCs") {
  // Every XCC runs the ring's packets; the driver gives a compute part's words to XCC 0
  // alone, so an ATOMIC_MEM among them adds once. An indirect buffer among the words picks
  // XCCs with PRED_EXEC: XCC 0 runs what a mask naming it selects and skips the rest.
  for (const auto& part : kXccParts) {
    CAPTURE(part.xccs);
    auto& sim = simulator(part.config);
    Opened d(sim);
    Buffer counter = Buffer::create(d, 4096);
    counter.write<std::uint64_t>([](std::span<std::uint64_t> x) { std::fill(x.begin(), x.end(), 0ull); });
    Buffer ib = Buffer::create(d, 4096);
    std::array<std::uint32_t, 3 * (2 + 9)> ib_words{};
    pm4::Pm4 p(pm4::Gen::Gfx9_4, ib_words);
    p.pred_exec(0b101, 1 + pm4::kAtomicMemBody);
    p.atomic_add64(counter.address(), 1);
    p.pred_exec(0b110, 1 + pm4::kAtomicMemBody);
    p.atomic_add64(counter.address(), 1000);
    p.atomic_add64(counter.address(), 16);
    ib.write<std::uint32_t>([&](std::span<std::uint32_t> x) { std::copy_n(ib_words.begin(), p.size(), x.begin()); });
    std::array<std::uint32_t, 4 + 9> ring_words{};
    pm4::Pm4 r(pm4::Gen::Gfx9_4, ring_words);
    r.indirect_buffer(ib.address(), p.size());
    r.atomic_add64(counter.address() + 8, 1);
    auto words = words_buffer(d, ring_words);
    auto s = words_part(d, words);
    Run run;
    for (int repeat = 0; repeat < 3; ++repeat) submit(s, run, {}, {}).wait();
    auto got = counter.read<std::uint64_t>([](std::span<const std::uint64_t> x) { return std::pair(x[0], x[1]); });
    CHECK(got.first == 3 * (1 + 16));  // on every XCC: 3 * (2 + 2000 + 16 * xccs)
    CHECK(got.second == 3);            // on every XCC: 3 * xccs
    CHECK(sim.faults().empty());
    CHECK(!d->lost());
  }
}

TEST_CASE("on several XCCs a Fill part on COMPUTE:0 is called once per value and its packets run once") {
  auto& sim = simulator(sim::amd::Config::mi300x());
  Opened d(sim);
  struct Arg {
    std::uint64_t address;  // the counter the fill's ATOMIC_MEM adds 1 to
    std::uint64_t calls;
  };
  Buffer counter = Buffer::create(d, 64);
  counter.write<std::uint64_t>([](std::span<std::uint64_t> x) { std::fill(x.begin(), x.end(), 0ull); });
  Buffer arg = Buffer::create(d, sizeof(Arg));
  arg.write<Arg>([&](std::span<Arg> a) { a[0] = {counter.address(), 0}; });
  auto fill = [](void* queue, void* a, std::uint64_t) -> int {
    auto& q = *static_cast<rig::amd::FillQueue*>(queue);
    auto& self = *static_cast<Arg*>(a);
    ++self.calls;
    pm4::Pm4 p(pm4::Gen::Gfx9_4, std::span(q.words + q.count, q.capacity - q.count));
    p.atomic_add64(self.address, 1);
    q.count += p.size();
    return 0;
  };
  Submission::Part part{"COMPUTE:0", {}, Submission::Fill{fill, arg, 16, 0}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  for (int repeat = 0; repeat < 4; ++repeat) submit(s, run, {}, {}).wait();
  CHECK(arg.read<Arg>([](std::span<const Arg> a) { return a[0].calls; }) == 4);
  CHECK(counter.read<std::uint64_t>([](std::span<const std::uint64_t> x) { return x[0]; }) == 4);  // 32 on every XCC
  CHECK(sim.faults().empty());
  CHECK(!d->lost());
}

TEST_CASE("PRED_EXEC in a ring is refused, naming it: the command processor predicates packets in indirect buffers only") {
  // On one XCC a Words part's packets go into the ring as they are.
  auto config = sim::amd::Config::mi300x();
  config.xccs = 1;
  auto& sim = simulator(config);
  Opened d(sim);
  Buffer counter = Buffer::create(d, 64);
  std::array<std::uint32_t, 2 + 9> bare{};
  pm4::Pm4 q(pm4::Gen::Gfx9_4, bare);
  q.pred_exec(1, 1 + pm4::kAtomicMemBody);
  q.atomic_add64(counter.address(), 1);
  Run run;
  CHECK_THROWS_AS(submit(words_part(d, words_buffer(d, bare)), run, {}, {}).wait(), Lost);
  const auto faults = sim.faults();
  REQUIRE(!faults.empty());
  CHECK(faults.back().find("PM4 PRED_EXEC in the ring") != std::string::npos);
}

TEST_CASE("the simulator refuses a compute queue on an XCC the GPU does not have") {
  // queue_percentage bits 8..15 name the queue's XCC: one past MI300A's six is refused
  // with EINVAL, while the last of them gets past that check to the next (the ring, which
  // these arguments leave unmapped: EFAULT).
  auto& sim = simulator(sim::amd::Config::mi300a());
  Opened d(sim);  // which acquires the GPU's VM, as queues need
  const std::size_t queues = sim.live_queues();
  const int fd = sim.open("/dev/kfd", O_RDWR);
  REQUIRE(fd >= 0);
  auto create = [&](std::uint32_t xcc) {
    kfd_ioctl_create_queue_args q{};
    q.gpu_id = sim.config().gpu_id;
    q.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE;
    q.queue_percentage = KFD_MAX_QUEUE_PERCENTAGE | xcc << 8;
    q.ring_size = 4096;
    return sim.ioctl(fd, AMDKFD_IOC_CREATE_QUEUE, &q);
  };
  CHECK(create(6) == -EINVAL);
  CHECK(create(5) == -EFAULT);
  CHECK(sim.live_queues() == queues);
  sim.close(fd);
}

TEST_CASE("a gfx942 device copies and fills past SDMA 4's 4 MiB count in several packets") {
  auto& sim = simulator(sim::amd::Config::mi300x());
  Opened d(sim);
  const std::size_t bytes = (9u << 20) + 64;  // three chunks on SDMA 4, one on SDMA 6
  Buffer src = Buffer::create(d, bytes), dst = Buffer::create(d, bytes), filled = Buffer::create(d, bytes);
  src.write<std::uint32_t>([](std::span<std::uint32_t> x) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::uint32_t(i * 2654435761u);
  });
  const std::uint64_t before = sim.sdma_packets();
  std::vector<Submission::Part> parts{{"", {}, Submission::Copy{{src, 0}, {dst, 0}, {Box::row(bytes)}, std::nullopt}},
                                      {"", {}, Submission::Copy{{src, 0}, {filled, 0}, {Box::row(bytes)}, std::byte{0x3c}}}};
  Run run;
  submit(Submission::make(d, parts, 0, 0), run, {}, {}).wait();
  CHECK(sim.faults().empty());
  CHECK(sim.sdma_packets() - before >= 6);
  auto same = src.read<std::uint32_t>([&](std::span<const std::uint32_t> a) {
    return dst.read<std::uint32_t>([&](std::span<const std::uint32_t> b) { return std::equal(a.begin(), a.end(), b.begin()); });
  });
  CHECK(same);
  CHECK(filled.read<std::uint8_t>([](std::span<const std::uint8_t> x) {
    return std::all_of(x.begin(), x.end(), [](std::uint8_t b) { return b == 0x3c; });
  }));
}

namespace {

// The PM4 a launch of vector_add writes on GPU `config` (one XCC), read back from the ring in
// gfx9's dialect: the driver is made directly, so that ring_of can show its ring.
std::vector<sim::amd::Decoded<sim::amd::Pm4Packet>> gfx9_launch_packets(sim::amd::Config config, const char* arch) {
  auto& sim = simulator(std::move(config));
  alignas(4096) static volatile std::uint64_t words[512] = {};  // a page of its own, a word per call
  static int calls = 0;
  auto made = rig::amd::opener(0, sim).make(&words[8 * calls++]);
  REQUIRE_MESSAGE(made, (made ? std::string() : made.error()));
  edge::Driver& driver = **made;
  auto co = file_bytes(fmt::format("{}/amd_kernels_{}.co", RIG_AMD_KERNEL_DIR, arch));
  auto code = driver.image(co);
  REQUIRE_MESSAGE(code, (code ? std::string() : code.error()));
  auto& place = std::get<edge::Place>(*code);
  auto region = driver.alloc(Memory::Device, place.bytes);
  REQUIRE(region);
  auto [image, bytes] = place.place(*region);
  std::memcpy(reinterpret_cast<void*>(*driver.locate(*region).host), bytes.data(), bytes.size());
  auto entry = driver.entry(image, "vector_add");
  REQUIRE(std::holds_alternative<edge::Entry>(entry));
  const auto& e = std::get<edge::Entry>(entry);
  std::array<std::byte, 28> params{};
  rig_part part{};
  part.queue = 0;
  part.kind = RIG_KIND_LAUNCH;
  part.work.launch = {e.code, e.launch, {2, 1, 1}, {64, 1, 1}, 0, 28, params.data(), nullptr, 0};
  void* edge = driver.facts().edge;
  const auto* table = *static_cast<const rig_driver* const*>(edge);
  char why[RIG_WHY] = "";
  const auto before = rig::amd::ring_of(driver, 0);
  REQUIRE(before);
  REQUIRE_MESSAGE(table->room(edge, &part, 1, 0, why) == RIG_FITS, why);
  const char* failure = nullptr;
  REQUIRE(table->submit(edge, &part, 1, nullptr, 0, 1, nullptr, &failure) == RIG_COMMITTED);
  const auto after = rig::amd::ring_of(driver, 0);
  std::vector<std::uint32_t> wrote;
  for (std::uint64_t i = before->written; i < after->written; ++i) wrote.push_back(after->words[i % after->dwords]);
  driver.stop("the test is done");
  driver.free(*region);
  std::vector<sim::amd::Decoded<sim::amd::Pm4Packet>> out;
  for (std::span<const std::uint32_t> w = wrote; !w.empty();) {
    auto r = sim::amd::decode_pm4(w, sim::amd::Pm4Dialect::Gfx9);
    if (auto* bad = std::get_if<sim::amd::Malformed>(&r)) FAIL(bad->why);
    REQUIRE(std::holds_alternative<sim::amd::Decoded<sim::amd::Pm4Packet>>(r));
    out.push_back(std::get<sim::amd::Decoded<sim::amd::Pm4Packet>>(r));
    w = w.subspan(out.back().dwords);
  }
  return out;
}

// Whether `packets` set SH register `reg`; the DISPATCH_DIRECT among them.
bool sets(const std::vector<sim::amd::Decoded<sim::amd::Pm4Packet>>& packets, std::uint32_t reg) {
  for (const auto& p : packets)
    if (const auto* s = std::get_if<sim::amd::SetShReg>(&p.packet); s && reg >= s->first && reg < s->first + s->values.size())
      return true;
  return false;
}
const sim::amd::DispatchDirect* dispatch(const std::vector<sim::amd::Decoded<sim::amd::Pm4Packet>>& packets) {
  for (const auto& p : packets)
    if (const auto* d = std::get_if<sim::amd::DispatchDirect>(&p.packet)) return d;
  return nullptr;
}

}  // namespace

TEST_CASE("a gfx9 launch is a wave64 dispatch, with the scratch base register on gfx942 and without it on gfx90a") {
  auto gfx90a = gfx9_launch_packets(sim::amd::Config::mi250x(), "gfx90a");
  // gfx942 with one XCC, as a partition of one XCC (CPX mode) lists it.
  auto gfx942 = gfx9_launch_packets({.arch = "gfx942", .compute_units = 38, .xccs = 1}, "gfx942");
  for (const auto* packets : {&gfx90a, &gfx942}) {
    const auto* d = dispatch(*packets);
    REQUIRE(d);
    CHECK(!d->wave32);
    CHECK((d->x == 2 && d->y == 1 && d->z == 1));
    CHECK(sets(*packets, pm4::reg::COMPUTE_PGM_RSRC3));
    CHECK(sets(*packets, pm4::reg::COMPUTE_TMPRING_SIZE));
  }
  CHECK(!sets(gfx90a, pm4::reg::COMPUTE_DISPATCH_SCRATCH_BASE_LO));
  CHECK(sets(gfx942, pm4::reg::COMPUTE_DISPATCH_SCRATCH_BASE_LO));
}

TEST_CASE("a code object for another processor is refused at load, naming both") {
  auto& sim = simulator(sim::amd::Config::mi250x());
  Opened d(sim);
  auto gfx942 = Image::load(d, file_bytes(fmt::format("{}/amd_kernels_gfx942.co", RIG_AMD_KERNEL_DIR)));
  REQUIRE(!gfx942);
  CHECK(gfx942.error().find("a code object for gfx942, not gfx90a") != std::string::npos);
  auto gfx1100 = Image::load(d, gpu_kernels());
  REQUIRE(!gfx1100);
  CHECK(gfx1100.error().find("a code object for gfx1100, not gfx90a") != std::string::npos);
  CHECK(Image::load(d, file_bytes(fmt::format("{}/amd_kernels_gfx90a.co", RIG_AMD_KERNEL_DIR))));
}

TEST_CASE("a gfx9 launch on one XCC runs its wave64 code: vector_add's sums on gfx90a and gfx942") {
  struct Part {
    sim::amd::Config config;
    const char* arch;
  };
  for (const auto& part : {Part{sim::amd::Config::mi250x(), "gfx90a"},
                           Part{{.arch = "gfx942", .compute_units = 38, .xccs = 1}, "gfx942"}}) {
    CAPTURE(part.arch);
    auto& sim = simulator(part.config);
    Opened d(sim);
    auto image = Image::load(d, file_bytes(fmt::format("{}/amd_kernels_{}.co", RIG_AMD_KERNEL_DIR, part.arch)));
    REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
    auto f = image->resolve("vector_add");
    REQUIRE(f);
    auto s = launch_part(d, *f, 28, {0, 8, 16}, 2, 1);
    auto block = s.block(0);
    const std::uint32_t n = 120;  // two groups of 64, the last partly idle
    Run run;
    run.groups(block, 2);
    run.threads(block, 64);
    run.set(block, 24, n);
    Buffer a = Buffer::create(d, 512), b = Buffer::create(d, 512), c = Buffer::create(d, 512);
    a.write<float>([](std::span<float> x) { for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.5f; });
    b.write<float>([](std::span<float> x) { for (std::size_t i = 0; i < x.size(); ++i) x[i] = 100.0f - float(i); });
    c.write<float>([](std::span<float> x) { std::fill(x.begin(), x.end(), -1.0f); });
    const std::uint64_t before = sim.dispatches();
    Buffer reads[] = {a, b}, written[] = {c};
    submit(s, run, reads, written).wait();
    CHECK(sim.faults().empty());
    CHECK(sim.dispatches() - before == 1);
    auto sums = c.read<float>([](std::span<const float> x) { return std::vector<float>(x.begin(), x.end()); });
    bool right = true;
    for (std::uint32_t i = 0; i < n; ++i) right = right && sums[i] == float(i) * 0.5f + (100.0f - float(i));
    CHECK(right);
    CHECK(sums[n] == -1.0f);  // past n: untouched
  }
}

namespace {

// Submits a dispatch of one group on `d`'s COMPUTE:0 with every register the simulator
// requires set but COMPUTE_TMPRING_SIZE where `tmpring` is false, its DISPATCH_DIRECT
// written out by hand with CS_W32_EN as `wave32` says (the builder refuses wave32 on gfx9),
// and waits for it: it must fault.
void bad_gfx9_dispatch(const Device& d, bool tmpring, bool wave32) {
  std::array<std::uint32_t, 64> words{};
  pm4::Pm4 pc(pm4::Gen::Gfx9_4, words);
  std::uint32_t zero2[2] = {0, 0}, zero3[3] = {0, 0, 0}, one3[6] = {0, 0, 0, 1, 1, 1};
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_LO, zero2);
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_RSRC1, zero2);
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_RSRC3, 0);
  if (tmpring) pc.set_sh_reg(pm4::reg::COMPUTE_TMPRING_SIZE, 0);
  pc.set_sh_reg(pm4::reg::COMPUTE_RESTART_X, zero3);
  pc.set_sh_reg(pm4::reg::COMPUTE_START_X, one3);
  const std::uint32_t dispatch[] = {pm4::header(pm4::kDispatchDirect, pm4::kDispatchDirectBody), 1, 1, 1,
                                    pm4::kInitiatorComputeShaderEn | (wave32 ? pm4::kInitiatorCsW32En : 0)};
  pc.packets(dispatch);
  Buffer packets = Buffer::create(d, pc.size() * 4);
  packets.write<std::uint32_t>([&](std::span<std::uint32_t> x) { std::copy_n(words.begin(), pc.size(), x.begin()); });
  Submission::Part part{"COMPUTE:0", {}, Submission::Words{packets}};
  Run run;
  auto p = submit(Submission::make(d, std::span(&part, 1), 0, 0), run, {}, {});
  CHECK_THROWS_AS(p.wait(), Lost);
}

}  // namespace

TEST_CASE("a wave32 dispatch on a gfx9 GPU faults the queue, naming CS_W32_EN") {
  // The simulator's command processor refuses what the hardware cannot run: gfx9 has no
  // wave32, so a DISPATCH_DIRECT with CS_W32_EN set is a malformed packet, and nothing runs.
  auto& sim = simulator(sim::amd::Config::mi250x());
  Opened d(sim);
  bad_gfx9_dispatch(d, true, true);
  const auto faults = sim.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].find("PM4 DISPATCH_DIRECT: CS_W32_EN on gfx9, which has no wave32") != std::string::npos);
  CHECK(d->lost());
  CHECK(sim.dispatches() == 0);
}

TEST_CASE("a launch of a kernel with an MFMA loses the device naming the kernel, the simulator names the MFMA, and the GPU opens again") {
  // The CDNA interpreter does not simulate MFMA: it refuses the instruction by name when it
  // decodes the kernel's code for the dispatch, which the driver sees as KFD reports a GPU
  // fault (a hardware exception on the queue, whose value and kernel it names); the name of the
  // instruction is in the simulator's fault log, as a GPU's would be in the kernel's log.
  auto& sim = simulator(kXccParts[0].config);
  {
    Opened d(sim);
    auto image = Image::load(d, file_bytes(fmt::format("{}/gfx9_mfma_gfx942.co", RIG_AMD_KERNEL_DIR)));
    REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
    auto f = image->resolve("mfma_4x4");
    REQUIRE(f);
    auto s = launch_part(d, *f, 24, {0, 8, 16}, 2, 1);
    auto block = s.block(0);
    Run run;
    run.groups(block, 1);
    run.threads(block, 64);
    Buffer a = Buffer::create(d, 256), b = Buffer::create(d, 256), out = Buffer::create(d, 1024);
    Buffer reads[] = {a, b}, written[] = {out};
    CHECK_THROWS_AS(submit(s, run, reads, written).wait(), Lost);
    REQUIRE(d->lost());
    const auto faults = sim.faults();
    REQUIRE(!faults.empty());
    CHECK_MESSAGE(faults.back().find("v_mfma_f32_4x4x1_16b_f32: MFMA is not simulated") != std::string::npos,
                  faults.back());
    CHECK_MESSAGE(d->lost()->find("in mfma_4x4 (value 1 part 0)") != std::string::npos, *d->lost());
  }
  // The GPU opens again and runs a kernel the interpreter simulates.
  Opened d(sim);
  auto image = Image::load(d, file_bytes(fmt::format("{}/gfx9_kernels_gfx942.co", RIG_AMD_KERNEL_DIR)));
  REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
  auto f = image->resolve("scan128");
  REQUIRE(f);
  auto s = launch_part(d, *f, 16, {0, 8}, 1, 1);
  auto block = s.block(0);
  Run run;
  run.groups(block, 1);
  run.threads(block, 128);
  Buffer in = Buffer::create(d, 512), out = Buffer::create(d, 512);
  in.write<std::uint32_t>([](std::span<std::uint32_t> x) { std::fill(x.begin(), x.end(), 1u); });
  Buffer reads[] = {in}, written[] = {out};
  submit(s, run, reads, written).wait();
  auto got = out.read<std::uint32_t>([](std::span<const std::uint32_t> x) { return std::vector(x.begin(), x.end()); });
  for (std::uint32_t i = 0; i < 128; ++i) CHECK(got[i] == i + 1);
  CHECK(!d->lost());
}

TEST_CASE("a gfx9 dispatch before COMPUTE_TMPRING_SIZE was set faults the queue, naming the register") {
  // The CDNA interpreter takes each work-item's private bytes from it: a dispatch that never
  // set it would run on whatever the register held.
  auto& sim = simulator(sim::amd::Config::mi250x());
  Opened d(sim);
  bad_gfx9_dispatch(d, false, false);
  const auto faults = sim.faults();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].find("PM4 DISPATCH_DIRECT before COMPUTE_TMPRING_SIZE was set") != std::string::npos);
  CHECK(d->lost());
  CHECK(sim.dispatches() == 0);
}

TEST_CASE("memory has one address for the host and the GPU, and the budget is VRAM") {
  auto& sim = simulator();
  Opened d(sim);
  Buffer b = Buffer::create(d, 10000);
  REQUIRE(b.host_address());
  CHECK(*b.host_address() == b.address());
  CHECK(b.address() % 4096 == 0);
  b.write<std::uint32_t>([](std::span<std::uint32_t> x) { x[0] = 7; });
  // A PM4 WRITE_DATA (the GPU's own store) lands where the host reads.
  auto words = words_buffer(d, pm4_write(b.address() + 4, {42}));
  Run run;
  submit(words_part(d, words), run, {}, {}).wait();
  CHECK(read_u32(b, 0) == 7);
  CHECK(read_u32(b, 1) == 42);
  CHECK_THROWS_AS(Buffer::create(d, sim.config().vram_bytes * 2), OutOfMemory);
}

TEST_CASE("words on COPY:0 run as SDMA packets, and a fill writes packets of its queue's format") {
  auto& sim = simulator();
  Opened d(sim);
  Buffer out = Buffer::create(d, 64);
  out.write<std::uint32_t>([](std::span<std::uint32_t> x) { std::fill(x.begin(), x.end(), 0u); });
  std::vector<std::uint32_t> w(8);
  sdma::Sdma(w).fence(out.address(), 0xfeed);
  Run run;
  submit(words_part(d, words_buffer(d, std::span(w).first(sdma::kFenceSize)), "COPY:0"), run, {}, {}).wait();
  CHECK(read_u32(out, 0) == 0xfeed);

  // A fill: C code that appends a packet for the queue it is given.
  struct Arg {
    std::uint64_t address;
  };
  Buffer arg = Buffer::create(d, sizeof(Arg));
  arg.write<Arg>([&](std::span<Arg> a) { a[0].address = out.address() + 8; });
  auto fill = [](void* queue, void* a, std::uint64_t v) -> int {
    auto& q = *static_cast<rig::amd::FillQueue*>(queue);
    auto address = static_cast<Arg*>(a)->address;
    if (q.engine == rig::amd::kEngineSdma) {
      sdma::Sdma s(std::span(q.words + q.count, q.capacity - q.count));
      s.fence(address, std::uint32_t(v));
      q.count += s.size();
    } else {
      pm4::Pm4 p(pm4::Gen::Gfx11, std::span(q.words + q.count, q.capacity - q.count));
      p.write_data(address + 4, std::array<std::uint32_t, 1>{std::uint32_t(v) + 1000});
      q.count += p.size();
    }
    return 0;
  };
  std::vector<Submission::Part> parts{{"COPY:0", {}, Submission::Fill{fill, arg, 16, 0}},
                                      {"COMPUTE:0", {0}, Submission::Fill{fill, arg, 16, 0}}};
  auto s = Submission::make(d, parts, 0, 0);
  auto p = submit(s, run, {}, {});
  p.wait();
  CHECK(read_u32(out, 2) == p.value());
  CHECK(read_u32(out, 3) == p.value() + 1000);
}

TEST_CASE("copies and fills of boxes run on the copy engine, rows and pitches kept") {
  auto& sim = simulator();
  Opened d(sim);
  Buffer src = Buffer::create(d, 4096), dst = Buffer::create(d, 4096);
  src.write<std::uint8_t>([](std::span<std::uint8_t> x) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::uint8_t(i * 7);
  });
  dst.write<std::uint8_t>([](std::span<std::uint8_t> x) { std::fill(x.begin(), x.end(), 0); });
  Box box{16, 32, 10, 5, 100, 50};  // 5 rows of 10 bytes
  Box flat{0, 1000, 64, 4, 64, 64};  // 4 contiguous rows: one fill of 256 bytes
  std::vector<Submission::Part> parts{{"", {}, Submission::Copy{{src, 0}, {dst, 0}, {box}, std::nullopt}},
                                      {"", {0}, Submission::Copy{{src, 0}, {dst, 0}, {flat}, std::byte{0x5a}}}};
  auto s = Submission::make(d, parts, 0, 0);
  Run run;
  submit(s, run, {}, {}).wait();
  auto sb = src.read<std::uint8_t>([](auto x) { return std::vector<std::uint8_t>(x.begin(), x.end()); });
  auto db = dst.read<std::uint8_t>([](auto x) { return std::vector<std::uint8_t>(x.begin(), x.end()); });
  for (std::size_t r = 0; r < 5; ++r)
    for (std::size_t c = 0; c < 10; ++c) CHECK(db[32 + r * 50 + c] == sb[16 + r * 100 + c]);
  CHECK(db[32 + 10] == 0);  // outside the rows
  CHECK(db[31] == 0);
  for (std::size_t i = 1000; i < 1256; ++i) CHECK(db[i] == 0x5a);
  CHECK(db[1256] == 0);
  CHECK(sim.sdma_packets() >= 5);
}

TEST_CASE("a part on COPY:0 after a compute part starts once that part has completed") {
  auto& sim = simulator();
  Opened d(sim);
  Buffer flag = Buffer::create(d, 4096), data = Buffer::create(d, 4096), out = Buffer::create(d, 4096);
  flag.write<std::uint32_t>([](auto x) { x[0] = 0; });
  data.write<std::uint32_t>([](auto x) { x[0] = 1; });
  out.write<std::uint32_t>([](auto x) { x[0] = 0; });
  // Compute: wait for the host's flag, then write 2 into data. Copy (after it): data -> out.
  std::vector<std::uint32_t> w(64);
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  p.wait_mem32(flag.address(), pm4::Compare::Equal, 1);
  p.write_data(data.address(), std::array<std::uint32_t, 1>{2});
  auto words = words_buffer(d, std::span(w).first(p.size()));
  std::vector<Submission::Part> parts{{"COMPUTE:0", {}, Submission::Words{words}},
                                      {"COPY:0", {0}, Submission::Copy{{data, 0}, {out, 0}, {Box::row(4)}, std::nullopt}}};
  auto s = Submission::make(d, parts, 0, 0);
  Run run;
  auto point = submit(s, run, {}, {});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(!point.reached());
  reinterpret_cast<volatile std::uint32_t*>(*flag.host_address())[0] = 1;  // the GPU polls it
  point.wait();
  CHECK(read_u32(out) == 2);
}

TEST_CASE("the queue waits in place for another device's timeline word") {
  auto& sim = simulator();
  Opened d(sim);
  auto [opener, control] = fake::opener("FAKE:amd-producer", {.runs_when_asleep = false});
  auto producer = rig::open(opener);
  REQUIRE(producer);
  Buffer out = Buffer::create(d, 4096);
  out.write<std::uint32_t>([](auto x) { x[0] = 0; });
  // The producer's work: a Words part on the fake device, which runs when the test steps it.
  Buffer nothing = Buffer::create(*producer, 4);
  Submission::Part pp{"", {}, Submission::Words{nothing}};
  auto ps = Submission::make(*producer, std::span(&pp, 1), 0, 0);
  Run run;
  auto produced = submit(ps, run, {}, {});
  auto words = words_buffer(d, pm4_write(out.address(), {5}));
  auto consumed = submit(words_part(d, words), run, {}, {}, std::array<Point, 1>{produced});
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(read_u32(out) == 0);  // the GPU queue waits on the producer's word
  CHECK(!consumed.reached());
  control->step();
  consumed.wait();
  CHECK(read_u32(out) == 5);
  producer->close();
}

TEST_CASE("values complete in order and the word reaches the last, across ring wraps") {
  auto& sim = simulator();
  Opened d(sim, {.compute_ring_bytes = 4096, .copy_ring_bytes = 4096, .kernarg_bytes = 4096});
  Buffer out = Buffer::create(d, 4096);
  Buffer src = Buffer::create(d, 4096);
  src.write<std::uint32_t>([](auto x) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::uint32_t(i);
  });
  std::vector<Submission> subs;
  for (std::uint32_t i = 0; i < 16; ++i) {
    auto words = words_buffer(d, pm4_write(out.address() + 4 * i, {i + 100}));
    std::vector<Submission::Part> parts{
        {"COMPUTE:0", {}, Submission::Words{words}},
        {"COPY:0", {0}, Submission::Copy{{src, 0}, {out, 0}, {Box::row(4, 4 * (i + 16), 4 * (i + 16))}, std::nullopt}}};
    subs.push_back(Submission::make(d, parts, 0, 0));
  }
  Run run;
  Point last;
  for (int round = 0; round < 20; ++round)
    for (auto& s : subs) last = submit(s, run, {}, {});
  last.wait();
  CHECK(d->signaled() == last.value());
  for (std::uint32_t i = 0; i < 16; ++i) {
    CHECK(read_u32(out, i) == i + 100);
    CHECK(read_u32(out, i + 16) == i + 16);
  }
}

TEST_CASE("the queues' sequence words restart when they reach the limit") {
  auto& sim = simulator();
  Opened d(sim, {.sequence_limit = 8});
  Buffer src = Buffer::create(d, 4096), dst = Buffer::create(d, 4096);
  Run run;
  for (std::uint32_t i = 0; i < 40; ++i) {
    src.write<std::uint32_t>([&](auto x) { x[0] = i; });
    auto words = words_buffer(d, pm4_write(src.address() + 8, {i}));
    std::vector<Submission::Part> parts{{"COMPUTE:0", {}, Submission::Words{words}},
                                        {"COPY:0", {0}, Submission::Copy{{src, 0}, {dst, 0}, {Box::row(12)}, std::nullopt}}};
    auto s = Submission::make(d, parts, 0, 0);
    submit(s, run, {}, {}).wait();
    CHECK(read_u32(dst, 0) == i);
    CHECK(read_u32(dst, 2) == i);
  }
}

TEST_CASE("a malformed packet loses the device, naming the packet and the part") {
  auto& sim = simulator();
  Opened d(sim);
  std::vector<std::uint32_t> bad{pm4::header(0x77, 1), 0};
  Run run;
  auto p = submit(words_part(d, words_buffer(d, bad)), run, {}, {});
  try {
    p.wait();
    FAIL("the wait returned");
  } catch (const Lost& e) {
    CHECK(e.why().find("hardware exception") != std::string::npos);
    CHECK(e.why().find("opcode 0x77") != std::string::npos);
    CHECK(e.why().find("words (value 1 part 0)") != std::string::npos);
  }
  REQUIRE(!sim.faults().empty());
  CHECK(sim.faults().back().find("PM4 opcode 0x77") != std::string::npos);
  CHECK_THROWS_AS(Buffer::create(d, 16), Lost);
}

TEST_CASE("a device whose queue makes no progress is lost after hang_ms") {
  auto& sim = simulator();
  Opened d(sim, {.hang_ms = 100});
  sim.hold(true);
  Run run;
  std::vector<std::uint32_t> nop(4);
  pm4::Pm4(pm4::Gen::Gfx11, nop).nop(4);
  auto p = submit(words_part(d, words_buffer(d, nop)), run, {}, {});
  CHECK_THROWS_WITH_AS(p.wait(), doctest::Contains("no progress for 100 ms"), Lost);
  sim.hold(false);
}

TEST_CASE("held engines take no packets until released, and then run what waited") {
  auto& sim = simulator();
  Opened d(sim);
  Buffer out = Buffer::create(d, 4);
  writes(d, out, 1);
  sim.hold(true);  // returns with every engine parked
  const std::uint64_t before = sim.pm4_packets();
  Run run;
  auto words = words_buffer(d, pm4_write(out.address(), {2}));
  auto p = submit(words_part(d, words), run, {}, {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(sim.pm4_packets() == before);
  CHECK(read_u32(out) == 1);
  sim.hold(false);
  p.wait();
  CHECK(read_u32(out) == 2);
}

TEST_CASE("room refuses what the queues can never hold, naming the ring and its size, and the device goes on") {
  auto& sim = simulator();
  Opened d(sim, {.compute_ring_bytes = 4096});
  std::vector<std::uint32_t> big(2000);
  pm4::Pm4(pm4::Gen::Gfx11, big).nop(2000);
  Run run;
  try {
    submit(words_part(d, words_buffer(d, big)), run, {}, {});
    FAIL("the submit was not refused");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.starts_with(std::string(d->name()) + ": 1 part and 0 waits take "));
    CHECK(what.ends_with(" bytes of the COMPUTE:0 ring, over its 4 KiB"));
  }
  CHECK(!d->lost());
  Buffer out = Buffer::create(d, 4);
  writes(d, out, 7);
  CHECK(read_u32(out) == 7);
}

TEST_CASE("on several XCCs room refuses a compute part of more words than one PRED_EXEC runs, and the device goes on") {
  auto& sim = simulator(sim::amd::Config::mi300x());
  Opened d(sim);
  std::vector<std::uint32_t> big(pm4::kPredExecCountMax + 1);
  pm4::Pm4(pm4::Gen::Gfx9_4, big).nop(std::uint32_t(big.size() / 2));
  pm4::Pm4(pm4::Gen::Gfx9_4, std::span(big).subspan(big.size() / 2)).nop(std::uint32_t(big.size() - big.size() / 2));
  Run run;
  try {
    submit(words_part(d, words_buffer(d, big)), run, {}, {});
    FAIL("the submit was not refused");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what == std::string(d->name()) +
                      ": part 0: words of 16384 dwords, over the 16383 that one PRED_EXEC runs on XCC 0 alone of the 8 XCCs");
  }
  CHECK(!d->lost());
  Buffer out = Buffer::create(d, 4);
  writes(d, out, 7);
  CHECK(read_u32(out) == 7);
}

TEST_CASE("room refuses a launch over the group's shared memory, naming the limit, and the device goes on") {
  auto& sim = simulator();
  Opened d(sim);
  auto image = Image::load(d, gpu_kernels());
  REQUIRE(image);
  auto f = image->resolve("vector_add");
  REQUIRE(f);
  auto s = launch_part(d, *f, 28, {0, 8, 16}, 2, 1);
  auto block = s.block(0);
  Run run;
  run.groups(block, 1);
  run.threads(block, 64);
  run.set(block, 24, std::uint32_t(64));
  run.shared(block, 1u << 30);
  Buffer a = Buffer::create(d, 256), b = Buffer::create(d, 256), c = Buffer::create(d, 256);
  Buffer reads[] = {a, b}, written[] = {c};
  try {
    submit(s, run, reads, written);
    FAIL("the submit was not refused");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.starts_with(std::string(d->name()) + ": part 0: "));
    CHECK(what.find("of shared memory (1 GiB asked") != std::string::npos);
    CHECK(what.ends_with("over the limit of 64 KiB"));
  }
  CHECK(!d->lost());
  run.shared(block, 0);
  submit(s, run, reads, written).wait();
  CHECK(!d->lost());
}

TEST_CASE("closing returns every buffer, queue, event and doorbell mapping the device made, and it opens again") {
  auto& sim = simulator();
  {
    Opened d(sim);
    CHECK(sim.live_queues() == 2);
    CHECK(sim.live_doorbell_maps() == 2);  // one per queue
  }
  CHECK(sim.live_queues() == 0);
  CHECK(sim.live_doorbell_maps() == 0);
  CHECK(sim.live_events() == 0);
  CHECK(sim.live_buffers() == 1);  // the process's event page, which KFD keeps until exit
  // The name opens a new device, on the same KFD process state (render node, event page).
  {
    Opened d(sim);
    writes(d, Buffer::create(d, 4096), 9);
  }
  CHECK(sim.live_queues() == 0);
}

TEST_CASE("make opens a new device while another of the same GPU is open, and both run work") {
  // Both map rig_words for the GPU, whose VM (one per process) takes a range once: the
  // devices share that mapping, and it goes with the last of them.
  auto& sim = simulator();
  auto second = rig::amd::opener(0, sim);
  second.name = "AMD:0-second";
  {
    Opened a(sim);
    auto b = rig::open(second);
    REQUIRE_MESSAGE(b, (b ? std::string() : b.error()));
    for (const Device& d : {a.device, *b}) writes(d, Buffer::create(d, 4096), d.index());
    b->close();
    writes(a, Buffer::create(a, 4096), 5);  // the first device still reaches rig_words
  }
  CHECK(sim.live_queues() == 0);
  CHECK(sim.live_buffers() == 1);  // the process's event page
}

TEST_CASE("a GPU opens and closes many times, allocating each time, and keeps nothing of the closed devices") {
  // More opens than the GPU's memory would allow if a closed device kept any of it, two
  // devices open at a time, as the conformance laws open them.
  auto& sim = simulator();
  auto second = rig::amd::opener(0, sim);
  second.name = "AMD:0-second";
  const std::uint64_t opens = sim.config().vram_bytes / (4 << 20) + 16;
  for (std::uint64_t i = 0; i < opens; ++i) {
    Opened a(sim);
    auto b = rig::open(second);
    REQUIRE_MESSAGE(b, "open ", i, ": ", b.error());
    for (const Device& d : {a.device, *b}) writes(d, Buffer::create(d, 1 << 20), std::uint32_t(i));
    b->close();
  }
  CHECK(sim.live_queues() == 0);
  CHECK(sim.live_events() == 0);
  CHECK(sim.live_buffers() == 1);  // the process's event page
}

TEST_CASE("ring_of shows the dwords a submission wrote into a queue's ring, and is an Error for another driver") {
  auto& sim = simulator();
  alignas(4096) static volatile std::uint64_t word[512] = {};  // a page of its own
  auto made = rig::amd::opener(0, sim).make(&word[0]);
  REQUIRE_MESSAGE(made, (made ? std::string() : made.error()));
  edge::Driver& driver = **made;
  auto compute = rig::amd::ring_of(driver, 0), copy = rig::amd::ring_of(driver, 1);
  REQUIRE(compute);
  REQUIRE(copy);
  CHECK(compute->dwords == rig::amd::Options{}.compute_ring_bytes / 4);
  CHECK(copy->dwords == rig::amd::Options{}.copy_ring_bytes / 4);
  auto region = driver.alloc(Memory::Device, 4096);
  REQUIRE(region);
  const std::uint64_t address = *driver.locate(*region).address;
  const auto words = pm4_write(address, {11});
  rig_part part{};
  part.queue = 0;
  part.kind = RIG_KIND_WORDS;
  part.work.words = {words.data(), words.size()};
  void* edge = driver.facts().edge;
  const auto* table = *static_cast<const rig_driver* const*>(edge);
  char why[RIG_WHY] = "";
  REQUIRE(table->room(edge, &part, 1, 0, why) == RIG_FITS);
  const char* failure = nullptr;
  REQUIRE(table->submit(edge, &part, 1, nullptr, 0, 1, nullptr, &failure) == RIG_COMMITTED);
  auto after = rig::amd::ring_of(driver, 0);
  REQUIRE(after);
  CHECK(after->words == compute->words);
  std::vector<std::uint32_t> wrote;
  for (std::uint64_t i = compute->written; i < after->written; ++i) wrote.push_back(after->words[i % after->dwords]);
  CHECK(std::search(wrote.begin(), wrote.end(), words.begin(), words.end()) != wrote.end());
  CHECK(rig::amd::ring_of(driver, 1)->written == copy->written);  // no part ran on COPY:0
  while (__atomic_load_n(&word[0], __ATOMIC_ACQUIRE) < 1) driver.sleep(1, std::chrono::milliseconds(100));
  CHECK(*reinterpret_cast<const std::uint32_t*>(*driver.locate(*region).host) == 11);
  CHECK(!rig::amd::ring_of(driver, 2));
  auto other = fake::opener("FAKE:amd-ring").first.make(&word[8]);
  REQUIRE(other);
  CHECK(!rig::amd::ring_of(**other, 0));
  driver.stop("the test is done");
  driver.free(*region);
}

namespace {

// A driver of sim's GPU opened directly, not through rig, on `word`.
std::unique_ptr<edge::Driver> open_direct(sim::amd::Simulator& sim, volatile std::uint64_t* word) {
  auto driver = rig::amd::opener(0, sim).make(word);
  REQUIRE(driver);
  return std::move(*driver);
}

// 8 KiB of page-aligned host memory (std::free it) and the driver's mapping of it.
std::pair<std::byte*, edge::Region> mapped_pages(edge::Driver& driver) {
  auto* memory = static_cast<std::byte*>(std::aligned_alloc(4096, 8192));
  auto mapped = driver.map_host(reinterpret_cast<std::uintptr_t>(memory), 8192);
  REQUIRE(std::holds_alternative<edge::Region>(mapped));
  return {memory, std::get<edge::Region>(mapped)};
}

}  // namespace

TEST_CASE("map_host maps page-aligned host memory at its own address") {
  auto& sim = simulator();
  alignas(8) static std::uint64_t word = 0;
  auto driver = open_direct(sim, &word);
  auto [memory, region] = mapped_pages(*driver);
  auto where = driver->locate(region);
  CHECK(where.address == std::optional<std::uint64_t>(reinterpret_cast<std::uint64_t>(memory)));
  CHECK(std::holds_alternative<edge::Never>(driver->map_host(reinterpret_cast<std::uintptr_t>(memory) + 8, 64)));
  driver->free(region);
  driver->stop("done");
  std::free(memory);
}

TEST_CASE("settle gives a timed value's start and end on the host clock") {
  auto& sim = simulator();
  auto make = rig::amd::opener(0, sim).make;
  alignas(8) static volatile std::uint64_t word = 0;
  auto driver = make(&word);
  REQUIRE(driver);
  auto facts = (*driver)->facts();
  auto* c = *static_cast<const rig_driver* const*>(facts.edge);
  std::vector<std::uint32_t> nop(4);
  pm4::Pm4(pm4::Gen::Gfx11, nop).nop(4);
  rig_part part{};
  part.queue = 0, part.kind = RIG_KIND_WORDS;
  part.work.words = {nop.data(), nop.size()};
  char why[RIG_WHY] = "";
  REQUIRE(c->room(facts.edge, &part, 1, 0, why) == RIG_FITS);
  std::uint64_t times[2] = {0, 0};
  const char* failure = nullptr;
  std::uint64_t before = rig_now_ns();
  REQUIRE(c->submit(facts.edge, &part, 1, nullptr, 0, 1, times, &failure) == RIG_COMMITTED);
  while (__atomic_load_n(&word, __ATOMIC_ACQUIRE) < 1) std::this_thread::yield();
  std::uint64_t after = rig_now_ns();
  REQUIRE(c->settle(facts.edge, 1, times, &failure) == RIG_OK);
  CHECK(times[0] <= times[1]);
  CHECK(times[0] + 2'000'000 >= before);  // within the correlation's error of 2 ms
  CHECK(times[1] <= after + 2'000'000);
  std::uint64_t kept[2] = {times[0], times[1]};
  REQUIRE(c->settle(facts.edge, 1, times, &failure) == RIG_OK);  // a later call leaves them
  CHECK((times[0] == kept[0] && times[1] == kept[1]));
  (*driver)->stop("done");
}

// ---- dma: KFD's dma-buf export.

namespace {
// The bytes a dma-buf's pages hold, through a mapping of it.
std::vector<std::uint8_t> dmabuf_bytes(int fd, std::size_t n) {
  void* view = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
  REQUIRE(view != MAP_FAILED);
  std::vector<std::uint8_t> out(static_cast<const std::uint8_t*>(view), static_cast<const std::uint8_t*>(view) + n);
  ::munmap(view, n);
  return out;
}
}  // namespace

TEST_CASE("dma of device memory is a close-on-exec dma-buf KFD exports, holding the buffer's bytes") {
  auto& sim = simulator();
  Opened d(sim);
  for (Memory kind : {Memory::Device, Memory::Mapped}) {
    Buffer b = Buffer::create(d, 65536, kind);
    b.write<std::uint8_t>([](std::span<std::uint8_t> x) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::uint8_t(i * 3 + 5);
    });
    const std::size_t before = sim.dmabuf_exports();
    auto dma = b.view(4096, 64).dma("0000:41:00.0");
    REQUIRE_MESSAGE(dma.has_value(), (dma ? "" : dma.error()));
    const auto* buf = std::get_if<edge::Dmabuf>(&*dma);
    REQUIRE(buf != nullptr);
    CHECK(buf->offset == 0);
    CHECK((fcntl(buf->fd, F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(sim.dmabuf_exports() == before + 1);
    auto seen = dmabuf_bytes(buf->fd, 65536);
    bool same = true;
    for (std::size_t i = 0; i < seen.size(); ++i) same = same && seen[i] == std::uint8_t(i * 3 + 5);
    CHECK(same);
    ::close(buf->fd);
  }
}

TEST_CASE("dma refuses a userptr mapping and a freed region, naming the device and why; KFD refuses an unknown handle") {
  auto& sim = simulator();
  alignas(8) static std::uint64_t word = 0;
  auto driver = open_direct(sim, &word);
  auto [memory, mapped] = mapped_pages(*driver);
  auto userptr = driver->dma(mapped, "0000:41:00.0");
  REQUIRE_FALSE(userptr.has_value());
  CHECK(userptr.error().find("AMD:0: 8192 bytes at 0x") != std::string::npos);
  CHECK(userptr.error().find("userptr buffer), which KFD does not export") != std::string::npos);
  driver->free(mapped);
  std::free(memory);

  auto region = driver->alloc(Memory::Device, 4096);
  REQUIRE(region);
  driver->free(*region);
  auto freed = driver->dma(*region, "0000:41:00.0");
  REQUIRE_FALSE(freed.has_value());
  CHECK(freed.error().find("AMD:0: no region") != std::string::npos);
  const std::size_t exports = sim.dmabuf_exports();
  driver->stop("done");

  // The simulated KFD itself: a handle it never gave is EINVAL, and no dma-buf is made.
  const int kfd = sim.open("/dev/kfd", O_RDWR);
  REQUIRE(kfd >= 0);
  rig::amd::KfdExportDmabufArgs bad{0xdead, std::uint32_t(O_CLOEXEC), 0};
  CHECK(sim.ioctl(kfd, rig::amd::kIocExportDmabuf, &bad) == -EINVAL);
  CHECK(sim.dmabuf_exports() == exports);
  sim.close(kfd);
}

TEST_CASE("dma on a KFD older than interface 1.12 is an Error naming the version and the missing ioctl") {
  auto& sim = simulator({.kfd_minor = 11});
  Opened d(sim);
  Buffer b = Buffer::create(d, 4096);
  auto dma = b.dma("0000:41:00.0");
  REQUIRE_FALSE(dma.has_value());
  CHECK(dma.error().find("AMD:0: KFD interface 1.11 has no dma-buf export (AMDKFD_IOC_EXPORT_DMABUF came with 1.12)") !=
        std::string::npos);
  CHECK(sim.dmabuf_exports() == 0);
  // The device goes on.
  Buffer out = Buffer::create(d, 64);
  writes(d, out, 0x1234);
}
