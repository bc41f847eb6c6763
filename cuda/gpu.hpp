// gpu.hpp — what rig keeps of one GPU for the life of the process, across the devices that
// open it: its primary context, the modules still in use, and the graphs queued for
// destruction (spec/Rig_cuda_abi.txt, "Graphs"). Also the process's host registrations:
// rig's timeline words and host memory borrowed by map_host. Internal to the CUDA driver.
#pragma once

#include "cuda_api.hpp"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace rig::cuda {

// Makes a context current on the calling thread for the guard's life, then restores the
// context that was current before (nothing to do when it already was).
class Current {
 public:
  Current(const api::Api& a, api::CUcontext c) : a_(a) {
    if (a.cuCtxGetCurrent(&previous_) != api::CUDA_SUCCESS) previous_ = nullptr;
    if (previous_ != c) swapped_ = a.cuCtxSetCurrent(c) == api::CUDA_SUCCESS;
  }
  ~Current() {
    if (swapped_) a_.cuCtxSetCurrent(previous_);
  }
  Current(const Current&) = delete;
  Current& operator=(const Current&) = delete;

 private:
  const api::Api& a_;
  api::CUcontext previous_ = nullptr;
  bool swapped_ = false;
};

// A collected graph waiting for destruction, with the modules it kept loaded.
struct DoomedGraph {
  api::CUgraphExec exec = nullptr;
  api::CUgraph graph = nullptr;
  std::vector<api::CUmodule> modules;
  std::uint64_t generation = 0;
};

class Gpu {
 public:
  // The GPU at `ordinal` of `lib`, made (and its primary context retained) on first use.
  // Error with CUDA's reason if the GPU or its context cannot be had.
  static Result<std::shared_ptr<Gpu>> get(const api::Library& lib, int ordinal);

  const api::Library& lib;
  const int ordinal;
  const api::CUdevice device;
  const std::string name;  // cuDeviceGetName

  // The primary context and its generation, which a reset raises: objects of an earlier
  // generation died with the reset and are never destroyed again.
  api::CUcontext context() const;
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  // A device saw a CUDA error: the next open checks the context (recover).
  void suspect() { suspect_.store(true); }
  // At an open: if an earlier device saw an error and the context reports one, resets the
  // primary context (its allocations, modules and graphs go) and raises the generation.
  // Error if the context cannot be reset.
  Result<void> recover();

  // Module references: the image and each graph that runs one of its kernels. The module
  // unloads when the last goes (in its generation).
  void retain(api::CUmodule m);
  void release(api::CUmodule m, std::uint64_t generation);

  // Queues a collected graph; never blocks on CUDA and calls no CUDA function.
  void collect(DoomedGraph g);
  // Destroys the queued graphs, then releases their modules. Returns at once if another
  // thread is doing it; destroys nothing in a child of fork.
  void drain();

  // The device address of rig_words in this GPU's context, registering them with CUDA (once
  // per process, and again after the context that registered them was reset). Error if CUDA
  // refuses.
  Result<api::CUdeviceptr> words();

  Gpu(const api::Library& lib, int ordinal, api::CUdevice device, std::string name, api::CUcontext ctx);

 private:
  mutable std::mutex mutex_;  // the context, the module references
  api::CUcontext context_;
  std::atomic<std::uint64_t> generation_{1};
  std::atomic<bool> suspect_{false};
  std::map<api::CUmodule, int> modules_;
  std::mutex queue_mutex_;
  std::vector<DoomedGraph> queue_;
  std::mutex drain_mutex_;
  const pid_t pid_;
};

// The process's registrations of host memory borrowed by map_host, shared by every CUDA
// device of a library: one CUDA registration per range, released with its last borrow.
struct HostBorrow {
  std::uintptr_t host = 0;
  api::CUdeviceptr address = 0;  // in the borrowing GPU's context
  bool registered = false;       // counted in the registry (false: someone else registered it)
  // The registration it counted: the GPU whose context made it, and that context's generation.
  const Gpu* owner = nullptr;
  std::uint64_t generation = 0;
};
// Borrows [host, host + bytes) for `gpu`: the borrow, or nullopt with `no_room` set when CUDA
// is out of memory, or nullopt when CUDA refuses the range.
std::optional<HostBorrow> borrow_host(Gpu& gpu, std::uintptr_t host, std::size_t bytes, bool& no_room);
// Returns a borrow that borrow_host counted. Nothing happens when a reset of its owner's
// context took that registration away meanwhile: a later registration of the same range,
// counted for others, is not theirs to release.
void return_host(const api::Library& lib, const HostBorrow& borrow);

// The device address of a timeline word outside rig_words (8 bytes of host memory the
// opener's caller gave make, spec/Rig_edge.txt "Opener"): that of the memory CUDA maps it in,
// where it lies in such memory already; otherwise the whole page that holds it is borrowed
// (borrow_host) and `borrowed` is that borrow, which the device returns (return_host) once
// nothing of it writes the word. Error with CUDA's reason when CUDA maps neither.
Result<api::CUdeviceptr> caller_word(Gpu& gpu, const volatile std::uint64_t* word, std::optional<HostBorrow>& borrowed);

}  // namespace rig::cuda
