// cuda_abi.hpp — what compiled code needs from a CUDA device (spec/Rig_cuda_abi.txt).
//
// Compiled code drives a CUDA device from the host, through the CUDA library the device was
// opened with (libcuda): it runs a kernel with cuLaunchKernel, a copy with cuMemcpyAsync, a
// timestamp with cuLaunchHostFunc, and a graph (kernels recorded once, run by every submit
// of its submission) with cuGraphLaunch. It reaches the device's driver in two ways:
//
// - the Record, which finds the CUDA library's functions (symbol) and makes graphs in the
//   device's context (graph). The driver makes it when it opens the device and declares it
//   in the device's facts under `key`; compiled code finds it with
//   `device.capability(rig::cuda_abi::key)`, which is null for a device that is not CUDA.
//   Neither side links the other: this header is all they share.
// - fills: a Submission::Fill part whose function, int fill(void* queue, void* arg,
//   uint64_t v), the driver's submit calls with
//     queue  the queue's stream (a CUstream), with the device's context current on the
//            calling thread;
//     arg    the argument the work was given;
//     v      the value the work completes on the device's timeline.
//
// A fill must enqueue on `queue` only. It may call cuLaunchKernel, cuMemcpyAsync and
// cuLaunchHostFunc on queue, and cuGraphLaunch on queue of a graph this device's record made,
// after updating its nodes, any number of times. Each call may block until the device's
// earlier work frees room in the stream. A fill must not wait for work (cuStreamSynchronize,
// cuEventSynchronize, cuCtxSynchronize) or change the current context. The driver orders the
// fill's work after earlier work and signals v, so a fill does neither.
//
// A host function that a fill enqueues runs on a thread of the CUDA library. It must call no
// CUDA function, and must take no lock that a fill, or the code that calls the device's
// driver, may hold while a CUDA call blocks.
//
// A fill stops at the first call that fails and returns that call's CUresult, and returns 0
// (CUDA_SUCCESS) once every call has succeeded. A call can fail because of earlier work on
// the device, which CUDA reports at a later call. The driver loses the device on any
// failure, whether the fill returned it or its work failed after the fill returned.
//
// This header declares the few CUDA types it names itself, as the CUDA Driver API documents
// them (no build-time dependency on CUDA). The handle types are the same types as cuda.h's,
// so code that also includes cuda.h passes them without casts.
#pragma once

#include <rig/edge.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

// The opaque handle types of the CUDA Driver API, as cuda.h names them (declaring them again
// is harmless in a translation unit that includes cuda.h).
struct CUctx_st;
struct CUstream_st;
struct CUfunc_st;
struct CUkern_st;
struct CUgraph_st;
struct CUgraphNode_st;
struct CUgraphExec_st;

namespace rig::cuda_abi {

using CUresult = int;  // CUDA_SUCCESS is 0
using CUcontext = ::CUctx_st*;
using CUstream = ::CUstream_st*;
using CUfunction = ::CUfunc_st*;
using CUkernel = ::CUkern_st*;
using CUgraph = ::CUgraph_st*;
using CUgraphNode = ::CUgraphNode_st*;
using CUgraphExec = ::CUgraphExec_st*;
using CUdeviceptr = unsigned long long;

// The markers of the `extra` array of cuLaunchKernel and of a kernel node's parameters
// (CU_LAUNCH_PARAM_END, CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE): the
// pointer-sized values 0, 1 and 2. The buffer's bytes are the kernel's arguments laid out as
// the kernel reads them; the size marker is followed by a pointer to a size_t.
inline void* const kLaunchParamEnd = nullptr;
inline void* const kLaunchParamBufferPointer = reinterpret_cast<void*>(std::uintptr_t(1));
inline void* const kLaunchParamBufferSize = reinterpret_cast<void*>(std::uintptr_t(2));

// A kernel node's parameters as cuGraphExecKernelNodeSetParams_v2 takes them
// (CUDA_KERNEL_NODE_PARAMS_v2 of the CUDA Driver API, field for field). A fill updates a
// graph's node with it before it launches the graph: func must stay the node's function;
// pass the arguments through `extra` (kLaunchParamBufferPointer, …) or `kernelParams`;
// leave kern and ctx null.
struct KernelNodeParams {
  CUfunction func = nullptr;
  unsigned int gridDimX = 1, gridDimY = 1, gridDimZ = 1;
  unsigned int blockDimX = 1, blockDimY = 1, blockDimZ = 1;
  unsigned int sharedMemBytes = 0;
  void** kernelParams = nullptr;
  void** extra = nullptr;
  CUkernel kern = nullptr;
  CUcontext ctx = nullptr;
};
static_assert(sizeof(void*) != 8 || sizeof(KernelNodeParams) == 72,
              "KernelNodeParams must have the layout of CUDA_KERNEL_NODE_PARAMS_v2");

// The signatures of the functions the spec lets a fill call, for casting what
// Record::symbol returns (the exported names are in the comments).
using LaunchKernelFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream, void**, void**);  // cuLaunchKernel
using MemcpyAsyncFn = CUresult (*)(CUdeviceptr, CUdeviceptr, std::size_t, CUstream);  // cuMemcpyAsync
using HostFn = void (*)(void* user);
using LaunchHostFuncFn = CUresult (*)(CUstream, HostFn, void*);  // cuLaunchHostFunc
using GraphLaunchFn = CUresult (*)(CUgraphExec, CUstream);       // cuGraphLaunch
using GraphExecKernelNodeSetParamsFn =
    CUresult (*)(CUgraphExec, CUgraphNode, const KernelNodeParams*);  // cuGraphExecKernelNodeSetParams_v2

// A kernel launch that a graph records.
struct Kernel {
  CUfunction func = nullptr;                // an entry of an image loaded on the device
  std::array<std::uint32_t, 3> grid{1, 1, 1};   // blocks per grid in x, y, z; each at least 1
  std::array<std::uint32_t, 3> block{1, 1, 1};  // threads per block in x, y, z; each at least 1
  std::vector<std::byte> args;              // its arguments as the kernel reads them: the
                                            // buffer cuLaunchKernel takes as
                                            // CU_LAUNCH_PARAM_BUFFER_POINTER
};

// A graph a device's record made: its executable graph (handle) and the CUgraphNode of each
// kernel, in order. A fill may update a node's argument bytes, grid, block and shared memory
// size before it launches handle, with cuGraphExecKernelNodeSetParams_v2; an update reaches
// the launches after it and none enqueued before it, so it waits for nothing. The handle,
// the nodes and the CUDA modules of their kernels live while some Graph value of it exists.
//
// Warning: a submission whose work launches handle must keep the graph
// (Submission::make(…, keep = {graph.keep()})). Otherwise the graph may be destroyed, and its
// modules unloaded, while its work runs: a graph collected between two of the submission's
// submits is destroyed at the next operation the driver names (rig/cuda.hpp), and the
// next submit's fill launches a destroyed graph.
class Graph {
 public:
  Graph() = default;
  // The value of a native graph a driver made. The driver owns handle, nodes and their
  // kernels' modules until this returns; from then on `collect`, which runs once the last
  // Graph value of it is gone, arranges their destruction. collect must keep no reference
  // to the value, must not block and must call no CUDA function. A driver passes each
  // native graph at most once.
  static Graph make(CUgraphExec handle, std::vector<CUgraphNode> nodes, std::function<void()> collect) {
    Graph g;
    g.state_ = std::make_shared<const State>(handle, std::move(nodes), std::move(collect));
    return g;
  }
  CUgraphExec handle() const { return state_ ? state_->handle : nullptr; }
  std::span<const CUgraphNode> nodes() const {
    return state_ ? std::span<const CUgraphNode>(state_->nodes) : std::span<const CUgraphNode>();
  }
  // An owner that keeps the graph alive, for Submission::make's `keep`.
  std::shared_ptr<const void> keep() const { return state_; }
  explicit operator bool() const { return state_ != nullptr; }
  bool operator==(const Graph& o) const { return state_ == o.state_; }

 private:
  struct State {
    State(CUgraphExec h, std::vector<CUgraphNode> n, std::function<void()> c)
        : handle(h), nodes(std::move(n)), collect(std::move(c)) {}
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() {
      if (collect) collect();
    }
    CUgraphExec handle;
    std::vector<CUgraphNode> nodes;
    std::function<void()> collect;
  };
  std::shared_ptr<const State> state_;
};

// What compiled code needs from a CUDA device.
struct Record {
  // The address of the function the CUDA library exports under `name`, or null if it
  // exports none. `name` is the exported name, whose suffix selects a version of the
  // function's interface: "cuStreamWaitValue64_v2" is version 2 of "cuStreamWaitValue64".
  // The address is valid while the device is open. Any thread may call symbol.
  std::function<void*(std::string_view name)> symbol;

  // A graph of the device's context that records one launch per kernel, in order, each run
  // after the one before it has completed; `kernels` may be empty. Any thread may call it at
  // any time; it holds no lock of the device while CUDA instantiates the graph, and the
  // driver's stop waits for a call in flight.
  // Error with CUDA's reason if CUDA cannot make or instantiate the graph (such as for too
  // much shared memory), with the context's error once a fault has failed the context, and
  // once the driver has begun to stop the device.
  // Raises std::invalid_argument, having changed nothing, if a kernel's function belongs to
  // no image loaded on the device, if a size is 0, or if it is called from inside a fill of
  // the device's driver.
  std::function<Result<Graph>(std::span<const Kernel> kernels)> graph;
};

// The key of a CUDA device's record. Compiled code finds the record of a device d with
// d.capability(rig::cuda_abi::key), which is null if d is not a CUDA device.
inline const edge::Key<Record> key{"rig.cuda_abi"};

// The record under `key`, as the facts of a CUDA device carry it (edge::Facts::capability).
inline edge::Capability declare(std::shared_ptr<const Record> record) {
  return edge::declare(key, std::move(record));
}

}  // namespace rig::cuda_abi
