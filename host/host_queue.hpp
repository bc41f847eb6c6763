// host_queue.hpp — the host device's queue engine: a ring of jobs run in order by a
// dispatcher thread, which shares launches' groups with helper threads.
//
// submit copies each part, its launch parameters and copy boxes included, into a reusable
// ring slot (after warm-up it allocates nothing) and rings the dispatcher. The dispatcher
// takes jobs in value order, waits for each job's foreign waits by polling the producers'
// words, runs the job's parts one after the other (so every `after` holds), then stores
// the job's value into the timeline word with release order and wakes the threads that
// sleep on it. Every wait spins first (tens of µs) and then parks on a futex.
//
// A queue made with counters measures the launches of each value submit times (it is given
// a pair of times): the dispatcher stamps each launch's start and end on the host clock and
// the workers count its events, into rows that submit set aside for the value and
// measures hands to rig. An untimed value costs the dispatcher one test per launch.
#pragma once

#include "futex.hpp"
#include "host_driver.hpp"
#include "workers.hpp"

#include <rig/edge.hpp>
#include <rig/host_kernel.h>
#include <rig/rig_edge.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace rig::host {

// A kernel of a loaded image, as the queue's submit reads it through rig_launch.launch
// (Entry::launch): the function, and the most threads per group it accepts if it states
// it (RIG_HOST_THREADS).
struct HostKernel {
  rig_host_kernel* fn = nullptr;
  std::optional<std::uint64_t> threads;
};

class HostQueue {
 public:
  // Jobs (values) the ring holds: room answers RIG_LATER when this many are not done.
  static constexpr std::uint32_t kSlots = 256;

  // A queue that shows progress in `word`, calls fills with `fill_context` as their queue
  // context, and runs launches with `helpers` helper threads beside its dispatcher. With
  // `counters` (at most kCountersMax, which the caller has probed), it measures the
  // launches of timed values: a row of 3 + counters.size() words each (measures).
  // With `idle`, the dispatcher calls it while it waits for values (cpu::DispatcherIdle).
  HostQueue(volatile std::uint64_t* word, void* fill_context, unsigned helpers,
            std::span<const CounterEvent> counters = {}, cpu::DispatcherIdle idle = {});
  HostQueue(const HostQueue&) = delete;
  HostQueue& operator=(const HostQueue&) = delete;
  ~HostQueue();  // stops if stop was not called

  // rig_driver::room for queue 0 of a device whose queue runs Launch, Fill and Copy:
  // RIG_NEVER for a part of kind 0 or Words, of another queue, or a launch with an empty
  // grid or group, more than 2^63 groups, more threads than its kernel states, more
  // shared bytes than kSharedBytesMax or more than RIG_PARAMS_MAX parameter bytes;
  // RIG_LATER when the ring is full; RIG_FITS otherwise (also once the queue failed or
  // stopped: submit then says why). A RIG_NEVER writes its reason into why (RIG_WHY bytes).
  int room(const rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) const noexcept;

  // rig_driver::submit: places the job of value v in the ring and returns RIG_COMMITTED
  // (the dispatcher runs it once its waits hold and the values before it are done).
  // RIG_FAILED, with *failure set, once a fill failed, after stop, or if it finds no room.
  int submit(const rig_part* parts, std::uint32_t count, const rig_wait* waits,
             std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times,
             const char** failure) noexcept;

  // rig_driver::commit: every submitted value is committed, so RIG_OK, or RIG_FAILED with
  // the reason once the queue failed or stopped.
  int commit(std::uint64_t v, const char** failure) noexcept;

  // rig_driver::measures, for a queue made with counters. Given `out`, once the word shows
  // v, writes one row per launch of v in the order of its parts: 1, the launch's start and
  // end on the host clock, then each counter's count summed over the threads that ran its
  // groups; it writes nothing for a launch it did not measure (a thread could not count,
  // or the kernel never scheduled the counters), for a value the word does not show yet,
  // or for one submit did not time. Given null, frees v's rows, at once if the word shows
  // v and otherwise once it does. Always RIG_OK: the host's counters cannot fail the device.
  int measures(std::uint64_t v, std::uint64_t* out, const char** failure) noexcept;

  // The words of a launch's row: 3 + the number of counters; 3 for a queue without.
  std::size_t row_words() const noexcept { return 3 + counter_count_; }

  // Blocks until the word shows v, `most` has passed, or the queue stops; may return
  // early. Throws edge::Fault with the failure's message once a fill failed.
  void sleep(std::uint64_t v, std::chrono::nanoseconds most);

  // The value the word shows.
  std::uint64_t word() const noexcept;

  // Ends the dispatcher and helpers and joins them. Jobs not yet done are dropped: their
  // values are never stored. A launch already running finishes its current groups. Later
  // submits and commits fail with "stopped: why". Called from the dispatcher's idle hook,
  // it joins the helpers only: the dispatcher ends once the hook returns, and is joined by
  // the destructor.
  void stop(std::string_view why);

 private:
  // One part as the dispatcher runs it, in 48 bytes: what it needs of rig_part's work,
  // its pointers moved into the slot's own storage.
  struct Step {
    std::uint32_t kind = 0;
    std::uint32_t shared = 0;  // Launch: group-shared bytes
    union {
      struct {
        rig_host_kernel* kernel;
        const void* params;
        std::uint32_t groups[3];
        std::uint32_t threads[3];
      } launch;
      struct {
        int (*fn)(void* queue, void* arg, std::uint64_t v);
        void* arg;
      } fill;
      struct {
        std::byte* dst;  // the ends' first bytes
        const std::byte* src;
        const rig_box* boxes;
        std::uint32_t count;
        std::int32_t fill;
      } copy;
    };
  };
  // A slot's heap storage for jobs too big for its inline bytes, aligned to 64; kept when
  // the slot is reused, so it grows at most a few times.
  struct Spill {
    struct Free {
      void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t(64)); }
    };
    std::unique_ptr<std::byte[], Free> data;
    std::size_t capacity = 0;
    std::byte* reserve(std::size_t n);
  };
  // Bytes of a slot's inline storage: a job of one launch with up to ~130 parameter bytes,
  // or a few parts, fits, and lies with the slot's header in two or three cache lines.
  static constexpr std::size_t kInlineBytes = 192;
  // One job: a value's waits and parts. The producer fills a free slot, the dispatcher
  // reads it once head_ passes it and frees it by raising tail_. Steps, then waits, then
  // the bytes the steps point to (launch parameters, copy boxes) lie in the inline storage
  // when they fit, in the spill otherwise.
  struct alignas(64) Slot {
    std::uint64_t value = 0;
    std::uint64_t* times = nullptr;
    std::uint64_t* rows = nullptr;  // a measured value's launch rows (row_words() each)
    const Step* steps = nullptr;
    const rig_wait* waits = nullptr;
    std::uint32_t step_count = 0;
    std::uint32_t wait_count = 0;
    alignas(16) std::byte inline_bytes[kInlineBytes];
    Spill spill;
  };

  // Copies the parts and waits into `slot`. Returns a failure message, or null.
  const char* fill_slot(Slot& slot, const rig_part* parts, std::uint32_t count,
                        const rig_wait* waits, std::uint32_t wait_count);

  void dispatch();                                   // the dispatcher thread
  bool await_job(std::uint32_t next);                // false once stopping
  bool await_waits(const Slot& slot);                // false once stopping
  // Runs a step; a launch with a row is measured into it. False on failure or stop.
  bool run_step(const Step& step, std::uint64_t v, std::uint64_t* row);
  // Sets aside rows for value v's `launches` launches (submit's side); null if there is no
  // memory for them, which leaves v unmeasured.
  std::uint64_t* keep_rows(std::uint64_t v, std::uint32_t launches) noexcept;
  // Frees the rows of values measures let go before the word showed them, once it does.
  void sweep_rows() noexcept;
  void fail(int code, std::uint64_t v);              // records a fill's failure

  volatile std::uint64_t* word_;
  void* fill_context_;
  std::size_t counter_count_ = 0;
  std::unique_ptr<Slot[]> slots_;
  Workers workers_;
  std::thread dispatcher_;
  cpu::DispatcherIdle idle_;

  // Ring positions (uint32 counters that wrap; slot = position % kSlots). head_ is
  // written by the producer (submit), tail_ by the dispatcher, each on its own line.
  alignas(64) std::atomic<std::uint32_t> head_{0};
  mutable std::uint32_t tail_seen_ = 0;  // the producer's last look at tail_
  alignas(64) std::atomic<std::uint32_t> tail_{0};
  // The dispatcher's futex: submit bumps it only when the dispatcher is parked; stop
  // bumps it to wake a dispatcher parked or backing off on a foreign wait.
  alignas(64) std::atomic<std::uint32_t> doorbell_{0};
  std::atomic<bool> dispatcher_parked_{false};
  // Threads in sleep(), woken when the dispatcher raises the word.
  WordSleepers sleepers_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  bool stopped_ = false;        // stop() ran (its caller's state)
  char failure_[160] = {};      // written by the dispatcher before failed_
  char stop_reason_[256] = {};  // written by stop() before stopping_

  // The rows of timed values, by value, that measures has not freed; rows let go before
  // the word showed their value (the dispatcher may still write them); spare row storage
  // for later values. Only the C functions (submit, measures) touch them, one at a time;
  // the dispatcher writes the rows through Slot::rows.
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> kept_rows_;
  std::vector<std::uint64_t> doomed_rows_;
  std::vector<std::vector<std::uint64_t>> spare_rows_;
};

}  // namespace rig::host
