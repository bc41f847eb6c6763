// Small synchronisation pieces: a pause for spin loops, a spin lock for short critical
// sections, and a lock that spins briefly and then sleeps on a futex.
#pragma once

#include <atomic>
#include <cstdint>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace rig::detail {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Sleeps while *word == expected, for at most timeout_ns (0: no limit).
inline void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       std::uint64_t timeout_ns = 0) {
  timespec t{};
  t.tv_sec = time_t(timeout_ns / 1'000'000'000u);
  t.tv_nsec = long(timeout_ns % 1'000'000'000u);
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected,
          timeout_ns ? &t : nullptr, nullptr, 0);
}

inline void futex_wake(std::atomic<std::uint32_t>& word, int count = 1) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr,
          nullptr, 0);
}

// For critical sections of a few instructions, such as raising an allocation's stamps.
class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) cpu_relax();
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// A device's turn: held across room, submit and commit. Spins a little (a hand-off between
// two submitting threads takes well under a microsecond), then sleeps on a futex.
class Turn {
 public:
  void lock() {
    std::uint32_t c = 0;
    for (int i = 0; i < 200; ++i) {
      c = 0;
      if (state_.compare_exchange_weak(c, 1, std::memory_order_acquire)) return;
      cpu_relax();
    }
    if (c != 2) c = state_.exchange(2, std::memory_order_acquire);
    while (c != 0) {
      futex_wait(state_, 2);
      c = state_.exchange(2, std::memory_order_acquire);
    }
  }
  bool try_lock() {
    std::uint32_t c = 0;
    return state_.compare_exchange_strong(c, 1, std::memory_order_acquire);
  }
  void unlock() {
    if (state_.exchange(0, std::memory_order_release) == 2) futex_wake(state_);
  }

 private:
  std::atomic<std::uint32_t> state_{0};  // 0 free, 1 held, 2 held with sleepers
};

}  // namespace rig::detail
