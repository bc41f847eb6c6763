// host_queue.cpp — the host device's queue engine (see host_queue.hpp).
#include "host_queue.hpp"

#include "futex.hpp"
#include "host_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

namespace rig::host {

namespace {

// Spin budgets of the dispatcher: waiting for a job, or for a foreign word.
constexpr std::uint64_t kEagerSpinNs = 20'000;
constexpr std::uint64_t kSpinNs = 60'000;
// Back-off sleeps on a foreign word once the spin is spent: from 20 µs up to 1 ms.
constexpr std::chrono::nanoseconds kFirstBackoff{20'000};
constexpr std::chrono::nanoseconds kLastBackoff{1'000'000};

constexpr std::size_t round16(std::size_t n) { return (n + 15) & ~std::size_t(15); }

// The function a launch calls: its kernel record's, or its code value when it has none.
rig_host_kernel* kernel_of(const rig_launch& l) {
  if (l.launch != nullptr) return static_cast<const HostKernel*>(l.launch)->fn;
  return reinterpret_cast<rig_host_kernel*>(l.code);
}

// Whether a launch can ever run here: RIG_FITS, or RIG_NEVER with the reason in why. It
// runs with a function, a grid and a group with no empty dimension, at most 2^63 groups
// (the workers count them in 64 bits), threads within its kernel's limit, shared memory
// within the workers' scratch, and parameters within the contract's limit.
int launch_room(const rig_launch& l, std::uint32_t part, char* why) {
  if (l.launch == nullptr && l.code == 0) return rig_never(why, "part %u: a launch of no function", part);
  for (int d = 0; d < 3; ++d) {
    if (l.groups[d] == 0 || l.threads[d] == 0)
      return rig_never(why, "part %u: a launch of %ux%ux%u groups of %ux%ux%u threads has an empty dimension", part,
                       l.groups[0], l.groups[1], l.groups[2], l.threads[0], l.threads[1], l.threads[2]);
  }
  const unsigned __int128 groups = (unsigned __int128)l.groups[0] * l.groups[1] * l.groups[2];
  if (groups > (unsigned __int128)1 << 63)
    return rig_never(why, "part %u: %ux%ux%u groups, over the limit of 2^63 groups in all", part, l.groups[0],
                     l.groups[1], l.groups[2]);
  if (l.shared > kSharedBytesMax)
    return rig_never(why, "part %u: %s of shared memory, over the limit of %s", part,
                     edge::bytes_figure(l.shared).text, edge::bytes_figure(kSharedBytesMax).text);
  if (l.param_bytes > RIG_PARAMS_MAX)
    return rig_never(why, "part %u: %u parameter bytes, over the limit of %u", part, l.param_bytes,
                     unsigned(RIG_PARAMS_MAX));
  if (l.param_bytes != 0 && l.params == nullptr)
    return rig_never(why, "part %u: %u parameter bytes at no address", part, l.param_bytes);
  if (l.launch != nullptr) {
    const auto* k = static_cast<const HostKernel*>(l.launch);
    if (k->fn == nullptr) return rig_never(why, "part %u: a launch of a kernel record with no function", part);
    const unsigned __int128 threads = (unsigned __int128)l.threads[0] * l.threads[1] * l.threads[2];
    if (k->threads && threads > *k->threads)
      return rig_never(why, "part %u: %ux%ux%u threads per group, over the kernel's limit of %llu", part,
                       l.threads[0], l.threads[1], l.threads[2], (unsigned long long)*k->threads);
  }
  return RIG_FITS;
}

}  // namespace

std::byte* HostQueue::Spill::reserve(std::size_t n) {
  if (n > capacity) {
    const std::size_t grown = std::max({n, capacity * 2, std::size_t(1024)});
    data.reset(static_cast<std::byte*>(::operator new[](grown, std::align_val_t(64))));
    capacity = grown;
  }
  return data.get();
}

HostQueue::HostQueue(volatile std::uint64_t* word, void* fill_context, unsigned helpers,
                     std::span<const CounterEvent> counters, cpu::DispatcherIdle idle)
    : word_(word),
      fill_context_(fill_context),
      counter_count_(std::min(counters.size(), kCountersMax)),
      slots_(new Slot[kSlots]),
      workers_(helpers, counters.first(counter_count_)),
      idle_(idle) {
  dispatcher_ = std::thread([this] { dispatch(); });
}

HostQueue::~HostQueue() {
  if (!stopped_) stop("the device was destroyed");
  if (dispatcher_.joinable()) dispatcher_.join();  // stopped from its idle hook
}

// ---------------------------------------------------------------------------------------
// The producer's side: room, submit, commit.

int HostQueue::room(const rig_part* parts, std::uint32_t count, std::uint32_t, char* why) const noexcept {
  for (std::uint32_t i = 0; i < count; ++i) {
    const rig_part& p = parts[i];
    if (p.queue != 0) return rig_never(why, "part %u: queue %u, but the device has only queue 0", i, p.queue);
    switch (p.kind) {
      case RIG_KIND_FILL:
        if (p.work.fill.fn == nullptr) return rig_never(why, "part %u: a fill without a function", i);
        break;
      case RIG_KIND_COPY:
        if (p.work.copy.count != 0 && p.work.copy.boxes == nullptr)
          return rig_never(why, "part %u: a copy of %u boxes at no address", i, p.work.copy.count);
        break;
      case RIG_KIND_LAUNCH:
        if (launch_room(p.work.launch, i, why) == RIG_NEVER) return RIG_NEVER;
        break;
      case RIG_KIND_WORDS: return rig_never(why, "part %u: Words, which the host queue does not run", i);
      default: return rig_never(why, "part %u: kind %u, no kind of work", i, p.kind);
    }
  }
  // A failed or stopped queue takes nothing more; submit then reports why.
  if (failed_.load(std::memory_order_acquire) || stopping_.load(std::memory_order_acquire)) {
    return RIG_FITS;
  }
  const std::uint32_t head = head_.load(std::memory_order_relaxed);
  if (head - tail_seen_ >= kSlots) {
    tail_seen_ = tail_.load(std::memory_order_acquire);
    if (head - tail_seen_ >= kSlots) return RIG_LATER;
  }
  return RIG_FITS;
}

const char* HostQueue::fill_slot(Slot& slot, const rig_part* parts, std::uint32_t count,
                                 const rig_wait* waits, std::uint32_t wait_count) {
  // Lay out the steps, the waits and the bytes the steps carry, then place them at once,
  // so that the pointers into the storage stay valid.
  std::size_t carried = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const rig_part& p = parts[i];
    if (p.kind == RIG_KIND_LAUNCH) {
      carried = round16(carried) + p.work.launch.param_bytes;
    } else if (p.kind == RIG_KIND_COPY) {
      carried = round16(carried) + std::size_t(p.work.copy.count) * sizeof(rig_box);
    } else if (p.kind != RIG_KIND_FILL) {
      return "submit was given a part the host queue does not run (room answers RIG_NEVER)";
    }
  }
  const std::size_t waits_at = std::size_t(count) * sizeof(Step);
  const std::size_t bytes_at = round16(waits_at + std::size_t(wait_count) * sizeof(rig_wait));
  const std::size_t total = bytes_at + carried;
  std::byte* const storage = total <= kInlineBytes ? slot.inline_bytes : slot.spill.reserve(total);

  auto* steps = reinterpret_cast<Step*>(storage);
  auto* kept_waits = reinterpret_cast<rig_wait*>(storage + waits_at);
  if (wait_count != 0) std::memcpy(kept_waits, waits, std::size_t(wait_count) * sizeof(rig_wait));
  std::byte* const bytes = storage + bytes_at;
  std::size_t at = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    const rig_part& p = parts[i];
    Step& step = steps[i];
    step.kind = p.kind;
    step.shared = 0;
    switch (p.kind) {
      case RIG_KIND_FILL:
        step.fill.fn = p.work.fill.fn;
        step.fill.arg = p.work.fill.arg;
        break;
      case RIG_KIND_COPY: {
        const rig_copy& c = p.work.copy;
        at = round16(at);
        const std::size_t n = std::size_t(c.count) * sizeof(rig_box);
        if (n != 0) std::memcpy(bytes + at, c.boxes, n);
        step.copy.dst = copy_destination(c);
        step.copy.src = copy_source(c);
        step.copy.boxes = reinterpret_cast<const rig_box*>(bytes + at);
        step.copy.count = c.count;
        step.copy.fill = c.fill;
        at += n;
        break;
      }
      case RIG_KIND_LAUNCH: {
        // The parameters are valid only during this call: keep a copy. Refs are already
        // patched into them.
        const rig_launch& l = p.work.launch;
        at = round16(at);
        if (l.param_bytes != 0) std::memcpy(bytes + at, l.params, l.param_bytes);
        step.shared = l.shared;
        step.launch.kernel = kernel_of(l);
        step.launch.params = bytes + at;
        std::copy_n(l.groups, 3, step.launch.groups);
        std::copy_n(l.threads, 3, step.launch.threads);
        at += l.param_bytes;
        break;
      }
    }
  }
  slot.steps = steps;
  slot.step_count = count;
  slot.waits = kept_waits;
  slot.wait_count = wait_count;
  return nullptr;
}

int HostQueue::submit(const rig_part* parts, std::uint32_t count, const rig_wait* waits,
                      std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times,
                      const char** failure) noexcept {
  if (failed_.load(std::memory_order_acquire)) {
    *failure = failure_;
    return RIG_FAILED;
  }
  if (stopping_.load(std::memory_order_acquire)) {
    *failure = stop_reason_;
    return RIG_FAILED;
  }
  const std::uint32_t head = head_.load(std::memory_order_relaxed);
  if (head - tail_seen_ >= kSlots) {
    tail_seen_ = tail_.load(std::memory_order_acquire);
    if (head - tail_seen_ >= kSlots) {
      *failure = "submit found the host queue's ring full (room answers RIG_LATER first)";
      return RIG_FAILED;
    }
  }
  Slot& slot = slots_[head % kSlots];
  try {
    if (const char* why = fill_slot(slot, parts, count, waits, wait_count)) {
      *failure = why;
      return RIG_FAILED;
    }
    slot.value = v;
    slot.times = times;
    slot.rows = nullptr;
    if (times != nullptr && counter_count_ != 0) {  // a timed value: measure its launches
      std::uint32_t launches = 0;
      for (std::uint32_t i = 0; i < count; ++i) launches += parts[i].kind == RIG_KIND_LAUNCH;
      if (launches != 0) slot.rows = keep_rows(v, launches);
    }
  } catch (const std::bad_alloc&) {
    *failure = "no host memory for the job's copy of its parts";
    return RIG_FAILED;
  }

  // Publish the job; ring the doorbell only when the dispatcher is parked (a spinning one
  // sees head_ move within a fraction of a microsecond).
  head_.store(head + 1, std::memory_order_seq_cst);
  if (dispatcher_parked_.load(std::memory_order_seq_cst)) {
    doorbell_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(doorbell_, 1);
  }
  // Claim the next slot's first lines for writing now, off the next submit's path.
  const Slot& upcoming = slots_[(head + 1) % kSlots];
  __builtin_prefetch(&upcoming, 1);
  __builtin_prefetch(reinterpret_cast<const char*>(&upcoming) + 64, 1);
  return RIG_COMMITTED;
}

int HostQueue::commit(std::uint64_t, const char** failure) noexcept {
  if (failed_.load(std::memory_order_acquire)) {
    *failure = failure_;
    return RIG_FAILED;
  }
  if (stopping_.load(std::memory_order_acquire)) {
    *failure = stop_reason_;
    return RIG_FAILED;
  }
  return RIG_OK;
}

// ---------------------------------------------------------------------------------------
// Measures.

std::uint64_t* HostQueue::keep_rows(std::uint64_t v, std::uint32_t launches) noexcept {
  try {
    sweep_rows();
    std::vector<std::uint64_t> rows;
    if (!spare_rows_.empty()) {
      rows = std::move(spare_rows_.back());
      spare_rows_.pop_back();
    }
    rows.assign(std::size_t(launches) * row_words(), 0);
    auto& kept = kept_rows_[v];
    kept = std::move(rows);
    return kept.data();
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

void HostQueue::sweep_rows() noexcept {
  if (doomed_rows_.empty()) return;
  const std::uint64_t shown = word();
  std::erase_if(doomed_rows_, [&](std::uint64_t v) {
    if (v > shown) return false;
    kept_rows_.erase(v);
    return true;
  });
}

int HostQueue::measures(std::uint64_t v, std::uint64_t* out, const char**) noexcept {
  sweep_rows();
  const auto it = kept_rows_.find(v);
  if (out == nullptr) {
    if (it == kept_rows_.end()) return RIG_OK;
    if (word() < v) {  // the dispatcher may still write them
      try {
        doomed_rows_.push_back(v);
      } catch (const std::bad_alloc&) {
        // kept until the queue goes
      }
      return RIG_OK;
    }
    // Keep a few storages for later values, so that a profile of a steady stream of
    // launches reuses them.
    if (spare_rows_.size() < 64) {
      try {
        spare_rows_.push_back(std::move(it->second));
      } catch (const std::bad_alloc&) {
      }
    }
    kept_rows_.erase(it);
    return RIG_OK;
  }
  if (it == kept_rows_.end() || word() < v) return RIG_OK;  // nothing measured (yet)
  const std::vector<std::uint64_t>& rows = it->second;
  const std::size_t n = row_words();
  for (std::size_t at = 0; at + n <= rows.size(); at += n) {
    if (rows[at] == 1) std::copy_n(rows.data() + at, n, out + at);
  }
  return RIG_OK;
}

// ---------------------------------------------------------------------------------------
// Waiting on the word.

std::uint64_t HostQueue::word() const noexcept { return __atomic_load_n(word_, __ATOMIC_ACQUIRE); }

void HostQueue::sleep(std::uint64_t v, std::chrono::nanoseconds most) {
  sleepers_.sleep(word_, v, most, [this] {
    return failed_.load(std::memory_order_seq_cst) || stopping_.load(std::memory_order_seq_cst);
  });
  if (failed_.load(std::memory_order_acquire)) throw edge::Fault(failure_);
}

// ---------------------------------------------------------------------------------------
// The dispatcher.

bool HostQueue::await_job(std::uint32_t next) {
  // With an idle hook, one round at least after each value (which reports it at once), and
  // one each round of the wait; begin and end bracket the rounds of one wait.
  const bool hooked = idle_.round != nullptr;
  bool serving = false;
  Spin spin(kEagerSpinNs, kSpinNs);
  for (;;) {
    if (hooked && !stopping_.load(std::memory_order_relaxed)) {
      if (!serving && idle_.begin != nullptr) idle_.begin(idle_.context);
      serving = true;
      if (idle_.round(idle_.context)) spin = Spin(kEagerSpinNs, kSpinNs);
    }
    if (head_.load(std::memory_order_acquire) != next) break;
    if (stopping_.load(std::memory_order_relaxed)) break;
    if (spin.spin()) continue;
    if (serving && idle_.end != nullptr) idle_.end(idle_.context, true);
    serving = false;
    // Park. The doorbell is read before the flag is raised, so a submit that sees the
    // flag bumps it after this read and the futex wait returns at once.
    const std::uint32_t bell = doorbell_.load(std::memory_order_seq_cst);
    dispatcher_parked_.store(true, std::memory_order_seq_cst);
    if (head_.load(std::memory_order_seq_cst) == next &&
        !stopping_.load(std::memory_order_seq_cst)) {
      futex_wait(doorbell_, bell);
    }
    dispatcher_parked_.store(false, std::memory_order_relaxed);
    spin = Spin(kEagerSpinNs, kSpinNs);
  }
  if (serving && idle_.end != nullptr) idle_.end(idle_.context, false);
  return !stopping_.load(std::memory_order_acquire);
}

bool HostQueue::await_waits(const Slot& slot) {
  for (std::uint32_t i = 0; i < slot.wait_count; ++i) {
    const rig_wait& w = slot.waits[i];
    if (__atomic_load_n(w.word, __ATOMIC_ACQUIRE) >= w.value) continue;
    Spin spin(kEagerSpinNs, kSpinNs);
    auto backoff = kFirstBackoff;
    while (__atomic_load_n(w.word, __ATOMIC_ACQUIRE) < w.value) {
      if (stopping_.load(std::memory_order_acquire)) return false;
      if (spin.spin()) continue;
      // The producer does not wake this thread: sleep a little, longer each time. stop
      // bumps the doorbell, which ends the sleep at once.
      const std::uint32_t bell = doorbell_.load(std::memory_order_seq_cst);
      if (stopping_.load(std::memory_order_seq_cst)) return false;
      futex_wait(doorbell_, bell, backoff);
      backoff = std::min(backoff * 2, kLastBackoff);
    }
  }
  return true;
}

void HostQueue::fail(int code, std::uint64_t v) {
  std::snprintf(failure_, sizeof failure_, "fill returned %d at value %llu", code,
                static_cast<unsigned long long>(v));
  failed_.store(true, std::memory_order_seq_cst);
  sleepers_.wake_all();  // they throw the failure
}

bool HostQueue::run_step(const Step& step, std::uint64_t v, std::uint64_t* row) {
  switch (step.kind) {
    case RIG_KIND_LAUNCH: {
      GroupLaunch g;
      g.kernel = step.launch.kernel;
      g.params = step.launch.params;
      std::copy_n(step.launch.groups, 3, g.groups);
      std::copy_n(step.launch.threads, 3, g.threads);
      g.shared = step.shared;
      g.value = v;
      if (row == nullptr) return workers_.run(g);
      // Measured: its start and end on the host clock, and its counts, into its row.
      LaunchCounts counts;
      g.counts = &counts;
      const std::uint64_t start = rig_now_ns();
      const bool ran = workers_.run(g);
      const std::uint64_t end = rig_now_ns();
      if (ran && !counts.unmeasured.load(std::memory_order_relaxed)) {
        row[1] = start;
        row[2] = end;
        for (std::size_t i = 0; i < counter_count_; ++i)
          row[3 + i] = counts.values[i].load(std::memory_order_relaxed);
        row[0] = 1;
      }
      return ran;
    }
    case RIG_KIND_COPY:
      run_boxes(step.copy.dst, step.copy.src, step.copy.boxes, step.copy.count, step.copy.fill);
      return true;
    case RIG_KIND_FILL: {
      const int code = step.fill.fn(fill_context_, step.fill.arg, v);
      if (code != 0) {
        fail(code, v);
        return false;
      }
      return true;
    }
    default:
      return true;  // fill_slot keeps no other kind
  }
}

void HostQueue::dispatch() {
  std::uint32_t next = tail_.load(std::memory_order_relaxed);
  for (;;) {
    if (!await_job(next)) return;
    const Slot& slot = slots_[next % kSlots];
    // The producer just wrote the slot: fetch its header and inline lines at once rather
    // than one dependent miss after another.
    for (std::size_t line = 0; line < sizeof(Slot) - sizeof(Spill); line += 64) {
      __builtin_prefetch(reinterpret_cast<const char*>(&slot) + line);
    }
    if (!await_waits(slot)) return;
    std::uint64_t* const times = slot.times;
    std::uint64_t* row = slot.rows;  // the next launch's row, if the value is measured
    const std::uint64_t v = slot.value;
    const std::uint64_t start = times != nullptr ? rig_now_ns() : 0;
    for (std::uint32_t i = 0; i < slot.step_count; ++i) {
      const Step& step = slot.steps[i];
      // A failed fill, or stop: nothing more runs.
      if (!run_step(step, v, step.kind == RIG_KIND_LAUNCH ? row : nullptr)) return;
      if (row != nullptr && step.kind == RIG_KIND_LAUNCH) row += row_words();
    }
    if (times != nullptr) {
      times[0] = start;
      times[1] = rig_now_ns();
    }
    // A stopped device's values are dropped, even one whose work just finished.
    if (stopping_.load(std::memory_order_acquire)) return;
    // Free the slot before the word shows v, so that room fits once v is reached.
    tail_.store(++next, std::memory_order_release);
    sleepers_.publish(word_, v);
  }
}

void HostQueue::stop(std::string_view why) {
  if (stopped_) return;
  stopped_ = true;
  std::snprintf(stop_reason_, sizeof stop_reason_, "stopped: %.*s", int(why.size()), why.data());
  stopping_.store(true, std::memory_order_seq_cst);
  doorbell_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(doorbell_);
  workers_.interrupt();
  sleepers_.wake_all();
  if (dispatcher_.joinable() && dispatcher_.get_id() != std::this_thread::get_id()) dispatcher_.join();
  workers_.stop();
}

}  // namespace rig::host
