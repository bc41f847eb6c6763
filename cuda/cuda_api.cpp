// cuda_api.cpp — loads libcuda at run time and finds the functions of cuda_api.hpp in it.
#include "cuda_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <mutex>

namespace rig::cuda::api {

namespace {

// The default library: the driver's own, which the NVIDIA driver installs (never the
// toolkit's stub).
constexpr const char* kDefaultPath = "libcuda.so.1";

// Finds `name` at interface version `version` and stores it in `fn`. True if found.
template <class F>
bool bind(const Library& lib, F& fn, const char* name, int version = kMinimumVersion) {
  void* p = nullptr;
  CUresult r;
  if (lib.api.cuGetProcAddress_v2) {
    int status = 0;
    r = lib.api.cuGetProcAddress_v2(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);
  } else {
    r = lib.api.cuGetProcAddress(name, &p, version, CU_GET_PROC_ADDRESS_DEFAULT);
  }
  if (r != CUDA_SUCCESS || !p) return false;
  fn = reinterpret_cast<F>(p);
  return true;
}

// Binds every function rig needs; the name of the first one missing, or "" if none is.
std::string bind_all(Library& lib) {
  Api& a = lib.api;
  std::string missing;
  auto need = [&](auto& fn, const char* name) {
    if (!bind(lib, fn, name) && missing.empty()) missing = name;
  };
  need(a.cuInit, "cuInit");
  need(a.cuGetErrorName, "cuGetErrorName");
  need(a.cuGetErrorString, "cuGetErrorString");
  need(a.cuDeviceGetCount, "cuDeviceGetCount");
  need(a.cuDeviceGet, "cuDeviceGet");
  need(a.cuDeviceGetName, "cuDeviceGetName");
  need(a.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  need(a.cuDeviceTotalMem, "cuDeviceTotalMem");
  need(a.cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
  need(a.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer");
  need(a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  need(a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease");
  need(a.cuDevicePrimaryCtxReset, "cuDevicePrimaryCtxReset");
  need(a.cuCtxGetCurrent, "cuCtxGetCurrent");
  need(a.cuCtxSetCurrent, "cuCtxSetCurrent");
  need(a.cuCtxSynchronize, "cuCtxSynchronize");
  need(a.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess");
  need(a.cuMemGetInfo, "cuMemGetInfo");
  need(a.cuMemAlloc, "cuMemAlloc");
  need(a.cuMemFree, "cuMemFree");
  need(a.cuMemHostAlloc, "cuMemHostAlloc");
  need(a.cuMemFreeHost, "cuMemFreeHost");
  need(a.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer");
  need(a.cuMemHostRegister, "cuMemHostRegister");
  need(a.cuMemHostUnregister, "cuMemHostUnregister");
  need(a.cuPointerGetAttribute, "cuPointerGetAttribute");
  need(a.cuStreamCreate, "cuStreamCreate");
  need(a.cuStreamDestroy, "cuStreamDestroy");
  need(a.cuStreamQuery, "cuStreamQuery");
  need(a.cuStreamSynchronize, "cuStreamSynchronize");
  need(a.cuStreamWaitEvent, "cuStreamWaitEvent");
  need(a.cuEventCreate, "cuEventCreate");
  need(a.cuEventDestroy, "cuEventDestroy");
  need(a.cuEventRecord, "cuEventRecord");
  need(a.cuEventQuery, "cuEventQuery");
  need(a.cuEventSynchronize, "cuEventSynchronize");
  need(a.cuEventElapsedTime, "cuEventElapsedTime");
  need(a.cuMemcpyAsync, "cuMemcpyAsync");
  need(a.cuMemcpy2DAsync, "cuMemcpy2DAsync");
  need(a.cuMemsetD8Async, "cuMemsetD8Async");
  need(a.cuMemsetD2D8Async, "cuMemsetD2D8Async");
  need(a.cuModuleLoadDataEx, "cuModuleLoadDataEx");
  need(a.cuModuleUnload, "cuModuleUnload");
  need(a.cuModuleGetFunction, "cuModuleGetFunction");
  need(a.cuFuncGetAttribute, "cuFuncGetAttribute");
  need(a.cuFuncSetAttribute, "cuFuncSetAttribute");
  need(a.cuLaunchKernel, "cuLaunchKernel");
  need(a.cuGraphCreate, "cuGraphCreate");
  need(a.cuGraphAddKernelNode, "cuGraphAddKernelNode");
  need(a.cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  need(a.cuGraphDestroy, "cuGraphDestroy");
  need(a.cuGraphExecDestroy, "cuGraphExecDestroy");
  // Optional: without them the driver does less (Mapped memory, known params) or refuses
  // to open devices (stream memory operations), saying why.
  bind(lib, a.cuMemAllocManaged, "cuMemAllocManaged");
  bind(lib, a.cuMemAdvise, "cuMemAdvise");
  bind(lib, a.cuMemGetHandleForAddressRange, "cuMemGetHandleForAddressRange", kHandleForAddressRangeVersion);
  bind(lib, a.cuFuncGetParamInfo, "cuFuncGetParamInfo", kParamInfoVersion);
  lib.stream_memops = bind(lib, a.cuStreamWriteValue64, "cuStreamWriteValue64") &&
                      bind(lib, a.cuStreamWaitValue64, "cuStreamWaitValue64");
  return missing;
}

Result<const Library*> open(const std::string& path, bool chosen) {
  const std::string which = chosen ? fmt::format("{} (RIG_LIBCUDA)", path) : path;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return std::unexpected(fmt::format(
        "libcuda is absent: cannot load {}: {}; install the NVIDIA driver, or set RIG_LIBCUDA to "
        "the path of libcuda.so.1",
        which, why ? why : "unknown error"));
  }
  auto lib = std::make_unique<Library>();
  lib->path = path;
  lib->handle = handle;
  Api& a = lib->api;
  a.cuDriverGetVersion = reinterpret_cast<decltype(a.cuDriverGetVersion)>(dlsym(handle, "cuDriverGetVersion"));
  a.cuGetProcAddress_v2 = reinterpret_cast<decltype(a.cuGetProcAddress_v2)>(dlsym(handle, "cuGetProcAddress_v2"));
  a.cuGetProcAddress = reinterpret_cast<decltype(a.cuGetProcAddress)>(dlsym(handle, "cuGetProcAddress"));
  if (!a.cuDriverGetVersion) {
    dlclose(handle);
    return std::unexpected(fmt::format("{} is not libcuda: it has no cuDriverGetVersion", which));
  }
  const CUresult asked = a.cuDriverGetVersion(&lib->version);
  if (asked == CUDA_ERROR_STUB_LIBRARY) {
    dlclose(handle);
    return std::unexpected(fmt::format(
        "libcuda is absent: {} is the CUDA toolkit's stub library, not the NVIDIA driver's; install the NVIDIA "
        "driver, or set RIG_LIBCUDA to the path of its libcuda.so.1",
        which));
  }
  if (asked != CUDA_SUCCESS) {
    dlclose(handle);
    return std::unexpected(fmt::format("cuDriverGetVersion of {} failed (CUresult {})", which, asked));
  }
  if (lib->version < kMinimumVersion || (!a.cuGetProcAddress_v2 && !a.cuGetProcAddress)) {
    std::string version = version_text(lib->version);
    dlclose(handle);
    return std::unexpected(fmt::format(
        "libcuda is too old: {} reports CUDA {}{}; rig needs CUDA {} or later (update the NVIDIA "
        "driver)",
        which, version, a.cuGetProcAddress || a.cuGetProcAddress_v2 ? "" : " and has no cuGetProcAddress",
        version_text(kMinimumVersion)));
  }
  if (std::string missing = bind_all(*lib); !missing.empty()) {
    dlclose(handle);
    return std::unexpected(fmt::format("libcuda is too old: {} (CUDA {}) lacks {}", which,
                                       version_text(lib->version), missing));
  }
  return lib.release();
}

}  // namespace

std::string version_text(int version) {
  if (version <= 0) return "unknown";
  return fmt::format("{}.{}", version / 1000, version % 1000 / 10);
}

Result<const Library*> load(const std::string& given) {
  // Libraries stay loaded for the life of the process: their functions and the records of
  // devices opened through them must stay valid. Never destroyed.
  static auto* mutex = new std::mutex;
  static auto* loaded = new std::map<std::string, const Library*>;
  const char* env = std::getenv("RIG_LIBCUDA");
  const bool chosen = given.empty() && env && *env;
  std::string path = !given.empty() ? given : chosen ? env : kDefaultPath;
  std::lock_guard g(*mutex);
  auto it = loaded->find(path);
  if (it == loaded->end()) {
    auto lib = open(path, chosen);
    if (!lib) return lib;
    return loaded->emplace(path, *lib).first->second;
  }
  // The version is asked again at each load: the library may be a test's fake whose answer
  // changes.
  const Library& lib = *it->second;
  int version = 0;
  if (lib.api.cuDriverGetVersion(&version) != CUDA_SUCCESS) version = 0;
  if (version < kMinimumVersion)
    return std::unexpected(fmt::format("libcuda is too old: {} reports CUDA {}; rig needs CUDA {} or later (update "
                                       "the NVIDIA driver)",
                                       chosen ? fmt::format("{} (RIG_LIBCUDA)", path) : path, version_text(version),
                                       version_text(kMinimumVersion)));
  return &lib;
}

std::string describe(const Library& lib, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (lib.api.cuGetErrorName && lib.api.cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
  if (lib.api.cuGetErrorString && lib.api.cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  if (!name) return fmt::format("CUresult {}", r);
  return text ? fmt::format("{}: {}", name, text) : std::string(name);
}

}  // namespace rig::cuda::api
