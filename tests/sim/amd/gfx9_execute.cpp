// An interpreter of CDNA2/CDNA3 (gfx90a, gfx942) wave64 code (gfx9.hpp): the execution half.
//
// Instruction semantics are those of the MI200 and MI300 ISA guides. Each instruction is
// decoded (gfx9_decode.hpp) into an Inst (its family, opcode and fields), then run on one
// wave's state. Every instruction completes before the next starts, so the waits
// (s_waitcnt, s_nop) and cache write-backs and invalidations do nothing.
#include "gfx9_decode.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numbers>
#include <optional>
#include <variant>
#include <vector>

namespace rig::sim::amd::gfx9 {
namespace {


struct Wave {
  std::array<std::uint32_t, VCC_HI + 1> s{};  // s0..s101, flat_scratch, xnack_mask, vcc
  std::uint32_t m0 = 0;
  std::uint64_t exec = 0;
  bool scc = false;
  std::uint64_t pc = 0;
  std::vector<std::uint32_t> v;  // VGPRs: v[reg * 64 + lane]
  std::uint32_t vgprs = 0, sgprs = 0;
  std::vector<std::byte> priv;  // private memory without a scratch base: lane * private_bytes
  std::uint32_t slot = 0;       // its wave slot in the dispatch's scratch
  bool done = false, at_barrier = false;
};

struct Group {
  std::vector<std::byte> lds;
  std::vector<Wave> waves;
};

double df(std::uint64_t x) { return std::bit_cast<double>(x); }
std::uint64_t du(double x) { return std::bit_cast<std::uint64_t>(x); }
std::uint32_t sext24(std::uint32_t x) { return std::uint32_t(std::int32_t(x << 8) >> 8); }

// IEEE half precision (f16) to and from wider floats, rounding to nearest even.
float from_half(std::uint32_t h) {
  int exponent = int((h >> 10) & 31), mantissa = int(h & 1023);
  float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  if (exponent == 0) return sign * std::ldexp(float(mantissa), -24);
  return sign * std::ldexp(float(mantissa | 1024), exponent - 25);
}
std::uint32_t to_half(double x) {
  std::uint32_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (std::isnan(x)) return sign | 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;  // halfway above the largest half (65504) and up: infinity
  if (a < std::ldexp(1.0, -14)) return sign | std::uint32_t(std::nearbyint(a * 16777216.0));  // subnormal: units of 2^-24
  int e;
  double q = std::nearbyint(std::frexp(a, &e) * 2048.0);  // 11 significant bits
  if (q == 2048.0) q = 1024.0, ++e;
  return sign | std::uint32_t(e + 14) << 10 | std::uint32_t(q - 1024.0);
}

// The f16 nearest a * b + c, rounded once (to nearest even), for f16 or f32 operands: their
// product has at most 48 significant bits and lies within double's exponents, so it is exact in
// double; the sum is s + e exactly (Knuth's two-sum), and rounding s to odd (to its neighbour
// towards e when e is not zero and s's last bit is even) keeps the information the one rounding
// to f16 needs, double's 53 bits being more than f16's 11 plus 2 (Boldo and Melquiond, "When
// double rounding is odd").
std::uint32_t fma_to_half(double a, double b, double c) {
  double p = a * b, s = p + c;
  if (!std::isfinite(s)) return to_half(s);
  double p_part = s - c, c_part = s - p_part, e = (p - p_part) + (c - c_part);
  if (e != 0 && !(std::bit_cast<std::uint64_t>(s) & 1))
    s = std::nextafter(s, e > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity());
  return to_half(s);
}

// v_sin_f32 and v_cos_f32 take revolutions: sin(2 pi x) and cos(2 pi x). The MI200 ISA guide
// (as the Vega one) gives the valid range as [-256, +256] and an input outside it (infinities
// included) 0.0 for the sine and 1.0 for the cosine; NaN gives NaN. The hardware approximates
// within the range; here the result is the f32 nearest the double computation of the reduced
// argument: x less its nearest quarter n / 4 (exact for |x| <= 256) is within 1/8 of a turn,
// and the quarter picks sin or cos and the sign, so that whole quarters give 0 and 1 exactly
// (a zero sine has x's sign, a zero cosine is +0, as IEEE 754's sinPi and cosPi).
constexpr float kTrigRange = 256.0f;  // MI200 ISA, V_SIN_F32 / V_COS_F32
float revolutions(float x, bool cosine) {
  if (std::isnan(x)) return x;
  if (std::fabs(x) > kTrigRange) return cosine ? 1.0f : 0.0f;
  double quarters = std::nearbyint(double(x) * 4), y = 2 * std::numbers::pi * (double(x) - quarters / 4);
  int quadrant = int(std::int64_t(quarters) & 3) + (cosine ? 1 : 0);
  double r = quadrant % 2 ? std::cos(y) : std::sin(y);
  if (quadrant % 4 >= 2) r = -r;
  if (r == 0) return cosine ? 0.0f : std::copysign(0.0f, x);
  return float(r);
}

// Float to integer as the ISA converts: NaN gives 0, out-of-range values the nearest bound.
template <class Int>
Int to_int(double x) {
  if (std::isnan(x)) return 0;
  x = std::trunc(x);
  if (x <= double(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  if (x >= double(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return Int(x);
}

// The float compares' 16 conditions, in opcode order.
template <class F>
bool compare_float(std::uint32_t c, F a, F b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  switch (c) {
    case 0: return false;
    case 1: return a < b;
    case 2: return a == b;
    case 3: return a <= b;
    case 4: return a > b;
    case 5: return a < b || a > b;
    case 6: return a >= b;
    case 7: return !unordered;
    case 8: return unordered;
    case 9: return !(a >= b);
    case 10: return !(a < b || a > b);
    case 11: return !(a > b);
    case 12: return !(a <= b);
    case 13: return !(a == b);
    case 14: return !(a < b);
    default: return true;
  }
}

// The integer compares' 8 conditions, in opcode order.
template <class T>
bool compare_int(std::uint32_t c, T a, T b) {
  switch (c) {
    case 0: return false;
    case 1: return a < b;
    case 2: return a == b;
    case 3: return a <= b;
    case 4: return a > b;
    case 5: return a != b;
    case 6: return a >= b;
    default: return true;
  }
}

// Which lane each lane reads under a DPP control (dpp_ctrl of the MI200/MI300 guides), or -1
// for none.
int dpp_source(std::uint32_t ctrl, int lane) {
  int row = lane & ~15, in_row = lane & 15;
  if (ctrl <= 0xFF) return (lane & ~3) + int((ctrl >> (2 * (lane & 3))) & 3);  // quad_perm
  if (ctrl >= 0x101 && ctrl <= 0x10F) {  // row_shl
    int n = int(ctrl & 15);
    return in_row + n < 16 ? lane + n : -1;
  }
  if (ctrl >= 0x111 && ctrl <= 0x11F) {  // row_shr
    int n = int(ctrl & 15);
    return in_row >= n ? lane - n : -1;
  }
  if (ctrl >= 0x121 && ctrl <= 0x12F) return row + ((in_row - int(ctrl & 15)) & 15);  // row_ror
  switch (ctrl) {
    case 0x130: return lane + 1 < kLanes ? lane + 1 : -1;  // wave_shl:1
    case 0x134: return (lane + 1) % kLanes;                 // wave_rol:1
    case 0x138: return lane >= 1 ? lane - 1 : -1;           // wave_shr:1
    case 0x13C: return (lane + kLanes - 1) % kLanes;        // wave_ror:1
    case 0x140: return row + 15 - in_row;                   // row_mirror
    case 0x141: return (lane & ~7) + 7 - (lane & 7);        // row_half_mirror
    case 0x142: return row >= 16 ? row - 1 : -1;            // row_bcast:15: the last lane of the row before
    case 0x143: return lane >= 32 ? 31 : -1;                // row_bcast:31: lane 31 to rows 2 and 3
  }
  return -2;  // not a control the guides define
}

class Runner {
 public:
  Runner(const Dispatch& d, Memory& m, const std::atomic<bool>& stop) : d_(d), mem_(m), stop_(stop) {}
  Outcome run();

 private:
  void group(std::uint32_t gx, std::uint32_t gy, std::uint32_t gz);
  void step(Wave& w, Group& g);
  [[noreturn]] void fail(std::string why) const { throw Fault{std::move(why)}; }

  std::uint32_t sgpr_read(const Wave& w, std::uint32_t c) const {
    if (c < kSgprs && c >= w.sgprs) fail(fmt::format("SGPR s{} outside the {} the dispatch allocated", c, w.sgprs));
    return w.s[c];
  }
  void sgpr_check(const Wave& w, std::uint32_t c) const {
    if (c < kSgprs && c >= w.sgprs) fail(fmt::format("SGPR s{} outside the {} the dispatch allocated", c, w.sgprs));
  }
  // Scalar operands (`wide_float`: the operand is an f64, so float constants are doubles and a
  // literal is the upper half).
  std::uint32_t sread(const Wave& w, std::uint32_t code, const Inst& in) const;
  std::uint64_t sread64(const Wave& w, std::uint32_t code, const Inst& in, bool wide_float = false) const;
  void swrite(Wave& w, std::uint32_t code, std::uint32_t value);
  void swrite64(Wave& w, std::uint32_t code, std::uint64_t value);
  // Vector operands, per lane: a 9-bit source (SGPR, constant, literal or VGPR).
  std::uint32_t vsrc(const Wave& w, std::uint32_t code, int lane, const Inst& in) const {
    return code >= VGPR0 ? vgpr(w, code - VGPR0, lane) : sread(w, code, in);
  }
  std::uint64_t vsrc64(const Wave& w, std::uint32_t code, int lane, const Inst& in, bool wide_float) const {
    if (code >= VGPR0) return std::uint64_t(vgpr(w, code - VGPR0 + 1, lane)) << 32 | vgpr(w, code - VGPR0, lane);
    return sread64(w, code, in, wide_float);
  }
  std::uint32_t& vgpr(Wave& w, std::uint32_t reg, int lane) {
    if (reg >= w.vgprs) fail(fmt::format("VGPR v{} outside the {} the dispatch allocated", reg, w.vgprs));
    return w.v[std::size_t(reg) * kLanes + std::size_t(lane)];
  }
  std::uint32_t vgpr(const Wave& w, std::uint32_t reg, int lane) const {
    if (reg >= w.vgprs) fail(fmt::format("VGPR v{} outside the {} the dispatch allocated", reg, w.vgprs));
    return w.v[std::size_t(reg) * kLanes + std::size_t(lane)];
  }

  void sop1(Wave& w, const Inst& in);
  void sop2(Wave& w, const Inst& in);
  void sopc(Wave& w, const Inst& in);
  void sopk(Wave& w, const Inst& in);
  void sopp(Wave& w, const Inst& in);
  void smem(Wave& w, const Inst& in);
  void valu(Wave& w, const Inst& in);
  void ds(Wave& w, Group& g, const Inst& in);
  void flat(Wave& w, Group& g, const Inst& in);
  void mubuf(Wave& w, const Inst& in);
  // A load's `bytes` at `p` into lane l's v[vdst...]: under a dword zero-extended, or
  // sign-extended for opcodes 17 and 19, the signed byte and short loads FLAT and MUBUF
  // number alike.
  void load_lane(Wave& w, std::uint32_t vdst, int l, const std::byte* p, std::uint32_t bytes, std::uint32_t op);
  // VOP3P: its fields, refusing clamp and constant operands among the first `sources`; the
  // packed f32 operations on register pairs; the f16 and mixed-precision ones on registers.
  struct Vop3pFields {
    std::uint32_t vdst = 0, op_sel = 0, op_sel_hi = 0, neg_lo = 0, neg_hi = 0, code[3] = {};
  };
  void vop3p_fields(const Inst& in, int sources, Vop3pFields& fields) const;
  void vop3p(Wave& w, const Inst& in);
  void vop3p_single(Wave& w, const Inst& in);

  std::byte* memory(std::uint64_t address, std::size_t n, bool write, const std::string& name) {
    auto* p = mem_.at(address, n, write);
    if (!p)
      throw Fault{fmt::format("page fault at {:#x} ({}) by {}", address, write ? "write" : "read", name), true, address,
                  write};
    return p;
  }
  std::byte* lds(Group& g, std::uint64_t address, std::size_t n, const std::string& name) {
    if (address + n > g.lds.size())
      fail(fmt::format("{} at LDS byte {:#x}, outside the {} bytes the dispatch allocated", name, address, g.lds.size()));
    return g.lds.data() + address;
  }
  std::byte* priv(Wave& w, int lane, std::uint64_t offset, std::size_t n, bool write, const std::string& name) {
    if (offset + n > d_.private_bytes)
      fail(fmt::format("{} at private byte {:#x} of lane {}, outside the {} bytes the dispatch allocated per work-item",
                       name, offset, lane, d_.private_bytes));
    const std::uint64_t at = std::uint64_t(lane) * d_.private_bytes + offset;
    if (d_.scratch_base) return memory(d_.scratch_base + std::uint64_t(w.slot) * kLanes * d_.private_bytes + at, n, write, name);
    return w.priv.data() + at;
  }

  const Dispatch& d_;
  Memory& mem_;
  const std::atomic<bool>& stop_;
  std::uint64_t count_ = 0;
};

constexpr float kInlineFloats[] = {0.5f, -0.5f, 1.0f, -1.0f, 2.0f, -2.0f, 4.0f, -4.0f};
constexpr std::uint32_t kInvTwoPi32 = 0x3e22f983;               // 1 / (2 pi) as an f32
constexpr std::uint64_t kInvTwoPi64 = 0x3fc45f306dc9c882ull;    // and as an f64
constexpr std::uint64_t kApertureBytes = 1ull << 32;

std::uint32_t Runner::sread(const Wave& w, std::uint32_t c, const Inst& in) const {
  if (c <= VCC_HI) return sgpr_read(w, c);
  if (c == M0) return w.m0;
  if (c == EXEC_LO) return std::uint32_t(w.exec);
  if (c == EXEC_HI) return std::uint32_t(w.exec >> 32);
  if (c >= 128 && c <= 192) return c - 128;
  if (c >= 193 && c <= 208) return std::uint32_t(-std::int32_t(c - 192));
  if (c >= 240 && c <= 247) return u(kInlineFloats[c - 240]);
  if (c == 248) return kInvTwoPi32;
  if (c == SRC_SHARED_BASE) return std::uint32_t(kSharedAperture >> 32);
  if (c == SRC_SHARED_LIMIT) return std::uint32_t((kSharedAperture + kApertureBytes - 1) >> 32);
  if (c == SRC_PRIVATE_BASE) return std::uint32_t(kPrivateAperture >> 32);
  if (c == SRC_PRIVATE_LIMIT) return std::uint32_t((kPrivateAperture + kApertureBytes - 1) >> 32);
  if (c == SRC_VCCZ) return (std::uint64_t(w.s[VCC_HI]) << 32 | w.s[VCC_LO]) == 0;
  if (c == SRC_EXECZ) return w.exec == 0;
  if (c == SRC_SCC) return w.scc;
  if (c == LITERAL && in.literal) return *in.literal;
  fail(fmt::format("{}: scalar operand {} is not simulated", in.name, c));
}

std::uint64_t Runner::sread64(const Wave& w, std::uint32_t c, const Inst& in, bool wide_float) const {
  if (c < kSgprs) {
    if (c + 1 >= kSgprs) fail(fmt::format("{}: SGPR pair s[{}:{}] past s101", in.name, c, c + 1));
    sgpr_check(w, c), sgpr_check(w, c + 1);
    return std::uint64_t(w.s[c + 1]) << 32 | w.s[c];
  }
  if (c == FLAT_SCRATCH_LO || c == XNACK_MASK_LO || c == VCC_LO) return std::uint64_t(w.s[c + 1]) << 32 | w.s[c];
  if (c == EXEC_LO) return w.exec;
  if (c >= SRC_SHARED_BASE && c <= SRC_PRIVATE_LIMIT) return std::uint64_t(sread(w, c, in)) << 32;
  if (wide_float && c >= 240 && c <= 247) return du(double(kInlineFloats[c - 240]));
  if (wide_float && c == 248) return kInvTwoPi64;
  if (wide_float && c == LITERAL) return std::uint64_t(sread(w, c, in)) << 32;
  std::uint32_t lo = sread(w, c, in);
  if (c >= 193 && c <= 208) return std::uint64_t(std::int64_t(std::int32_t(lo)));  // sign-extended
  return lo;
}

void Runner::swrite(Wave& w, std::uint32_t c, std::uint32_t value) {
  if (c <= VCC_HI) sgpr_check(w, c), w.s[c] = value;
  else if (c == M0) w.m0 = value;
  else if (c == EXEC_LO) w.exec = (w.exec & ~0xffffffffull) | value;
  else if (c == EXEC_HI) w.exec = (w.exec & 0xffffffffull) | std::uint64_t(value) << 32;
  else fail(fmt::format("a write to scalar destination {}", c));
}

void Runner::swrite64(Wave& w, std::uint32_t c, std::uint64_t value) {
  if (c < kSgprs && c + 1 >= kSgprs) fail(fmt::format("an SGPR pair s[{}:{}] past s101", c, c + 1));
  if (c < kSgprs || c == FLAT_SCRATCH_LO || c == XNACK_MASK_LO || c == VCC_LO) {
    sgpr_check(w, c), sgpr_check(w, c + 1);
    w.s[c] = std::uint32_t(value), w.s[c + 1] = std::uint32_t(value >> 32);
  } else if (c == EXEC_LO) {
    w.exec = value;
  } else {
    fail(fmt::format("a 64-bit write to scalar destination {}", c));
  }
}

// ---- Scalar ALU.

void Runner::sop1(Wave& w, const Inst& in) {
  std::uint32_t dst = (in.w0 >> 16) & 0x7f, src = in.w0 & 0xff;
  auto saveexec = [&](auto combine) {
    std::uint64_t s = sread64(w, src, in), e = w.exec, n = combine(s, e);
    swrite64(w, dst, e);
    w.exec = n, w.scc = n != 0;
  };
  switch (in.op) {
    case 0: swrite(w, dst, sread(w, src, in)); return;
    case 1: swrite64(w, dst, sread64(w, src, in)); return;
    case 4: {
      std::uint32_t r = ~sread(w, src, in);
      swrite(w, dst, r), w.scc = r != 0;
      return;
    }
    case 5: {
      std::uint64_t r = ~sread64(w, src, in);
      swrite64(w, dst, r), w.scc = r != 0;
      return;
    }
    case 8: swrite(w, dst, reverse_bits(sread(w, src, in))); return;
    case 12: case 13: {
      std::uint32_t r = in.op == 12 ? std::uint32_t(std::popcount(sread(w, src, in)))
                                    : std::uint32_t(std::popcount(sread64(w, src, in)));
      swrite(w, dst, r), w.scc = r != 0;
      return;
    }
    case 16: case 17: {  // s_ff1: the lowest set bit, or -1
      std::uint64_t x = in.op == 16 ? sread(w, src, in) : sread64(w, src, in);
      swrite(w, dst, x ? std::uint32_t(std::countr_zero(x)) : 0xffffffffu);
      return;
    }
    case 18: case 19: {  // s_flbit: the highest set bit counted from the top, or -1
      std::uint64_t x = in.op == 18 ? sread(w, src, in) : sread64(w, src, in);
      int width = in.op == 18 ? 32 : 64;
      swrite(w, dst, x ? std::uint32_t(std::countl_zero(x) - (64 - width)) : 0xffffffffu);
      return;
    }
    case 22: swrite(w, dst, std::uint32_t(std::int32_t(std::int8_t(sread(w, src, in))))); return;
    case 23: swrite(w, dst, std::uint32_t(std::int32_t(std::int16_t(sread(w, src, in))))); return;
    case 28: swrite64(w, dst, w.pc + 4); return;  // s_getpc_b64: the next instruction's address
    case 32: saveexec([](std::uint64_t s, std::uint64_t e) { return s & e; }); return;
    case 33: saveexec([](std::uint64_t s, std::uint64_t e) { return s | e; }); return;
    case 34: saveexec([](std::uint64_t s, std::uint64_t e) { return s ^ e; }); return;
    case 35: saveexec([](std::uint64_t s, std::uint64_t e) { return s & ~e; }); return;
    case 36: saveexec([](std::uint64_t s, std::uint64_t e) { return s | ~e; }); return;
    case 48: {
      auto x = i(sread(w, src, in));
      std::uint32_t r = x < 0 ? std::uint32_t(-std::int64_t(x)) : std::uint32_t(x);
      swrite(w, dst, r), w.scc = r != 0;
      return;
    }
  }
  fail(fmt::format("{} is decoded but not run", in.name));
}

void Runner::sop2(Wave& w, const Inst& in) {
  std::uint32_t dst = (in.w0 >> 16) & 0x7f, s0c = in.w0 & 0xff, s1c = (in.w0 >> 8) & 0xff;
  std::uint32_t op = in.op;
  bool wide = op == 11 || op == 13 || op == 15 || op == 17 || op == 19 || op == 21 || op == 29 || op == 31 ||
              op == 33 || op == 39 || op == 40;
  if (wide) {
    std::uint64_t a = sread64(w, s0c, in);
    bool shift = op == 29 || op == 31 || op == 33 || op == 39 || op == 40;
    std::uint64_t b = shift ? sread(w, s1c, in) : sread64(w, s1c, in);
    std::uint64_t r = 0;
    switch (op) {
      case 11: swrite64(w, dst, w.scc ? a : b); return;
      case 13: r = a & b; break;
      case 15: r = a | b; break;
      case 17: r = a ^ b; break;
      case 19: r = a & ~b; break;
      case 21: r = a | ~b; break;
      case 29: r = a << (b & 63); break;
      case 31: r = a >> (b & 63); break;
      case 33: r = std::uint64_t(std::int64_t(a) >> (b & 63)); break;
      case 39: {  // offset in b[5:0], width in b[22:16]
        std::uint32_t off = b & 63, width = (b >> 16) & 0x7f;
        r = width == 0 ? 0 : width >= 64 ? a >> off : (a >> off) & ((1ull << width) - 1);
        break;
      }
      case 40: {  // s_bfe_i64: the same, sign-extended from the field's top bit
        std::uint32_t off = b & 63, width = (b >> 16) & 0x7f;
        if (width == 0) r = 0;
        else if (width >= 64) r = std::uint64_t(std::int64_t(a) >> off);
        else r = std::uint64_t(std::int64_t((a >> off) << (64 - width)) >> (64 - width));
        break;
      }
    }
    swrite64(w, dst, r), w.scc = r != 0;
    return;
  }
  std::uint32_t a = sread(w, s0c, in), b = sread(w, s1c, in), r = 0;
  std::uint64_t wide_r;
  switch (op) {
    case 0: wide_r = std::uint64_t(a) + b, r = std::uint32_t(wide_r), w.scc = wide_r >> 32; break;
    case 1: r = a - b, w.scc = b > a; break;
    case 2: r = a + b, w.scc = ((~(a ^ b) & (a ^ r)) >> 31) & 1; break;
    case 3: r = a - b, w.scc = (((a ^ b) & (a ^ r)) >> 31) & 1; break;
    case 4: wide_r = std::uint64_t(a) + b + w.scc, r = std::uint32_t(wide_r), w.scc = wide_r >> 32; break;
    case 5: wide_r = std::uint64_t(a) - b - w.scc, r = std::uint32_t(wide_r), w.scc = (wide_r >> 32) != 0; break;
    case 6: w.scc = i(a) < i(b), r = w.scc ? a : b; break;
    case 7: w.scc = a < b, r = w.scc ? a : b; break;
    case 8: w.scc = i(a) > i(b), r = w.scc ? a : b; break;
    case 9: w.scc = a > b, r = w.scc ? a : b; break;
    case 10: r = w.scc ? a : b; break;
    case 12: r = a & b, w.scc = r != 0; break;
    case 14: r = a | b, w.scc = r != 0; break;
    case 16: r = a ^ b, w.scc = r != 0; break;
    case 18: r = a & ~b, w.scc = r != 0; break;
    case 20: r = a | ~b, w.scc = r != 0; break;
    case 28: r = a << (b & 31), w.scc = r != 0; break;
    case 30: r = a >> (b & 31), w.scc = r != 0; break;
    case 32: r = std::uint32_t(i(a) >> (b & 31)), w.scc = r != 0; break;
    case 36: r = a * b; break;
    case 37: case 38: {  // offset in b[4:0], width in b[22:16]
      std::uint32_t off = b & 31, width = (b >> 16) & 0x7f;
      if (width == 0) r = 0;
      else if (op == 37) r = width >= 32 ? a >> off : (a >> off) & ((1u << width) - 1);
      else r = width >= 32 ? std::uint32_t(i(a) >> off)
                           : std::uint32_t(std::int32_t(((a >> off) & ((1u << width) - 1)) << (32 - width)) >> (32 - width));
      w.scc = r != 0;
      break;
    }
    case 44: r = std::uint32_t((std::uint64_t(a) * b) >> 32); break;
    case 45: r = std::uint32_t((std::int64_t(i(a)) * i(b)) >> 32); break;
    case 46: case 47: case 48: case 49: {
      wide_r = (std::uint64_t(a) << (op - 45)) + b;
      r = std::uint32_t(wide_r), w.scc = wide_r >> 32;
      break;
    }
    case 50: r = (a & 0xffff) | (b << 16); break;
    default: fail(fmt::format("{} is decoded but not run", in.name));
  }
  swrite(w, dst, r);
}

// The scalar compares' order (eq, lg, gt, ge, lt, le) as compare_int's conditions.
constexpr std::uint32_t kScalarCond[] = {2, 5, 4, 6, 1, 3};

void Runner::sopc(Wave& w, const Inst& in) {
  std::uint32_t s0c = in.w0 & 0xff, s1c = (in.w0 >> 8) & 0xff;
  if (in.op == 18 || in.op == 19) {
    std::uint64_t a = sread64(w, s0c, in), b = sread64(w, s1c, in);
    w.scc = in.op == 18 ? a == b : a != b;
    return;
  }
  std::uint32_t a = sread(w, s0c, in), b = sread(w, s1c, in);
  if (in.op <= 5) w.scc = compare_int(kScalarCond[in.op], i(a), i(b));
  else if (in.op <= 11) w.scc = compare_int(kScalarCond[in.op - 6], a, b);
  else w.scc = ((a >> (b & 31)) & 1) == (in.op == 13 ? 1u : 0u);
}

void Runner::sopk(Wave& w, const Inst& in) {
  std::uint32_t dst = (in.w0 >> 16) & 0x7f;
  std::uint32_t k = std::uint32_t(std::int32_t(std::int16_t(in.w0 & 0xffff))), ku = in.w0 & 0xffff;
  switch (in.op) {
    case 0: swrite(w, dst, k); return;
    case 1: if (w.scc) swrite(w, dst, k); return;
    case 2: case 3: case 4: case 5: case 6: case 7: w.scc = compare_int(kScalarCond[in.op - 2], i(sread(w, dst, in)), i(k)); return;
    case 8: case 9: case 10: case 11: case 12: case 13: w.scc = compare_int(kScalarCond[in.op - 8], sread(w, dst, in), ku); return;
    case 14: {
      std::uint32_t a = sread(w, dst, in), r = a + k;
      w.scc = ((~(a ^ k) & (a ^ r)) >> 31) & 1;
      swrite(w, dst, r);
      return;
    }
    case 15: swrite(w, dst, sread(w, dst, in) * k); return;
  }
  fail(fmt::format("{} is decoded but not run", in.name));
}

void Runner::sopp(Wave& w, const Inst& in) {
  std::int64_t target = std::int64_t(w.pc) + 4 + std::int64_t(std::int16_t(in.w0 & 0xffff)) * 4;
  std::uint64_t vcc = std::uint64_t(w.s[VCC_HI]) << 32 | w.s[VCC_LO];
  bool taken = false;
  switch (in.op) {
    case 1: w.done = true; return;
    case 2: taken = true; break;
    case 4: taken = !w.scc; break;
    case 5: taken = w.scc; break;
    case 6: taken = vcc == 0; break;
    case 7: taken = vcc != 0; break;
    case 8: taken = w.exec == 0; break;
    case 9: taken = w.exec != 0; break;
    case 10: w.at_barrier = true; break;
    default: break;  // s_nop, s_waitcnt, s_sleep, s_setprio
  }
  w.pc = taken ? std::uint64_t(target) : w.pc + 4;
}

void Runner::smem(Wave& w, const Inst& in) {
  std::uint32_t sdata = (in.w0 >> 6) & 0x7f, sbase = (in.w0 & 0x3f) * 2;
  bool imm = (in.w0 >> 17) & 1, soe = (in.w0 >> 14) & 1;
  std::uint64_t address = sread64(w, sbase, in);
  if (imm) address += std::uint64_t(std::int64_t(std::int32_t(in.w1 << 11) >> 11));  // 21 bits, signed
  if (soe) address += sread(w, in.w1 >> 25, in);
  if (!imm && !soe) address += sread(w, in.w1 & 0x7f, in);
  address &= ~3ull;
  std::uint32_t n = 1u << in.op;  // dwords: 1, 2, 4, 8, 16
  if (sdata + n > kSgprs) fail(fmt::format("{} into s{}..s{}, past s101", in.name, sdata, sdata + n - 1));
  sgpr_check(w, sdata), sgpr_check(w, sdata + n - 1);
  auto* p = memory(address, n * 4, false, in.name);
  std::memcpy(&w.s[sdata], p, n * 4);
}

// ---- Vector ALU.

// Operand shapes, in VOP3 numbering.
bool wide_destination(std::uint32_t op) {
  switch (op) {
    case kVop3Vop1 + 4: case kVop3Vop1 + 16: case kVop3Vop1 + 22: case kVop3Vop1 + 23: case kVop3Vop1 + 24:
    case kVop3Vop1 + 25: case kVop3Vop1 + 26: case kVop3Vop1 + 37: case kVop3Vop1 + 38: case kVop3Vop1 + 40:
    case kVop3Vop1 + 49: case kVop3Vop1 + 50: case kVop3Vop1 + 56: case kVop3Vop2 + 4: case 460: case 479: case 481:
    case 483: case 488: case 489: case 520:
    case 640: case 641: case 642: case 643: case 644: case 655: case 656: case 657:
      return true;
  }
  return false;
}
// Whether source 0 is 64 bits wide (DPP moves only 32-bit sources here).
bool wide_source0(std::uint32_t op) {
  if (op == 18 || op == 19) return true;   // f64 classes
  if (op >= 96 && op <= 127) return true;   // f64 compares
  if (op >= 224 && op <= 255) return true;  // 64-bit integer compares
  switch (op) {
    case kVop3Vop1 + 3: case kVop3Vop1 + 15: case kVop3Vop1 + 21: case kVop3Vop1 + 23: case kVop3Vop1 + 24:
    case kVop3Vop1 + 25: case kVop3Vop1 + 26: case kVop3Vop1 + 37: case kVop3Vop1 + 38: case kVop3Vop1 + 40:
    case kVop3Vop1 + 48: case kVop3Vop1 + 49: case kVop3Vop1 + 50: case kVop3Vop1 + 56: case kVop3Vop2 + 4: case 460:
    case 479: case 481: case 483: case 520: case 640: case 641:
    case 642: case 643: case 644:
      return true;
  }
  return false;
}
// Float operations, which take |abs| and -neg modifiers.
bool floating(std::uint32_t op) {
  if ((op >= 16 && op <= 19) || (op >= 32 && op <= 127) || (op >= 478 && op <= 483)) return true;
  switch (op) {
    case kVop3Vop2 + 1: case kVop3Vop2 + 2: case kVop3Vop2 + 3: case kVop3Vop2 + 4: case kVop3Vop2 + 5:
    case kVop3Vop2 + 10: case kVop3Vop2 + 11: case kVop3Vop2 + 22: case kVop3Vop2 + 59: case 449:
    case kVop3Vop1 + 3: case kVop3Vop1 + 7: case kVop3Vop1 + 8: case kVop3Vop1 + 15: case kVop3Vop1 + 16:
    case kVop3Vop1 + 21: case kVop3Vop1 + 50: case kVop3Vop1 + 10: case kVop3Vop1 + 11: case kVop3Vop1 + 59:
    case kVop3Vop1 + 48: case kVop3Vop1 + 49: case kVop3Vop1 + 51: case kVop3Vop1 + 52: case kVop3Vop1 + 62:
    case kVop3Vop2 + 31: case kVop3Vop2 + 32: case kVop3Vop2 + 34: case kVop3Vop2 + 45: case kVop3Vop2 + 46:
    case 518: case 672:
    case 459: case 460: case 464: case 467: case 470: case 640: case 641: case 642: case 643: case 644: case 648:
      return true;
  }
  return op >= kVop3Vop1 + 23 && op <= kVop3Vop1 + 42;
}
// VOP3B: bits 14:8 name a scalar destination (a carry out) instead of |abs| and op_sel.
bool scalar_destination(std::uint32_t op) {
  return (op >= kVop3Vop2 + 25 && op <= kVop3Vop2 + 30) || op == 480 || op == 481 || op == 488 || op == 489;
}
// Whether a compare writes EXEC as well (v_cmpx).
bool writes_exec(std::uint32_t op) {
  return op == 17 || op == 19 || op == 21 || (op >= 48 && op <= 63) || (op >= 80 && op <= 95) || (op >= 112 && op <= 127) || (op >= 176 && op <= 191) || (op >= 208 && op <= 223) ||
         op >= 240;
}

// v_cmp_class: whether x is in one of the classes the mask's bits name (0 signaling NaN,
// 1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf).
template <class F>
bool float_class(F x, std::uint32_t mask);
// The same on an f16's bits (no modifiers): its class from exponent and mantissa.
bool half_class(std::uint32_t h, std::uint32_t mask) {
  bool negative = h & 0x8000;
  std::uint32_t exponent = (h >> 10) & 31, mantissa = h & 1023;
  int k = exponent == 31 ? (mantissa ? ((mantissa & 0x200) ? 1 : 0) : negative ? 2 : 9)
          : exponent ? (negative ? 3 : 8) : mantissa ? (negative ? 4 : 7) : (negative ? 5 : 6);
  return (mask >> k) & 1;
}
template <class F>
bool float_class(F x, std::uint32_t mask) {
  int k;
  bool negative = std::signbit(x);
  switch (std::fpclassify(x)) {
    case FP_NAN: {
      using U = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
      U quiet_bit = U(1) << (std::numeric_limits<F>::digits - 2);
      k = (std::bit_cast<U>(x) & quiet_bit) ? 1 : 0;
      break;
    }
    case FP_INFINITE: k = negative ? 2 : 9; break;
    case FP_NORMAL: k = negative ? 3 : 8; break;
    case FP_SUBNORMAL: k = negative ? 4 : 7; break;
    default: k = negative ? 5 : 6; break;
  }
  return (mask >> k) & 1;
}

// The division helpers of the ISA's division sequence (div_scale, div_fmas, div_fixup). With
// numerator and denominator normal and their exponents close, no scaling is needed: div_scale
// passes S0 through with VCC clear and div_fmas is an fma; cases that would scale are refused.
// div_fixup gives the IEEE quotient of S2 / S1 for NaN, infinite and zero operands and S0,
// with the quotient's sign, otherwise.
template <class F>
bool needs_scaling(F denominator, F numerator) {
  int de = std::ilogb(denominator), ne = std::ilogb(numerator);
  constexpr int kFar = sizeof(F) == 4 ? 96 : 768;  // the ISA's thresholds; kTiny at (or just above) its
  constexpr int kTiny = std::numeric_limits<F>::digits - 1 + std::numeric_limits<F>::min_exponent - 1;  // biased 23 / 53
  return !std::isnormal(denominator) || !std::isnormal(numerator) || ne - de >= kFar || de - ne >= kFar ||
         ne <= kTiny;
}
template <class F>
F divide_fixup(F quotient, F denominator, F numerator) {
  if (std::isnan(denominator) || std::isnan(numerator) || std::isinf(denominator) || std::isinf(numerator) ||
      denominator == 0 || numerator == 0)
    return numerator / denominator;
  bool negative = std::signbit(denominator) != std::signbit(numerator);
  return negative ? -std::fabs(quotient) : std::fabs(quotient);
}

template <class F>
F median3(F a, F b, F c) {
  return std::max(std::min(a, b), std::min(std::max(a, b), c));
}

void Runner::valu(Wave& w, const Inst& in) {
  const bool vop3 = in.family == Family::VOP3;
  std::uint32_t op = in.op, code[3] = {0, 0, 0}, vdst = 0, sdst = VCC_LO;
  std::uint32_t abs = 0, neg = 0;
  if (vop3) {
    code[0] = in.w1 & 0x1ff, code[1] = (in.w1 >> 9) & 0x1ff, code[2] = (in.w1 >> 18) & 0x1ff;
    vdst = in.w0 & 0xff, neg = in.w1 >> 29;
    if (scalar_destination(op)) sdst = (in.w0 >> 8) & 0x7f;
    else abs = (in.w0 >> 8) & 7;
    if (!floating(op) && (abs || neg)) fail(fmt::format("{} with |abs| or -neg on an integer operation is not simulated", in.name));
    if (!scalar_destination(op) && ((in.w0 >> 11) & 0xf)) fail(fmt::format("{} with op_sel is not simulated", in.name));
    if ((in.w1 >> 27) & 3) fail(fmt::format("{} with an output modifier is not simulated", in.name));
    if ((in.w0 >> 15) & 1) fail(fmt::format("{} with clamp is not simulated", in.name));
    if (op < kVop3Vop2) sdst = vdst;  // a compare's SGPR pair
  } else if (in.family == Family::VOP1) {
    code[0] = in.w0 & 0x1ff, vdst = (in.w0 >> 17) & 0xff, op += kVop3Vop1;
  } else if (in.family == Family::VOP2) {
    code[0] = in.w0 & 0x1ff, code[1] = VGPR0 + ((in.w0 >> 9) & 0xff), vdst = (in.w0 >> 17) & 0xff, op += kVop3Vop2;
  } else {  // VOPC e32: the result goes to VCC (and EXEC for v_cmpx)
    code[0] = in.w0 & 0x1ff, code[1] = VGPR0 + ((in.w0 >> 9) & 0xff);
  }

  // The lanes that run, and with DPP the value each reads as source 0.
  std::uint64_t lanes = w.exec;
  std::array<std::uint32_t, kLanes> moved{};
  if (in.dpp) {
    if (wide_source0(op)) fail(fmt::format("{} with DPP on a 64-bit operand is not simulated", in.name));
    std::uint32_t ctrl = (in.w1 >> 8) & 0x1ff, row_mask = in.w1 >> 28, bank_mask = (in.w1 >> 24) & 0xf;
    bool bound_zero = (in.w1 >> 19) & 1;
    code[0] = VGPR0 + (in.w1 & 0xff);
    abs = ((in.w1 >> 21) & 1) | ((in.w1 >> 23) & 1) << 1, neg = ((in.w1 >> 20) & 1) | ((in.w1 >> 22) & 1) << 1;
    if (!floating(op) && (abs || neg)) fail(fmt::format("{} with |abs| or -neg on an integer operation is not simulated", in.name));
    std::uint64_t written = 0;
    for (int l = 0; l < kLanes; ++l) {
      if (!(lanes >> l & 1) || !(row_mask >> (l / 16) & 1) || !(bank_mask >> ((l >> 2) & 3) & 1)) continue;
      int from = dpp_source(ctrl, l);
      if (from == -2) fail(fmt::format("{}: DPP control {:#x} is not one the ISA defines", in.name, ctrl));
      if (from < 0 || !(w.exec >> from & 1)) {
        if (!bound_zero) continue;  // the lane keeps its destination
        moved[std::size_t(l)] = 0;
      } else {
        moved[std::size_t(l)] = vgpr(w, code[0] - VGPR0, from);
      }
      written |= 1ull << l;
    }
    lanes = written;
  }
  // SDWA: each source is a byte, word or the dword of its register (sign-extended or not),
  // and the result lands in a byte, word or the dword of the destination.
  std::array<std::uint32_t, kLanes> picked1{};
  std::uint32_t dst_sel = kSelectDword, dst_unused = 0;
  if (in.sdwa) {
    if (wide_source0(op) || wide_destination(op)) fail(fmt::format("{} with SDWA on a 64-bit operand is not simulated", in.name));
    code[0] = (in.w1 & 0xff) + (((in.w1 >> 23) & 1) ? 0u : std::uint32_t(VGPR0));  // S0: an SGPR when set
    if (in.family != Family::VOP1)
      code[1] = ((in.w1 >> 31) & 1) ? ((in.w0 >> 9) & 0xff) : std::uint32_t(VGPR0) + ((in.w0 >> 9) & 0xff);
    abs = ((in.w1 >> 21) & 1) | ((in.w1 >> 29) & 1) << 1, neg = ((in.w1 >> 20) & 1) | ((in.w1 >> 28) & 1) << 1;
    if (!floating(op) && (abs || neg)) fail(fmt::format("{} with |abs| or -neg on an integer operation is not simulated", in.name));
    if (in.family == Family::VOPC) {
      if ((in.w1 >> 15) & 1) sdst = (in.w1 >> 8) & 0x7f;  // SD: an SGPR pair instead of VCC
    } else {
      dst_sel = (in.w1 >> 8) & 7, dst_unused = (in.w1 >> 11) & 3;
      if ((in.w1 >> 13) & 7) fail(fmt::format("{} with clamp or an output modifier is not simulated", in.name));
      if (dst_sel > kSelectDword || dst_unused > 2) fail(fmt::format("{}: SDWA destination select {} / unused {} is not one the ISA defines", in.name, dst_sel, dst_unused));
    }
    auto pick = [&](std::uint32_t x, std::uint32_t sel, bool sext) {
      if (sel > kSelectDword) fail(fmt::format("{}: SDWA source select {} is not one the ISA defines", in.name, sel));
      if (sel == kSelectDword) return x;
      std::uint32_t width = sel < 4 ? 8 : 16, shift = sel < 4 ? 8 * sel : 16 * (sel - 4);
      std::uint32_t v = (x >> shift) & ((1u << width) - 1);
      return sext ? std::uint32_t(std::int32_t(v << (32 - width)) >> (32 - width)) : v;
    };
    for (int l = 0; l < kLanes; ++l) {
      if (!(lanes >> l & 1)) continue;
      moved[std::size_t(l)] = pick(vsrc(w, code[0], l, in), (in.w1 >> 16) & 7, (in.w1 >> 19) & 1);
      if (in.family != Family::VOP1) picked1[std::size_t(l)] = pick(vsrc(w, code[1], l, in), (in.w1 >> 24) & 7, (in.w1 >> 27) & 1);
    }
  }
  const bool moved0 = in.dpp || in.sdwa, picked = in.sdwa && in.family != Family::VOP1;
  auto fmod32 = [&](std::uint32_t x, int k) {
    float v = f(x);
    if (abs >> k & 1) v = std::fabs(v);
    if (neg >> k & 1) v = -v;
    return v;
  };
  auto fmod16 = [&](std::uint32_t x, int k) { return fmod32(u(from_half(x & 0xffff)), k); };
  auto fmod64 = [&](std::uint64_t x, int k) {
    double v = df(x);
    if (abs >> k & 1) v = std::fabs(v);
    if (neg >> k & 1) v = -v;
    return v;
  };

  if (op < kVop3Vop2) {  // compares: VOPC, or VOPC in VOP3 (sdst names the SGPR pair)
    std::uint64_t result = 0;
    for (int l = 0; l < kLanes; ++l) {
      if (!(lanes >> l & 1)) continue;
      auto a32 = [&] { return moved0 ? moved[std::size_t(l)] : vsrc(w, code[0], l, in); };
      auto b32 = [&] { return picked ? picked1[std::size_t(l)] : vsrc(w, code[1], l, in); };
      bool r;
      if (op == 16 || op == 17) r = float_class(fmod32(a32(), 0), b32());
      else if (op == 20 || op == 21) r = half_class(a32(), b32());
      else if (op == 18 || op == 19) r = float_class(fmod64(vsrc64(w, code[0], l, in, true), 0), vsrc(w, code[1], l, in));
      else if (op >= 32 && op <= 63) r = compare_float(op & 15, fmod16(a32(), 0), fmod16(b32(), 1));
      else if (op >= 64 && op <= 95) r = compare_float(op & 15, fmod32(a32(), 0), fmod32(b32(), 1));
      else if (op >= 96 && op <= 127)
        r = compare_float(op & 15, fmod64(vsrc64(w, code[0], l, in, true), 0), fmod64(vsrc64(w, code[1], l, in, true), 1));
      else if (op >= 160 && op <= 191 && (op & 8) == 0)
        r = compare_int(op & 7, std::int16_t(a32()), std::int16_t(b32()));
      else if (op >= 160 && op <= 191) r = compare_int(op & 7, std::uint16_t(a32()), std::uint16_t(b32()));
      else if (op >= 192 && op <= 223 && (op & 8) == 0) r = compare_int(op & 7, i(a32()), i(b32()));
      else if (op >= 192 && op <= 223) r = compare_int(op & 7, a32(), b32());
      else if ((op & 8) == 0)
        r = compare_int(op & 7, std::int64_t(vsrc64(w, code[0], l, in, false)), std::int64_t(vsrc64(w, code[1], l, in, false)));
      else r = compare_int(op & 7, vsrc64(w, code[0], l, in, false), vsrc64(w, code[1], l, in, false));
      if (r) result |= 1ull << l;
    }
    swrite64(w, sdst, result);
    if (writes_exec(op)) w.exec = result;
    return;
  }

  // Single-lane forms first.
  if (op == kVop3Vop1 + 2) {  // v_readfirstlane_b32: the SGPR (the vdst field) gets the first active lane's value
    int lane = w.exec ? std::countr_zero(w.exec) : 0;
    swrite(w, vdst, moved0 ? moved[std::size_t(lane)] : vsrc(w, code[0], lane, in));
    return;
  }
  if (op == 649) {  // v_readlane_b32
    swrite(w, vdst, vsrc(w, code[0], int(sread(w, code[1], in) & 63), in));
    return;
  }
  if (op == 650) {  // v_writelane_b32
    vgpr(w, vdst, int(sread(w, code[1], in) & 63)) = sread(w, code[0], in);
    return;
  }

  std::uint64_t carry_in = 0, carry_out = 0;
  bool reads_carry = op == kVop3Vop2 + 0 || (op >= kVop3Vop2 + 28 && op <= kVop3Vop2 + 30);
  if (reads_carry) carry_in = vop3 ? sread64(w, code[2], in) : std::uint64_t(w.s[VCC_HI]) << 32 | w.s[VCC_LO];
  const bool wide = wide_destination(op);
  // Read every lane's operands before writing (the destination may be a source).
  std::array<std::uint64_t, kLanes> out{};
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    auto a = [&] { return moved0 ? moved[std::size_t(l)] : vsrc(w, code[0], l, in); };
    auto b = [&] { return picked ? picked1[std::size_t(l)] : vsrc(w, code[1], l, in); };
    auto c = [&] { return vsrc(w, code[2], l, in); };
    auto a64 = [&](bool fl) { return vsrc64(w, code[0], l, in, fl); };
    auto b64 = [&](bool fl) { return vsrc64(w, code[1], l, in, fl); };
    auto c64 = [&](bool fl) { return vsrc64(w, code[2], l, in, fl); };
    auto fa = [&] { return fmod32(a(), 0); };
    auto ha = [&] { return double(fmod16(a(), 0)); };
    auto hb = [&] { return double(fmod16(b(), 1)); };
    auto hc = [&] { return double(fmod16(c(), 2)); };
    auto fb = [&] { return fmod32(b(), 1); };
    auto fc = [&] { return fmod32(c(), 2); };
    auto da = [&] { return fmod64(a64(true), 0); };
    auto db = [&] { return fmod64(b64(true), 1); };
    auto dc = [&] { return fmod64(c64(true), 2); };
    bool carry = carry_in >> l & 1;
    std::uint64_t r = 0;
    switch (op) {
      // VOP2 (and their VOP3 forms)
      case kVop3Vop2 + 0: r = carry ? b() : a(); break;
      case kVop3Vop2 + 1: r = u(fa() + fb()); break;
      case kVop3Vop2 + 2: r = u(fa() - fb()); break;
      case kVop3Vop2 + 3: r = u(fb() - fa()); break;
      case kVop3Vop2 + 4: {  // v_fmac_f64: D = S0 * S1 + D
        std::uint64_t d = std::uint64_t(vgpr(w, vdst + 1, l)) << 32 | vgpr(w, vdst, l);
        r = du(std::fma(da(), db(), df(d)));
        break;
      }
      case kVop3Vop2 + 5: r = u(fa() * fb()); break;
      case kVop3Vop2 + 6: r = std::uint32_t(std::int64_t(i(sext24(a()))) * i(sext24(b()))); break;
      case kVop3Vop2 + 7: r = std::uint32_t((std::int64_t(i(sext24(a()))) * i(sext24(b()))) >> 32); break;
      case kVop3Vop2 + 8: r = std::uint32_t(std::uint64_t(a() & 0xffffff) * (b() & 0xffffff)); break;
      case kVop3Vop2 + 9: r = std::uint32_t((std::uint64_t(a() & 0xffffff) * (b() & 0xffffff)) >> 32); break;
      case kVop3Vop2 + 10: r = u(std::fmin(fa(), fb())); break;
      case kVop3Vop2 + 11: r = u(std::fmax(fa(), fb())); break;
      case kVop3Vop2 + 12: r = std::uint32_t(std::min(i(a()), i(b()))); break;
      case kVop3Vop2 + 13: r = std::uint32_t(std::max(i(a()), i(b()))); break;
      case kVop3Vop2 + 14: r = std::min(a(), b()); break;
      case kVop3Vop2 + 15: r = std::max(a(), b()); break;
      case kVop3Vop2 + 16: r = b() >> (a() & 31); break;
      case kVop3Vop2 + 17: r = std::uint32_t(i(b()) >> (a() & 31)); break;
      case kVop3Vop2 + 18: r = b() << (a() & 31); break;
      case kVop3Vop2 + 19: r = a() & b(); break;
      case kVop3Vop2 + 20: r = a() | b(); break;
      case kVop3Vop2 + 21: r = a() ^ b(); break;
      case kVop3Vop2 + 25: case kVop3Vop2 + 28: {  // v_add_co_u32, v_addc_co_u32
        std::uint64_t s = std::uint64_t(a()) + b() + (op == kVop3Vop2 + 28 && carry);
        r = std::uint32_t(s);
        if (s >> 32) carry_out |= 1ull << l;
        break;
      }
      case kVop3Vop2 + 26: case kVop3Vop2 + 27: case kVop3Vop2 + 29: case kVop3Vop2 + 30: {
        bool reverse = op == kVop3Vop2 + 27 || op == kVop3Vop2 + 30;
        bool borrow_in = (op == kVop3Vop2 + 29 || op == kVop3Vop2 + 30) && carry;
        std::uint32_t x = reverse ? b() : a(), y = reverse ? a() : b();
        std::uint64_t s = std::uint64_t(x) - y - borrow_in;
        r = std::uint32_t(s);
        if (s >> 32) carry_out |= 1ull << l;
        break;
      }
      case kVop3Vop2 + 22: r = u(fa() * fb() + f(vgpr(w, vdst, l))); break;  // v_mac_f32: not fused
      // 16-bit integer operations: the result's upper 16 bits are zero (GFX9 without SDWA or op_sel)
      case kVop3Vop2 + 38: r = std::uint16_t(a() + b()); break;
      case kVop3Vop2 + 39: r = std::uint16_t(a() - b()); break;
      case kVop3Vop2 + 41: r = std::uint16_t(a() * b()); break;
      case kVop3Vop2 + 42: r = std::uint16_t(b() << (a() & 15)); break;
      case kVop3Vop2 + 43: r = std::uint16_t((b() & 0xffff) >> (a() & 15)); break;
      case kVop3Vop2 + 47: r = std::max(a() & 0xffff, b() & 0xffff); break;
      case kVop3Vop2 + 49: r = std::min(a() & 0xffff, b() & 0xffff); break;
      // f16 operations, in double (exact for these) and rounded once; the upper 16 bits zero
      case kVop3Vop2 + 31: r = to_half(ha() + hb()); break;
      case kVop3Vop2 + 32: r = to_half(ha() - hb()); break;
      case kVop3Vop2 + 34: r = to_half(ha() * hb()); break;
      case kVop3Vop2 + 45: r = to_half(std::fmax(ha(), hb())); break;
      case kVop3Vop2 + 46: r = to_half(std::fmin(ha(), hb())); break;
      case kVop3Vop2 + 52: r = a() + b(); break;
      case kVop3Vop2 + 53: r = a() - b(); break;
      case kVop3Vop2 + 54: r = b() - a(); break;
      case kVop3Vop2 + 59: r = u(std::fma(fa(), fb(), f(vgpr(w, vdst, l)))); break;
      // VOP1
      case kVop3Vop1 + 1: r = a(); break;
      case kVop3Vop1 + 3: r = std::uint32_t(to_int<std::int32_t>(da())); break;
      case kVop3Vop1 + 4: r = du(double(i(a()))); break;
      case kVop3Vop1 + 5: r = u(float(i(a()))); break;
      case kVop3Vop1 + 6: r = u(float(a())); break;
      case kVop3Vop1 + 7: r = to_int<std::uint32_t>(fa()); break;
      case kVop3Vop1 + 8: r = std::uint32_t(to_int<std::int32_t>(fa())); break;
      case kVop3Vop1 + 15: r = u(float(da())); break;
      case kVop3Vop1 + 16: r = du(double(fa())); break;
      case kVop3Vop1 + 10: r = to_half(fa()); break;
      case kVop3Vop1 + 62: r = to_half(std::sqrt(ha())); break;
      case kVop3Vop1 + 48: case kVop3Vop1 + 51: {  // v_frexp_exp_i32: the exponent e of x = m * 2^e, m in [0.5, 1); 0 for inf and NaN
        double x = op == kVop3Vop1 + 48 ? da() : double(fa());
        int e = 0;
        if (std::isfinite(x)) std::frexp(x, &e);
        r = std::uint32_t(e);
        break;
      }
      case kVop3Vop1 + 49: {  // v_frexp_mant_f64: m; inf and NaN pass through
        double x = da();
        int e;
        r = du(std::isfinite(x) ? std::frexp(x, &e) : x);
        break;
      }
      case kVop3Vop1 + 52: {
        float x = fa();
        int e;
        r = u(std::isfinite(x) ? std::frexp(x, &e) : x);
        break;
      }
      case kVop3Vop1 + 11: r = u(fmod16(a(), 0)); break;
      case kVop3Vop1 + 57: r = to_half(double(a() & 0xffff)); break;
      case kVop3Vop1 + 59: r = to_int<std::uint16_t>(ha()); break;
      case kVop3Vop1 + 17: r = u(float(a() & 0xff)); break;
      case kVop3Vop1 + 21: r = to_int<std::uint32_t>(da()); break;
      case kVop3Vop1 + 22: r = du(double(a())); break;
      case kVop3Vop1 + 23: r = du(std::trunc(da())); break;
      case kVop3Vop1 + 24: r = du(std::ceil(da())); break;
      case kVop3Vop1 + 25: r = du(std::nearbyint(da())); break;
      case kVop3Vop1 + 26: r = du(std::floor(da())); break;
      case kVop3Vop1 + 27: r = u(fa() - std::floor(fa())); break;
      case kVop3Vop1 + 28: r = u(std::trunc(fa())); break;
      case kVop3Vop1 + 29: r = u(std::ceil(fa())); break;
      case kVop3Vop1 + 30: r = u(std::nearbyint(fa())); break;
      case kVop3Vop1 + 31: r = u(std::floor(fa())); break;
      case kVop3Vop1 + 32: r = u(std::exp2(fa())); break;
      case kVop3Vop1 + 33: r = u(std::log2(fa())); break;
      case kVop3Vop1 + 34: case kVop3Vop1 + 35: r = u(1.0f / fa()); break;
      case kVop3Vop1 + 36: r = u(1.0f / std::sqrt(fa())); break;
      case kVop3Vop1 + 37: r = du(1.0 / da()); break;
      case kVop3Vop1 + 38: r = du(1.0 / std::sqrt(da())); break;
      case kVop3Vop1 + 39: r = u(std::sqrt(fa())); break;
      case kVop3Vop1 + 40: r = du(std::sqrt(da())); break;
      case kVop3Vop1 + 41: r = u(revolutions(fa(), false)); break;
      case kVop3Vop1 + 42: r = u(revolutions(fa(), true)); break;
      case kVop3Vop1 + 43: r = ~a(); break;
      case kVop3Vop1 + 44: r = reverse_bits(a()); break;
      case kVop3Vop1 + 45: r = a() ? std::uint32_t(std::countl_zero(a())) : 0xffffffffu; break;
      case kVop3Vop1 + 46: r = a() ? std::uint32_t(std::countr_zero(a())) : 0xffffffffu; break;
      case kVop3Vop1 + 47: {  // v_ffbh_i32: the first bit that differs from the sign, from the top
        std::uint32_t x = a(), y = i(x) < 0 ? ~x : x;
        r = y ? std::uint32_t(std::countl_zero(y)) : 0xffffffffu;
        break;
      }
      case kVop3Vop1 + 50: r = du(da() - std::floor(da())); break;
      case kVop3Vop1 + 56: r = a64(false); break;
      // VOP3 only
      case 450: r = std::uint32_t(std::int64_t(i(sext24(a()))) * i(sext24(b())) + i(c())); break;
      case 451: r = (a() & 0xffffff) * (b() & 0xffffff) + c(); break;
      case 449: r = u(fa() * fb() + fc()); break;  // v_mad_f32: not fused
      case 456: case 457: {
        std::uint32_t x = a(), off = b() & 31, width = c() & 31;
        if (width == 0) r = 0;
        else if (op == 456) r = (x >> off) & ((1u << width) - 1);
        else r = std::uint32_t(std::int32_t((x >> off) << (32 - width)) >> (32 - width));
        break;
      }
      case 458: r = (a() & b()) | (~a() & c()); break;
      case 459: r = u(std::fma(fa(), fb(), fc())); break;
      case 460: r = du(std::fma(da(), db(), dc())); break;
      case 462: r = std::uint32_t(((std::uint64_t(a()) << 32) | b()) >> (c() & 31)); break;
      case 464: r = u(std::fmin(std::fmin(fa(), fb()), fc())); break;
      case 465: r = std::uint32_t(std::min({i(a()), i(b()), i(c())})); break;
      case 466: r = std::min({a(), b(), c()}); break;
      case 467: r = u(std::fmax(std::fmax(fa(), fb()), fc())); break;
      case 468: r = std::uint32_t(std::max({i(a()), i(b()), i(c())})); break;
      case 469: r = std::max({a(), b(), c()}); break;
      case 470: r = u(median3(fa(), fb(), fc())); break;
      case 471: r = std::uint32_t(median3(i(a()), i(b()), i(c()))); break;
      case 472: r = median3(a(), b(), c()); break;
      case 488: {  // v_mad_u64_u32: D64 = S0 * S1 + S2_64, carry out to sdst
        unsigned __int128 s = (unsigned __int128)(std::uint64_t(a()) * b()) + c64(false);
        r = std::uint64_t(s);
        if (s >> 64) carry_out |= 1ull << l;
        break;
      }
      case 489: {
        __int128 s = (__int128)(std::int64_t(i(a())) * i(b())) + std::int64_t(c64(false));
        r = std::uint64_t(s);
        if (s != __int128(std::int64_t(r))) carry_out |= 1ull << l;
        break;
      }
      case 478: r = u(divide_fixup(fa(), fb(), fc())); break;
      case 479: r = du(divide_fixup(da(), db(), dc())); break;
      case 480: case 481: {  // v_div_scale: D = S0 unscaled, VCC (sdst) clear; S1 the denominator, S2 the numerator
        bool wide_op = op == 481;
        double den = wide_op ? db() : fb(), num = wide_op ? dc() : fc();
        if (!std::isfinite(den) || !std::isfinite(num) || den == 0 || num == 0) {
          r = wide_op ? du(std::numeric_limits<double>::quiet_NaN()) : u(std::numeric_limits<float>::quiet_NaN());
          break;  // div_fixup gives the quotient
        }
        if (wide_op ? needs_scaling(den, num) : needs_scaling(fb(), fc()))
          fail(fmt::format("{} on operands that need scaling (denormal, tiny or far apart: {} / {}) is not simulated",
                           in.name, num, den));
        r = wide_op ? du(da()) : u(fa());
        break;
      }
      case 482: case 483: {  // v_div_fmas: fma, scaled when VCC is set
        std::uint64_t vcc = std::uint64_t(w.s[VCC_HI]) << 32 | w.s[VCC_LO];
        if (vcc >> l & 1)
          fail(fmt::format("{} with VCC set (a scaled division) is not simulated", in.name));
        r = op == 482 ? u(std::fma(fa(), fb(), fc())) : du(std::fma(da(), db(), dc()));
        break;
      }
      // fused: rounded once
      case 518: r = fma_to_half(ha(), hb(), hc()); break;
      case 672: {  // v_pack_b32_f16: S0's half low, S1's high, with |abs| and -neg on the bits
        auto bits = [&](std::uint32_t x, int k) {
          x &= 0xffff;
          if (abs >> k & 1) x &= 0x7fff;
          if (neg >> k & 1) x ^= 0x8000;
          return x;
        };
        r = bits(a(), 0) | bits(b(), 1) << 16;
        break;
      }
      case 499: r = (a() ^ b()) + c(); break;
      case 509: r = (a() << (b() & 31)) + c(); break;
      case 510: r = (a() + b()) << (c() & 31); break;
      case 511: r = a() + b() + c(); break;
      case 512: r = (a() << (b() & 31)) | c(); break;
      case 513: r = (a() & b()) | c(); break;
      case 514: r = a() | b() | c(); break;
      case 520: r = (a64(false) << (b() & 7)) + c64(false); break;  // v_lshl_add_u64: shifts of 0..4
      case 640: r = du(da() + db()); break;
      case 641: r = du(da() * db()); break;
      case 642: r = du(std::fmin(da(), db())); break;
      case 643: r = du(std::fmax(da(), db())); break;
      case 644: r = du(std::ldexp(da(), i(b()))); break;
      case 645: r = a() * b(); break;
      case 646: r = std::uint32_t((std::uint64_t(a()) * b()) >> 32); break;
      case 647: r = std::uint32_t((std::int64_t(i(a())) * i(b())) >> 32); break;
      case 648: r = u(std::ldexp(fa(), i(b()))); break;
      case 651: r = std::uint32_t(std::popcount(a())) + b(); break;
      case 652: {  // v_mbcnt_lo_u32_b32: the set bits of S0 below this lane, among lanes 0..31
        std::uint64_t below = l >= 32 ? 0xffffffffull : (1ull << l) - 1;
        r = std::uint32_t(std::popcount(a() & below)) + b();
        break;
      }
      case 653: {  // v_mbcnt_hi_u32_b32: the same among lanes 32..63
        std::uint64_t below = l <= 32 ? 0 : (1ull << (l - 32)) - 1;
        r = std::uint32_t(std::popcount(a() & below)) + b();
        break;
      }
      case 655: r = b64(false) << (a() & 63); break;
      case 656: r = b64(false) >> (a() & 63); break;
      case 657: r = std::uint64_t(std::int64_t(b64(false)) >> (a() & 63)); break;
      default: fail(fmt::format("{} is decoded but not run", in.name));
    }
    out[std::size_t(l)] = r;
  }
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    std::uint32_t r = std::uint32_t(out[std::size_t(l)]);
    if (dst_sel != kSelectDword) {  // SDWA: the field, and the other bits zero, sign or kept
      std::uint32_t width = dst_sel < 4 ? 8 : 16, shift = dst_sel < 4 ? 8 * dst_sel : 16 * (dst_sel - 4);
      std::uint32_t mask = ((1u << width) - 1) << shift, field = (r << shift) & mask;
      if (dst_unused == 2) r = (vgpr(w, vdst, l) & ~mask) | field;
      else if (dst_unused == 1 && (field >> (shift + width - 1) & 1))
        r = field | std::uint32_t(~((std::uint64_t(1) << (shift + width)) - 1));  // the sign above the field
      else r = field;
    }
    vgpr(w, vdst, l) = r;
    if (wide) vgpr(w, vdst + 1, l) = std::uint32_t(out[std::size_t(l)] >> 32);
  }
  // Carries: VOP3B writes its sdst; the e32 carry forms write VCC.
  if (scalar_destination(op)) swrite64(w, sdst, carry_out);
}

// ---- Memory.

// A 32- or 64-bit atomic's new value from the old one: op in FLAT numbering (64..79 on dwords,
// 96..103 on pairs); `data` the first data operand, `compare` cmpswap's second.
template <class T>
T atomic_result(std::uint32_t op, T old, T data, T compare) {
  using S = std::make_signed_t<T>;
  switch (op & ~32u) {
    case 64: return data;                                 // swap
    case 65: return old == compare ? data : old;          // cmpswap
    case 66: return old + data;                           // add
    case 67: return old - data;                           // sub
    case 68: return T(std::min(S(old), S(data)));         // smin
    case 69: return std::min(old, data);                  // umin
    case 70: return T(std::max(S(old), S(data)));         // smax
    case 71: return std::max(old, data);                  // umax
    case 72: return old & data;
    case 73: return old | data;
    case 74: return old ^ data;
    case 75: return old >= data ? 0 : old + 1;                   // inc
    case 76: return old == 0 || old > data ? data : old - 1;     // dec
  }
  return old;
}

void Runner::ds(Wave& w, Group& g, const Inst& in) {
  std::uint32_t off0 = in.w0 & 0xff, off1 = (in.w0 >> 8) & 0xff, offset = in.w0 & 0xffff;
  if ((in.w0 >> 16) & 1) fail(fmt::format("{} on GDS is not simulated", in.name));
  std::uint32_t addr = in.w1 & 0xff, d0 = (in.w1 >> 8) & 0xff, d1 = (in.w1 >> 16) & 0xff, vdst = in.w1 >> 24;
  const std::uint64_t lanes = w.exec;
  const std::string name = in.name;
  // Lane exchanges: every lane's value is read before any is written.
  if (in.op == 61 || in.op == 62 || in.op == 63) {
    std::array<std::uint32_t, kLanes> result{};
    for (int l = 0; l < kLanes; ++l) {
      if (!(lanes >> l & 1)) continue;
      if (in.op == 61) {  // ds_swizzle_b32
        int from;
        if (offset & 0x8000) {  // quad mode: each lane of a quad picks one by two bits
          from = (l & ~3) + int((offset >> (2 * (l & 3))) & 3);
        } else {  // bit mode within each 32 lanes: and, or, xor masks in bits 4:0, 9:5, 14:10
          std::uint32_t and_mask = offset & 31, or_mask = (offset >> 5) & 31, xor_mask = (offset >> 10) & 31;
          from = (l & 32) | int((((std::uint32_t(l) & 31) & and_mask) | or_mask) ^ xor_mask);
        }
        result[std::size_t(l)] = (lanes >> from & 1) ? vgpr(w, addr, from) : 0;  // the value is in the ADDR field
      } else if (in.op == 63) {  // ds_bpermute_b32: read the lane the address names
        int from = int(((vgpr(w, addr, l) + offset) >> 2) & 63);
        result[std::size_t(l)] = (lanes >> from & 1) ? vgpr(w, d0, from) : 0;
      } else {  // ds_permute_b32: write the lane the address names
        int to = int(((vgpr(w, addr, l) + offset) >> 2) & 63);
        result[std::size_t(to)] = vgpr(w, d0, l);
      }
    }
    for (int l = 0; l < kLanes; ++l)
      if (lanes >> l & 1) vgpr(w, vdst, l) = result[std::size_t(l)];
    return;
  }
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    std::uint64_t a = vgpr(w, addr, l);
    auto store = [&](std::uint64_t at, std::uint32_t first, std::uint32_t dwords) {
      for (std::uint32_t k = 0; k < dwords; ++k) {
        std::uint32_t x = vgpr(w, first + k, l);
        std::memcpy(lds(g, at + 4 * k, 4, name), &x, 4);
      }
    };
    auto load = [&](std::uint64_t at, std::uint32_t first, std::uint32_t dwords) {
      for (std::uint32_t k = 0; k < dwords; ++k) std::memcpy(&vgpr(w, first + k, l), lds(g, at + 4 * k, 4, name), 4);
    };
    switch (in.op) {
      case 13: store(a + offset, d0, 1); break;
      case 77: store(a + offset, d0, 2); break;
      case 223: store(a + offset, d0, 4); break;
      case 14: store(a + off0 * 4, d0, 1), store(a + off1 * 4, d1, 1); break;
      case 78: store(a + off0 * 8, d0, 2), store(a + off1 * 8, d1, 2); break;
      case 222: store(a + offset, d0, 3); break;
      case 15: store(a + off0 * 256, d0, 1), store(a + off1 * 256, d1, 1); break;  // st64: offsets in 64 elements
      case 79: store(a + off0 * 512, d0, 2), store(a + off1 * 512, d1, 2); break;
      case 30: case 31: {
        std::uint32_t x = vgpr(w, d0, l);
        std::memcpy(lds(g, a + offset, in.op == 30 ? 1 : 2, name), &x, in.op == 30 ? 1 : 2);
        break;
      }
      case 54: load(a + offset, vdst, 1); break;
      case 118: load(a + offset, vdst, 2); break;
      case 255: load(a + offset, vdst, 4); break;
      case 55: load(a + off0 * 4, vdst, 1), load(a + off1 * 4, vdst + 1, 1); break;
      case 119: load(a + off0 * 8, vdst, 2), load(a + off1 * 8, vdst + 2, 2); break;
      case 254: load(a + offset, vdst, 3); break;
      case 56: load(a + off0 * 256, vdst, 1), load(a + off1 * 256, vdst + 1, 1); break;
      case 120: load(a + off0 * 512, vdst, 2), load(a + off1 * 512, vdst + 2, 2); break;
      case 21: case 53: {  // ds_add_f32, ds_add_rtn_f32
        auto* p = lds(g, a + offset, 4, name);
        float old;
        std::memcpy(&old, p, 4);
        float n = old + f(vgpr(w, d0, l));
        std::memcpy(p, &n, 4);
        if (in.op == 53) vgpr(w, vdst, l) = u(old);
        break;
      }
      case 64: case 71: case 72: case 92: case 96: case 103: case 104: case 112: case 124: {
        // 64-bit: add_u64, min_u64, max_u64, add_f64, cmpst_b64 and their _rtn forms
        auto* p = lds(g, a + offset, 8, name);
        auto pair = [&](std::uint32_t r) { return std::uint64_t(vgpr(w, r + 1, l)) << 32 | vgpr(w, r, l); };
        std::uint64_t old, data = pair(d0), n;
        std::memcpy(&old, p, 8);
        if (in.op == 112) n = old == data ? pair(d1) : old;  // DATA0 compares, DATA1 is stored
        else if (in.op == 92 || in.op == 124) n = du(df(old) + df(data));
        else if (in.op == 71 || in.op == 103) n = std::min(old, data);
        else if (in.op == 72 || in.op == 104) n = std::max(old, data);
        else n = old + data;
        std::memcpy(p, &n, 8);
        if (in.op >= 96) vgpr(w, vdst, l) = std::uint32_t(old), vgpr(w, vdst + 1, l) = std::uint32_t(old >> 32);
        break;
      }
      case 57: case 58: case 59: case 60: {
        std::uint32_t bytes = in.op <= 58 ? 1 : 2, x = 0;
        std::memcpy(&x, lds(g, a + offset, bytes, name), bytes);
        if (in.op == 57) x = std::uint32_t(std::int32_t(std::int8_t(x)));
        if (in.op == 59) x = std::uint32_t(std::int32_t(std::int16_t(x)));
        vgpr(w, vdst, l) = x;
        break;
      }
      default: {  // LDS atomics: ds_OP_u32 (0..11) and their _rtn forms (32..45), ds_cmpst_rtn_b32
        auto* p = lds(g, a + offset, 4, name);
        std::uint32_t old, data = vgpr(w, d0, l), n;
        std::memcpy(&old, p, 4);
        std::uint32_t kind = in.op & 31;  // 0 add, 1 sub, 5..8 min/max, 9..11 and/or/xor, 13 wrxchg
        switch (in.op) {
          case 48: n = old == data ? vgpr(w, d1, l) : old; break;  // ds_cmpst: DATA0 compares, DATA1 is stored
          default: {
            static constexpr std::uint32_t kAsFlat[] = {66, 67, 0, 0, 0, 68, 70, 69, 71, 72, 73, 74, 0, 64};
            if (kind >= std::size(kAsFlat) || !kAsFlat[kind]) fail(fmt::format("{} is decoded but not run", name));
            n = atomic_result<std::uint32_t>(kAsFlat[kind], old, data, 0);
          }
        }
        std::memcpy(p, &n, 4);
        if (in.op >= 32) vgpr(w, vdst, l) = old;
      }
    }
  }
}

void Runner::flat(Wave& w, Group& g, const Inst& in) {
  const std::uint32_t seg = (in.w0 >> 14) & 3, op = in.op;
  const bool cdna3 = d_.target == Target::gfx942;
  // Offsets: 12 bits unsigned on FLAT, 13 bits signed on GLOBAL and SCRATCH.
  std::int64_t offset = seg == SEG_FLAT ? std::int64_t(in.w0 & 0xfff) : std::int64_t(std::int32_t(in.w0 << 19) >> 19);
  const bool returns = (in.w0 >> 16) & 1;  // glc (gfx90a) or sc0 (gfx942): an atomic returns the old value
  std::uint32_t addr = in.w1 & 0xff, data = (in.w1 >> 8) & 0xff, saddr = (in.w1 >> 16) & 0x7f, vdst = in.w1 >> 24;
  const std::string name = fmt::format("{}_{}", segment_prefix(seg), in.name);
  const bool store = op >= 24 && op <= 31, atomic = op >= 64, d16_hi = op == 25 || op == 27;
  const bool atomic64 = op >= 96 || op == 79;
  std::uint32_t bytes = op == 16 || op == 17 || op == 24 || op == 25 ? 1 : op == 18 || op == 19 || op == 26 || op == 27 ? 2
                       : op == 21 || op == 29 ? 8 : op == 22 || op == 30 ? 12 : op == 23 || op == 31 ? 16
                       : atomic64 ? 8 : 4;
  const std::uint64_t lanes = w.exec;
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    // Where the lane's bytes are: global memory, the group's LDS, or the lane's private bytes.
    std::byte* p = nullptr;
    if (seg == SEG_SCRATCH) {
      std::uint64_t at = std::uint64_t(offset);
      bool has_vgpr = cdna3 ? ((in.w0 >> 13) & 1) : saddr == SADDR_OFF;
      if (has_vgpr) at += vgpr(w, addr, l);
      if (saddr != SADDR_OFF) at += sread(w, saddr, in);
      p = priv(w, l, at & 0xffffffffull, bytes, store || atomic, name);
    } else {
      std::uint64_t at;
      if (seg == SEG_GLOBAL && saddr != SADDR_OFF) at = sread64(w, saddr, in) + vgpr(w, addr, l);
      else at = std::uint64_t(vgpr(w, addr + 1, l)) << 32 | vgpr(w, addr, l);
      at += std::uint64_t(offset);
      bool in_shared = seg == SEG_FLAT && at >= kSharedAperture && at - kSharedAperture < kApertureBytes;
      bool in_private = seg == SEG_FLAT && at >= kPrivateAperture && at - kPrivateAperture < kApertureBytes;
      if (in_shared) p = lds(g, at - kSharedAperture, bytes, name);
      else if (in_private) p = priv(w, l, at - kPrivateAperture, bytes, store || atomic, name);
      else p = memory(at, bytes, store || atomic, name);
    }
    if (atomic) {
      if (op == 77 || op == 79) {  // f32 and f64 adds
        if (op == 77) {
          float old;
          std::memcpy(&old, p, 4);
          float n = old + f(vgpr(w, data, l));
          std::memcpy(p, &n, 4);
          if (returns) vgpr(w, vdst, l) = u(old);
        } else {
          double old;
          std::memcpy(&old, p, 8);
          double n = old + df(std::uint64_t(vgpr(w, data + 1, l)) << 32 | vgpr(w, data, l));
          std::memcpy(p, &n, 8);
          if (returns) vgpr(w, vdst, l) = std::uint32_t(du(old)), vgpr(w, vdst + 1, l) = std::uint32_t(du(old) >> 32);
        }
      } else if (atomic64) {
        std::uint64_t old, x = std::uint64_t(vgpr(w, data + 1, l)) << 32 | vgpr(w, data, l), cmp = 0;
        if (op == 97) cmp = std::uint64_t(vgpr(w, data + 3, l)) << 32 | vgpr(w, data + 2, l);
        std::memcpy(&old, p, 8);
        std::uint64_t n = atomic_result<std::uint64_t>(op, old, x, cmp);
        std::memcpy(p, &n, 8);
        if (returns) vgpr(w, vdst, l) = std::uint32_t(old), vgpr(w, vdst + 1, l) = std::uint32_t(old >> 32);
      } else {
        std::uint32_t old, x = vgpr(w, data, l), cmp = op == 65 ? vgpr(w, data + 1, l) : 0;
        std::memcpy(&old, p, 4);
        std::uint32_t n = atomic_result<std::uint32_t>(op, old, x, cmp);
        std::memcpy(p, &n, 4);
        if (returns) vgpr(w, vdst, l) = old;
      }
    } else if (store) {
      if (bytes < 4) {
        std::uint32_t x = vgpr(w, data, l) >> (d16_hi ? 16 : 0);  // _d16_hi: from the upper half
        std::memcpy(p, &x, bytes);
      } else {
        for (std::uint32_t k = 0; k < bytes; k += 4) {
          std::uint32_t x = vgpr(w, data + k / 4, l);
          std::memcpy(p + k, &x, 4);
        }
      }
    } else {
      load_lane(w, vdst, l, p, bytes, op);
    }
  }
}

void Runner::load_lane(Wave& w, std::uint32_t vdst, int l, const std::byte* p, std::uint32_t bytes,
                       std::uint32_t op) {
  // FLAT's and MUBUF's signed byte and short loads are opcodes 17 and 19 alike.
  load_lane_bytes([&](std::uint32_t k) -> std::uint32_t& { return vgpr(w, vdst + k, l); }, p, bytes,
                  op == 17 || op == 19);
}

// MUBUF loads and stores through a buffer resource (V#) in four SGPRs: base in words 0..1
// (48 bits), stride in word 1's bits 29:16, num_records in word 2, ADD_TID_ENABLE in word 3's
// bit 23. A V# with ADD_TID_ENABLE is a private segment buffer, as the CP gives a kernel: it
// addresses each lane's own private bytes from its base (the hardware's per-lane swizzle is
// below this model). Other buffers are raw (no stride, no index): a lane's bytes beyond
// num_records read as zero and are not written, as the ISA bounds buffers.
void Runner::mubuf(Wave& w, const Inst& in) {
  const std::uint32_t op = in.op, inst_offset = in.w0 & 0xfff;
  const bool offen = (in.w0 >> 12) & 1, idxen = (in.w0 >> 13) & 1;
  const std::uint32_t vaddr = in.w1 & 0xff, vdata = (in.w1 >> 8) & 0xff, srsrc = ((in.w1 >> 16) & 0x1f) * 4;
  const std::uint32_t soffset = in.w1 >> 24;
  const std::string name = fmt::format("buffer_{}", in.name);
  if (srsrc + 3 >= kSgprs) fail(fmt::format("a buffer resource s[{}:{}] past s101", srsrc, srsrc + 3));
  std::uint32_t v[4];
  for (std::uint32_t k = 0; k < 4; ++k) v[k] = sgpr_read(w, srsrc + k);
  const std::uint64_t base = std::uint64_t(v[1] & 0xffff) << 32 | v[0];
  const std::uint32_t stride = (v[1] >> 16) & 0x3fff, records = v[2];
  const bool private_buffer = (v[3] >> kAddTidEnableBit) & 1;
  if (idxen || (stride && !private_buffer)) fail(fmt::format("{} on a structured (indexed or strided) buffer is not simulated", name));
  const bool store = op >= 24;
  const std::uint32_t bytes = op == 16 || op == 17 || op == 24 ? 1 : op == 18 || op == 19 || op == 26 ? 2
                            : op == 21 || op == 29 ? 8 : op == 22 || op == 30 ? 12 : op == 23 || op == 31 ? 16 : 4;
  const std::uint64_t lanes = w.exec;
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    std::uint64_t offset = std::uint64_t(sread(w, soffset, in)) + inst_offset + (offen ? vgpr(w, vaddr, l) : 0);
    std::byte* p = nullptr;
    std::byte zeros[16] = {};
    if (private_buffer) {
      p = priv(w, l, offset, bytes, store, name);  // the resource's base is where the private bytes start
    } else if (offset + bytes > records) {
      if (store) continue;
      p = zeros;
    } else {
      p = memory(base + offset, bytes, store, name);
    }
    if (store) {
      for (std::uint32_t k = 0; k < bytes; k += 4) {
        std::uint32_t x = vgpr(w, vdata + k / 4, l);
        std::memcpy(p + k, &x, std::min<std::uint32_t>(4, bytes - k));
      }
    } else {
      load_lane(w, vdata, l, p, bytes, op);
    }
  }
}

// VOP3P on 64-bit register pairs: each source half the lower result takes is picked by
// op_sel and negated by neg_lo, each the upper takes by op_sel_hi and neg_hi. v_pk_mov_b32
// moves S0's picked half low and S1's high; the others are f32 fma, mul and add per half.
void Runner::vop3p_fields(const Inst& in, int sources, Vop3pFields& v) const {
  v.vdst = in.w0 & 0xff;
  v.op_sel = (in.w0 >> 11) & 7, v.op_sel_hi = ((in.w1 >> 27) & 3) | ((in.w0 >> 14) & 1) << 2;
  v.neg_lo = in.w1 >> 29, v.neg_hi = (in.w0 >> 8) & 7;
  v.code[0] = in.w1 & 0x1ff, v.code[1] = (in.w1 >> 9) & 0x1ff, v.code[2] = (in.w1 >> 18) & 0x1ff;
  if ((in.w0 >> 15) & 1) fail(fmt::format("{} with clamp is not simulated", in.name));
  for (int k = 0; k < sources; ++k)
    if (v.code[k] >= 128 && v.code[k] <= LITERAL && !(v.code[k] >= SRC_SHARED_BASE && v.code[k] <= SRC_PRIVATE_LIMIT))
      fail(fmt::format("{} with a constant operand is not simulated", in.name));
}

// The f16 and mixed-precision VOP3P operations on single registers (MI200 and MI300 ISA guides).
// v_pk_fma_f16: each half of the result is the fma of the source halves op_sel (low result)
// or op_sel_hi (high result) picks, negated by neg_lo or neg_hi, rounded once to f16.
// v_fma_mix_f32, v_fma_mixlo_f16, v_fma_mixhi_f16: fma(S0, S1, S2) where source k is the f32
// register when op_sel_hi[k] is clear, else the f16 half op_sel[k] picks (1: the high one),
// converted to f32 exactly; neg_lo negates a source and neg_hi takes its |abs| (first). mix_f32
// rounds once to an f32; mixlo and mixhi round once to an f16 and write the low or the high half
// of the destination, which keeps its other half.
void Runner::vop3p_single(Wave& w, const Inst& in) {
  Vop3pFields v;
  vop3p_fields(in, 3, v);
  std::array<std::uint32_t, kLanes> out{};
  const std::uint64_t lanes = w.exec;
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    std::uint32_t s[3];
    for (int k = 0; k < 3; ++k) s[k] = vsrc(w, v.code[k], l, in);
    if (in.op == kVop3pFmaF16) {
      auto half = [&](int k, bool upper_result) {
        bool hi = ((upper_result ? v.op_sel_hi : v.op_sel) >> k) & 1;
        double x = from_half(hi ? s[k] >> 16 : s[k] & 0xffff);
        return ((upper_result ? v.neg_hi : v.neg_lo) >> k & 1) ? -x : x;
      };
      out[std::size_t(l)] = fma_to_half(half(0, false), half(1, false), half(2, false)) |
                            fma_to_half(half(0, true), half(1, true), half(2, true)) << 16;
      continue;
    }
    auto source = [&](int k) {
      float x = (v.op_sel_hi >> k & 1) ? from_half((v.op_sel >> k & 1) ? s[k] >> 16 : s[k] & 0xffff) : f(s[k]);
      if (v.neg_hi >> k & 1) x = std::fabs(x);
      return (v.neg_lo >> k & 1) ? -x : x;
    };
    if (in.op == kVop3pMixF32) {
      out[std::size_t(l)] = u(std::fma(source(0), source(1), source(2)));
      continue;
    }
    std::uint32_t h = fma_to_half(source(0), source(1), source(2)), old = vgpr(w, v.vdst, l);
    out[std::size_t(l)] = in.op == kVop3pMixLo ? (old & 0xffff0000u) | h : (old & 0xffffu) | h << 16;
  }
  for (int l = 0; l < kLanes; ++l)
    if (lanes >> l & 1) vgpr(w, v.vdst, l) = out[std::size_t(l)];
}

void Runner::vop3p(Wave& w, const Inst& in) {
  if (in.op == kVop3pFmaF16 || in.op == kVop3pMixF32 || in.op == kVop3pMixLo || in.op == kVop3pMixHi) {
    vop3p_single(w, in);
    return;
  }
  const int sources = in.op == kVop3pFma ? 3 : 2;
  Vop3pFields fields;
  vop3p_fields(in, sources, fields);
  const std::uint32_t vdst = fields.vdst, op_sel = fields.op_sel, op_sel_hi = fields.op_sel_hi;
  const std::uint32_t neg_lo = fields.neg_lo, neg_hi = fields.neg_hi;
  const std::uint32_t* code = fields.code;
  if (in.op == kVop3pMovB32 && (neg_lo || neg_hi)) fail(fmt::format("{} with -neg is not simulated", in.name));
  std::array<std::uint64_t, kLanes> out{};
  const std::uint64_t lanes = w.exec;
  for (int l = 0; l < kLanes; ++l) {
    if (!(lanes >> l & 1)) continue;
    std::uint64_t s[3] = {};
    for (int k = 0; k < sources; ++k) s[k] = vsrc64(w, code[k], l, in, false);
    auto half = [&](int k, bool upper_result) {
      bool hi = ((upper_result ? op_sel_hi : op_sel) >> k) & 1;
      float v = f(std::uint32_t(hi ? s[k] >> 32 : s[k]));
      return ((upper_result ? neg_hi : neg_lo) >> k & 1) ? -v : v;
    };
    std::uint32_t r[2];
    for (int h = 0; h < 2; ++h) {
      if (in.op == kVop3pMovB32) {
        bool hi = (op_sel >> h) & 1;
        r[h] = std::uint32_t(hi ? s[h] >> 32 : s[h]);
      } else if (in.op == kVop3pFma) {
        r[h] = u(std::fma(half(0, h), half(1, h), half(2, h)));
      } else if (in.op == kVop3pMul) {
        r[h] = u(half(0, h) * half(1, h));
      } else {
        r[h] = u(half(0, h) + half(1, h));
      }
    }
    out[std::size_t(l)] = std::uint64_t(r[1]) << 32 | r[0];
  }
  for (int l = 0; l < kLanes; ++l)
    if (lanes >> l & 1) vgpr(w, vdst, l) = std::uint32_t(out[std::size_t(l)]), vgpr(w, vdst + 1, l) = std::uint32_t(out[std::size_t(l)] >> 32);
}

// ---- Waves and groups.

void Runner::step(Wave& w, Group& g) {
  std::uint32_t words[2];
  auto* p = mem_.at(w.pc, 4, false);
  if (!p) throw Fault{fmt::format("page fault at {:#x} (read) fetching an instruction", w.pc), true, w.pc, false};
  std::size_t available = 1;
  std::memcpy(&words[0], p, 4);
  if (auto* q = mem_.at(w.pc + 4, 4, false)) std::memcpy(&words[1], q, 4), available = 2;
  auto decoded = decode(d_.target, words, available);
  if (auto* bad = std::get_if<DecodeError>(&decoded)) fail(fmt::format("{} at {:#x}", bad->why, w.pc));
  const Inst& in = std::get<Inst>(decoded);
  ++count_;
  try {
    switch (in.family) {
      case Family::SOPP: sopp(w, in); return;  // sopp moved the pc
      case Family::SOP1:
        if (in.op == 29 || in.op == 30) {  // s_setpc_b64, s_swappc_b64: jumps
          std::uint64_t to = sread64(w, in.w0 & 0xff, in);
          if (in.op == 30) swrite64(w, (in.w0 >> 16) & 0x7f, w.pc + 4);
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
      case Family::DS: ds(w, g, in); break;
      case Family::FLAT: flat(w, g, in); break;
      case Family::VOP3P: vop3p(w, in); break;
      case Family::MUBUF:  // cache write-backs and invalidations do nothing: memory is always coherent here
        if (in.op <= kBufferLast) mubuf(w, in);
        break;
    }
  } catch (Fault& f) {
    if (!f.page) f.why = fmt::format("{} at {:#x}: {}", display_name(in), w.pc, f.why);
    throw;
  }
  w.pc += 4 * in.length;
}

// COMPUTE_PGM_RSRC1/2 fields (AMDGPUUsage, "compute_pgm_rsrc1 for GFX6-GFX12" and "rsrc2").
constexpr std::uint32_t kVgprGranule = 8;  // GRANULATED_WORKITEM_VGPR_COUNT on gfx90a/gfx942 (unified file)
constexpr std::uint32_t kSgprGranule = 8;  // GRANULATED_WAVEFRONT_SGPR_COUNT on GFX9
constexpr std::uint32_t kLdsGranule = 512;  // LDS_SIZE in rsrc2, bytes

void Runner::group(std::uint32_t gx, std::uint32_t gy, std::uint32_t gz) {
  Group g;
  std::uint32_t lds_size = ((d_.rsrc2 >> 15) & 0x1ff) * kLdsGranule;
  g.lds.assign(lds_size, std::byte{0xAB});  // LDS is not initialized: make reads of it visible
  std::uint32_t tx = d_.threads[0], ty = d_.threads[1], tz = d_.threads[2];
  std::uint32_t threads = tx * ty * tz, waves = (threads + kLanes - 1) / kLanes;
  std::uint32_t vgprs = std::min(kMaxVgprs, ((d_.rsrc1 & 0x3f) + 1) * kVgprGranule);
  std::uint32_t sgprs = std::min(kSgprs, (((d_.rsrc1 >> 6) & 0xf) + 1) * kSgprGranule);
  std::uint32_t user = (d_.rsrc2 >> 1) & 0x1f;
  if (d_.scratch_base && d_.private_bytes && waves > d_.scratch_waves)
    fail(fmt::format("a group of {} waves with private memory, over the {} wave slots of COMPUTE_TMPRING_SIZE.WAVES",
                     waves, d_.scratch_waves));
  g.waves.resize(waves);
  for (std::uint32_t n = 0; n < waves; ++n) {
    Wave& w = g.waves[n];
    w.pc = d_.code;
    w.vgprs = vgprs, w.sgprs = sgprs;
    w.v.assign(std::size_t(vgprs) * kLanes, 0);
    w.slot = n;
    if (!d_.scratch_base) w.priv.assign(std::size_t(d_.private_bytes) * kLanes, std::byte{0});
    std::uint32_t s = 0;
    auto system = [&](std::uint32_t value, const char* what) {
      if (s >= sgprs) fail(fmt::format("the dispatch's {} SGPRs leave no room for {}", sgprs, what));
      w.s[s++] = value;
    };
    for (std::uint32_t k = 0; k < user; ++k) system(d_.user_data[k], "its user SGPRs");
    if (d_.rsrc2 >> 7 & 1) system(gx, "the workgroup id");  // TGID_X_EN
    if (d_.rsrc2 >> 8 & 1) system(gy, "the workgroup id");
    if (d_.rsrc2 >> 9 & 1) system(gz, "the workgroup id");
    if (d_.rsrc2 >> 10 & 1) system(waves, "the workgroup info");  // TG_SIZE_EN: the group's wave count
    // SCRATCH_EN: the private segment wave offset, 0 as each lane's private bytes start at 0.
    if (d_.rsrc2 & 1) system(0, "the private segment wave offset");
    for (int l = 0; l < kLanes; ++l) {
      std::uint32_t t = n * kLanes + std::uint32_t(l);
      if (t >= threads) continue;
      w.exec |= 1ull << l;
      std::uint32_t x = t % tx, y = (t / tx) % ty, z = t / (tx * ty);
      w.v[std::size_t(l)] = x | y << 10 | z << 20;  // v0: packed work-item ids (gfx90a on)
    }
  }
  // Waves run one at a time, each to its end or to a barrier.
  run_waves(g.waves, [&](Wave& w) { step(w, g); }, [&] {
    if ((count_ & 0xfff) == 0 && stop_) fail("stopped");
  });
}

Outcome Runner::run() {
  auto check = [&] {
    if (!d_.wave64) fail("a wave32 dispatch: gfx90a and gfx942 run wave64 only");
    if (std::uint64_t(d_.threads[0]) * d_.threads[1] * d_.threads[2] == 0 ||
        std::uint64_t(d_.threads[0]) * d_.threads[1] * d_.threads[2] > 1024)
      fail(fmt::format("a group of {}x{}x{} threads: a group has 1 to 1024", d_.threads[0], d_.threads[1], d_.threads[2]));
  };
  Outcome o = run_grid(d_.groups, {d_.chunk, d_.share, d_.shares}, stop_, check,
                       [&](std::uint32_t x, std::uint32_t y, std::uint32_t z) { group(x, y, z); });
  o.instructions = count_;
  return o;
}

}  // namespace

Outcome run(const Dispatch& dispatch, Memory& memory, const std::atomic<bool>& stop) {
  return Runner(dispatch, memory, stop).run();
}

}  // namespace rig::sim::amd::gfx9
