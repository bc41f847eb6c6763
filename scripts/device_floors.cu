// device_floors.cu — the floors rig's CUDA driver is measured against, taken in the same run
// by scripts/device-check: raw CUDA driver API calls, no rig.
//
//   device_floors --arch           prints the GPU's architecture ("sm_90") and exits
//   device_floors CUBIN [--quick]  prints one JSON object:
//     launch_wait_us  one launch of the cubin's `empty` kernel + cuStreamSynchronize (median)
//     graph64_us      cuGraphLaunch of a graph of 64 `empty` kernels + cuStreamSynchronize (median)
//     h2d_gbps, d2h_gbps  cuMemcpyHtoD / cuMemcpyDtoH of 256 MiB of pinned memory (best of 3)
//
// It links no libcuda: it opens the driver's libcuda.so.1 at run time (RIG_LIBCUDA names
// another), so that one build runs on machines whose driver and system libraries differ.
// Build (scripts/device-check --build-static):
//   nvcc -O2 -cudart=static -Xcompiler=-static-libstdc++,-static-libgcc -o device_floors device_floors.cu -ldl
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

// The driver API calls the floors make, by the names cuda.h gives them (cuMemAlloc is
// cuMemAlloc_v2, and so on): each a pointer dlsym finds in libcuda.
#define RIG_FLOORS_CALLS(X)                                                                            \
  X(cuInit) X(cuDeviceGet) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent)     \
  X(cuModuleLoadData) X(cuModuleGetFunction) X(cuStreamCreate) X(cuLaunchKernel) X(cuStreamSynchronize) \
  X(cuGraphCreate) X(cuGraphAddKernelNode) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuMemHostAlloc)   \
  X(cuMemAlloc) X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuMemFree)  \
  X(cuMemFreeHost) X(cuStreamDestroy) X(cuModuleUnload) X(cuDevicePrimaryCtxRelease) X(cuGetErrorName) \
  X(cuGetErrorString)
#define RIG_NAME_OF(f) #f
#define RIG_SYMBOL_OF(f) RIG_NAME_OF(f)
struct Api {
#define RIG_DECLARE(f) decltype(&::f) f = nullptr;
  RIG_FLOORS_CALLS(RIG_DECLARE)
#undef RIG_DECLARE
};
Api api;

// Opens libcuda and finds every call; exits with status 2 naming what is missing.
void load_libcuda() {
  const char* path = std::getenv("RIG_LIBCUDA");
  if (!path || !*path) path = "libcuda.so.1";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "device_floors: cannot load %s: %s\n", path, dlerror());
    std::exit(2);
  }
#define RIG_LOAD(f)                                                                               \
  api.f = reinterpret_cast<decltype(api.f)>(dlsym(lib, RIG_SYMBOL_OF(f)));                      \
  if (!api.f) {                                                                                    \
    std::fprintf(stderr, "device_floors: %s has no %s\n", path, RIG_SYMBOL_OF(f));                \
    std::exit(2);                                                                                  \
  }
  RIG_FLOORS_CALLS(RIG_LOAD)
#undef RIG_LOAD
}

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "?";
  const char* text = "?";
  api.cuGetErrorName(r, &name);
  api.cuGetErrorString(r, &text);
  std::fprintf(stderr, "device_floors: %s failed: %s: %s\n", what, name, text);
  std::exit(2);
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: device_floors --arch | device_floors CUBIN [--quick]\n");
    return 2;
  }
  load_libcuda();
  check(api.cuInit(0), "cuInit");
  CUdevice device;
  check(api.cuDeviceGet(&device, 0), "cuDeviceGet");
  if (std::string(argv[1]) == "--arch") {
    int major = 0, minor = 0;
    check(api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "cuDeviceGetAttribute");
    check(api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "cuDeviceGetAttribute");
    std::printf("sm_%d%d\n", major, minor);
    return 0;
  }
  const bool quick = argc > 2 && std::string(argv[2]) == "--quick";
  const int iterations = quick ? 50 : 2000;
  const size_t bytes = quick ? size_t(16) << 20 : size_t(256) << 20;

  CUcontext ctx;
  check(api.cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  check(api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "device_floors: cannot read %s\n", argv[1]);
    return 2;
  }
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CUmodule module;
  check(api.cuModuleLoadData(&module, image.data()), "cuModuleLoadData");
  CUfunction empty;
  check(api.cuModuleGetFunction(&empty, module, "empty"), "cuModuleGetFunction(empty)");
  CUstream stream;
  check(api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  // One launch + synchronize.
  auto launch = [&] {
    check(api.cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), "cuLaunchKernel");
    check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  };
  for (int i = 0; i < 100; ++i) launch();
  std::vector<double> launch_us;
  for (int i = 0; i < iterations; ++i) {
    double start = now_us();
    launch();
    launch_us.push_back(now_us() - start);
  }

  // A graph of 64 kernels, each after the one before.
  CUgraph graph;
  check(api.cuGraphCreate(&graph, 0), "cuGraphCreate");
  std::vector<CUgraphNode> nodes;
  for (int i = 0; i < 64; ++i) {
    CUDA_KERNEL_NODE_PARAMS p;
    std::memset(&p, 0, sizeof p);
    p.func = empty;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    CUgraphNode node;
    check(api.cuGraphAddKernelNode(&node, graph, nodes.empty() ? nullptr : &nodes.back(), nodes.empty() ? 0 : 1, &p),
          "cuGraphAddKernelNode");
    nodes.push_back(node);
  }
  CUgraphExec exec;
  check(api.cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  auto run_graph = [&] {
    check(api.cuGraphLaunch(exec, stream), "cuGraphLaunch");
    check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  };
  for (int i = 0; i < 20; ++i) run_graph();
  std::vector<double> graph_us;
  for (int i = 0; i < iterations / 4 + 1; ++i) {
    double start = now_us();
    run_graph();
    graph_us.push_back(now_us() - start);
  }

  // 256 MiB each way, pinned host memory.
  void* host;
  CUdeviceptr dev;
  check(api.cuMemHostAlloc(&host, bytes, 0), "cuMemHostAlloc");
  check(api.cuMemAlloc(&dev, bytes), "cuMemAlloc");
  std::memset(host, 1, bytes);
  double h2d = 0, d2h = 0;
  for (int i = 0; i < 3; ++i) {
    double start = now_us();
    check(api.cuMemcpyHtoD(dev, host, bytes), "cuMemcpyHtoD");
    h2d = std::max(h2d, double(bytes) / (now_us() - start) / 1e3);
    start = now_us();
    check(api.cuMemcpyDtoH(host, dev, bytes), "cuMemcpyDtoH");
    d2h = std::max(d2h, double(bytes) / (now_us() - start) / 1e3);
  }

  std::printf("{\"launch_wait_us\": %.2f, \"graph64_us\": %.2f, \"h2d_gbps\": %.2f, \"d2h_gbps\": %.2f, "
              "\"copy_mib\": %zu}\n",
              median(launch_us), median(graph_us), h2d, d2h, bytes >> 20);
  api.cuGraphExecDestroy(exec);
  api.cuGraphDestroy(graph);
  api.cuMemFree(dev);
  api.cuMemFreeHost(host);
  api.cuStreamDestroy(stream);
  api.cuModuleUnload(module);
  api.cuDevicePrimaryCtxRelease(device);
  return 0;
}
