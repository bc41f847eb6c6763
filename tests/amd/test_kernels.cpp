// Kernels from C (tests/amd/kernels/amd_kernels.c) on the simulated gfx1100 through the AMD
// driver, against the same computations on the host device (host_kernels.c); and faults of
// kernels: a page fault names the address and the kernel, an unknown instruction its opcode.
#include <doctest/doctest.h>

#include <rig/profile.hpp>

#include <cmath>

#include "support.hpp"

using namespace rig;
using namespace rig::test::amd;

namespace {

Function resolve(const Device& d, std::span<const std::byte> binary, std::string_view name) {
  auto image = Image::load(d, binary);
  if (!image) FAIL(image.error());
  auto f = image->resolve(name);
  REQUIRE(f);
  return *f;
}

template <class T>
std::vector<T> contents(const Buffer& b) {
  return b.read<T>([](std::span<const T> x) { return std::vector<T>(x.begin(), x.end()); });
}

template <class T>
Buffer filled(const Device& d, const std::vector<T>& values) {
  Buffer b = Buffer::create(d, values.size() * sizeof(T));
  b.write<T>([&](std::span<T> x) { std::copy(values.begin(), values.end(), x.begin()); });
  return b;
}

// Runs `name` on `d` over `groups` groups of `threads` threads, with the run's buffers at the
// parameter offsets `refs` and `set` filling the other parameters; waits for it.
template <class Set>
void launch(const Device& d, std::span<const std::byte> binary, std::string_view name, std::uint32_t params,
            std::vector<std::uint32_t> refs, std::vector<Buffer> reads, std::vector<Buffer> writes,
            std::uint32_t groups, std::uint32_t threads, Set set) {
  Function f = resolve(d, binary, name);
  auto s = launch_part(d, f, params, refs, int(reads.size()), int(writes.size()));
  Run run;
  auto block = s.block(0);
  run.groups(block, groups);
  run.threads(block, threads);
  set(run, block);
  submit(s, run, reads, writes).wait();
}

}  // namespace

TEST_CASE("vector_add on the simulated GPU gives the host device's results") {
  auto& sim = simulator();
  Opened gpu(sim);
  const std::uint32_t n = 1000;  // not a multiple of the group: the last group is partly idle
  std::vector<float> a(n), b(n);
  for (std::uint32_t i = 0; i < n; ++i) a[i] = float(i) * 0.5f, b[i] = 1000.0f - float(i) * 0.25f;
  auto run_on = [&](const Device& d, std::span<const std::byte> code) {
    Buffer c = filled(d, std::vector<float>(n + 64, -1.0f));
    launch(d, code, "vector_add", 28, {0, 8, 16}, {filled(d, a), filled(d, b)}, {c}, (n + 63) / 64, 64,
           [&](Run& r, auto& blk) { r.set(blk, 24, n); });
    return contents<float>(c);
  };
  auto on_gpu = run_on(gpu, gpu_kernels());
  auto on_host = run_on(host(), host_kernels());
  CHECK(on_gpu == on_host);
  CHECK(on_gpu[999] == a[999] + b[999]);
  CHECK(on_gpu[1000] == -1.0f);  // past n: untouched
  CHECK(sim.dispatches() == 1);
  CHECK(sim.faults().empty());
}

TEST_CASE("launches that repeat a geometry or change it each get their own grid, arguments and buffers") {
  // The driver builds a function's packets and kernel arguments for a geometry once and
  // patches them per launch: every launch must still see its own parameters and grid.
  auto& sim = simulator();
  Opened gpu(sim);
  Function f = resolve(gpu, gpu_kernels(), "vector_add");
  auto s = launch_part(gpu, f, 28, {0, 8, 16}, 2, 1);
  const std::pair<std::uint32_t, std::uint32_t> geometries[] = {{64, 16}, {64, 16}, {128, 8}, {32, 40}, {64, 16}, {128, 8}};
  std::uint32_t k = 0;
  for (auto [threads, groups] : geometries) {
    CAPTURE(threads);
    CAPTURE(groups);
    const std::uint32_t n = threads * groups - 5 - k;  // the last group partly idle, n new each time
    std::vector<float> a(n), b(n);
    for (std::uint32_t i = 0; i < n; ++i) a[i] = float(i + k), b[i] = float(3 * k) - float(i) * 0.5f;
    Buffer c = filled(gpu, std::vector<float>(n + 8, -1.0f));
    Run run;
    auto block = s.block(0);
    run.groups(block, groups);
    run.threads(block, threads);
    run.set(block, 24, n);
    Buffer reads[] = {filled(gpu, a), filled(gpu, b)}, writes[] = {c};
    submit(s, run, reads, writes).wait();
    auto got = contents<float>(c);
    bool right = true;
    for (std::uint32_t i = 0; i < n; ++i) right = right && got[i] == a[i] + b[i];
    CHECK(right);
    CHECK(got[n] == -1.0f);
    ++k;
  }
  CHECK(sim.dispatches() == std::size(geometries));
  CHECK(sim.faults().empty());
}

TEST_CASE("saxpy on the simulated GPU gives the host device's results, fused multiply-add and all") {
  auto& sim = simulator();
  Opened gpu(sim);
  const std::uint32_t n = 777;
  std::vector<float> x(n), y(n);
  for (std::uint32_t i = 0; i < n; ++i) x[i] = std::sin(float(i)) * 3.0f, y[i] = std::cos(float(i));
  const float alpha = 1.75f;
  auto run_on = [&](const Device& d, std::span<const std::byte> code) {
    Buffer out = filled(d, y);
    launch(d, code, "saxpy", 24, {8, 16}, {filled(d, x)}, {out}, (n + 63) / 64, 64, [&](Run& r, auto& blk) {
      r.set(blk, 0, alpha);
      r.set(blk, 4, n);
    });
    return contents<float>(out);
  };
  auto on_gpu = run_on(gpu, gpu_kernels());
  auto on_host = run_on(host(), host_kernels());
  REQUIRE(on_gpu.size() == on_host.size());
  for (std::uint32_t i = 0; i < n; ++i) CHECK(on_gpu[i] == on_host[i]);
  CHECK(on_gpu[5] == std::fma(alpha, x[5], y[5]));
}

TEST_CASE("an LDS reduction across two waves and barriers gives the host device's sums") {
  auto& sim = simulator();
  Opened gpu(sim);
  const std::uint32_t n = 10000, per_thread = 4, groups = (n + 64 * per_thread - 1) / (64 * per_thread);
  std::vector<std::uint32_t> in(n);
  for (std::uint32_t i = 0; i < n; ++i) in[i] = (i * 2654435761u) >> 20;
  auto run_on = [&](const Device& d, std::span<const std::byte> code) {
    Buffer out = filled(d, std::vector<std::uint32_t>(groups, 0));
    launch(d, code, "reduce_sum", 24, {0, 8}, {filled(d, in)}, {out}, groups, 64, [&](Run& r, auto& blk) {
      r.set(blk, 16, n);
      r.set(blk, 20, per_thread);
    });
    return contents<std::uint32_t>(out);
  };
  auto on_gpu = run_on(gpu, gpu_kernels());
  auto on_host = run_on(host(), host_kernels());
  CHECK(on_gpu == on_host);
  std::uint64_t total = 0, expected = 0;
  for (auto s : on_gpu) total += s;
  for (auto v : in) expected += v;
  CHECK(total == expected);
}

TEST_CASE("a kernel reads a table through a pointer the loader relocated") {
  auto& sim = simulator();
  Opened gpu(sim);
  const std::uint32_t n = 100;
  auto run_on = [&](const Device& d, std::span<const std::byte> code) {
    Buffer out = filled(d, std::vector<std::uint32_t>(n, 7));
    launch(d, code, "lookup", 12, {0}, {}, {out}, 2, 64, [&](Run& r, auto& blk) { r.set(blk, 8, n); });
    return contents<std::uint32_t>(out);
  };
  std::vector<std::uint32_t> on_gpu;
  try {
    on_gpu = run_on(gpu, gpu_kernels());
  } catch (const Lost&) {
    for (auto& f : sim.faults()) MESSAGE(f);
    throw;
  }
  CHECK(on_gpu == run_on(host(), host_kernels()));
  CHECK(on_gpu[11] == 9);
}

TEST_CASE("a kernel's function gives its parameter bytes, group limit and descriptor address") {
  auto& sim = simulator();
  Opened gpu(sim);
  Function f = resolve(gpu, gpu_kernels(), "vector_add");
  CHECK(f.params() == std::optional<std::size_t>(28));  // the explicit arguments; hidden ones are the driver's
  CHECK(f.threads() == std::optional<std::size_t>(1024));
  CHECK(f.entry() % 64 == 0);  // a kernel descriptor's address
  auto image = Image::load(gpu, gpu_kernels());
  REQUIRE(image);
  CHECK(!image->resolve("no_such_kernel"));
  std::vector<std::byte> other = file_bytes(fmt::format("{}/amd_kernels_gfx942.co", RIG_AMD_KERNEL_DIR));
  auto refused = Image::load(gpu, other);
  REQUIRE(!refused);
  CHECK(refused.error().find("a code object for gfx942, not gfx1100") != std::string::npos);
}

TEST_CASE("a kernel's access outside mapped memory loses the device, naming the address and the kernel") {
  auto& sim = simulator();
  Opened gpu(sim);
  Function f = resolve(gpu, gpu_kernels(), "store");
  auto s = launch_part(gpu, f, 12, {}, 0, 0);
  Run run;
  run.set(s.block(0), 0, std::uint64_t(0xdead0000));
  run.set(s.block(0), 8, std::uint32_t(1));
  auto p = submit(s, run, {}, {});
  try {
    p.wait();
    FAIL("the wait returned");
  } catch (const Lost& e) {
    CHECK(e.why().find("page fault at 0xdead0000") != std::string::npos);
    CHECK(e.why().find("in store (value 1 part 0)") != std::string::npos);
  }
  REQUIRE(!sim.faults().empty());
  CHECK(sim.faults().back().find("global_store_b32") != std::string::npos);
}

TEST_CASE("a launch that repeats a built geometry and faults is named as the first launch is") {
  // The first launch of store builds its packets; the second, of the same geometry, is a
  // value of that one launch, which the driver copies whole and patches: its fault must
  // still name the kernel, the value and the part.
  auto& sim = simulator();
  Opened gpu(sim);
  Function f = resolve(gpu, gpu_kernels(), "store");
  Buffer out = filled(gpu, std::vector<std::uint32_t>{0});
  auto good = launch_part(gpu, f, 12, {0}, 0, 1);
  Run first;
  first.set(good.block(0), 8, std::uint32_t(7));
  Buffer writes[] = {out};
  submit(good, first, {}, writes).wait();
  CHECK(contents<std::uint32_t>(out)[0] == 7);
  auto bad = launch_part(gpu, f, 12, {}, 0, 0);
  Run second;
  second.set(bad.block(0), 0, std::uint64_t(0xdead0000));
  second.set(bad.block(0), 8, std::uint32_t(1));
  try {
    submit(bad, second, {}, {}).wait();
    FAIL("the wait returned");
  } catch (const Lost& e) {
    CHECK(e.why().find("page fault at 0xdead0000") != std::string::npos);
    CHECK(e.why().find("in store (value 2 part 0)") != std::string::npos);
  }
}

TEST_CASE("an instruction outside the interpreter's subset faults, naming its opcode") {
  auto& sim = simulator();
  Opened gpu(sim);
  Function f = resolve(gpu, gpu_kernels(), "store");
  // The kernel's first instruction, from its descriptor (host-visible like all its memory):
  // replaced with s_trap 0 (SOPP opcode 16), which the interpreter does not run.
  auto* kd = reinterpret_cast<std::byte*>(f.entry());
  std::int64_t entry;
  std::memcpy(&entry, kd + 16, 8);
  std::uint32_t trap = 0xBF900000;
  std::memcpy(kd + entry, &trap, 4);
  auto s = launch_part(gpu, f, 12, {}, 0, 0);
  Run run;
  CHECK_THROWS_WITH_AS(submit(s, run, {}, {}).wait(), doctest::Contains("hardware exception"), Lost);
  REQUIRE(!sim.faults().empty());
  CHECK(sim.faults().back().find("unknown SOPP instruction: opcode 16") != std::string::npos);
}

TEST_CASE("a profile gives each value's start and end on the host clock, from the GPU's stamps") {
  auto& sim = simulator();
  Opened gpu(sim);
  const std::uint32_t n = 256;
  std::vector<float> a(n, 1.0f), b(n, 2.0f);
  Buffer ba = filled(gpu.device, a), bb = filled(gpu.device, b), c = filled(gpu.device, std::vector<float>(n, 0.0f));
  Function f = resolve(gpu, gpu_kernels(), "vector_add");
  auto s = launch_part(gpu, f, 28, {0, 8, 16}, 2, 1);
  Run run;
  run.groups(s.block(0), n / 64);
  run.threads(s.block(0), 64);
  run.set(s.block(0), 24, n);
  std::uint64_t before = rig_now_ns();
  auto records = profile::take([&] {
    for (int i = 0; i < 3; ++i) submit(s, run, std::array<Buffer, 2>{ba, bb}, std::array<Buffer, 1>{c});
  });
  std::uint64_t after = rig_now_ns();
  int values = 0;
  std::uint64_t last_end = 0;
  for (auto& r : records) {
    if (r.what != profile::Record::What::Value || r.device != "AMD:0") continue;
    ++values;
    CHECK(r.start_ns <= r.end_ns);
    CHECK(r.start_ns + 2'000'000 >= before);  // the clocks' correlation is good to ~2 ms
    CHECK(r.end_ns <= after + 2'000'000);
    CHECK(r.start_ns + 2'000'000 >= last_end);  // values in order
    last_end = r.end_ns;
  }
  CHECK(values == 3);
  CHECK(contents<float>(c)[n - 1] == 3.0f);
}
