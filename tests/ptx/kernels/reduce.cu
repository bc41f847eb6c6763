// Reductions: a block sum through shared memory and warp shuffles, and warp-level
// scans, votes, ballots and matches.
extern "C" __global__ void block_sum(const float* in, float* out, int n) {
  __shared__ float partial[32];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < (blockDim.x + 31) / 32 ? partial[lane] : 0.0f;
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(0xffffffffu, v, d);
    if (lane == 0) out[blockIdx.x] = v;
  }
}

extern "C" __global__ void int_sum(const unsigned* in, unsigned* out, int n) {
  unsigned v = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) v += in[i];
  v = __reduce_add_sync(0xffffffffu, v);
  if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}

// Per thread: an inclusive warp scan, the ballot of odd values, all/any/uni votes,
// a match of equal values and an idx shuffle.
extern "C" __global__ void warp_ops(const int* in, int* scan, unsigned* ballot, int* votes,
                                    unsigned* match, int* idx) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x & 31;
  int v = in[i];
  int s = v;
  for (int d = 1; d < 32; d <<= 1) {
    const int t = __shfl_up_sync(0xffffffffu, s, d);
    if (lane >= d) s += t;
  }
  scan[i] = s;
  ballot[i] = __ballot_sync(0xffffffffu, v & 1);
  votes[i] = __all_sync(0xffffffffu, v > 0) | (__any_sync(0xffffffffu, v > 100) << 1) |
             (__uni_sync(0xffffffffu, v >> 4) << 2);
  match[i] = __match_any_sync(0xffffffffu, v & 3);
  idx[i] = __shfl_sync(0xffffffffu, v, (lane * 7) & 31) + (int)__activemask() % 3 +
           __reduce_max_sync(0xffffffffu, (unsigned)v) + __reduce_min_sync(0xffffffffu, v);
}
