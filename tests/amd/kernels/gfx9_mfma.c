/* gfx9_mfma.c — a kernel whose code holds an MFMA (a matrix fused multiply-add of the CDNA
 * GPUs), built with clang-19 for gfx942. The simulator's CDNA interpreter does not simulate
 * MFMA and refuses it by name: the AMD tests check that a launch of this kernel loses the
 * device with that reason, and that the GPU opens again afterwards. */
#include <stdint.h>

#define KERNEL __attribute__((amdgpu_kernel, visibility("default")))
#define GLOBAL __attribute__((address_space(1)))

typedef float float4_t __attribute__((ext_vector_type(4)));

/* out[4i..4i+3] = the 4x4x1 MFMA of a[i] and b[i] over 16 blocks, accumulated onto zero. */
KERNEL void mfma_4x4(const GLOBAL float *a, const GLOBAL float *b, GLOBAL float4_t *out) {
  uint32_t i = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  float4_t acc = {0, 0, 0, 0};
  out[i] = __builtin_amdgcn_mfma_f32_4x4x1f32(a[i], b[i], acc, 0, 0, 0);
}
