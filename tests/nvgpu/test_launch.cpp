// rig's NVIDIA driver (nvgpu/) loading the committed nvcc-built kernels (tests/nv/kernels) and
// launching them through rig on the NVIDIA simulator (tests/sim/nv/): each test is one promise
// or refusal of rig/nv.hpp's Code and Launches.
#include <doctest/doctest.h>

#include <rig/nv.hpp>
#include <rig/nv_abi.hpp>
#include <rig/rig.hpp>

#include <code.hpp>
#include <sim.hpp>

#include "cubin.hpp"
#include "heap_count.hpp"
#include "kernel_files.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace rig;
namespace nvsim = rig::sim::nv;
using nvgpu_test::kernel_file;

namespace {

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// A simulated GPU (Hopper, or Ampere) opened through rig, with the fatbins of `kernels`
// registered for its engines.
struct Gpu {
  nvsim::Simulator sim;
  Device d;
  unsigned sm;
  static nvsim::Config config(bool hopper, bool gvisor) {
    nvsim::Config c;
    if (!hopper) c.classes = nvsim::kAmpere;
    c.gvisor = gvisor;
    return c;
  }
  explicit Gpu(std::vector<std::string> kernels = {}, bool hopper = true, bool gvisor = false)
      : sim(config(hopper, gvisor)), d(open_device()), sm(hopper ? 90 : 80) {
    for (const auto& k : kernels) {
      auto added = sim.code().add_fatbin(fatbin(k), sm, k);
      REQUIRE_MESSAGE(added, (added ? std::string() : added.error()));
    }
  }
  ~Gpu() {
    if (!d.lost()) d.close();
  }
  Device open_device() {
    auto d = rig::open(nv::opener(0, sim));
    REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
    return *d;
  }
  std::vector<std::byte> fatbin(const std::string& k) const {
    return kernel_file(k + ".sm_" + std::to_string(sm) + ".fatbin");
  }
  Function function(const std::string& file, const std::string& name) const {
    auto image = Image::load(d, fatbin(file));
    REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
    auto f = image->resolve(name);
    REQUIRE(f);
    return *f;
  }
};

// A launch part of `f` reading `params` bytes whose refs at `refs` are the run's buffers 0, 1, …
Submission launch_of(const Device& d, const Function& f, std::uint32_t params, std::vector<std::uint32_t> refs,
                     int reads, int writes) {
  Submission::Launch launch{f, params, {}};
  for (std::uint32_t i = 0; i < refs.size(); ++i) launch.refs.push_back({refs[i], Submission::Ref::What::Buffer, i, {}});
  Submission::Part part{"", {}, launch};
  return Submission::make(d, std::span(&part, 1), reads, writes);
}

template <class T>
Buffer filled(const Device& d, std::size_t n, T (*at)(std::size_t)) {
  Buffer b = Buffer::create(d, n * sizeof(T), Memory::Mapped);
  b.write<T>([&](std::span<T> x) {
    for (std::size_t i = 0; i < n; ++i) x[i] = at(i);
  });
  return b;
}

// Where the simulator's live counts stand.
struct Counts {
  std::size_t objects, ranges, maps, cpu;
  explicit Counts(const nvsim::Simulator& s)
      : objects(s.live_objects()), ranges(s.live_uvm_ranges()), maps(s.live_uvm_maps()), cpu(s.live_cpu_mappings()) {}
  bool operator==(const Counts&) const = default;
};

std::string refused(const Device& d, std::span<const std::byte> binary) {
  auto image = Image::load(d, binary);
  REQUIRE(!image);
  return image.error();
}

// The device still copies after a refusal.
void usable(const Device& d) {
  Buffer a = Buffer::create(d, 4096, Memory::Mapped), b = Buffer::create(d, 4096, Memory::Mapped);
  a.write<std::uint32_t>([](std::span<std::uint32_t> x) { x[7] = 77; });
  Buffer::copy(a, b);
  CHECK(b.read<std::uint32_t>([](std::span<const std::uint32_t> x) { return x[7]; }) == 77);
  CHECK(!d.lost());
}

}  // namespace

TEST_CASE("a fatbin loads its cubin for the GPU's SM, and resolve answers each kernel with its parameter bytes") {
  for (const bool hopper : {true, false}) {
    CAPTURE(hopper);
    Gpu g({}, hopper);
    auto image = Image::load(g.d, g.fatbin("saxpy"));
    REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
    auto f = image->resolve("saxpy");
    REQUIRE(f);
    // saxpy(float a, const float* x, float* y, unsigned n): KPARAM_INFO's 4 + 8 + 8 + 4, aligned.
    auto cubin = nv::cubin_for_sm(g.fatbin("saxpy"), g.sm, "saxpy");
    REQUIRE(cubin);
    CHECK(f->params() == cubin->kernel("saxpy")->param_size);
    CHECK(f->params() == 28);
    CHECK(f->threads() == 1024);
    CHECK(f->entry() != 0);
    CHECK(!image->resolve("no_such_kernel"));
  }
}

TEST_CASE("a cubin of the GPU's SM loads as its fatbin does") {
  Gpu g;
  auto image = Image::load(g.d, kernel_file("reduce.sm_90.cubin"));
  REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
  CHECK(image->resolve("reduce_sum"));
}

TEST_CASE("a cubin for another SM is an Error naming both, and the device goes on") {
  Gpu g;
  const std::string why = refused(g.d, kernel_file("saxpy.sm_80.cubin"));
  CHECK(has(why, "NV:0: the cubin is for sm_80, and NV:0 is sm_90 (Hopper)"));
  usable(g.d);
}

TEST_CASE("a fatbin without SASS for the GPU's SM is an Error saying rig does not JIT PTX") {
  Gpu g;
  const std::string why = refused(g.d, kernel_file("saxpy.sm_80.fatbin"));
  CHECK(has(why, "NV:0: "));
  CHECK(has(why, "no SASS for sm_90"));
  CHECK(has(why, "rig does not JIT PTX without libcuda"));
  usable(g.d);
}

TEST_CASE("a truncated, malformed or foreign binary is an Error naming the problem, and the device goes on") {
  Gpu g;
  const Counts before(g.sim);
  auto cubin = kernel_file("saxpy.sm_90.cubin");
  const std::string truncated = refused(g.d, std::span(cubin).first(200));
  CHECK(has(truncated, "NV:0: cubin"));
  auto fatbin = kernel_file("saxpy.sm_90.fatbin");
  const std::string cut = refused(g.d, std::span(fatbin).first(fatbin.size() / 2));
  CHECK(has(cut, "NV:0: fatbin"));
  const std::string text = "\x7fnot a binary of any device";
  const std::string foreign = refused(g.d, std::as_bytes(std::span(text)));
  CHECK(has(foreign, "NV:0: "));
  CHECK(refused(g.d, {}) == "NV:0: the binary is neither a fatbin (magic 0xBA55ED50) nor a cubin (an ELF)");
  CHECK(Counts(g.sim) == before);  // nothing was left allocated
  usable(g.d);
}

TEST_CASE("an unsupported relocation is an Error naming its type, and its memory is freed") {
  Gpu g;
  auto bytes = kernel_file("globals.sm_90.cubin");
  auto cubin = nv::read_cubin(bytes, "globals");
  REQUIRE(cubin);
  // The relocations of a bank the image places (bank 4 holds the globals' addresses): every entry
  // of their table gets type 0x77 (ELF64_R_TYPE: r_info's low word).
  auto r = std::find_if(cubin->relocations.begin(), cubin->relocations.end(),
                        [&](const auto& x) { return cubin->sections[x.section].name.starts_with(".nv.constant"); });
  REQUIRE(r != cubin->relocations.end());
  const auto& table = cubin->sections[r->table];
  const std::uint64_t entry = r->rela ? 24 : 16;
  for (std::uint64_t at = table.offset; at + entry <= table.offset + table.size; at += entry) {
    const std::uint32_t type = 0x77;
    std::memcpy(bytes.data() + at + 8, &type, 4);
  }
  const Counts before(g.sim);
  const std::string why = refused(g.d, bytes);
  CHECK(has(why, "NV:0: "));
  CHECK(has(why, "0x77"));
  CHECK(Counts(g.sim) == before);
  usable(g.d);
}

TEST_CASE("unloading an image frees its memory: the simulator's live counts go back to where they were") {
  Gpu g({"saxpy"});
  {
    Function first = g.function("saxpy", "saxpy");  // the launch ring, made once
  }
  const Counts before(g.sim);
  {
    Function f = g.function("saxpy", "saxpy");
    const Counts loaded(g.sim);
    CHECK(loaded.objects == before.objects + 1);
    CHECK(loaded.ranges == before.ranges + 1);
    CHECK(loaded.cpu == before.cpu + 1);
  }
  g.d.wait(g.d.submitted());
  CHECK(Counts(g.sim) == before);
  g.d.close();
  CHECK(g.sim.live_objects() == 0);
  CHECK(g.sim.live_uvm_ranges() == 0);
}

TEST_CASE("the device declares its Abi: arch, SM count, shared memory and its word's GPU address") {
  for (const bool hopper : {true, false}) {
    Gpu g({}, hopper);
    const nv::Abi* abi = g.d.capability(nv::kAbi);
    REQUIRE(abi);
    CHECK(abi->arch == (hopper ? "sm_90" : "sm_80"));
    CHECK(abi->sm_count == 2);  // the simulator's 1 GPC x 1 TPC x 2 SMs
    CHECK(abi->shared_per_sm == (hopper ? 228u : 164u) * 1024);
    CHECK(abi->shared_per_block == abi->shared_per_sm - 1024);
    CHECK(abi->timeline_word != 0);
    CHECK(abi->compute_subchannel == 1);
  }
}

TEST_CASE("saxpy launched through rig computes y = a x + y, on Hopper and Ampere and under gvisor") {
  for (auto [hopper, gvisor] : {std::pair{true, false}, std::pair{false, false}, std::pair{true, true}}) {
    CAPTURE(hopper);
    CAPTURE(gvisor);
    Gpu g({"saxpy"}, hopper, gvisor);
    Function f = g.function("saxpy", "saxpy");
    const unsigned n = 300;
    Buffer x = filled<float>(g.d, n, [](std::size_t i) { return float(i); });
    Buffer y = filled<float>(g.d, n, [](std::size_t) { return 1.0f; });
    auto s = launch_of(g.d, f, 28, {8, 16}, 1, 1);
    Run run;
    auto b = s.block(0);
    run.groups(b, 3);
    run.threads(b, 128);
    run.set<float>(b, 0, 2.0f);
    run.set<std::uint32_t>(b, 24, n);
    Buffer reads[] = {x}, writes[] = {y};
    submit(s, run, reads, writes).wait();
    y.read<float>([&](std::span<const float> v) {
      for (unsigned i = 0; i < n; ++i) REQUIRE(v[i] == 2.0f * float(i) + 1.0f);
    });
    CHECK(g.sim.faults().empty());
  }
}

TEST_CASE("reduce_sum runs with its barrier and static shared memory, reverse_block with dynamic shared memory") {
  Gpu g({"reduce", "dynshared"});
  Function reduce = g.function("reduce", "reduce_sum");
  const unsigned groups = 4, threads = 256, n = groups * threads;
  Buffer in = filled<std::uint32_t>(g.d, n, [](std::size_t i) { return std::uint32_t(i); });
  Buffer out = Buffer::create(g.d, groups * 4, Memory::Mapped);
  auto s = launch_of(g.d, reduce, 20, {0, 8}, 1, 1);
  Run run;
  run.groups(s.block(0), groups);
  run.threads(s.block(0), threads);
  run.set<std::uint32_t>(s.block(0), 16, n);
  Buffer reads[] = {in}, writes[] = {out};
  submit(s, run, reads, writes).wait();
  out.read<std::uint32_t>([&](std::span<const std::uint32_t> v) {
    for (unsigned k = 0; k < groups; ++k) {
      std::uint32_t sum = 0;
      for (unsigned i = k * threads; i < (k + 1) * threads; ++i) sum += i;
      CHECK(v[k] == sum);
    }
  });
  Function reverse = g.function("dynshared", "reverse_block");
  Buffer data = filled<std::uint32_t>(g.d, 2 * 64, [](std::size_t i) { return std::uint32_t(i); });
  auto r = launch_of(g.d, reverse, 8, {0}, 0, 1);
  Run rrun;
  rrun.groups(r.block(0), 2);
  rrun.threads(r.block(0), 64);
  rrun.shared(r.block(0), 64 * 4);
  Buffer rwrites[] = {data};
  submit(r, rrun, {}, rwrites).wait();
  data.read<std::uint32_t>([](std::span<const std::uint32_t> v) {
    for (unsigned i = 0; i < 128; ++i) REQUIRE(v[i] == (i / 64) * 64 + 63 - i % 64);
  });
  CHECK(g.sim.faults().empty());
}

TEST_CASE("module variables work through the banks and the relocated global the image placed") {
  for (const bool hopper : {true, false}) {
    CAPTURE(hopper);
    Gpu g({"globals"}, hopper);
    Function scale = g.function("globals", "scale_by_constants");
    auto image = scale.image();
    auto read = image.resolve("read_launched");
    REQUIRE(read);
    const unsigned n = 100;
    Buffer out = Buffer::create(g.d, n * 4, Memory::Mapped);
    auto s = launch_of(g.d, scale, 12, {0}, 0, 1);
    Run run;
    run.threads(s.block(0), 128);
    run.set<std::uint32_t>(s.block(0), 8, n);
    Buffer writes[] = {out};
    submit(s, run, {}, writes).wait();
    const int coefficients[4] = {1, 2, 3, 4};
    out.read<std::int32_t>([&](std::span<const std::int32_t> v) {
      for (unsigned i = 0; i < n; ++i) REQUIRE(v[i] == coefficients[i % 4] * int(i) + 100);
    });
    // `launched` lives in .nv.global; a second kernel of the same image reads it.
    Buffer count = Buffer::create(g.d, 4, Memory::Mapped);
    auto c = launch_of(g.d, *read, 8, {0}, 0, 1);
    Run crun;
    Buffer cwrites[] = {count};
    submit(c, crun, {}, cwrites).wait();
    CHECK(count.read<std::uint32_t>([](std::span<const std::uint32_t> v) { return v[0]; }) == n);
  }
}

TEST_CASE("a lone repeated launch runs every time, raises the word each time, and allocates nothing") {
  Gpu g({"globals"});
  Function scale = g.function("globals", "scale_by_constants");
  const unsigned n = 64, repeats = 200;
  Buffer out = Buffer::create(g.d, n * 4, Memory::Mapped);
  auto s = launch_of(g.d, scale, 12, {0}, 0, 1);
  Run run;
  run.threads(s.block(0), n);
  run.set<std::uint32_t>(s.block(0), 8, n);
  Buffer writes[] = {out};
  submit(s, run, {}, writes).wait();  // builds the launch, binds the channel, sets the windows
  std::uint64_t allocated = 0;
  Point last = submit(s, run, {}, writes);
  for (unsigned i = 2; i < repeats; ++i) {
    // Each submit waits for the last one's write of `out`: the loop allocates nothing but there.
    last.wait();
    const std::uint64_t before = heap_count::this_thread();
    last = submit(s, run, {}, writes);
    allocated += heap_count::this_thread() - before;
  }
  last.wait();
  CHECK(allocated == 0);
  CHECK(g.d.signaled() == g.d.submitted());
  auto read = scale.image().resolve("read_launched");
  REQUIRE(read);
  Buffer count = Buffer::create(g.d, 4, Memory::Mapped);
  auto c = launch_of(g.d, *read, 8, {0}, 0, 1);
  Run crun;
  Buffer cwrites[] = {count};
  submit(c, crun, {}, cwrites).wait();
  CHECK(count.read<std::uint32_t>([](std::span<const std::uint32_t> v) { return v[0]; }) == n * repeats);
  // The same kernel in another geometry is built anew, and runs so.
  run.threads(s.block(0), n / 2);
  submit(s, run, {}, writes).wait();
  submit(c, crun, {}, cwrites).wait();
  CHECK(count.read<std::uint32_t>([](std::span<const std::uint32_t> v) { return v[0]; }) == n * repeats + n / 2);
}

TEST_CASE("room refuses a launch over the GPU's or the kernel's limits, naming the part and the limit; the device goes on") {
  Gpu g({"saxpy", "dynshared"});
  Function f = g.function("saxpy", "saxpy");
  Buffer x = Buffer::create(g.d, 4096, Memory::Mapped), y = Buffer::create(g.d, 4096, Memory::Mapped);
  auto s = launch_of(g.d, f, 28, {8, 16}, 1, 1);
  Buffer reads[] = {x}, writes[] = {y};
  auto refusal = [&](auto&& set) {
    Run run;
    set(run, s.block(0));
    try {
      submit(s, run, reads, writes);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    FAIL("the launch was not refused");
    return std::string();
  };
  CHECK(has(refusal([](Run& r, auto b) { r.threads(b, 1, 1, 128); }),
            "NV:0: part 0: 128 threads in z, over the GPU's limit of 64 per block"));
  CHECK(has(refusal([](Run& r, auto b) { r.groups(b, 1, 70000); }), "NV:0: part 0: 70000 groups in y, over the GPU's limit of 65535"));
  CHECK(has(refusal([](Run& r, auto b) { r.shared(b, 300 * 1024); }),
            "NV:0: part 0: 300 KiB of shared memory (300 KiB asked, 0 bytes of saxpy's own), over the SM's 228 KiB"));
  Function reverse = g.function("dynshared", "reverse_block");
  auto r = launch_of(g.d, reverse, 8, {0}, 0, 1);
  Run rrun;
  rrun.shared(r.block(0), 228 * 1024);  // with its own 1 KiB reserved block, over the SM's
  try {
    submit(r, rrun, {}, writes);
    FAIL("the launch was not refused");
  } catch (const std::invalid_argument& e) {
    CHECK(has(e.what(), "of reverse_block's own), over the SM's 228 KiB"));
  }
  usable(g.d);
  Run ok;
  ok.threads(s.block(0), 64);
  ok.set<std::uint32_t>(s.block(0), 24, 64);
  submit(s, ok, reads, writes).wait();
  CHECK(!g.d.lost());
}

TEST_CASE("launches over half the launch ring in one value are refused; those that fill it wait for it to drain") {
  Gpu g({"saxpy"});
  Function f = g.function("saxpy", "saxpy");
  Buffer x = Buffer::create(g.d, 4096, Memory::Mapped), y = Buffer::create(g.d, 4096, Memory::Mapped);
  auto many = [&](int count) {
    std::vector<Submission::Part> parts;
    for (int i = 0; i < count; ++i)
      parts.push_back({"", {}, Submission::Launch{f, 28, {{8, Submission::Ref::What::Buffer, 0, {}},
                                                          {16, Submission::Ref::What::Buffer, 1, {}}}}});
    return Submission::make(g.d, parts, 1, 1);
  };
  Buffer reads[] = {x}, writes[] = {y};
  {
    Run run;
    try {
      submit(many(1000), run, reads, writes);
      FAIL("1000 launches in one value were not refused");
    } catch (const std::invalid_argument& e) {
      CHECK(has(e.what(), "NV:0: the submission's launches take"));
      CHECK(has(e.what(), "of the launch ring, over the most a value may take (512 KiB)"));
    }
  }
  // Three values of 300 launches (about 360 KiB each): the third waits for the first.
  auto s = many(300);
  Run run;
  Point last{};
  for (int i = 0; i < 3; ++i) last = submit(s, run, reads, writes);
  last.wait();
  CHECK(!g.d.lost());
  CHECK(g.sim.faults().empty());
}

namespace {

// What pick_private (stack.cu) gives thread i for in[i] = v.
std::int32_t pick_private_of(std::int32_t i, std::int32_t v, std::int32_t pick) {
  std::int32_t a[32];
  for (int j = 0; j < 32; ++j) a[j] = v + j;
  for (int j = 0; j < 32; ++j) a[(pick * j + i) & 31] += j;
  return a[(pick + i) & 31];
}

}  // namespace

TEST_CASE("a kernel with a stack runs on the local memory store the driver sets, on Hopper and Ampere") {
  for (const bool hopper : {true, false}) {
    CAPTURE(hopper);
    Gpu g({"stack"}, hopper);
    Function f = g.function("stack", "pick_private");
    const unsigned n = 200;
    Buffer in = filled<std::int32_t>(g.d, n, [](std::size_t i) { return std::int32_t(3 * i); });
    Buffer out = filled<std::int32_t>(g.d, n, [](std::size_t) { return std::int32_t(-1); });
    auto s = launch_of(g.d, f, 24, {0, 8}, 1, 1);
    Buffer reads[] = {in}, writes[] = {out};
    for (const std::int32_t pick : {5, 11}) {  // twice: the store is set once and stays
      Run run;
      auto b = s.block(0);
      run.groups(b, 2);
      run.threads(b, 128);
      run.set<std::int32_t>(b, 16, std::int32_t(n));
      run.set<std::int32_t>(b, 20, pick);
      submit(s, run, reads, writes).wait();
      out.read<std::int32_t>([&](std::span<const std::int32_t> v) {
        for (unsigned i = 0; i < n; ++i) REQUIRE(v[i] == pick_private_of(std::int32_t(i), std::int32_t(3 * i), pick));
      });
    }
    CHECK(g.sim.faults().empty());
  }
}

TEST_CASE("room refuses a kernel whose local memory a thread is over what the driver gives, naming it and the limit") {
  Gpu g({"stack"});
  Function f = g.function("stack", "huge_private");
  Buffer in = Buffer::create(g.d, 4096, Memory::Mapped), out = Buffer::create(g.d, 4096, Memory::Mapped);
  auto s = launch_of(g.d, f, 20, {0, 8}, 1, 1);  // in, out, pick
  Buffer reads[] = {in}, writes[] = {out};
  Run run;
  run.threads(s.block(0), 32);
  try {
    submit(s, run, reads, writes);
    FAIL("the launch was not refused");
  } catch (const std::invalid_argument& e) {
    CHECK(has(e.what(), "NV:0: part 0: huge_private takes 131072 bytes of local memory a thread, over the 16384 NV:0 "
                        "gives a thread"));
  }
  usable(g.d);
  CHECK(g.sim.faults().empty());
}

TEST_CASE("a kernel's MMU fault loses NV:0 naming COMPUTE:0, the value, the part and the kernel; another device goes on") {
  Gpu g({"saxpy"});
  Function f = g.function("saxpy", "saxpy");
  Device cpu = host();
  // saxpy's x and y (at 8 and 16) are raw addresses no range of the GPU's VA space holds.
  Submission::Launch launch{f, 28, {}};
  Submission::Part part{"", {}, launch};
  auto s = Submission::make(g.d, std::span(&part, 1), 0, 0);
  Run run;
  auto b = s.block(0);
  run.groups(b, 1);
  run.threads(b, 32);
  run.set<float>(b, 0, 2.0f);
  run.set<std::uint64_t>(b, 8, std::uint64_t{1} << 45);
  run.set<std::uint64_t>(b, 16, std::uint64_t{1} << 45);
  run.set<std::uint32_t>(b, 24, 32);
  std::string why;
  try {
    submit(s, run, {}, {}).wait();
  } catch (const Lost& e) {
    why = e.what();
  }
  CAPTURE(why);
  CHECK(has(why, "NV:0"));
  CHECK(has(why, "(Xid 31) in COMPUTE:0, value "));
  CHECK(has(why, " part 0 (kernel saxpy)"));
  CHECK(g.d.lost());
  Buffer a = Buffer::create(cpu, 64), c = Buffer::create(cpu, 64);
  Buffer::copy(a, c);
  CHECK(!cpu.lost());
}
