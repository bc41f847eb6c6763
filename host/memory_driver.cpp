// memory_driver.cpp — a memory device's driver: host memory with a timeline of its own,
// whose copies and fills run inside submit (see host_driver.hpp).
#include "futex.hpp"
#include "host_driver.hpp"
#include "host_memory.hpp"

#include <atomic>
#include <cstdio>
#include <thread>

namespace rig::host {

namespace {

class MemoryDriver;

// The memory device's C state (Facts::edge): the driver table first, then the driver.
struct MemoryEdge {
  const rig_driver* table;
  MemoryDriver* driver;
};

class MemoryDriver final : public edge::Driver {
 public:
  MemoryDriver(volatile std::uint64_t* word, os::Seam& seam);

  edge::Facts facts() override {
    edge::Facts f;
    f.arch = "";
    f.budget = physical_memory_bytes();
    f.queues = {Queue{"COPY:0", {Kind::Copy, Kind::Fill}}};
    f.copy_engine = 0;
    f.completion = edge::Completion::Host;
    f.waits = edge::Waits{.stores = false, .hosts = false};
    f.may_block = false;
    f.hang_ms = std::nullopt;
    f.maps_host = true;
    f.host_addresses = true;
    f.alignment = kRegionAlignment;
    f.word = word_;
    f.edge = &edge_;
    return f;
  }

  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override {
    return memory_.alloc(memory, bytes);
  }
  void free(edge::Region region) override { memory_.free(region); }
  edge::Location locate(edge::Region region) override { return HostMemory::locate(region); }
  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes) override {
    return memory_.map_host(host, bytes);
  }
  Result<edge::Dma> dma(edge::Region region, std::string_view pci_function) override {
    return memory_.dma(region, pci_function);
  }

  Result<edge::Code> image(std::span<const std::byte>) override {
    return std::unexpected(std::string("a memory device loads no code"));
  }
  edge::EntryAnswer entry(edge::ImageId, std::string_view) override { return edge::Absent{}; }
  void unload(edge::ImageId) override {}

  std::uint64_t signaled() override { return __atomic_load_n(word_, __ATOMIC_ACQUIRE); }

  // The word rises at the end of each submit: sleep until one raises it past v.
  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override {
    sleepers_.sleep(word_, v, most, [this] { return stopped_.load(std::memory_order_seq_cst); });
  }

  void stop(std::string_view why) override {
    std::snprintf(stop_reason_, sizeof stop_reason_, "stopped: %.*s", int(why.size()), why.data());
    stopped_.store(true, std::memory_order_seq_cst);
    sleepers_.wake_all();
  }

  // rig_driver::room: RIG_NEVER for a part of another queue, a kind other than Copy and
  // Fill, a fill without a function or a copy without boxes, with the reason in why;
  // RIG_FITS otherwise (the queue holds nothing: submit runs the work).
  int room(const rig_part* parts, std::uint32_t count, char* why) const noexcept {
    for (std::uint32_t i = 0; i < count; ++i) {
      const rig_part& p = parts[i];
      if (p.queue != 0) return rig_never(why, "part %u: queue %u, but the device has only queue 0", i, p.queue);
      if (p.kind == RIG_KIND_FILL) {
        if (p.work.fill.fn == nullptr) return rig_never(why, "part %u: a fill without a function", i);
      } else if (p.kind == RIG_KIND_COPY) {
        if (p.work.copy.count != 0 && p.work.copy.boxes == nullptr)
          return rig_never(why, "part %u: a copy of %u boxes at no address", i, p.work.copy.count);
      } else if (p.kind == RIG_KIND_WORDS || p.kind == RIG_KIND_LAUNCH) {
        return rig_never(why, "part %u: %s, which the memory device does not run (it runs Copy and Fill)", i,
                         p.kind == RIG_KIND_WORDS ? "Words" : "a launch");
      } else {
        return rig_never(why, "part %u: kind %u, no kind of work", i, p.kind);
      }
    }
    return RIG_FITS;
  }

  // rig_driver::submit: waits for the waits (rig gives none, since the queue waits for no
  // producer), runs the parts in order, writes the times, stores v into the word.
  int submit(const rig_part* parts, std::uint32_t count, const rig_wait* waits,
             std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times,
             const char** failure) noexcept {
    if (const char* why = refusal()) {
      *failure = why;
      return RIG_FAILED;
    }
    for (std::uint32_t i = 0; i < wait_count; ++i) await(waits[i]);
    const std::uint64_t start = times != nullptr ? rig_now_ns() : 0;
    for (std::uint32_t i = 0; i < count; ++i) {
      const rig_part& p = parts[i];
      if (p.kind == RIG_KIND_COPY) {
        run_copy(p.work.copy);
      } else if (p.kind == RIG_KIND_FILL) {
        const int code = p.work.fill.fn(nullptr, p.work.fill.arg, v);
        if (code != 0) {
          std::snprintf(failure_, sizeof failure_, "fill returned %d at value %llu", code,
                        static_cast<unsigned long long>(v));
          failed_.store(true, std::memory_order_release);
          *failure = failure_;
          return RIG_FAILED;
        }
      }
    }
    if (times != nullptr) {
      times[0] = start;
      times[1] = rig_now_ns();
    }
    sleepers_.publish(word_, v);
    return RIG_COMMITTED;
  }

  // rig_driver::commit: every value is done when its submit returns.
  int commit(const char** failure) const noexcept {
    if (const char* why = refusal()) {
      *failure = why;
      return RIG_FAILED;
    }
    return RIG_OK;
  }

 private:
  // Why the device takes no more work, or null.
  const char* refusal() const noexcept {
    if (failed_.load(std::memory_order_acquire)) return failure_;
    if (stopped_.load(std::memory_order_acquire)) return stop_reason_;
    return nullptr;
  }

  // Returns once the producer's word shows the wait's value: spin, then short sleeps.
  static void await(const rig_wait& w) {
    Spin spin(20'000, 60'000);
    while (__atomic_load_n(w.word, __ATOMIC_ACQUIRE) < w.value) {
      if (!spin.spin()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  volatile std::uint64_t* word_;
  MemoryEdge edge_{};
  HostMemory memory_;
  WordSleepers sleepers_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> stopped_{false};
  char failure_[160] = {};
  char stop_reason_[256] = {};
};

MemoryDriver& driver_of(void* edge) { return *static_cast<MemoryEdge*>(edge)->driver; }

int memory_room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t, char* why) {
  return driver_of(edge).room(parts, count, why);
}

int memory_submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                  std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times,
                  const char** failure) {
  return driver_of(edge).submit(parts, count, waits, wait_count, v, times, failure);
}

int memory_commit(void* edge, std::uint64_t, const char** failure) {
  return driver_of(edge).commit(failure);
}

// submit writes the times itself and measures nothing: no settle, no measures.
constexpr rig_driver kMemoryTable{memory_room, memory_submit, memory_commit, nullptr, nullptr};

MemoryDriver::MemoryDriver(volatile std::uint64_t* word, os::Seam& seam) : word_(word), memory_(seam) {
  edge_.table = &kMemoryTable;
  edge_.driver = this;
}

}  // namespace
}  // namespace rig::host

namespace rig::cpu {

std::unique_ptr<edge::Driver> make_memory_driver(volatile std::uint64_t* word) {
  return std::make_unique<host::MemoryDriver>(word, os::system());
}

std::unique_ptr<edge::Driver> make_memory_driver_with(os::Seam& seam, volatile std::uint64_t* word) {
  return std::make_unique<host::MemoryDriver>(word, seam);
}

}  // namespace rig::cpu
