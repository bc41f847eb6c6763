// workers.cpp — helper threads that share a launch's groups with the dispatcher.
//
// Protocol. run() writes the launch into current_, resets next_group_, then opens a new
// epoch in state_ (release: a helper that sees the epoch sees the launch). A helper that
// sees an open epoch it has not joined increments active_ and checks that the same epoch
// is still open before it reads the launch; run() closes the epoch once no group is left
// and waits for active_ to reach 0 before it returns. With sequentially consistent
// operations on both sides, either the helper sees the close and leaves without touching
// the launch, or run sees the helper and waits for it, so current_ is never read while the
// next launch writes it.
#include "workers.hpp"

#include "futex.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include <linux/perf_event.h>

namespace rig::host {

namespace {

constexpr CounterEvent kHardwareCounters[] = {
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
};

// Opens `event` counting the calling thread in user space, in the group led by `leader`
// (-1: it leads). Returns the descriptor, or -errno.
int open_event(const CounterEvent& event, int leader) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = event.type;
  a.config = event.config;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  const long fd = syscall(SYS_perf_event_open, &a, 0 /* this thread */, -1 /* any CPU */, leader,
                          PERF_FLAG_FD_CLOEXEC);
  return fd < 0 ? -errno : int(fd);
}

std::string errno_text(int e) {
  const char* name = e == EACCES ? "EACCES" : e == EPERM ? "EPERM" : e == ENOENT ? "ENOENT"
                   : e == EOPNOTSUPP ? "EOPNOTSUPP" : e == ENOSYS ? "ENOSYS" : e == EINVAL ? "EINVAL"
                   : e == EMFILE ? "EMFILE" : "errno";
  return std::string(name) + " (" + std::strerror(e) + ")";
}

// Spin budgets: a hand-off within this time costs no futex wake-up.
constexpr std::uint64_t kEagerSpinNs = 20'000;
constexpr std::uint64_t kSpinNs = 60'000;

// Waits (spin, then 50 µs sleeps) until `count` is 0.
void wait_for_zero(const std::atomic<std::uint32_t>& count) {
  Spin spin(kEagerSpinNs, kSpinNs);
  while (count.load(std::memory_order_acquire) != 0) {
    if (!spin.spin()) {
      timespec t{0, 50'000};
      nanosleep(&t, nullptr);
    }
  }
}

}  // namespace

std::span<const CounterEvent> hardware_counters() { return kHardwareCounters; }

std::optional<std::string> probe_counters(std::span<const CounterEvent> events) {
  if (events.empty() || events.size() > kCountersMax)
    return "perf_event_open: " + std::to_string(events.size()) + " counters asked for, 1 to 4 allowed";
  ThreadCounters probe;
  std::string why;
  ThreadCounters::Reading r;
  if (!probe.open(events, &why)) return why;
  if (!probe.read(r)) return "perf_event_open: the counters' group cannot be read";
  return std::nullopt;
}

ThreadCounters::~ThreadCounters() { close(); }

void ThreadCounters::close() {
  for (auto& fd : fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
  count_ = 0;
  tried_ = ok_ = false;
}

bool ThreadCounters::open(std::span<const CounterEvent> events, std::string* why) {
  if (tried_) return ok_;
  tried_ = true;
  if (events.empty() || events.size() > kCountersMax) return false;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const int fd = open_event(events[i], i == 0 ? -1 : fds_[0]);
    if (fd < 0) {
      if (why) *why = "perf_event_open of " + std::string(events[i].name) + ": " + errno_text(-fd);
      for (std::size_t j = 0; j < i; ++j) {
        ::close(fds_[j]);
        fds_[j] = -1;
      }
      return false;
    }
    fds_[i] = fd;
  }
  count_ = events.size();
  ok_ = true;
  return true;
}

bool ThreadCounters::read(Reading& out) const {
  if (!ok_) return false;
  // PERF_FORMAT_GROUP with both times: nr, time_enabled, time_running, then each value.
  std::uint64_t words[3 + kCountersMax];
  const ssize_t n = ::read(fds_[0], words, sizeof words);
  if (n < ssize_t((3 + count_) * sizeof(std::uint64_t)) || words[0] != count_) return false;
  out.enabled = words[1];
  out.running = words[2];
  std::copy_n(words + 3, count_, out.values);
  return true;
}

Workers::ScratchPtr Workers::make_scratch() {
  return ScratchPtr(
      static_cast<std::byte*>(::operator new[](kSharedBytesMax, std::align_val_t(64))));
}

Workers::Workers(unsigned helpers, std::span<const CounterEvent> counters) {
  event_count_ = std::min(counters.size(), kCountersMax);
  std::copy_n(counters.begin(), event_count_, events_);
  scratch_.reserve(helpers + 1);
  for (unsigned i = 0; i <= helpers; ++i) scratch_.push_back(make_scratch());
  threads_.reserve(helpers);
  for (unsigned i = 1; i <= helpers; ++i) {
    threads_.emplace_back([this, scratch = scratch_[i].get()] { helper_main(scratch); });
  }
}

Workers::~Workers() { stop(); }

void Workers::interrupt() {
  stopping_.store(true, std::memory_order_seq_cst);
  // Change the futex word so that a helper about to park sees a new value, then wake all.
  state_.fetch_add(2, std::memory_order_seq_cst);
  futex_wake(state_);
}

void Workers::stop() {
  interrupt();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool Workers::run(const GroupLaunch& launch) {
  const std::uint64_t total = std::uint64_t(launch.groups[0]) * launch.groups[1] * launch.groups[2];
  if (total == 0) return true;

  ThreadCounters& mine = caller_counters_;
  if (launch.counts != nullptr && caller_counting_ != std::this_thread::get_id()) {
    caller_counters_.close();  // another thread's, or none yet: open this thread's
    caller_counting_ = std::this_thread::get_id();
  }

  if (threads_.empty() || total == 1) {
    // Alone: the groups run here, in order, a few at a time between looks at stop.
    current_ = launch;
    total_ = total;
    chunk_ = std::min<std::uint64_t>(total, 64);
    next_group_.store(0, std::memory_order_relaxed);
    take_counted(scratch_[0].get(), mine, launch.counts);
    return !stopping_.load(std::memory_order_acquire);
  }

  current_ = launch;
  total_ = total;
  const std::uint64_t participants = threads_.size() + 1;
  // Chunks amortise the counter for grids of many small groups while keeping the load
  // balanced for grids of few large ones.
  chunk_ = std::clamp<std::uint64_t>(total / (participants * 16), 1, 32);
  next_group_.store(0, std::memory_order_relaxed);

  const std::uint32_t open = ((state_.load(std::memory_order_relaxed) >> 1) + 1) << 1 | 1u;
  state_.store(open, std::memory_order_seq_cst);
  if (parked_.load(std::memory_order_seq_cst) != 0) futex_wake(state_);

  take_counted(scratch_[0].get(), mine, launch.counts);

  // Close the epoch, then wait for the helpers still running groups of it.
  state_.store(open & ~1u, std::memory_order_seq_cst);
  wait_for_zero(active_);
  return !stopping_.load(std::memory_order_acquire);
}

void Workers::take_groups(std::byte* scratch) {
  const GroupLaunch& l = current_;
  const std::uint64_t gx = l.groups[0];
  const std::uint64_t gxy = gx * l.groups[1];
  rig_host_group g{};
  for (int d = 0; d < 3; ++d) {
    g.groups[d] = l.groups[d];
    g.threads[d] = l.threads[d];
  }
  g.shared_bytes = l.shared;
  g.shared = l.shared != 0 ? scratch : nullptr;
  g.value = l.value;

  for (;;) {
    if (stopping_.load(std::memory_order_relaxed)) return;
    const std::uint64_t first = next_group_.fetch_add(chunk_, std::memory_order_relaxed);
    if (first >= total_) return;
    const std::uint64_t last = std::min(first + chunk_, total_);
    for (std::uint64_t i = first; i < last; ++i) {
      g.group[0] = std::uint32_t(i % gx);
      g.group[1] = std::uint32_t(i % gxy / gx);
      g.group[2] = std::uint32_t(i / gxy);
      l.kernel(l.params, &g);
    }
  }
}

void Workers::take_counted(std::byte* scratch, ThreadCounters& mine, LaunchCounts* counts) {
  if (counts == nullptr) {
    take_groups(scratch);
    return;
  }
  ThreadCounters::Reading before, after;
  const bool opened = mine.open(std::span(events_, event_count_)) && mine.read(before);
  take_groups(scratch);
  if (!opened || !mine.read(after) || (after.enabled > before.enabled && after.running == before.running)) {
    counts->unmeasured.store(true, std::memory_order_relaxed);  // it ran groups it could not count
    return;
  }
  const std::uint64_t enabled = after.enabled - before.enabled;
  const std::uint64_t running = after.running - before.running;
  for (std::size_t i = 0; i < event_count_; ++i) {
    std::uint64_t delta = after.values[i] - before.values[i];
    if (running != 0 && running < enabled)  // multiplexed: scale to the whole time
      delta = std::uint64_t((unsigned __int128)delta * enabled / running);
    counts->values[i].fetch_add(delta, std::memory_order_relaxed);
  }
}

void Workers::helper_main(std::byte* scratch) {
  ThreadCounters mine;  // opened at this thread's first counted launch
  std::uint32_t seen = 0;  // the last open state joined; 0 is closed, never open
  for (;;) {
    // Wait for an open epoch not yet joined: spin, then park on state_.
    std::uint32_t s = 0;
    Spin spin(kEagerSpinNs, kSpinNs);
    for (;;) {
      if (stopping_.load(std::memory_order_acquire)) return;
      s = state_.load(std::memory_order_acquire);
      if ((s & 1u) != 0 && s != seen) break;
      if (spin.spin()) continue;
      parked_.fetch_add(1, std::memory_order_seq_cst);
      if (state_.load(std::memory_order_seq_cst) == s &&
          !stopping_.load(std::memory_order_seq_cst)) {
        futex_wait(state_, s);
      }
      parked_.fetch_sub(1, std::memory_order_relaxed);
      spin = Spin(kEagerSpinNs, kSpinNs);
    }
    seen = s;
    active_.fetch_add(1, std::memory_order_seq_cst);
    if (state_.load(std::memory_order_seq_cst) == s) take_counted(scratch, mine, current_.counts);
    active_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace rig::host
