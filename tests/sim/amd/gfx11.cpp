// An interpreter of RDNA3 (gfx11) wave32 code (gfx11.hpp).
//
// Encodings and opcode numbers are those of the RDNA3 ISA as LLVM's AMDGPU assembler encodes
// them (llvm-mc -mcpu=gfx1100 --show-encoding); instruction semantics are the ISA manual's.
// The interpreter decodes each instruction into an Inst (its family, opcode and fields), then
// runs it on one wave's state. Every instruction completes before the next starts, so the
// waits (s_waitcnt*, s_delay_alu, s_clause) and cache invalidations do nothing.
#include "gfx11.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <variant>
#include <vector>

namespace rig::sim::amd::gfx11 {
namespace {

constexpr int kLanes = 32;
constexpr std::uint32_t kSgprs = 106;  // s0..s105; then vcc_lo, vcc_hi

// Operand codes of 9-bit sources and 7/8-bit scalar destinations.
enum : std::uint32_t {
  VCC_LO = 106, VCC_HI = 107, NULL_REG = 124, M0 = 125, EXEC_LO = 126, EXEC_HI = 127,
  SRC_SCC = 253, LITERAL = 255, VGPR0 = 256,
};

enum class Family { SOP1, SOP2, SOPC, SOPK, SOPP, SMEM, VOP1, VOP2, VOPC, VOP3, VOPD, DS, FLAT, MUBUF };

struct Inst {
  Family family;
  std::uint32_t op = 0;
  std::uint32_t length = 1;  // dwords, literal included
  std::uint32_t w0 = 0, w1 = 0;
  std::optional<std::uint32_t> literal;
  const char* name = nullptr;
  // VOPD's second half.
  std::uint32_t opy = 0;
  const char* name_y = nullptr;
};

struct Name {
  std::uint32_t op;
  const char* name;
};

// The subset, by family and opcode.
constexpr Name kSop1[] = {{0, "s_mov_b32"}, {1, "s_mov_b64"}, {4, "s_brev_b32"}, {8, "s_ctz_i32_b32"},
                          {14, "s_sext_i32_i8"}, {15, "s_sext_i32_i16"}, {21, "s_abs_i32"},
                          {24, "s_bcnt1_i32_b32"}, {30, "s_not_b32"}, {32, "s_and_saveexec_b32"},
                          {34, "s_or_saveexec_b32"}, {48, "s_and_not1_saveexec_b32"}, {71, "s_getpc_b64"},
                          {72, "s_setpc_b64"}, {73, "s_swappc_b64"}};
constexpr Name kSop2[] = {{0, "s_add_u32"}, {1, "s_sub_u32"}, {2, "s_add_i32"}, {3, "s_sub_i32"}, {4, "s_addc_u32"},
                          {5, "s_subb_u32"}, {8, "s_lshl_b32"}, {9, "s_lshl_b64"}, {10, "s_lshr_b32"},
                          {11, "s_lshr_b64"}, {12, "s_ashr_i32"}, {13, "s_ashr_i64"}, {14, "s_lshl1_add_u32"},
                          {15, "s_lshl2_add_u32"}, {16, "s_lshl3_add_u32"}, {17, "s_lshl4_add_u32"},
                          {18, "s_min_i32"}, {19, "s_min_u32"}, {20, "s_max_i32"}, {21, "s_max_u32"},
                          {22, "s_and_b32"}, {23, "s_and_b64"}, {24, "s_or_b32"}, {25, "s_or_b64"},
                          {26, "s_xor_b32"}, {27, "s_xor_b64"}, {34, "s_and_not1_b32"}, {36, "s_or_not1_b32"},
                          {38, "s_bfe_u32"}, {39, "s_bfe_i32"}, {44, "s_mul_i32"}, {45, "s_mul_hi_u32"},
                          {46, "s_mul_hi_i32"}, {48, "s_cselect_b32"}, {49, "s_cselect_b64"},
                          {50, "s_pack_ll_b32_b16"}};
constexpr Name kSopc[] = {{0, "s_cmp_eq_i32"}, {1, "s_cmp_lg_i32"}, {2, "s_cmp_gt_i32"}, {3, "s_cmp_ge_i32"},
                          {4, "s_cmp_lt_i32"}, {5, "s_cmp_le_i32"}, {6, "s_cmp_eq_u32"}, {7, "s_cmp_lg_u32"},
                          {8, "s_cmp_gt_u32"}, {9, "s_cmp_ge_u32"}, {10, "s_cmp_lt_u32"}, {11, "s_cmp_le_u32"},
                          {12, "s_bitcmp0_b32"}, {13, "s_bitcmp1_b32"}, {16, "s_cmp_eq_u64"}, {17, "s_cmp_lg_u64"}};
constexpr Name kSopk[] = {{0, "s_movk_i32"}, {2, "s_cmovk_i32"}, {9, "s_cmpk_eq_u32"}, {15, "s_addk_i32"},
                          {16, "s_mulk_i32"}, {24, "s_waitcnt_vscnt"}, {25, "s_waitcnt_vmcnt"},
                          {27, "s_waitcnt_lgkmcnt"}};
constexpr Name kSopp[] = {{0, "s_nop"}, {3, "s_sleep"}, {5, "s_clause"}, {7, "s_delay_alu"}, {8, "s_waitcnt_depctr"},
                          {9, "s_waitcnt"}, {32, "s_branch"}, {33, "s_cbranch_scc0"}, {34, "s_cbranch_scc1"},
                          {35, "s_cbranch_vccz"}, {36, "s_cbranch_vccnz"}, {37, "s_cbranch_execz"},
                          {38, "s_cbranch_execnz"}, {48, "s_endpgm"}, {54, "s_sendmsg"}, {61, "s_barrier"}};
constexpr Name kSmem[] = {{0, "s_load_b32"}, {1, "s_load_b64"}, {2, "s_load_b128"}, {3, "s_load_b256"},
                          {4, "s_load_b512"}};
constexpr Name kVop1[] = {{1, "v_mov_b32"}, {2, "v_readfirstlane_b32"}, {5, "v_cvt_f32_i32"}, {6, "v_cvt_f32_u32"},
                          {7, "v_cvt_u32_f32"}, {8, "v_cvt_i32_f32"}, {42, "v_rcp_f32"}, {43, "v_rcp_iflag_f32"},
                          {51, "v_sqrt_f32"}, {55, "v_not_b32"}, {56, "v_bfrev_b32"}};
constexpr Name kVop2[] = {{1, "v_cndmask_b32"}, {3, "v_add_f32"}, {4, "v_sub_f32"}, {5, "v_subrev_f32"},
                          {8, "v_mul_f32"}, {9, "v_mul_i32_i24"}, {11, "v_mul_u32_u24"}, {12, "v_mul_hi_u32_u24"},
                          {15, "v_min_f32"}, {16, "v_max_f32"}, {17, "v_min_i32"}, {18, "v_max_i32"},
                          {19, "v_min_u32"}, {20, "v_max_u32"}, {24, "v_lshlrev_b32"}, {25, "v_lshrrev_b32"},
                          {26, "v_ashrrev_i32"}, {27, "v_and_b32"}, {28, "v_or_b32"}, {29, "v_xor_b32"},
                          {32, "v_add_co_ci_u32"}, {33, "v_sub_co_ci_u32"}, {34, "v_subrev_co_ci_u32"},
                          {37, "v_add_nc_u32"}, {38, "v_sub_nc_u32"}, {39, "v_subrev_nc_u32"}, {43, "v_fmac_f32"}};
constexpr Name kVopc[] = {{17, "v_cmp_lt_f32"}, {18, "v_cmp_eq_f32"}, {19, "v_cmp_le_f32"}, {20, "v_cmp_gt_f32"},
                          {21, "v_cmp_lg_f32"}, {22, "v_cmp_ge_f32"}, {29, "v_cmp_neq_f32"},
                          {65, "v_cmp_lt_i32"}, {66, "v_cmp_eq_i32"}, {67, "v_cmp_le_i32"}, {68, "v_cmp_gt_i32"},
                          {69, "v_cmp_ne_i32"}, {70, "v_cmp_ge_i32"}, {73, "v_cmp_lt_u32"}, {74, "v_cmp_eq_u32"},
                          {75, "v_cmp_le_u32"}, {76, "v_cmp_gt_u32"}, {77, "v_cmp_ne_u32"}, {78, "v_cmp_ge_u32"},
                          {89, "v_cmp_lt_u64"}, {90, "v_cmp_eq_u64"}, {92, "v_cmp_gt_u64"}, {93, "v_cmp_ne_u64"},
                          {193, "v_cmpx_lt_i32"}, {196, "v_cmpx_gt_i32"}, {201, "v_cmpx_lt_u32"},
                          {202, "v_cmpx_eq_u32"}, {203, "v_cmpx_le_u32"}, {204, "v_cmpx_gt_u32"},
                          {205, "v_cmpx_ne_u32"}, {206, "v_cmpx_ge_u32"}};
// VOP3-only opcodes (VOP3 also encodes VOPC at op, VOP2 at 256 + op, VOP1 at 384 + op).
constexpr Name kVop3[] = {{523, "v_mad_u32_u24"}, {528, "v_bfe_u32"}, {529, "v_bfe_i32"}, {530, "v_bfi_b32"},
                          {531, "v_fma_f32"}, {534, "v_alignbit_b32"}, {539, "v_min3_u32"}, {542, "v_max3_u32"},
                          {576, "v_xor3_b32"}, {582, "v_lshl_add_u32"}, {583, "v_add_lshl_u32"},
                          {597, "v_add3_u32"}, {598, "v_lshl_or_b32"}, {599, "v_and_or_b32"}, {600, "v_or3_b32"},
                          {766, "v_mad_u64_u32"}, {767, "v_mad_i64_i32"}, {768, "v_add_co_u32"},
                          {769, "v_sub_co_u32"}, {770, "v_subrev_co_u32"}, {796, "v_ldexp_f32"},
                          {812, "v_mul_lo_u32"}, {813, "v_mul_hi_u32"}, {814, "v_mul_hi_i32"},
                          {828, "v_lshlrev_b64"}, {829, "v_lshrrev_b64"}, {830, "v_ashrrev_i64"},
                          {864, "v_readlane_b32"}, {865, "v_writelane_b32"}};
// VOPD halves: opx (4 bits) and opy (5 bits) share numbers 0..12.
constexpr Name kVopd[] = {{0, "v_dual_fmac_f32"}, {1, "v_dual_fmaak_f32"}, {2, "v_dual_fmamk_f32"},
                          {3, "v_dual_mul_f32"}, {4, "v_dual_add_f32"}, {5, "v_dual_sub_f32"},
                          {6, "v_dual_subrev_f32"}, {8, "v_dual_mov_b32"}, {9, "v_dual_cndmask_b32"},
                          {10, "v_dual_max_f32"}, {11, "v_dual_min_f32"}, {16, "v_dual_add_nc_u32"},
                          {17, "v_dual_lshlrev_b32"}, {18, "v_dual_and_b32"}};
constexpr Name kDs[] = {{0, "ds_add_u32"}, {13, "ds_store_b32"}, {14, "ds_store_2addr_b32"}, {32, "ds_add_rtn_u32"},
                        {54, "ds_load_b32"}, {55, "ds_load_2addr_b32"}, {77, "ds_store_b64"}, {118, "ds_load_b64"}};
// FLAT/GLOBAL opcodes (the segment field tells flat 0 from global 2).
constexpr Name kFlat[] = {{16, "load_u8"}, {17, "load_i8"}, {18, "load_u16"}, {19, "load_i16"}, {20, "load_b32"},
                          {21, "load_b64"}, {22, "load_b96"}, {23, "load_b128"}, {24, "store_b8"},
                          {25, "store_b16"}, {26, "store_b32"}, {27, "store_b64"}, {28, "store_b96"},
                          {29, "store_b128"}, {53, "atomic_add_u32"}};
constexpr Name kMubuf[] = {{43, "buffer_gl0_inv"}, {44, "buffer_gl1_inv"}};

template <std::size_t N>
const char* find(const Name (&table)[N], std::uint32_t op) {
  for (auto& n : table)
    if (n.op == op) return n.name;
  return nullptr;
}

const char* family_name(Family f) {
  switch (f) {
    case Family::SOP1: return "SOP1";
    case Family::SOP2: return "SOP2";
    case Family::SOPC: return "SOPC";
    case Family::SOPK: return "SOPK";
    case Family::SOPP: return "SOPP";
    case Family::SMEM: return "SMEM";
    case Family::VOP1: return "VOP1";
    case Family::VOP2: return "VOP2";
    case Family::VOPC: return "VOPC";
    case Family::VOP3: return "VOP3";
    case Family::VOPD: return "VOPD";
    case Family::DS: return "DS";
    case Family::FLAT: return "FLAT";
    case Family::MUBUF: return "MUBUF";
  }
  return "?";
}

// Whether a 9-bit source field names the literal (the instruction then has one more dword).
bool literal_source(std::uint32_t s) { return s == LITERAL; }

struct DecodeError {
  std::string why;
};

// Decodes the instruction at w (up to `available` dwords).
std::variant<Inst, DecodeError> decode(const std::uint32_t* w, std::size_t available) {
  if (!available) return DecodeError{"no instruction"};
  std::uint32_t d = w[0];
  Inst in{};
  in.w0 = d;
  auto need = [&](std::uint32_t n) { return n <= available; };
  auto with_literal = [&](bool has) -> std::optional<DecodeError> {
    if (!has) return std::nullopt;
    if (!need(in.length + 1)) return DecodeError{"a literal past the code"};
    in.literal = w[in.length];
    ++in.length;
    return std::nullopt;
  };
  auto unknown = [&](std::uint32_t op) {
    return DecodeError{fmt::format("unknown {} instruction: opcode {} (encoding {:#010x})", family_name(in.family), op, d)};
  };
  std::uint32_t top9 = d >> 23;
  if (top9 == 0x17D) {
    in.family = Family::SOP1, in.op = (d >> 8) & 0xff;
    if (!(in.name = find(kSop1, in.op))) return unknown(in.op);
    if (auto e = with_literal(literal_source(d & 0xff))) return *e;
    return in;
  }
  if (top9 == 0x17E) {
    in.family = Family::SOPC, in.op = (d >> 16) & 0x7f;
    if (!(in.name = find(kSopc, in.op))) return unknown(in.op);
    if (auto e = with_literal(literal_source(d & 0xff) || literal_source((d >> 8) & 0xff))) return *e;
    return in;
  }
  if (top9 == 0x17F) {
    in.family = Family::SOPP, in.op = (d >> 16) & 0x7f;
    if (!(in.name = find(kSopp, in.op))) return unknown(in.op);
    return in;
  }
  if ((d >> 28) == 0xB) {
    in.family = Family::SOPK, in.op = (d >> 23) & 0x1f;
    if (!(in.name = find(kSopk, in.op))) return unknown(in.op);
    return in;
  }
  if ((d >> 30) == 0x2) {
    in.family = Family::SOP2, in.op = (d >> 23) & 0x7f;
    if (!(in.name = find(kSop2, in.op))) return unknown(in.op);
    if (auto e = with_literal(literal_source(d & 0xff) || literal_source((d >> 8) & 0xff))) return *e;
    return in;
  }
  if ((d >> 31) == 0) {  // VOP1, VOPC or VOP2
    if ((d >> 25) == 0x3F) in.family = Family::VOP1, in.op = (d >> 9) & 0xff, in.name = find(kVop1, in.op);
    else if ((d >> 25) == 0x3E) in.family = Family::VOPC, in.op = (d >> 17) & 0xff, in.name = find(kVopc, in.op);
    else in.family = Family::VOP2, in.op = (d >> 25) & 0x3f, in.name = find(kVop2, in.op);
    if (!in.name) return unknown(in.op);
    if ((d & 0x1ff) == 0xF9 || (d & 0x1ff) == 0xFA || (d & 0x1ff) == 0xEA || (d & 0x1ff) == 0xE9)
      return DecodeError{fmt::format("{} with SDWA/DPP operands is not simulated (encoding {:#010x})", in.name, d)};
    if (auto e = with_literal(literal_source(d & 0x1ff))) return *e;
    return in;
  }
  std::uint32_t top6 = d >> 26;
  if (!need(2)) return DecodeError{fmt::format("a 64-bit instruction past the code (encoding {:#010x})", d)};
  in.w1 = w[1], in.length = 2;
  switch (top6) {
    case 0x35: {  // VOP3
      in.family = Family::VOP3, in.op = (d >> 16) & 0x3ff;
      if (in.op < 256) in.name = find(kVopc, in.op);
      else if (in.op < 384) in.name = find(kVop2, in.op - 256);
      else if (in.op < 512) in.name = find(kVop1, in.op - 384);
      else in.name = find(kVop3, in.op);
      if (!in.name) return unknown(in.op);
      bool lit = literal_source(in.w1 & 0x1ff) || literal_source((in.w1 >> 9) & 0x1ff) ||
                 literal_source((in.w1 >> 18) & 0x1ff);
      if (auto e = with_literal(lit)) return *e;
      return in;
    }
    case 0x32: {  // VOPD
      in.family = Family::VOPD, in.op = (d >> 22) & 0xf, in.opy = (d >> 17) & 0x1f;
      in.name = find(kVopd, in.op), in.name_y = in.opy <= 12 || in.opy >= 16 ? find(kVopd, in.opy) : nullptr;
      if (!in.name || in.op >= 16 || !in.name_y) return unknown(in.name ? in.opy : in.op);
      bool lit = literal_source(d & 0x1ff) || literal_source(in.w1 & 0x1ff) || in.op == 1 || in.op == 2 ||
                 in.opy == 1 || in.opy == 2;
      if (auto e = with_literal(lit)) return *e;
      return in;
    }
    case 0x3D:
      in.family = Family::SMEM, in.op = (d >> 18) & 0xff;
      if (!(in.name = find(kSmem, in.op))) return unknown(in.op);
      return in;
    case 0x36:
      in.family = Family::DS, in.op = (d >> 18) & 0xff;
      if (!(in.name = find(kDs, in.op))) return unknown(in.op);
      return in;
    case 0x37: {
      in.family = Family::FLAT, in.op = (d >> 18) & 0x7f;
      std::uint32_t seg = (d >> 16) & 3;
      if (!(in.name = find(kFlat, in.op)) || (seg != 0 && seg != 2))
        return DecodeError{fmt::format("unknown {} instruction: opcode {} segment {} (encoding {:#010x})",
                                       seg == 1 ? "SCRATCH" : "FLAT", in.op, seg, d)};
      return in;
    }
    case 0x38:
      in.family = Family::MUBUF, in.op = (d >> 18) & 0xff;
      if (!(in.name = find(kMubuf, in.op))) return unknown(in.op);
      return in;
  }
  return DecodeError{fmt::format("an encoding the interpreter does not know: {:#010x} {:#010x}", d, in.w1)};
}

// ---- Execution.


struct Wave {
  std::array<std::uint32_t, kSgprs + 2> s{};  // s0..s105, vcc_lo, vcc_hi
  std::uint32_t m0 = 0;
  std::uint64_t exec = 0;
  bool scc = false;
  std::uint64_t pc = 0;
  std::vector<std::uint32_t> v;  // VGPRs: v[reg * 32 + lane]
  std::uint32_t vgprs = 0;
  bool done = false, at_barrier = false;
};

struct Group {
  std::vector<std::byte> lds;
  std::vector<Wave> waves;
};


class Runner {
 public:
  Runner(const Dispatch& d, Memory& m, const std::atomic<bool>& stop) : d_(d), mem_(m), stop_(stop) {}
  Outcome run();

 private:
  void group(std::uint32_t gx, std::uint32_t gy, std::uint32_t gz);
  void step(Wave& w, Group& g);
  [[noreturn]] void fail(std::string why) { throw Fault{std::move(why)}; }

  // Scalar operands.
  std::uint32_t sread(const Wave& w, std::uint32_t code, const Inst& in) const;
  std::uint64_t sread64(const Wave& w, std::uint32_t code, const Inst& in) const;
  void swrite(Wave& w, std::uint32_t code, std::uint32_t value);
  void swrite64(Wave& w, std::uint32_t code, std::uint64_t value);
  // Vector operands, per lane: a 9-bit source (SGPR, constant, literal or VGPR).
  std::uint32_t vsrc(const Wave& w, std::uint32_t code, int lane, const Inst& in) const;
  std::uint64_t vsrc64(const Wave& w, std::uint32_t code, int lane, const Inst& in) const;
  std::uint32_t& vgpr(Wave& w, std::uint32_t reg, int lane);
  std::uint32_t vgpr(const Wave& w, std::uint32_t reg, int lane) const;
  // A lane mask operand: one SGPR (or VCC_LO) in wave32.
  std::uint64_t mask_of(const Wave& w, std::uint32_t code, const Inst& in) const { return sread(w, code, in); }

  void sop1(Wave& w, const Inst& in);
  void sop2(Wave& w, const Inst& in);
  void sopc(Wave& w, const Inst& in);
  void sopk(Wave& w, const Inst& in);
  bool sopp(Wave& w, const Inst& in);  // false: the wave stops here (end, barrier)
  void smem(Wave& w, const Inst& in);
  void valu(Wave& w, const Inst& in);
  void vopd(Wave& w, const Inst& in);
  void ds(Wave& w, Group& g, const Inst& in);
  void flat(Wave& w, const Inst& in);

  std::byte* memory(std::uint64_t address, std::size_t n, bool write, const Inst& in) {
    auto* p = mem_.at(address, n, write);
    if (!p) {
      std::string name = in.family == Family::FLAT
                             ? fmt::format("{}_{}", ((in.w0 >> 16) & 3) == 2 ? "global" : "flat", in.name)
                             : in.name;
      throw Fault{fmt::format("page fault at {:#x} ({}) by {}", address, write ? "write" : "read", name), true, address,
                  write};
    }
    return p;
  }
  std::byte* lds(Group& g, std::uint32_t address, std::size_t n, const Inst& in) {
    if (std::uint64_t(address) + n > g.lds.size())
      fail(fmt::format("{} at LDS byte {:#x}, outside the {} bytes the dispatch allocated", in.name, address, g.lds.size()));
    return g.lds.data() + address;
  }

  const Dispatch& d_;
  Memory& mem_;
  const std::atomic<bool>& stop_;
  std::uint64_t count_ = 0;
};

std::uint32_t Runner::sread(const Wave& w, std::uint32_t c, const Inst& in) const {
  if (c < kSgprs) return w.s[c];
  if (c == VCC_LO || c == VCC_HI) return w.s[c];
  if (c == NULL_REG) return 0;
  if (c == M0) return w.m0;
  if (c == EXEC_LO) return std::uint32_t(w.exec);
  if (c == EXEC_HI) return std::uint32_t(w.exec >> 32);
  if (c >= 128 && c <= 192) return c - 128;
  if (c >= 193 && c <= 208) return std::uint32_t(-std::int32_t(c - 192));
  static constexpr float kFloats[] = {0.5f, -0.5f, 1.0f, -1.0f, 2.0f, -2.0f, 4.0f, -4.0f};
  if (c >= 240 && c <= 247) return u(kFloats[c - 240]);
  if (c == 248) return 0x3e22f983;  // 1 / (2 pi)
  if (c == SRC_SCC) return w.scc;
  if (c == LITERAL) return *in.literal;
  throw Fault{fmt::format("{}: scalar operand {} is not simulated", in.name, c)};
}

std::uint64_t Runner::sread64(const Wave& w, std::uint32_t c, const Inst& in) const {
  if (c < kSgprs) {
    if (c + 1 >= kSgprs) throw Fault{fmt::format("{}: SGPR pair s[{}:{}] past s105", in.name, c, c + 1)};
    return std::uint64_t(w.s[c + 1]) << 32 | w.s[c];
  }
  if (c == VCC_LO) return std::uint64_t(w.s[VCC_HI]) << 32 | w.s[VCC_LO];
  if (c == EXEC_LO) return w.exec;
  if (c == NULL_REG) return 0;
  std::uint32_t lo = sread(w, c, in);
  if ((c >= 193 && c <= 208)) return std::uint64_t(std::int64_t(std::int32_t(lo)));  // sign-extended
  return lo;
}

void Runner::swrite(Wave& w, std::uint32_t c, std::uint32_t value) {
  if (c < kSgprs || c == VCC_LO || c == VCC_HI) w.s[c] = value;
  else if (c == M0) w.m0 = value;
  else if (c == EXEC_LO) w.exec = (w.exec & ~0xffffffffull) | value;
  else if (c == EXEC_HI) w.exec = (w.exec & 0xffffffffull) | std::uint64_t(value) << 32;
  else if (c != NULL_REG) throw Fault{fmt::format("a write to scalar destination {}", c)};
}

void Runner::swrite64(Wave& w, std::uint32_t c, std::uint64_t value) {
  if (c < kSgprs) {
    if (c + 1 >= kSgprs) throw Fault{fmt::format("an SGPR pair s[{}:{}] past s105", c, c + 1)};
    w.s[c] = std::uint32_t(value), w.s[c + 1] = std::uint32_t(value >> 32);
  } else if (c == VCC_LO) {
    w.s[VCC_LO] = std::uint32_t(value), w.s[VCC_HI] = std::uint32_t(value >> 32);
  } else if (c == EXEC_LO) {
    w.exec = value;
  } else if (c != NULL_REG) {
    throw Fault{fmt::format("a 64-bit write to scalar destination {}", c)};
  }
}

std::uint32_t& Runner::vgpr(Wave& w, std::uint32_t reg, int lane) {
  if (reg >= w.vgprs) fail(fmt::format("VGPR v{} outside the {} the dispatch allocated", reg, w.vgprs));
  return w.v[std::size_t(reg) * kLanes + std::size_t(lane)];
}
std::uint32_t Runner::vgpr(const Wave& w, std::uint32_t reg, int lane) const {
  if (reg >= w.vgprs) throw Fault{fmt::format("VGPR v{} outside the {} the dispatch allocated", reg, w.vgprs)};
  return w.v[std::size_t(reg) * kLanes + std::size_t(lane)];
}

std::uint32_t Runner::vsrc(const Wave& w, std::uint32_t c, int lane, const Inst& in) const {
  if (c >= VGPR0) return vgpr(w, c - VGPR0, lane);
  return sread(w, c, in);
}

std::uint64_t Runner::vsrc64(const Wave& w, std::uint32_t c, int lane, const Inst& in) const {
  if (c >= VGPR0) return std::uint64_t(vgpr(w, c - VGPR0 + 1, lane)) << 32 | vgpr(w, c - VGPR0, lane);
  return sread64(w, c, in);
}

// ---- Scalar ALU.

void Runner::sop1(Wave& w, const Inst& in) {
  std::uint32_t dst = (in.w0 >> 16) & 0x7f, src = in.w0 & 0xff;
  switch (in.op) {
    case 0: swrite(w, dst, sread(w, src, in)); return;
    case 1: swrite64(w, dst, sread64(w, src, in)); return;
    case 4: swrite(w, dst, std::uint32_t(reverse_bits(sread(w, src, in)))); return;
    case 8: {
      auto x = sread(w, src, in);
      swrite(w, dst, x ? std::uint32_t(std::countr_zero(x)) : 0xffffffffu);
      return;
    }
    case 14: swrite(w, dst, std::uint32_t(std::int32_t(std::int8_t(sread(w, src, in))))); return;
    case 15: swrite(w, dst, std::uint32_t(std::int32_t(std::int16_t(sread(w, src, in))))); return;
    case 21: {
      auto x = i(sread(w, src, in));
      std::uint32_t r = x < 0 ? std::uint32_t(-std::int64_t(x)) : std::uint32_t(x);
      swrite(w, dst, r), w.scc = r != 0;
      return;
    }
    case 24: {
      std::uint32_t r = std::uint32_t(std::popcount(sread(w, src, in)));
      swrite(w, dst, r), w.scc = r != 0;
      return;
    }
    case 30: {
      std::uint32_t r = ~sread(w, src, in);
      swrite(w, dst, r), w.scc = r != 0;
      return;
    }
    case 71: swrite64(w, dst, w.pc + 4); return;  // the next instruction's address
    case 32: case 34: case 48: {  // saveexec: D = EXEC, then EXEC from S0 and EXEC
      std::uint32_t s = sread(w, src, in), e = std::uint32_t(w.exec);
      std::uint32_t n = in.op == 32 ? s & e : in.op == 34 ? s | e : s & ~e;
      swrite(w, dst, e);
      w.exec = n, w.scc = n != 0;
      return;
    }
  }
  fail(fmt::format("{} is decoded but not run", in.name));
}

void Runner::sop2(Wave& w, const Inst& in) {
  std::uint32_t dst = (in.w0 >> 16) & 0x7f, s0c = in.w0 & 0xff, s1c = (in.w0 >> 8) & 0xff;
  bool wide = in.op == 9 || in.op == 11 || in.op == 13 || in.op == 23 || in.op == 25 || in.op == 27 || in.op == 49;
  if (wide) {
    std::uint64_t a = sread64(w, s0c, in);
    std::uint64_t b = (in.op == 9 || in.op == 11 || in.op == 13) ? sread(w, s1c, in) : sread64(w, s1c, in);
    std::uint64_t r = 0;
    switch (in.op) {
      case 9: r = a << (b & 63); break;
      case 11: r = a >> (b & 63); break;
      case 13: r = std::uint64_t(std::int64_t(a) >> (b & 63)); break;
      case 23: r = a & b; break;
      case 25: r = a | b; break;
      case 27: r = a ^ b; break;
      case 49: swrite64(w, dst, w.scc ? a : b); return;
    }
    swrite64(w, dst, r), w.scc = r != 0;
    return;
  }
  std::uint32_t a = sread(w, s0c, in), b = sread(w, s1c, in), r = 0;
  std::uint64_t wide_r;
  switch (in.op) {
    case 0: wide_r = std::uint64_t(a) + b, r = std::uint32_t(wide_r), w.scc = wide_r >> 32; break;
    case 1: r = a - b, w.scc = b > a; break;
    case 2: r = a + b, w.scc = ((~(a ^ b) & (a ^ r)) >> 31) & 1; break;
    case 3: r = a - b, w.scc = (((a ^ b) & (a ^ r)) >> 31) & 1; break;
    case 4: wide_r = std::uint64_t(a) + b + w.scc, r = std::uint32_t(wide_r), w.scc = wide_r >> 32; break;
    case 5: wide_r = std::uint64_t(a) - b - w.scc, r = std::uint32_t(wide_r), w.scc = (wide_r >> 32) != 0; break;
    case 8: r = a << (b & 31), w.scc = r != 0; break;
    case 10: r = a >> (b & 31), w.scc = r != 0; break;
    case 12: r = std::uint32_t(i(a) >> (b & 31)), w.scc = r != 0; break;
    case 14: case 15: case 16: case 17: {
      wide_r = (std::uint64_t(a) << (in.op - 13)) + b;
      r = std::uint32_t(wide_r), w.scc = wide_r >> 32;
      break;
    }
    case 18: w.scc = i(a) < i(b), r = w.scc ? a : b; break;
    case 19: w.scc = a < b, r = w.scc ? a : b; break;
    case 20: w.scc = i(a) > i(b), r = w.scc ? a : b; break;
    case 21: w.scc = a > b, r = w.scc ? a : b; break;
    case 22: r = a & b, w.scc = r != 0; break;
    case 24: r = a | b, w.scc = r != 0; break;
    case 26: r = a ^ b, w.scc = r != 0; break;
    case 34: r = a & ~b, w.scc = r != 0; break;
    case 36: r = a | ~b, w.scc = r != 0; break;
    case 38: case 39: {  // offset in b[4:0], width in b[22:16]
      std::uint32_t off = b & 31, width = (b >> 16) & 0x7f;
      if (width == 0) r = 0;
      else if (in.op == 38) r = width >= 32 ? a >> off : (a >> off) & ((1u << width) - 1);
      else r = width >= 32 ? std::uint32_t(i(a) >> off)
                           : std::uint32_t(std::int32_t(((a >> off) & ((1u << width) - 1)) << (32 - width)) >> (32 - width));
      w.scc = r != 0;
      break;
    }
    case 44: r = a * b; break;
    case 45: r = std::uint32_t((std::uint64_t(a) * b) >> 32); break;
    case 46: r = std::uint32_t((std::int64_t(i(a)) * i(b)) >> 32); break;
    case 48: r = w.scc ? a : b; break;
    case 50: r = (a & 0xffff) | (b << 16); break;
    default: fail(fmt::format("{} is decoded but not run", in.name));
  }
  swrite(w, dst, r);
}

void Runner::sopc(Wave& w, const Inst& in) {
  std::uint32_t s0c = in.w0 & 0xff, s1c = (in.w0 >> 8) & 0xff;
  if (in.op == 16 || in.op == 17) {
    std::uint64_t a = sread64(w, s0c, in), b = sread64(w, s1c, in);
    w.scc = in.op == 16 ? a == b : a != b;
    return;
  }
  std::uint32_t a = sread(w, s0c, in), b = sread(w, s1c, in);
  switch (in.op) {
    case 0: w.scc = a == b; break;
    case 1: w.scc = a != b; break;
    case 2: w.scc = i(a) > i(b); break;
    case 3: w.scc = i(a) >= i(b); break;
    case 4: w.scc = i(a) < i(b); break;
    case 5: w.scc = i(a) <= i(b); break;
    case 6: w.scc = a == b; break;
    case 7: w.scc = a != b; break;
    case 8: w.scc = a > b; break;
    case 9: w.scc = a >= b; break;
    case 10: w.scc = a < b; break;
    case 11: w.scc = a <= b; break;
    case 12: w.scc = ((a >> (b & 31)) & 1) == 0; break;
    case 13: w.scc = ((a >> (b & 31)) & 1) == 1; break;
  }
}

void Runner::sopk(Wave& w, const Inst& in) {
  std::uint32_t dst = (in.w0 >> 16) & 0x7f;
  std::uint32_t k = std::uint32_t(std::int32_t(std::int16_t(in.w0 & 0xffff)));
  switch (in.op) {
    case 0: swrite(w, dst, k); return;
    case 2: if (w.scc) swrite(w, dst, k); return;
    case 9: w.scc = sread(w, dst, in) == (in.w0 & 0xffff); return;
    case 15: {
      std::uint32_t a = sread(w, dst, in), r = a + k;
      w.scc = ((~(a ^ k) & (a ^ r)) >> 31) & 1;
      swrite(w, dst, r);
      return;
    }
    case 16: swrite(w, dst, sread(w, dst, in) * k); return;
    default: return;  // s_waitcnt_*: every access has completed
  }
}

bool Runner::sopp(Wave& w, const Inst& in) {
  std::int64_t target = std::int64_t(w.pc) + 4 + std::int64_t(std::int16_t(in.w0 & 0xffff)) * 4;
  auto branch = [&](bool taken) {
    w.pc = taken ? std::uint64_t(target) : w.pc + 4;
    return true;
  };
  std::uint32_t lanes = std::uint32_t(w.exec);
  std::uint32_t vcc = w.s[VCC_LO];  // wave32
  switch (in.op) {
    case 32: return branch(true);
    case 33: return branch(!w.scc);
    case 34: return branch(w.scc);
    case 35: return branch(vcc == 0);
    case 36: return branch(vcc != 0);
    case 37: return branch(lanes == 0);
    case 38: return branch(lanes != 0);
    case 48: w.done = true; return false;
    case 61: w.at_barrier = true, w.pc += 4; return false;
    case 54:
      if ((in.w0 & 0xff) != 3) fail(fmt::format("s_sendmsg of message {}: only MSG_DEALLOC_VGPRS (3) is simulated", in.w0 & 0xff));
      break;
    default: break;  // s_nop, s_sleep, s_clause, s_delay_alu, s_waitcnt*
  }
  w.pc += 4;
  return true;
}

void Runner::smem(Wave& w, const Inst& in) {
  std::uint32_t sdata = (in.w0 >> 6) & 0x7f, sbase = (in.w0 & 0x3f) * 2;
  std::int32_t offset = std::int32_t(in.w1 << 11) >> 11;  // 21 bits, signed
  std::uint32_t soffset = in.w1 >> 25;
  std::uint64_t address = sread64(w, sbase, in) + std::int64_t(offset);
  if (soffset != NULL_REG) address += sread(w, soffset, in);
  address &= ~3ull;
  std::uint32_t n = 1u << in.op;  // dwords: 1, 2, 4, 8, 16
  if (sdata + n > kSgprs) fail(fmt::format("{} into s{}..s{}, past s105", in.name, sdata, sdata + n - 1));
  auto* p = memory(address, n * 4, false, in);
  std::memcpy(&w.s[sdata], p, n * 4);
}

// ---- Vector ALU.

namespace cmp {
bool f32(std::uint32_t op, float a, float b) {
  switch (op) {
    case 17: return a < b;
    case 18: return a == b;
    case 19: return a <= b;
    case 20: return a > b;
    case 21: return a < b || a > b;
    case 22: return a >= b;
    case 29: return !(a == b);
  }
  return false;
}
template <class T>
bool integer(std::uint32_t kind, T a, T b) {  // kind: op % 8 within a 8-opcode group
  switch (kind) {
    case 1: return a < b;
    case 2: return a == b;
    case 3: return a <= b;
    case 4: return a > b;
    case 5: return a != b;
    case 6: return a >= b;
  }
  return false;
}
}  // namespace cmp

void Runner::valu(Wave& w, const Inst& in) {
  // Operands and destination, from the encoding.
  bool vop3 = in.family == Family::VOP3;
  std::uint32_t op = in.op, s0c, s1c = 0, s2c = 0, vdst;
  std::uint32_t abs = 0, neg = 0;
  if (vop3) {
    s0c = in.w1 & 0x1ff, s1c = (in.w1 >> 9) & 0x1ff, s2c = (in.w1 >> 18) & 0x1ff;
    vdst = in.w0 & 0xff;
    abs = (in.w0 >> 8) & 7, neg = in.w1 >> 29;
    bool b_form = op == 768 || op == 769 || op == 770 || op == 766 || op == 767 || op == 288 || op == 289 || op == 290;
    // Float operations take |abs| and -neg modifiers; on the others they are not simulated.
    bool floating = (op >= 17 && op <= 29) || (op >= 145 && op <= 157) || op == 259 || op == 260 || op == 261 ||
                    op == 264 || op == 271 || op == 272 || op == 299 || op == 531 || op == 796 ||
                    (op >= 384 + 7 && op <= 384 + 8) || op == 384 + 42 || op == 384 + 43 || op == 384 + 51;
    if (!floating && ((!b_form && abs) || neg))
      fail(fmt::format("{} with |abs| or -neg on an integer operation is not simulated", in.name));
    if ((in.w0 >> 11) & 0xf && !b_form) fail(fmt::format("{} with op_sel is not simulated", in.name));
    if ((in.w1 >> 27) & 3) fail(fmt::format("{} with an output modifier is not simulated", in.name));
    if ((in.w0 >> 15) & 1) fail(fmt::format("{} with clamp is not simulated", in.name));
  } else if (in.family == Family::VOP1) {
    s0c = in.w0 & 0x1ff, vdst = (in.w0 >> 17) & 0xff, op += 384;
  } else if (in.family == Family::VOP2) {
    s0c = in.w0 & 0x1ff, s1c = VGPR0 + ((in.w0 >> 9) & 0xff), vdst = (in.w0 >> 17) & 0xff, op += 256;
  } else {  // VOPC e32: the result goes to VCC (or EXEC for v_cmpx)
    s0c = in.w0 & 0x1ff, s1c = VGPR0 + ((in.w0 >> 9) & 0xff), vdst = VCC_LO;
  }
  auto fsrc = [&](std::uint32_t x, int k) {
    float v = f(x);
    if (abs >> k & 1) v = std::fabs(v);
    if (neg >> k & 1) v = -v;
    return v;
  };
  std::uint32_t lanes = std::uint32_t(w.exec);

  if (op < 256) {  // compares: VOPC, or VOPC in VOP3 (vdst names the SGPR result)
    bool x = op >= 128;
    std::uint32_t c = op & 127;
    std::uint64_t result = 0;
    for (int l = 0; l < kLanes; ++l) {
      if (!(lanes >> l & 1)) continue;
      bool r;
      if (c >= 17 && c <= 29) r = cmp::f32(c, fsrc(vsrc(w, s0c, l, in), 0), fsrc(vsrc(w, s1c, l, in), 1));
      else if (c >= 65 && c <= 70) r = cmp::integer(c - 64, i(vsrc(w, s0c, l, in)), i(vsrc(w, s1c, l, in)));
      else if (c >= 73 && c <= 78) r = cmp::integer(c - 72, vsrc(w, s0c, l, in), vsrc(w, s1c, l, in));
      else if (c >= 89 && c <= 94) r = cmp::integer(c - 88, vsrc64(w, s0c, l, in), vsrc64(w, s1c, l, in));
      else fail(fmt::format("{} is decoded but not run", in.name));
      if (r) result |= 1ull << l;
    }
    if (x) w.exec = result;  // v_cmpx: EXEC only (gfx10+)
    else swrite(w, vdst, std::uint32_t(result));  // wave32: one SGPR (VCC_LO for e32)
    return;
  }

  // Single-lane forms first.
  if (op == 384 + 2) {  // v_readfirstlane_b32: SDST (the vdst field) = the first active lane's value
    int lane = lanes ? std::countr_zero(lanes) : 0;
    swrite(w, vdst, vsrc(w, s0c, lane, in));
    return;
  }
  if (op == 864) {  // v_readlane_b32
    swrite(w, vdst, vsrc(w, s0c, int(sread(w, s1c, in) & 31), in));
    return;
  }
  if (op == 865) {  // v_writelane_b32
    vgpr(w, vdst, int(sread(w, s1c, in) & 31)) = sread(w, s0c, in);
    return;
  }

  std::uint32_t sdst = (in.w0 >> 8) & 0x7f;  // VOP3B's carry/scalar destination
  std::uint64_t carry_in = 0, carry_out = 0;
  if (op == 256 + 1 || (op >= 288 && op <= 290)) carry_in = vop3 ? mask_of(w, s2c, in) : w.s[VCC_LO];
  const bool two = !(op >= 384 && op < 512);  // VOP1 operations read one source
  bool wide_dst = op == 766 || op == 767 || op == 828 || op == 829 || op == 830;
  // Read every lane's operands before writing (dst may be a source).
  std::array<std::uint64_t, kLanes> out{};
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    std::uint32_t a = vsrc(w, s0c, l, in);
    std::uint32_t b = two ? vsrc(w, s1c, l, in) : 0;
    auto c = [&] { return vsrc(w, s2c, l, in); };
    std::uint64_t r = 0;
    switch (op) {
      // VOP1
      case 384 + 1: r = a; break;
      case 384 + 5: r = u(float(i(a))); break;
      case 384 + 6: r = u(float(a)); break;
      case 384 + 7: {
        float x = fsrc(a, 0);
        r = std::isnan(x) || x <= 0 ? 0 : x >= 4294967296.0f ? 0xffffffffu : std::uint32_t(x);
        break;
      }
      case 384 + 8: {
        float x = fsrc(a, 0);
        r = std::isnan(x) ? 0 : x <= -2147483648.0f ? 0x80000000u : x >= 2147483648.0f ? 0x7fffffffu : std::uint32_t(std::int32_t(x));
        break;
      }
      case 384 + 42: case 384 + 43: r = u(1.0f / fsrc(a, 0)); break;
      case 384 + 51: r = u(std::sqrt(fsrc(a, 0))); break;
      case 384 + 55: r = ~a; break;
      case 384 + 56: r = reverse_bits(a); break;
      // VOP2 (and their VOP3 forms)
      case 256 + 1: r = (carry_in >> l & 1) ? b : a; break;
      case 256 + 3: r = u(fsrc(a, 0) + fsrc(b, 1)); break;
      case 256 + 4: r = u(fsrc(a, 0) - fsrc(b, 1)); break;
      case 256 + 5: r = u(fsrc(b, 1) - fsrc(a, 0)); break;
      case 256 + 8: r = u(fsrc(a, 0) * fsrc(b, 1)); break;
      case 256 + 9: r = std::uint32_t((std::int64_t(std::int32_t(a << 8) >> 8) * (std::int32_t(b << 8) >> 8))); break;
      case 256 + 11: r = std::uint32_t(std::uint64_t(a & 0xffffff) * (b & 0xffffff)); break;
      case 256 + 12: r = std::uint32_t((std::uint64_t(a & 0xffffff) * (b & 0xffffff)) >> 32); break;
      case 256 + 15: r = u(std::fmin(fsrc(a, 0), fsrc(b, 1))); break;
      case 256 + 16: r = u(std::fmax(fsrc(a, 0), fsrc(b, 1))); break;
      case 256 + 17: r = std::uint32_t(std::min(i(a), i(b))); break;
      case 256 + 18: r = std::uint32_t(std::max(i(a), i(b))); break;
      case 256 + 19: r = std::min(a, b); break;
      case 256 + 20: r = std::max(a, b); break;
      case 256 + 24: r = b << (a & 31); break;
      case 256 + 25: r = b >> (a & 31); break;
      case 256 + 26: r = std::uint32_t(i(b) >> (a & 31)); break;
      case 256 + 27: r = a & b; break;
      case 256 + 28: r = a | b; break;
      case 256 + 29: r = a ^ b; break;
      case 256 + 32: {
        std::uint64_t s = std::uint64_t(a) + b + (carry_in >> l & 1);
        r = std::uint32_t(s);
        if (s >> 32) carry_out |= 1ull << l;
        break;
      }
      case 256 + 33: case 256 + 34: {
        std::uint32_t x = op == 256 + 33 ? a : b, y = op == 256 + 33 ? b : a;
        std::uint64_t s = std::uint64_t(x) - y - (carry_in >> l & 1);
        r = std::uint32_t(s);
        if (s >> 32) carry_out |= 1ull << l;
        break;
      }
      case 256 + 37: r = a + b; break;
      case 256 + 38: r = a - b; break;
      case 256 + 39: r = b - a; break;
      case 256 + 43: r = u(std::fma(fsrc(a, 0), fsrc(b, 1), f(vgpr(w, vdst, l)))); break;
      // VOP3 only
      case 523: r = (a & 0xffffff) * (b & 0xffffff) + c(); break;
      case 528: case 529: {
        std::uint32_t off = b & 31, width = c() & 31;
        if (width == 0) r = 0;
        else if (op == 528) r = (a >> off) & ((1u << width) - 1);
        else r = std::uint32_t(std::int32_t((a >> off) << (32 - width)) >> (32 - width));
        break;
      }
      case 530: r = (a & b) | (~a & c()); break;
      case 531: r = u(std::fma(fsrc(a, 0), fsrc(b, 1), fsrc(c(), 2))); break;
      case 534: r = std::uint32_t(((std::uint64_t(a) << 32) | b) >> (c() & 31)); break;
      case 539: r = std::min(std::min(a, b), c()); break;
      case 542: r = std::max(std::max(a, b), c()); break;
      case 576: r = a ^ b ^ c(); break;
      case 582: r = (a << (b & 31)) + c(); break;
      case 583: r = (a + b) << (c() & 31); break;
      case 597: r = a + b + c(); break;
      case 598: r = (a << (b & 31)) | c(); break;
      case 599: r = (a & b) | c(); break;
      case 600: r = a | b | c(); break;
      case 766: {  // v_mad_u64_u32: D64 = S0 * S1 + S2_64
        unsigned __int128 s = (unsigned __int128)(std::uint64_t(a) * b) + vsrc64(w, s2c, l, in);
        r = std::uint64_t(s);
        if (s >> 64) carry_out |= 1ull << l;
        break;
      }
      case 767: {
        __int128 s = (__int128)(std::int64_t(i(a)) * i(b)) + std::int64_t(vsrc64(w, s2c, l, in));
        r = std::uint64_t(s);
        break;
      }
      case 768: {
        std::uint64_t s = std::uint64_t(a) + b;
        r = std::uint32_t(s);
        if (s >> 32) carry_out |= 1ull << l;
        break;
      }
      case 769: case 770: {
        std::uint32_t x = op == 769 ? a : b, y = op == 769 ? b : a;
        r = x - y;
        if (y > x) carry_out |= 1ull << l;
        break;
      }
      case 796: r = u(std::ldexp(fsrc(a, 0), i(b))); break;
      case 812: r = a * b; break;
      case 813: r = std::uint32_t((std::uint64_t(a) * b) >> 32); break;
      case 814: r = std::uint32_t((std::int64_t(i(a)) * i(b)) >> 32); break;
      case 828: r = vsrc64(w, s1c, l, in) << (a & 63); break;
      case 829: r = vsrc64(w, s1c, l, in) >> (a & 63); break;
      case 830: r = std::uint64_t(std::int64_t(vsrc64(w, s1c, l, in)) >> (a & 63)); break;
      default: fail(fmt::format("{} is decoded but not run", in.name));
    }
    out[std::size_t(l)] = r;
  }
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    vgpr(w, vdst, l) = std::uint32_t(out[std::size_t(l)]);
    if (wide_dst) vgpr(w, vdst + 1, l) = std::uint32_t(out[std::size_t(l)] >> 32);
  }
  // Carries: VOP3B writes its sdst; the e32 carry forms write VCC.
  bool carries = op == 766 || op == 768 || op == 769 || op == 770 || (op >= 288 && op <= 290);
  if (carries) swrite(w, vop3 ? sdst : VCC_LO, std::uint32_t(carry_out));  // wave32: one SGPR
}

void Runner::vopd(Wave& w, const Inst& in) {
  std::uint32_t sx0 = in.w0 & 0x1ff, vx1 = VGPR0 + ((in.w0 >> 9) & 0xff);
  std::uint32_t sy0 = in.w1 & 0x1ff, vy1 = VGPR0 + ((in.w1 >> 9) & 0xff);
  std::uint32_t dx = in.w1 >> 24, dy = (((in.w1 >> 17) & 0x7f) << 1) | ((dx & 1) ^ 1);
  std::uint32_t lanes = std::uint32_t(w.exec);
  std::uint64_t vcc = w.s[VCC_LO];
  auto one = [&](std::uint32_t op, std::uint32_t s0, std::uint32_t s1, std::uint32_t d, int l) -> std::uint32_t {
    std::uint32_t a = vsrc(w, s0, l, in), b = vsrc(w, s1, l, in), k = in.literal.value_or(0);
    switch (op) {
      case 0: return u(std::fma(f(a), f(b), f(vgpr(w, d, l))));
      case 1: return u(std::fma(f(a), f(b), f(k)));  // fmaak: S0 * S1 + K
      case 2: return u(std::fma(f(a), f(k), f(b)));  // fmamk: S0 * K + S1
      case 3: return u(f(a) * f(b));
      case 4: return u(f(a) + f(b));
      case 5: return u(f(a) - f(b));
      case 6: return u(f(b) - f(a));
      case 8: return a;
      case 9: return (vcc >> l & 1) ? b : a;
      case 10: return u(std::fmax(f(a), f(b)));
      case 11: return u(std::fmin(f(a), f(b)));
      case 16: return a + b;
      case 17: return b << (a & 31);
      case 18: return a & b;
    }
    fail(fmt::format("v_dual opcode {} is decoded but not run", op));
  };
  std::array<std::uint32_t, kLanes> x{}, y{};
  for (int l = 0; l < kLanes; ++l)
    if (lanes >> l & 1) x[std::size_t(l)] = one(in.op, sx0, vx1, dx, l), y[std::size_t(l)] = one(in.opy, sy0, vy1, dy, l);
  for (int l = 0; l < kLanes; ++l)
    if (lanes >> l & 1) vgpr(w, dx, l) = x[std::size_t(l)], vgpr(w, dy, l) = y[std::size_t(l)];
}

// ---- Memory.

void Runner::ds(Wave& w, Group& g, const Inst& in) {
  std::uint32_t off0 = in.w0 & 0xff, off1 = (in.w0 >> 8) & 0xff, offset = in.w0 & 0xffff;
  if ((in.w0 >> 17) & 1) fail(fmt::format("{} on GDS is not simulated", in.name));
  std::uint32_t addr = in.w1 & 0xff, d0 = (in.w1 >> 8) & 0xff, d1 = (in.w1 >> 16) & 0xff, vdst = in.w1 >> 24;
  std::uint32_t lanes = std::uint32_t(w.exec);
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    std::uint32_t a = vgpr(w, addr, l);
    switch (in.op) {
      case 13: std::memcpy(lds(g, a + offset, 4, in), &vgpr(w, d0, l), 4); break;
      case 77: {
        std::uint32_t pair[2] = {vgpr(w, d0, l), vgpr(w, d0 + 1, l)};
        std::memcpy(lds(g, a + offset, 8, in), pair, 8);
        break;
      }
      case 14:
        std::memcpy(lds(g, a + off0 * 4, 4, in), &vgpr(w, d0, l), 4);
        std::memcpy(lds(g, a + off1 * 4, 4, in), &vgpr(w, d1, l), 4);
        break;
      case 54: std::memcpy(&vgpr(w, vdst, l), lds(g, a + offset, 4, in), 4); break;
      case 118: {
        std::uint32_t pair[2];
        std::memcpy(pair, lds(g, a + offset, 8, in), 8);
        vgpr(w, vdst, l) = pair[0], vgpr(w, vdst + 1, l) = pair[1];
        break;
      }
      case 55: {
        std::uint32_t x, y;
        std::memcpy(&x, lds(g, a + off0 * 4, 4, in), 4);
        std::memcpy(&y, lds(g, a + off1 * 4, 4, in), 4);
        vgpr(w, vdst, l) = x, vgpr(w, vdst + 1, l) = y;
        break;
      }
      case 0: case 32: {
        std::uint32_t old;
        auto* p = lds(g, a + offset, 4, in);
        std::memcpy(&old, p, 4);
        std::uint32_t n = old + vgpr(w, d0, l);
        std::memcpy(p, &n, 4);
        if (in.op == 32) vgpr(w, vdst, l) = old;
        break;
      }
      default: fail(fmt::format("{} is decoded but not run", in.name));
    }
  }
}

void Runner::flat(Wave& w, const Inst& in) {
  std::uint32_t seg = (in.w0 >> 16) & 3;
  std::int32_t offset = std::int32_t(in.w0 << 19) >> 19;  // 13 bits, signed
  if (seg == 0 && offset < 0) fail(fmt::format("{} with a negative offset on FLAT", in.name));
  bool glc = (in.w0 >> 14) & 1;
  std::uint32_t addr = in.w1 & 0xff, data = (in.w1 >> 8) & 0xff, saddr = (in.w1 >> 16) & 0x7f, vdst = in.w1 >> 24;
  bool scalar_base = seg == 2 && saddr != NULL_REG && saddr != 0x7F;
  std::uint32_t lanes = std::uint32_t(w.exec);
  std::uint32_t op = in.op;
  bool store = op >= 24 && op <= 29;
  std::uint32_t bytes = op == 16 || op == 17 || op == 24 ? 1 : op == 18 || op == 19 || op == 25 ? 2
                       : op == 21 || op == 27 ? 8 : op == 22 || op == 28 ? 12 : op == 23 || op == 29 ? 16 : 4;
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    std::uint64_t address = scalar_base ? sread64(w, saddr, in) + vgpr(w, addr, l)
                                        : std::uint64_t(vgpr(w, addr + 1, l)) << 32 | vgpr(w, addr, l);
    address += std::int64_t(offset);
    if (op == 53) {  // atomic add, returning the old value with glc
      auto* p = reinterpret_cast<std::uint32_t*>(memory(address, 4, true, in));
      std::uint32_t old = __atomic_fetch_add(p, vgpr(w, data, l), __ATOMIC_SEQ_CST);
      if (glc) vgpr(w, vdst, l) = old;
      continue;
    }
    auto* p = memory(address, bytes, store, in);
    if (store) {
      for (std::uint32_t k = 0; k < bytes; k += 4) {
        std::uint32_t v = vgpr(w, data + k / 4, l);
        std::memcpy(p + k, &v, std::min<std::uint32_t>(4, bytes - k));
      }
    } else {  // the signed byte and short loads are opcodes 17 and 19
      load_lane_bytes([&](std::uint32_t k) -> std::uint32_t& { return vgpr(w, vdst + k, l); }, p, bytes,
                      op == 17 || op == 19);
    }
  }
}

// ---- Waves and groups.

void Runner::step(Wave& w, Group& g) {
  std::uint32_t words[3];
  auto* p = mem_.at(w.pc, 4, false);
  if (!p) throw Fault{fmt::format("page fault at {:#x} (read) fetching an instruction", w.pc), true, w.pc, false};
  std::size_t available = 1;
  std::memcpy(&words[0], p, 4);
  for (std::size_t k = 1; k < 3; ++k) {
    auto* q = mem_.at(w.pc + 4 * k, 4, false);
    if (!q) break;
    std::memcpy(&words[k], q, 4), available = k + 1;
  }
  auto decoded = decode(words, available);
  if (auto* bad = std::get_if<DecodeError>(&decoded)) fail(fmt::format("{} at {:#x}", bad->why, w.pc));
  const Inst& in = std::get<Inst>(decoded);
  ++count_;
  try {
    switch (in.family) {
      case Family::SOPP:
        if (in.op == 31) fail("s_code_end reached: the wave ran past its code");
        if (!sopp(w, in)) return;
        return;  // sopp moved the pc
      case Family::SOP1:
        if (in.op == 72 || in.op == 73) {  // s_setpc_b64, s_swappc_b64: jumps
          std::uint64_t to = sread64(w, in.w0 & 0xff, in);
          if (in.op == 73) swrite64(w, (in.w0 >> 16) & 0x7f, w.pc + 4);
          w.pc = to;
          return;
        }
        sop1(w, in);
        break;
      case Family::SOP2: sop2(w, in); break;
      case Family::SOPC: sopc(w, in); break;
      case Family::SOPK: sopk(w, in); break;
      case Family::SMEM: smem(w, in); break;
      case Family::VOP1: case Family::VOP2: case Family::VOPC: case Family::VOP3: valu(w, in); break;
      case Family::VOPD: vopd(w, in); break;
      case Family::DS: ds(w, g, in); break;
      case Family::FLAT: flat(w, in); break;
      case Family::MUBUF: break;  // cache invalidations: memory is always coherent here
    }
  } catch (Fault& f) {
    if (!f.page) f.why = fmt::format("{} at {:#x}: {}", in.name, w.pc, f.why);
    throw;
  }
  w.pc += 4 * in.length;
}

void Runner::group(std::uint32_t gx, std::uint32_t gy, std::uint32_t gz) {
  Group g;
  std::uint32_t lds_size = ((d_.rsrc2 >> 15) & 0x1ff) * 512;
  g.lds.assign(lds_size, std::byte{0xAB});  // LDS is not initialized: make reads of it visible
  std::uint32_t tx = d_.threads[0], ty = d_.threads[1], tz = d_.threads[2];
  std::uint32_t threads = tx * ty * tz, waves = (threads + kLanes - 1) / kLanes;
  std::uint32_t vgprs = ((d_.rsrc1 & 0x3f) + 1) * 8;  // GRANULATED_WORKITEM_VGPR_COUNT, wave32
  std::uint32_t user = (d_.rsrc2 >> 1) & 0x1f;
  g.waves.resize(waves);
  for (std::uint32_t n = 0; n < waves; ++n) {
    Wave& w = g.waves[n];
    w.pc = d_.code;
    w.vgprs = vgprs;
    w.v.assign(std::size_t(vgprs) * kLanes, 0);
    for (std::uint32_t k = 0; k < user; ++k) w.s[k] = d_.user_data[k];
    std::uint32_t s = user;
    if (d_.rsrc2 >> 7 & 1) w.s[s++] = gx;  // TGID_X_EN
    if (d_.rsrc2 >> 8 & 1) w.s[s++] = gy;
    if (d_.rsrc2 >> 9 & 1) w.s[s++] = gz;
    if (d_.rsrc2 >> 10 & 1) w.s[s++] = waves;  // TG_SIZE_EN: the group's wave count (bits 0..5)
    if (d_.rsrc2 & 1) fail("a dispatch with SCRATCH_EN: private memory is not simulated");
    for (int l = 0; l < kLanes; ++l) {
      std::uint32_t t = n * kLanes + std::uint32_t(l);
      if (t >= threads) continue;
      w.exec |= 1ull << l;
      std::uint32_t x = t % tx, y = (t / tx) % ty, z = t / (tx * ty);
      w.v[std::size_t(l)] = x | y << 10 | z << 20;  // v0: packed work-item ids
    }
  }
  // Waves run one at a time, each to its end or to a barrier.
  run_waves(g.waves, [&](Wave& w) { step(w, g); }, [&] {
    if ((count_ & 0xfff) == 0 && stop_) fail("stopped");
  });
}

Outcome Runner::run() {
  Outcome o = run_grid(d_.groups, {}, stop_, [&] { if (!d_.wave32) fail("a wave64 dispatch"); },
                       [&](std::uint32_t x, std::uint32_t y, std::uint32_t z) { group(x, y, z); });
  o.instructions = count_;
  return o;
}

}  // namespace

Outcome run(const Dispatch& dispatch, Memory& memory, const std::atomic<bool>& stop) {
  return Runner(dispatch, memory, stop).run();
}

std::string mnemonic(const std::uint32_t* words, std::size_t available, std::size_t& length) {
  auto d = decode(words, available);
  if (auto* in = std::get_if<Inst>(&d)) {
    length = in->length;
    if (in->family == Family::FLAT) return fmt::format("{}_{}", ((in->w0 >> 16) & 3) == 2 ? "global" : "flat", in->name);
    if (in->family == Family::VOPD) return fmt::format("{} :: {}", in->name, in->name_y);
    return in->name;
  }
  length = 1;
  return "";
}

}  // namespace rig::sim::amd::gfx11
