// driver_floor.hpp — what the submit bench's driver parts (amd_submit.cpp, nv_submit.cpp) share
// to time a driver's room + submit beside memcpy of the bytes it wrote: a reader of those bytes
// on another thread, as a GPU's command processor reads them, and one CPU for every thread.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sched.h>

namespace rig::bench {

// A thread that reads bytes another thread wrote, as a GPU's command processor reads its
// ring: read() hands it a range of a circular area and returns once it has read them.
// Between reads it sleeps, taking no CPU from the bursts being timed.
class Reader {
 public:
  Reader() : thread_([this] { run(); }) {}
  ~Reader() {
    stop_.store(true);
    asked_.store(true, std::memory_order_release);
    asked_.notify_one();
    thread_.join();
  }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  // Reads bytes [from, to) of `area`, counted from its start and wrapping at its end.
  void read(std::span<const std::byte> area, std::uint64_t from, std::uint64_t to) {
    area_ = area, from_ = from, to_ = to;
    asked_.store(true, std::memory_order_release);
    asked_.notify_one();
    asked_.wait(true, std::memory_order_acquire);
  }

 private:
  void run() {
    while (true) {
      asked_.wait(false, std::memory_order_acquire);
      if (stop_.load()) return;
      std::uint64_t sum = 0;
      for (std::uint64_t i = from_; i < to_; i += 8) {
        std::uint64_t x = 0;
        const std::uint64_t offset = i % area_.size();
        std::memcpy(&x, area_.data() + offset, std::min<std::uint64_t>(8, area_.size() - offset));
        sum += x;
      }
      sum_ = sum_ + sum;
      asked_.store(false, std::memory_order_release);
      asked_.notify_one();
    }
  }

  std::span<const std::byte> area_;
  std::uint64_t from_ = 0, to_ = 0;
  volatile std::uint64_t sum_ = 0;  // what it read, kept
  std::atomic<bool> asked_{false}, stop_{false};
  std::thread thread_;
};

// Confines every thread of the process to the CPU the caller runs on while it lives, and
// gives each its CPUs back after.
class OneCpu {
 public:
  OneCpu() {
    const int cpu = sched_getcpu();
    if (cpu < 0) throw std::runtime_error(fmt::format("sched_getcpu: {}", std::strerror(errno)));
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      const pid_t tid = std::stoi(task.path().filename().string());
      cpu_set_t had;
      if (sched_getaffinity(tid, sizeof had, &had) != 0) continue;  // the thread has ended
      if (sched_setaffinity(tid, sizeof one, &one) != 0) continue;
      saved_.emplace_back(tid, had);
    }
  }
  ~OneCpu() {
    for (auto& [tid, had] : saved_) sched_setaffinity(tid, sizeof had, &had);
  }
  OneCpu(const OneCpu&) = delete;
  OneCpu& operator=(const OneCpu&) = delete;

 private:
  std::vector<std::pair<pid_t, cpu_set_t>> saved_;
};

inline double ns_since(std::chrono::steady_clock::time_point t0) {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace rig::bench
