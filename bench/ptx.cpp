// `rig bench ptx`: the PTX interpreter NVIDIA's simulators run kernels on (tests/sim/ptx),
// on the block reduction nvcc built for sm_90 (tests/ptx/kernels/reduce.cu, block_sum),
// beside the same kernel written for the host and run over the same grid.
#include <ptx.hpp>

#include <fmt/format.h>

#include <array>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "bench.hpp"

extern const unsigned char rig_bench_reduce_ptx[];
extern const std::size_t rig_bench_reduce_ptx_size;

namespace rig::bench {
namespace {

constexpr std::uint32_t kThreads = 256;     // a block, as the test of the kernel runs it
constexpr std::uint32_t kBlocks = 1024;     // 2^18 floats
constexpr std::uint32_t kWarp = 32;
constexpr std::uint64_t kIn = 0x10'0000'0000ull;   // where the bench's memory lies for the kernel
constexpr std::uint64_t kOut = 0x20'0000'0000ull;

// The kernel's memory: its input and output arrays at fixed device addresses.
class Arrays final : public ptx::Memory {
 public:
  Arrays(std::vector<float>& in, std::vector<float>& out) : in_(in), out_(out) {}
  std::optional<ptx::Mapping> map(std::uint64_t address, std::uint64_t size, bool write) override {
    if (auto m = within(kIn, in_, address, size); m && !write) return m;
    return within(kOut, out_, address, size);
  }

 private:
  static std::optional<ptx::Mapping> within(std::uint64_t base, std::vector<float>& v, std::uint64_t address,
                                            std::uint64_t size) {
    const std::uint64_t bytes = v.size() * sizeof(float);
    if (address < base || address - base > bytes || size > bytes - (address - base)) return std::nullopt;
    return ptx::Mapping{base, bytes, reinterpret_cast<std::byte*>(v.data())};
  }
  std::vector<float>& in_;
  std::vector<float>& out_;
};

// block_sum as the host runs it: each block's threads in lock step, the shuffles as moves
// between the lanes' values, the shared array as an array.
void block_sum_on_host(const float* in, float* out, std::uint32_t n, std::uint32_t blocks) {
  for (std::uint32_t b = 0; b < blocks; ++b) {
    std::array<float, kThreads> v;
    for (std::uint32_t t = 0; t < kThreads; ++t) {
      const std::uint32_t i = b * kThreads + t;
      v[t] = i < n ? in[i] : 0.0f;
    }
    for (std::uint32_t d = 16; d > 0; d >>= 1)
      for (std::uint32_t w = 0; w < kThreads; w += kWarp)
        for (std::uint32_t lane = 0; lane + d < kWarp; ++lane) v[w + lane] += v[w + lane + d];
    std::array<float, kWarp> partial{};
    for (std::uint32_t w = 0; w < kThreads / kWarp; ++w) partial[w] = v[w * kWarp];
    std::array<float, kWarp> lanes;
    for (std::uint32_t lane = 0; lane < kWarp; ++lane) lanes[lane] = lane < kThreads / kWarp ? partial[lane] : 0.0f;
    for (std::uint32_t d = 16; d > 0; d >>= 1) {
      std::array<float, kWarp> next;
      for (std::uint32_t lane = 0; lane < kWarp; ++lane) next[lane] = lanes[lane] + lanes[lane ^ d];
      lanes = next;
    }
    out[b] = lanes[0];
  }
}

}  // namespace

std::vector<Figure> ptx(const Options& o) {
  const std::string_view text(reinterpret_cast<const char*>(rig_bench_reduce_ptx), rig_bench_reduce_ptx_size);
  auto module = ptx::Module::load(text, "reduce.sm_90.ptx");
  if (!module) throw std::runtime_error("the bench's PTX does not load: " + module.error());
  const std::uint32_t n = kThreads * kBlocks;
  std::vector<float> in(n), out(kBlocks), host_out(kBlocks);
  for (std::uint32_t i = 0; i < n; ++i) in[i] = float(i % 7);
  Arrays memory(in, out);

  std::array<std::byte, 20> params{};
  std::memcpy(&params[0], &kIn, 8);
  std::memcpy(&params[8], &kOut, 8);
  std::memcpy(&params[16], &n, 4);
  ptx::Launch launch;
  launch.grid = {kBlocks, 1, 1};
  launch.block = {kThreads, 1, 1};
  launch.params = params;

  std::uint64_t instructions = 0;
  const int repeats = std::max(3, o.repeats / 2);
  const Spread interpreted = measure(repeats, 1, [&](std::uint64_t k) {
    for (std::uint64_t r = 0; r < k; ++r) {
      auto stats = module->run("block_sum", launch, memory);
      if (!stats) throw std::runtime_error("the bench's kernel failed: " + stats.error());
      instructions = stats->instructions;
    }
  });
  const Spread native = measure(repeats, 16, [&](std::uint64_t k) {
    for (std::uint64_t r = 0; r < k; ++r) block_sum_on_host(in.data(), host_out.data(), n, kBlocks);
  });
  if (out != host_out)
    throw std::runtime_error("the interpreter's block sums differ from the host's: the bench measured a wrong run");

  auto rate = [&](Spread ns) {  // ns per grid -> M PTX instructions per second
    auto per = [&](double t) { return t > 0 ? double(instructions) / t * 1e3 : 0; };
    return Spread{per(ns.median), per(ns.max), per(ns.min)};
  };
  auto ms = [](Spread ns) { return Spread{ns.median / 1e6, ns.min / 1e6, ns.max / 1e6}; };
  const std::string what = fmt::format("block_sum (nvcc sm_90 PTX, shuffles and shared memory) over {} blocks of {} "
                                       "threads: {} PTX instructions a grid, on one core",
                                       kBlocks, kThreads, instructions);
  std::vector<Figure> figures;
  figures.push_back(make_figure("ptx-rate", rate(interpreted), "Minstr/s", rate(native),
                                "the grid's PTX instruction count over the host twin's time",
                                "the interpreter's rate on " + what + " (target >= 20)"));
  figures.push_back(make_figure("ptx-grid", ms(interpreted), "ms", ms(native),
                                "the same kernel written for the host, run over the same grid",
                                "one interpreted grid of " + what));
  return figures;
}

}  // namespace rig::bench
