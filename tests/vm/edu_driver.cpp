// The edu rig driver over VFIO (edu_driver.hpp). In the contract's order: the shared device
// and its DMA engine, the driver's facts and memory, the C functions, then the queue's thread.
#include "edu_driver.hpp"

#include "../../host/futex.hpp"
#include "edu.hpp"

#include <vfio.hpp>

#include <fmt/format.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/mman.h>

namespace rig::edu {
namespace {

constexpr std::size_t page = 4096;
// Where in edu's buffer values for the timeline word wait between their transfers: past the
// bytes the copies use (edu.hpp: largest_transfer). The slot holds `slot_values` consecutive
// values, put there by one transfer: its 64 bytes less the last 8, since a transfer may not
// reach the buffer's last byte (edu.hpp).
constexpr std::uint64_t word_slot = buffer_address + largest_transfer;
constexpr std::uint64_t slot_values = (buffer_bytes - largest_transfer) / 8 - 1;
// The longest a transfer may take before the device counts as lost (edu waits about 100 ms of
// the VM's clock before each transfer).
constexpr int transfer_timeout_ms = 1000;

std::size_t round_up(std::size_t n) { return (n + page - 1) / page * page; }

// Page-aligned process memory mapped for the device at an IOVA.
struct Pages {
  void* host = nullptr;
  std::size_t bytes = 0;
  std::uint64_t iova = 0;
};

// The function, opened once and shared by every device the opener makes: its BAR, its one
// DMA engine and the pages the engine's own transfers use. Each transfer takes `engine`.
class Edu {
 public:
  // The function's Edu while a device holds it, else null.
  static std::shared_ptr<Edu> find(const std::string& address) {
    std::lock_guard g(opening());
    return open_ones()[address].lock();
  }
  static Result<std::shared_ptr<Edu>> open(const std::string& address) {
    std::lock_guard g(opening());
    if (auto existing = open_ones()[address].lock()) return existing;
    vfio::Options options;
    options.dma_bits = dma_bits;
    auto device = vfio::Device::open(os::system(), address, options);
    if (!device) return std::unexpected(device.error());
    auto edu = std::shared_ptr<Edu>(new Edu(std::move(*device)));
    if (auto ready = edu->start(); !ready) return std::unexpected(ready.error());
    open_ones()[address] = edu;
    return edu;
  }
  // Calls f with the function and BAR0, holding the engine: no transfer of the driver runs
  // meanwhile.
  void with_engine(const std::function<void(vfio::Device&, const vfio::Mmio&)>& f) {
    std::lock_guard g(engine_);
    f(*device_, *bar_);
    staged_fill_ = -1;  // f may have written edu's buffer
    slot_count_ = 0;
  }
  ~Edu() {
    if (staging_.host) {
      (void)device_->unmap_dma(staging_.iova);
      os::system().munmap(staging_.host, staging_.bytes);
    }
  }

  const std::string& address() const { return device_->address(); }

  // New pages mapped for the device, or nullopt where memory or IOVAs are short.
  std::optional<Pages> map(std::size_t bytes) {
    std::lock_guard g(engine_);
    Pages p;
    p.bytes = round_up(std::max<std::size_t>(bytes, 1));
    auto host = os::system().mmap(nullptr, p.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (!host) return std::nullopt;
    p.host = *host;
    std::optional<std::uint64_t> iova;
    try {
      if (auto got = device_->map_dma(p.host, p.bytes)) iova = *got;
    } catch (const std::invalid_argument&) {  // no IOVA range left below the mask
    }
    if (!iova) {
      os::system().munmap(p.host, p.bytes);
      return std::nullopt;
    }
    p.iova = *iova;
    return p;
  }
  void unmap(const Pages& p) {
    std::lock_guard g(engine_);
    (void)device_->unmap_dma(p.iova);
    os::system().munmap(p.host, p.bytes);
  }

  // Runs one transfer of edu's engine and waits for its interrupt. Returns null, or why it
  // failed. `fill` >= 0: `bytes` of that byte land at `dst`, from the staging page.
  const char* copy(std::uint64_t src, std::uint64_t dst, std::uint64_t bytes, int fill) {
    std::lock_guard g(engine_);
    if (fill >= 0) {
      if (staged_fill_ != fill) {
        std::memset(staging_.host, fill, largest_transfer);
        staged_fill_ = fill;
        if (const char* why = transfer(staging_.iova, buffer_address, largest_transfer, 0)) return why;
      }
    } else {
      staged_fill_ = -1;
      if (const char* why = transfer(src, buffer_address, bytes, 0)) return why;
    }
    return transfer(buffer_address, dst, bytes, dma_to_ram);
  }
  // Has the device write `v` into the 8 bytes at IOVA `word`: from the slot, where v and the
  // values after it go by one transfer when the slot does not hold v, so that a run of values
  // costs about one transfer each.
  const char* store(std::uint64_t word, std::uint64_t v) {
    std::lock_guard g(engine_);
    if (v < slot_first_ || v - slot_first_ >= slot_count_) {
      std::uint64_t values[slot_values];
      for (std::uint64_t i = 0; i < slot_values; ++i) values[i] = v + i;
      std::memcpy(static_cast<std::byte*>(staging_.host) + largest_transfer, values, sizeof values);
      slot_count_ = 0;
      if (const char* why = transfer(staging_.iova + largest_transfer, word_slot, sizeof values, 0)) return why;
      slot_first_ = v;
      slot_count_ = slot_values;
    }
    return transfer(word_slot + (v - slot_first_) * sizeof v, word, sizeof v, dma_to_ram);
  }

 private:
  explicit Edu(std::unique_ptr<vfio::Device> device) : device_(std::move(device)) {}
  static std::mutex& opening() {
    static std::mutex m;
    return m;
  }
  static std::map<std::string, std::weak_ptr<Edu>>& open_ones() {
    static std::map<std::string, std::weak_ptr<Edu>> m;
    return m;
  }

  Result<void> start() {
    if (auto on = device_->set_bus_master(true); !on) return on;
    auto mapped = device_->map(bar);
    if (!mapped) return std::unexpected(mapped.error());
    bar_.emplace(*mapped);
    if ((bar_->read32(identification) & identification_mask) != identification_low)
      return std::unexpected(fmt::format("{}: BAR0's identification register reads {:#x}, not edu's", address(),
                                         bar_->read32(identification)));
    if (auto on = device_->enable_interrupts(vfio::Irq::Msi); !on) return on;
    auto staging = map(page);
    if (!staging) return std::unexpected(fmt::format("{}: no memory for the engine's staging page", address()));
    staging_ = *staging;
    return {};
  }

  // One transfer, then the wait for its MSI and the acknowledgement. Holds engine_.
  const char* transfer(std::uint64_t src, std::uint64_t dst, std::uint64_t bytes, std::uint64_t direction) {
    bar_->write64(dma_source, src);
    bar_->write64(dma_destination, dst);
    bar_->write64(dma_count, bytes);
    bar_->write64(dma_command, dma_start | direction | dma_interrupt);
    if (device_->wait_interrupt(0, transfer_timeout_ms) == 0 || (bar_->read64(dma_command) & dma_start)) {
      std::snprintf(failure_, sizeof failure_, "%s: a DMA of %llu bytes from %#llx to %#llx did not finish in %d ms",
                    address().c_str(), static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(src),
                    static_cast<unsigned long long>(dst), transfer_timeout_ms);
      return failure_;
    }
    bar_->write32(interrupt_acknowledge, bar_->read32(interrupt_status));
    return nullptr;
  }

  std::unique_ptr<vfio::Device> device_;
  std::optional<vfio::Mmio> bar_;
  std::mutex engine_;
  Pages staging_;       // the fill bytes (largest_transfer of them), then values for the word
  int staged_fill_ = -1;  // the byte edu's buffer holds after a fill, -1 when it holds other bytes
  std::uint64_t slot_first_ = 0, slot_count_ = 0;  // the slot holds values slot_first_ on, slot_count_ of them
  char failure_[256] = {};
};

// One transfer of the queue: a copy or fill of at most largest_transfer bytes, or the store
// of a value into the word (bytes 0).
struct Transfer {
  std::uint64_t src = 0, dst = 0, bytes = 0;
  std::int32_t fill = -1;
  std::uint64_t value = 0;  // the value a word store writes, or the value of a copy's work
};

class Driver;
struct EduEdge {
  const rig_driver* table;
  Driver* driver;
};

class Driver final : public edge::Driver {
 public:
  Driver(std::string name, std::shared_ptr<Edu> edu, DriverOptions options, std::uint64_t base, Pages word)
      : name_(std::move(name)), edu_(std::move(edu)), options_(options), word_page_(word),
        word_(static_cast<volatile std::uint64_t*>(word.host)), ring_(options.ring_transfers) {
    edge_ = {&table, this};
    __atomic_store_n(word_, base, __ATOMIC_RELEASE);
    submitted_ = base;
    worker_ = std::thread([this] { run(); });
  }
  ~Driver() override {
    halt();
    std::lock_guard g(memory_);
    for (auto& [id, p] : regions_) edu_->unmap(p);
    edu_->unmap(word_page_);
  }

  edge::Facts facts() override {
    edge::Facts f;
    f.arch = "";
    f.budget = options_.budget;
    f.queues = {Queue{"COPY:0", {Kind::Copy}}};
    f.copy_engine = 0;
    f.completion = edge::Completion::Store;
    f.waits = {false, false};
    f.may_block = false;
    f.host_addresses = false;  // as a GPU's memory: the host reaches it through Pinned staging
    f.alignment = page;
    f.word = word_;
    f.bus = edu_->address();
    f.edge = &edge_;
    return f;
  }

  // Memory: host pages mapped into the IOMMU; the region's id is its IOVA. The host addresses
  // only Pinned regions, as it would a GPU's.
  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override {
    std::lock_guard g(memory_);
    if (live_ + round_up(std::max<std::size_t>(bytes, 1)) > options_.budget) return std::nullopt;
    auto p = edu_->map(bytes);
    if (!p) return std::nullopt;
    live_ += p->bytes;
    regions_[p->iova] = *p;
    if (memory == Memory::Pinned) pinned_.insert(p->iova);
    return edge::Region{p->iova};
  }
  void free(edge::Region region) override {
    std::lock_guard g(memory_);
    auto it = regions_.find(region.id);
    if (it == regions_.end()) return;
    edu_->unmap(it->second);
    live_ -= it->second.bytes;
    pinned_.erase(it->first);
    regions_.erase(it);
  }
  edge::Location locate(edge::Region region) override {
    std::lock_guard g(memory_);
    const Pages& p = regions_.at(region.id);
    edge::Location at{p.iova, std::nullopt, std::intptr_t(p.iova)};
    if (pinned_.count(p.iova)) at.host = reinterpret_cast<std::uintptr_t>(p.host);
    return at;
  }

  // Bus for edu itself: the region's IOVA range in the IOMMU domain of edu's VFIO container,
  // which is what edu's DMA engine addresses. Another function is in another IOMMU domain,
  // where these IOVAs mean nothing: Error.
  Result<edge::Dma> dma(edge::Region region, std::string_view pci_function) override {
    if (pci_function != edu_->address())
      return std::unexpected(fmt::format(
          "{}: {} is in another IOMMU domain than {} (its memory is mapped at IOVAs of {}'s VFIO container only)",
          name_, pci_function, edu_->address(), edu_->address()));
    std::lock_guard g(memory_);
    auto it = regions_.find(region.id);
    if (it == regions_.end()) return std::unexpected(fmt::format("{}: no region at IOVA {:#x}", name_, region.id));
    return edge::Bus{{{it->second.iova, it->second.bytes}}};
  }

  Result<edge::Code> image(std::span<const std::byte>) override {
    return std::unexpected(fmt::format("{}: edu runs no code: it is a copy engine", name_));
  }
  edge::EntryAnswer entry(edge::ImageId, std::string_view) override { return edge::Absent{}; }
  void unload(edge::ImageId) override {}

  std::uint64_t signaled() override { return __atomic_load_n(word_, __ATOMIC_ACQUIRE); }
  // The queue's thread wakes the sleepers after each value's word store interrupts it.
  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override {
    sleepers_.sleep(word_, v, most, [this] { return stopped_.load() || failure_.load() != nullptr; });
  }

  // Stops the queue's thread (the transfer in flight finishes), drops the work not run and
  // shows the last submitted value, which no work will write now.
  void stop(std::string_view why) override {
    std::snprintf(stop_reason_, sizeof stop_reason_, "%s stopped: %.*s", name_.c_str(), int(why.size()), why.data());
    halt();
    __atomic_store_n(word_, submitted_, __ATOMIC_RELEASE);
    sleepers_.wake_all();
  }

  // rig_driver::room: RIG_NEVER for a part of another queue or kind, or for a submission of
  // more transfers than the ring holds; RIG_LATER while the ring has no room for them.
  int room(rig_part* parts, std::uint32_t count, char* why) {
    std::uint64_t transfers = 1;  // the word store
    for (std::uint32_t i = 0; i < count; ++i) {
      const rig_part& p = parts[i];
      if (p.queue != 0) return rig_never(why, "part %u: queue %u, but edu has only queue 0 (COPY:0)", i, p.queue);
      if (p.kind != RIG_KIND_COPY)
        return rig_never(why, "part %u: %s, which edu does not run (it runs Copy)", i,
                         p.kind == RIG_KIND_WORDS ? "Words" : p.kind == RIG_KIND_FILL ? "a Fill" : p.kind == RIG_KIND_LAUNCH ? "a launch" : "no kind of work");
      const rig_copy& c = p.work.copy;
      if (c.count != 0 && c.boxes == nullptr) return rig_never(why, "part %u: a copy of %u boxes at no address", i, c.count);
      std::uint64_t n = 0;
      for (std::uint32_t b = 0; b < c.count; ++b)
        n += c.boxes[b].rows * ((c.boxes[b].width + largest_transfer - 1) / largest_transfer);
      transfers += n;
    }
    if (transfers > ring_.size())
      return rig_never(why, "%llu transfers of %s each at most, over the queue's %zu", static_cast<unsigned long long>(transfers),
                       edge::bytes_figure(largest_transfer).text, ring_.size());
    std::lock_guard g(queue_);
    return used_ + transfers <= ring_.size() ? RIG_FITS : RIG_LATER;
  }

  // rig_driver::submit: checks each copy lies in the device's memory, places its transfers
  // and the word store on the ring, and commits (the queue's thread takes them at once).
  int submit(rig_part* parts, std::uint32_t count, std::uint64_t v, const char** failure) {
    if (const char* why = refusal()) return *failure = why, RIG_FAILED;
    std::unique_lock g(queue_);
    std::uint64_t tail = head_ + used_;
    auto put = [&](Transfer t) { ring_[tail++ % ring_.size()] = t; };
    for (std::uint32_t i = 0; i < count; ++i) {
      const rig_copy& c = parts[i].work.copy;
      std::uint64_t src = c.src ? c.src : std::uint64_t(c.src_handle) + c.src_offset;
      std::uint64_t dst = c.dst ? c.dst : std::uint64_t(c.dst_handle) + c.dst_offset;
      for (std::uint32_t b = 0; b < c.count; ++b) {
        const rig_box& box = c.boxes[b];
        if (box.rows == 0 || box.width == 0) continue;
        std::uint64_t span_dst = (box.rows - 1) * box.dst_pitch + box.width;
        std::uint64_t span_src = (box.rows - 1) * box.src_pitch + box.width;
        if (!inside(dst + box.dst_offset, span_dst) || (c.fill < 0 && !inside(src + box.src_offset, span_src))) {
          std::snprintf(failure_text_, sizeof failure_text_, "%s: part %u of value %llu copies outside the device's memory",
                        name_.c_str(), i, static_cast<unsigned long long>(v));
          failure_.store(failure_text_);
          sleepers_.wake_all();
          return *failure = failure_text_, RIG_FAILED;
        }
        for (std::uint64_t r = 0; r < box.rows; ++r)
          for (std::uint64_t at = 0; at < box.width; at += largest_transfer)
            put({src + box.src_offset + r * box.src_pitch + at, dst + box.dst_offset + r * box.dst_pitch + at,
                 std::min<std::uint64_t>(largest_transfer, box.width - at), c.fill, v});
      }
    }
    put({0, word_page_.iova, 0, -1, v});
    used_ = tail - head_;
    submitted_ = v;
    g.unlock();
    ready_.notify_one();
    return RIG_COMMITTED;
  }
  int commit(const char** failure) {
    if (const char* why = refusal()) return *failure = why, RIG_FAILED;
    return RIG_OK;
  }

  static const rig_driver table;

 private:
  const char* refusal() const {
    if (const char* f = failure_.load()) return f;
    return stopped_.load() ? stop_reason_ : nullptr;
  }
  bool inside(std::uint64_t address, std::uint64_t bytes) {
    std::lock_guard g(memory_);
    auto it = regions_.upper_bound(address);
    if (it == regions_.begin()) return false;
    --it;
    return address >= it->second.iova && address - it->second.iova + bytes <= it->second.bytes;
  }

  // The queue: takes transfers off the ring in order and runs them on edu's engine.
  void run() {
    for (;;) {
      std::unique_lock g(queue_);
      ready_.wait(g, [&] { return halting_ || used_ > 0; });
      if (halting_) return;
      Transfer t = ring_[head_ % ring_.size()];
      g.unlock();
      const char* why = t.bytes ? edu_->copy(t.src, t.dst, t.bytes, t.fill) : edu_->store(t.dst, t.value);
      if (why) {
        std::snprintf(failure_text_, sizeof failure_text_, "%s lost: %s", name_.c_str(), why);
        failure_.store(failure_text_);
        sleepers_.wake_all();
        return;
      }
      g.lock();
      ++head_;
      --used_;
      g.unlock();
      if (!t.bytes) sleepers_.wake_all();  // the word store's interrupt woke this thread
    }
  }
  void halt() {
    {
      std::lock_guard g(queue_);
      if (halting_) return;
      halting_ = true;
      used_ = 0;
    }
    stopped_.store(true);
    ready_.notify_one();
    if (worker_.joinable()) worker_.join();
  }

  std::string name_;
  std::shared_ptr<Edu> edu_;
  DriverOptions options_;
  Pages word_page_;
  volatile std::uint64_t* word_;
  EduEdge edge_{};

  std::mutex memory_;
  std::map<std::uint64_t, Pages> regions_;  // by IOVA
  std::set<std::uint64_t> pinned_;          // the Pinned ones, which the host addresses
  std::size_t live_ = 0;

  std::mutex queue_;
  std::condition_variable ready_;
  std::vector<Transfer> ring_;
  std::uint64_t head_ = 0, used_ = 0;  // the next transfer to run, and how many wait
  std::uint64_t submitted_ = 0;
  bool halting_ = false;
  std::thread worker_;

  host::WordSleepers sleepers_;
  std::atomic<bool> stopped_{false};
  std::atomic<const char*> failure_{nullptr};
  char failure_text_[320] = {};
  char stop_reason_[320] = {};
};

Driver& driver_of(void* edge) { return *static_cast<EduEdge*>(edge)->driver; }
int edu_room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t, char* why) {
  return driver_of(edge).room(parts, count, why);
}
int edu_submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait*, std::uint32_t, std::uint64_t v,
               std::uint64_t*, const char** failure) {
  return driver_of(edge).submit(parts, count, v, failure);
}
int edu_commit(void* edge, std::uint64_t, const char** failure) { return driver_of(edge).commit(failure); }
// No times (it cannot time a value's work on the device) and no measures.
const rig_driver Driver::table{edu_room, edu_submit, edu_commit, nullptr, nullptr};

}  // namespace

Result<void> with_engine(const std::string& address, const std::function<void(vfio::Device&, const vfio::Mmio&)>& f) {
  auto edu = Edu::find(address);
  if (!edu) return std::unexpected(fmt::format("{}: no edu device is open there", address));
  edu->with_engine(f);
  return {};
}

edge::Opener<> opener(std::string name, std::string address, DriverOptions options) {
  auto make = [name, address, options](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
    auto edu = Edu::open(address);
    if (!edu) return std::unexpected(fmt::format("{}: {}", name, edu.error()));
    auto word_page = (*edu)->map(page);
    if (!word_page) return std::unexpected(fmt::format("{}: no memory for its timeline word", name));
    return std::make_unique<Driver>(name, *edu, options, __atomic_load_n(word, __ATOMIC_ACQUIRE), *word_page);
  };
  return edge::Opener<>{std::move(name), make};
}

}  // namespace rig::edu
