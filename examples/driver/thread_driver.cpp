// thread_driver.cpp — the thread device (thread_driver.hpp), in the contract's order: facts,
// memory, code, the C functions, the device's thread, stop. rig/edge.hpp and rig/rig_edge.h
// state the contract this file keeps.
#include "thread_driver.hpp"

#include <rig/rig_edge.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

namespace example {
namespace {

constexpr std::size_t kAlignment = 64;

class ThreadDriver;

// The C state (Facts::edge): its first member points to the driver table.
struct Edge {
  const rig_driver* table;
  ThreadDriver* self;
};

// One value's work as the device's thread runs it.
struct Value {
  std::uint64_t v = 0;
  std::vector<rig_wait> waits;
  std::vector<rig_copy> copies;
  std::vector<std::vector<rig_box>> boxes;  // each copy's, owned here
  std::uint64_t* times = nullptr;
};

class ThreadDriver final : public rig::edge::Driver {
 public:
  ThreadDriver(volatile std::uint64_t* word, ThreadOptions options) : word_(word), options_(options) {
    edge_.table = &kTable;
    edge_.self = this;
    thread_ = std::thread([this] { run(); });
  }
  ~ThreadDriver() override {
    if (thread_.joinable()) stop("the driver was destroyed");
  }

  rig::edge::Facts facts() override {
    rig::edge::Facts f;
    f.arch = "";
    f.budget = std::size_t(1) << 30;
    f.queues = {rig::Queue{"COPY:0", {rig::Kind::Copy, rig::Kind::Fill}}};
    f.copy_engine = 0;
    f.completion = rig::edge::Completion::Host;  // the device's thread, a host thread, stores it
    f.waits = {.stores = true, .hosts = true};   // its thread reads any producer's word
    f.maps_host = true;
    f.host_addresses = false;  // not Device memory: the device's copies move its bytes
    f.alignment = kAlignment;
    f.word = word_;
    f.edge = &edge_;
    return f;
  }

  // ---- Memory: host memory, whose device address is its host address. The host addresses
  // only Mapped and Pinned regions, as it addresses a GPU's memory only through a window:
  // rig moves Device memory's bytes through the device's own copies.

  std::optional<rig::edge::Region> alloc(rig::Memory memory, std::size_t bytes) override {
    void* p = std::aligned_alloc(kAlignment, std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment));
    if (!p) return std::nullopt;
    auto host = reinterpret_cast<std::uintptr_t>(p);
    std::lock_guard l(mutex_);
    regions_[host] = {host, memory == rig::Memory::Device ? Kind::Device : Kind::HostAddressed};
    return rig::edge::Region{host};
  }
  void free(rig::edge::Region r) override {
    std::lock_guard l(mutex_);
    Block b = regions_.at(r.id);
    regions_.erase(r.id);
    if (b.kind != Kind::MappedHost) std::free(reinterpret_cast<void*>(b.host));  // a mapping's is its owner's
  }
  rig::edge::Location locate(rig::edge::Region r) override {
    std::lock_guard l(mutex_);
    Block b = regions_.at(r.id);
    if (b.kind == Kind::Device) return {b.host, std::nullopt, std::intptr_t(b.host)};
    return {b.host, b.host, std::intptr_t(b.host)};
  }
  // A mapping is a region of its own (ids 1, 2, …; allocations' ids are their addresses).
  rig::edge::Mapping map_host(std::uintptr_t host, std::size_t) override {
    std::lock_guard l(mutex_);
    regions_[next_mapping_] = {host, Kind::MappedHost};
    return rig::edge::Region{next_mapping_++};
  }

  // ---- Code: none.

  rig::Result<rig::edge::Code> image(std::span<const std::byte>) override {
    return std::unexpected(std::string("the thread device loads no code: it runs copies and fills"));
  }
  rig::edge::EntryAnswer entry(rig::edge::ImageId, std::string_view) override { return rig::edge::Absent{}; }
  void unload(rig::edge::ImageId) override {}

  // ---- The C functions.

  // room: NEVER, saying why, for a part of another queue, a kind it does not run or a copy
  // of too many boxes; LATER while the ring is full; FITS otherwise.
  static int room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t, char* why) {
    auto& d = self(edge);
    for (std::uint32_t i = 0; i < count; ++i) {
      const rig_part& p = parts[i];
      if (p.queue != 0) return rig_never(why, "part %u: queue %u, but the device has only COPY:0", i, p.queue);
      if (p.kind != RIG_KIND_COPY && p.kind != RIG_KIND_FILL)
        return rig_never(why, "part %u: kind %u, but the thread device runs only copies and fills", i, p.kind);
      if (p.kind == RIG_KIND_COPY && p.work.copy.count > d.options_.most_boxes)
        return rig_never(why, "part %u: %u boxes, over the limit of %u", i, p.work.copy.count, d.options_.most_boxes);
    }
    std::lock_guard l(d.mutex_);
    return d.ring_.size() >= d.options_.ring_values ? RIG_LATER : RIG_FITS;
  }

  // submit: calls the fills, queues the copies and waits for the thread, and commits (k = 1).
  static int submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                    std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times, const char** failure) {
    auto& d = self(edge);
    if (d.failed_.load()) return *failure = d.failure_, RIG_FAILED;
    Value value{v, {waits, waits + wait_count}, {}, {}, times};
    for (std::uint32_t i = 0; i < count; ++i) {
      const rig_part& p = parts[i];
      if (p.kind == RIG_KIND_FILL) {
        if (int code = p.work.fill.fn(nullptr, p.work.fill.arg, v)) {
          std::snprintf(d.failure_, sizeof d.failure_, "the fill of value %llu returned %d",
                        static_cast<unsigned long long>(v), code);
          d.failed_.store(true);
          return *failure = d.failure_, RIG_FAILED;
        }
        continue;
      }
      value.copies.push_back(p.work.copy);
      value.boxes.emplace_back(p.work.copy.boxes, p.work.copy.boxes + p.work.copy.count);
    }
    {
      std::lock_guard l(d.mutex_);
      d.ring_.push_back(std::move(value));
    }
    d.moved_.notify_all();
    return RIG_COMMITTED;
  }

  // commit: every value is committed when its submit returns.
  static int commit(void* edge, std::uint64_t, const char** failure) {
    auto& d = self(edge);
    if (d.failed_.load()) return *failure = d.failure_, RIG_FAILED;
    return RIG_OK;
  }

  // ---- Sleep and stop.

  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override {
    std::unique_lock l(mutex_);
    moved_.wait_for(l, most, [&] { return __atomic_load_n(word_, __ATOMIC_ACQUIRE) >= v || stopping_; });
  }

  // stop drops the values not yet run; the word then shows the last submitted value.
  void stop(std::string_view) override {
    {
      std::lock_guard l(mutex_);
      stopping_ = true;
    }
    moved_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard l(mutex_);
    std::uint64_t last = 0;
    for (auto& value : ring_) last = std::max(last, value.v);
    ring_.clear();
    if (last > __atomic_load_n(word_, __ATOMIC_ACQUIRE)) __atomic_store_n(word_, last, __ATOMIC_RELEASE);
    moved_.notify_all();
  }

 private:
  static const rig_driver kTable;
  static ThreadDriver& self(void* edge) { return *static_cast<Edge*>(edge)->self; }

  // The device: each value in order, once its waits' words show their values.
  void run() {
    std::unique_lock l(mutex_);
    while (true) {
      moved_.wait(l, [&] { return stopping_ || !ring_.empty(); });
      if (stopping_) return;
      Value& value = ring_.front();
      l.unlock();
      for (const rig_wait& w : value.waits)
        while (__atomic_load_n(w.word, __ATOMIC_ACQUIRE) < w.value && !stopping_.load())
          std::this_thread::sleep_for(std::chrono::microseconds(20));
      const std::uint64_t start = value.times ? rig_now_ns() : 0;
      for (std::size_t i = 0; i < value.copies.size(); ++i) copy(value.copies[i], value.boxes[i]);
      if (value.times) value.times[0] = start, value.times[1] = rig_now_ns();
      l.lock();
      if (stopping_) return;
      __atomic_store_n(word_, value.v, __ATOMIC_RELEASE);
      ring_.pop_front();
      moved_.notify_all();
    }
  }

  // A copy or a byte fill of boxes between host addresses.
  static void copy(const rig_copy& c, const std::vector<rig_box>& boxes) {
    for (const rig_box& b : boxes)
      for (std::uint64_t row = 0; row < b.rows; ++row) {
        auto* dst = reinterpret_cast<unsigned char*>(c.dst + b.dst_offset + row * b.dst_pitch);
        if (c.fill >= 0)
          std::memset(dst, c.fill, b.width);
        else
          std::memmove(dst, reinterpret_cast<const unsigned char*>(c.src + b.src_offset + row * b.src_pitch), b.width);
      }
  }

  volatile std::uint64_t* word_;
  ThreadOptions options_;
  Edge edge_{};
  std::mutex mutex_;
  std::condition_variable moved_;
  std::deque<Value> ring_;
  enum class Kind { Device, HostAddressed, MappedHost };
  struct Block {
    std::uintptr_t host;
    Kind kind;
  };
  std::map<std::uintptr_t, Block> regions_;  // by region id
  std::uintptr_t next_mapping_ = 1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  char failure_[128] = {};
  std::thread thread_;
};

const rig_driver ThreadDriver::kTable{room, submit, commit, nullptr, nullptr};

}  // namespace

rig::edge::Opener<> thread_opener(std::string name, ThreadOptions options) {
  return {name, [options](volatile std::uint64_t* word) -> rig::Result<std::unique_ptr<rig::edge::Driver>> {
            return std::make_unique<ThreadDriver>(word, options);
          }};
}

}  // namespace example
