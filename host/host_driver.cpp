// host_driver.cpp — the host device's driver ("CPU"): process memory, ELF kernels, and
// the C functions over its queue engine (host_queue.hpp).
#include "host_driver.hpp"

#include "elf/elf_loader.hpp"
#include "host_memory.hpp"
#include "host_queue.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include <sched.h>

namespace rig::host {

namespace {

// The host device's C state (Facts::edge): the driver table first, as rig_edge.h requires,
// then the queue its C functions drive.
struct HostEdge {
  const rig_driver* table;
  HostQueue* queue;
};

HostQueue& queue_of(void* edge) { return *static_cast<HostEdge*>(edge)->queue; }

int host_room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
  return queue_of(edge).room(parts, count, waits, why);
}

int host_submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times,
                const char** failure) {
  return queue_of(edge).submit(parts, count, waits, wait_count, v, times, failure);
}

int host_commit(void* edge, std::uint64_t v, const char** failure) {
  return queue_of(edge).commit(v, failure);
}

int host_measures(void* edge, std::uint64_t v, std::uint64_t* out, const char** failure) {
  return queue_of(edge).measures(v, out, failure);
}

// The dispatcher writes each value's times before the word shows it, so no settle. Where
// this process may count instructions and cycles, the device measures its launches;
// elsewhere its facts list no counters and measures is NULL.
constexpr rig_driver kHostTable{host_room, host_submit, host_commit, nullptr, nullptr};
constexpr rig_driver kCountingHostTable{host_room, host_submit, host_commit, nullptr, host_measures};

// The counters this process may count, probed once per driver: the hardware counters, or
// none where perf_event_open refuses them (perf_event_paranoid, a seccomp filter, a VM
// without a PMU).
std::span<const CounterEvent> allowed_counters() {
  return probe_counters(hardware_counters()) ? std::span<const CounterEvent>{} : hardware_counters();
}

// Helper threads for launches: one per core this process may run on, but the dispatcher's.
unsigned helper_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = int(std::thread::hardware_concurrency());
  return cores > 1 ? unsigned(cores - 1) : 0u;
}

// An image: the loaded object and the kernel records handed out as Entry::launch, which
// keep their addresses while the image is loaded.
struct LoadedImage {
  std::unique_ptr<ElfImage> elf;
  std::unordered_map<std::string, std::unique_ptr<HostKernel>> kernels;
};

// The value of the object's uint32 symbol `name`, if it defines one.
std::optional<std::uint32_t> read_u32(const ElfImage& elf, const std::string& name) {
  const void* p = elf.symbol(name);
  if (p == nullptr) return std::nullopt;
  const std::size_t size = elf.symbol_size(name);
  if (size != 0 && size < sizeof(std::uint32_t)) return std::nullopt;
  std::uint32_t value = 0;
  std::memcpy(&value, p, sizeof value);
  return value;
}

class HostDriver final : public edge::Driver {
 public:
  HostDriver(volatile std::uint64_t* word, os::Seam& seam, cpu::DispatcherIdle idle = {})
      : word_(word),
        counters_(allowed_counters()),
        memory_(seam),
        queue_(word, &edge_, helper_count(), counters_, idle) {
    edge_.table = counters_.empty() ? &kHostTable : &kCountingHostTable;
    edge_.queue = &queue_;
  }

  edge::Facts facts() override {
    edge::Facts f;
    f.arch = std::string(host_arch());
    f.budget = physical_memory_bytes();
    f.queues = {Queue{"COMPUTE:0", {Kind::Launch, Kind::Fill, Kind::Copy}}};
    f.copy_engine = 0;
    f.completion = edge::Completion::Host;
    f.waits = edge::Waits{.stores = true, .hosts = true};
    f.may_block = false;
    f.hang_ms = std::nullopt;
    f.maps_host = true;
    f.host_addresses = true;
    f.alignment = kRegionAlignment;
    f.cache_bytes = last_level_cache_bytes();
    for (const CounterEvent& c : counters_) f.counters.emplace_back(c.name, 1);
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

  Result<edge::Code> image(std::span<const std::byte> binary) override {
    auto loaded = ElfImage::load(binary);
    if (!loaded) return std::unexpected(std::move(loaded.error()));
    auto image = std::make_unique<LoadedImage>();
    image->elf = std::move(*loaded);
    const auto id = reinterpret_cast<edge::ImageId>(image.get());
    std::lock_guard lock(images_mutex_);
    images_.emplace(id, std::move(image));
    return edge::Code{edge::Loaded{id}};
  }

  edge::EntryAnswer entry(edge::ImageId id, std::string_view name) override {
    std::lock_guard lock(images_mutex_);
    const auto it = images_.find(id);
    if (it == images_.end()) return edge::Absent{};
    LoadedImage& image = *it->second;
    const auto functions = image.elf->functions();
    if (std::find(functions.begin(), functions.end(), name) == functions.end()) {
      return edge::Absent{};
    }
    const std::string key(name);
    auto& kernel = image.kernels[key];
    if (!kernel) {
      kernel = std::make_unique<HostKernel>();
      kernel->fn = reinterpret_cast<rig_host_kernel*>(image.elf->symbol(name));
      if (auto threads = read_u32(*image.elf, "rig_threads_" + key)) kernel->threads = *threads;
    }
    edge::Entry e;
    e.code = reinterpret_cast<std::uint64_t>(kernel->fn);
    e.launch = kernel.get();
    if (auto params = read_u32(*image.elf, "rig_params_" + key)) e.params = *params;
    if (kernel->threads) e.threads = std::size_t(*kernel->threads);
    return e;
  }

  void unload(edge::ImageId id) override {
    std::unique_ptr<LoadedImage> gone;  // unmapped outside the lock
    std::lock_guard lock(images_mutex_);
    const auto it = images_.find(id);
    if (it == images_.end()) return;
    gone = std::move(it->second);
    images_.erase(it);
  }

  std::uint64_t signaled() override { return queue_.word(); }

  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override { queue_.sleep(v, most); }

  void stop(std::string_view why) override { queue_.stop(why); }

 private:
  volatile std::uint64_t* word_;
  std::span<const CounterEvent> counters_;  // what its launches count; empty: none
  HostEdge edge_{};
  HostMemory memory_;
  std::mutex images_mutex_;
  std::unordered_map<edge::ImageId, std::unique_ptr<LoadedImage>> images_;
  // Last, so that it is destroyed first: its threads stop before the images they may run
  // are unmapped.
  HostQueue queue_;
};

}  // namespace
}  // namespace rig::host

namespace rig::cpu {

std::unique_ptr<edge::Driver> make_host_driver(volatile std::uint64_t* word) {
  return std::make_unique<host::HostDriver>(word, os::system());
}

std::unique_ptr<edge::Driver> make_host_driver_idling(volatile std::uint64_t* word, DispatcherIdle idle) {
  return std::make_unique<host::HostDriver>(word, os::system(), idle);
}

std::unique_ptr<edge::Driver> make_host_driver_with(os::Seam& seam, volatile std::uint64_t* word) {
  return std::make_unique<host::HostDriver>(word, seam);
}

}  // namespace rig::cpu
