// reduce.cu — a block's sum of its elements of `in` into out[blockIdx.x]: each warp adds its
// 32 values with shuffles, the warps' sums meet in shared memory, and warp 0 adds those.
// At most 256 threads a block (__launch_bounds__, which the cubin records as MAX_THREADS).
extern "C" __global__ void __launch_bounds__(256) reduce_sum(const unsigned* in, unsigned* out, unsigned n) {
  __shared__ unsigned warp_sums[32];
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned v = i < n ? in[i] : 0;
  for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
  unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    unsigned warps = (blockDim.x + 31) / 32;
    v = lane < warps ? warp_sums[lane] : 0;
    for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
    if (lane == 0) out[blockIdx.x] = v;
  }
}
