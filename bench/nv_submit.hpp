// nv_submit.hpp — the submit bench's launches on NVIDIA GPUs of rig's own driver ("NV:N").
// bench/nv_submit.cpp registers them where the rig tool is built with that driver: the empty
// kernel of bench/nv_kernels.cu (nvcc-built for sm_90 and sm_80, committed in bench/kernels
// and embedded), and the driver's own part of a launch submission.
#pragma once

#include <rig/rig.hpp>

#include <functional>
#include <optional>
#include <string>

#include "bench.hpp"

namespace rig::bench {

struct NvLaunches {
  // Why the bench cannot launch on `device` (not an NV GPU of this machine, or an SM the kernel
  // is not built for), or nullopt where it can.
  std::function<std::optional<std::string>(const Device&)> refuses;
  // The empty kernel loaded on `device`: two pointer parameters (16 bytes) it leaves alone.
  std::function<Function(const Device&)> kernel;
  // The driver's part of one launch value on a second driver of `device`'s GPU (room + submit,
  // as rig calls them: the push-buffer words, bank 0 and the QMD, the doorbell), beside memcpy
  // of the same bytes: the median over `repeats` repetitions.
  std::function<Figure(const Device& device, int repeats)> driver_part;
};

// The registered launches; null where the tool has none.
const NvLaunches* nv_launches();

// Registers its launches when constructed (a static object of nv_submit.cpp).
struct NvRegistration {
  explicit NvRegistration(NvLaunches launches);
};

}  // namespace rig::bench
