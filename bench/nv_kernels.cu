// nv_kernels.cu — the kernel `rig bench submit --device NV:N` launches (bench/nv_submit.cpp):
// two pointer parameters (16 bytes, the bench's two buffer refs) it leaves alone. Built with
// nvcc by scripts/nv-kernels into bench/kernels/, committed, and embedded in the rig tool.
extern "C" __global__ void bench_empty(void* a, void* b) {
  (void)a;
  (void)b;
}
