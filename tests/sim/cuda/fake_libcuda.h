/* fake_libcuda.h — the test's controls of the fake libcuda (libcuda-fake.so).
 *
 * The fake exports the part of the CUDA Driver API that rig's CUDA driver calls, with
 * cuGetProcAddress, implemented on host threads:
 *
 * - GPUs: FAKECUDA_DEVICES of them (default 2), compute capability 9.0, each with a primary
 *   context. Contexts are current per thread; a call that needs one and finds none returns
 *   CUDA_ERROR_INVALID_CONTEXT, and a stream call whose stream belongs to another context
 *   than the current one returns CUDA_ERROR_INVALID_CONTEXT too (stricter than CUDA, so that
 *   tests see that rig makes its context current, also for fills).
 * - Memory is host memory: a device address is a host address. cuMemcpy*, cuMemset* and the
 *   stream memory operations check that every byte lies in memory CUDA knows (allocations,
 *   pinned or registered host memory) and return CUDA_ERROR_INVALID_VALUE otherwise; a copy
 *   that reaches another GPU's memory needs peer access.
 * - Streams run their work in order on a thread each, asynchronously; events complete when
 *   their stream reaches them and carry the host time then (cuEventElapsedTime).
 * - Modules are real PTX text, or fatbins as nvcc writes them (their newest PTX entry for
 *   compute_90 or older is loaded; zstd-compressed entries are decompressed). Their kernels
 *   run on the PTX interpreter (tests/sim/ptx) on the stream's thread, reaching only memory
 *   CUDA knows and the module's own variables: a kernel touching any other address, or a
 *   misaligned one, fails the context with CUDA_ERROR_ILLEGAL_ADDRESS; a trap or any other
 *   fault with CUDA_ERROR_LAUNCH_FAILED (the interpreter's reason goes to stderr). PTX the
 *   interpreter refuses is CUDA_ERROR_INVALID_PTX with its reason in the JIT's error log; a
 *   cubin, or a fatbin without PTX, is CUDA_ERROR_NO_BINARY_FOR_GPU (the fake runs no SASS).
 *   cuFuncGetAttribute and cuFuncGetParamInfo answer from the PTX, and a fatbin's sm_90
 *   cubin gives its kernels' launch bounds (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK).
 * - A failed context returns its error from every call on it until cuDevicePrimaryCtxReset,
 *   which destroys everything the context held.
 * - cuMemGetHandleForAddressRange gives dma-buf descriptors of whole pages of cuMemAlloc
 *   memory (and of cuMemHostAlloc memory where "host_dma_buf" is set), refusing any other
 *   range with CUDA_ERROR_INVALID_VALUE.
 * - Graphs of kernel nodes: made, instantiated, updated (cuGraphExecKernelNodeSetParams_v2)
 *   and launched; a launch runs the nodes in order with their parameters as of the launch.
 *
 * Environment: FAKECUDA_DEVICES=n (GPUs), FAKECUDA_VERSION=12080 (cuDriverGetVersion),
 * FAKECUDA_FAIL=function:nth:result (as fakecuda_fail, failing one call).
 */
#ifndef FAKE_LIBCUDA_H
#define FAKE_LIBCUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* From the nth call on (1-based, counted from now), `times` calls of the exported function
 * `function` (its base name, such as "cuMemAlloc") return `result` and do nothing else.
 * nth = 0 cancels. */
void fakecuda_fail(const char *function, unsigned long long nth, int result, unsigned long long times);

/* Fails the primary context of GPU `ordinal` now with `result`, as an asynchronous fault. */
void fakecuda_fault(int ordinal, int result);

/* Sets a knob: "version" (cuDriverGetVersion), "memops" (0: GPUs report no 64-bit stream
 * memory operations), "memops_functions" (0: cuGetProcAddress finds no
 * cuStreamWriteValue64/cuStreamWaitValue64), "param_info" (0: no cuFuncGetParamInfo),
 * "host_visible" (CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST), "peer"
 * (cuDeviceCanAccessPeer), "register" (0: cuMemHostRegister is not supported), "dma_buf"
 * (0: no dma-bufs of cuMemAlloc memory, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED 0),
 * "host_dma_buf" (1: dma-bufs of cuMemHostAlloc memory too; 0 by default). Unknown knobs
 * abort. */
void fakecuda_set(const char *knob, long long value);

/* Counts: "graphs", "graph_execs", "modules", "streams", "events", "allocations",
 * "registrations" (live now); "resets", "launches" (kernels run), "graph_launches",
 * "peer_enables", "dmabufs" (cuMemGetHandleForAddressRange's) (so far); "calls:NAME"
 * (calls of an exported function). Unknown names
 * abort. */
long long fakecuda_count(const char *what);

#ifdef __cplusplus
}
#endif

#endif /* FAKE_LIBCUDA_H */
