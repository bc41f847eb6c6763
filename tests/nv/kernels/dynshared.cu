// dynshared.cu — a block reverses its part of `data` in place through dynamic shared
// memory (one word a thread, the launch's dynamic shared size blockDim.x * 4 bytes).
extern "C" __global__ void reverse_block(unsigned* data) {
  extern __shared__ unsigned staged[];
  unsigned base = blockIdx.x * blockDim.x;
  staged[threadIdx.x] = data[base + threadIdx.x];
  __syncthreads();
  data[base + threadIdx.x] = staged[blockDim.x - 1 - threadIdx.x];
}
