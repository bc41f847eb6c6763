// The submit bench's launches on NVIDIA GPUs of rig's own driver (gpu_submit.hpp): the launch
// benches' `empty` (tests/cuda/kernels.cu as nvcc built it, bench::nvidia_kernels), and the
// driver's own part of a launch value, timed on a second driver of the same GPU opened for it
// outside rig. The launch gives 16 parameter bytes, two buffer refs, as on other devices;
// `empty` reads none.
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "../tools/machine.hpp"
#include "driver_floor.hpp"
#include "gpu_submit.hpp"
#include <rig/nv.hpp>

namespace rig::bench {
namespace {

constexpr const char* kKernel = "empty";
constexpr std::uint64_t kBurst = kDriverBurst;

std::span<const std::byte> kernel_bytes(std::string_view arch) { return nvidia_kernels(arch); }

std::optional<std::string> refuses(const Device& device) {
  if (!device.name().starts_with("NV:") || !gpu_of(device))
    return fmt::format("{} is not one of this machine's GPUs of rig's NVIDIA driver", device.name());
  if (kernel_bytes(device.arch()).empty())
    return fmt::format("the bench's NVIDIA kernel is built for sm_90 and sm_80 only, and {} is {}", device.name(),
                       device.arch());
  return std::nullopt;
}

Function kernel(const Device& device) { return load_kernel(device, kernel_bytes(device.arch()), kKernel); }

// What the driver `own` opened has written on COMPUTE:0.
nv::ComputeRings rings_of(SecondDriver& own) {
  auto r = nv::compute_rings_of(own.driver());
  if (!r) throw std::runtime_error(r.error());
  return *r;
}

// Bytes [from, from + n) of a circular area, copied out.
std::vector<std::byte> bytes_at(const std::byte* area, std::uint64_t size, std::uint64_t from, std::uint64_t n) {
  std::vector<std::byte> out(n);
  for (std::uint64_t i = 0; i < n; ++i) out[i] = area[(from + i) % size];
  return out;
}

Figure driver_part(const Device& device, int repeats) {
  if (auto why = refuses(device)) throw std::invalid_argument(*why);
  const tool::Gpu gpu = *gpu_of(device);
  SecondDriver own(gpu, kernel_bytes(device.arch()), kKernel, 1);  // on COMPUTE:0
  // The first value builds the launch and binds the channel; from the second on each is the
  // lone repeated launch. What one writes: its push-buffer words and its launch-ring slot
  // (bank 0 and the QMD). The floor copies exactly these.
  own.submit();
  own.submit();
  own.wait();
  nv::ComputeRings before = rings_of(own);
  own.submit();
  const nv::ComputeRings after = rings_of(own);
  own.wait();
  const std::uint64_t words = after.push_taken - before.push_taken, slot = after.launch_taken - before.launch_taken;
  if (before.push_taken % before.push_bytes + words > before.push_bytes ||
      before.launch_taken % before.launch_bytes + slot > before.launch_bytes)
    throw std::runtime_error(fmt::format("{}: the measured launch value wrapped a ring", device.name()));
  const std::vector<std::byte> push = bytes_at(after.push, after.push_bytes, before.push_taken, words);
  const std::vector<std::byte> bank = bytes_at(after.launches, after.launch_bytes, before.launch_taken, slot);
  const std::span<std::byte> push_area = own.host_memory(after.push_bytes), slot_area = own.host_memory(after.launch_bytes);
  std::uint64_t push_at = 0, slot_at = 0;
  Reader reader;

  // One burst of the driver's room + submit, timed, the simulated GPU's engines held (on
  // hardware they are not threads on the host's CPUs); its work waited for after, untimed.
  auto driver_burst = [&] {
    const nv::ComputeRings start = rings_of(own);
    if (gpu.hold_engines) gpu.hold_engines(true);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) own.submit();
    const double ns = ns_since(t0);
    if (gpu.hold_engines) gpu.hold_engines(false);
    const nv::ComputeRings end = rings_of(own);
    if (end.launch_taken - start.launch_taken < kBurst * slot || end.launch_taken - start.launch_taken >= (kBurst + 1) * slot)
      throw std::runtime_error(fmt::format("{}: {} launch values took {} bytes of the launch ring, not {} each",
                                           device.name(), kBurst, end.launch_taken - start.launch_taken, slot));
    own.wait();
    return ns;
  };
  // The same bytes copied into areas of the driver's sizes, skipping to the start where they
  // would straddle the end as the driver does; then, untimed, the reader reads them.
  auto memcpy_burst = [&] {
    const std::uint64_t first_push = push_at, first_slot = slot_at;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) {
      place_whole(push_area, push_at, push.data(), words);
      place_whole(slot_area, slot_at, bank.data(), slot);
      asm volatile("" : : "r"(push_area.data()), "r"(slot_area.data()) : "memory");  // the copies are kept
    }
    const double ns = ns_since(t0);
    reader.read(push_area, first_push, push_at);
    reader.read(slot_area, first_slot, slot_at);
    return ns;
  };
  // Warm up over a lap of the launch ring at least, so that no page is touched first when timed.
  const std::uint64_t lap = after.launch_bytes / std::max<std::uint64_t>(slot, 1) / kBurst + 1;
  const auto [driver, floor] = time_turns(driver_burst, memcpy_burst, lap, repeats);
  return make_figure(
      on("submit-driver", device), driver, "ns", floor,
      fmt::format("memcpy of the same {} push-buffer bytes and {} bytes of bank 0 and QMD into areas of the driver's "
                  "sizes, which another thread reads after each burst",
                  words, slot),
      fmt::format("rig's NVIDIA driver's room + submit of one launch value of the empty kernel (the lone repeated "
                  "launch: its words, bank 0 and the QMD in the launch ring, the doorbell), called directly as rig "
                  "calls them on a second driver of {}'s GPU; the work waited for between bursts of {}",
                  device.name(), kBurst));
}

GpuRegistration registration{"NV:", {refuses, kernel, driver_part}};

}  // namespace
}  // namespace rig::bench
