/* scale_kernel.c — out[i] = k * in[i] on the host device. */
#include <rig/host_kernel.h>

struct scale_params {
  const float *in; /* the run's buffer 0 */
  float *out;      /* the run's buffer 1 */
  uint32_t n;
  float k;
};

RIG_HOST_PARAMS(scale, sizeof(struct scale_params));

void scale(const void *params, const struct rig_host_group *group) {
  const struct scale_params *p = params;
  const uint32_t first = group->group[0] * group->threads[0];
  for (uint32_t t = 0; t < group->threads[0]; ++t) {
    const uint32_t i = first + t;
    if (i < p->n) p->out[i] = p->k * p->in[i];
  }
}
