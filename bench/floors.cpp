#include "floors.hpp"

#include <atomic>
#include <thread>

#ifndef RIG_STATIC_BUNDLE  // a static bundle has no OpenCL loader (Debian ships it shared only)
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif
#include <omp.h>

namespace rig::bench {

Spread spin_ping_pong(int repeats, std::uint64_t n) { return spin_hand_off(repeats, n, nullptr, 0); }

Spread spin_hand_off(int repeats, std::uint64_t n, rig_host_kernel* kernel, int calls) {
  alignas(64) std::atomic<std::uint64_t> ping{0};
  alignas(64) std::atomic<std::uint64_t> pong{0};
  std::atomic<bool> stop{false};
  std::thread partner([&] {
    std::uint64_t seen = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      std::uint64_t v = ping.load(std::memory_order_acquire);
      if (v != seen) {
        seen = v;
        rig_host_group group{{0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 0, nullptr, v};
        for (int i = 0; i < calls; ++i) kernel(nullptr, &group);
        pong.store(v, std::memory_order_release);
      }
    }
  });
  std::uint64_t counter = 0;
  Spread s = measure(repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      ++counter;
      ping.store(counter, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) != counter) {
      }
    }
  });
  stop = true;
  partner.join();
  return s;
}

std::optional<Spread> opencl_empty_kernel(int repeats, std::uint64_t n, std::string& why) {
#ifdef RIG_STATIC_BUNDLE
  (void)repeats, (void)n;
  why = "this rig is a static bundle, built without OpenCL";
  return std::nullopt;
#else
  cl_platform_id platform;
  cl_uint count = 0;
  if (clGetPlatformIDs(1, &platform, &count) != CL_SUCCESS || count == 0) {
    why = "no OpenCL platform";
    return std::nullopt;
  }
  cl_device_id device;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_CPU, 1, &device, nullptr) != CL_SUCCESS) {
    why = "no OpenCL CPU device";
    return std::nullopt;
  }
  cl_int err = 0;
  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
  const char* source = "kernel void empty(void) {}";
  cl_program program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
  if (clBuildProgram(program, 1, &device, "", nullptr, nullptr) != CL_SUCCESS) {
    why = "the OpenCL compiler failed on an empty kernel";
    return std::nullopt;
  }
  cl_kernel kernel = clCreateKernel(program, "empty", &err);
  std::size_t global = 1, local = 1;
  Spread s = measure(repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &global, &local, 0, nullptr, nullptr);
      clFinish(queue);
    }
  });
  clReleaseKernel(kernel);
  clReleaseProgram(program);
  clReleaseCommandQueue(queue);
  clReleaseContext(context);
  return s;
#endif
}

Spread openmp_empty_region(int repeats, std::uint64_t n, int threads) {
  return measure(repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
#pragma omp parallel num_threads(threads)
      { asm volatile("" ::: "memory"); }
    }
  });
}

}  // namespace rig::bench
