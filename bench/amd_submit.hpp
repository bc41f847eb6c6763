// amd_submit.hpp — the submit bench's launches on AMD GPUs. bench/amd_submit.cpp registers them
// where the rig tool is built with the AMD driver and clang-19 built the bench's kernel
// (bench/amd_kernels.c, for gfx1100); without them the submit bench times a copy part on an
// AMD GPU, saying why.
#pragma once

#include <rig/rig.hpp>

#include <functional>
#include <optional>
#include <string>

#include "bench.hpp"

namespace rig::bench {

struct AmdLaunches {
  // Why the bench cannot launch on `device` (not an AMD GPU of this machine, or a processor
  // the kernel is not built for), or nullopt where it can.
  std::function<std::optional<std::string>(const Device&)> refuses;
  // The empty kernel loaded on `device`: two pointer parameters (16 bytes) it leaves alone.
  std::function<Function(const Device&)> kernel;
  // The driver's part of one launch submission on a device of its own on `device`'s GPU
  // (room + submit, as rig calls them: the PM4 encode into the ring and the doorbell), beside
  // memcpy of the same ring dwords: the median over `repeats` repetitions.
  std::function<Figure(const Device& device, int repeats)> driver_part;
};

// The registered launches; null where the tool has none.
const AmdLaunches* amd_launches();

// Registers its launches when constructed (a static object of amd_submit.cpp).
struct AmdRegistration {
  explicit AmdRegistration(AmdLaunches launches);
};

}  // namespace rig::bench
