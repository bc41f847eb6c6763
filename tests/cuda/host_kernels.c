/* Host kernels the CUDA tests launch on the host device, as producers whose values CUDA
 * work waits for. */
#include <stdint.h>

#include <rig/host_kernel.h>

struct slow_store_params {
  uint32_t *at;    /* where to store, such as a CUDA device's pinned memory */
  uint64_t spins;  /* how long to spin first */
  uint32_t value;
};
RIG_HOST_PARAMS(slow_store, sizeof(struct slow_store_params));

/* Spins, then *at = value: the store comes well after the launch is handed over. */
void slow_store(const void *params, const struct rig_host_group *g) {
  const struct slow_store_params *p = params;
  volatile uint64_t n = 0;
  if (g->group[0] != 0) return;
  while (n < p->spins) n = n + 1;
  __atomic_store_n(p->at, p->value, __ATOMIC_RELEASE);
}
