// futex.hpp — the waiting primitives of the host device's threads: a pause for spin loops,
// a spin budget that gives way to other threads, and futex sleep and wake on a 32-bit
// atomic.
//
// On the VMs rig runs on, a spin hand-off between two threads costs ~0.2 µs while a futex
// wake-up costs tens of microseconds, so every wait here spins for a bounded time first and
// only then parks on a futex, so that an idle process uses no CPU.
#pragma once

#include <rig/rig_edge.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace rig::host {

// Tells the core that this thread is in a spin loop (x86 PAUSE, arm64 YIELD): it saves
// power and lets the other hyper-thread run.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Sleeps while `word` holds `expected`, for at most `timeout` (nullopt: no limit). Returns
// at once if the word holds another value; may return early (a signal, a spurious wake).
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max()) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  timespec t{};
  const bool limited = timeout != std::chrono::nanoseconds::max();
  if (limited) {
    const auto ns = timeout.count() < 0 ? 0 : timeout.count();
    t.tv_sec = time_t(ns / 1'000'000'000);
    t.tv_nsec = long(ns % 1'000'000'000);
  }
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected,
          limited ? &t : nullptr, nullptr, 0);
}

// Wakes up to `count` threads sleeping on `word`.
inline void futex_wake(std::atomic<std::uint32_t>& word, int count = INT_MAX) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr,
          nullptr, 0);
}

// A bounded spin: call spin() in a wait loop until it returns false, then park. The first
// `eager_ns` are pauses (the fast hand-off), yielding the CPU once every `give_way` rounds
// (a power of two; kGiveWayRounds unless the caller's rounds are longer than a pause);
// after that each round yields it, so that on a machine with more runnable threads than
// cores a spinner does not keep the thread it waits for off the CPU. The clock is read
// every few rounds only.
class Spin {
 public:
  // Rounds of pauses between two yields of the eager phase: 1.5 µs on the VMs rig runs on.
  // A thread that shares the spinner's CPU (the dispatcher's and a remote agent's progress
  // thread, say, on two cores) then runs within that, not at the eager phase's end (20 µs
  // of the round trip of a launch on a remote host device, measured); a yield with no
  // other thread to run returns at once.
  static constexpr std::uint32_t kGiveWayRounds = 64;

  Spin(std::uint64_t eager_ns, std::uint64_t total_ns, std::uint32_t give_way = kGiveWayRounds)
      : eager_ns_(eager_ns), total_ns_(total_ns), start_(rig_now_ns()), give_way_mask_(give_way - 1) {}

  // One round of waiting; false once the budget is spent.
  bool spin() {
    if ((++rounds_ & 15u) == 0) {
      elapsed_ = rig_now_ns() - start_;
      if (elapsed_ >= total_ns_) return false;
    }
    if (elapsed_ < eager_ns_ && (rounds_ & give_way_mask_) != 0) {
      cpu_relax();
    } else {
      sched_yield();
    }
    return true;
  }

 private:
  std::uint64_t eager_ns_;
  std::uint64_t total_ns_;
  std::uint64_t start_;
  std::uint32_t give_way_mask_;
  std::uint64_t elapsed_ = 0;
  std::uint32_t rounds_ = 0;
};

}  // namespace rig::host

namespace rig::host {

// Threads sleeping until a timeline word reaches a value, and the wake-ups of the thread
// that raises the word. Raising the word costs one extra load while nobody sleeps.
class WordSleepers {
 public:
  // Stores v into `word` and wakes the sleepers, if any. The store and the read of the
  // sleeper count are sequentially consistent, as are the sleeper's count increment and
  // its last look at the word: either that look sees v, or this read sees the sleeper and
  // bumps the futex word after the sleeper read it, so its futex wait returns.
  void publish(volatile std::uint64_t* word, std::uint64_t v) {
    __atomic_store_n(word, v, __ATOMIC_SEQ_CST);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) wake_all();
  }

  // Blocks until `word` shows v, `most` has passed, or wake_all is called, unless
  // `give_up()` is already true; may return early.
  template <class GiveUp>
  void sleep(const volatile std::uint64_t* word, std::uint64_t v, std::chrono::nanoseconds most,
             GiveUp&& give_up) {
    if (__atomic_load_n(word, __ATOMIC_ACQUIRE) >= v || give_up()) return;
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t seq = seq_.load(std::memory_order_seq_cst);
    if (__atomic_load_n(word, __ATOMIC_SEQ_CST) < v && !give_up()) futex_wait(seq_, seq, most);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
  }

  // Wakes every sleeper (a failure or a stop: call after making give_up true).
  void wake_all() {
    seq_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake(seq_);
  }

 private:
  alignas(64) std::atomic<std::uint32_t> sleepers_{0};
  std::atomic<std::uint32_t> seq_{0};
};

}  // namespace rig::host
