// Module::run: executes a kernel over a grid.
//
// Design: every thread is its own resumable context (a program counter, a call stack and a
// slice of the block's register file) and runs alone, in a tight loop over the decoded
// instructions, until it reaches a barrier, a warp-synchronous operation or its exit.
// There it suspends; the last member of its group to arrive completes the operation for
// the whole group (a shuffle reads each member's registers as they were when it arrived)
// and makes them runnable again. A block runs pass after pass over its threads until all
// have exited; a pass in which no thread can run is a deadlock, reported as a fault.
// Compared with running warps in lockstep under an active mask, this needs no
// reconvergence analysis, makes divergence trivially exact (each thread follows its own
// path, as Volta's independent thread scheduling allows), and keeps the inner loop free of
// mask arithmetic; barriers and the .sync warp operations, the only points where threads
// observe one another's timing, are exact because they wait for their whole group.
// Blocks run one after another, so atomics are plain read-modify-writes on memory no other
// block touches at the same time; they still use host atomic instructions so that memory
// the embedder shares with other threads stays coherent.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "decoded.hpp"

namespace rig::ptx {
namespace {

using namespace detail;

struct Fault {
  std::string what;
};

std::uint64_t mask_of(unsigned bits) { return bits >= 64 ? ~0ull : (1ull << bits) - 1; }
std::int64_t sext(std::uint64_t v, unsigned bits) {
  if (bits >= 64) return static_cast<std::int64_t>(v);
  const unsigned s = 64 - bits;
  return static_cast<std::int64_t>(v << s) >> s;
}
float f32(std::uint64_t v) { return std::bit_cast<float>(static_cast<std::uint32_t>(v)); }
double f64(std::uint64_t v) { return std::bit_cast<double>(v); }
std::uint64_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
std::uint64_t bits(double d) { return std::bit_cast<std::uint64_t>(d); }

float ftz(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }

// Rounds the float operations of its scope as `r` says (the library builds with
// -frounding-math, so the compiler keeps them inside the scope).
class Rounding {
 public:
  explicit Rounding(Rnd r) {
    int mode = FE_TONEAREST;
    switch (r) {
      case Rnd::rz: case Rnd::rzi: mode = FE_TOWARDZERO; break;
      case Rnd::rm: case Rnd::rmi: mode = FE_DOWNWARD; break;
      case Rnd::rp: case Rnd::rpi: mode = FE_UPWARD; break;
      default: break;
    }
    if (mode != FE_TONEAREST) { std::fesetround(mode); set_ = true; }
  }
  ~Rounding() { if (set_) std::fesetround(FE_TONEAREST); }
  Rounding(const Rounding&) = delete;
  Rounding& operator=(const Rounding&) = delete;

 private:
  bool set_ = false;
};

enum class State : std::uint8_t { ready, barrier, warp, exited };

struct Frame {
  std::uint32_t ret;
  std::uint32_t site;
};

struct Thread {
  std::uint64_t* r = nullptr;
  std::uint32_t pc = 0;
  State state = State::ready;
  std::uint32_t tid[3] = {0, 0, 0};
  std::uint32_t linear = 0;
  std::byte* local = nullptr;
  std::byte* tparam = nullptr;
  std::vector<Frame> frames;
};

struct Barrier {
  std::uint32_t arrived = 0;
  std::uint32_t expected = 0;  // 0: every live thread
};

class Grid {
 public:
  Grid(const Module::Impl& m, const Function& k, const Launch& l, Memory& mem)
      : m_(m), k_(k), l_(l), mem_(mem) {
    block_threads_ = l.block.x * l.block.y * l.block.z;
    warps_ = (block_threads_ + 31) / 32;
    shared_size_ = static_cast<std::uint64_t>(m.shared_static) + l.dynamic_shared;
    shared_.resize(shared_size_);
    regs_.resize(static_cast<std::size_t>(block_threads_) * m.slots);
    local_.resize(static_cast<std::size_t>(block_threads_) * m.local_size);
    tparam_.resize(static_cast<std::size_t>(block_threads_) * m.tparam_size);
    threads_.resize(block_threads_);
    for (const auto& v : m.addresses) addresses_.push_back(v);
    start_ = std::chrono::steady_clock::now();
  }

  Stats run() {
    for (std::uint32_t z = 0; z < l_.grid.z; ++z)
      for (std::uint32_t y = 0; y < l_.grid.y; ++y)
        for (std::uint32_t x = 0; x < l_.grid.x; ++x) block(x, y, z);
    return Stats{executed_};
  }

 private:
  // --- faults ----------------------------------------------------------------------
  [[noreturn]] void fault(const Thread& t, std::uint32_t pc, std::string_view what) const {
    throw Fault{fmt::format("{} in kernel {} at block ({},{},{}) thread ({},{},{}), line {}: '{}'", what, k_.name,
                            ctaid_[0], ctaid_[1], ctaid_[2], t.tid[0], t.tid[1], t.tid[2], m_.code[pc].line,
                            m_.text[pc])};
  }
  static const char* space_name(Mem s) {
    switch (s) {
      case Mem::generic: return "generic";
      case Mem::global: return "global";
      case Mem::shared: return "shared";
      case Mem::local: return "local";
      case Mem::constant: return "const";
      case Mem::param: return "param";
    }
    return "?";
  }

  // --- one block ---------------------------------------------------------------------
  void block(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
    ctaid_[0] = x; ctaid_[1] = y; ctaid_[2] = z;
    std::fill(shared_.begin(), shared_.end(), std::byte{0});
    std::fill(regs_.begin(), regs_.end(), 0);
    std::fill(local_.begin(), local_.end(), std::byte{0});
    for (auto& b : barriers_) b = Barrier{};
    std::uint32_t i = 0;
    for (std::uint32_t tz = 0; tz < l_.block.z; ++tz)
      for (std::uint32_t ty = 0; ty < l_.block.y; ++ty)
        for (std::uint32_t tx = 0; tx < l_.block.x; ++tx, ++i) {
          Thread& t = threads_[i];
          t.r = regs_.data() + static_cast<std::size_t>(i) * m_.slots;
          t.pc = k_.start;
          t.state = State::ready;
          t.tid[0] = tx; t.tid[1] = ty; t.tid[2] = tz;
          t.linear = i;
          t.local = local_.data() + static_cast<std::size_t>(i) * m_.local_size;
          t.tparam = tparam_.data() + static_cast<std::size_t>(i) * m_.tparam_size;
          t.frames.clear();
        }
    live_ = block_threads_;
    while (live_ > 0) {
      bool ran = false;
      for (auto& t : threads_) {
        if (t.state != State::ready) continue;
        ran = true;
        step(t);
      }
      if (!ran) deadlock();
    }
  }

  [[noreturn]] void deadlock() const {
    for (const auto& t : threads_) {
      if (t.state == State::barrier)
        fault(t, t.pc, fmt::format("deadlock: {} of {} threads arrived at the barrier, the others wait elsewhere or exited",
                                   barriers_[barrier_id(t)].arrived, live_));
      if (t.state == State::warp)
        fault(t, t.pc, "deadlock: a warp operation waits for lanes of its member mask that never arrive");
    }
    throw Fault{fmt::format("deadlock in kernel {}", k_.name)};
  }

  std::uint32_t barrier_id(const Thread& t) const { return static_cast<std::uint32_t>(val(t, m_.code[t.pc].o[0])) & 15; }

  // --- operands ----------------------------------------------------------------------
  std::uint64_t sreg(const Thread& t, Sreg s) const {
    const std::uint32_t lane = t.linear & 31;
    switch (s) {
      case Sreg::tid_x: return t.tid[0];
      case Sreg::tid_y: return t.tid[1];
      case Sreg::tid_z: return t.tid[2];
      case Sreg::ntid_x: return l_.block.x;
      case Sreg::ntid_y: return l_.block.y;
      case Sreg::ntid_z: return l_.block.z;
      case Sreg::ctaid_x: return ctaid_[0];
      case Sreg::ctaid_y: return ctaid_[1];
      case Sreg::ctaid_z: return ctaid_[2];
      case Sreg::nctaid_x: return l_.grid.x;
      case Sreg::nctaid_y: return l_.grid.y;
      case Sreg::nctaid_z: return l_.grid.z;
      case Sreg::laneid: return lane;
      case Sreg::warpid: return t.linear / 32;
      case Sreg::nwarpid: return warps_;
      case Sreg::clock: return static_cast<std::uint32_t>(executed_);
      case Sreg::clock64: return executed_;
      case Sreg::globaltimer:
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
      case Sreg::lanemask_eq: return 1u << lane;
      case Sreg::lanemask_lt: return (1u << lane) - 1;
      case Sreg::lanemask_le: return static_cast<std::uint32_t>((2ull << lane) - 1);
      case Sreg::lanemask_gt: return static_cast<std::uint32_t>(~((2ull << lane) - 1));
      case Sreg::lanemask_ge: return static_cast<std::uint32_t>(~((1u << lane) - 1));
      case Sreg::smid: return 0;
      case Sreg::nsmid: return 1;
      case Sreg::gridid: return 0;
      case Sreg::dynamic_smem_size: return l_.dynamic_shared;
      case Sreg::total_smem_size: return shared_size_;
    }
    return 0;
  }

  std::uint64_t val(const Thread& t, const Operand& o) const {
    switch (o.kind) {
      case K::reg: return t.r[o.slot];
      case K::imm: return static_cast<std::uint64_t>(o.imm);
      case K::sreg: return sreg(t, static_cast<Sreg>(o.imm));
      case K::sym:
        switch (o.area) {
          case Area::var: return addresses_[o.slot];
          case Area::shared: case Area::local: return o.slot;
          default: return 0;
        }
      default: return 0;
    }
  }
  bool pred(const Thread& t, const Operand& o) const { return ((val(t, o) & 1) != 0) != o.neg; }
  static void set(Thread& t, const Operand& o, std::uint64_t v) {
    if (o.kind == K::reg) t.r[o.slot] = v;
  }

  // --- memory ----------------------------------------------------------------------
  std::byte* global(const Thread& t, std::uint32_t pc, std::uint64_t address, std::uint64_t size, bool write, Mem space) {
    if (cache_.host && address >= cache_.base && address - cache_.base <= cache_.size &&
        size <= cache_.size - (address - cache_.base) && (cache_writable_ || !write))
      return cache_.host + (address - cache_.base);
    auto m = mem_.map(address, size, write);
    if (!m || address < m->base || address - m->base > m->size || size > m->size - (address - m->base) || !m->host)
      fault(t, pc, fmt::format("page fault at 0x{:x} ({} of {} bytes, {})", address, write ? "write" : "read", size,
                               space_name(space)));
    cache_ = *m;
    cache_writable_ = write;
    return m->host + (address - m->base);
  }

  // The host bytes of an access of `size` bytes (aligned to `align`) through address operand `a`.
  std::byte* access(Thread& t, std::uint32_t pc, const Instr& in, const Operand& a, std::uint64_t size,
                    std::uint64_t align, bool write) {
    std::uint64_t address = static_cast<std::uint64_t>(a.imm);
    Mem space = in.mem;
    switch (a.area) {
      case Area::reg: address += a.wide ? t.r[a.slot] : static_cast<std::uint32_t>(t.r[a.slot]); break;
      case Area::shared: space = Mem::shared; address += a.slot; break;
      case Area::local: space = Mem::local; address += a.slot; break;
      case Area::var: address += addresses_[a.slot]; break;
      case Area::kparam: {
        address += a.slot;
        if (address > l_.params.size() || size > l_.params.size() - address)
          fault(t, pc, fmt::format("parameter read at offset {} past the {} bytes passed", address, l_.params.size()));
        return const_cast<std::byte*>(l_.params.data()) + address;
      }
      case Area::tparam: {
        address += a.slot;
        if (address > m_.tparam_size || size > m_.tparam_size - address)
          fault(t, pc, fmt::format("parameter access at offset {} outside the parameter space", address));
        return t.tparam + address;
      }
      case Area::none: break;
    }
    if (align > 1 && (address & (align - 1)) != 0)
      fault(t, pc, fmt::format("misaligned address 0x{:x} ({} of {} bytes, {})", address, write ? "write" : "read", size,
                               space_name(space)));
    if (space == Mem::generic) {
      if (address - l_.shared_window < (1ull << 32)) { space = Mem::shared; address -= l_.shared_window; }
      else if (address - l_.local_window < (1ull << 32)) { space = Mem::local; address -= l_.local_window; }
    }
    switch (space) {
      case Mem::shared:
        if (address > shared_size_ || size > shared_size_ - address)
          fault(t, pc, fmt::format("shared memory access at 0x{:x} ({} bytes) outside the block's {} bytes", address,
                                   size, shared_size_));
        return shared_.data() + address;
      case Mem::local:
        if (address > m_.local_size || size > m_.local_size - address)
          fault(t, pc, fmt::format("local memory access at 0x{:x} ({} bytes) outside the thread's {} bytes", address,
                                   size, m_.local_size));
        return t.local + address;
      default:
        return global(t, pc, address, size, write, space);
    }
  }

  // --- execution -------------------------------------------------------------------
  void step(Thread& t);
  void alu(Thread& t, const Instr& in);
  void floats(Thread& t, const Instr& in);
  void convert(Thread& t, const Instr& in);
  void atomic(Thread& t, std::uint32_t pc, const Instr& in);
  void arrive_barrier(Thread& t, const Instr& in);
  void release_barriers();
  void arrive_warp(Thread& t);
  void warp_op(std::span<Thread* const> group, const Instr& in);

  const Module::Impl& m_;
  const Function& k_;
  const Launch& l_;
  Memory& mem_;
  std::uint32_t block_threads_ = 0, warps_ = 0, live_ = 0;
  std::uint64_t shared_size_ = 0;
  std::vector<std::byte> shared_, local_, tparam_;
  std::vector<std::uint64_t> regs_;
  std::vector<Thread> threads_;
  std::vector<std::uint64_t> addresses_;
  Barrier barriers_[16];
  std::uint32_t ctaid_[3] = {0, 0, 0};
  std::uint64_t executed_ = 0;
  Mapping cache_{0, 0, nullptr};
  bool cache_writable_ = false;
  std::chrono::steady_clock::time_point start_;
};

// --- integer and bit operations ----------------------------------------------------------

void Grid::alu(Thread& t, const Instr& in) {
  const unsigned w = bits_of(in.type);
  const bool s = is_signed(in.type);
  const std::uint64_t m = mask_of(w);
  const std::uint64_t a = val(t, in.o[1]), b = in.nops > 2 ? val(t, in.o[2]) : 0, c = in.nops > 3 ? val(t, in.o[3]) : 0;
  // The operands as signed or unsigned 64-bit values of the type's width.
  auto ext = [&](std::uint64_t v) { return s ? static_cast<std::uint64_t>(sext(v, w)) : v & m; };
  auto sat32 = [&](__int128 v) -> std::uint64_t {
    if (v > INT32_MAX) v = INT32_MAX;
    if (v < INT32_MIN) v = INT32_MIN;
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(v)) & m;
  };
  auto hi = [&](std::uint64_t x, std::uint64_t y) -> std::uint64_t {
    if (s) {
      const __int128 p = static_cast<__int128>(sext(x, w)) * sext(y, w);
      return static_cast<std::uint64_t>(p >> w) & m;
    }
    const unsigned __int128 p = static_cast<unsigned __int128>(x & m) * (y & m);
    return static_cast<std::uint64_t>(p >> w) & m;
  };
  auto wide = [&](std::uint64_t x, std::uint64_t y) -> std::uint64_t { return ext(x) * ext(y); };
  std::uint64_t d = 0;
  switch (in.op) {
    case Op::add:
      d = (in.flags & kSat) ? sat32(static_cast<__int128>(sext(a, 32)) + sext(b, 32)) : (a + b) & m;
      break;
    case Op::sub:
      d = (in.flags & kSat) ? sat32(static_cast<__int128>(sext(a, 32)) - sext(b, 32)) : (a - b) & m;
      break;
    case Op::mul:
      d = (in.flags & kHi) ? hi(a, b) : (in.flags & kWide) ? wide(a, b) : (a * b) & m;
      break;
    case Op::mad:
      if (in.flags & kHi) d = (in.flags & kSat) ? sat32(static_cast<__int128>(sext(hi(a, b), 32)) + sext(c, 32)) : (hi(a, b) + c) & m;
      else if (in.flags & kWide) d = wide(a, b) + c;
      else d = (a * b + c) & m;
      break;
    case Op::mul24: case Op::mad24: {
      const std::int64_t x = s ? sext(a, 24) : static_cast<std::int64_t>(a & 0xffffff);
      const std::int64_t y = s ? sext(b, 24) : static_cast<std::int64_t>(b & 0xffffff);
      d = static_cast<std::uint64_t>(x * y) + (in.op == Op::mad24 ? c : 0);
      d &= m;
      break;
    }
    case Op::div:
      if ((b & m) == 0) { d = m; break; }  // division by zero: all ones
      if (s) {
        const std::int64_t x = sext(a, w), y = sext(b, w);
        d = (y == -1) ? static_cast<std::uint64_t>(0) - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x / y);
      } else {
        d = (a & m) / (b & m);
      }
      d &= m;
      break;
    case Op::rem:
      if ((b & m) == 0) { d = a & m; break; }  // remainder by zero: the dividend
      if (s) {
        const std::int64_t x = sext(a, w), y = sext(b, w);
        d = y == -1 ? 0 : static_cast<std::uint64_t>(x % y);
      } else {
        d = (a & m) % (b & m);
      }
      d &= m;
      break;
    case Op::abs: {  // in unsigned arithmetic: the most negative value is its own absolute value
      const std::int64_t x = sext(a, w);
      d = (x < 0 ? std::uint64_t(0) - static_cast<std::uint64_t>(x) : static_cast<std::uint64_t>(x)) & m;
      break;
    }
    case Op::neg: d = (0 - a) & m; break;
    case Op::min: d = s ? (sext(a, w) < sext(b, w) ? a : b) & m : std::min(a & m, b & m); break;
    case Op::max: d = s ? (sext(a, w) > sext(b, w) ? a : b) & m : std::max(a & m, b & m); break;
    case Op::and_: d = a & b & m; break;
    case Op::or_: d = (a | b) & m; break;
    case Op::xor_: d = (a ^ b) & m; break;
    case Op::not_: d = ~a & m; break;
    case Op::cnot: d = (a & m) == 0 ? 1 : 0; break;
    case Op::shl: { const std::uint32_t n = static_cast<std::uint32_t>(b); d = n >= w ? 0 : (a << n) & m; break; }
    case Op::shr: {
      const std::uint32_t n = static_cast<std::uint32_t>(b);
      if (s) d = static_cast<std::uint64_t>(sext(a, w) >> std::min<std::uint32_t>(n, w - 1)) & m;
      else d = n >= w ? 0 : (a & m) >> n;
      break;
    }
    case Op::popc: d = static_cast<std::uint64_t>(std::popcount(a & m)); break;
    case Op::clz: d = static_cast<std::uint64_t>(std::countl_zero(a & m) - (64 - static_cast<int>(w))); break;
    case Op::brev: {
      std::uint64_t x = a & m, r = 0;
      for (unsigned i = 0; i < w; ++i) r |= ((x >> i) & 1) << (w - 1 - i);
      d = r;
      break;
    }
    case Op::bfe: {
      const unsigned pos = b & 0xff, len = c & 0xff, msb = w - 1;
      const std::uint64_t sbit = (s && len > 0) ? (a >> std::min(pos + len - 1, msb)) & 1 : 0;
      std::uint64_t r = 0;
      for (unsigned i = 0; i <= msb; ++i) {
        const std::uint64_t bit = (i < len && pos + i <= msb) ? (a >> (pos + i)) & 1 : sbit;
        r |= bit << i;
      }
      d = r;
      break;
    }
    case Op::bfi: {
      const std::uint64_t e = val(t, in.o[4]);
      const unsigned pos = c & 0xff, len = e & 0xff, msb = w - 1;
      std::uint64_t r = b & m;
      for (unsigned i = 0; i < len && pos + i <= msb; ++i) r = (r & ~(1ull << (pos + i))) | (((a >> i) & 1) << (pos + i));
      d = r;
      break;
    }
    case Op::prmt: {
      const std::uint64_t bytes = (b & 0xffffffffull) << 32 | (a & 0xffffffffull);
      std::uint32_t r = 0;
      for (unsigned i = 0; i < 4; ++i) {
        const unsigned sel = (c >> (4 * i)) & 0xf;
        std::uint32_t byte = (bytes >> (8 * (sel & 7))) & 0xff;
        if (sel & 8) byte = (byte & 0x80) ? 0xff : 0;
        r |= byte << (8 * i);
      }
      d = r;
      break;
    }
    case Op::sad: {
      const std::uint64_t x = ext(a), y = ext(b);
      const std::uint64_t diff = s ? (static_cast<std::int64_t>(x) > static_cast<std::int64_t>(y) ? x - y : y - x)
                                   : (x > y ? x - y : y - x);
      d = (c + diff) & m;
      break;
    }
    case Op::shf: {
      std::uint32_t n = static_cast<std::uint32_t>(c);
      n = (in.flags & kClamp) ? std::min<std::uint32_t>(n, 32) : n & 31;
      const std::uint64_t pair = (b & 0xffffffffull) << 32 | (a & 0xffffffffull);
      d = (in.flags & kShiftLeft) ? static_cast<std::uint32_t>((pair << n) >> 32) : static_cast<std::uint32_t>(pair >> n);
      break;
    }
    default: break;
  }
  set(t, in.o[0], d);
}

// --- floating point ----------------------------------------------------------------------

template <class F>
F float_min(F a, F b, bool max) {
  if (std::isnan(a)) return std::isnan(b) ? std::numeric_limits<F>::quiet_NaN() : b;
  if (std::isnan(b)) return a;
  if (a == b) return (std::signbit(a) != max) ? a : b;  // min(-0, +0) = -0
  return (a < b) != max ? a : b;
}

template <class F>
F compute(const Instr& in, F a, F b, F c) {
  Rounding rounding(in.rnd);
  volatile F x = a, y = b, z = c;  // kept inside the rounding scope
  switch (in.op) {
    case Op::add: return x + y;
    case Op::sub: return x - y;
    case Op::mul: return x * y;
    case Op::fma: case Op::mad: return std::fma(static_cast<F>(x), static_cast<F>(y), static_cast<F>(z));
    case Op::div: return x / y;
    case Op::min: return float_min<F>(x, y, false);
    case Op::max: return float_min<F>(x, y, true);
    case Op::abs: return std::fabs(static_cast<F>(x));
    case Op::neg: return -x;
    case Op::rcp: return F(1) / x;
    case Op::sqrt: return std::sqrt(static_cast<F>(x));
    case Op::rsqrt: return F(1) / std::sqrt(static_cast<F>(x));
    case Op::ex2: return std::exp2(static_cast<F>(x));
    case Op::lg2: return std::log2(static_cast<F>(x));
    case Op::sin: return std::sin(static_cast<F>(x));
    case Op::cos: return std::cos(static_cast<F>(x));
    case Op::tanh: return std::tanh(static_cast<F>(x));
    case Op::copysign: return std::copysign(static_cast<F>(y), static_cast<F>(x));
    default: return 0;
  }
}

void Grid::floats(Thread& t, const Instr& in) {
  const std::uint64_t a = val(t, in.o[1]), b = in.nops > 2 ? val(t, in.o[2]) : 0, c = in.nops > 3 ? val(t, in.o[3]) : 0;
  const bool sat = in.flags & kSat;
  if (in.type == T::f64) {
    double d = compute<double>(in, f64(a), f64(b), f64(c));
    if (sat) d = std::isnan(d) ? 0.0 : std::clamp(d, 0.0, 1.0);
    set(t, in.o[0], bits(d));
    return;
  }
  const bool z = in.flags & kFtz;
  float x = f32(a), y = f32(b), w = f32(c);
  if (z) { x = ftz(x); y = ftz(y); w = ftz(w); }
  float d = compute<float>(in, x, y, w);
  if (z) d = ftz(d);
  if (sat) d = std::isnan(d) ? 0.0f : std::clamp(d, 0.0f, 1.0f);
  set(t, in.o[0], bits(d));
}

// The value of `v` of type `t` as a double, or as an integer.
double as_double(std::uint64_t v, T t, bool z) {
  switch (t) {
    case T::f64: return f64(v);
    case T::f32: return z ? ftz(f32(v)) : f32(v);
    case T::f16: return static_cast<double>(std::bit_cast<_Float16>(static_cast<std::uint16_t>(v)));
    case T::bf16: return std::bit_cast<float>(static_cast<std::uint32_t>((v & 0xffff) << 16));
    default: return 0;
  }
}

bool compare(Cmp c, double a, double b) {
  const bool unordered = std::isnan(a) || std::isnan(b);
  switch (c) {
    case Cmp::eq: return !unordered && a == b;
    case Cmp::ne: return !unordered && a != b;
    case Cmp::lt: case Cmp::lo: return !unordered && a < b;
    case Cmp::le: case Cmp::ls: return !unordered && a <= b;
    case Cmp::gt: case Cmp::hi: return !unordered && a > b;
    case Cmp::ge: case Cmp::hs: return !unordered && a >= b;
    case Cmp::equ: return unordered || a == b;
    case Cmp::neu: return unordered || a != b;
    case Cmp::ltu: return unordered || a < b;
    case Cmp::leu: return unordered || a <= b;
    case Cmp::gtu: return unordered || a > b;
    case Cmp::geu: return unordered || a >= b;
    case Cmp::num: return !unordered;
    case Cmp::nan: return unordered;
  }
  return false;
}

template <class I>
bool compare_int(Cmp c, I a, I b) {
  switch (c) {
    case Cmp::eq: return a == b;
    case Cmp::ne: return a != b;
    case Cmp::lt: case Cmp::lo: return a < b;
    case Cmp::le: case Cmp::ls: return a <= b;
    case Cmp::gt: case Cmp::hi: return a > b;
    case Cmp::ge: case Cmp::hs: return a >= b;
    default: return false;
  }
}

bool compare_values(const Instr& in, T t, std::uint64_t a, std::uint64_t b) {
  if (is_float(t)) return compare(in.cmp, as_double(a, t, in.flags & kFtz), as_double(b, t, in.flags & kFtz));
  const unsigned w = bits_of(t);
  if (t == T::pred) return compare_int(in.cmp, a & 1, b & 1);
  // The unsigned comparisons (lo, ls, hi, hs) compare as unsigned whatever the type.
  const bool unsigned_cmp = in.cmp == Cmp::lo || in.cmp == Cmp::ls || in.cmp == Cmp::hi || in.cmp == Cmp::hs;
  if (is_signed(t) && !unsigned_cmp) return compare_int(in.cmp, sext(a, w), sext(b, w));
  return compare_int(in.cmp, a & mask_of(w), b & mask_of(w));
}

// Rounds to an integral value as rni/rzi/rmi/rpi say.
double integral(double v, Rnd r) {
  switch (r) {
    case Rnd::rzi: return std::trunc(v);
    case Rnd::rmi: return std::floor(v);
    case Rnd::rpi: return std::ceil(v);
    default: return std::nearbyint(v);  // to nearest even in the default mode
  }
}

void Grid::convert(Thread& t, const Instr& in) {
  const std::uint64_t a = val(t, in.o[1]);
  const T dt = in.type, st = in.type2;
  const unsigned dw = bits_of(dt), sw = bits_of(st);
  const bool z = in.flags & kFtz;
  std::uint64_t d = 0;
  if (!is_float(st) && !is_float(dt)) {
    if (in.flags & kSat) {
      // clamp the source value to the destination's range
      if (is_signed(st)) {
        std::int64_t v = sext(a, sw);
        const std::int64_t lo = is_signed(dt) ? (dw >= 64 ? INT64_MIN : -(1ll << (dw - 1))) : 0;
        const std::int64_t hi = is_signed(dt) ? (dw >= 64 ? INT64_MAX : (1ll << (dw - 1)) - 1)
                                              : (dw >= 64 ? INT64_MAX : static_cast<std::int64_t>(mask_of(dw)));
        v = std::clamp(v, lo, hi);
        d = static_cast<std::uint64_t>(v);
      } else {
        std::uint64_t v = a & mask_of(sw);
        const std::uint64_t hi = is_signed(dt) ? mask_of(dw - 1) : mask_of(dw);
        d = std::min(v, hi);
      }
    } else {
      d = is_signed(st) ? static_cast<std::uint64_t>(sext(a, sw)) : a & mask_of(sw);
    }
    if (is_signed(dt)) d = static_cast<std::uint64_t>(sext(d, dw));
    set(t, in.o[0], dw >= 64 ? d : (is_signed(dt) ? d & mask_of(dw) : d & mask_of(dw)));
    return;
  }
  if (!is_float(st)) {
    // integer to float, rounded as .rn/.rz/.rm/.rp say
    Rounding rounding(in.rnd);
    const bool neg = is_signed(st);
    const std::int64_t sv = sext(a, sw);
    const std::uint64_t uv = a & mask_of(sw);
    if (dt == T::f64) {
      volatile double v = neg ? static_cast<double>(sv) : static_cast<double>(uv);
      d = bits(static_cast<double>(v));
    } else if (dt == T::f32) {
      volatile float v = neg ? static_cast<float>(sv) : static_cast<float>(uv);
      float f = v;
      if (in.flags & kSat) f = std::clamp(f, 0.0f, 1.0f);
      d = bits(f);
    } else if (dt == T::f16) {
      d = std::bit_cast<std::uint16_t>(static_cast<_Float16>(neg ? static_cast<float>(sv) : static_cast<float>(uv)));
    } else {
      const float f = neg ? static_cast<float>(sv) : static_cast<float>(uv);
      d = std::bit_cast<std::uint32_t>(f) >> 16;
    }
    set(t, in.o[0], d);
    return;
  }
  const double v = as_double(a, st, z);
  if (!is_float(dt)) {
    // float to integer: rounded to an integral value, NaN to 0, clamped to the range
    if (std::isnan(v)) { set(t, in.o[0], 0); return; }
    const double r = integral(v, in.rnd);
    if (is_signed(dt)) {
      const double lo = -std::ldexp(1.0, static_cast<int>(dw) - 1), hi = std::ldexp(1.0, static_cast<int>(dw) - 1);
      std::int64_t x = r <= lo ? static_cast<std::int64_t>(lo) : r >= hi ? (dw >= 64 ? INT64_MAX : static_cast<std::int64_t>(hi) - 1)
                                                                        : static_cast<std::int64_t>(r);
      d = static_cast<std::uint64_t>(x) & mask_of(dw);
    } else {
      const double hi = std::ldexp(1.0, static_cast<int>(dw));
      d = r <= 0 ? 0 : r >= hi ? mask_of(dw) : static_cast<std::uint64_t>(r);
    }
    set(t, in.o[0], d);
    return;
  }
  // float to float
  const bool round_integral = in.rnd == Rnd::rni || in.rnd == Rnd::rzi || in.rnd == Rnd::rmi || in.rnd == Rnd::rpi;
  if (dt == T::f64) {
    double r = round_integral ? integral(v, in.rnd) : v;
    if (in.flags & kSat) r = std::isnan(r) ? 0.0 : std::clamp(r, 0.0, 1.0);
    d = bits(r);
  } else if (dt == T::f32) {
    float f;
    if (round_integral) {
      f = static_cast<float>(integral(v, in.rnd));
    } else {
      Rounding rounding(in.rnd);
      volatile double src = v;
      f = static_cast<float>(src);
    }
    if (z) f = ftz(f);
    if (in.flags & kSat) f = std::isnan(f) ? 0.0f : std::clamp(f, 0.0f, 1.0f);
    d = bits(f);
  } else if (dt == T::f16) {
    const double r = round_integral ? integral(v, in.rnd) : v;
    _Float16 h = static_cast<_Float16>(r);
    if (in.flags & kSat) h = std::isnan(static_cast<float>(h)) ? _Float16(0) : static_cast<_Float16>(std::clamp(static_cast<float>(h), 0.0f, 1.0f));
    d = std::bit_cast<std::uint16_t>(h);
  } else {
    // bf16, to nearest even
    float f = static_cast<float>(round_integral ? integral(v, in.rnd) : v);
    if (in.flags & kSat) f = std::isnan(f) ? 0.0f : std::clamp(f, 0.0f, 1.0f);
    std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if (std::isnan(f)) d = 0x7fc0;
    else d = (u + 0x7fff + ((u >> 16) & 1)) >> 16;
  }
  set(t, in.o[0], d);
}

// --- atomics -----------------------------------------------------------------------------

template <class U>
U atomic_update(U* p, Sub op, T type, U b, U c) {
  U old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  for (;;) {
    U next = old;
    using S = std::make_signed_t<U>;
    const bool s = is_signed(type);
    switch (op) {
      case Sub::add:
        if (type == T::f32) next = static_cast<U>(std::bit_cast<std::uint32_t>(std::bit_cast<float>(static_cast<std::uint32_t>(old)) + std::bit_cast<float>(static_cast<std::uint32_t>(b))));
        else if (type == T::f64) next = static_cast<U>(std::bit_cast<std::uint64_t>(std::bit_cast<double>(static_cast<std::uint64_t>(old)) + std::bit_cast<double>(static_cast<std::uint64_t>(b))));
        else next = old + b;
        break;
      case Sub::min: next = s ? (static_cast<S>(b) < static_cast<S>(old) ? b : old) : std::min(old, b); break;
      case Sub::max: next = s ? (static_cast<S>(b) > static_cast<S>(old) ? b : old) : std::max(old, b); break;
      case Sub::inc: next = old >= b ? 0 : old + 1; break;
      case Sub::dec: next = (old == 0 || old > b) ? b : old - 1; break;
      case Sub::and_: next = old & b; break;
      case Sub::or_: next = old | b; break;
      case Sub::xor_: next = old ^ b; break;
      case Sub::exch: next = b; break;
      case Sub::cas: next = old == b ? c : old; break;
      default: break;
    }
    if (__atomic_compare_exchange_n(p, &old, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return old;
  }
}

void Grid::atomic(Thread& t, std::uint32_t pc, const Instr& in) {
  const std::size_t base = in.op == Op::atom ? 1 : 0;
  const unsigned size = bits_of(in.type) / 8;
  std::byte* p = access(t, pc, in, in.o[base], size, size, true);
  const std::uint64_t b = val(t, in.o[base + 1]);
  const std::uint64_t c = in.sub == Sub::cas ? val(t, in.o[base + 2]) : 0;
  std::uint64_t old;
  if (size == 4) {
    old = atomic_update<std::uint32_t>(reinterpret_cast<std::uint32_t*>(p), in.sub, in.type, static_cast<std::uint32_t>(b),
                                       static_cast<std::uint32_t>(c));
  } else {
    old = atomic_update<std::uint64_t>(reinterpret_cast<std::uint64_t*>(p), in.sub, in.type, b, c);
  }
  if (base) set(t, in.o[0], old);
}

// --- barriers and warp operations --------------------------------------------------------

void Grid::arrive_barrier(Thread& t, const Instr& in) {
  const std::uint32_t id = static_cast<std::uint32_t>(val(t, in.o[0])) & 15;
  Barrier& b = barriers_[id];
  b.expected = in.nops > 1 ? static_cast<std::uint32_t>(val(t, in.o[1])) : 0;
  ++b.arrived;
  if (in.op == Op::bar_sync) t.state = State::barrier;
  else ++t.pc;
  release_barriers();
}

// Releases every barrier whose expected count has arrived (all live threads, by default).
void Grid::release_barriers() {
  for (std::uint32_t id = 0; id < 16; ++id) {
    Barrier& b = barriers_[id];
    if (b.arrived == 0) continue;
    const std::uint32_t expected = b.expected ? b.expected : live_;
    if (b.arrived < expected) continue;
    b = Barrier{};
    for (auto& t : threads_) {
      if (t.state == State::barrier && barrier_id(t) == id) {
        t.state = State::ready;
        ++t.pc;
      }
    }
  }
}

void Grid::arrive_warp(Thread& t) {
  t.state = State::warp;
  const Instr& in = m_.code[t.pc];
  const std::uint32_t warp = t.linear / 32;
  const std::uint32_t first = warp * 32, last = std::min(first + 32, block_threads_);
  const Operand& mask_op = in.op == Op::bar_warp ? in.o[0] : in.op == Op::shfl ? in.o[4] : in.o[2];
  std::uint32_t members = 0;
  if (in.op != Op::activemask) members = static_cast<std::uint32_t>(val(t, mask_op));
  if (!(members >> (t.linear & 31) & 1)) fault(t, t.pc, fmt::format("the thread is not in the member mask 0x{:08x}", members));
  // Lanes past the end of the block and lanes that exited do not take part.
  Thread* members_here[32];
  std::size_t count = 0;
  for (std::uint32_t i = first; i < last; ++i) {
    if (!(members >> (i - first) & 1)) continue;
    Thread& u = threads_[i];
    if (u.state == State::exited) continue;
    if (u.state != State::warp || u.pc != t.pc) return;  // not all here yet
    if (static_cast<std::uint32_t>(val(u, mask_op)) != members)
      fault(u, u.pc, fmt::format("lanes disagree on the member mask (0x{:08x} and 0x{:08x})", static_cast<std::uint32_t>(val(u, mask_op)), members));
    members_here[count++] = &u;
  }
  const std::span<Thread* const> group(members_here, count);
  warp_op(group, in);
  for (Thread* u : group) {
    u->state = State::ready;
    ++u->pc;
  }
}

void Grid::warp_op(std::span<Thread* const> group, const Instr& in) {
  std::uint32_t present = 0;
  for (const Thread* u : group) present |= 1u << (u->linear & 31);
  switch (in.op) {
    case Op::bar_warp: return;
    case Op::shfl: {
      const std::uint32_t first = group.front()->linear & ~31u;
      std::uint32_t results[32];
      bool valid[32];
      for (std::size_t k = 0; k < group.size(); ++k) {
        const Thread& u = *group[k];
        const std::uint32_t lane = u.linear & 31;
        const std::uint32_t b = static_cast<std::uint32_t>(val(u, in.o[2])) & 31;
        const std::uint32_t c = static_cast<std::uint32_t>(val(u, in.o[3]));
        const std::uint32_t cval = c & 31, segmask = (c >> 8) & 31;
        const std::uint32_t max_lane = (lane & segmask) | (cval & ~segmask), min_lane = lane & segmask;
        std::int32_t j = 0;
        bool p = false;
        switch (in.sub) {
          case Sub::up: j = static_cast<std::int32_t>(lane) - static_cast<std::int32_t>(b); p = j >= static_cast<std::int32_t>(max_lane); break;
          case Sub::down: j = static_cast<std::int32_t>(lane + b); p = j <= static_cast<std::int32_t>(max_lane); break;
          case Sub::bfly: j = static_cast<std::int32_t>(lane ^ b); p = j <= static_cast<std::int32_t>(max_lane); break;
          default: j = static_cast<std::int32_t>(min_lane | (b & ~segmask)); p = j <= static_cast<std::int32_t>(max_lane); break;
        }
        if (!p) j = static_cast<std::int32_t>(lane);
        // A source lane outside the group gives an undefined value: here the reader's own.
        const Thread& src = (present >> j & 1) ? threads_[first + static_cast<std::uint32_t>(j)] : u;
        results[k] = static_cast<std::uint32_t>(val(src, in.o[1]));
        valid[k] = p;
      }
      for (std::size_t k = 0; k < group.size(); ++k) {
        set(*group[k], in.o[0], results[k]);
        set(*group[k], in.o[5], valid[k] ? 1 : 0);
      }
      return;
    }
    case Op::vote: {
      std::uint32_t ballot = 0;
      for (const Thread* u : group) ballot |= static_cast<std::uint32_t>(pred(*u, in.o[1])) << (u->linear & 31);
      std::uint64_t d = 0;
      switch (in.sub) {
        case Sub::ballot: d = ballot; break;
        case Sub::all: d = ballot == present; break;
        case Sub::any: d = ballot != 0; break;
        default: d = ballot == present || ballot == 0; break;
      }
      for (Thread* u : group) set(*u, in.o[0], d);
      return;
    }
    case Op::match: {
      const std::uint64_t m = in.type == T::b32 ? 0xffffffffull : ~0ull;
      std::uint64_t v[32];
      for (std::size_t k = 0; k < group.size(); ++k) v[k] = val(*group[k], in.o[1]) & m;
      bool all = true;
      for (std::size_t k = 0; k < group.size(); ++k) all = all && v[k] == v[0];
      for (std::size_t k = 0; k < group.size(); ++k) {
        std::uint32_t same = 0;
        if (in.sub == Sub::any) {
          for (std::size_t q = 0; q < group.size(); ++q)
            if (v[q] == v[k]) same |= 1u << (group[q]->linear & 31);
        } else {
          same = all ? present : 0;
        }
        set(*group[k], in.o[0], same);
        set(*group[k], in.o[5], all ? 1 : 0);
      }
      return;
    }
    case Op::redux: {
      const bool s = in.type == T::s32;
      std::uint32_t acc = static_cast<std::uint32_t>(val(*group[0], in.o[1]));
      for (std::size_t k = 1; k < group.size(); ++k) {
        const std::uint32_t x = static_cast<std::uint32_t>(val(*group[k], in.o[1]));
        switch (in.sub) {
          case Sub::add: acc += x; break;
          case Sub::min: acc = s ? static_cast<std::uint32_t>(std::min(static_cast<std::int32_t>(acc), static_cast<std::int32_t>(x))) : std::min(acc, x); break;
          case Sub::max: acc = s ? static_cast<std::uint32_t>(std::max(static_cast<std::int32_t>(acc), static_cast<std::int32_t>(x))) : std::max(acc, x); break;
          case Sub::and_: acc &= x; break;
          case Sub::or_: acc |= x; break;
          default: acc ^= x; break;
        }
      }
      for (Thread* u : group) set(*u, in.o[0], acc);
      return;
    }
    default: return;
  }
}

// --- the loop ----------------------------------------------------------------------------

void Grid::step(Thread& t) {
  const Instr* code = m_.code.data();
  for (;;) {
    const std::uint32_t pc = t.pc;
    const Instr& in = code[pc];
    ++executed_;
    if (in.guard != UINT32_MAX && ((t.r[in.guard] & 1) != 0) == in.guard_neg) { t.pc = pc + 1; continue; }
    switch (in.op) {
      case Op::add: case Op::sub: case Op::mul: case Op::mad: case Op::div: case Op::min: case Op::max:
      case Op::abs: case Op::neg: case Op::fma:
        if (is_float(in.type)) floats(t, in);
        else alu(t, in);
        break;
      case Op::rcp: case Op::sqrt: case Op::rsqrt: case Op::ex2: case Op::lg2: case Op::sin: case Op::cos:
      case Op::tanh: case Op::copysign:
        floats(t, in);
        break;
      case Op::mul24: case Op::mad24: case Op::rem: case Op::and_: case Op::or_: case Op::xor_: case Op::not_:
      case Op::cnot: case Op::shl: case Op::shr: case Op::popc: case Op::clz: case Op::brev: case Op::bfe:
      case Op::bfi: case Op::prmt: case Op::sad: case Op::shf:
        alu(t, in);
        break;
      case Op::testp: {
        const double v = as_double(val(t, in.o[1]), in.type, false);
        bool r = false;
        switch (in.sub) {
          case Sub::add: r = std::isfinite(v); break;
          case Sub::min: r = std::isinf(v); break;
          case Sub::max: r = !std::isnan(v); break;
          case Sub::inc: r = std::isnan(v); break;
          case Sub::dec: r = std::isnormal(in.type == T::f32 ? static_cast<float>(v) : v); break;
          default: r = std::fpclassify(in.type == T::f32 ? static_cast<float>(v) : v) == FP_SUBNORMAL; break;
        }
        set(t, in.o[0], r);
        break;
      }
      case Op::selp: set(t, in.o[0], pred(t, in.o[3]) ? val(t, in.o[1]) : val(t, in.o[2])); break;
      case Op::slct: {
        const std::uint64_t c = val(t, in.o[3]);
        bool take_a;
        if (in.type2 == T::f32) {
          const float f = (in.flags & kFtz) ? ftz(f32(c)) : f32(c);
          take_a = f >= 0.0f;
        } else {
          take_a = sext(c, 32) >= 0;
        }
        set(t, in.o[0], take_a ? val(t, in.o[1]) : val(t, in.o[2]));
        break;
      }
      case Op::setp: case Op::set: {
        const bool r = compare_values(in, in.type2, val(t, in.o[1]), val(t, in.o[2]));
        auto combine = [&](bool x) {
          if (in.boolop == Bool::none) return x;
          const bool c = pred(t, in.o[3]);
          return in.boolop == Bool::and_ ? x && c : in.boolop == Bool::or_ ? x || c : x != c;
        };
        if (in.op == Op::setp) {
          const bool p = combine(r), q = combine(!r);
          set(t, in.o[0], p);
          if (in.flags & kHi) set(t, in.o[5], q);
        } else {
          const bool p = combine(r);
          set(t, in.o[0], in.type == T::f32 ? (p ? bits(1.0f) : 0) : (p ? mask_of(bits_of(in.type)) : 0));
        }
        break;
      }
      case Op::mov:
        if (in.o[0].kind == K::vec) {
          const std::uint64_t v = val(t, in.o[1]);
          const unsigned n = static_cast<unsigned>(in.o[0].imm), w = bits_of(in.type) / n;
          for (unsigned i = 0; i < n; ++i)
            if (in.vec[i] != UINT32_MAX) t.r[in.vec[i]] = (v >> (w * i)) & mask_of(w);
        } else if (in.o[1].kind == K::vec) {
          const unsigned n = static_cast<unsigned>(in.o[1].imm), w = bits_of(in.type) / n;
          std::uint64_t v = 0;
          for (unsigned i = 0; i < n; ++i) v |= (t.r[in.vec[i]] & mask_of(w)) << (w * i);
          set(t, in.o[0], v);
        } else {
          const std::uint64_t v = val(t, in.o[1]);
          set(t, in.o[0], in.type == T::pred ? (v & 1) : v & mask_of(bits_of(in.type)));
        }
        break;
      case Op::cvt: convert(t, in); break;
      case Op::cvta: {
        std::uint64_t v = val(t, in.o[1]);
        const std::uint64_t window = in.mem == Mem::shared ? l_.shared_window : in.mem == Mem::local ? l_.local_window : 0;
        v = in.sub == Sub::to ? v - window : v + window;
        set(t, in.o[0], v & mask_of(bits_of(in.type)));
        break;
      }
      case Op::ld: case Op::st: {
        const bool load = in.op == Op::ld;
        const unsigned size = bits_of(in.type) / 8;
        const unsigned n = in.o[load ? 0 : 1].kind == K::vec ? static_cast<unsigned>(in.o[load ? 0 : 1].imm) : 1;
        std::byte* p = access(t, pc, in, in.o[load ? 1 : 0], static_cast<std::uint64_t>(size) * n,
                              static_cast<std::uint64_t>(size) * n, !load);
        for (unsigned i = 0; i < n; ++i) {
          const std::uint32_t slot = n > 1 ? in.vec[i] : in.o[load ? 0 : 1].slot;
          if (load) {
            std::uint64_t v = 0;
            std::memcpy(&v, p + i * size, size);
            if (is_signed(in.type)) v = static_cast<std::uint64_t>(sext(v, size * 8));
            if (slot != UINT32_MAX && (n > 1 || in.o[0].kind == K::reg)) t.r[slot] = v;
          } else {
            const std::uint64_t v = n > 1 ? t.r[slot] : val(t, in.o[1]);
            std::memcpy(p + i * size, &v, size);
          }
        }
        break;
      }
      case Op::atom: case Op::red: atomic(t, pc, in); break;
      case Op::bar_sync: case Op::bar_arrive:
        arrive_barrier(t, in);
        if (t.state != State::ready) return;
        continue;
      case Op::bar_warp: case Op::shfl: case Op::vote: case Op::match: case Op::redux:
        arrive_warp(t);
        if (t.state != State::ready) return;
        continue;
      case Op::activemask: {
        // The lanes of the warp that have not exited (see docs/ptx.md).
        const std::uint32_t first = t.linear & ~31u;
        std::uint32_t m = 0;
        for (std::uint32_t i = first; i < std::min(first + 32, block_threads_); ++i)
          if (threads_[i].state != State::exited) m |= 1u << (i - first);
        set(t, in.o[0], m);
        break;
      }
      case Op::membar: case Op::nop: break;
      case Op::bra:
        if (executed_ > l_.max_instructions) fault(t, pc, fmt::format("ran past {} instructions", l_.max_instructions));
        t.pc = static_cast<std::uint32_t>(in.o[0].imm);
        continue;
      case Op::call: {
        const CallSite& site = m_.calls[in.call];
        if (t.frames.size() >= 1024) fault(t, pc, "call stack too deep");
        for (std::size_t i = 0; i < site.args.size(); ++i)
          std::memmove(t.tparam + site.args[i].second, t.tparam + site.args[i].first, site.sizes[i]);
        t.frames.push_back(Frame{pc + 1, in.call});
        t.pc = m_.functions[site.function].start;
        continue;
      }
      case Op::ret:
        if (!t.frames.empty()) {
          const Frame f = t.frames.back();
          t.frames.pop_back();
          const CallSite& site = m_.calls[f.site];
          for (std::size_t i = 0; i < site.rets.size(); ++i)
            std::memmove(t.tparam + site.rets[i].second, t.tparam + site.rets[i].first, site.ret_sizes[i]);
          t.pc = f.ret;
          continue;
        }
        [[fallthrough]];
      case Op::exit:
        t.state = State::exited;
        --live_;
        release_barriers();
        // Groups of this warp waiting at warp operations for this lane may now be complete
        // (arrive_warp completes a group at most once: its members become ready).
        for (std::uint32_t i = t.linear & ~31u; i < std::min((t.linear & ~31u) + 32, block_threads_); ++i) {
          Thread& u = threads_[i];
          if (u.state == State::warp) arrive_warp(u);
        }
        return;
      case Op::trap: fault(t, pc, "trap");
      case Op::count: break;
    }
    t.pc = pc + 1;
  }
}

}  // namespace

std::expected<Stats, std::string> Module::run(std::string_view kernel, const Launch& launch, Memory& memory) const {
  auto it = impl_->function_index.find(std::string(kernel));
  if (it == impl_->function_index.end() || !impl_->functions[it->second].entry || !impl_->functions[it->second].defined)
    return std::unexpected(fmt::format("{}: no kernel named '{}'", impl_->name, kernel));
  const detail::Function& k = impl_->functions[it->second];
  if (launch.params.size() < k.params_size)
    return std::unexpected(fmt::format("{}: kernel {} takes {} bytes of parameters, {} were passed", impl_->name,
                                       kernel, k.params_size, launch.params.size()));
  const std::uint64_t threads = static_cast<std::uint64_t>(launch.block.x) * launch.block.y * launch.block.z;
  if (threads == 0 || static_cast<std::uint64_t>(launch.grid.x) * launch.grid.y * launch.grid.z == 0)
    return std::unexpected(fmt::format("{}: kernel {}: an empty grid or block", impl_->name, kernel));
  if (threads > 1024)
    return std::unexpected(fmt::format("{}: kernel {}: {} threads in a block (at most 1024)", impl_->name, kernel, threads));
  // The limits of sm_90: 227 KiB of shared memory a block, 512 KiB of local memory a thread.
  const std::uint64_t shared = static_cast<std::uint64_t>(impl_->shared_static) + launch.dynamic_shared;
  if (shared > 227 * 1024)
    return std::unexpected(fmt::format("{}: kernel {}: {} bytes of shared memory (at most {})", impl_->name, kernel,
                                       shared, 227 * 1024));
  if (static_cast<std::uint64_t>(impl_->slots) * threads * 8 > (512ull << 20))
    return std::unexpected(fmt::format("{}: kernel {}: {} registers a thread for {} threads is more than 512 MiB",
                                       impl_->name, kernel, impl_->slots, threads));
  if (impl_->local_size > 512 * 1024 || impl_->tparam_size > 512 * 1024)
    return std::unexpected(fmt::format("{}: kernel {}: {} bytes of local memory a thread (at most {})", impl_->name,
                                       kernel, std::max(impl_->local_size, impl_->tparam_size), 512 * 1024));
  for (std::size_t i = 0; i < impl_->variables.size(); ++i)
    if (!impl_->placed[i])
      return std::unexpected(fmt::format("{}: kernel {}: variable '{}' has no address (Module::place)", impl_->name,
                                         kernel, impl_->variables[i].name));
  try {
    Grid grid(*impl_, k, launch, memory);
    return grid.run();
  } catch (const Fault& f) {
    return std::unexpected(fmt::format("{}: {}", impl_->name, f.what));
  }
}

}  // namespace rig::ptx
