// bench_cuda — what rig's CUDA driver costs, measured the way scripts/device_floors.cu
// measures raw CUDA, so that scripts/device-check prints them side by side:
//   launch_wait_us  one empty kernel launch, submitted and waited for (median)
//   graph64_us      a fill launching a graph of 64 empty kernels, submitted and waited for (median)
//   h2d_gbps/d2h_gbps  a copy of 256 MiB from Pinned to Device memory and back (best of 3)
//   submit_allocations  heap allocations per submit once warm (should be 0)
// It prints one JSON object. --quick uses few iterations and 16 MiB (the CI runs it on the
// fake libcuda that way). Kernels: RIG_CUDA_TEST_CUBIN, or the committed fatbin of kernels.cu.
#include <rig/cuda_abi.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>
#include <vector>

#include "heap_count.hpp"
#include "support.hpp"

using namespace rig;
namespace t = rig::cuda::test;
namespace abi = rig::cuda_abi;

namespace {

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

struct GraphArg {
  abi::GraphLaunchFn launch;
  abi::CUgraphExec exec;
};
int launch_graph(void* queue, void* arg, std::uint64_t) {
  const auto& a = *static_cast<const GraphArg*>(arg);
  return a.launch(a.exec, static_cast<abi::CUstream>(queue));
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string_view(argv[1]) == "--quick";
  const int iterations = quick ? 50 : 2000;
  const std::size_t copy_bytes = quick ? std::size_t(16) << 20 : std::size_t(256) << 20;
  try {
    Device d = t::open_gpu(0);
    auto empty = t::kernel(d, "empty");

    // One launch + wait.
    Submission::Part part{"", {}, Submission::Launch{empty, 0, {}}};
    auto launch = Submission::make(d, std::span(&part, 1), 0, 0);
    Run run;
    for (int i = 0; i < 100; ++i) submit(launch, run, {}, {}).wait();
    std::vector<double> launch_us;
    std::uint64_t allocated = 0;  // this thread's: libcuda's threads allocate on their own
    for (int i = 0; i < iterations; ++i) {
      auto start = std::chrono::steady_clock::now();
      const std::uint64_t before = heap_count::this_thread();
      Point p = submit(launch, run, {}, {});
      allocated += heap_count::this_thread() - before;
      p.wait();
      launch_us.push_back(seconds_since(start) * 1e6);
    }
    const double allocations = double(allocated) / iterations;

    // A graph of 64 empty kernels, launched by a fill.
    const auto& rec = t::record(d);
    abi::Kernel nothing;  // one block of one thread
    nothing.func = reinterpret_cast<abi::CUfunction>(empty.entry());
    std::vector<abi::Kernel> kernels(64, nothing);
    auto graph = rec.graph(kernels);
    if (!graph) throw std::runtime_error(graph.error());
    auto arg = std::make_shared<GraphArg>(
        GraphArg{reinterpret_cast<abi::GraphLaunchFn>(rec.symbol("cuGraphLaunch")), graph->handle()});
    Buffer arg_buffer = Buffer::of_host({reinterpret_cast<std::byte*>(arg.get()), sizeof(GraphArg)}, arg);
    Submission::Part fill{"", {}, Submission::Fill{launch_graph, arg_buffer}};
    auto graphs = Submission::make(d, std::span(&fill, 1), 0, 0, {}, {graph->keep(), empty.state()});
    for (int i = 0; i < 20; ++i) submit(graphs, run, {}, {}).wait();
    std::vector<double> graph_us;
    for (int i = 0; i < iterations / 4 + 1; ++i) {
      auto start = std::chrono::steady_clock::now();
      submit(graphs, run, {}, {}).wait();
      graph_us.push_back(seconds_since(start) * 1e6);
    }

    // Copies each way.
    Buffer pinned = Buffer::create(d, copy_bytes, Memory::Pinned);
    Buffer device = Buffer::create(d, copy_bytes, Memory::Device);
    pinned.write<std::byte>([](std::span<std::byte> xs) { std::memset(xs.data(), 1, xs.size()); });
    auto copy_rate = [&](const Buffer& from, const Buffer& to) {
      Submission::Part c{"", {}, Submission::Copy{{from, 0}, {to, 0}, {Box::row(copy_bytes)}, {}}};
      auto s = Submission::make(d, std::span(&c, 1), 0, 0);
      double best = 0;
      for (int i = 0; i < 3; ++i) {
        auto start = std::chrono::steady_clock::now();
        submit(s, run, {}, {}).wait();
        best = std::max(best, double(copy_bytes) / seconds_since(start) / 1e9);
      }
      return best;
    };
    const double h2d = copy_rate(pinned, device), d2h = copy_rate(device, pinned);

    fmt::print("{{\"device\": \"{}\", \"arch\": \"{}\", \"launch_wait_us\": {:.2f}, \"graph64_us\": {:.2f}, "
               "\"h2d_gbps\": {:.2f}, \"d2h_gbps\": {:.2f}, \"copy_mib\": {}, \"submit_allocations\": {:.3f}}}\n",
               d.name(), d.arch(), median(launch_us), median(graph_us), h2d, d2h, copy_bytes >> 20, allocations);
    d.close();
    return allocations == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_cuda: {}\n", e.what());
    return 2;
  }
}
