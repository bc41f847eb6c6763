// atomics.cu — every thread i < n adds in[i] to *sum, raises *max to in[i] and counts itself
// in histogram[in[i] % bins].
extern "C" __global__ void atomic_stats(const unsigned* in, unsigned n, unsigned long long* sum, unsigned* max,
                                        unsigned* histogram, unsigned bins) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  atomicAdd(sum, (unsigned long long)in[i]);
  atomicMax(max, in[i]);
  atomicAdd(&histogram[in[i] % bins], 1u);
}
