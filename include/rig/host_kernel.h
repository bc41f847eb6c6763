/* host_kernel.h — how the host device ("CPU") calls a kernel.
 *
 * A kernel for the host device is a C function in a relocatable ELF object (cc -c):
 *
 *   void NAME(const void *params, const struct rig_host_group *group);
 *
 * The host device calls it once per group of the launch's grid, on one of its worker
 * threads, with the launch's parameters (refs already patched to buffer addresses) and
 * the group's place in the grid. A group's threads are the kernel's own loop: it runs
 * threads[0] * threads[1] * threads[2] iterations as it sees fit (a loop the compiler
 * vectorizes is the usual shape). Groups of one launch run concurrently on different
 * workers, in no set order; `shared` is the group's scratch of `shared_bytes` bytes,
 * private to the call.
 *
 * A kernel states the parameter bytes it reads, and optionally the most threads a group
 * may have, with the macros below; rig then refuses launches that give fewer bytes or
 * more threads (Function::params, Function::threads).
 */
#ifndef RIG_HOST_KERNEL_H
#define RIG_HOST_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rig_host_group {
  uint32_t group[3];    /* this group's index in x, y, z */
  uint32_t groups[3];   /* the grid's groups in x, y, z */
  uint32_t threads[3];  /* threads per group in x, y, z */
  uint32_t shared_bytes;
  void *shared;         /* shared_bytes of scratch for this call, aligned to 64 */
  uint64_t value;       /* the timeline value the launch completes */
};

typedef void rig_host_kernel(const void *params, const struct rig_host_group *group);

/* The parameter bytes kernel NAME reads: a symbol rig_params_NAME. */
#define RIG_HOST_PARAMS(NAME, BYTES) const uint32_t rig_params_##NAME = (BYTES)
/* The most threads a group of kernel NAME may have: a symbol rig_threads_NAME. */
#define RIG_HOST_THREADS(NAME, N) const uint32_t rig_threads_##NAME = (N)

#ifdef __cplusplus
}
#endif

#endif /* RIG_HOST_KERNEL_H */
