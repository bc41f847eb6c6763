// The decoded form of a PTX module: what load() builds and run() executes. Registers of
// every function are numbered into one slot space (functions cannot recurse, so a callee's
// slots never alias a live caller's), as are local memory and call parameters.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ptx.hpp"

namespace rig::ptx::detail {

enum class T : std::uint8_t {
  none, pred, b8, b16, b32, b64, b128, u8, u16, u32, u64, s8, s16, s32, s64, f16, f16x2, bf16, bf16x2, f32, f64
};

inline unsigned bits_of(T t) {
  switch (t) {
    case T::pred: return 1;
    case T::b8: case T::u8: case T::s8: return 8;
    case T::b16: case T::u16: case T::s16: case T::f16: case T::bf16: return 16;
    case T::b32: case T::u32: case T::s32: case T::f32: case T::f16x2: case T::bf16x2: return 32;
    case T::b64: case T::u64: case T::s64: case T::f64: return 64;
    case T::b128: return 128;
    case T::none: return 0;
  }
  return 0;
}
inline bool is_signed(T t) { return t == T::s8 || t == T::s16 || t == T::s32 || t == T::s64; }
inline bool is_float(T t) { return t == T::f16 || t == T::bf16 || t == T::f32 || t == T::f64 || t == T::f16x2 || t == T::bf16x2; }

enum class Op : std::uint8_t {
  add, sub, mul, mad, mul24, mad24, div, rem, abs, neg, min, max, and_, or_, xor_, not_, cnot, shl, shr,
  popc, clz, brev, bfe, bfi, prmt, selp, setp, set, slct, fma, rcp, sqrt, rsqrt, ex2, lg2, sin, cos,
  tanh, copysign, sad, shf, testp, mov, cvt, cvta, ld, st, atom, red, bar_sync, bar_arrive, bar_warp,
  membar, bra, call, ret, exit, trap, shfl, vote, match, activemask, redux, nop, count
};

// Operand kinds. An address is a base (register, symbol or none) plus `imm`.
enum class K : std::uint8_t { none, reg, imm, sreg, sym, addr, label, sink, vec };
// What a symbol names: its area and, in `imm`, its offset in that area (var: its index).
enum class Area : std::uint8_t { none, reg, shared, local, kparam, tparam, var };

enum class Sreg : std::uint8_t {
  tid_x, tid_y, tid_z, ntid_x, ntid_y, ntid_z, ctaid_x, ctaid_y, ctaid_z, nctaid_x, nctaid_y, nctaid_z,
  laneid, warpid, nwarpid, clock, clock64, globaltimer, lanemask_eq, lanemask_lt, lanemask_le,
  lanemask_gt, lanemask_ge, smid, nsmid, gridid, dynamic_smem_size, total_smem_size
};

struct Operand {
  K kind = K::none;
  bool neg = false;      // !%p
  Area area = Area::none;  // addr/sym: the base
  bool wide = true;      // a register base of 64 bits (else 32)
  std::uint32_t slot = 0;  // reg, addr base register, vec: index into Instr::vec
  std::int64_t imm = 0;    // imm bits, offset, label pc, sreg id, vec count
};

enum Flag : std::uint16_t {
  kFtz = 1, kSat = 2, kApprox = 4, kFull = 8, kHi = 16, kLo = 32, kWide = 64, kUni = 128,
  kClamp = 256, kShiftLeft = 512, kCc = 1024
};
enum class Rnd : std::uint8_t { none, rn, rz, rm, rp, rni, rzi, rmi, rpi };
enum class Cmp : std::uint8_t { eq, ne, lt, le, gt, ge, lo, ls, hi, hs, equ, neu, ltu, leu, gtu, geu, num, nan };
enum class Bool : std::uint8_t { none, and_, or_, xor_ };
// Memory spaces of an instruction.
enum class Mem : std::uint8_t { generic, global, shared, local, constant, param };
// The sub-operation: atom/red/redux op, shfl mode, vote mode, match mode, cvta direction.
enum class Sub : std::uint8_t {
  none, add, min, max, inc, dec, and_, or_, xor_, exch, cas, up, down, bfly, idx, all, any, uni, ballot, to
};

struct Instr {
  Op op = Op::nop;
  T type = T::none;   // the instruction's type (cvt: destination)
  T type2 = T::none;  // cvt: source; set: the compared type
  Rnd rnd = Rnd::none;
  Cmp cmp = Cmp::eq;
  Bool boolop = Bool::none;
  Mem mem = Mem::generic;
  Sub sub = Sub::none;
  std::uint8_t nops = 0;
  std::uint16_t flags = 0;
  std::uint32_t guard = UINT32_MAX;  // predicate slot, or none
  bool guard_neg = false;
  Operand o[6];
  std::uint32_t vec[4] = {0, 0, 0, 0};  // the registers of a vector operand
  std::uint32_t line = 0;
  // call: the callee's function index, and the parameter copies in `calls` of the module
  std::uint32_t call = 0;
};

// A call's parameter copies: argument area offsets to the callee's, and the return value back.
struct CallSite {
  std::uint32_t function;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> args;  // caller tparam offset -> callee's
  std::vector<std::uint32_t> sizes;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> rets;  // callee retval offset -> caller's
  std::vector<std::uint32_t> ret_sizes;
};

struct Function {
  std::string name;
  bool entry = false;
  bool defined = false;
  std::uint32_t start = 0;  // first instruction
  std::vector<Param> params;        // kernels: in the parameter buffer; funcs: tparam offsets
  std::uint32_t params_size = 0;
  std::vector<Param> rets;          // funcs: tparam offsets of the return values
  std::vector<std::uint32_t> callees;
};

}  // namespace rig::ptx::detail

namespace rig::ptx {

struct Module::Impl {
  std::string name;
  std::vector<detail::Instr> code;
  std::vector<std::string> text;          // per instruction: its source text
  std::vector<detail::CallSite> calls;
  std::vector<detail::Function> functions;
  std::unordered_map<std::string, std::uint32_t> function_index;
  std::vector<Variable> variables;        // .global and .const
  std::vector<std::uint64_t> addresses;   // per variable, once placed
  std::vector<bool> placed;
  std::uint32_t slots = 0;        // registers per thread
  std::uint32_t shared_static = 0;
  std::uint32_t local_size = 0;   // per thread
  std::uint32_t tparam_size = 0;  // per thread
};

}  // namespace rig::ptx
