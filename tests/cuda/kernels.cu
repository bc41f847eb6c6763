// kernels.cu — the CUDA tests' kernels. scripts/device-check builds them with nvcc into a
// cubin for a real GPU and passes its path in RIG_CUDA_TEST_CUBIN; elsewhere the tests load
// their committed sm_90 fatbin (kernels/, scripts/nv-kernels), whose PTX the fake libcuda
// runs on its interpreter.
#include <stdint.h>

// data[i] += add for i < n, one thread per element.
extern "C" __global__ void add_u32(uint32_t* data, uint64_t n, uint32_t add) {
  uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) data[i] += add;
}

// dst[i] = src[i] for i < n.
extern "C" __global__ void copy_u32(const uint32_t* src, uint32_t* dst, uint64_t n) {
  uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

// *at = value, by thread 0.
extern "C" __global__ void write_u64(uint64_t* at, uint64_t value) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *at = value;
}

// Spins for about `ns` nanoseconds of the GPU's global timer, then *at = value.
extern "C" __global__ void slow_store(uint32_t* at, uint64_t ns, uint32_t value) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
  *(volatile uint32_t*)at = value;
}

// Nothing: the floor of a launch.
extern "C" __global__ void empty() {}

// A store to an address no allocation holds: CUDA_ERROR_ILLEGAL_ADDRESS fails the context.
extern "C" __global__ void fault() { *(volatile uint32_t*)(uintptr_t)0x10 = 1; }

// A trap: CUDA_ERROR_LAUNCH_FAILED fails the context.
extern "C" __global__ void trap() { __trap(); }
