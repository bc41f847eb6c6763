// The CDNA interpreter (tests/sim/amd/gfx9.hpp): its decoder against LLVM's disassembler on
// every instruction of its subset (for gfx942 and gfx90a) and of the compiled kernels; its
// semantics on a program whose results the MI300 ISA fixes (tests/amd/kernels/gfx9_program.s);
// kernels from C (tests/amd/kernels/gfx9_kernels.c) against the same computations on the
// host; and its refusals.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "build_outputs.hpp"
#include "code_object.hpp"
#include "gfx9.hpp"

namespace gfx9 = rig::sim::amd::gfx9;

using rig::test::amd::disassembly;
using rig::test::amd::slurp;

namespace {

std::string built(const std::string& file) { return slurp(fmt::format("{}/{}", RIG_AMD_KERNEL_DIR, file)); }

void check_listing(gfx9::Target target, const std::string& file) {
  auto listed = disassembly(built(file));
  REQUIRE(listed.size() > 20);
  for (auto& l : listed) {
    CAPTURE(l.mnemonic);
    std::size_t length = 0;
    std::string why;
    std::string mine = gfx9::mnemonic(target, l.words.data(), l.words.size(), length, &why);
    CAPTURE(why);
    CHECK(mine == l.mnemonic);
    CHECK(length == l.words.size());
  }
}

// Memory of the test: ranges of host bytes at GPU addresses.
struct Ranges final : gfx9::Memory {
  std::map<std::uint64_t, std::vector<std::byte>> ranges;
  std::byte* at(std::uint64_t a, std::size_t n, bool) override {
    auto it = ranges.upper_bound(a);
    if (it == ranges.begin()) return nullptr;
    --it;
    if (a - it->first + n > it->second.size()) return nullptr;
    return it->second.data() + (a - it->first);
  }
  template <class T>
  void put(std::uint64_t a, const std::vector<T>& values) {
    auto& r = ranges[a];
    r.assign(values.size() * sizeof(T), std::byte{0});
    std::memcpy(r.data(), values.data(), r.size());
  }
  template <class T>
  std::vector<T> get(std::uint64_t a, std::size_t count) {
    std::vector<T> out(count);
    std::byte* p = at(a, count * sizeof(T), false);
    REQUIRE(p);
    std::memcpy(out.data(), p, count * sizeof(T));
    return out;
  }
};

std::atomic<bool> no_stop{false};

// ---- The semantics program.

constexpr std::uint64_t kCodeAt = 0x100000, kOutAt = 0x200000, kKernargAt = 0x300000;
constexpr std::uint32_t kBlocks = 26;

struct Program {
  Ranges memory;
  gfx9::Dispatch d;
  Program() {
    std::string code = built("gfx9_program.bin");
    memory.ranges[kCodeAt].resize(code.size() + 64);
    std::memcpy(memory.ranges[kCodeAt].data(), code.data(), code.size());
    memory.ranges[kOutAt].assign(kBlocks * 256, std::byte{0});
    d.code = kCodeAt;
    d.rsrc1 = 1 | 3 << 6;        // 16 VGPRs, 32 SGPRs
    d.rsrc2 = 2 << 1 | 2 << 15;  // 2 user SGPRs, 1024 bytes of LDS
    d.user_data[0] = std::uint32_t(kOutAt), d.user_data[1] = 0;
    d.threads[0] = 64;
    d.private_bytes = 16;
  }
  std::vector<std::uint32_t> block(std::uint32_t k) { return memory.get<std::uint32_t>(kOutAt + 256 * k, 64); }
};

// ---- Kernels from code objects.

// A kernel of a built code object placed at kCodeAt, with its arguments at kKernargAt.
struct Kernel {
  Ranges memory;
  gfx9::Dispatch d;
  rig::amd::Kernel kernel;
  std::uint64_t next_buffer = 0x1000000;

  Kernel(gfx9::Target target, const std::string& name, std::uint32_t threads, std::uint32_t groups) {
    std::string bytes = built(target == gfx9::Target::gfx942 ? "gfx9_kernels_gfx942.co" : "gfx9_kernels_gfx90a.co");
    d.target = target;
    std::span<const std::byte> elf(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size());
    auto object = rig::amd::read_code_object(elf);
    REQUIRE_MESSAGE(object, (object ? std::string() : object.error()));
    const rig::amd::Kernel* k = object->find(name);
    REQUIRE_MESSAGE(k, "no kernel ", name);
    kernel = *k;
    auto image = rig::amd::place(*object, elf, kCodeAt);
    REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
    auto& code = memory.ranges[kCodeAt];
    code.resize(image->size() + 64);
    std::memcpy(code.data(), image->data(), image->size());
    // The kernarg segment, rounded up as a runtime allocates it: SMEM may load past its end.
    memory.ranges[kKernargAt].assign((kernel.kernarg_segment_size + 255) & ~255u, std::byte{0});
    const auto& kd = kernel.descriptor;
    REQUIRE(!kd.wave32());
    d.code = kCodeAt + kernel.code_address();
    d.rsrc1 = kd.compute_pgm_rsrc1, d.rsrc3 = kd.compute_pgm_rsrc3;
    // The CP's LDS_SIZE from the group segment, in 512-byte granules.
    d.rsrc2 = kd.compute_pgm_rsrc2 | ((kernel.group_segment_fixed_size + 511) / 512) << 15;
    d.private_bytes = kernel.private_segment_fixed_size;
    d.threads[0] = threads, d.groups[0] = groups;
    // The user SGPRs the descriptor asks for, in the ABI's order.
    using KD = rig::amd::KernelDescriptor;
    std::uint32_t s = 0;
    auto pair = [&](std::uint64_t v) { d.user_data[s] = std::uint32_t(v), d.user_data[s + 1] = std::uint32_t(v >> 32), s += 2; };
    if (kd.kernel_code_properties & KD::kPrivateSegmentBuffer) {  // a V# with ADD_TID_ENABLE, from byte 0
      d.user_data[0] = 0, d.user_data[1] = 0, d.user_data[2] = 0xffffffff, d.user_data[3] = 1u << 23;
      s = 4;
    }
    if (kd.kernel_code_properties & KD::kDispatchPtr) pair(0);
    if (kd.kernel_code_properties & KD::kQueuePtr) pair(0);
    if (kd.kernel_code_properties & KD::kKernargSegmentPtr) pair(kKernargAt);
    if (kd.kernel_code_properties & KD::kDispatchId) pair(0);
    if (kd.kernel_code_properties & KD::kFlatScratchInit) pair(0);
    if (kd.kernel_code_properties & KD::kPrivateSegmentSize) d.user_data[s++] = d.private_bytes;
    REQUIRE(s == kd.user_sgpr_count());
  }
  // A buffer holding `values`, its address in argument `index`.
  template <class T>
  std::uint64_t buffer(std::size_t index, const std::vector<T>& values) {
    std::uint64_t at = next_buffer;
    next_buffer += (values.size() * sizeof(T) + 0xffff) & ~std::uint64_t(0xffff);
    memory.put(at, values);
    argument(index, at);
    return at;
  }
  template <class T>
  void argument(std::size_t index, T value) {
    REQUIRE(index < kernel.args.size());
    REQUIRE(kernel.args[index].size == sizeof(T));
    std::memcpy(memory.ranges[kKernargAt].data() + kernel.args[index].offset, &value, sizeof(T));
  }
  gfx9::Outcome run() { return gfx9::run(d, memory, no_stop); }
};

std::uint32_t mix(std::uint32_t x) {  // a fixed scramble for test inputs
  x ^= x >> 16, x *= 0x7feb352d, x ^= x >> 15, x *= 0x846ca68b, x ^= x >> 16;
  return x;
}

std::vector<std::uint32_t> words_of(std::initializer_list<std::uint32_t> w) { return w; }

constexpr gfx9::Target kTargets[] = {gfx9::Target::gfx942, gfx9::Target::gfx90a};
std::string target_name(gfx9::Target t) { return t == gfx9::Target::gfx942 ? "gfx942" : "gfx90a"; }

}  // namespace

TEST_CASE("the decoder names every instruction of its gfx942 subset as LLVM does") {
  check_listing(gfx9::Target::gfx942, "gfx9_subset_gfx942.dis");
}

TEST_CASE("the decoder names every instruction of its gfx90a subset as LLVM does") {
  check_listing(gfx9::Target::gfx90a, "gfx9_subset_gfx90a.dis");
}

TEST_CASE("the decoder names every instruction of the kernels compiled for gfx942 as LLVM does") {
  check_listing(gfx9::Target::gfx942, "gfx9_kernels_gfx942.dis");
}

TEST_CASE("the decoder names every instruction of the kernels compiled for gfx90a as LLVM does") {
  check_listing(gfx9::Target::gfx90a, "gfx9_kernels_gfx90a.dis");
}

TEST_CASE("the decoder keeps each processor's own instructions to that processor") {
  std::size_t length = 0;
  auto mov_b64 = words_of({0x7e047104});  // v_mov_b64_e32 v[2:3], v[4:5] (gfx940 on)
  CHECK(gfx9::mnemonic(gfx9::Target::gfx942, mov_b64.data(), 1, length) == "v_mov_b64_e32");
  std::string why;
  CHECK(gfx9::mnemonic(gfx9::Target::gfx90a, mov_b64.data(), 1, length, &why) == "");
  CHECK(why == "unknown VOP1 instruction: opcode 56 (encoding 0x7e047104)");
  auto wbinvl1 = words_of({0xe0fc0000, 0x00000000});  // buffer_wbinvl1_vol (gfx90a)
  CHECK(gfx9::mnemonic(gfx9::Target::gfx90a, wbinvl1.data(), 2, length) == "buffer_wbinvl1_vol");
  CHECK(gfx9::mnemonic(gfx9::Target::gfx942, wbinvl1.data(), 2, length, &why) == "");
  CHECK(why.find("MUBUF opcode 63") != std::string::npos);
}

TEST_CASE("the decoder refuses MFMA, AGPR, cut-off and unknown encodings, naming the instruction or opcode") {
  std::size_t length = 0;
  std::string why;
  auto mfma = words_of({0xd3cc8000, 0x04020500});  // v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15]
  CHECK(gfx9::mnemonic(gfx9::Target::gfx942, mfma.data(), 2, length, &why) == "");
  CHECK(why == "v_mfma_f32_32x32x8_f16: MFMA is not simulated (encoding 0xd3cc8000)");
  CHECK(length == 1);
  gfx9::mnemonic(gfx9::Target::gfx90a, mfma.data(), 2, length, &why);
  CHECK(why == "v_mfma_f32_32x32x8f16: MFMA is not simulated (encoding 0xd3cc8000)");
  auto acc = words_of({0xd3d84001, 0x18000102});  // v_accvgpr_read_b32 v1, a2
  gfx9::mnemonic(gfx9::Target::gfx942, acc.data(), 2, length, &why);
  CHECK(why == "v_accvgpr_read_b32: AGPR moves are not simulated (encoding 0xd3d84001)");
  auto pk = words_of({0xd38a4000, 0x18020501});  // v_pk_add_u16 v0, v1, v2
  gfx9::mnemonic(gfx9::Target::gfx942, pk.data(), 2, length, &why);
  CHECK(why == "unknown VOP3P instruction: opcode 10 (encoding 0xd38a4000)");
  auto to_agpr = words_of({0xdc508000, 0x01ff0002});  // global_load_dword a1, v[2:3], off
  gfx9::mnemonic(gfx9::Target::gfx942, to_agpr.data(), 2, length, &why);
  CHECK(why == "global_load_dword on AGPRs is not simulated (encoding 0xdc508000)");
  auto sdwa = words_of({0x680206f9});  // v_add_u32_sdwa v1, v2, v3 dst_sel:WORD_1 ... without its SDWA word
  gfx9::mnemonic(gfx9::Target::gfx942, sdwa.data(), 1, length, &why);
  CHECK(why == "an SDWA word past the code (encoding 0x680206f9)");
  auto sop1 = words_of({0xbe80ff00});  // SOP1 opcode 255: none
  gfx9::mnemonic(gfx9::Target::gfx942, sop1.data(), 1, length, &why);
  CHECK(why == "unknown SOP1 instruction: opcode 255 (encoding 0xbe80ff00)");
  auto cut = words_of({0xd2800002});  // v_add_f64 without its second dword
  gfx9::mnemonic(gfx9::Target::gfx942, cut.data(), 1, length, &why);
  CHECK(why == "a 64-bit instruction past the code (encoding 0xd2800002)");
}

TEST_CASE("a dispatch faults on MFMA code, naming the instruction and its address") {
  Ranges memory;
  memory.put(kCodeAt, words_of({0xd3cc8000, 0x04020500, 0xbf810000}));
  gfx9::Dispatch d;
  d.code = kCodeAt;
  d.threads[0] = 64;
  auto outcome = gfx9::run(d, memory, no_stop);
  CHECK(!outcome.ok);
  CHECK(outcome.fault == "v_mfma_f32_32x32x8_f16: MFMA is not simulated (encoding 0xd3cc8000) at 0x100000 (group 0,0,0)");
}

TEST_CASE("the interpreter computes what the ISA says on a program of scalar, vector, DPP, LDS, scratch and atomic work") {
  Program p;
  auto outcome = gfx9::run(p.d, p.memory, no_stop);
  REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  auto b0 = p.block(0), b1 = p.block(1), b2 = p.block(2), b3 = p.block(3), b4 = p.block(4), b5 = p.block(5),
       b6 = p.block(6), b7 = p.block(7), b8 = p.block(8), b9 = p.block(9), b10 = p.block(10), b11 = p.block(11),
       b12 = p.block(12), b13 = p.block(13), b14 = p.block(14), b15 = p.block(15), b16 = p.block(16),
       b17 = p.block(17), b18 = p.block(18), b19 = p.block(19), b20 = p.block(20), b21 = p.block(21),
       b22 = p.block(22), b23 = p.block(23), b24 = p.block(24), b25 = p.block(25);
  CHECK(b1[0] == 0);
  CHECK(b1[1] == 0xffffff00u);
  CHECK(b11[0] == 40);
  CHECK(b11[1] == 24);
  CHECK(b11[2] == 11);
  CHECK(b11[3] == 13);
  CHECK(b16[0] == 77);
  CHECK(b16[1] == 2026);
  for (std::uint32_t l = 0; l < 64; ++l) {
    CAPTURE(l);
    CHECK(b0[l] == (l > 39 ? 1u : 0u));
    CHECK(b2[l] == (l < 8 ? 2u : 0u));
    CHECK(b3[l] == (l >= 1 ? 1u : 0u));
    CHECK(std::bit_cast<float>(b4[l]) == float(3.0 * l / 8));
    CHECK(b5[l] == (l % 16 == 0 ? l : 2 * l - 1));
    std::uint32_t row = l / 16;
    CHECK(b6[l] == (row == 1 ? 15u : row == 3 ? 47u : 100u));
    auto quad = [](std::uint32_t x) { return (x & ~3u) + 3 - (x & 3); };
    CHECK(b7[l] == (l == 0 ? 7u : quad(l - 1)));
    static constexpr std::uint32_t kSwap[] = {1, 0, 3, 2};
    CHECK(b8[l] == ((3 * (63 - l)) << 16 | 3 * ((l & ~3u) + kSwap[l & 3])));
    CHECK(b9[l] == 2 * (l ^ 1) + 1000);
    CHECK(b10[l] == 5 + l);
    CHECK(b12[l] == l + l / 2);
    CHECK(b13[l] == 7 * l);
    CHECK(b14[l] == 2 * l);
    CHECK(b15[l] == 10 + l * (l - 1) / 2);
    CHECK(b17[l] == 2 * l * l + 4 * l);
    std::uint32_t x16 = (l - 3) & 0xffff;
    CHECK(b18[l] == ((x16 < 100 ? 1u << 31 : 0u) | x16));
    CHECK(b19[l] == (l << 16 | (1 + l / 2) << 8 | (3 * l + 7)));
    CHECK(b20[l] == std::uint32_t(-57));
    CHECK(b21[l] == (((l + 0xabcd) & 0xffff) << 16 | (l == 5 ? 0x1111u : 0x1110u)));
    CHECK(b22[l] == 0xffffffabu);
    int e;
    double m = std::frexp(double(l + 1), &e);
    CHECK(b23[l] == (std::uint32_t(m * 4096) << 8 | std::uint32_t(e)));
    CHECK(b24[l] == l);
    CHECK(b25[l] == ((l < 32 ? 1u : 0u) << 8 | (l & 31)));
  }
}

// ---- The f16, mixed-precision and trigonometric program (tests/amd/kernels/gfx9_mix.s).

namespace {

constexpr std::uint32_t kMixBlocks = 12;
constexpr std::uint64_t kMixIn = 0x400000;

std::uint16_t half_bits(float x) { return std::bit_cast<std::uint16_t>(_Float16(x)); }
float half_value(std::uint32_t bits) { return float(std::bit_cast<_Float16>(std::uint16_t(bits & 0xffff))); }
bool half_nan(std::uint32_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
// The host's fused f16 result: the product and sum in binary128, exact for these operands,
// then one rounding to f16 (libgcc's conversion, to nearest even).
std::uint32_t host_fma_half(float a, float b, float c) {
  return std::bit_cast<std::uint16_t>(_Float16(__float128(a) * __float128(b) + __float128(c)));
}
// Whether an f16 result matches the host's, NaN matching any NaN.
bool same_half(std::uint32_t got, std::uint32_t want) {
  return half_nan(want) ? half_nan(got) : (got & 0xffff) == (want & 0xffff);
}
// sin or cos of 2 pi x as the ISA defines it on [-256, 256] (0.0 and 1.0 outside, NaN for NaN),
// from long double, and whether `got` is within one f32 step of it, give or take the reference's
// own error: 2 pi x rounded to long double's 64 bits is off by up to 2^-53 for |x| <= 256, which
// shows where the result is near zero.
constexpr float kTurnError = 0x1p-52f;
bool near_revolution(float got, float x, bool cosine) {
  CAPTURE(x);
  CAPTURE(got);
  if (std::isnan(x)) return std::isnan(got);
  if (std::fabs(x) > 256.0f) return got == (cosine ? 1.0f : 0.0f);
  long double turn = 2 * 3.141592653589793238462643383279502884L * (long double)x;
  float want = float(cosine ? std::cos(turn) : std::sin(turn));
  float step = std::nextafter(std::fabs(want), 2.0f) - std::fabs(want);
  return std::fabs(got - want) <= step + kTurnError;
}

struct MixProgram {
  Ranges memory;
  gfx9::Dispatch d;
  std::vector<std::uint32_t> in;  // a, b, c, d of each lane
  explicit MixProgram(gfx9::Target target) : in(4 * 64) {
    std::string code = built("gfx9_mix.bin");
    memory.ranges[kCodeAt].resize(code.size() + 64);
    std::memcpy(memory.ranges[kCodeAt].data(), code.data(), code.size());
    memory.ranges[kOutAt].assign(kMixBlocks * 256, std::byte{0});
    d.target = target;
    d.code = kCodeAt;
    d.rsrc1 = 1 | 3 << 6;  // 16 VGPRs, 32 SGPRs
    d.rsrc2 = 4 << 1;      // 4 user SGPRs
    d.user_data[0] = std::uint32_t(kMixIn), d.user_data[2] = std::uint32_t(kOutAt);
    d.threads[0] = 64;
    auto f32 = [](float x) { return std::bit_cast<std::uint32_t>(x); };
    auto pair = [](float lo, float hi) { return std::uint32_t(half_bits(lo)) | std::uint32_t(half_bits(hi)) << 16; };
    auto pair_bits = [](std::uint32_t lo, std::uint32_t hi) { return lo | hi << 16; };
    for (std::uint32_t l = 0; l < 64; ++l) {
      std::uint32_t r = mix(l + 300);
      if (l % 2) {  // f16 pairs, moderate magnitudes, either sign
        in[4 * l] = pair(half_value((r & 0x83ff) | (8 + r % 16) << 10), half_value((r >> 16 & 0x83ff) | 0x3800));
      } else {  // f32 values of magnitude 2^-7 .. 2^9, either sign
        in[4 * l] = (r & 0x807fffffu) | (120 + (r >> 8) % 16) << 23;
      }
      in[4 * l + 1] = (mix(l + 400) & 0x807fffffu) | (120 + mix(l + 500) % 16) << 23;
      in[4 * l + 2] = l % 3 ? mix(l + 600) : (mix(l + 600) & 0x807fffffu) | (118 + mix(l + 700) % 16) << 23;
      in[4 * l + 3] = mix(l + 800);
    }
    // Lanes with chosen operands. Lane 0 gives the SGPR source s4 (its b) to every lane.
    auto set = [&](std::uint32_t l, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
      in[4 * l] = a, in[4 * l + 1] = b, in[4 * l + 2] = c;
    };
    set(0, f32(0.25f), pair(1.5f, -2.0f), pair(0.5f, 3.0f));
    // 2049 * 1 + 2^-60 lies just above the f16 halfway point 2049: one rounding gives 2050, an
    // f32 fma first (2049) and then f16 would give 2048.
    set(2, f32(2049.0f), f32(1.0f), f32(std::ldexp(1.0f, -60)));
    set(4, f32(2049.0f), f32(1.0f), f32(-std::ldexp(1.0f, -60)));
    // The same in packed f16: 683 * 3 = 2049, plus 2^-14.
    set(6, pair(683.0f, 683.0f), pair(3.0f, 3.0f), pair(std::ldexp(1.0f, -14), -std::ldexp(1.0f, -14)));
    // Zeros of both signs, f16 denormals and the smallest normal, the largest f16.
    set(8, f32(-0.0f), pair_bits(0x8000, 0x0001), pair_bits(0x8000, 0x0000));
    set(10, pair_bits(0x0001, 0x03ff), pair_bits(0x3c00, 0x7bff), pair_bits(0x0400, 0x8001));
    set(12, f32(1e-40f), f32(-3.0f), f32(-1e-40f));  // f32 denormals
    set(14, f32(0.5f), f32(-0.75f), pair_bits(0xfbff, 0x7bff));
    // Results past the f16 range, NaN and infinities.
    set(16, f32(65519.0f), f32(1.0f), f32(0.0f));
    set(18, f32(std::numeric_limits<float>::infinity()), f32(0.0f), f32(1.0f));
    set(20, f32(std::numeric_limits<float>::quiet_NaN()), f32(1.0f), pair_bits(0x7c00, 0xfc00));
    // Sine and cosine: whole quarters, the range's ends and beyond, tiny arguments.
    set(22, f32(-0.75f), f32(256.0f), 0);
    set(24, f32(1.0f), f32(-256.5f), 0);
    set(26, f32(300.0f), f32(1e-7f), 0);
    set(28, f32(-std::numeric_limits<float>::infinity()), f32(0.125f), 0);
    set(30, f32(255.99998f), f32(-0.0f), 0);
    memory.put(kMixIn, in);
  }
  void run() {
    auto outcome = gfx9::run(d, memory, no_stop);
    REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  }
  std::vector<std::uint32_t> block(std::uint32_t k) { return memory.get<std::uint32_t>(kOutAt + 256 * k, 64); }
};

}  // namespace

TEST_CASE("the mixed-precision and packed f16 fmas round once and pick halves, signs and sizes as op_sel, op_sel_hi, neg and abs say, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
    CAPTURE(target_name(target));
    MixProgram p(target);
    p.run();
    std::vector<std::vector<std::uint32_t>> out;
    for (std::uint32_t k = 0; k < 8; ++k) out.push_back(p.block(k));
    auto f = [](std::uint32_t x) { return std::bit_cast<float>(x); };
    auto lo = [](std::uint32_t x) { return half_value(x); };
    auto hi = [](std::uint32_t x) { return half_value(x >> 16); };
    auto same_f32 = [](std::uint32_t got, float want) {
      return std::isnan(want) ? std::isnan(std::bit_cast<float>(got)) : got == std::bit_cast<std::uint32_t>(want);
    };
    const std::uint32_t s4 = p.in[1];
    for (std::uint32_t l = 0; l < 64; ++l) {
      CAPTURE(l);
      std::uint32_t a = p.in[4 * l], b = p.in[4 * l + 1], c = p.in[4 * l + 2], d = p.in[4 * l + 3];
      CHECK(same_f32(out[0][l], std::fma(f(a), f(b), f(c))));
      CHECK(same_f32(out[1][l], std::fma(lo(a), hi(b), f(c))));
      CHECK(same_f32(out[2][l], std::fma(-hi(a), std::fabs(f(b)), -std::fabs(lo(c)))));
      CHECK(same_half(out[3][l], host_fma_half(f(a), f(b), f(c))));
      CHECK((out[3][l] >> 16) == (d >> 16));
      CHECK(same_half(out[4][l], host_fma_half(hi(a), hi(b), lo(c))));
      CHECK((out[4][l] >> 16) == (d >> 16));
      CHECK(same_half(out[5][l] >> 16, host_fma_half(-f(a), lo(s4), std::fabs(hi(c)))));
      CHECK((out[5][l] & 0xffff) == (d & 0xffff));
      CHECK(same_half(out[6][l], host_fma_half(lo(a), lo(b), lo(c))));
      CHECK(same_half(out[6][l] >> 16, host_fma_half(hi(a), hi(b), hi(c))));
      CHECK(same_half(out[7][l], host_fma_half(-hi(a), lo(b), hi(c))));
      CHECK(same_half(out[7][l] >> 16, host_fma_half(lo(a), -hi(b), -lo(c))));
    }
    // The chosen lanes' results, written out.
    CHECK((out[3][2] & 0xffff) == 0x6801);  // 2050: rounded once
    CHECK((out[3][4] & 0xffff) == 0x6800);  // 2048
    CHECK((out[6][6] & 0xffff) == 0x6801);
    CHECK((out[6][6] >> 16) == 0x6800u);
    CHECK((out[3][16] & 0xffff) == 0x7bff);  // 65519 rounds to the largest f16
    CHECK(half_nan(out[3][18]));             // inf * 0
  }
}

TEST_CASE("v_sin_f32 and v_cos_f32 take revolutions and give 0 and 1 outside [-256, 256], on gfx942 and gfx90a") {
  for (auto target : kTargets) {
    CAPTURE(target_name(target));
    MixProgram p(target);
    p.run();
    auto sin_a = p.block(8), cos_a = p.block(9), sin_b = p.block(10), cos_b = p.block(11);
    auto f = [](std::uint32_t x) { return std::bit_cast<float>(x); };
    for (std::uint32_t l = 0; l < 64; l += 2) {  // the even lanes' a are f32 values
      CAPTURE(l);
      CHECK(near_revolution(f(sin_a[l]), f(p.in[4 * l]), false));
      CHECK(near_revolution(f(cos_a[l]), f(p.in[4 * l]), true));
    }
    for (std::uint32_t l = 0; l < 64; ++l) {
      CAPTURE(l);
      float b = f(p.in[4 * l + 1]);
      CHECK(near_revolution(f(sin_b[l]), -std::fabs(b), false));
      CHECK(near_revolution(f(cos_b[l]), b, true));
    }
    // Whole quarters exactly: sin(2 pi / 4) = 1, cos(-3 pi / 2) = 0, sin(2 pi) = 0, cos(2 pi) = 1.
    CHECK(f(sin_a[0]) == 1.0f);
    CHECK(f(cos_a[0]) == 0.0f);
    CHECK(f(sin_a[22]) == 1.0f);
    CHECK(f(cos_a[22]) == 0.0f);
    CHECK(f(sin_a[24]) == 0.0f);
    CHECK(f(cos_a[24]) == 1.0f);
    CHECK(f(cos_b[22]) == 1.0f);   // 256 is in range
    CHECK(f(cos_b[24]) == 1.0f);   // -256.5 is not: 1.0, where cos(2 pi * -256.5) would be -1
    CHECK(f(sin_b[24]) == 0.0f);
    CHECK(f(sin_a[26]) == 0.0f);   // 300
    CHECK(f(cos_a[26]) == 1.0f);
    CHECK(f(sin_a[28]) == 0.0f);   // -inf
    CHECK(f(cos_a[28]) == 1.0f);
    CHECK(std::isnan(f(sin_a[20])));
    CHECK(std::isnan(f(cos_a[20])));
    CHECK(sin_b[30] == 0x80000000u);  // sin(-0) = -0
  }
}

TEST_CASE("the f16 and mixed-precision fmas refuse clamp and constant operands, naming the instruction") {
  Ranges memory;
  // v_fma_mix_f32 v0, v1, v2, v3 clamp; then v_pk_fma_f16 v0, v1, 1.0, v3; then s_endpgm.
  for (auto words : {words_of({0xd3a08000, 0x040e0501, 0xbf810000}), words_of({0xd38e4000, 0x1c0de501, 0xbf810000})}) {
    memory.put(kCodeAt, words);
    gfx9::Dispatch d;
    d.code = kCodeAt;
    d.rsrc1 = 1 | 3 << 6;
    d.threads[0] = 64;
    auto outcome = gfx9::run(d, memory, no_stop);
    CHECK(!outcome.ok);
    CHECK(outcome.fault == (words[0] == 0xd3a08000 ? "v_fma_mix_f32 at 0x100000: v_fma_mix_f32 with clamp is not simulated (group 0,0,0)"
                                                   : "v_pk_fma_f16 at 0x100000: v_pk_fma_f16 with a constant operand is not simulated (group 0,0,0)"));
  }
}

TEST_CASE("the interpreter faults on a VGPR or SGPR the dispatch did not allocate") {
  Program p;
  p.d.rsrc1 = 0 | 3 << 6;  // 8 VGPRs: the program uses v10 first
  auto outcome = gfx9::run(p.d, p.memory, no_stop);
  CHECK(!outcome.ok);
  CHECK(outcome.fault == "v_lshlrev_b32_e32 at 0x100000: VGPR v10 outside the 8 the dispatch allocated (group 0,0,0)");
  p.d.rsrc1 = 1;  // 8 SGPRs: the program uses s20 next
  outcome = gfx9::run(p.d, p.memory, no_stop);
  CHECK(!outcome.ok);
  CHECK(outcome.fault == "s_mov_b64 at 0x100004: SGPR s20 outside the 8 the dispatch allocated (group 0,0,0)");
}

TEST_CASE("the interpreter faults on LDS and private bytes the dispatch did not allocate") {
  Program p;
  p.d.rsrc2 = 2 << 1 | 1 << 15;  // 512 bytes of LDS: block 10 writes byte 0x200
  auto outcome = gfx9::run(p.d, p.memory, no_stop);
  CHECK(!outcome.ok);
  CHECK(outcome.fault.find("ds_write_b32 at LDS byte 0x200, outside the 512 bytes the dispatch allocated") !=
        std::string::npos);
  Program q;
  q.d.private_bytes = 12;  // block 13 stores at private byte 12
  outcome = gfx9::run(q.d, q.memory, no_stop);
  CHECK(!outcome.ok);
  CHECK(outcome.fault.find("scratch_store_dword at private byte 0xc of lane 0, outside the 12 bytes the dispatch "
                           "allocated per work-item") != std::string::npos);
}

TEST_CASE("the interpreter faults on memory outside the map, naming the address and the instruction") {
  Program p;
  p.d.user_data[0] = 0x900000;  // nothing is mapped there
  auto outcome = gfx9::run(p.d, p.memory, no_stop);
  CHECK(!outcome.ok);
  CHECK(outcome.page_fault);
  CHECK(outcome.write);
  CHECK(outcome.fault_address == 0x900000);
  CHECK(outcome.fault == "page fault at 0x900000 (write) by global_store_dword (group 0,0,0)");
}

TEST_CASE("the interpreter refuses a wave32 dispatch and stops when asked") {
  Program p;
  p.d.wave64 = false;
  auto outcome = gfx9::run(p.d, p.memory, no_stop);
  CHECK(!outcome.ok);
  CHECK(outcome.fault == "a wave32 dispatch: gfx90a and gfx942 run wave64 only (group 0,0,0)");
  Program q;
  std::atomic<bool> stop{true};
  outcome = gfx9::run(q.d, q.memory, stop);
  CHECK(!outcome.ok);
  CHECK(outcome.fault.starts_with("stopped"));
}

TEST_CASE("random machine code ends every dispatch in a clean outcome, never a crash") {
  // Each program is 48 instructions of the decoder's subset listing, half of them with some
  // random low operand bits (three programs in four), or 48 random dwords, then s_endpgm; on both
  // processors, with 64 KiB of mapped data at 0 so that some accesses land. A watchdog stops a
  // run that loops.
  auto subset = disassembly(built("gfx9_subset_gfx942.dis"));
  REQUIRE(subset.size() > 100);
  std::atomic<bool> stop{false}, finished{false};
  std::atomic<std::int64_t> started{0};
  auto now = [] { return std::chrono::steady_clock::now().time_since_epoch().count(); };
  std::thread watchdog([&] {
    while (!finished) {
      auto t = started.load();
      if (t && now() - t > std::chrono::nanoseconds(std::chrono::milliseconds(20)).count()) stop = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::mt19937 random(12345);
  int faults = 0, stopped = 0;
  std::uint64_t instructions = 0;
  for (int n = 0; n < 400; ++n) {
    Ranges memory;
    std::vector<std::uint32_t> code;
    for (int k = 0; k < 48; ++k) {
      if (n % 4 == 3) {
        code.push_back(random());
        continue;
      }
      auto words = subset[random() % subset.size()].words;
      words[0] ^= random() & 0x0307 & -(random() % 2);  // low register and offset bits, sometimes
      if (words.size() > 1) words[1] ^= random() & 0x03070307 & -(random() % 2);
      code.insert(code.end(), words.begin(), words.end());
    }
    code.push_back(0xbf810000);  // s_endpgm
    memory.put(kCodeAt, code);
    memory.ranges[0].assign(0x10000, std::byte{0});
    gfx9::Dispatch d;
    d.target = n % 2 ? gfx9::Target::gfx90a : gfx9::Target::gfx942;
    d.code = kCodeAt;
    d.rsrc1 = 3 | 3 << 6, d.rsrc2 = 2 << 1 | 1 << 7 | 1 << 15;
    d.threads[0] = 128, d.private_bytes = 64;
    stop = false;
    started = now();
    auto outcome = gfx9::run(d, memory, stop);
    started = 0;
    CAPTURE(n);
    CHECK((outcome.ok || !outcome.fault.empty()));
    faults += !outcome.ok, stopped += outcome.fault.starts_with("stopped");
    instructions += outcome.instructions;
  }
  finished = true;
  watchdog.join();
  CHECK(faults > 100);          // random code rarely runs to its end
  CHECK(instructions > 4000);   // but runs much of the way there
  MESSAGE(faults, " faults, ", stopped, " stopped, ", instructions, " instructions");
}

TEST_CASE("a prefix sum across two waves with barriers matches the host's, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
  CAPTURE(target_name(target));
  Kernel k(target, "scan128", 128, 2);
  std::vector<std::uint32_t> in(256), out(256, 0);
  for (std::uint32_t i = 0; i < 256; ++i) in[i] = mix(i) % 1000;
  k.buffer(0, in);
  std::uint64_t out_at = k.buffer(1, out);
  auto outcome = k.run();
  REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  auto got = k.memory.get<std::uint32_t>(out_at, 256);
  for (std::uint32_t g = 0; g < 2; ++g) {
    std::uint32_t sum = 0;
    for (std::uint32_t t = 0; t < 128; ++t) {
      sum += in[g * 128 + t];
      CHECK(got[g * 128 + t] == sum);
    }
  }
}
}

TEST_CASE("64-bit compares in loops match the host's walk, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
  CAPTURE(target_name(target));
  Kernel k(target, "walk64", 64, 2);
  std::vector<std::uint64_t> seed(128), peak(128, 0);
  for (std::uint32_t i = 0; i < 128; ++i) seed[i] = (std::uint64_t(mix(i)) << 20) | mix(i + 1000) % 4096;
  const std::uint64_t limit = 1000;
  k.buffer(0, seed);
  k.argument(1, limit);
  std::uint64_t steps_at = k.buffer(2, std::vector<std::uint32_t>(128, 0));
  std::uint64_t peak_at = k.buffer(3, peak);
  auto outcome = k.run();
  REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  auto steps = k.memory.get<std::uint32_t>(steps_at, 128);
  auto peaks = k.memory.get<std::uint64_t>(peak_at, 128);
  for (std::uint32_t i = 0; i < 128; ++i) {
    std::uint64_t x = seed[i], top = x;
    std::uint32_t n = 0;
    while (x >= limit && n < 500) {
      x = (x & 1) ? 3 * x + 1 : x >> 1;
      top = std::max(top, x);
      ++n;
    }
    CAPTURE(i);
    CHECK(steps[i] == n);
    CHECK(peaks[i] == top);
  }
}
}

TEST_CASE("lane exchanges by ds_bpermute, ds_swizzle and DPP match the host's, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
  CAPTURE(target_name(target));
  Kernel k(target, "exchange", 64, 1);
  std::vector<std::uint32_t> in(64);
  for (std::uint32_t i = 0; i < 64; ++i) in[i] = mix(i + 7);
  k.buffer(0, in);
  std::uint64_t out_at = k.buffer(1, std::vector<std::uint32_t>(256, 0));
  auto outcome = k.run();
  REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  auto got = k.memory.get<std::uint32_t>(out_at, 256);
  std::uint32_t total = std::accumulate(in.begin(), in.end(), 0u);
  for (std::uint32_t t = 0; t < 64; ++t) {
    CAPTURE(t);
    CHECK(got[4 * t] == in[t ^ 5]);
    CHECK(got[4 * t + 1] == in[t ^ 1]);
    CHECK(got[4 * t + 2] == total);
    CHECK(got[4 * t + 3] == (t % 16 == 0 ? in[t] : in[t - 1]));
  }
}
}

TEST_CASE("float and double arithmetic and conversions match the host's, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
  CAPTURE(target_name(target));
  Kernel k(target, "math", 64, 2);
  // Inputs with few significant bits, so that every result is exact with or without fused
  // multiply-adds.
  std::vector<double> a(128), b(128);
  std::vector<float> f(128);
  for (std::uint32_t i = 0; i < 128; ++i) {
    a[i] = (double(i) - 20) / 8, b[i] = double(i % 7) * 0.75 - 2, f[i] = float(i % 5) * 0.5f - 1;
  }
  k.buffer(0, a);
  k.buffer(1, b);
  k.buffer(2, f);
  std::uint64_t d_at = k.buffer(3, std::vector<double>(3 * 128, 0));
  std::uint64_t g_at = k.buffer(4, std::vector<float>(2 * 128, 0));
  std::uint64_t k_at = k.buffer(5, std::vector<std::int64_t>(128, 0));
  auto outcome = k.run();
  REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  auto d = k.memory.get<double>(d_at, 3 * 128);
  auto g = k.memory.get<float>(g_at, 2 * 128);
  auto kk = k.memory.get<std::int64_t>(k_at, 128);
  for (std::uint32_t i = 0; i < 128; ++i) {
    double x = a[i], y = b[i];
    float z = f[i];
    CAPTURE(i);
    CHECK(d[3 * i] == std::fma(x, y, double(z)));
    CHECK(d[3 * i + 1] == x * y - x + 0.25);
    CHECK(d[3 * i + 2] == std::max(x, y) + double(std::int32_t(i)));
    CHECK(g[2 * i] == float(x * 3.0) + z * z);
    CHECK(g[2 * i + 1] == std::fma(z, 2.0f, -1.0f) - float(i));
    CHECK(kk[i] == std::int64_t(x * 1000.0) + (std::int64_t(i) << 40));
  }
}
}

TEST_CASE("global, flat and LDS atomics and a compare-and-swap loop match the host's, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
  CAPTURE(target_name(target));
  Kernel k(target, "atomics", 128, 2);
  std::vector<std::uint32_t> in(256);
  for (std::uint32_t i = 0; i < 256; ++i) in[i] = mix(i + 99) % 100000;
  k.buffer(0, in);
  std::uint64_t sums_at = k.buffer(1, std::vector<std::uint32_t>(8, 0));
  k.argument(2, sums_at);  // the generic pointer: the same words
  std::uint64_t tickets_at = k.buffer(3, std::vector<std::uint32_t>(256, 0));
  auto outcome = k.run();
  REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  auto sums = k.memory.get<std::uint32_t>(sums_at, 8);
  CHECK(sums[0] == std::accumulate(in.begin(), in.end(), 0u));
  CHECK(sums[1] == 255u * 256u / 2);
  CHECK(sums[2] == 256);
  CHECK(sums[3] == *std::max_element(in.begin(), in.end()));
  CHECK(sums[4] == 256);
  auto tickets = k.memory.get<std::uint32_t>(tickets_at, 256);
  std::sort(tickets.begin(), tickets.end());
  for (std::uint32_t i = 0; i < 256; ++i) CHECK(tickets[i] == i);
}
}

TEST_CASE("a private array in scratch matches the host's, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
  CAPTURE(target_name(target));
  Kernel k(target, "private_array", 64, 2);
  REQUIRE(k.d.private_bytes >= 48 * 4);
  std::vector<std::uint32_t> in(128);
  for (std::uint32_t i = 0; i < 128; ++i) in[i] = mix(i + 5);
  k.buffer(0, in);
  std::uint64_t out_at = k.buffer(1, std::vector<std::uint32_t>(128, 0));
  auto outcome = k.run();
  REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  auto got = k.memory.get<std::uint32_t>(out_at, 128);
  for (std::uint32_t i = 0; i < 128; ++i) {
    std::uint32_t sum = 0;
    for (std::uint32_t j = 0; j < 8; ++j) {
      std::uint32_t at = (in[i] + 5 * j) % 48;
      sum += at * at + i;
    }
    CAPTURE(i);
    CHECK(got[i] == sum);
  }
}
}

TEST_CASE("float and double division and float classes match the host's, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
    CAPTURE(target_name(target));
    Kernel k(target, "divide", 64, 1);
    std::vector<float> a(64), b(64);
    std::vector<double> x(64), y(64);
    for (std::uint32_t i = 0; i < 64; ++i) {
      a[i] = float(mix(i) % 20000) / 7.0f - 1000, b[i] = float(mix(i + 64) % 3000) / 13.0f + 0.5f;
      x[i] = double(mix(i + 128)) / 3.0 - 7e8, y[i] = double(mix(i + 192) % 100000) / 11.0 - 4000;
    }
    // Special operands, which div_fixup settles: zero divisors, infinities, NaN.
    b[1] = 0, a[2] = std::numeric_limits<float>::infinity(), b[3] = std::numeric_limits<float>::quiet_NaN();
    a[4] = 0, y[5] = 0, x[6] = -std::numeric_limits<double>::infinity(), x[7] = 0, y[7] = 0;
    k.buffer(0, a);
    k.buffer(1, b);
    k.buffer(2, x);
    k.buffer(3, y);
    std::uint64_t q_at = k.buffer(4, std::vector<float>(64, 0));
    std::uint64_t r_at = k.buffer(5, std::vector<double>(64, 0));
    std::uint64_t kinds_at = k.buffer(6, std::vector<std::uint32_t>(64, 0));
    auto outcome = k.run();
    REQUIRE_MESSAGE(outcome.ok, outcome.fault);
    auto q = k.memory.get<float>(q_at, 64);
    auto r = k.memory.get<double>(r_at, 64);
    auto kinds = k.memory.get<std::uint32_t>(kinds_at, 64);
    for (std::uint32_t i = 0; i < 64; ++i) {
      CAPTURE(i);
      float qq = a[i] / b[i];
      double rr = x[i] / y[i];
      CHECK(std::bit_cast<std::uint32_t>(q[i]) == std::bit_cast<std::uint32_t>(qq));
      if (std::isnan(rr)) CHECK(std::isnan(r[i]));
      else CHECK(std::bit_cast<std::uint64_t>(r[i]) == std::bit_cast<std::uint64_t>(rr));
      CHECK(kinds[i] == (std::uint32_t(std::isinf(a[i])) | std::uint32_t(std::isnan(b[i])) << 1));
    }
  }
}

TEST_CASE("a division that would need scaling is refused, naming the instruction") {
  Kernel k(gfx9::Target::gfx942, "divide", 64, 1);
  std::vector<float> a(64, 1.0f), b(64, 1e-40f);  // a denormal divisor
  k.buffer(0, a);
  k.buffer(1, b);
  k.buffer(2, std::vector<double>(64, 1.0));
  k.buffer(3, std::vector<double>(64, 3.0));
  k.buffer(4, std::vector<float>(64, 0));
  k.buffer(5, std::vector<double>(64, 0));
  k.buffer(6, std::vector<std::uint32_t>(64, 0));
  auto outcome = k.run();
  CHECK(!outcome.ok);
  CHECK(outcome.fault.find("v_div_scale_f32 at 0x") != std::string::npos);
  CHECK(outcome.fault.find("on operands that need scaling") != std::string::npos);
}

TEST_CASE("half-precision arithmetic and conversions match the host's, on gfx942 and gfx90a") {
  for (auto target : kTargets) {
    CAPTURE(target_name(target));
    Kernel k(target, "halves", 64, 1);
    std::vector<_Float16> a(64), b(64);
    std::vector<float> x(64);
    for (std::uint32_t i = 0; i < 64; ++i) {
      a[i] = _Float16(float(int(mix(i) % 4000) - 2000) / 16.0f), b[i] = _Float16(float(mix(i + 64) % 3000) / 64.0f);
      x[i] = std::bit_cast<float>((mix(i + 128) & 0x8fffffffu) | 0x30000000u);  // magnitudes 2^-31 .. 2
    }
    x[0] = 65519.0f, x[1] = 65520.0f, x[2] = 1e-7f, x[3] = std::numeric_limits<float>::infinity();
    k.buffer(0, a);
    k.buffer(1, b);
    k.buffer(2, x);
    std::uint64_t c_at = k.buffer(3, std::vector<_Float16>(128, _Float16(0)));
    std::uint64_t d_at = k.buffer(4, std::vector<float>(128, 0));
    auto outcome = k.run();
    REQUIRE_MESSAGE(outcome.ok, outcome.fault);
    auto c = k.memory.get<std::uint16_t>(c_at, 128);
    auto d = k.memory.get<float>(d_at, 128);
    for (std::uint32_t i = 0; i < 64; ++i) {
      CAPTURE(i);
      CHECK(c[2 * i] == std::bit_cast<std::uint16_t>(_Float16(a[i] * b[i])));
      CHECK(c[2 * i + 1] == std::bit_cast<std::uint16_t>(_Float16(a[i] + b[i])));
      CHECK(std::bit_cast<std::uint32_t>(d[2 * i]) == std::bit_cast<std::uint32_t>(float(_Float16(x[i]))));
      CHECK(d[2 * i + 1] == float(a[i] > b[i] ? a[i] : b[i]));
    }
  }
}
