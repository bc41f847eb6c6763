/* host_grid.c — kernels of the host driver's tests that report what a group sees: its
 * place in a 3-D grid, its shared memory and the launch's value; and a slow kernel. */
#include <rig/host_kernel.h>
#include <time.h>

/* What one group reports, at out[linear index of the group]. */
struct grid_report {
  uint32_t group[3];
  uint32_t threads;   /* threads[0] * threads[1] * threads[2] */
  uint32_t shared_ok; /* 1 if its shared memory is aligned to 64 and holds what it wrote */
  uint32_t calls;     /* how many times the group ran */
  uint64_t value;
};

struct grid_params {
  struct grid_report *out;
};

RIG_HOST_PARAMS(grid, sizeof(struct grid_params));

void grid(const void *params, const struct rig_host_group *g) {
  const struct grid_params *p = params;
  const uint64_t i =
      g->group[0] + (uint64_t)g->groups[0] * (g->group[1] + (uint64_t)g->groups[1] * g->group[2]);
  struct grid_report *r = &p->out[i];
  uint32_t ok = 1;
  if (g->shared_bytes != 0) {
    unsigned char *s = g->shared;
    if ((uintptr_t)s % 64 != 0) ok = 0;
    for (uint32_t k = 0; k < g->shared_bytes; ++k) s[k] = (unsigned char)(i + k);
    for (uint32_t k = 0; k < g->shared_bytes; ++k) {
      if (s[k] != (unsigned char)(i + k)) ok = 0;
    }
  }
  for (int d = 0; d < 3; ++d) r->group[d] = g->group[d];
  r->threads = g->threads[0] * g->threads[1] * g->threads[2];
  r->shared_ok = ok;
  r->calls += 1;
  r->value = g->value;
}

struct slow_params {
  uint64_t microseconds;
  uint32_t *ran; /* ran[group index] = 1 */
};

RIG_HOST_PARAMS(slow, sizeof(struct slow_params));

/* Busy for the given time per group, then marks the group as run. */
void slow(const void *params, const struct rig_host_group *g) {
  const struct slow_params *p = params;
  struct timespec t0, t;
  const int64_t wanted_ns = (int64_t)p->microseconds * 1000;
  int64_t elapsed_ns = 0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
    elapsed_ns = (int64_t)(t.tv_sec - t0.tv_sec) * 1000000000 + (int64_t)(t.tv_nsec - t0.tv_nsec);
  } while (elapsed_ns < wanted_ns);
  p->ran[g->group[0]] = 1;
}
