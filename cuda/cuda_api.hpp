// cuda_api.hpp — the part of the CUDA Driver API that rig's CUDA driver calls, declared by
// rig itself, and the loader that finds it in libcuda at run time.
//
// Nothing here comes from CUDA's headers: the types, constants and signatures are facts of
// the public CUDA Driver API documentation, written out for the functions rig uses. rig asks
// libcuda for each function with cuGetProcAddress at the interface version noted beside it
// (12000: CUDA 12.0), so a newer driver keeps giving it the signatures declared here. The
// fake libcuda of tests/sim/cuda implements the same declarations.
#pragma once

#include <rig/cuda_abi.hpp>
#include <rig/edge.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

struct CUevent_st;
struct CUmod_st;

namespace rig::cuda::api {

using rig::cuda_abi::CUcontext;
using rig::cuda_abi::CUdeviceptr;
using rig::cuda_abi::CUfunction;
using rig::cuda_abi::CUgraph;
using rig::cuda_abi::CUgraphExec;
using rig::cuda_abi::CUgraphNode;
using rig::cuda_abi::CUkernel;
using rig::cuda_abi::CUresult;
using rig::cuda_abi::CUstream;
using CUdevice = int;
using CUevent = ::CUevent_st*;
using CUmodule = ::CUmod_st*;
using CUhostFn = void (*)(void* user);
using cuuint64_t = std::uint64_t;

// The lowest libcuda interface rig uses: CUDA 12.0 (cuDriverGetVersion's 1000 * major +
// 10 * minor).
constexpr int kMinimumVersion = 12000;
// cuFuncGetParamInfo arrived with CUDA 12.4; before it, rig does not know a kernel's params.
constexpr int kParamInfoVersion = 12040;

// CUresult values rig tells apart (CUDA Driver API, "Data types": CUresult).
enum : CUresult {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
  CUDA_ERROR_TOO_MANY_PEERS = 711,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

// CUdevice_attribute values rig reads.
enum : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,  // Y = 3, Z = 4
  CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,   // Y = 6, Z = 7
  CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
  CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
  CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1 = 93,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 99,
  CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST = 101,
  CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS = 122,
  CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,             // cuMemAlloc ranges export as dma-bufs
  CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED = 146,  // cuMemHostAlloc ranges do too
};

// cuMemGetHandleForAddressRange (CUDA 11.7): the handle type of a dma-buf descriptor, and the
// interface version that has the function. Its range must start and end on host pages.
constexpr int CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 0x1;
constexpr int kHandleForAddressRangeVersion = 11070;

// CUfunction_attribute values rig reads and sets.
enum : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};

// CUpointer_attribute values and CUmemorytype values.
enum : int {
  CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
};
enum : unsigned {
  CU_MEMORYTYPE_HOST = 1,
  CU_MEMORYTYPE_DEVICE = 2,
  CU_MEMORYTYPE_UNIFIED = 4,
};

// Flags.
constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr unsigned CU_EVENT_DEFAULT = 0x0;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr unsigned CU_STREAM_WAIT_VALUE_GEQ = 0x0;
constexpr unsigned CU_STREAM_WRITE_VALUE_DEFAULT = 0x0;
constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 0x1;
constexpr unsigned CU_MEMHOSTALLOC_DEVICEMAP = 0x2;
constexpr unsigned CU_MEMHOSTREGISTER_PORTABLE = 0x1;
constexpr unsigned CU_MEMHOSTREGISTER_DEVICEMAP = 0x2;
constexpr unsigned CU_MEM_ATTACH_GLOBAL = 0x1;
constexpr int CU_MEM_ADVISE_SET_PREFERRED_LOCATION = 3;
constexpr std::uint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;

// CUjit_option values for cuModuleLoadDataEx.
enum : int {
  CU_JIT_INFO_LOG_BUFFER = 3,
  CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
};

// CUDA_MEMCPY2D (CUDA_MEMCPY2D_v2): a 2D copy; rig fills only the unified-address fields.
struct Memcpy2D {
  std::size_t srcXInBytes = 0, srcY = 0;
  unsigned srcMemoryType = 0;
  const void* srcHost = nullptr;
  CUdeviceptr srcDevice = 0;
  void* srcArray = nullptr;
  std::size_t srcPitch = 0;
  std::size_t dstXInBytes = 0, dstY = 0;
  unsigned dstMemoryType = 0;
  void* dstHost = nullptr;
  CUdeviceptr dstDevice = 0;
  void* dstArray = nullptr;
  std::size_t dstPitch = 0;
  std::size_t WidthInBytes = 0, Height = 0;
};
static_assert(sizeof(void*) != 8 || sizeof(Memcpy2D) == 128, "Memcpy2D must have CUDA_MEMCPY2D's layout");

using KernelNodeParams = rig::cuda_abi::KernelNodeParams;

// The functions rig calls, each with the interface version it asks cuGetProcAddress for.
// A null member is a function libcuda does not have (only the optional ones may be null
// once the library loaded).
struct Api {
  // Found with dlsym: they work with every libcuda that has cuGetProcAddress.
  CUresult (*cuDriverGetVersion)(int*) = nullptr;
  CUresult (*cuGetProcAddress_v2)(const char*, void**, int, cuuint64_t, int*) = nullptr;
  CUresult (*cuGetProcAddress)(const char*, void**, int, cuuint64_t) = nullptr;  // 11.3 to 11.8

  // Initialization, errors, devices (12000).
  CUresult (*cuInit)(unsigned) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuGetErrorString)(CUresult, const char**) = nullptr;
  CUresult (*cuDeviceGetCount)(int*) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice*, int) = nullptr;
  CUresult (*cuDeviceGetName)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceTotalMem)(std::size_t*, CUdevice) = nullptr;  // _v2
  CUresult (*cuDeviceGetPCIBusId)(char*, int, CUdevice) = nullptr;
  CUresult (*cuDeviceCanAccessPeer)(int*, CUdevice, CUdevice) = nullptr;

  // Contexts (12000).
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice) = nullptr;  // _v2
  CUresult (*cuDevicePrimaryCtxReset)(CUdevice) = nullptr;    // _v2
  CUresult (*cuCtxGetCurrent)(CUcontext*) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned) = nullptr;
  CUresult (*cuMemGetInfo)(std::size_t*, std::size_t*) = nullptr;  // _v2

  // Memory (12000).
  CUresult (*cuMemAlloc)(CUdeviceptr*, std::size_t) = nullptr;  // _v2
  CUresult (*cuMemFree)(CUdeviceptr) = nullptr;                 // _v2
  CUresult (*cuMemHostAlloc)(void**, std::size_t, unsigned) = nullptr;
  CUresult (*cuMemFreeHost)(void*) = nullptr;
  CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr*, void*, unsigned) = nullptr;  // _v2
  CUresult (*cuMemHostRegister)(void*, std::size_t, unsigned) = nullptr;           // _v2
  CUresult (*cuMemHostUnregister)(void*) = nullptr;
  CUresult (*cuMemAllocManaged)(CUdeviceptr*, std::size_t, unsigned) = nullptr;
  CUresult (*cuMemAdvise)(CUdeviceptr, std::size_t, int, CUdevice) = nullptr;  // the 12.0 form
  CUresult (*cuMemGetHandleForAddressRange)(void*, CUdeviceptr, std::size_t, int, unsigned long long) = nullptr;
  CUresult (*cuPointerGetAttribute)(void*, int, CUdeviceptr) = nullptr;

  // Streams, events, memory operations (12000).
  CUresult (*cuStreamCreate)(CUstream*, unsigned) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream) = nullptr;  // _v2
  CUresult (*cuStreamQuery)(CUstream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream) = nullptr;
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned) = nullptr;
  CUresult (*cuStreamWriteValue64)(CUstream, CUdeviceptr, cuuint64_t, unsigned) = nullptr;  // _v2
  CUresult (*cuStreamWaitValue64)(CUstream, CUdeviceptr, cuuint64_t, unsigned) = nullptr;   // _v2
  CUresult (*cuEventCreate)(CUevent*, unsigned) = nullptr;
  CUresult (*cuEventDestroy)(CUevent) = nullptr;  // _v2
  CUresult (*cuEventRecord)(CUevent, CUstream) = nullptr;
  CUresult (*cuEventQuery)(CUevent) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent) = nullptr;
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent) = nullptr;

  // Copies (12000).
  CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream) = nullptr;
  CUresult (*cuMemcpy2DAsync)(const Memcpy2D*, CUstream) = nullptr;  // _v2
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, std::size_t, CUstream) = nullptr;
  CUresult (*cuMemsetD2D8Async)(CUdeviceptr, std::size_t, unsigned char, std::size_t, std::size_t,
                                CUstream) = nullptr;

  // Modules and launches (12000; cuFuncGetParamInfo 12040, optional).
  CUresult (*cuModuleLoadDataEx)(CUmodule*, const void*, unsigned, int*, void**) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuFuncGetAttribute)(int*, int, CUfunction) = nullptr;
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int) = nullptr;
  CUresult (*cuFuncGetParamInfo)(CUfunction, std::size_t, std::size_t*, std::size_t*) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**) = nullptr;

  // Graphs (12000).
  CUresult (*cuGraphCreate)(CUgraph*, unsigned) = nullptr;
  CUresult (*cuGraphAddKernelNode)(CUgraphNode*, CUgraph, const CUgraphNode*, std::size_t,
                                   const KernelNodeParams*) = nullptr;  // _v2
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*cuGraphDestroy)(CUgraph) = nullptr;
  CUresult (*cuGraphExecDestroy)(CUgraphExec) = nullptr;
};

// libcuda, loaded once per path and never unloaded.
struct Library {
  std::string path;
  void* handle = nullptr;
  int version = 0;  // cuDriverGetVersion
  Api api;
  bool stream_memops = false;  // cuStreamWriteValue64 and cuStreamWaitValue64 were found
};

// The library at `path`; when that is empty, at RIG_LIBCUDA, or libcuda.so.1 when that is
// unset. Error, naming the path, when it cannot be loaded, when it has no cuGetProcAddress or
// reports a CUDA version below 12.0 ("too old"), or lacks a function rig needs; a library
// without the 64-bit stream memory operations loads with stream_memops false.
Result<const Library*> load(const std::string& path = "");

// "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", from libcuda's
// own names and strings; "CUresult 12345" for a code it does not name.
std::string describe(const Library& lib, CUresult r);

// The version as "12.4" (from 12040).
std::string version_text(int version);

}  // namespace rig::cuda::api
