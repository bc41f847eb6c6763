// The test kernels (kernels/*.cu, as nvcc compiled them) run over grids, every output
// compared with a host computation: exactly for integers and for floats whose operations
// are exact here, within a stated tolerance for approximate float functions. Each runs on
// the sm_90 and the sm_80 PTX.
#include <algorithm>
#include <bit>
#include <cfenv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <regex>
#include <set>

#include "harness.hpp"

using ptx_test::Arena;
using ptx_test::load;
using ptx_test::run;

namespace {

const std::string kArchs[] = {"sm_90", "sm_80"};

std::uint32_t byte_perm(std::uint32_t a, std::uint32_t b, std::uint32_t s) {
  const std::uint64_t bytes = std::uint64_t(b) << 32 | a;
  std::uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= std::uint32_t((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
std::uint32_t brev32(std::uint32_t x) {
  std::uint32_t r = 0;
  for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1) << (31 - i);
  return r;
}
std::uint64_t brev64(std::uint64_t x) {
  std::uint64_t r = 0;
  for (int i = 0; i < 64; ++i) r |= ((x >> i) & 1) << (63 - i);
  return r;
}

bool close(double got, double want, double rel, double abs) {
  if (std::isnan(want)) return std::isnan(got);
  return std::fabs(got - want) <= abs + rel * std::fabs(want);
}

}  // namespace

TEST_CASE("a block sum through shuffles and shared memory gives every block's sum") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "reduce", arch);
    const int n = 1000, threads = 256, blocks = 4;
    std::vector<float> in(n);
    for (int i = 0; i < n; ++i) in[i] = float(i % 7 - 3);
    const auto din = arena.upload(in), dout = arena.alloc(blocks * 4);
    run(l, arena, "block_sum", {blocks, 1, 1}, {threads, 1, 1}, {din, dout, n});
    const auto out = arena.download<float>(dout, blocks);
    for (int b = 0; b < blocks; ++b) {
      float want = 0;
      for (int i = b * threads; i < std::min(n, (b + 1) * threads); ++i) want += in[i];
      CHECK(out[b] == want);  // sums of small integers: exact in any order
    }
  }
}

TEST_CASE("an integer sum through redux and a global atomic gives the total") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "reduce", arch);
    const int n = 5000;
    std::vector<std::uint32_t> in(n);
    for (int i = 0; i < n; ++i) in[i] = std::uint32_t(i) * 2654435761u;
    const auto din = arena.upload(in), dout = arena.upload(std::vector<std::uint32_t>{0});
    run(l, arena, "int_sum", {3, 1, 1}, {128, 1, 1}, {din, dout, n});
    CHECK(arena.download<std::uint32_t>(dout, 1)[0] == std::accumulate(in.begin(), in.end(), 0u));
  }
}

TEST_CASE("warp scans, ballots, votes, matches and idx shuffles give each lane's value") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "reduce", arch);
    const int n = 128;
    std::vector<std::int32_t> in(n);
    for (int i = 0; i < n; ++i) in[i] = (i * 37 + 11) % 50 + (i >= 64 ? 1 : 0) - (i == 70 ? 200 : 0);
    for (int i = 96; i < 128; ++i) in[i] = 16 + (i & 1);  // a warp where v >> 4 is uniform
    const auto din = arena.upload(in);
    const auto scan = arena.alloc(n * 4), ballot = arena.alloc(n * 4), votes = arena.alloc(n * 4),
               match = arena.alloc(n * 4), idx = arena.alloc(n * 4);
    run(l, arena, "warp_ops", {2, 1, 1}, {64, 1, 1}, {din, scan, ballot, votes, match, idx});
    const auto s = arena.download<std::int32_t>(scan, n);
    const auto b = arena.download<std::uint32_t>(ballot, n);
    const auto v = arena.download<std::int32_t>(votes, n);
    const auto m = arena.download<std::uint32_t>(match, n);
    const auto x = arena.download<std::int32_t>(idx, n);
    for (int w = 0; w < n / 32; ++w) {
      const int base = w * 32;
      std::uint32_t want_ballot = 0;
      bool all = true, any = false, uni = true;
      std::uint32_t maxu = 0;
      std::int32_t mins = INT32_MAX;
      for (int k = 0; k < 32; ++k) {
        const int val = in[base + k];
        want_ballot |= std::uint32_t(val & 1) << k;
        all = all && val > 0;
        any = any || val > 100;
        uni = uni && (val >> 4) == (in[base] >> 4);
        maxu = std::max(maxu, std::uint32_t(val));
        mins = std::min(mins, val);
      }
      std::int32_t running = 0;
      for (int k = 0; k < 32; ++k) {
        const int i = base + k;
        CAPTURE(i);
        running += in[i];
        CHECK(s[i] == running);
        CHECK(b[i] == want_ballot);
        CHECK(v[i] == (int(all) | int(any) << 1 | int(uni) << 2));
        std::uint32_t want_match = 0;
        for (int q = 0; q < 32; ++q)
          if ((in[base + q] & 3) == (in[i] & 3)) want_match |= 1u << q;
        CHECK(m[i] == want_match);
        CHECK(x[i] == in[base + ((k * 7) & 31)] + static_cast<int>(0xffffffffu) % 3 + int(maxu) + mins);
      }
    }
  }
}

TEST_CASE("a histogram through shared and global atomics counts every value") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "atomics", arch);
    const int n = 3000;
    std::vector<std::uint32_t> in(n);
    for (int i = 0; i < n; ++i) in[i] = std::uint32_t(i * i + 3 * i);
    const auto din = arena.upload(in), bins = arena.alloc(16 * 4);
    run(l, arena, "histogram", {5, 1, 1}, {96, 1, 1}, {din, bins, n});
    std::vector<std::uint32_t> want(16);
    for (auto v : in) ++want[v & 15];
    CHECK(arena.download<std::uint32_t>(bins, 16) == want);
  }
}

TEST_CASE("every kind of global atomic gives the result of some order of its operations") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "atomics", arch);
    const int n = 192;
    std::vector<std::int32_t> in(n);
    for (int i = 0; i < n; ++i) in[i] = (i * 7919) % 1000 - 300;
    std::vector<std::int32_t> r0(12, 0);
    r0[2] = INT32_MAX;
    r0[6] = -1;
    std::vector<std::uint64_t> r64(5, 0);
    r64[2] = 0x7fffffffffffffffull;
    const auto din = arena.upload(in), dr = arena.upload(r0), dr64 = arena.upload(r64),
               df = arena.upload(std::vector<float>{0.0f}), dold = arena.alloc(n * 4);
    run(l, arena, "atomic_mix", {3, 1, 1}, {64, 1, 1}, {din, dr, dr64, df, dold});
    const auto r = arena.download<std::int32_t>(dr, 12);
    const auto q = arena.download<std::uint64_t>(dr64, 5);
    const auto old = arena.download<std::int32_t>(dold, n);
    std::int32_t sum = 0, mn = INT32_MAX, mx = INT32_MIN, x = 0;
    std::uint32_t umax = 0, dec = 0, andv = ~0u, orv = 0;
    std::uint64_t sum64 = 0, max64 = 0;
    std::int64_t min64 = INT64_MAX;
    float fsum = 0;
    for (int i = 0; i < n; ++i) {
      const int v = in[i];
      sum += v;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
      x ^= v;
      umax = std::max(umax, std::uint32_t(v));
      dec = (dec == 0 || dec > 13) ? 13 : dec - 1;
      andv &= ~(1u << (i & 31));
      orv |= 1u << (i & 31);
      sum64 += std::uint64_t(std::int64_t(v)) * 0x100000001ull;
      max64 = std::max(max64, std::uint64_t(std::int64_t(v)) << 33);
      min64 = std::min(min64, std::int64_t(v) - 1000);
      fsum += float(v) * 0.5f;
    }
    CHECK(r[0] == sum);
    CHECK(r[1] == -sum);
    CHECK(r[2] == mn);
    CHECK(r[3] == mx);
    CHECK(std::uint32_t(r[4]) == std::uint32_t(n) % 18);  // inc wraps past 17
    CHECK(std::uint32_t(r[5]) == dec);
    CHECK(std::uint32_t(r[6]) == andv);
    CHECK(std::uint32_t(r[7]) == orv);
    CHECK(r[8] == x);
    CHECK(std::uint32_t(r[9]) == umax);
    // exch: the old values and the final one are the initial 0 and every thread's index
    std::vector<std::int32_t> seen(old.begin(), old.end());
    seen.push_back(r[10]);
    std::sort(seen.begin(), seen.end());
    std::vector<std::int32_t> want_seen(n + 1);
    std::iota(want_seen.begin() + 1, want_seen.end(), 0);
    CHECK(seen == want_seen);
    CHECK(r[11] >= 1);  // cas chains 0 -> 1 -> ...: at least thread 0's succeeded
    CHECK(r[11] <= n);
    CHECK(q[0] == sum64);
    CHECK(q[1] == max64);
    CHECK(std::int64_t(q[2]) == min64);
    CHECK(q[3] >= 1);
    CHECK(q[4] < std::uint64_t(n));
    CHECK(arena.download<float>(df, 1)[0] == fsum);  // halves of small integers: exact
  }
}

TEST_CASE("shared atomics of 32 and 64 bits give each block's result") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "atomics", arch);
    const int blocks = 3, threads = 128;
    std::vector<std::int32_t> in(blocks * threads);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = std::int32_t((i * 2246822519u) >> 7) - 0x700000;
    const auto din = arena.upload(in), dout = arena.alloc(blocks * 6 * 4);
    run(l, arena, "shared_atomics", {blocks, 1, 1}, {threads, 1, 1}, {din, dout});
    const auto out = arena.download<std::int32_t>(dout, blocks * 6);
    for (int b = 0; b < blocks; ++b) {
      std::int32_t sum = 0, mx = 0, mn = INT32_MAX, x = 0;
      std::uint64_t s64 = 0;
      for (int t = 0; t < threads; ++t) {
        const int v = in[b * threads + t];
        sum = std::int32_t(std::uint32_t(sum) + std::uint32_t(v));
        mx = std::max(mx, v);
        mn = std::min(mn, v);
        x ^= v;
        s64 += std::uint32_t(v);
      }
      CHECK(out[b * 6 + 0] == sum);
      CHECK(out[b * 6 + 1] == mx);
      CHECK(out[b * 6 + 2] == mn);
      CHECK(out[b * 6 + 3] == x);
      CHECK(std::uint32_t(out[b * 6 + 4]) == std::uint32_t(s64));
      CHECK(std::uint32_t(out[b * 6 + 5]) == std::uint32_t(s64 >> 32));
    }
  }
}

TEST_CASE("a tiled matmul with shared memory and bar.sync gives the product") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "matmul", arch);
    const int n = 48;
    std::vector<float> a(n * n), b(n * n);
    for (int i = 0; i < n * n; ++i) { a[i] = float(i % 5 - 2); b[i] = float((i * 3) % 7 - 3); }
    const auto da = arena.upload(a), db = arena.upload(b), dc = arena.alloc(n * n * 4);
    run(l, arena, "matmul", {n / 16, n / 16, 1}, {16, 16, 1}, {da, db, dc, n});
    const auto c = arena.download<float>(dc, n * n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) {
        float want = 0;
        for (int k = 0; k < n; ++k) want += a[i * n + k] * b[k * n + j];
        CHECK(c[i * n + j] == want);  // small integers: exact
      }
  }
}

TEST_CASE("64-bit integer arithmetic gives the host's results") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "misc", arch);
    const int n = 96;
    std::vector<std::uint64_t> in(n);
    std::uint64_t seed = 0x243f6a8885a308d3ull;
    for (int i = 0; i < n; ++i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      in[i] = i % 5 == 0 ? seed >> (i % 60) : seed;
    }
    in[1] = 0;
    in[2] = 0x8000000000000000ull;
    const auto din = arena.upload(in), dout = arena.alloc(n * 8 * 8);
    run(l, arena, "int64_math", {3, 1, 1}, {32, 1, 1}, {din, dout});
    const auto out = arena.download<std::uint64_t>(dout, n * 8);
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      const std::uint64_t x = in[i];
      const std::int64_t s = std::int64_t(x);
      CHECK(out[i * 8 + 0] == x * 0x9e3779b97f4a7c15ull + (x >> 7));
      CHECK(out[i * 8 + 1] == std::uint64_t((unsigned __int128)x * 0xc2b2ae3d27d4eb4full >> 64));
      CHECK(out[i * 8 + 2] == x / std::uint64_t(i + 3) + x % 1000003ull);
      CHECK(out[i * 8 + 3] == std::uint64_t(s / -7 + s % 11));
      const std::uint64_t ffs = x ? std::uint64_t(std::countr_zero(x) + 1) : 0;
      CHECK(out[i * 8 + 4] == (std::uint64_t(std::popcount(x)) | std::uint64_t(std::countl_zero(x)) << 8 | ffs << 16));
      CHECK(out[i * 8 + 5] == (brev64(x) ^ (x << (i & 63))));
      CHECK(out[i * 8 + 6] == std::uint64_t(std::uint32_t(x)) * std::uint64_t(std::uint32_t(x >> 32)));
      const std::uint64_t hi = std::uint64_t((__int128)s * -3 >> 64);
      CHECK(out[i * 8 + 7] == hi + (s < 0 ? std::uint64_t(0) - x : x));  // llabs, wrapping at INT64_MIN
    }
  }
}

TEST_CASE("32-bit bit operations give the host's results") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "misc", arch);
    const int n = 64;
    std::vector<std::uint32_t> in(n);
    for (int i = 0; i < n; ++i) in[i] = std::uint32_t(i * 0x9e3779b9u) ^ std::uint32_t(i << 3);
    in[1] = 0;
    in[2] = 0x80000000u;
    const auto din = arena.upload(in), dout = arena.alloc(n * 8 * 4);
    run(l, arena, "bits32", {2, 1, 1}, {32, 1, 1}, {din, dout});
    const auto out = arena.download<std::uint32_t>(dout, n * 8);
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      const std::uint32_t x = in[i];
      const std::int32_t s = std::int32_t(x);
      CHECK(out[i * 8 + 0] == byte_perm(x, 0x12345678u, 0x3715));
      CHECK(out[i * 8 + 1] == ((x >> 5) & 0x3ff));
      CHECK(out[i * 8 + 2] == std::uint32_t((std::uint64_t(x) * 0x9e3779b9u) >> 32) +
                                  std::uint32_t((std::int64_t(s) * -77) >> 32));
      CHECK(out[i * 8 + 3] == std::uint32_t(s / 13 + s % 13) + x / 7u);
      CHECK(out[i * 8 + 4] == brev32(x) + std::uint32_t(std::popcount(x)) + std::uint32_t(std::countl_zero(x)));
      CHECK(out[i * 8 + 5] == (std::uint32_t(s >> 3) ^ (x << 7) ^ std::uint32_t(std::min(s, 5)) ^ std::max(x, 9u)));
      CHECK(out[i * 8 + 6] == ((x & ~0xf0u) | ((x & 0xf) << 4)));
      const std::uint32_t sad = std::uint32_t(s > 100 ? std::int64_t(s) - 100 : 100 - std::int64_t(s));
      const std::uint32_t usad = (x > 7u ? x - 7u : 7u - x) + 1u;
      CHECK(out[i * 8 + 7] == std::uint32_t(s < 0 ? 0u - std::uint32_t(s) : std::uint32_t(s)) + sad + usad);
    }
  }
}

TEST_CASE("local arrays, constant and global variables and a noinline call give the host's results") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "misc", arch);
    const int n = 200;
    std::vector<std::int32_t> in(n);
    for (int i = 0; i < n; ++i) in[i] = (i * 131) % 97 - 40;
    const auto din = arena.upload(in), dout = arena.alloc(n * 4);
    run(l, arena, "local_and_call", {4, 1, 1}, {64, 1, 1}, {din, dout, n});
    const auto out = arena.download<float>(dout, n);
    const int coeffs[8] = {3, -1, 4, -1, 5, -9, 2, 6}, table[4] = {10, 20, 30, 40};
    for (int i = 0; i < n; ++i) {
      int buf[16];
      for (int k = 0; k < 16; ++k) buf[k] = in[i] * k + coeffs[k & 7];
      int acc = 0;
      for (int k = 0; k < 16; ++k) acc += buf[(k * 5 + in[i]) & 15];
      CHECK(out[i] == float(acc) * float(coeffs[i & 7]) + float(table[i & 3]));
    }
    CHECK(arena.download<std::uint64_t>(l.variables.at("counter"), 1)[0] == std::uint64_t(n));
  }
}

TEST_CASE("transcendental and rounded float operations are within their tolerances") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "misc", arch);
    const int n = 128;
    std::vector<float> in(n);
    for (int i = 0; i < n; ++i) in[i] = float(i - 64) / 16.0f + 0.03125f;
    const auto din = arena.upload(in), dout = arena.alloc(n * 10 * 4);
    run(l, arena, "transcend", {2, 1, 1}, {64, 1, 1}, {din, dout});
    const auto out = arena.download<float>(dout, n * 10);
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      const double x = in[i];
      // The approximate functions (ex2, lg2, sin, cos, rsqrt .approx) within 1e-5 relative
      // plus 1e-6 absolute; the IEEE ones (sqrt, div) within an ulp or two.
      CHECK(close(out[i * 10 + 0], std::exp(x), 1e-5, 1e-6));
      CHECK(close(out[i * 10 + 1], std::log(std::fabs(x) + 1.0), 1e-5, 1e-6));
      CHECK(close(out[i * 10 + 2], std::sin(x), 1e-5, 1e-6));
      CHECK(close(out[i * 10 + 3], std::cos(x), 1e-5, 1e-6));
      CHECK(close(out[i * 10 + 4], std::tanh(x), 1e-5, 1e-6));
      CHECK(close(out[i * 10 + 5], std::sqrt(std::fabs(x)), 2e-7, 0));
      CHECK(close(out[i * 10 + 6], 1.0 / std::sqrt(std::fabs(x) + 1.0), 1e-5, 0));
      CHECK(close(out[i * 10 + 7], x / (x * x + 1.0), 3e-7, 1e-7));
      const double sat = std::clamp(x, 0.0, 1.0);
      CHECK(close(out[i * 10 + 8], 1.0 / (x + 3.0) + sat + std::min(x, 0.25) + std::max(x, -0.5), 1e-5, 1e-6));
      const double want9 = (x * 3.0 + 1.0) + (x + 0.1) + (x * 0.3) + std::nearbyint(x * 10.0) + std::trunc(x * 3.0) +
                           std::floor(x) + std::ceil(x);
      CHECK(close(out[i * 10 + 9], want9, 1e-5, 1e-5));
    }
  }
}

TEST_CASE("directed roundings round as their modes say") {
  // fma.rz, add.rm and mul.rp in the transcend kernel; checked bit-exactly against the host
  // in the same modes on inputs where the modes differ.
  Arena arena;
  auto l = load(arena, "misc");
  std::vector<float> in(64);
  for (int i = 0; i < 64; ++i) in[i] = 1.0f / float(i + 3);
  const auto din = arena.upload(in), dout = arena.alloc(64 * 10 * 4);
  run(l, arena, "transcend", {1, 1, 1}, {64, 1, 1}, {din, dout});
  const auto out = arena.download<float>(dout, 64 * 10);
  for (int i = 0; i < 64; ++i) {
    const float x = in[i];
    std::fesetround(FE_TOWARDZERO);
    volatile float a = std::fma(x, 3.0f, 1.0f);
    std::fesetround(FE_DOWNWARD);
    volatile float b = x + 0.1f;
    std::fesetround(FE_UPWARD);
    volatile float c = x * 0.3f;
    std::fesetround(FE_TONEAREST);
    volatile float d = float(int(std::nearbyint(x * 10.0f)));
    // the kernel adds the terms in source order, rounding to nearest
    volatile float sum = a + b;
    sum = sum + c;
    sum = sum + d;
    sum = sum + std::trunc(x * 3.0f);
    sum = sum + std::floor(x);
    sum = sum + std::ceil(x);
    CAPTURE(i);
    CHECK(out[i * 10 + 9] == sum);
  }
}

TEST_CASE("double arithmetic and conversions give the host's results") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "misc", arch);
    const int n = 64;
    std::vector<double> in(n);
    for (int i = 0; i < n; ++i) in[i] = (i - 32) * 0.37 + 1.0 / (i + 1);
    const auto din = arena.upload(in), dout = arena.alloc(n * 6 * 8), dints = arena.alloc(n * 2 * 8);
    run(l, arena, "doubles", {2, 1, 1}, {32, 1, 1}, {din, dout, dints});
    const auto out = arena.download<double>(dout, n * 6);
    const auto ints = arena.download<std::int64_t>(dints, n * 2);
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      const double x = in[i];
      CHECK(close(out[i * 6 + 0], x * x + 0.5 * x - 3.0, 1e-15, 1e-15));  // nvcc may fuse into fma
      CHECK(out[i * 6 + 1] == 1.0 / (x + 10.0));
      CHECK(out[i * 6 + 2] == std::sqrt(std::fabs(x)));
      CHECK(out[i * 6 + 3] == std::fma(x, 1.5, -2.25));
      CHECK(out[i * 6 + 4] == std::fmin(x, 1.0) + std::fmax(x, -1.0) + double(float(x)));
      CHECK(out[i * 6 + 5] == 1.0 / (x + 20.0));
      CHECK(ints[i * 2 + 0] == std::int64_t(std::trunc(x * 1e6)));
      CHECK(ints[i * 2 + 1] == std::int64_t(std::nearbyint(std::fabs(x) * 7.0)) + std::int64_t(std::trunc(float(std::fabs(x)))));
    }
  }
}

TEST_CASE("divergent branches take each thread's own path") {
  for (const std::string& arch : kArchs) {
    CAPTURE(arch);
    Arena arena;
    auto l = load(arena, "misc", arch);
    const int n = 150;
    std::vector<std::int32_t> in(n);
    for (int i = 0; i < n; ++i) in[i] = i + 1;
    const auto din = arena.upload(in), dout = arena.alloc(n * 4);
    run(l, arena, "divergent", {3, 1, 1}, {64, 1, 1}, {din, dout, n});
    const auto out = arena.download<std::int32_t>(dout, n);
    const int table[4] = {10, 20, 30, 40};
    for (int i = 0; i < n; ++i) {
      int v = in[i], steps = 0;
      while (v != 1 && steps < 1000) { v = (v & 1) ? 3 * v + 1 : v / 2; ++steps; }
      const int t = i % 64;
      const int want = t % 3 == 0 ? steps : t % 3 == 1 ? -steps : steps * 2 + table[i & 3];
      CAPTURE(i);
      CHECK(out[i] == want);
    }
  }
}

// Every opcode (type suffixes stripped) nvcc emitted for the repository's kernels: the
// interpreter's (tests/ptx/kernels), the NVIDIA simulator's (tests/nv/kernels) and the CUDA
// driver's (tests/cuda/kernels); docs/ptx.md lists the same. The check fails if the kernels'
// opcodes and this list differ either way, and loading every kernel file (which refuses
// anything unsupported) shows each is supported.
const std::set<std::string> kCoverage = {
    "abs", "activemask", "add", "add.rm", "add.u64", "and", "atom.global.add", "atom.global.and",
    "atom.global.cas", "atom.global.dec", "atom.global.exch", "atom.global.inc", "atom.global.max",
    "atom.global.min", "atom.global.or", "atom.global.xor", "atom.shared.add", "atom.shared.max",
    "atom.shared.min", "atom.shared.xor", "bar.sync", "bfi", "bra", "bra.uni", "brev", "call.uni", "clz",
    "copysign", "cos.approx", "cvt", "cvt.rmi", "cvt.rn", "cvt.rni", "cvt.rpi", "cvt.rzi", "cvt.sat",
    "cvta.to.global", "div", "div.approx", "div.rn", "ex2.approx", "ex2.approx.ftz", "fma.rn", "fma.rz",
    "ld.const", "ld.global", "ld.local", "ld.param", "ld.shared", "lg2.approx", "mad.lo", "match.any.sync",
    "max", "min", "mov", "mul", "mul.hi", "mul.lo", "mul.rp", "mul.wide", "neg", "not", "or", "popc", "prmt",
    "rcp.approx.ftz", "rcp.rn", "redux.sync.add", "redux.sync.max", "redux.sync.min", "rsqrt.approx", "sad",
    "rem", "selp", "setp.eq", "setp.ge", "setp.gt", "setp.lt", "setp.ne", "shf.l.wrap", "shfl.sync.bfly",
    "shfl.sync.down", "shfl.sync.idx", "shfl.sync.up", "shl", "shr", "sin.approx", "sqrt.rn", "st.global",
    "st.local", "st.local.v4", "st.param", "st.shared", "st.volatile", "st.volatile.global", "sub", "vote.sync.all", "vote.sync.any", "vote.sync.ballot",
    "vote.sync.uni", "xor",
};

// The PTX files nvcc built for the repository's kernels, for every target.
std::vector<std::string> every_kernel_file() {
  std::vector<std::string> out;
  for (const char* dir : {RIG_PTX_KERNELS, RIG_NV_KERNELS, RIG_CUDA_KERNELS})
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().extension() == ".ptx") out.push_back(entry.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The opcode of an instruction line: its mnemonic without type suffixes (an add.u64 whose
// type nvcc spells in place of the usual .s64 keeps it, as the docs list it).
std::set<std::string> emitted_opcodes() {
  static const std::regex kInstruction(R"(^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_.:]*)\s)");
  static const std::set<std::string> kTypes = {"b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16",
                                               "s32", "s64", "f16", "f32", "f64", "pred"};
  std::set<std::string> out;
  for (const auto& path : every_kernel_file()) {
    std::stringstream text(ptx_test::read_text(path));
    std::string line;
    while (std::getline(text, line)) {
      std::smatch m;
      if (!std::regex_search(line, m, kInstruction)) continue;
      std::string mn = m[1];
      if (mn.starts_with("param") || mn.starts_with("retval")) continue;  // call argument lines
      std::string op;
      std::stringstream parts(mn);
      std::string part;
      while (std::getline(parts, part, '.'))
        if (!kTypes.contains(part)) op += (op.empty() ? "" : ".") + part;
      if (mn == "add.u64" || mn == "add.u32") op = mn;
      out.insert(op);
    }
  }
  return out;
}

TEST_CASE("every opcode nvcc emitted for the repository's kernels is in the coverage list and loads") {
  const auto emitted = emitted_opcodes();
  for (const auto& op : emitted) {
    CAPTURE(op);
    CHECK(kCoverage.contains(op));
  }
  for (const auto& op : kCoverage) {
    CAPTURE(op);
    CHECK(emitted.contains(op));
  }
  const auto files = every_kernel_file();
  // 4 sources for sm_90 and sm_80; 6 and 1 for sm_90, sm_89 and sm_80.
  CHECK(files.size() == 29);
  for (const auto& path : files) {
    CAPTURE(path);
    auto m = rig::ptx::Module::load(ptx_test::read_text(path), path);
    CHECK_MESSAGE(m.has_value(), (m ? std::string() : m.error()));
  }
}

TEST_CASE("the interpreter's rate on the block reduction") {
  Arena arena;
  auto l = load(arena, "reduce");
  const int n = 1 << 18, threads = 256, blocks = n / threads;
  std::vector<float> in(n, 1.0f);
  const auto din = arena.upload(in), dout = arena.alloc(blocks * 4);
  const auto start = std::chrono::steady_clock::now();
  const auto stats = run(l, arena, "block_sum", {blocks, 1, 1}, {threads, 1, 1}, {din, dout, n});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto out = arena.download<float>(dout, blocks);
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 256.0f; }));
  fmt::print("block_sum over {} floats: {} PTX instructions in {:.3f} s: {:.1f} M instructions/s\n", n,
             stats.instructions, seconds, stats.instructions / seconds / 1e6);
}
