// Atomics on global and shared memory.
extern "C" __global__ void histogram(const unsigned* in, unsigned* bins, int n) {
  __shared__ unsigned local[16];
  if (threadIdx.x < 16) local[threadIdx.x] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[in[i] & 15], 1u);
  __syncthreads();
  if (threadIdx.x < 16) atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

// One slot each: add, sub, min, max, inc, dec, and, or, xor, exch, cas (32 and 64 bit), f32 add.
extern "C" __global__ void atomic_mix(const int* in, int* r, unsigned long long* r64, float* f,
                                      int* old) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int v = in[i];
  atomicAdd(&r[0], v);
  atomicSub(&r[1], v);
  atomicMin(&r[2], v);
  atomicMax(&r[3], v);
  atomicInc((unsigned*)&r[4], 17u);
  atomicDec((unsigned*)&r[5], 13u);
  atomicAnd(&r[6], ~(1 << (i & 31)));
  atomicOr(&r[7], 1 << (i & 31));
  atomicXor(&r[8], v);
  atomicMax((unsigned*)&r[9], (unsigned)v);
  old[i] = atomicExch(&r[10], i);
  atomicCAS(&r[11], i, i + 1);
  atomicAdd(&r64[0], (unsigned long long)v * 0x100000001ull);
  atomicMax(&r64[1], (unsigned long long)v << 33);
  atomicMin((long long*)&r64[2], (long long)v - 1000);
  atomicCAS(&r64[3], (unsigned long long)i, (unsigned long long)i + 1);
  atomicAdd(&f[0], (float)v * 0.5f);
  atomicExch((unsigned long long*)&r64[4], (unsigned long long)i);
}

extern "C" __global__ void shared_atomics(const int* in, int* out) {
  __shared__ int s[4];
  __shared__ unsigned long long s64;
  if (threadIdx.x < 4) s[threadIdx.x] = threadIdx.x == 2 ? 0x7fffffff : 0;
  if (threadIdx.x == 0) s64 = 0;
  __syncthreads();
  const int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  atomicAdd(&s[0], v);
  atomicMax(&s[1], v);
  atomicMin(&s[2], v);
  atomicXor(&s[3], v);
  atomicAdd(&s64, (unsigned long long)(unsigned)v);
  __syncthreads();
  if (threadIdx.x < 4) out[blockIdx.x * 6 + threadIdx.x] = s[threadIdx.x];
  if (threadIdx.x == 0) {
    out[blockIdx.x * 6 + 4] = (int)(s64 & 0xffffffffu);
    out[blockIdx.x * 6 + 5] = (int)(s64 >> 32);
  }
}
