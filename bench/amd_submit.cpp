// The submit bench's launches on AMD GPUs (gpu_submit.hpp): the empty kernel of
// bench/amd_kernels.c, built for gfx1100, gfx942 and gfx90a and embedded here, and the driver's own part of a
// launch submission, timed on a driver of the same GPU opened for it outside rig.
#include "driver_floor.hpp"
#include "gpu_submit.hpp"

#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sched.h>

#include "../tools/machine.hpp"
#include <rig/amd.hpp>

extern const unsigned char rig_amd_bench_kernels[], rig_amd_bench_kernels_gfx942[], rig_amd_bench_kernels_gfx90a[];
extern const std::size_t rig_amd_bench_kernels_size, rig_amd_bench_kernels_gfx942_size, rig_amd_bench_kernels_gfx90a_size;

namespace rig::bench {
namespace {

constexpr const char* kKernel = "bench_empty";
constexpr std::uint64_t kBurst = kDriverBurst;

// The empty kernel's code object for processor `arch`, empty for one it is not built for.
std::span<const std::byte> kernel_bytes(std::string_view arch) {
  auto bytes = [](const unsigned char* p, std::size_t n) { return std::span(reinterpret_cast<const std::byte*>(p), n); };
  if (arch == "gfx1100") return bytes(rig_amd_bench_kernels, rig_amd_bench_kernels_size);
  if (arch == "gfx942") return bytes(rig_amd_bench_kernels_gfx942, rig_amd_bench_kernels_gfx942_size);
  if (arch == "gfx90a") return bytes(rig_amd_bench_kernels_gfx90a, rig_amd_bench_kernels_gfx90a_size);
  return {};
}

std::optional<std::string> refuses(const Device& device) {
  if (!device.name().starts_with("AMD:") || !gpu_of(device))
    return fmt::format("{} is not one of this machine's AMD GPUs", device.name());
  if (kernel_bytes(device.arch()).empty())
    return fmt::format("the bench's AMD kernel is built for gfx1100, gfx942 and gfx90a only, and {} is {}",
                       device.name(), device.arch());
  return std::nullopt;
}

Function kernel(const Device& device) { return load_kernel(device, kernel_bytes(device.arch()), kKernel); }

// COMPUTE:0's ring of the driver `own` opened.
amd::RingView ring_of(SecondDriver& own) {
  auto r = amd::ring_of(own.driver(), 0);
  if (!r) throw std::runtime_error(r.error());
  return *r;
}

Figure driver_part(const Device& device, int repeats) {
  if (auto why = refuses(device)) throw std::invalid_argument(*why);
  const tool::Gpu gpu = *gpu_of(device);
  SecondDriver own(gpu, kernel_bytes(device.arch()), kKernel, 0);  // on COMPUTE:0
  // What one launch value writes: its dwords in COMPUTE:0's ring and its kernel arguments
  // (the launch's parameters, the hidden arguments, the dispatch packet). The floor copies
  // exactly these.
  own.submit();
  own.wait();
  const amd::RingView before = ring_of(own);
  own.submit();
  const amd::RingView after = ring_of(own);
  own.wait();
  const std::uint64_t n = after.written - before.written, dwords = after.dwords;
  std::vector<std::uint32_t> words(n);
  for (std::uint64_t i = 0; i < n; ++i) words[i] = after.words[(before.written + i) % dwords];
  const std::uint64_t k = after.kernargs_taken - before.kernargs_taken;
  if (k > after.kernarg_bytes || before.kernargs_taken % after.kernarg_bytes + k > after.kernarg_bytes)
    throw std::runtime_error(fmt::format("{}: one launch took {} bytes of kernel arguments, which wrapped", device.name(), k));
  std::vector<std::byte> arguments(after.kernargs + before.kernargs_taken % after.kernarg_bytes,
                                   after.kernargs + before.kernargs_taken % after.kernarg_bytes + k);
  // The floor's ring and argument area, of the driver's sizes and in the GPU's memory, as
  // the driver's are, and a reader on another thread that reads what each burst wrote, as
  // the command processor reads the driver's.
  const std::span<std::byte> ring_bytes = own.host_memory(dwords * 4);
  const std::span<std::uint32_t> ring(reinterpret_cast<std::uint32_t*>(ring_bytes.data()), dwords);
  const std::span<std::byte> area = own.host_memory(after.kernarg_bytes);
  std::uint64_t at = 0, taken = 0;
  Reader reader;

  // One burst of the driver's room + submit, timed; its work waited for after, untimed.
  // A simulated GPU's engines are held while the burst is timed: on hardware the command
  // processor reading the ring is not a thread on the host's cores, as the simulator's is.
  auto driver_burst = [&] {
    const std::uint64_t written = ring_of(own).written;
    if (gpu.hold_engines) gpu.hold_engines(true);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) own.submit();
    const double ns = ns_since(t0);
    if (gpu.hold_engines) gpu.hold_engines(false);
    if (ring_of(own).written - written != kBurst * n)
      throw std::runtime_error(fmt::format("{}: {} launch values wrote {} ring dwords, not {} each", device.name(),
                                           kBurst, ring_of(own).written - written, n));
    own.wait();
    return ns;
  };
  // The same bytes copied into the floor's ring and argument area, wrapping as the driver
  // wraps; then, untimed, the reader reads them.
  auto memcpy_burst = [&] {
    const std::uint64_t first_dword = at, first_byte = taken;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) {
      const std::uint64_t offset = at % dwords, first = std::min(n, dwords - offset);
      std::memcpy(ring.data() + offset, words.data(), first * 4);
      if (first < n) std::memcpy(ring.data(), words.data() + first, (n - first) * 4);
      at += n;
      place_whole(area, taken, arguments.data(), k);
      asm volatile("" : : "r"(ring.data()), "r"(area.data()) : "memory");  // the copies are kept
    }
    const double ns = ns_since(t0);
    reader.read(ring_bytes, first_dword * 4, at * 4);
    reader.read(area, first_byte, taken);
    return ns;
  };
  // Warm up over a lap of both areas at least, so that no page is touched first when timed.
  const std::uint64_t lap = std::max(dwords / n, after.kernarg_bytes / std::max<std::uint64_t>(k, 1)) / kBurst + 1;
  const auto [driver, floor] = time_turns(driver_burst, memcpy_burst, lap, repeats);
  return make_figure(
      on("submit-driver", device), driver, "ns", floor,
      fmt::format("memcpy of the same {} ring dwords and {} bytes of kernel arguments into areas of the driver's "
                  "sizes, which another thread reads after each burst",
                  n, k),
      fmt::format("the AMD driver's room + submit of one launch value of the empty kernel (PM4 encode into "
                  "COMPUTE:0's ring, its kernel arguments, the doorbell), called directly as rig calls them on a "
                  "second driver of {}'s GPU; the work waited for between bursts of {}",
                  device.name(), kBurst));
}

GpuRegistration registration{"AMD:", {refuses, kernel, driver_part}};

}  // namespace
}  // namespace rig::bench
