/* host_saxpy.c — kernels of the host driver's tests: y = a * x + y over a 1-D grid, and an
 * empty kernel for ordering and latency. */
#include <rig/host_kernel.h>

struct saxpy_params {
  float a;
  uint32_t n;
  const float *x;
  float *y;
};

RIG_HOST_PARAMS(saxpy, sizeof(struct saxpy_params));
RIG_HOST_THREADS(saxpy, 256);

/* Group g handles elements [g * threads, (g + 1) * threads) that lie below n. */
void saxpy(const void *params, const struct rig_host_group *group) {
  const struct saxpy_params *p = params;
  const uint32_t first = group->group[0] * group->threads[0];
  for (uint32_t t = 0; t < group->threads[0]; ++t) {
    const uint32_t i = first + t;
    if (i < p->n) p->y[i] = p->a * p->x[i] + p->y[i];
  }
}

/* Does nothing: what a launch costs on its own. */
void empty(const void *params, const struct rig_host_group *group) {
  (void)params;
  (void)group;
}
