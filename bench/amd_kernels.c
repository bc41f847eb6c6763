/* amd_kernels.c — the kernel `rig bench submit --device AMD:N` launches (bench/amd_submit.cpp),
 * built by clang-19 for gfx1100 and embedded in the rig tool. */

/* Does nothing with its two pointers: the submit bench's launch part has two buffer refs (16
 * parameter bytes), which only the submission handles. */
__attribute__((amdgpu_kernel, visibility("default"))) void bench_empty(int *read, int *written) {
  (void)read;
  (void)written;
}
