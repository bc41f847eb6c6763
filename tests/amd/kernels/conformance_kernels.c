/* conformance_kernels.c — the kernel the conformance laws load on the AMD simulator's target
 * (tests/amd/conformance_targets.cpp), built by clang-19 for gfx1100: the equivalent of
 * tests/conformance/kernels.c, which the host device loads. */

/* Does nothing: the function the laws of images resolve. */
__attribute__((amdgpu_kernel, visibility("default"))) void conf_nothing(void) {}
