// workers.hpp — the helper threads that share a launch's groups with the host queue's
// dispatcher.
//
// A launch of one group runs inline on the calling thread. A launch of more groups is
// published to the helpers (one per core but the caller's), and the caller and the helpers
// take groups from one atomic counter until none is left. Helpers that have nothing to do
// spin briefly, then park on a futex: an idle pool uses no CPU.
#pragma once

#include <rig/host_kernel.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

namespace rig::host {

// The most group-shared bytes a launch may ask for: each worker keeps one scratch of this
// size, aligned to 64.
inline constexpr std::uint32_t kSharedBytesMax = 64 * 1024;

// A launch as the workers run it: the kernel, its grid, and its parameters (which live
// until run returns).
struct GroupLaunch {
  rig_host_kernel* kernel = nullptr;
  const void* params = nullptr;
  std::uint32_t groups[3] = {1, 1, 1};
  std::uint32_t threads[3] = {1, 1, 1};
  std::uint32_t shared = 0;  // at most kSharedBytesMax
  std::uint64_t value = 0;   // the timeline value the launch completes
};

class Workers {
 public:
  // Starts `helpers` helper threads (0: every launch runs on the caller alone).
  explicit Workers(unsigned helpers);
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  ~Workers();  // stops and joins the helpers

  // Calls launch.kernel once for every group of the grid and returns once all calls have
  // returned; the calling thread takes part. Returns false if stop came first, in which
  // case some groups may not have run. Called by one thread at a time (the dispatcher).
  bool run(const GroupLaunch& launch);

  // Makes helpers stop taking groups and exit, and run return false. Joins the helpers.
  // Called from the thread that owns the pool, once the caller of run is done or
  // interrupted.
  void stop();

  // Signals stop without joining: run returns false at its next group. Any thread.
  void interrupt();

  unsigned helpers() const { return unsigned(threads_.size()); }

 private:
  // A worker's 64-byte-aligned group-shared scratch.
  struct Scratch {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  using ScratchPtr = std::unique_ptr<std::byte[], Scratch>;
  static ScratchPtr make_scratch();

  void helper_main(std::byte* scratch);
  // Takes groups of the current launch until none is left (or stop), running each with
  // `scratch` as its shared memory.
  void take_groups(std::byte* scratch);

  std::vector<std::thread> threads_;
  // Every worker's scratch, made before the threads start (so a thread that starts late
  // allocates nothing while work runs): the caller's first, then one per helper.
  std::vector<ScratchPtr> scratch_;

  // The launch helpers may join, published through state_.
  GroupLaunch current_;
  std::uint64_t total_ = 0;  // groups in the current launch
  std::uint64_t chunk_ = 1;  // groups taken at a time

  // (epoch << 1) | open: the futex word helpers spin and park on. run opens a launch with
  // a new epoch and closes it once no group is left; a helper joins an open epoch once.
  alignas(64) std::atomic<std::uint32_t> state_{0};
  // The next group index of the current launch.
  alignas(64) std::atomic<std::uint64_t> next_group_{0};
  // Helpers inside the current launch: run waits for 0 before the launch ends.
  alignas(64) std::atomic<std::uint32_t> active_{0};
  // Helpers parked on state_: run wakes them only when there are some.
  alignas(64) std::atomic<std::uint32_t> parked_{0};
  std::atomic<bool> stopping_{false};
};

}  // namespace rig::host
