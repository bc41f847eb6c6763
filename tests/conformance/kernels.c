/* Kernels the conformance laws load on the host device (rig/host_kernel.h). */
#include <stdint.h>

#include <rig/host_kernel.h>

/* Does nothing: the function the laws of images resolve and launch. */
RIG_HOST_PARAMS(conf_nothing, 0);
void conf_nothing(const void *params, const struct rig_host_group *g) {
  (void)params;
  (void)g;
}
