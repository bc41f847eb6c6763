// stack.cu — kernels with a stack: private arrays written and read at indices known only at
// run time live in local memory (the cubin's FRAME_SIZE), so a launch needs the local memory
// backing store. pick_private: a[j] = in[i] + j, then a[(pick * j + i) % 32] += j for each j,
// and out[i] = a[(pick + i) % 32]. huge_private: a 128 KiB array per thread, more than rig's
// driver gives a thread.
extern "C" __global__ void pick_private(const int* in, int* out, int n, int pick) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int a[32];
  for (int j = 0; j < 32; ++j) a[j] = in[i] + j;
  for (int j = 0; j < 32; ++j) a[(pick * j + i) & 31] += j;
  out[i] = a[(pick + i) & 31];
}

extern "C" __global__ void huge_private(const int* in, int* out, int pick) {
  int a[32768];
  for (int j = 0; j < 32768; ++j) a[j] = in[j] + j;
  out[threadIdx.x] = a[(pick + threadIdx.x) & 32767];
}
