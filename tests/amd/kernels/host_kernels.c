/* host_kernels.c — the computations of amd_kernels.c for the host device, with the same
 * parameter layouts, so that the AMD tests compare the simulated GPU's results with the host
 * device's. Float arithmetic is written as the GPU code does it (fmaf for saxpy's fused
 * multiply-add). */
#include <rig/host_kernel.h>

#include <math.h>

struct vector_add_params {
  const float *a, *b;
  float *c;
  uint32_t n;
};
RIG_HOST_PARAMS(vector_add, 28);

void vector_add(const void *params, const struct rig_host_group *g) {
  const struct vector_add_params *p = params;
  for (uint32_t t = 0; t < g->threads[0]; ++t) {
    uint32_t i = g->group[0] * g->threads[0] + t;
    if (i < p->n) p->c[i] = p->a[i] + p->b[i];
  }
}

struct saxpy_params {
  float alpha;
  uint32_t n;
  const float *x;
  float *y;
};
RIG_HOST_PARAMS(saxpy, 24);

void saxpy(const void *params, const struct rig_host_group *g) {
  const struct saxpy_params *p = params;
  for (uint32_t t = 0; t < 64; ++t) {
    uint32_t i = g->group[0] * 64 + t;
    if (i < p->n) p->y[i] = fmaf(p->alpha, p->x[i], p->y[i]);
  }
}

struct reduce_params {
  const uint32_t *in;
  uint32_t *out;
  uint32_t n, per_thread;
};
RIG_HOST_PARAMS(reduce_sum, 24);

void reduce_sum(const void *params, const struct rig_host_group *g) {
  const struct reduce_params *p = params;
  uint32_t first = g->group[0] * 64 * p->per_thread, sum = 0;
  for (uint32_t k = 0; k < 64 * p->per_thread; ++k)
    if (first + k < p->n) sum += p->in[first + k];
  p->out[g->group[0]] = sum;
}

struct lookup_params {
  uint32_t *out;
  uint32_t n;
};
RIG_HOST_PARAMS(lookup, 12);

void lookup(const void *params, const struct rig_host_group *g) {
  static const uint32_t squares[8] = {0, 1, 4, 9, 16, 25, 36, 49};
  const struct lookup_params *p = params;
  for (uint32_t t = 0; t < 64; ++t) {
    uint32_t i = g->group[0] * 64 + t;
    if (i < p->n) p->out[i] = squares[i % 8];
  }
}
