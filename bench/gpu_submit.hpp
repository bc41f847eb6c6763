// gpu_submit.hpp — the submit bench's launches on GPUs of rig's own drivers: AMD GPUs
// ("AMD:N", bench/amd_submit.cpp, where clang-19 built bench/amd_kernels.c) and NVIDIA GPUs
// ("NV:N", bench/nv_submit.cpp, which launches bench/nv_kernels.cu as nvcc built it). Each file,
// compiled into the rig tool where its driver is built, registers them; without them the submit
// bench times a copy part on such a GPU, saying why.
#pragma once

#include <rig/rig.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "bench.hpp"

namespace rig::bench {

struct GpuLaunches {
  // Why the bench cannot launch on `device` (not a GPU of this machine of the driver, or a
  // processor the kernel is not built for), or nullopt where it can.
  std::function<std::optional<std::string>(const Device&)> refuses;
  // The empty kernel loaded on `device`: two pointer parameters (16 bytes) it leaves alone.
  std::function<Function(const Device&)> kernel;
  // The driver's part of one launch submission on a driver of its own on `device`'s GPU
  // (room + submit, as rig calls them: the encode into its rings and the doorbell), beside
  // memcpy of the same bytes: the median over `repeats` repetitions.
  std::function<Figure(const Device& device, int repeats)> driver_part;
};

// The launches registered for devices whose names start with `prefix` ("AMD:", "NV:"); null
// where the tool has none.
const GpuLaunches* gpu_launches(std::string_view prefix);

// Registers launches for `prefix` when constructed (a static object of amd_submit.cpp and
// nv_submit.cpp).
struct GpuRegistration {
  GpuRegistration(std::string prefix, GpuLaunches launches);
};

}  // namespace rig::bench
