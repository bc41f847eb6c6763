// launch.hpp — a kernel of a loaded image as the NVIDIA driver launches it (internal): code.cpp
// reads it from the cubin when the image loads, launch.cpp encodes its launches.
//
// A launch is a slot of the device's launch ring (GPU memory the CPU writes) holding constant
// bank 0 (the driver's slots, then the parameters at the cubin's PARAM_CBANK offset) and the
// QMD after it, and the compute channel's SEND_PCAS of the QMD's address, then a WFI, so that
// the next part starts once the grid is done.
#pragma once

#include "qmd.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rig::nv::driver {

// Constant bank 0's driver slots on sm_90 (/work/shared/facts/nv-hopper.md, "Driver slots"):
// blockDim x, y, z from 0x00, gridDim from 0x0c, the shared and local memory windows' bases
// (64-bit), the stack base (R1's start), the dynamic shared memory's size, the SM count. Ampere
// is given the same slots: no public source lists sm_80's, an open question only a GPU answers.
namespace bank0 {
constexpr std::uint32_t kBlockDim = 0x00, kGridDim = 0x0c, kSharedWindow = 0x18, kLocalWindow = 0x20,
                        kStackBase = 0x28, kDynamicShared = 0x2c, kSmCount = 0x10c;
// The stack base tinygrad writes at 0x28 (facts): the top of the local window less its reserve.
constexpr std::uint32_t kStackTop = 0xfffdc0;
}  // namespace bank0

// The addresses at which a kernel's generic pointers see shared and local memory
// (SET_SHADER_SHARED/LOCAL_MEMORY_WINDOW): just above the driver's regions (device.hpp's
// kHeapEnd), 4 GiB each; map_host refuses host memory there.
constexpr std::uint64_t kSharedWindow = 1ull << 40, kLocalWindow = kSharedWindow + (1ull << 32),
                        kWindowsEnd = kLocalWindow + (1ull << 32);

// The launch ring: system memory the CPU writes launches' bank 0 and QMDs into, reclaimed by
// the timeline word as the push buffers are; a value's launches take at most half of it.
constexpr std::uint64_t kLaunchRingBytes = 1 << 20;
constexpr std::uint64_t kLaunchAlign = 256;  // SEND_PCAS_A takes the QMD's address >> 8
// Bound of the words a launch writes on the compute channel (SEND_PCAS_A and _B, then a WFI),
// and of the memory windows the first launch sets.
constexpr std::uint64_t kLaunchWords = 8;
// The memory windows (6 words) and, when a kernel has a stack, the local memory backing
// store (SET_SHADER_LOCAL_MEMORY_A/B: 3 words, NON_THROTTLED_A/B/C: 4), set before the first
// launch after either changes.
constexpr std::uint64_t kWindowWords = 16;
// Local memory: the backing store holds each thread's bytes (its kernel's frame, a multiple of
// 16 as the QMD's SHADER_LOCAL_MEMORY_LOW_SIZE takes) for every thread an SM holds (2048 on
// sm_80 and sm_90: CUDA programming guide, compute capabilities table) on every SM. rig gives a
// thread at most kLocalPerThreadMost (rig's bound: 16 KiB x 2048 x 132 SMs is 4.2 GiB of an
// H100's video memory); the hardware's own limit is 512 KiB (the same table).
constexpr std::uint64_t kThreadsPerSm = 2048;
constexpr std::uint32_t kLocalPerThreadMost = 16 * 1024;

// What a GPU generation allows a launch (the CUDA C++ Programming Guide's table of compute
// capabilities 8.0 and 9.0; the simulator's engine checks the same).
struct LaunchLimits {
  std::uint32_t block_xy = 1024, block_z = 64, block_threads = 1024;
  std::uint64_t grid_x = 0x7fffffff;
  std::uint32_t grid_yz = 65535;
  std::uint32_t shared_per_sm = 0;  // the SM's shared memory, the 1 KiB reserved per block included
  std::span<const std::uint32_t> configs;  // its shared-memory carveouts in KiB, ascending
};
// Shared memory the GPU reserves of each block's (facts: sm_90's .nv.shared.<fn> sizes count it).
constexpr std::uint32_t kSharedReserved = 1024;
// sm_90: 228 KiB per SM, carveouts of 0 to 228 KiB; sm_80 (A100): 164 KiB, 0 to 164 KiB.
inline constexpr std::uint32_t kHopperConfigs[] = {0, 8, 16, 32, 64, 100, 132, 164, 196, 228};
inline constexpr std::uint32_t kAmpereConfigs[] = {0, 8, 16, 32, 64, 100, 132, 164};
inline constexpr LaunchLimits kHopperLimits{1024, 64, 1024, 0x7fffffff, 65535, 228 * 1024, kHopperConfigs};
inline constexpr LaunchLimits kAmpereLimits{1024, 64, 1024, 0x7fffffff, 65535, 164 * 1024, kAmpereConfigs};

// A constant bank of the module (or of the kernel, but bank 0) placed in the image's memory.
struct PlacedBank {
  std::uint32_t bank = 0;
  std::uint64_t address = 0;
  std::uint32_t bytes = 0;  // a multiple of 16
};

// The launch last built for a kernel: its geometry, and bank 0 and the QMD as every launch of
// that geometry writes them but for bank 0's address and the parameters.
struct BuiltLaunch {
  bool valid = false;
  std::uint32_t groups[3]{}, threads[3]{}, shared = 0;
  std::vector<std::byte> bank0;   // the driver's slots; the parameters' bytes zero
  std::vector<std::uint32_t> qmd; // the QMD's words, bank 0's address left 0
  std::uint64_t slot_bytes = 0;   // bank 0 and the QMD in the launch ring, 256-aligned
  std::uint64_t qmd_at = 0;       // the QMD's offset in the slot
  // The lone value (a launch alone, no waits): its compute-channel words, the QMD's address
  // at lone_qmd_at (SEND_PCAS_A's data word) and v's two words at lone_value_at.
  std::vector<std::uint32_t> lone;
  std::uint32_t lone_qmd_at = 0, lone_value_at = 0;
  bool same(const std::uint32_t g[3], const std::uint32_t t[3], std::uint32_t s) const {
    return valid && groups[0] == g[0] && groups[1] == g[1] && groups[2] == g[2] && threads[0] == t[0] &&
           threads[1] == t[1] && threads[2] == t[2] && shared == s;
  }
};

// A kernel of a loaded image: what the cubin says of it, and where the image placed it.
struct Kernel {
  std::string name;
  std::uint64_t program = 0;            // the GPU address of its .text.<fn>
  std::uint32_t registers = 0, barriers = 0;
  std::uint32_t param_offset = 0;       // PARAM_CBANK: the parameters' start in bank 0
  std::uint32_t param_bytes = 0;        // PARAM_CBANK's size
  std::uint32_t bank0_bytes = 0;        // bank 0: its .nv.constant0.<fn>, whole 64-byte units
  std::uint32_t static_shared = 0;      // .nv.shared.<fn>
  std::uint32_t local_bytes = 0;        // per thread: the largest of its frame and stack sizes
  std::uint32_t max_threads = 1024;     // MAX_THREADS or REQNTID, else the GPU's
  std::vector<PlacedBank> banks;        // the module's banks and its own but bank 0
  mutable BuiltLaunch built;            // written on the device's turn (room/submit)
};

}  // namespace rig::nv::driver
