// driver_floor.hpp — what the submit bench's driver parts (amd_submit.cpp, nv_submit.cpp) share
// to time a driver's room + submit beside memcpy of the bytes it wrote: a second driver of the
// GPU that launches the bench's kernel, a reader of the bytes on another thread, as a GPU's
// command processor reads them, and the bursts of both taken in turns on one CPU.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include <sched.h>

#include <rig/rig.hpp>

#include "../tools/machine.hpp"
#include "bench.hpp"

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

// Copies n bytes into the circular `area` at `at` (bytes placed ever) as a driver places a
// block in its ring: one that would straddle the end goes to the start instead, the bytes
// skipped counted in `at`. A floor's copy of what the driver wrote.
inline void place_whole(std::span<std::byte> area, std::uint64_t& at, const void* bytes, std::uint64_t n) {
  if (at % area.size() + n > area.size()) at += area.size() - at % area.size();
  std::memcpy(area.data() + at % area.size(), bytes, n);
  at += n;
}

// Submissions in a burst, between untimed waits for the device's work (as submit.cpp).
inline constexpr std::uint64_t kDriverBurst = 64;

// The machine's GPU named as `device` is, if it is one.
inline std::optional<tool::Gpu> gpu_of(const Device& device) {
  for (auto& gpu : tool::gpu_openers([](const std::string&) {}))
    if (gpu.name == device.name()) return gpu;
  return std::nullopt;
}

// Function `name` of the image `binary`, loaded on `device`; throws saying which failed.
inline Function load_kernel(const Device& device, std::span<const std::byte> binary, const char* name) {
  auto image = Image::load(device, binary);
  if (!image)
    throw std::runtime_error(fmt::format("loading the bench's kernel on {}: {}", device.name(), image.error()));
  auto f = image->resolve(name);
  if (!f) throw std::runtime_error(fmt::format("the bench's image on {} has no {}", device.name(), name));
  return *f;
}

// The driver of a GPU opened outside rig, its word a page of its own, with two buffers and
// the kernel `name` of `binary` placed in its memory: a launch value is handed to its room and
// submit as rig hands one, with a launch part on queue `queue` whose parameters are the
// buffers' addresses.
class SecondDriver {
 public:
  SecondDriver(const tool::Gpu& gpu, std::span<const std::byte> binary, const char* name, std::uint32_t queue)
      : name_(gpu.name) {
    auto made = gpu.make().make(&word_page_[0]);
    if (!made) throw std::runtime_error(fmt::format("opening a second driver of {}: {}", name_, made.error()));
    driver_ = std::move(*made);
    const edge::Facts facts = driver_->facts();
    edge_ = facts.edge;
    hang_ms_ = facts.hang_ms;
    table_ = *static_cast<const rig_driver* const*>(edge_);
    submitted_ = load();
    for (auto& param : params_) {  // the launch's two buffers
      auto region = driver_->alloc(Memory::Device, 4096);
      if (!region) throw std::runtime_error(fmt::format("{} has no memory for the bench's buffers", name_));
      regions_.push_back(*region);
      param = *driver_->locate(*region).address;
    }
    const edge::Entry entry = place_kernel(binary, name);
    part_.queue = queue;
    part_.kind = RIG_KIND_LAUNCH;
    auto& l = part_.work.launch;
    l.code = entry.code;
    l.launch = entry.launch;
    for (int k = 0; k < 3; ++k) l.groups[k] = l.threads[k] = 1;
    l.param_bytes = sizeof params_;
    l.params = params_;
    l.ref_offsets = kRefOffsets;
    l.ref_count = 2;
  }
  SecondDriver(const SecondDriver&) = delete;
  SecondDriver& operator=(const SecondDriver&) = delete;

  ~SecondDriver() {
    try {
      wait();
    } catch (const std::exception&) {
    }
    driver_->stop("the bench is done");
    if (image_) driver_->unload(*image_);
    for (auto& r : regions_) driver_->free(r);
  }

  edge::Driver& driver() { return *driver_; }
  // `bytes` of the GPU's memory that the host writes, as it writes the driver's rings.
  std::span<std::byte> host_memory(std::size_t bytes) {
    auto region = driver_->alloc(Memory::Pinned, bytes);
    if (!region) throw std::runtime_error(fmt::format("{} has no memory for the bench's floor", name_));
    regions_.push_back(*region);
    auto* host = reinterpret_cast<std::byte*>(*driver_->locate(*region).host);
    std::memset(host, 0, bytes);  // its pages are there before the timing
    return {host, bytes};
  }
  // room + submit of the next value, as rig calls them; throws with the driver's reason.
  void submit() {
    char why[RIG_WHY];  // as rig leaves it: the driver writes a reason only where it gives one
    why[0] = 0;
    if (int room = table_->room(edge_, &part_, 1, 0, why); room != RIG_FITS)
      throw std::runtime_error(fmt::format("{}'s room answered {} for one launch{}{}", name_, room, *why ? ": " : "",
                                           why));
    const char* failure = nullptr;
    if (table_->submit(edge_, &part_, 1, nullptr, 0, ++submitted_, nullptr, &failure) != RIG_COMMITTED)
      throw std::runtime_error(fmt::format("{}'s submit failed: {}", name_, failure ? failure : "no reason"));
  }
  // Blocks until the word shows the last value submitted; throws if the GPU does not reach it
  // within the hang time rig would give it.
  void wait() {
    const auto most = std::chrono::milliseconds(hang_ms_.value_or(10'000));
    const auto deadline = std::chrono::steady_clock::now() + most;
    while (load() < submitted_) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error(
            fmt::format("{} did not complete value {} within {} ms", name_, submitted_, most.count()));
      driver_->sleep(submitted_, std::chrono::milliseconds(100));
    }
  }

 private:
  static constexpr std::uint32_t kRefOffsets[2] = {0, 8};

  std::uint64_t load() const { return __atomic_load_n(&word_page_[0], __ATOMIC_ACQUIRE); }
  edge::Entry place_kernel(std::span<const std::byte> binary, const char* name) {
    auto code = driver_->image(binary);
    if (!code) throw std::runtime_error(fmt::format("{} refuses the bench's kernel: {}", name_, code.error()));
    if (auto* loaded = std::get_if<edge::Loaded>(&*code)) {
      image_ = loaded->image;
    } else {
      auto& place = std::get<edge::Place>(*code);
      auto region = driver_->alloc(Memory::Device, place.bytes);
      if (!region) throw std::runtime_error(fmt::format("{} has no memory for the bench's kernel", name_));
      regions_.push_back(*region);
      auto [id, bytes] = place.place(*region);
      image_ = id;
      std::memcpy(reinterpret_cast<void*>(*driver_->locate(*region).host), bytes.data(), bytes.size());
    }
    auto entry = driver_->entry(*image_, name);
    if (!std::holds_alternative<edge::Entry>(entry))
      throw std::runtime_error(fmt::format("{} gives no {} of the bench's kernel", name_, name));
    return std::get<edge::Entry>(entry);
  }

  // The word's page: the driver maps it for the GPU, as it does a word outside rig_words.
  alignas(4096) static inline volatile std::uint64_t word_page_[512] = {};
  std::string name_;
  std::unique_ptr<edge::Driver> driver_;
  void* edge_ = nullptr;
  std::optional<int> hang_ms_;
  const rig_driver* table_ = nullptr;
  std::uint64_t submitted_ = 0;
  std::vector<edge::Region> regions_;  // the buffers' and the kernel's
  std::optional<edge::ImageId> image_;
  std::uint64_t params_[2] = {};
  rig_part part_{};
};

// The driver's bursts and the floor's (each returning its ns for kDriverBurst submits) taken
// in turns, after `warm` of each, with every thread of the process on one CPU, the
// simulator's and the reader's included: where the command processor is a thread on another
// CPU of the host, the driver's figure carries that CPU's cache traffic over the ring, which
// varies with where the two CPUs and the driver's memory happen to lie (docs/bench.md), and
// which hardware's command processor does not cause. Both figures are taken so. Returns the
// medians per submit over `repeats` repetitions: the driver's, then the floor's.
template <class D, class M>
std::pair<Spread, Spread> time_turns(D&& driver_burst, M&& memcpy_burst, std::uint64_t warm, int repeats) {
  const OneCpu one_cpu;
  const std::uint64_t bursts = 50'000 / kDriverBurst;
  for (std::uint64_t i = 0; i < std::max(bursts / 10, warm); ++i) driver_burst(), memcpy_burst();
  std::vector<double> driver_ns, memcpy_ns;
  for (int r = 0; r < repeats; ++r) {
    double d = 0, m = 0;
    for (std::uint64_t i = 0; i < bursts; ++i) d += driver_burst(), m += memcpy_burst();  // taking turns
    driver_ns.push_back(d / double(bursts * kDriverBurst));
    memcpy_ns.push_back(m / double(bursts * kDriverBurst));
  }
  return {spread_of(driver_ns), spread_of(memcpy_ns)};
}

}  // namespace rig::bench
