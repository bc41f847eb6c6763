// pm4.hpp — PM4 type-3 packets for AMD compute queues (the MEC), as words.
//
// Pure code: a Pm4 writes packets into 32-bit words it is given and touches no device. The
// words may be a ring: a Pm4 writes at (start + i) mod ring size, since the command
// processor reads a PM4 ring modulo its size and packets may straddle its end.
//
// Facts and where they come from: the type-3 header and opcodes are those of the kernel's
// nvd.h / soc15d.h (PACKET3_*); packet bodies follow AMD's published MEC packet layouts
// (PAL's f32_mec_pm4_packets: PM4_MEC_RELEASE_MEM, _ACQUIRE_MEM, _WAIT_REG_MEM(64),
// _COPY_DATA, _WRITE_DATA, _INDIRECT_BUFFER, _EVENT_WRITE, _DISPATCH_DIRECT, _SET_SH_REG);
// register offsets are Mesa's sid.h byte addresses (R_00B8xx_COMPUTE_*) divided by four.
//
// Generations: gfx11 (RDNA3) is built and tested; gfx12 (RDNA4) shares every layout used
// here and differs only in the cache-control bits (gfx12 has no GL1 or GLM caches).
// Gen::Gfx9_4 is gfx9 as CDNA2 and CDNA3 have it (gfx90a, gfx942): its RELEASE_MEM names
// cache actions (TC_ACTION, TC_WB, TCL1, TC_MD) where gfx10+ has GCR_CNTL, its ACQUIRE_MEM
// has one dword fewer and CP_COHER_CNTL actions in its first body dword (the kernel's
// soc15d.h and gfx_v9_0.c: gfx_v9_0_emit_mem_sync, gfx_v9_0_ring_emit_fence), it has no
// wave32 (no CS_W32_EN) and counts COMPUTE_TMPRING_SIZE.WAVESIZE in 1 KiB units. gfx942
// has COMPUTE_DISPATCH_SCRATCH_BASE as gfx11 does ("architected flat scratch"); gfx90a has
// not, and its waves find their scratch through the private segment buffer and
// flat-scratch user SGPRs alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>

namespace rig::amd::pm4 {

enum class Gen { Gfx9_4, Gfx11, Gfx12 };

// ---- Header (nvd.h: PACKET3(op, n) = 3 << 30 | (n & 0x3fff) << 16 | (op & 0xff) << 8).
constexpr std::uint32_t kType3 = 3u << 30;
constexpr std::uint32_t kShaderCompute = 1u << 1;  // PACKET3_COMPUTE: the packet is for the MEC
// A type-3 header for `op` with `body` dwords after the header (1 ..= 0x4000).
constexpr std::uint32_t header(std::uint32_t op, std::uint32_t body) {
  return kType3 | ((body - 1) & 0x3fff) << 16 | (op & 0xff) << 8 | kShaderCompute;
}

// ---- Opcodes (nvd.h).
constexpr std::uint32_t kNop = 0x10;
constexpr std::uint32_t kAtomicMem = 0x1E;  // soc15d.h PACKET3_ATOMIC_MEM
constexpr std::uint32_t kPredExec = 0x23;   // soc15d.h PACKET3_PRED_EXEC (gfx9.4.3's XCC select)
constexpr std::uint32_t kDispatchDirect = 0x15;
constexpr std::uint32_t kWriteData = 0x37;
constexpr std::uint32_t kWaitRegMem = 0x3C;
constexpr std::uint32_t kIndirectBuffer = 0x3F;
constexpr std::uint32_t kCopyData = 0x40;
constexpr std::uint32_t kEventWrite = 0x46;
constexpr std::uint32_t kReleaseMem = 0x49;
constexpr std::uint32_t kAcquireMem = 0x58;
constexpr std::uint32_t kSetShReg = 0x76;
constexpr std::uint32_t kWaitRegMem64 = 0x93;

// ---- SH registers: dword offsets (Mesa sid.h byte address / 4). SET_SH_REG names a
// register by its offset from kShRegStart (nvd.h PACKET3_SET_SH_REG_START .. _END).
constexpr std::uint32_t kShRegStart = 0x2C00;
constexpr std::uint32_t kShRegEnd = 0x3000;
namespace reg {
constexpr std::uint32_t COMPUTE_DISPATCH_INITIATOR = 0xB800 / 4;
constexpr std::uint32_t COMPUTE_DIM_X = 0xB804 / 4;
constexpr std::uint32_t COMPUTE_START_X = 0xB810 / 4;  // then _Y, _Z
constexpr std::uint32_t COMPUTE_NUM_THREAD_X = 0xB81C / 4;  // then _Y, _Z
constexpr std::uint32_t COMPUTE_PGM_LO = 0xB830 / 4;  // code address >> 8; then _HI
constexpr std::uint32_t COMPUTE_PGM_HI = 0xB834 / 4;
constexpr std::uint32_t COMPUTE_DISPATCH_SCRATCH_BASE_LO = 0xB840 / 4;  // gfx11+: scratch >> 8
constexpr std::uint32_t COMPUTE_DISPATCH_SCRATCH_BASE_HI = 0xB844 / 4;
constexpr std::uint32_t COMPUTE_PGM_RSRC1 = 0xB848 / 4;  // then RSRC2
constexpr std::uint32_t COMPUTE_PGM_RSRC2 = 0xB84C / 4;
constexpr std::uint32_t COMPUTE_RESOURCE_LIMITS = 0xB854 / 4;
constexpr std::uint32_t COMPUTE_TMPRING_SIZE = 0xB860 / 4;
constexpr std::uint32_t COMPUTE_RESTART_X = 0xB86C / 4;  // then _Y, _Z
// gfx9.4.3 (gfx942) only. COMPUTE_TG_CHUNK_SIZE: the thread groups an XCC takes in turn when
// the XCCs reading one queue share a dispatch (gc_9_4_3_offset.h regCOMPUTE_TG_CHUNK_SIZE
// 0x0e27, TG_CHUNK_SIZE in bits 0..15; KFD's MQD gives an AQL queue 1 and a PM4 queue 0).
// COMPUTE_CURRENT_LOGIC_XCC_ID: the XCC's place among them (0x0e25, which the offset header
// leaves out; tinygrad's ops_amd.py defines it and programmed it per XCC under PRED_EXEC).
constexpr std::uint32_t COMPUTE_CURRENT_LOGIC_XCC_ID = 0xB894 / 4;
constexpr std::uint32_t COMPUTE_TG_CHUNK_SIZE = 0xB89C / 4;
constexpr std::uint32_t COMPUTE_PGM_RSRC3 = 0xB8A0 / 4;
constexpr std::uint32_t COMPUTE_USER_DATA_0 = 0xB900 / 4;  // .. _15
constexpr std::uint32_t kUserDataCount = 16;
}  // namespace reg

// COMPUTE_DISPATCH_INITIATOR fields (gc *_sh_mask.h).
constexpr std::uint32_t kInitiatorComputeShaderEn = 1u << 0;
constexpr std::uint32_t kInitiatorForceStartAt000 = 1u << 2;
constexpr std::uint32_t kInitiatorCsW32En = 1u << 15;  // gfx10+: waves of 32 lanes

// ---- EVENT_WRITE / RELEASE_MEM event types and indices (the CP's VGT_EVENT_TYPE).
constexpr std::uint32_t kEventCsPartialFlush = 0x07;
constexpr std::uint32_t kEventCacheFlushAndInvTs = 0x14;
constexpr std::uint32_t kEventIndexCsPartialFlush = 4;
constexpr std::uint32_t kEventIndexEndOfPipe = 5;

// RELEASE_MEM GCR_CNTL bits (nvd.h PACKET3_RELEASE_MEM_GCR_*, in the ordinal's bits 12..24).
constexpr std::uint32_t kReleaseGlmWb = 1u << 12;
constexpr std::uint32_t kReleaseGlmInv = 1u << 13;
constexpr std::uint32_t kReleaseGlvInv = 1u << 14;
constexpr std::uint32_t kReleaseGl1Inv = 1u << 15;
constexpr std::uint32_t kReleaseGl2Inv = 1u << 20;
constexpr std::uint32_t kReleaseGl2Wb = 1u << 21;
constexpr std::uint32_t kReleaseGcrSeq = 1u << 22;

// RELEASE_MEM cache actions of gfx9 (soc15d.h EOP_*_ACTION_EN, in the ordinal's bits
// 12..21 where gfx10+ has GCR_CNTL): write back L2, invalidate the vector L1, invalidate
// L2, and L2's metadata.
constexpr std::uint32_t kEopTcWbActionEn = 1u << 15;
constexpr std::uint32_t kEopTcl1ActionEn = 1u << 16;
constexpr std::uint32_t kEopTcActionEn = 1u << 17;
constexpr std::uint32_t kEopTcMdActionEn = 1u << 21;

// ACQUIRE_MEM CP_COHER_CNTL actions of gfx9 (soc15d.h PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_*,
// the first body dword).
constexpr std::uint32_t kCoherTcWbActionEna = 1u << 18;
constexpr std::uint32_t kCoherTcl1ActionEna = 1u << 22;
constexpr std::uint32_t kCoherTcActionEna = 1u << 23;
constexpr std::uint32_t kCoherShKcacheActionEna = 1u << 27;
constexpr std::uint32_t kCoherShIcacheActionEna = 1u << 29;
// gfx9's COHER_SIZE_HI has 24 bits (soc15d.h PACKET3_ACQUIRE_MEM__COHER_SIZE_HI_VG10).
constexpr std::uint32_t kCoherSizeHiGfx9 = 0xffffff;

// ACQUIRE_MEM GCR_CNTL bits (nvd.h PACKET3_ACQUIRE_MEM_GCR_CNTL_*).
constexpr std::uint32_t kAcquireGliInv = 1u << 0;
constexpr std::uint32_t kAcquireGlmWb = 1u << 4;
constexpr std::uint32_t kAcquireGlmInv = 1u << 5;
constexpr std::uint32_t kAcquireGlkWb = 1u << 6;
constexpr std::uint32_t kAcquireGlkInv = 1u << 7;
constexpr std::uint32_t kAcquireGlvInv = 1u << 8;
constexpr std::uint32_t kAcquireGl1Inv = 1u << 9;
constexpr std::uint32_t kAcquireGl2Inv = 1u << 14;
constexpr std::uint32_t kAcquireGl2Wb = 1u << 15;

// COMPUTE_TMPRING_SIZE: WAVES (bits 0..11) waves of scratch at most, WAVESIZE (from bit 12)
// the bytes of each wave's scratch, in units of 1 KiB on gfx9 (13 bits: gc_9_0_sh_mask.h
// COMPUTE_TMPRING_SIZE__WAVESIZE_MASK 0x01FFF000) and of 256 bytes on gfx11+ (15 bits:
// gc_11_0_0_sh_mask.h 0x07FFF000); LLVM's scratch tests (SPI_TMPRING_SIZE.WAVESIZE 5 on
// gfx10, 17 on gfx11 for one frame) and ROCr's MAX_WAVE_SCRATCH say the same units.
constexpr std::uint32_t kTmpringWavesMax = 0xfff;
constexpr std::uint32_t tmpring_granule(Gen gen) { return gen == Gen::Gfx9_4 ? 1024 : 256; }
constexpr std::uint32_t tmpring_wavesize_bits(Gen gen) { return gen == Gen::Gfx9_4 ? 13 : 15; }
// The register's value for `waves` waves of `wave_bytes` bytes each. invalid_argument when
// waves exceeds 4095 or wave_bytes is not a multiple of the generation's unit or does not
// fit its field.
std::uint32_t tmpring_size(Gen gen, std::uint32_t waves, std::uint64_t wave_bytes);

// Whether the processor of `gfx_target_version` has COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI: gfx11+
// and gfx942 (90402), which LLVM's AMDGPUUsage gives architected flat scratch (no
// flat_scratch_init: .amdhsa_reserve_flat_scratch is GFX7-GFX10 except GFX942) and tinygrad's
// ops_amd.py programs the registers on (has_scratch_base_registers); not gfx90a (90010).
constexpr bool has_dispatch_scratch_base(std::uint64_t gfx_target_version) {
  return gfx_target_version >= 110000 || gfx_target_version == 90402;
}

// COMPUTE_PGM_RSRC3 of gfx90a and gfx942 (LLVM's AMDGPUUsage, "compute_pgm_rsrc3 for
// GFX90A, GFX942"): ACCUM_OFFSET (bits 0..5) places the first AccVGPR at 4 * (value + 1),
// TG_SPLIT (bit 16) lets a group's waves run on different CUs; the other bits are reserved.
constexpr std::uint32_t kRsrc3AccumOffsetMask = 0x3f;
constexpr std::uint32_t kRsrc3TgSplit = 1u << 16;
constexpr std::uint32_t kRsrc3Gfx90aKnown = kRsrc3AccumOffsetMask | kRsrc3TgSplit;
// RSRC3 for AccVGPRs from register `accum_offset` (4 ..= 256, a multiple of 4; otherwise
// invalid_argument) and the TG_SPLIT mode.
std::uint32_t rsrc3_gfx90a(std::uint32_t accum_offset, bool tg_split);

// RELEASE_MEM data_sel, int_sel, dst_sel (PM4_MEC_RELEASE_MEM enums).
enum class DataSel : std::uint32_t { None = 0, Low32 = 1, Data64 = 2, GpuClock = 3 };
enum class IntSel : std::uint32_t { None = 0, Interrupt = 1, InterruptAfterWriteConfirm = 2 };

// WAIT_REG_MEM(64) compare functions (PM4_MEC_WAIT_REG_MEM function_enum).
enum class Compare : std::uint32_t {
  Always = 0, Less = 1, LessEqual = 2, Equal = 3, NotEqual = 4, GreaterEqual = 5, Greater = 6
};

// COPY_DATA selectors (PM4_MEC_COPY_DATA src_sel / dst_sel enums).
enum class CopySrc : std::uint32_t { Register = 0, Memory = 2, Immediate = 5, GpuClock = 9 };
constexpr std::uint32_t kCopyDstMemory = 2;  // dst_sel tc_l2
constexpr std::uint32_t kWriteDstMemory = 5;  // WRITE_DATA dst_sel memory

// Bodies of the fixed-size packets, in dwords after the header.
constexpr std::uint32_t kReleaseMemBody = 7;
constexpr std::uint32_t kAcquireMemBody = 7;       // gfx10+: a reserved dword first, GCR_CNTL last
constexpr std::uint32_t kAcquireMemBodyGfx9 = 6;   // soc15d.h: COHER_CNTL, size, size_hi, base, base_hi, poll
constexpr std::uint32_t acquire_mem_body(Gen gen) { return gen == Gen::Gfx9_4 ? kAcquireMemBodyGfx9 : kAcquireMemBody; }
constexpr std::uint32_t kWaitRegMemBody = 6;
constexpr std::uint32_t kWaitRegMem64Body = 8;
constexpr std::uint32_t kCopyDataBody = 5;
constexpr std::uint32_t kEventWriteBody = 1;
constexpr std::uint32_t kIndirectBufferBody = 3;
constexpr std::uint32_t kDispatchDirectBody = 4;
constexpr std::uint32_t kPredExecBody = 1;   // EXEC_COUNT (bits 0..13), VIRTUAL_XCC_ID_SELECT (24..31)
constexpr std::uint32_t kAtomicMemBody = 8;  // op, address, source, compare, loop interval
constexpr std::uint32_t kPredExecCountMax = 0x3fff;
// ATOMIC_MEM's ATOMIC field (bits 0..5): the TC operation (vega10_enum.h / soc21_enum.h
// TC_OP_ATOMIC_ADD_RTN_64), and its COMMAND (bits 8..11) 0, a single pass.
constexpr std::uint32_t kTcOpAtomicAddRtn64 = 0x2f;
constexpr std::uint32_t kIndirectBufferMaxDwords = (1u << 20) - 1;  // ib_size is 20 bits
// Where a RELEASE_MEM's fields lie, in dwords from its header: the address (low, high) and
// the data (low, high), for packets encoded once and patched as they are copied.
constexpr std::uint32_t kReleaseMemAddress = 3;
constexpr std::uint32_t kReleaseMemData = 5;
// Where a WAIT_REG_MEM64's reference (low, high) lies, in dwords from its header.
constexpr std::uint32_t kWaitRegMem64Reference = 4;

// An end-of-pipe release: after all earlier work of the queue completes, the caches named
// are written back/invalidated, `data` (as data_sel says) is written at `address`, and an
// interrupt carrying `context` is raised if int_sel asks.
struct Release {
  std::uint64_t address = 0;
  std::uint64_t data = 0;
  DataSel data_sel = DataSel::None;
  IntSel int_sel = IntSel::None;
  std::uint32_t context = 0;  // int_ctxid
  bool write_back = true;     // write back and invalidate the caches before the store
};

// Writes PM4 packets into words. Every method throws std::length_error, having written
// nothing of the packet, if the packet does not fit in what is left of `out`, and
// std::invalid_argument for a field out of its range (each method says which).
class Pm4 {
 public:
  // Packets go at out[(start + i) % out.size()]; at most out.size() dwords are written.
  Pm4(Gen gen, std::span<std::uint32_t> out, std::uint64_t start = 0);

  Gen gen() const { return gen_; }
  // Dwords written so far.
  std::uint32_t size() const { return written_; }
  // The ring position after the last dword written: start + size().
  std::uint64_t position() const { return start_ + written_; }

  // A NOP of exactly `dwords` dwords (1 ..= 0x4000: a header and dwords - 1 ignored dwords).
  void nop(std::uint32_t dwords);
  // SET_SH_REG: `values` into consecutive SH registers from dword register `first`, which
  // must lie in [kShRegStart, kShRegEnd) with every value (invalid_argument otherwise).
  void set_sh_reg(std::uint32_t first, std::span<const std::uint32_t> values);
  void set_sh_reg(std::uint32_t reg, std::uint32_t value) { set_sh_reg(reg, std::span(&value, 1)); }
  // DISPATCH_DIRECT of a grid of x * y * z thread groups (each at least 1), with the
  // initiator's COMPUTE_SHADER_EN and FORCE_START_AT_000 bits, and CS_W32_EN for wave32
  // (invalid_argument on gfx9.4, which has no wave32).
  void dispatch_direct(std::uint32_t x, std::uint32_t y, std::uint32_t z, bool wave32);
  // RELEASE_MEM at end of pipe (event CACHE_FLUSH_AND_INV_TS_EVENT). The address must be
  // 4-aligned for Low32 and 8-aligned for Data64 and GpuClock (invalid_argument). With
  // write_back, gfx9 names the actions TC_WB, TCL1, TC and TC_MD; gfx11/12 GCR_CNTL's.
  void release_mem(const Release& release);
  // ACQUIRE_MEM over all memory: invalidates the instruction, scalar and vector caches and
  // writes back/invalidates L2 before later work reads memory. On gfx9 it is
  // 1 + kAcquireMemBodyGfx9 dwords with CP_COHER_CNTL SH_ICACHE, SH_KCACHE, TC, TCL1 and
  // TC_WB; on gfx11/12 1 + kAcquireMemBody with GCR_CNTL.
  void acquire_mem();
  // EVENT_WRITE of CS_PARTIAL_FLUSH: later work starts once earlier dispatches completed.
  void cs_partial_flush();
  // WAIT_REG_MEM on the 32-bit word at `address` (4-aligned): waits until
  // (word & mask) `compare` reference holds.
  void wait_mem32(std::uint64_t address, Compare compare, std::uint32_t reference,
                  std::uint32_t mask = 0xffffffff);
  // WAIT_REG_MEM64 on the 64-bit word at `address` (8-aligned): waits until
  // (word & mask) `compare` reference holds, such as another device's timeline word >= v.
  void wait_mem64(std::uint64_t address, Compare compare, std::uint64_t reference,
                  std::uint64_t mask = ~std::uint64_t(0));
  // PRED_EXEC (gfx9.4 only, invalid_argument elsewhere): the next `dwords` dwords (1 ..=
  // 0x3fff) run on the XCCs whose bits `xcc_mask` (1 ..= 0xff) sets, by their place in the
  // partition, and the other XCCs skip them. It works in indirect buffers, not in a ring
  // (tinygrad's ops_amd.py, which wraps such packets in an indirect buffer for that reason).
  void pred_exec(std::uint32_t xcc_mask, std::uint32_t dwords);
  // ATOMIC_MEM: adds `addend` to the 64-bit word at `address` (8-aligned) in one atomic
  // operation, once per command processor that runs the packet.
  void atomic_add64(std::uint64_t address, std::uint64_t addend);
  // INDIRECT_BUFFER: runs `dwords` dwords of PM4 at `address` (4-aligned; 1 ..= 2^20 - 1).
  void indirect_buffer(std::uint64_t address, std::uint32_t dwords);
  // WRITE_DATA of `data` to memory at `address` (4-aligned), with write confirmation.
  void write_data(std::uint64_t address, std::span<const std::uint32_t> data);
  // COPY_DATA of 32 or 64 bits from `source` (a register, memory, an immediate, or the GPU
  // clock, which is always 64 bits) to memory at `address` (4-aligned; 8 for 64 bits),
  // with write confirmation.
  void copy_data(CopySrc source, std::uint64_t source_value, std::uint64_t address, bool bits64);

  // Packets encoded before, such as a launch's that a later launch repeats (their fields
  // were checked when they were built), copied as they are.
  void packets(std::span<const std::uint32_t> words) {
    need(std::uint32_t(words.size()));
    emit(words);
  }
  // Dwords of a SET_SH_REG of n registers, of a NOP body, of a WRITE_DATA of n dwords.
  static constexpr std::uint32_t set_sh_reg_size(std::uint32_t n) { return 2 + n; }
  static constexpr std::uint32_t write_data_size(std::uint32_t n) { return 4 + n; }

 private:
  void need(std::uint32_t dwords) const {
    if (std::uint64_t(written_) + dwords > out_.size()) no_room(dwords);
  }
  [[noreturn]] void no_room(std::uint32_t dwords) const;
  // Writes `words` (whose room need() checked) at the ring position, in at most two pieces:
  // the ring may end within them.
  void emit(std::span<const std::uint32_t> words) {
    const std::size_t end = out_.size(), first = std::min(words.size(), end - at_);
    std::copy_n(words.data(), first, out_.data() + at_);
    std::copy_n(words.data() + first, words.size() - first, out_.data());
    at_ += words.size();  // need() bounds it by the ring's size
    if (at_ >= end) at_ -= end;
    written_ += std::uint32_t(words.size());
  }

  Gen gen_;
  std::span<std::uint32_t> out_;
  std::uint64_t start_;
  std::size_t at_ = 0;  // (start_ + written_) % out_.size()
  std::uint32_t written_ = 0;
};

}  // namespace rig::amd::pm4
