// gfx9.hpp — an interpreter of CDNA3 (gfx942, MI300) and CDNA2 (gfx90a, MI200) wave64
// machine code: the subset that clang-19 compiles the AMD tests' kernels to.
//
// It covers SALU (SOP1, SOP2, SOPC, SOPK, SOPP with branches and calls), SMEM loads, VALU in
// VOP1, VOP2, VOP3 (and VOP3 with a scalar destination), VOPC (v_cmp writes VCC or an SGPR
// pair, v_cmpx writes EXEC as well), 64-bit integer, f64 and 16-bit integer arithmetic, the
// division helpers (v_div_scale/fmas/fixup) where no scaling is needed, DPP on VOP1/VOP2/VOPC
// (quad_perm, row_shl/shr/ror, wave_shl/shr/rol/ror, row_mirror, row_half_mirror,
// row_bcast:15/31), SDWA (byte and word selects of 32-bit operations), the packed f32 VOP3P
// operations and v_pk_mov_b32, the packed f16 fma and the mixed-precision fmas (v_fma_mix_f32,
// v_fma_mixlo_f16, v_fma_mixhi_f16) with op_sel, op_sel_hi, neg and abs, each rounded once,
// v_sin_f32 and v_cos_f32 (in revolutions, 0.0 and 1.0 outside the ISA's [-256, 256]), LDS (DS) loads, stores, atomics and lane exchanges
// (ds_swizzle_b32, ds_permute_b32, ds_bpermute_b32), FLAT, GLOBAL and SCRATCH loads, stores
// and atomics, MUBUF loads and stores on raw buffers and on the private segment buffer, and
// the waits, barriers and cache write-backs and invalidations around them, which it treats as
// ordering it already has (every instruction completes before the next). A group's waves run
// one at a time, each until it ends or reaches s_barrier.
//
// Refused, naming what: the rest of VOP3P (MFMA and the AGPR moves among them: "MFMA is not
// simulated"), VOP3P with clamp or an inline constant operand, loads and stores to AGPRs, SDWA with clamp or an output modifier, division
// operands that need scaling, MUBUF atomics and formatted or structured (indexed or strided)
// buffer access, and any encoding or opcode outside the subset (the fault names the encoding
// and the opcode). A memory access outside mapped memory faults the dispatch naming the
// address; an access to an SGPR, VGPR, LDS byte or private byte the dispatch did not allocate
// faults it naming the register or byte and the allocation.
//
// Private memory: SCRATCH instructions address each work-item's own `private_bytes` bytes
// (offset 0 is its first byte), in memory at the dispatch's scratch base where it has one
// (Dispatch::scratch_base), so that XCCs given one scratch area share bytes as hardware's
// would; an access to scratch outside mapped memory faults as a page fault there. FLAT addresses in the private aperture (src_private_base) reach the same bytes, as
// do MUBUF accesses through a buffer resource with ADD_TID_ENABLE (word 3, bit 23), which
// address them from the resource's base: the private segment buffer a gfx90a kernel gets in
// its first user SGPRs (the private segment wave offset SGPR is 0). FLAT addresses in the
// shared aperture (src_shared_base) reach the group's LDS.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "grid.hpp"

namespace rig::sim::amd::gfx9 {

// The GPU's view of memory: a pointer to `bytes` bytes at `address`, or null where they are
// not all mapped.
class Memory {
 public:
  virtual ~Memory() = default;
  virtual std::byte* at(std::uint64_t address, std::size_t bytes, bool write) = 0;
};

// The processors this interpreter runs. Their encodings agree but for a few instructions
// only one of them has (v_mov_b64, v_lshl_add_u64, buffer_inv and the f32 flat atomic add on
// gfx942; v_mac_f32, v_mad_f32 and buffer_wbinvl1_vol on gfx90a) and the FLAT cache bits (glc/slc on gfx90a, sc0/sc1/nt
// on gfx942, where bit 13 of a SCRATCH instruction also says whether it has a VGPR address).
enum class Target { gfx90a, gfx942 };

// The flat apertures of LDS and private memory: the upper halves src_shared_base and
// src_private_base read. Each spans 4 GiB. The simulator's own choice, outside any address a
// Memory maps.
constexpr std::uint64_t kSharedAperture = 0x0001'0000'0000'0000ull;
constexpr std::uint64_t kPrivateAperture = 0x0002'0000'0000'0000ull;

// What a DISPATCH_DIRECT runs, from the SH registers the queue set.
struct Dispatch {
  Target target = Target::gfx942;
  std::uint64_t code = 0;  // COMPUTE_PGM_LO/HI << 8
  std::uint32_t rsrc1 = 0, rsrc2 = 0, rsrc3 = 0;
  std::array<std::uint32_t, 16> user_data{};
  std::uint32_t groups[3] = {1, 1, 1};
  std::uint32_t threads[3] = {1, 1, 1};
  bool wave64 = true;
  std::uint32_t private_bytes = 0;  // per work-item (COMPUTE_TMPRING_SIZE.WAVESIZE / 64)
  // Where this XCC's waves' private memory lies (COMPUTE_DISPATCH_SCRATCH_BASE, as the XCC's
  // packets set it) and the wave slots there (COMPUTE_TMPRING_SIZE.WAVES): the n-th wave of
  // a group runs in slot n, whose 64 * private_bytes bytes start at scratch_base + n * that,
  // lane l's at l * private_bytes among them (the hardware's own swizzle is below this
  // model). With scratch_base 0 (gfx90a, which has no such register) each wave keeps its
  // private bytes in the interpreter.
  std::uint64_t scratch_base = 0;
  std::uint32_t scratch_waves = 0;
  // One XCC's share of a grid that `shares` XCCs run: with a chunk of n groups, the groups
  // whose linear index (x fastest) lies in chunks share, share + shares, ...; a chunk of 0
  // runs them all.
  std::uint32_t chunk = 0, share = 0, shares = 1;
};

// How a dispatch ended (grid.hpp).
using amd::Outcome;

// Runs the dispatch's groups one after another. A dispatch that is not wave64 faults at
// once ("a wave32 dispatch"). `stop` is read every few thousand instructions: once it is set
// the run ends with a fault "stopped".
Outcome run(const Dispatch& dispatch, Memory& memory, const std::atomic<bool>& stop);

// The mnemonic the interpreter decodes the instruction at `words` to for `target`, as
// llvm-objdump-19 prints it ("v_add_f64", "v_add_u32_e32", "v_mov_b32_dpp",
// "global_load_dword"), or "" for one outside its subset; `length` gets its dwords (1 for one
// outside the subset). `why` (if given) gets the refusal for one outside it. For tests and the
// coverage tool.
std::string mnemonic(Target target, const std::uint32_t* words, std::size_t available, std::size_t& length,
                     std::string* why = nullptr);

}  // namespace rig::sim::amd::gfx9
