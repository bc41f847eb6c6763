// cuda.hpp — CUDA GPUs as rig devices, through libcuda loaded at run time.
//
// The library is the path an opener is given, else RIG_LIBCUDA when that is set (a path),
// and libcuda.so.1 otherwise. rig has no build-time dependency on CUDA: it asks libcuda for
// each function it calls with cuGetProcAddress, at the CUDA 12.0 interface (cuda_api.hpp).
//
// One device per GPU, named "CUDA:<ordinal>", on the GPU's primary context, which rig
// retains for the life of the process.
//
// Facts:
//   arch            "sm_<major><minor>" from the compute capability ("sm_90")
//   budget          the GPU's free memory when the device opens (cuMemGetInfo)
//   queues          0 "COMPUTE:0" {Fill, Launch} and 1 "COPY:0" {Copy, Fill}: two CUDA
//                   streams (non-blocking); copy_engine 1
//   completion      Store: the stream that runs a value's last part writes the value into
//                   the word with cuStreamWriteValue64
//   waits           {stores, hosts}: a queue waits for another device's value with
//                   cuStreamWaitValue64 on its word in rig_words, which rig registers with
//                   libcuda (cuMemHostRegister, once per process); a word outside rig_words
//                   is waited for on the host, inside submit
//   may_block       true: CUDA calls may block on back-pressure of the streams
//   hang_ms         none: the NVIDIA driver bounds hangs
//   maps_host       whether the GPU supports cuMemHostRegister
//   host_addresses  false; alignment 256; cache_bytes its L2; no counters
//   capability      the Rig_cuda_abi record (rig/cuda_abi.hpp)
//   word            the word make was given; bus the PCI address ("0000:03:00.0"). A word
//                   outside rig_words (8 bytes of host memory of a caller that calls make
//                   itself, such as an agent of remote devices) is written where CUDA maps
//                   it: memory CUDA maps already as it is, otherwise through a registration
//                   of the page that holds it (cuMemHostRegister, shared as map_host's are),
//                   held until the handle goes; make gives an Error naming the word when CUDA
//                   refuses that page
//
// The C functions: room answers RIG_FITS for parts it runs and RIG_NEVER for Words, a kind a
// queue does not run, or a launch whose grid, block, threads or dynamic shared memory is
// empty or exceeds the GPU's or the function's limits, with a reason that names the part,
// the limit, the value and the limit's value; it never answers LATER or GROW (the
// streams hold any amount of work). submit orders the value after the previous one (the
// streams it uses wait for the stream that completed it, with events), after the waits, and
// each part after the parts of the other queue it names in `after`; calls each fill with its
// stream and the context current; launches with cuLaunchKernel (the parameters as
// CU_LAUNCH_PARAM_BUFFER_POINTER); copies with cuMemcpyAsync / cuMemcpy2DAsync and fills
// memory with cuMemsetD8Async / cuMemsetD2D8Async; then writes the word. CUDA runs what is
// enqueued, so submit always returns RIG_COMMITTED: the commit bound k is 1, and commit is a
// no-op. A CUDA call that fails, or a fill that returns non-zero, fails the submit with
// CUDA's error name and string ("the fill of value 12 returned CUDA_ERROR_INVALID_VALUE:
// invalid argument"), which loses the device. No heap allocation per submit once warm.
//
// Profiles: a timed value records two timing events around its work; settle converts them to
// the host clock against an anchor: an event recorded on an idle stream of its own and polled
// until it completes, whose host time is the middle of that interval (the narrowest of up to
// five tries; re-anchored each second while timing). The times are as exact as that
// correlation: within half the interval, typically a few microseconds. A value's start is
// never put before the end of the value settled before it.
//
// Faults: sleep polls the streams (cuStreamQuery); an error there, such as a fault of the
// context, throws edge::Fault with CUDA's name and string ("CUDA_ERROR_ILLEGAL_ADDRESS: an
// illegal memory access was encountered"), and rig loses the device with it. The next open
// of that GPU resets its primary context (cuDevicePrimaryCtxReset) if the context failed.
//
// Memory: Device (cuMemAlloc: address, no host address), Pinned (cuMemHostAlloc, portable
// and mapped: address and host address), Mapped (managed memory that prefers the GPU, only on
// GPUs whose memory the host reads directly, CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_
// FROM_HOST; elsewhere alloc answers nullopt, no window, and rig falls back to Pinned). alloc
// answers nullopt when CUDA reports CUDA_ERROR_OUT_OF_MEMORY; another error is a Fault. map_host
// registers host memory with cuMemHostRegister (portable, mapped; one registration per range,
// shared by every CUDA device, released with the last region over it): NoRoom when CUDA is out
// of memory, Never when CUDA refuses the range. map_peer maps another CUDA GPU's memory where
// cuDeviceCanAccessPeer allows it, enabling peer access once; host memory CUDA mapped is
// reachable as it is; Never otherwise. A region's handle is its CUdeviceptr.
//
// Images: a cubin, a fatbin or PTX text, loaded with cuModuleLoadDataEx; Error with CUDA's
// error and the JIT's error log when CUDA rejects it. An entry's code is its CUfunction; its
// params from cuFuncGetParamInfo (CUDA 12.4 and later; unknown before), its threads from
// CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK; its dynamic shared memory is raised to the GPU's
// opt-in limit. Absent when the module has no such function. prepare does nothing.
//
// Graphs (Rig_cuda_abi): a collected graph is queued on its GPU; the next open, image load,
// image unload or graph construction on that GPU destroys the queued graphs (cuGraphExecDestroy,
// cuGraphDestroy), then unloads the modules only they kept, even after the device stopped or
// its context failed. A cleanup running on another thread is left to it; a child of fork
// destroys nothing its parent queued.
//
// stop: waits for record.graph calls in flight, then for the streams to finish (at most 2 s;
// at once if the context failed), then raises the word to the last submitted value so that
// rig frees the device's memory. Streams that are still busy after 2 s (such as a wait for a
// lost device's value that never comes) keep the word, and with it the device's memory, where
// they are. make opens a new handle while an earlier one of the same GPU is not stopped; when
// that earlier one's context failed, the new open resets it, and the earlier handle's stop then
// touches none of its streams, events or host registrations (they went with the reset, and
// their names may be the new handle's now).
#pragma once

#include <rig/cuda_abi.hpp>
#include <rig/edge.hpp>

namespace rig::cuda {

// An opener of "CUDA:<ordinal>", through the libcuda at `library` (a path) or, when that is
// empty, the one named above. Its make returns Error, saying which, when libcuda is absent,
// too old (no cuGetProcAddress, or a CUDA version below 12.0), when the GPU lacks 64-bit
// stream memory operations, when libcuda finds no GPU or fewer than ordinal + 1, or when CUDA
// cannot set the GPU up (its context, streams or events). Making the opener loads nothing;
// invalid_argument if ordinal is negative.
edge::Opener<> opener(int ordinal, std::string library = "");

// The number of GPUs the libcuda at `library` (empty: the one named above) reports
// (cuDeviceGetCount); Error when libcuda is absent, too old, or cuInit fails
// (CUDA_ERROR_NO_DEVICE gives 0, not an Error).
Result<int> device_count(const std::string& library = "");

}  // namespace rig::cuda
