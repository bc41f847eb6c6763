// grid.hpp — what the gfx11 and CDNA interpreters share: how a dispatch ended, the fault an
// instruction throws to end it, the loop over the groups of its grid, the bit casts both
// use, and how a load's bytes go into a lane's VGPRs.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace rig::sim::amd {

struct Outcome {
  bool ok = true;
  bool page_fault = false;          // the fault is a memory access outside mapped memory
  std::uint64_t fault_address = 0;  // for a page fault
  bool write = false;               // for a page fault: a store
  std::string fault;                // what went wrong, naming the instruction
  std::uint64_t instructions = 0;   // instructions run
};

// A word's bits in reverse order, and a word as the float or signed integer it holds (and back).
inline std::uint32_t reverse_bits(std::uint32_t x) {
  std::uint32_t r = 0;
  for (int k = 0; k < 32; ++k) r |= ((x >> k) & 1u) << (31 - k);
  return r;
}
inline float f(std::uint32_t x) { return std::bit_cast<float>(x); }
inline std::uint32_t u(float x) { return std::bit_cast<std::uint32_t>(x); }
inline std::int32_t i(std::uint32_t x) { return std::int32_t(x); }

// Puts a load's `bytes` at p into a lane's VGPRs, vgpr(k) being its k-th: a load of under 4
// bytes fills the first, zero-extended, or sign-extended where `sign` (a signed byte or short
// load); a longer one 4 bytes a VGPR.
template <class Vgpr>
void load_lane_bytes(Vgpr&& vgpr, const std::byte* p, std::uint32_t bytes, bool sign) {
  if (bytes < 4) {
    std::uint32_t x = 0;
    std::memcpy(&x, p, bytes);
    if (sign && bytes == 1) x = std::uint32_t(std::int32_t(std::int8_t(x)));
    if (sign && bytes == 2) x = std::uint32_t(std::int32_t(std::int16_t(x)));
    vgpr(0) = x;
  } else {
    for (std::uint32_t k = 0; k < bytes; k += 4) std::memcpy(&vgpr(k / 4), p + k, 4);
  }
}

// What ends a dispatch: why, and for an access outside mapped memory (page), its address and
// whether it was a store.
struct Fault {
  std::string why;
  bool page = false;
  std::uint64_t address = 0;
  bool write = false;
};

// The groups one XCC runs of a grid that `shares` XCCs share: with a chunk of n groups, those
// whose linear index (x fastest) lies in chunks share, share + shares, ...; a chunk of 0 runs
// them all.
struct Share {
  std::uint32_t chunk = 0, share = 0, shares = 1;
};

// Runs check(), then group(x, y, z) for each group of the grid of `groups` that `share` takes,
// x fastest, until `stop` is set after a group (the fault "stopped"). A Fault thrown by
// either ends the run: the Outcome is not ok and names the fault and the group it came from,
// "why (group x,y,z)". The Outcome's instructions are the caller's to count.
template <class Check, class Group>
Outcome run_grid(const std::uint32_t (&groups)[3], Share share, const std::atomic<bool>& stop, Check&& check,
                 Group&& group) {
  Outcome o;
  std::uint32_t at[3] = {};
  try {
    check();
    for (std::uint32_t z = 0; z < groups[2]; ++z)
      for (std::uint32_t y = 0; y < groups[1]; ++y)
        for (std::uint32_t x = 0; x < groups[0]; ++x) {
          const std::uint64_t linear = (std::uint64_t(z) * groups[1] + y) * groups[0] + x;
          if (share.chunk && linear / share.chunk % share.shares != share.share) continue;
          at[0] = x, at[1] = y, at[2] = z;
          group(x, y, z);
          if (stop) throw Fault{"stopped"};
        }
  } catch (const Fault& f) {
    o.ok = false;
    o.page_fault = f.page, o.fault_address = f.address, o.write = f.write;
    o.fault = fmt::format("{} (group {},{},{})", f.why, at[0], at[1], at[2]);
  }
  return o;
}

// Runs a group's waves one at a time, each by step(wave) to its end (done) or to a barrier
// (at_barrier); a barrier opens once every wave that has not ended reached it. `stopped()` is
// asked after each step.
template <class Waves, class Step, class Stopped>
void run_waves(Waves& waves, Step&& step, Stopped&& stopped) {
  for (;;) {
    bool progress = false, all_done = true;
    for (auto& w : waves) {
      if (w.done) continue;
      all_done = false;
      if (w.at_barrier) continue;
      progress = true;
      while (!w.done && !w.at_barrier) {
        step(w);
        stopped();
      }
    }
    if (all_done) return;
    if (!progress)
      for (auto& w : waves) w.at_barrier = false;  // every live wave waits: the barrier opens
  }
}

}  // namespace rig::sim::amd
