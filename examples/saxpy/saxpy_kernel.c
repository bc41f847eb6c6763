/* saxpy_kernel.c — y = a * x + y on the host device, one group per `threads` elements.
 * Compiled with `cc -c` into a relocatable ELF object, which the program loads. */
#include <rig/host_kernel.h>

struct saxpy_params {
  const float *x; /* filled by rig: the run's buffer 0 */
  float *y;       /* filled by rig: the run's buffer 1 */
  uint32_t n;
  float a;
};

RIG_HOST_PARAMS(saxpy, sizeof(struct saxpy_params));
RIG_HOST_THREADS(saxpy, 4096);

void saxpy(const void *params, const struct rig_host_group *group) {
  const struct saxpy_params *p = params;
  const uint32_t first = group->group[0] * group->threads[0];
  for (uint32_t t = 0; t < group->threads[0]; ++t) {
    const uint32_t i = first + t;
    if (i < p->n) p->y[i] = p->a * p->x[i] + p->y[i];
  }
}
