/* gfx9_kernels.c — kernels the AMD tests build with clang-19 for gfx942 and gfx90a and run on
 * the simulator's CDNA interpreter (tests/sim/amd/gfx9.hpp), wave64. test_gfx9.cpp computes
 * the same results on the host and compares.
 *
 * Plain C for the amdgcn target: kernels are amdgpu_kernel functions, pointers are generic
 * (flat) or global, group-shared memory is address space 3, private arrays live in scratch. */
#include <stdint.h>

#define KERNEL __attribute__((amdgpu_kernel, visibility("default")))
#define GLOBAL __attribute__((address_space(1)))
#define SHARED __attribute__((address_space(3)))

static inline uint32_t thread_x(void) { return __builtin_amdgcn_workitem_id_x(); }
static inline uint32_t group_x(void) { return __builtin_amdgcn_workgroup_id_x(); }

static inline void barrier(void) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}

/* out[i] = in[0] + ... + in[i] within each group of 128 threads (two waves), by doubling
 * strides in LDS with a barrier between steps. */
KERNEL void scan128(const GLOBAL uint32_t *in, GLOBAL uint32_t *out) {
  SHARED static uint32_t part[2][128] __attribute__((loader_uninitialized));
  uint32_t t = thread_x(), i = group_x() * 128 + t;
  uint32_t from = 0;
  part[0][t] = in[i];
  barrier();
  for (uint32_t stride = 1; stride < 128; stride <<= 1) {
    uint32_t v = part[from][t];
    if (t >= stride) v += part[from][t - stride];
    part[from ^ 1][t] = v;
    from ^= 1;
    barrier();
  }
  out[i] = part[from][t];
}

/* For each thread, the steps the 3x+1 walk from seed[i] (64-bit) takes to fall below
 * limit, at most 500, and the largest value it reached. */
KERNEL void walk64(const GLOBAL uint64_t *seed, uint64_t limit, GLOBAL uint32_t *steps, GLOBAL uint64_t *peak) {
  uint32_t i = group_x() * 64 + thread_x();
  uint64_t x = seed[i], top = x;
  uint32_t n = 0;
  while (x >= limit && n < 500) {
    x = (x & 1) ? 3 * x + 1 : x >> 1;
    if (x > top) top = x;
    ++n;
  }
  steps[i] = n;
  peak[i] = top;
}

/* Lane exchanges: out[4i] = the value of lane (lane ^ 5) by ds_bpermute, out[4i+1] the
 * swizzled value of (lane ^ 1) within groups of 32 (xor mask 1), out[4i+2] the wave's sum
 * of in by a butterfly of bpermutes, out[4i+3] the DPP row-shifted value (row_shr:1, bound
 * control off, so lane 0 of each row of 16 keeps its own). */
KERNEL void exchange(const GLOBAL uint32_t *in, GLOBAL uint32_t *out) {
  uint32_t t = thread_x(), v = in[t];
  out[4 * t] = (uint32_t)__builtin_amdgcn_ds_bpermute((int)((t ^ 5) * 4), (int)v);
  out[4 * t + 1] = (uint32_t)__builtin_amdgcn_ds_swizzle((int)v, 0x041F);
  uint32_t sum = v;
  for (uint32_t m = 1; m < 64; m <<= 1) sum += (uint32_t)__builtin_amdgcn_ds_bpermute((int)((t ^ m) * 4), (int)sum);
  out[4 * t + 2] = sum;
  out[4 * t + 3] = (uint32_t)__builtin_amdgcn_update_dpp((int)v, (int)v, 0x111, 0xf, 0xf, 0);
}

/* Float and double arithmetic: d[i] = a[i] * b[i] + c[i] and friends, conversions between
 * them and the integers. */
KERNEL void math(const GLOBAL double *a, const GLOBAL double *b, const GLOBAL float *f, GLOBAL double *d,
                 GLOBAL float *g, GLOBAL int64_t *k) {
  uint32_t i = group_x() * 64 + thread_x();
  double x = a[i], y = b[i];
  float z = f[i];
  d[3 * i] = __builtin_fma(x, y, (double)z);
  d[3 * i + 1] = x * y - x + 0.25;
  d[3 * i + 2] = (x > y ? x : y) + (double)(int32_t)i;
  g[2 * i] = (float)(x * 3.0) + z * z;
  g[2 * i + 1] = __builtin_fmaf(z, 2.0f, -1.0f) - (float)(uint32_t)i;
  k[i] = (int64_t)(x * 1000.0) + ((int64_t)i << 40);
}

/* Atomics: every thread adds in[i] to sums[0] (global), i to sums[1] through a generic
 * pointer (flat), counts itself in LDS and the group's count goes to sums[2]; each keeps the
 * largest in[i] in sums[3] by compare-and-swap, and takes a ticket from sums[4]. */
KERNEL void atomics(const GLOBAL uint32_t *in, GLOBAL uint32_t *sums, uint32_t *generic, GLOBAL uint32_t *tickets) {
  SHARED static uint32_t count __attribute__((loader_uninitialized));
  uint32_t t = thread_x(), i = group_x() * 128 + t, v = in[i];
  if (t == 0) count = 0;
  barrier();
  __atomic_fetch_add(&sums[0], v, __ATOMIC_RELAXED);
  __atomic_fetch_add(&generic[1], i, __ATOMIC_RELAXED);
  __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);
  uint32_t old = __atomic_load_n(&sums[3], __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(&sums[3], &old, v, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  tickets[i] = __atomic_fetch_add(&sums[4], 1, __ATOMIC_RELAXED);
  barrier();
  if (t == 0) __atomic_fetch_add(&sums[2], count, __ATOMIC_RELAXED);
}

/* A private array indexed by data: out[i] = the sum over k of table[(in[i] + 5k) % 48],
 * where table[j] = j * j + i. */
KERNEL void private_array(const GLOBAL uint32_t *in, GLOBAL uint32_t *out) {
  uint32_t i = group_x() * 64 + thread_x();
  uint32_t table[48];
  for (uint32_t j = 0; j < 48; ++j) table[j] = j * j + i;
  uint32_t sum = 0, at = in[i];
  for (uint32_t k = 0; k < 8; ++k) sum += table[(at + 5 * k) % 48];
  out[i] = sum;
}

/* Division as clang expands it (div_scale, rcp, fma steps, div_fmas, div_fixup) in float and
 * double, and the classes of the operands: q[i] = a[i] / b[i], r[i] = x[i] / y[i], and
 * kinds[i] = isinf(a[i]) | isnan(b[i]) << 1. */
KERNEL void divide(const GLOBAL float *a, const GLOBAL float *b, const GLOBAL double *x, const GLOBAL double *y,
                   GLOBAL float *q, GLOBAL double *r, GLOBAL uint32_t *kinds) {
  uint32_t i = group_x() * 64 + thread_x();
  q[i] = a[i] / b[i];
  r[i] = x[i] / y[i];
  kinds[i] = (uint32_t)__builtin_isinf(a[i]) | (uint32_t)__builtin_isnan(b[i]) << 1;
}

/* Half precision: c[2i] = a[i] * b[i], c[2i+1] = a[i] + b[i], d[2i] = x[i] rounded to half and
 * back, d[2i+1] = the larger of a[i] and b[i] as a float. */
KERNEL void halves(const GLOBAL _Float16 *a, const GLOBAL _Float16 *b, const GLOBAL float *x, GLOBAL _Float16 *c,
                   GLOBAL float *d) {
  uint32_t i = group_x() * 64 + thread_x();
  c[2 * i] = a[i] * b[i];
  c[2 * i + 1] = a[i] + b[i];
  d[2 * i] = (float)(_Float16)x[i];
  d[2 * i + 1] = (float)(a[i] > b[i] ? a[i] : b[i]);
}
