/* amd_kernels.c — kernels the AMD tests build with clang-19 for gfx1100 (and gfx1201, gfx942
 * for the code-object reader), and run on the simulator's gfx11 interpreter. The same
 * computations for the host device are in host_kernels.c; results must agree.
 *
 * Plain C for the amdgcn target: kernels are amdgpu_kernel functions, pointers are generic
 * (flat) or global, group-shared memory is address space 3. */
#include <stdint.h>

#define KERNEL __attribute__((amdgpu_kernel, visibility("default")))
#define GLOBAL __attribute__((address_space(1)))
#define SHARED __attribute__((address_space(3)))

static inline uint32_t thread_x(void) { return __builtin_amdgcn_workitem_id_x(); }
static inline uint32_t group_x(void) { return __builtin_amdgcn_workgroup_id_x(); }
/* The group's size comes from the hidden kernel arguments (code object v5). */
static inline uint32_t size_x(void) { return __builtin_amdgcn_workgroup_size_x(); }

/* c[i] = a[i] + b[i] for i < n, one element per thread. */
KERNEL void vector_add(const float *a, const float *b, float *c, uint32_t n) {
  uint32_t i = group_x() * size_x() + thread_x();
  if (i < n) c[i] = a[i] + b[i];
}

/* y[i] = alpha * x[i] + y[i] for i < n, through global pointers. */
KERNEL void saxpy(float alpha, uint32_t n, const GLOBAL float *x, GLOBAL float *y) {
  uint32_t i = group_x() * 64 + thread_x();
  if (i < n) y[i] = alpha * x[i] + y[i];
}

/* Each group of 64 threads sums its 64 * per_thread elements of in (those below n) in LDS
 * and writes the group's sum to out[group]. */
KERNEL void reduce_sum(const GLOBAL uint32_t *in, GLOBAL uint32_t *out, uint32_t n, uint32_t per_thread) {
  SHARED static uint32_t partial[64] __attribute__((loader_uninitialized));
  uint32_t t = thread_x(), g = group_x();
  uint32_t first = g * 64 * per_thread;
  uint32_t sum = 0;
  for (uint32_t k = 0; k < per_thread; ++k) {
    uint32_t i = first + k * 64 + t;
    if (i < n) sum += in[i];
  }
  partial[t] = sum;
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  for (uint32_t stride = 32; stride > 0; stride >>= 1) {
    if (t < stride) partial[t] += partial[t + stride];
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  }
  if (t == 0) out[g] = partial[0];
}

/* Writes value to *p: a kernel to make page faults with. */
KERNEL void store(GLOBAL uint32_t *p, uint32_t value) { *p = value; }

/* A table reached through a pointer that the loader relocates (R_AMDGPU_RELATIVE64). */
static const GLOBAL uint32_t squares[8] = {0, 1, 4, 9, 16, 25, 36, 49};
const GLOBAL uint32_t *GLOBAL squares_table = squares; /* not const: kernels load it */

/* out[i] = squares_table[i % 8] for i < n. */
KERNEL void lookup(GLOBAL uint32_t *out, uint32_t n) {
  uint32_t i = group_x() * 64 + thread_x();
  if (i < n) out[i] = squares_table[i % 8];
}

/* counts[g] += 1 from the first thread of each group g, group `slow` first counting to
 * `spin` in registers: a share of the grid that takes its XCC far longer than the others'. */
KERNEL void count_groups(GLOBAL uint32_t *counts, uint32_t slow, uint32_t spin) {
  uint32_t g = group_x();
  if (g == slow)
    for (uint32_t k = 0, x = 0; k < spin; ++k) __asm__ volatile("v_add_u32 %0, %0, 1" : "+v"(x));
  if (thread_x() == 0) counts[g] += 1; /* each group's own word: a second run of it shows */
}
