// workers.hpp — the helper threads that share a launch's groups with the host queue's
// dispatcher.
//
// A launch of one group runs inline on the calling thread. A launch of more groups is
// published to the helpers (one per core but the caller's), and the caller and the helpers
// take groups from one atomic counter until none is left. Helpers that have nothing to do
// spin briefly, then park on a futex: an idle pool uses no CPU.
//
// A launch may be counted: each thread that runs some of its groups reads its own perf
// counters (perf_event_open(2), user space only) before and after, and adds the difference
// to the launch's sums. A thread opens its counters at its first counted launch; a launch
// that is not counted costs one test of a null pointer.
#pragma once

#include <rig/host_kernel.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace rig::host {

// The most group-shared bytes a launch may ask for: each worker keeps one scratch of this
// size, aligned to 64.
inline constexpr std::uint32_t kSharedBytesMax = 64 * 1024;

// The most counters a launch is counted with.
inline constexpr std::size_t kCountersMax = 4;

// A counter the workers can count around launches: a perf event (perf_event_open(2)'s
// type and config) under the name a device's `counters` fact gives it.
struct CounterEvent {
  const char* name;
  std::uint32_t type;
  std::uint64_t config;
};

// The host device's counters: instructions and cycles retired in user space
// (PERF_COUNT_HW_INSTRUCTIONS, PERF_COUNT_HW_CPU_CYCLES), in this order.
std::span<const CounterEvent> hardware_counters();

// Whether this thread may count `events` (at most kCountersMax) as one group in user
// space: opens them and closes them again. nullopt if it may, otherwise why not, such as
// "perf_event_open: EACCES (Permission denied)" where perf_event_paranoid forbids it, or
// ENOENT/EOPNOTSUPP on a machine (a VM) without the hardware counters.
std::optional<std::string> probe_counters(std::span<const CounterEvent> events);

// A thread's own counters: the events, opened as one group counting the calling thread in
// user space. Not thread-safe: the thread that opened it reads it.
class ThreadCounters {
 public:
  // One reading: each counter's value, and the group's time enabled and time running (the
  // kernel multiplexes a group it cannot keep on the PMU).
  struct Reading {
    std::uint64_t enabled = 0, running = 0;
    std::uint64_t values[kCountersMax] = {};
  };

  ThreadCounters() = default;
  ThreadCounters(const ThreadCounters&) = delete;
  ThreadCounters& operator=(const ThreadCounters&) = delete;
  ~ThreadCounters();

  // Opens the events for the calling thread, once: later calls answer as the first did.
  // False if the kernel refused them, with the reason in *why when given.
  bool open(std::span<const CounterEvent> events, std::string* why = nullptr);
  // Reads the group; false if it is not open or the read failed.
  bool read(Reading& out) const;
  // Closes the group, so that the next open opens it again (for another thread).
  void close();

 private:
  int fds_[kCountersMax] = {-1, -1, -1, -1};
  std::size_t count_ = 0;
  bool tried_ = false, ok_ = false;
};

// What a counted launch sums over the threads that ran its groups: each counter's events,
// scaled by time enabled / time running where the kernel multiplexed the group. The
// launch is unmeasured if one of those threads could not count.
struct LaunchCounts {
  std::atomic<std::uint64_t> values[kCountersMax] = {};
  std::atomic<bool> unmeasured{false};
};

// A launch as the workers run it: the kernel, its grid, and its parameters (which live
// until run returns).
struct GroupLaunch {
  rig_host_kernel* kernel = nullptr;
  const void* params = nullptr;
  std::uint32_t groups[3] = {1, 1, 1};
  std::uint32_t threads[3] = {1, 1, 1};
  std::uint32_t shared = 0;  // at most kSharedBytesMax
  std::uint64_t value = 0;   // the timeline value the launch completes
  LaunchCounts* counts = nullptr;  // where its counters are summed; null: not counted
};

class Workers {
 public:
  // Starts `helpers` helper threads (0: every launch runs on the caller alone), which count
  // launches with `counters` (at most kCountersMax; none: launches are never counted).
  explicit Workers(unsigned helpers, std::span<const CounterEvent> counters = {});
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  ~Workers();  // stops and joins the helpers

  // Calls launch.kernel once for every group of the grid and returns once all calls have
  // returned; the calling thread takes part. With launch.counts, every thread that ran
  // groups has added its counts there when it returns. Returns false if stop came first,
  // in which case some groups may not have run. Called by one thread at a time (the
  // dispatcher).
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
  // take_groups, counted into `counts` with this thread's `mine` where counts is not null.
  void take_counted(std::byte* scratch, ThreadCounters& mine, LaunchCounts* counts);

  std::vector<std::thread> threads_;
  // Every worker's scratch, made before the threads start (so a thread that starts late
  // allocates nothing while work runs): the caller's first, then one per helper.
  std::vector<ScratchPtr> scratch_;

  // The events counted launches count, and the caller's own counters (opened on the thread
  // that runs a counted launch, and again if another thread does).
  CounterEvent events_[kCountersMax] = {};
  std::size_t event_count_ = 0;
  ThreadCounters caller_counters_;
  std::thread::id caller_counting_;

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
