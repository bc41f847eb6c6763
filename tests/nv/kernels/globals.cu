// globals.cu — module variables: out[i] = coefficients[i % 4] * i + bias for i < n, from the
// __constant__ table, and every thread counts itself in the __device__ global `launched`
// (read back by read_launched).
__constant__ int coefficients[4] = {1, 2, 3, 4};
__constant__ int bias = 100;
__device__ unsigned launched = 0;

extern "C" __global__ void scale_by_constants(int* out, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = coefficients[i % 4] * int(i) + bias;
  atomicAdd(&launched, 1u);
}

extern "C" __global__ void read_launched(unsigned* out) { *out = launched; }
