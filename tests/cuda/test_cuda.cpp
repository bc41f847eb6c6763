// The CUDA driver through rig's public API and the Rig_cuda_abi record: what
// rig/cuda.hpp promises, on the fake libcuda (CI) or on a real GPU (device-check).
#include <doctest/doctest.h>

#include <rig/cuda_abi.hpp>
#include <rig/profile.hpp>
#include <rig/rig.hpp>

#include <array>
#include <cstring>
#include <numeric>

#include "heap_count.hpp"
#include "support.hpp"

using namespace rig;
namespace t = rig::cuda::test;
namespace abi = rig::cuda_abi;

namespace {

// add_u32's parameters (data, n, add), as the kernel reads them: 20 bytes.
constexpr std::uint32_t kAddParams = 20;
std::vector<std::byte> add_args(std::uint64_t data, std::uint64_t n, std::uint32_t add) {
  std::vector<std::byte> out(kAddParams);
  std::memcpy(out.data(), &data, 8);
  std::memcpy(out.data() + 8, &n, 8);
  std::memcpy(out.data() + 16, &add, 4);
  return out;
}

std::vector<std::uint32_t> iota(std::size_t n, std::uint32_t first = 0) {
  std::vector<std::uint32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// A launch of add_u32 over the written buffer 0.
Submission add_launch(const Device& d, const Function& add) { return t::one_launch(d, add, kAddParams, 0, 1); }
void set_add(Run& run, const Submission& s, std::uint64_t n, std::uint32_t add) {
  auto b = s.block(0);
  t::elements(run, b, n);
  run.set(b, 0, std::uint64_t(0));
  run.set(b, 8, n);
  run.set(b, 16, add);
}

}  // namespace

TEST_CASE("CUDA:0 opens with the facts its interface states") {
  Device d = t::open_gpu(0);
  CHECK(d.name() == "CUDA:0");
  CHECK(d.arch().starts_with("sm_"));
  const auto& f = d.facts();
  REQUIRE(f.queues.size() == 2);
  CHECK(f.queues[0] == Queue{"COMPUTE:0", {Kind::Fill, Kind::Launch}});
  CHECK(f.queues[1] == Queue{"COPY:0", {Kind::Copy, Kind::Fill}});
  CHECK(f.copy_engine == std::optional<int>(1));
  CHECK(f.completion == edge::Completion::Store);
  CHECK(f.waits.stores);
  CHECK(f.waits.hosts);
  CHECK(f.may_block);
  CHECK_FALSE(f.hang_ms);
  CHECK_FALSE(f.host_addresses);
  CHECK(f.alignment == 256);
  CHECK(f.counters.empty());
  CHECK(f.budget > 0);
  REQUIRE(f.bus);
  CHECK(f.bus->size() == 12);  // "0000:1b:00.0"
  CHECK(reinterpret_cast<std::uintptr_t>(f.word) == reinterpret_cast<std::uintptr_t>(&rig_words[d.index()]));
}

TEST_CASE("device_count gives the GPUs libcuda finds, and the record finds its functions") {
  auto n = cuda::device_count();
  REQUIRE(n);
  CHECK(*n >= 1);
  Device d = t::open_gpu(0);
  const auto& r = t::record(d);
  CHECK(r.symbol("cuLaunchKernel") != nullptr);
  CHECK(r.symbol("cuGraphLaunch") != nullptr);
  CHECK(r.symbol("cuGraphExecKernelNodeSetParams_v2") != nullptr);
  CHECK(r.symbol("cuNoSuchFunction") == nullptr);
  CHECK(host().capability(abi::key) == nullptr);
}

TEST_CASE("Device memory has a device address only; Pinned memory has a host address too") {
  Device d = t::open_gpu(0);
  Buffer device = Buffer::create(d, 1 << 20, Memory::Device);
  CHECK(device.address() != 0);
  CHECK(device.address() % 256 == 0);
  CHECK_FALSE(device.host_address());
  CHECK_THROWS_AS(device.read<std::uint32_t>([](auto) {}), std::invalid_argument);
  Buffer pinned = Buffer::create(d, 4096, Memory::Pinned);
  REQUIRE(pinned.host_address());
  pinned.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 5u); });
  t::upload(device.view(0, 4096), iota(1024));
  CHECK(t::download(device.view(0, 4096)) == iota(1024));
  CHECK(d.used() >= (1u << 20) + 4096);
}

TEST_CASE("Mapped memory is host-addressed: the GPU's own where the host reads it, else Pinned") {
  Device d = t::open_gpu(0);
  Buffer mapped = Buffer::create(d, 4096, Memory::Mapped);
  REQUIRE(mapped.host_address());
  mapped.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 3u); });
  CHECK(t::download(mapped) == std::vector<std::uint32_t>(1024, 3u));
}

TEST_CASE("a launch runs its kernel over the grid and the point is reached once it is done") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  const std::uint64_t n = 10000;
  Buffer data = Buffer::create(d, n * 4, Memory::Pinned);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::iota(xs.begin(), xs.end(), 0u); });
  auto s = add_launch(d, add);
  Run run;
  set_add(run, s, n, 7);
  Buffer writes[] = {data};
  Point p = submit(s, run, {}, writes);
  CHECK(p.device() == d);
  p.wait();
  CHECK(p.reached());
  data.read<std::uint32_t>([](std::span<const std::uint32_t> xs) {
    for (std::size_t i = 0; i < xs.size(); ++i) REQUIRE(xs[i] == i + 7);
  });
}

TEST_CASE("an entry gives its params from cuFuncGetParamInfo and its threads from its attributes") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  if (add.params()) CHECK(*add.params() == kAddParams);  // unknown before CUDA 12.4
  REQUIRE(add.threads());
  CHECK(*add.threads() >= 256);
  CHECK(add.entry() != 0);
  auto image = add.image();
  CHECK_FALSE(image.resolve("no_such_kernel"));
}

TEST_CASE("room refuses a launch past the function's limits") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  auto s = add_launch(d, add);
  Buffer data = Buffer::create(d, 4096, Memory::Device);
  Buffer writes[] = {data};
  Run run;
  set_add(run, s, 1024, 1);
  run.shared(s.block(0), 1u << 30);  // far past any GPU's shared memory
  const std::string reason =
      std::string(d.name()) + ": part 0: 1 GiB of dynamic shared memory, over add_u32's limit of ";
  CHECK_THROWS_WITH_AS(submit(s, run, {}, writes), doctest::Contains(reason.c_str()), std::invalid_argument);
  Run over;
  CHECK_THROWS_AS(over.threads(s.block(0), 1u << 20), std::invalid_argument);
  CHECK(!d.lost());
  run.shared(s.block(0), 0);
  submit(s, run, {}, writes).wait();
}

TEST_CASE("a submission's parts run on both queues in order: copy in, launch, copy out") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  const std::uint64_t n = 4096;
  Buffer in = Buffer::create(d, n * 4, Memory::Pinned), out = Buffer::create(d, n * 4, Memory::Pinned);
  Buffer work = Buffer::create(d, n * 4, Memory::Device);
  in.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::iota(xs.begin(), xs.end(), 100u); });
  Submission::Launch launch{add, kAddParams, {{0, Submission::Ref::What::Unordered, 1, {}}}};
  std::vector<Submission::Part> parts = {
      {"COPY:0", {}, Submission::Copy{{in, 0}, {work, 0}, {Box::row(n * 4)}, {}}},
      {"COMPUTE:0", {0}, launch},
      {"COPY:0", {1}, Submission::Copy{{work, 0}, {out, 0}, {Box::row(n * 4)}, {}}},
  };
  std::vector<std::pair<Buffer, Access>> fixed = {
      {in, Access::Read}, {work, Access::ReadWrite}, {out, Access::ReadWrite}};
  auto s = Submission::make(d, parts, 0, 0, fixed);
  Run run;
  auto b = s.block(1);
  t::elements(run, b, n);
  run.set(b, 0, std::uint64_t(0));
  run.set(b, 8, n);
  run.set(b, 16, std::uint32_t(1000));
  for (int round = 1; round <= 3; ++round) {
    submit(s, run, {}, {}).wait();
    out.read<std::uint32_t>([&](std::span<const std::uint32_t> xs) {
      for (std::size_t i = 0; i < xs.size(); ++i) REQUIRE(xs[i] == 100 + i + 1000);
    });
  }
}

TEST_CASE("values run in order across the queues: a copy sees the launch of the value before it") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  const std::uint64_t n = 1 << 16;
  Buffer a = Buffer::create(d, n * 4, Memory::Pinned), b = Buffer::create(d, n * 4, Memory::Pinned);
  a.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 0u); });
  // Unordered ends: rig adds no wait between them, so only the device's order keeps them.
  auto s_add = add_launch(d, add);
  Submission::Part copy{"", {}, Submission::Copy{{a, 0}, {b, 0}, {Box::row(n * 4)}, {}}};
  auto s_copy = Submission::make(d, std::span(&copy, 1), 0, 0);
  Run r_add, r_copy;
  set_add(r_add, s_add, n, 1);
  Buffer writes[] = {a};
  Point last;
  for (int i = 0; i < 20; ++i) {
    submit(s_add, r_add, {}, writes);
    last = submit(s_copy, r_copy, {}, {});
  }
  last.wait();
  b.read<std::uint32_t>([](std::span<const std::uint32_t> xs) {
    for (auto x : xs) REQUIRE(x == 20u);
  });
}

TEST_CASE("a copy of rows with pitches copies each row and leaves the gaps") {
  Device d = t::open_gpu(0);
  Buffer src = Buffer::create(d, 4 * 64, Memory::Pinned), dst = Buffer::create(d, 4 * 48, Memory::Pinned);
  src.write<std::uint8_t>([](std::span<std::uint8_t> xs) { std::iota(xs.begin(), xs.end(), std::uint8_t(0)); });
  dst.write<std::uint8_t>([](std::span<std::uint8_t> xs) { std::fill(xs.begin(), xs.end(), 0xee); });
  Submission::Part part{"", {}, Submission::Copy{{src, 0}, {dst, 0}, {Box{8, 4, 32, 4, 64, 48}}, {}}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  submit(s, run, {}, {}).wait();
  dst.read<std::uint8_t>([](std::span<const std::uint8_t> xs) {
    for (std::size_t i = 0; i < xs.size(); ++i) {
      std::size_t row = i / 48, col = i % 48;
      if (col >= 4 && col < 36) REQUIRE(xs[i] == std::uint8_t(8 + row * 64 + col - 4));
      else REQUIRE(xs[i] == 0xee);
    }
  });
}

TEST_CASE("a fill of rows with pitches sets each row's bytes and leaves the gaps") {
  Device d = t::open_gpu(0);
  Buffer dst = Buffer::create(d, 4 * 48, Memory::Device);
  dst.fill(std::byte{0xee});
  Submission::Part part{"", {}, Submission::Copy{{}, {dst, 0}, {Box{0, 4, 32, 4, 48, 48}}, std::byte{0x5a}}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  submit(s, run, {}, {}).wait();
  std::vector<std::byte> out(dst.length());
  dst.blit_to(0, out);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::size_t col = i % 48;
    REQUIRE(out[i] == (col >= 4 && col < 36 ? std::byte{0x5a} : std::byte{0xee}));
  }
}

TEST_CASE("copies between host memory and Device memory pass through staging the GPU borrows") {
  Device d = t::open_gpu(0);
  const std::size_t n = (1 << 20) + 12;
  std::vector<std::byte> in(n), out(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = std::byte(i * 7);
  Buffer device = Buffer::create(d, n, Memory::Device);
  device.blit_from(in, 0);
  device.blit_to(0, out);
  CHECK(out == in);
  Buffer host_copy = Buffer::create(host(), n);
  Buffer::copy(device, host_copy);
  host_copy.read<std::byte>([&](std::span<const std::byte> xs) { CHECK(std::equal(xs.begin(), xs.end(), in.begin())); });
  device.fill(std::byte{7});
  device.blit_to(0, out);
  CHECK(std::all_of(out.begin(), out.end(), [](std::byte b) { return b == std::byte{7}; }));
}

TEST_CASE("a host buffer borrowed by the GPU is what its kernels read and write (map_host)") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  const std::uint64_t n = 1 << 14;  // 64 KiB: the host device's memory starts on a page
  Buffer h = Buffer::create(host(), n * 4);
  h.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 1u); });
  CHECK(reaches(d, host()));
  auto borrowed = Buffer::borrow(d, h);
  REQUIRE(borrowed);
  CHECK(borrowed->device() == d);
  auto s = add_launch(d, add);
  Run run;
  set_add(run, s, n, 5);
  Buffer writes[] = {*borrowed};
  submit(s, run, {}, writes);
  h.read<std::uint32_t>([](std::span<const std::uint32_t> xs) {  // waits for the GPU's write
    for (auto x : xs) REQUIRE(x == 6u);
  });
}

TEST_CASE("another GPU's memory borrowed through peer access is what a kernel writes (map_peer)") {
  if (t::gpus() < 2) return;  // one GPU: no peer
  Device d0 = t::open_gpu(0), d1 = t::open_gpu(1);
  auto add = t::kernel(d0, "add_u32");
  const std::uint64_t n = 4096;
  Buffer theirs = Buffer::create(d1, n * 4, Memory::Device);
  t::upload(theirs, iota(n));
  auto borrowed = Buffer::borrow(d0, theirs);
  if (!borrowed) return;  // no peer access between these GPUs
  auto s = add_launch(d0, add);
  Run run;
  set_add(run, s, n, 100);
  Buffer writes[] = {*borrowed};
  submit(s, run, {}, writes).wait();
  CHECK(t::download(theirs) == iota(n, 100));
}

namespace {
// A fill that launches add_u32 through the record's cuLaunchKernel on its queue.
struct LaunchArg {
  abi::LaunchKernelFn launch;
  abi::CUfunction function;
  std::uint64_t data, n;
};
int fill_launch(void* queue, void* arg, std::uint64_t v) {
  const auto& a = *static_cast<const LaunchArg*>(arg);
  auto params = add_args(a.data, a.n, std::uint32_t(v));
  std::size_t size = params.size();
  void* extra[] = {abi::kLaunchParamBufferPointer, params.data(), abi::kLaunchParamBufferSize, &size,
                   abi::kLaunchParamEnd};
  return a.launch(a.function, std::uint32_t((a.n + 255) / 256), 1, 1, 256, 1, 1, 0,
                  static_cast<abi::CUstream>(queue), nullptr, extra);
}
}  // namespace

TEST_CASE("a fill calls cuLaunchKernel through the record's symbol, on its queue's stream") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  const std::uint64_t n = 1000;
  Buffer data = Buffer::create(d, n * 4, Memory::Pinned);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 0u); });
  auto arg = std::make_shared<LaunchArg>(LaunchArg{
      reinterpret_cast<abi::LaunchKernelFn>(t::record(d).symbol("cuLaunchKernel")),
      reinterpret_cast<abi::CUfunction>(add.entry()), data.address(), n});
  REQUIRE(bool(arg->launch));
  Buffer arg_buffer = Buffer::of_host({reinterpret_cast<std::byte*>(arg.get()), sizeof(LaunchArg)}, arg);
  std::uint64_t sum = 0;
  for (const char* queue : {"COMPUTE:0", "COPY:0"}) {
    Submission::Part part{queue, {}, Submission::Fill{fill_launch, arg_buffer}};
    auto s = Submission::make(d, std::span(&part, 1), 0, 0, std::vector{std::pair{data, Access::ReadWrite}},
                              {add.state()});
    Run run;
    Point p = submit(s, run, {}, {});
    sum += p.value();
    p.wait();
  }
  data.read<std::uint32_t>([&](std::span<const std::uint32_t> xs) {
    for (auto x : xs) REQUIRE(x == sum);
  });
}

namespace {
// A fill that sets node 0's add to the value it completes, then launches the graph.
struct GraphArg {
  abi::GraphLaunchFn launch;
  abi::GraphExecKernelNodeSetParamsFn set;
  abi::CUgraphExec exec;
  abi::CUgraphNode node;
  abi::CUfunction function;
  std::uint64_t data, n;
};
int fill_graph(void* queue, void* arg, std::uint64_t v) {
  const auto& a = *static_cast<const GraphArg*>(arg);
  auto params = add_args(a.data, a.n, std::uint32_t(v));
  std::size_t size = params.size();
  void* extra[] = {abi::kLaunchParamBufferPointer, params.data(), abi::kLaunchParamBufferSize, &size,
                   abi::kLaunchParamEnd};
  abi::KernelNodeParams p;
  p.func = a.function;
  p.gridDimX = std::uint32_t((a.n + 255) / 256);
  p.blockDimX = 256;
  p.extra = extra;
  if (int r = a.set(a.exec, a.node, &p)) return r;
  return a.launch(a.exec, static_cast<abi::CUstream>(queue));
}
}  // namespace

TEST_CASE("a graph the record makes runs its kernels in order when a fill launches it, updated per run") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  const auto& rec = t::record(d);
  const std::uint64_t n = 2048;
  Buffer data = Buffer::create(d, n * 4, Memory::Pinned);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 0u); });
  auto f = reinterpret_cast<abi::CUfunction>(add.entry());
  const std::uint32_t groups = std::uint32_t((n + 255) / 256);
  std::array<abi::Kernel, 2> kernels = {abi::Kernel{f, {groups, 1, 1}, {256, 1, 1}, add_args(data.address(), n, 1)},
                                        abi::Kernel{f, {groups, 1, 1}, {256, 1, 1}, add_args(data.address(), n, 10)}};
  auto graph = rec.graph(kernels);
  REQUIRE_MESSAGE(graph, (graph ? std::string() : graph.error()));
  REQUIRE(graph->nodes().size() == 2);
  auto arg = std::make_shared<GraphArg>(GraphArg{
      reinterpret_cast<abi::GraphLaunchFn>(rec.symbol("cuGraphLaunch")),
      reinterpret_cast<abi::GraphExecKernelNodeSetParamsFn>(rec.symbol("cuGraphExecKernelNodeSetParams_v2")),
      graph->handle(), graph->nodes()[0], f, data.address(), n});
  Buffer arg_buffer = Buffer::of_host({reinterpret_cast<std::byte*>(arg.get()), sizeof(GraphArg)}, arg);
  Submission::Part part{"", {}, Submission::Fill{fill_graph, arg_buffer}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0, std::vector{std::pair{data, Access::ReadWrite}},
                            {graph->keep(), add.state()});
  Run run;
  std::uint64_t expect = 0;
  for (int i = 0; i < 3; ++i) {
    Point p = submit(s, run, {}, {});
    expect += p.value() + 10;
    p.wait();
  }
  data.read<std::uint32_t>([&](std::span<const std::uint32_t> xs) {
    for (auto x : xs) REQUIRE(x == expect);
  });
  std::array<abi::Kernel, 0> none{};
  auto empty = rec.graph(none);
  REQUIRE(empty);
  CHECK(empty->nodes().empty());
}

TEST_CASE("graph refuses a function of no loaded image and an empty dimension, changing nothing") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  const auto& rec = t::record(d);
  std::array<abi::Kernel, 1> stranger = {abi::Kernel{reinterpret_cast<abi::CUfunction>(std::uintptr_t(0x1234)),
                                                     {1, 1, 1}, {1, 1, 1}, {}}};
  CHECK_THROWS_WITH_AS(rec.graph(stranger), doctest::Contains("belongs to no image loaded"), std::invalid_argument);
  std::array<abi::Kernel, 1> flat = {abi::Kernel{reinterpret_cast<abi::CUfunction>(add.entry()), {0, 1, 1},
                                                 {1, 1, 1}, add_args(0, 0, 0)}};
  CHECK_THROWS_WITH_AS(rec.graph(flat), doctest::Contains("empty dimension"), std::invalid_argument);
}

TEST_CASE("work waits in its queue for the host device's value") {
  Device d = t::open_gpu(0);
  auto copy = t::kernel(d, "copy_u32");
  Buffer flag = Buffer::create(d, 4, Memory::Pinned), out = Buffer::create(d, 4, Memory::Pinned);
  flag.write<std::uint32_t>([](std::span<std::uint32_t> xs) { xs[0] = 0; });
  out.write<std::uint32_t>([](std::span<std::uint32_t> xs) { xs[0] = 0; });
  // The host device stores 7 into flag after spinning; CUDA copies flag to out after it.
  auto image = Image::load(host(), t::host_kernels());
  REQUIRE(image);
  auto slow = image->resolve("slow_store");
  REQUIRE(slow);
  Submission::Part hp{"", {}, Submission::Launch{*slow, 24, {}}};
  auto hs = Submission::make(host(), std::span(&hp, 1), 0, 0);
  Run hr;
  hr.set(hs.block(0), 0, std::uint64_t(*flag.host_address()));
  hr.set(hs.block(0), 8, std::uint64_t(20'000'000));
  hr.set(hs.block(0), 16, std::uint32_t(7));
  Point produced = submit(hs, hr, {}, {});
  auto cs = t::one_launch(d, copy, 24, 1, 1);
  Run cr;
  t::elements(cr, cs.block(0), 1);
  cr.set(cs.block(0), 16, std::uint64_t(1));
  Buffer reads[] = {flag}, writes[] = {out};
  Point waits[] = {produced};
  Point p = submit(cs, cr, reads, writes, waits);
  p.wait();
  CHECK(produced.reached());
  out.read<std::uint32_t>([](std::span<const std::uint32_t> xs) { CHECK(xs[0] == 7u); });
}

TEST_CASE("work waits for a memory device's value") {
  Device d = t::open_gpu(0);
  Device memory = memory_device("cuda-test-memory");
  Buffer m = Buffer::create(memory, 64);
  Submission::Part fill{"", {}, Submission::Copy{{m, 0}, {m, 0}, {Box::row(32, 0, 32)}, {}}};
  auto ms = Submission::make(memory, std::span(&fill, 1), 0, 0);
  Run mr;
  Point produced = submit(ms, mr, {}, {});
  auto add = t::kernel(d, "add_u32");
  Buffer data = Buffer::create(d, 64, Memory::Pinned);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 1u); });
  auto s = add_launch(d, add);
  Run run;
  set_add(run, s, 16, 2);
  Buffer writes[] = {data};
  Point waits[] = {produced};
  submit(s, run, {}, writes, waits).wait();
  data.read<std::uint32_t>([](std::span<const std::uint32_t> xs) {
    for (auto x : xs) REQUIRE(x == 3u);
  });
  memory.close();
}

TEST_CASE("work waits in its queue for another CUDA device's value") {
  if (t::gpus() < 2) return;  // one GPU: nothing to wait for
  Device d0 = t::open_gpu(0), d1 = t::open_gpu(1);
  Buffer flag = Buffer::create(d0, 4, Memory::Pinned), out = Buffer::create(d0, 4, Memory::Pinned);
  flag.write<std::uint32_t>([](std::span<std::uint32_t> xs) { xs[0] = 0; });
  // CUDA:1 stores 9 into CUDA:0's pinned flag (portable memory) after 20 ms.
  auto slow = t::kernel(d1, "slow_store");
  Submission::Part sp{"", {}, Submission::Launch{slow, 20, {}}};
  auto s1 = Submission::make(d1, std::span(&sp, 1), 0, 0);
  Run r1;
  r1.set(s1.block(0), 0, std::uint64_t(flag.address()));
  r1.set(s1.block(0), 8, std::uint64_t(20'000'000));
  r1.set(s1.block(0), 16, std::uint32_t(9));
  Point produced = submit(s1, r1, {}, {});
  auto copy = t::kernel(d0, "copy_u32");
  auto s0 = t::one_launch(d0, copy, 24, 1, 1);
  Run r0;
  t::elements(r0, s0.block(0), 1);
  r0.set(s0.block(0), 16, std::uint64_t(1));
  Buffer reads[] = {flag}, writes[] = {out};
  Point waits[] = {produced};
  submit(s0, r0, reads, writes, waits).wait();
  out.read<std::uint32_t>([](std::span<const std::uint32_t> xs) { CHECK(xs[0] == 9u); });
}

TEST_CASE("an image CUDA rejects is an Error with the JIT's log, and the device stays usable") {
  Device d = t::open_gpu(0);
  auto bad = Image::load(d, t::bad_ptx());
  REQUIRE_FALSE(bad);
  CHECK(bad.error().starts_with("CUDA:0: CUDA rejected the PTX"));
  CHECK(bad.error().find("CUDA_ERROR_INVALID_PTX") != std::string::npos);
  CHECK(bad.error().find("JIT log: ") != std::string::npos);
  CHECK(bad.error().find("garbage") != std::string::npos);
  CHECK_FALSE(d.lost());
  auto add = t::kernel(d, "add_u32");
  CHECK(add.entry() != 0);
}

TEST_CASE("a profile gets each value's start and end on the host clock, in timeline order") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  Buffer data = Buffer::create(d, 4096, Memory::Device);
  auto s = add_launch(d, add);
  Run run;
  set_add(run, s, 1024, 1);
  Buffer writes[] = {data};
  const std::uint64_t before = profile::now_ns();
  auto records = profile::take([&] {
    for (int i = 0; i < 5; ++i) submit(s, run, {}, writes);
  });
  const std::uint64_t after = profile::now_ns();
  std::vector<profile::Record> values;
  for (auto& r : records)
    if (r.what == profile::Record::What::Value && r.device == "CUDA:0") values.push_back(r);
  REQUIRE(values.size() == 5);
  const std::uint64_t slack = 1'000'000;  // the correlation of the GPU's clock with the host's
  for (std::size_t i = 0; i < values.size(); ++i) {
    CHECK(values[i].start_ns + slack >= before);
    CHECK(values[i].start_ns <= values[i].end_ns);
    CHECK(values[i].end_ns <= after + slack);
    if (i) CHECK(values[i].start_ns >= values[i - 1].end_ns);
  }
}

TEST_CASE("a submit allocates nothing once warm") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  Buffer data = Buffer::create(d, 4096, Memory::Device);
  auto s = add_launch(d, add);
  Run run;
  set_add(run, s, 1024, 1);
  Buffer writes[] = {data};
  for (int i = 0; i < 200; ++i) submit(s, run, {}, writes).wait();
  std::uint64_t allocations = 0;  // this thread's: the fake's stream threads allocate on their own
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t before = heap_count::this_thread();
    Point p = submit(s, run, {}, writes);
    allocations += heap_count::this_thread() - before;
    p.wait();
  }
  CHECK(allocations == 0);
}

TEST_CASE("close waits for the work, then the device is lost with reason closed") {
  Device d = t::open_gpu(0);
  auto add = t::kernel(d, "add_u32");
  Buffer data = Buffer::create(d, 4096, Memory::Pinned);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 0u); });
  auto s = add_launch(d, add);
  Run run;
  set_add(run, s, 1024, 3);
  Buffer writes[] = {data};
  Point p = submit(s, run, {}, writes);
  d.close();
  CHECK(d.lost() == std::optional<std::string>("closed"));
  CHECK(p.reached());
  CHECK_THROWS_AS(Buffer::create(d, 64), Lost);
  Device again = t::open_gpu(0);
  CHECK_FALSE(again == d);
}

TEST_CASE("a fault of the context loses the device with CUDA's error name; the GPU opens again") {
  Device d = t::open_gpu(0);
  auto fault = t::kernel(d, "fault");
  Submission::Part part{"", {}, Submission::Launch{fault, 0, {}}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  // The fault shows at the wait, or already at a call of the submit that follows the kernel.
  CHECK_THROWS_AS(submit(s, run, {}, {}).wait(), Lost);
  REQUIRE(d.lost());
  CHECK(d.lost()->find("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered") != std::string::npos);
  CHECK_THROWS_WITH_AS(d.signaled(), doctest::Contains("CUDA:0 lost: "), Lost);
  // The next open resets the failed context: work runs again.
  Device again = t::open_gpu(0);
  auto add = t::kernel(again, "add_u32");
  Buffer data = Buffer::create(again, 64, Memory::Pinned);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 1u); });
  auto s2 = add_launch(again, add);
  Run r2;
  set_add(r2, s2, 16, 4);
  Buffer writes[] = {data};
  submit(s2, r2, {}, writes).wait();
  data.read<std::uint32_t>([](std::span<const std::uint32_t> xs) {
    for (auto x : xs) REQUIRE(x == 5u);
  });
}
