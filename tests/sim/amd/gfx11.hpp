// gfx11.hpp — an interpreter of RDNA3 (gfx11) wave32 machine code: the subset that clang-19
// compiles the AMD tests' kernels to.
//
// It covers SALU (SOP1, SOP2, SOPC, SOPK, SOPP with branches), SMEM loads, VALU in VOP1,
// VOP2, VOP3 (and VOP3 with a scalar destination), VOPC (v_cmp, v_cmpx), VOPD pairs, LDS
// (DS) loads and stores, FLAT and GLOBAL loads and stores, and the waits, barriers, messages
// and cache invalidations around them, which it treats as ordering it already has (every
// instruction completes before the next). A group's waves run one at a time, each until it
// ends or reaches s_barrier. An instruction outside the subset faults the dispatch naming
// its encoding and opcode; a memory access outside mapped memory faults it naming the
// address; an access to an SGPR, VGPR or LDS byte the dispatch did not allocate faults it.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "grid.hpp"

namespace rig::sim::amd::gfx11 {

// The GPU's view of memory: a pointer to `bytes` bytes at `address`, or null where they are
// not all mapped.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual std::byte* at(std::uint64_t address, std::size_t bytes, bool write) = 0;
};

// What a DISPATCH_DIRECT runs, from the SH registers the queue set.
struct Dispatch {
  std::uint64_t code = 0;  // COMPUTE_PGM_LO/HI << 8
  std::uint32_t rsrc1 = 0, rsrc2 = 0, rsrc3 = 0;
  std::array<std::uint32_t, 16> user_data{};
  std::uint32_t groups[3] = {1, 1, 1};
  std::uint32_t threads[3] = {1, 1, 1};
  bool wave32 = true;
};

// How a dispatch ended (grid.hpp).
using amd::Outcome;

// Runs the dispatch's groups one after another. `stop` is read every few thousand
// instructions: once it is set the run ends with a fault "stopped".
Outcome run(const Dispatch& dispatch, Memory& memory, const std::atomic<bool>& stop);

// The mnemonic the interpreter decodes the instruction at `words` to ("v_add_f32_e32",
// "s_load_b64"), or "" for one outside its subset; `length` gets its dwords. For tests.
std::string mnemonic(const std::uint32_t* words, std::size_t available, std::size_t& length);

}  // namespace rig::sim::amd::gfx11
