/* The demo's kernels for the host device: saxpy and a sum reduction over float arrays.
 * Each group handles `chunk` consecutive elements. */
#include <stddef.h>
#include <stdint.h>

#include <rig/host_kernel.h>

struct fill_params {
  float *x, *y;
  uint64_t n, chunk;
};
RIG_HOST_PARAMS(demo_fill, sizeof(struct fill_params));

/* x[i] = (i % 1024) / 256, y[i] = 1 + (i % 7) */
void demo_fill(const void *params, const struct rig_host_group *g) {
  const struct fill_params *p = params;
  uint64_t first = g->group[0] * p->chunk, last = first + p->chunk;
  if (last > p->n) last = p->n;
  for (uint64_t i = first; i < last; ++i) {
    p->x[i] = (float)(i % 1024) / 256.0f;
    p->y[i] = 1.0f + (float)(i % 7);
  }
}

struct saxpy_params {
  const float *x;
  float *y;
  uint64_t n, chunk;
  float a;
};
RIG_HOST_PARAMS(demo_saxpy, sizeof(struct saxpy_params));

/* y = a * x + y */
void demo_saxpy(const void *params, const struct rig_host_group *g) {
  const struct saxpy_params *p = params;
  uint64_t first = g->group[0] * p->chunk, last = first + p->chunk;
  if (last > p->n) last = p->n;
  const float a = p->a;
  const float *x = p->x;
  float *y = p->y;
  for (uint64_t i = first; i < last; ++i) y[i] = a * x[i] + y[i];
}

struct sum_params {
  const float *x;
  double *partial;
  uint64_t n, chunk;
};
RIG_HOST_PARAMS(demo_sum, sizeof(struct sum_params));

/* partial[group] = the sum of the group's elements, in double */
void demo_sum(const void *params, const struct rig_host_group *g) {
  const struct sum_params *p = params;
  uint64_t first = g->group[0] * p->chunk, last = first + p->chunk;
  if (last > p->n) last = p->n;
  double s = 0;
  for (uint64_t i = first; i < last; ++i) s += p->x[i];
  p->partial[g->group[0]] = s;
}

struct total_params {
  const double *partial;
  double *total;
  uint64_t count;
};
RIG_HOST_PARAMS(demo_total, sizeof(struct total_params));
RIG_HOST_THREADS(demo_total, 1);

/* total[0] = the sum of the partial sums */
void demo_total(const void *params, const struct rig_host_group *g) {
  (void)g;
  const struct total_params *p = params;
  double s = 0;
  for (uint64_t i = 0; i < p->count; ++i) s += p->partial[i];
  p->total[0] = s;
}

/* An empty kernel, for latency benchmarks. */
RIG_HOST_PARAMS(demo_empty, 0);
void demo_empty(const void *params, const struct rig_host_group *g) {
  (void)params;
  (void)g;
}
