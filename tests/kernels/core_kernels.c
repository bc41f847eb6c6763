/* Kernels the core's tests launch on the host device. */
#include <stdint.h>

#include <rig/host_kernel.h>

struct add_params {
  uint32_t *data;
  uint64_t n;
  uint32_t add;
};
RIG_HOST_PARAMS(add_u32, sizeof(struct add_params));
RIG_HOST_THREADS(add_u32, 1024);

/* data[i] += add, for the group's threads[0] elements from group[0] * threads[0] on */
void add_u32(const void *params, const struct rig_host_group *g) {
  const struct add_params *p = params;
  uint64_t first = (uint64_t)g->group[0] * g->threads[0];
  for (uint64_t i = first; i < first + g->threads[0] && i < p->n; ++i) p->data[i] += p->add;
}

struct copy_params {
  const uint32_t *src;
  uint32_t *dst;
  uint64_t n;
};
RIG_HOST_PARAMS(copy_u32, sizeof(struct copy_params));

/* dst = src, by group 0 alone */
void copy_u32(const void *params, const struct rig_host_group *g) {
  const struct copy_params *p = params;
  if (g->group[0] != 0) return;
  for (uint64_t i = 0; i < p->n; ++i) p->dst[i] = p->src[i];
}

struct record_params {
  uint64_t *out;
};
RIG_HOST_PARAMS(record_value, sizeof(struct record_params));

/* out[0] = the value the launch completes; out[1] += 1 */
void record_value(const void *params, const struct rig_host_group *g) {
  const struct record_params *p = params;
  p->out[0] = g->value;
  p->out[1] += 1;
}

RIG_HOST_PARAMS(nothing, 0);
void nothing(const void *params, const struct rig_host_group *g) {
  (void)params;
  (void)g;
}
