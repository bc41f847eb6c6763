// 64-bit integers, local arrays, floats and doubles, module variables, a call, divergence.
__constant__ int coeffs[8] = {3, -1, 4, -1, 5, -9, 2, 6};
__device__ unsigned long long counter = 0;
__device__ int table[4] = {10, 20, 30, 40};

extern "C" __global__ void int64_math(const unsigned long long* in, unsigned long long* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long x = in[i];
  const long long s = (long long)x;
  out[i * 8 + 0] = x * 0x9e3779b97f4a7c15ull + (x >> 7);
  out[i * 8 + 1] = __umul64hi(x, 0xc2b2ae3d27d4eb4full);
  out[i * 8 + 2] = x / (unsigned long long)(i + 3) + x % 1000003ull;
  out[i * 8 + 3] = (unsigned long long)(s / -7 + s % 11);
  out[i * 8 + 4] = __popcll(x) | ((unsigned long long)__clzll(x) << 8) | ((unsigned long long)__ffsll(x) << 16);
  out[i * 8 + 5] = __brevll(x) ^ (x << (i & 63));
  out[i * 8 + 6] = (unsigned long long)((unsigned)x * (unsigned long long)(unsigned)(x >> 32));
  out[i * 8 + 7] = (unsigned long long)__mul64hi(s, -3ll) + (unsigned long long)(s < 0 ? -s : s);
}

extern "C" __global__ void bits32(const unsigned* in, unsigned* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned x = in[i];
  const int s = (int)x;
  out[i * 8 + 0] = __byte_perm(x, 0x12345678u, 0x3715);
  out[i * 8 + 1] = (x >> 5) & 0x3ff;
  out[i * 8 + 2] = __umulhi(x, 0x9e3779b9u) + __mulhi(s, -77);
  out[i * 8 + 3] = (unsigned)(s / 13 + s % 13) + x / 7u;
  out[i * 8 + 4] = __brev(x) + __popc(x) + __clz(x);
  out[i * 8 + 5] = (unsigned)(s >> 3) ^ (x << 7) ^ (unsigned)min(s, 5) ^ max(x, 9u);
  out[i * 8 + 6] = (x & ~0xf0u) | ((x & 0xf) << 4) ;
  out[i * 8 + 7] = (unsigned)abs(s) + (unsigned)__sad(s, 100, 0u) + __usad(x, 7u, 1u);
}

__device__ __noinline__ float poly(float x, int k) {
  return x * (float)coeffs[k & 7] + (float)table[k & 3];
}

extern "C" __global__ void local_and_call(const int* in, float* out, int n) {
  int buf[16];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  for (int k = 0; k < 16; ++k) buf[k] = in[i] * k + coeffs[k & 7];
  int acc = 0;
  for (int k = 0; k < 16; ++k) acc += buf[(k * 5 + in[i]) & 15];
  out[i] = poly((float)acc, i);
  atomicAdd(&counter, 1ull);
}

extern "C" __global__ void transcend(const float* in, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float x = in[i];
  out[i * 10 + 0] = __expf(x);
  out[i * 10 + 1] = __logf(fabsf(x) + 1.0f);
  out[i * 10 + 2] = __sinf(x);
  out[i * 10 + 3] = __cosf(x);
  out[i * 10 + 4] = tanhf(x);
  out[i * 10 + 5] = sqrtf(fabsf(x));
  out[i * 10 + 6] = rsqrtf(fabsf(x) + 1.0f);
  out[i * 10 + 7] = x / (x * x + 1.0f);
  out[i * 10 + 8] = __fdividef(1.0f, x + 3.0f) + __saturatef(x) + fminf(x, 0.25f) + fmaxf(x, -0.5f);
  out[i * 10 + 9] = __fmaf_rz(x, 3.0f, 1.0f) + __fadd_rd(x, 0.1f) + __fmul_ru(x, 0.3f) +
                    (float)__float2int_rn(x * 10.0f) + truncf(x * 3.0f) + floorf(x) + ceilf(x);
}

extern "C" __global__ void doubles(const double* in, double* out, long long* ints) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const double x = in[i];
  out[i * 6 + 0] = x * x + 0.5 * x - 3.0;
  out[i * 6 + 1] = 1.0 / (x + 10.0);
  out[i * 6 + 2] = sqrt(fabs(x));
  out[i * 6 + 3] = fma(x, 1.5, -2.25);
  out[i * 6 + 4] = fmin(x, 1.0) + fmax(x, -1.0) + (double)(float)x;
  out[i * 6 + 5] = __drcp_rn(x + 20.0);
  ints[i * 2 + 0] = __double2ll_rz(x * 1e6);
  ints[i * 2 + 1] = (long long)__double2uint_rn(fabs(x) * 7.0) + (long long)__float2ull_rz((float)fabs(x));
}

extern "C" __global__ void divergent(const int* in, int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int v = in[i];
  int steps = 0;
  while (v != 1 && steps < 1000) {
    v = (v & 1) ? 3 * v + 1 : v / 2;
    ++steps;
  }
  if (threadIdx.x % 3 == 0) {
    out[i] = steps;
  } else if (threadIdx.x % 3 == 1) {
    out[i] = -steps;
  } else {
    out[i] = steps * 2 + table[i & 3];
  }
}
