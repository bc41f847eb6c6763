// device_floors.cu — the floors rig's CUDA driver is measured against, taken in the same run
// by scripts/device-check: raw CUDA driver API calls, no rig.
//
//   device_floors --arch           prints the GPU's architecture ("sm_90") and exits
//   device_floors CUBIN [--quick]  prints one JSON object:
//     launch_wait_us  one launch of the cubin's `empty` kernel + cuStreamSynchronize (median)
//     graph64_us      cuGraphLaunch of a graph of 64 `empty` kernels + cuStreamSynchronize (median)
//     h2d_gbps, d2h_gbps  cuMemcpyHtoD / cuMemcpyDtoH of 256 MiB of pinned memory (best of 3)
//
// Build: nvcc -O2 -o device_floors device_floors.cu -lcuda
#include <cuda.h>

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

void check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "?";
  const char* text = "?";
  cuGetErrorName(r, &name);
  cuGetErrorString(r, &text);
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
  check(cuInit(0), "cuInit");
  CUdevice device;
  check(cuDeviceGet(&device, 0), "cuDeviceGet");
  if (std::string(argv[1]) == "--arch") {
    int major = 0, minor = 0;
    check(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device), "cuDeviceGetAttribute");
    check(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device), "cuDeviceGetAttribute");
    std::printf("sm_%d%d\n", major, minor);
    return 0;
  }
  const bool quick = argc > 2 && std::string(argv[2]) == "--quick";
  const int iterations = quick ? 50 : 2000;
  const size_t bytes = quick ? size_t(16) << 20 : size_t(256) << 20;

  CUcontext ctx;
  check(cuDevicePrimaryCtxRetain(&ctx, device), "cuDevicePrimaryCtxRetain");
  check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "device_floors: cannot read %s\n", argv[1]);
    return 2;
  }
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CUmodule module;
  check(cuModuleLoadData(&module, image.data()), "cuModuleLoadData");
  CUfunction empty;
  check(cuModuleGetFunction(&empty, module, "empty"), "cuModuleGetFunction(empty)");
  CUstream stream;
  check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  // One launch + synchronize.
  auto launch = [&] {
    check(cuLaunchKernel(empty, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr), "cuLaunchKernel");
    check(cuStreamSynchronize(stream), "cuStreamSynchronize");
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
  check(cuGraphCreate(&graph, 0), "cuGraphCreate");
  std::vector<CUgraphNode> nodes;
  for (int i = 0; i < 64; ++i) {
    CUDA_KERNEL_NODE_PARAMS p;
    std::memset(&p, 0, sizeof p);
    p.func = empty;
    p.gridDimX = p.gridDimY = p.gridDimZ = 1;
    p.blockDimX = p.blockDimY = p.blockDimZ = 1;
    CUgraphNode node;
    check(cuGraphAddKernelNode(&node, graph, nodes.empty() ? nullptr : &nodes.back(), nodes.empty() ? 0 : 1, &p),
          "cuGraphAddKernelNode");
    nodes.push_back(node);
  }
  CUgraphExec exec;
  check(cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  auto run_graph = [&] {
    check(cuGraphLaunch(exec, stream), "cuGraphLaunch");
    check(cuStreamSynchronize(stream), "cuStreamSynchronize");
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
  check(cuMemHostAlloc(&host, bytes, 0), "cuMemHostAlloc");
  check(cuMemAlloc(&dev, bytes), "cuMemAlloc");
  std::memset(host, 1, bytes);
  double h2d = 0, d2h = 0;
  for (int i = 0; i < 3; ++i) {
    double start = now_us();
    check(cuMemcpyHtoD(dev, host, bytes), "cuMemcpyHtoD");
    h2d = std::max(h2d, double(bytes) / (now_us() - start) / 1e3);
    start = now_us();
    check(cuMemcpyDtoH(host, dev, bytes), "cuMemcpyDtoH");
    d2h = std::max(d2h, double(bytes) / (now_us() - start) / 1e3);
  }

  std::printf("{\"launch_wait_us\": %.2f, \"graph64_us\": %.2f, \"h2d_gbps\": %.2f, \"d2h_gbps\": %.2f, "
              "\"copy_mib\": %zu}\n",
              median(launch_us), median(graph_us), h2d, d2h, bytes >> 20);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  cuMemFree(dev);
  cuMemFreeHost(host);
  cuStreamDestroy(stream);
  cuModuleUnload(module);
  cuDevicePrimaryCtxRelease(device);
  return 0;
}
