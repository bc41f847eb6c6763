/* Kernels of the profile tests for the host device: each group keeps its core busy for the
 * nanoseconds its parameters give, then counts itself. Two names, so that a profile tells
 * their launches apart. */
#include <rig/host_kernel.h>
#include <time.h>

struct spin_params {
  uint64_t ns;
  uint32_t *groups; /* incremented once per group */
};

static void spin(const struct spin_params *p) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int64_t elapsed = 0;
  while (elapsed < (int64_t)p->ns) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    elapsed = (int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 + (int64_t)(t.tv_nsec - t0.tv_nsec);
  }
  __atomic_fetch_add(p->groups, 1, __ATOMIC_RELAXED);
}

RIG_HOST_PARAMS(prof_short, sizeof(struct spin_params));
void prof_short(const void *params, const struct rig_host_group *g) {
  (void)g;
  spin(params);
}

RIG_HOST_PARAMS(prof_long, sizeof(struct spin_params));
void prof_long(const void *params, const struct rig_host_group *g) {
  (void)g;
  spin(params);
}
