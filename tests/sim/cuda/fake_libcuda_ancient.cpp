// fake_libcuda_ancient.cpp — a libcuda from before cuGetProcAddress (CUDA 11.2): it exports
// cuInit and cuDriverGetVersion only, so that tests see rig refuse a library that old.
#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT int cuInit(unsigned) { return 0; }

EXPORT int cuDriverGetVersion(int* version) {
  *version = 11020;
  return 0;
}
