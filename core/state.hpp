// The core's state behind the public handles: devices, allocations, images, functions,
// submissions and runs. Internal to rig.
#pragma once

#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "sync.hpp"

namespace rig::detail {

inline std::uint64_t pack(std::uint16_t index, std::uint64_t value) {
  return (std::uint64_t(index) << 48) | (value & Point::kValueMask);
}
inline std::uint16_t index_of(std::uint64_t bits) { return std::uint16_t(bits >> 48); }
inline std::uint64_t value_of(std::uint64_t bits) { return bits & Point::kValueMask; }

// Work to do once some points are reached: memory to give back to its driver, an image to
// unload, the objects a submission kept for its work.
struct Deferred {
  std::vector<std::uint64_t> points;  // packed
  std::function<void()> act;
};

// Memory a device's cache keeps for reuse: a region, where it lies, and the point of the
// device's own last use of it, which a reuse inherits as its stamps.
struct Cached {
  edge::Region region;
  edge::Location where;
  std::size_t bytes;  // the region's size
  Memory memory;
  std::uint64_t own_point;  // packed; 0 if none
};

struct DeviceState {
  std::uint16_t index = 0;
  std::string name;
  edge::Facts facts;
  std::unique_ptr<edge::Driver> driver;  // null for an io device
  std::unique_ptr<edge::Io> io;          // an io device's library
  const rig_driver* c = nullptr;
  void* edge = nullptr;
  bool own_word = false;      // the driver keeps the word; rig reads it through signaled
  bool runs_on_host = false;  // host and memory devices
  bool computes = false;
  int default_queue[5] = {-1, -1, -1, -1, -1};  // by Kind

  // The timeline.
  std::atomic<std::uint64_t> submitted{0};
  std::atomic<std::uint64_t> committed{0};
  Turn turn;                  // room, submit and commit: one at a time
  std::mutex calls;           // the driver's C++ functions: one at a time
  std::atomic<int> sleepers{0};

  // The foreign values its queues wait for: (producer index, value, own value of the work
  // that waits), so that the loss of a producer loses the queues that wait on it.
  std::mutex queue_waits_mutex;
  std::vector<std::array<std::uint64_t, 3>> queue_waits;
  void note_queue_waits(std::span<const rig_wait> waits, std::uint64_t own);

  // Loss.
  std::atomic<bool> is_lost{false};
  mutable std::mutex loss_mutex;
  std::string why;
  std::uint64_t reached_at_loss = 0;
  bool stopped = false;

  // Memory: bytes it holds (live, cached, waiting to return) against its budget, and the
  // cache of regions kept for reuse.
  std::atomic<std::size_t> budget{0};
  std::atomic<std::size_t> used{0};
  std::mutex cache_mutex;
  std::vector<Cached> cache;
  std::size_t cached_bytes = 0;
  std::mutex deferred_mutex;
  std::vector<Deferred> deferred;

  // The value the word shows now (through the driver for a word of its own).
  std::uint64_t word() const {
    return __atomic_load_n(&rig_words[index], __ATOMIC_ACQUIRE);
  }
  std::uint64_t read_word();
  // True iff v is reached; never blocks, never commits. Raises Lost where v is a lost
  // value.
  bool reached(std::uint64_t v);
  // Commits the work up to v if it is not yet committed.
  void commit_through(std::uint64_t v);
  // Returns once v is reached.
  void wait(std::uint64_t v);

  // Loses the device for good with reason `why`; the first reason wins. `holding_turn`:
  // the caller holds the turn (it is released here before stop).
  void lose(std::string why, bool holding_turn = false);
  [[noreturn]] void throw_lost() const;
  // Loses the devices whose queues wait for values this lost device never reached.
  void spread_loss();
  // True iff its driver may free memory and unload images now: while it is live, and after
  // its stop once the word shows its last submitted value (loss_mutex held).
  bool may_free() const { return !is_lost.load() || (stopped && stopped_word() >= submitted.load()); }
  // The value its word shows after stop: a word of the driver's own is read in memory,
  // since no call but free and unload follows stop; with no such word, rig's copy.
  std::uint64_t stopped_word() const {
    if (own_word && facts.word) return std::max(word(), __atomic_load_n(facts.word, __ATOMIC_ACQUIRE));
    return word();
  }
  void check_live() const {
    if (is_lost.load(std::memory_order_acquire)) throw_lost();
  }

  // Queues `act` until every point is reached, or runs it now if they are.
  void defer(std::vector<std::uint64_t> points, std::function<void()> act);
  // Runs the deferred acts whose points are reached.
  void drain();

  // Memory's way back: into the cache (or to the driver, for a lost device or memory the
  // cache must not keep), and out of it.
  void give_back(Cached c, bool cacheable);
  std::optional<Cached> take_cached(Memory memory, std::size_t bytes);
  // Returns cached regions to the driver until at most `keep` bytes are cached; regions
  // whose own last use is not yet reached return once it is.
  void free_cache(std::size_t keep = 0);
  // Returns a region to the driver now.
  void free_region(edge::Region r, std::size_t bytes);
  // Throws invalid_argument with "NAME: " before the message.
  template <class... A>
  [[noreturn]] void refuse(fmt::format_string<A...> f, A&&... a) const;
  ~DeviceState();
};

// Every device opened, live or lost.
std::vector<std::shared_ptr<DeviceState>> all_devices();

// The device at a packed point's index, or null if none was ever opened there.
DeviceState* device_at(std::uint16_t index);
std::shared_ptr<DeviceState> shared_device_at(std::uint16_t index);

// True iff the packed point is reached (commits nothing); Lost for a lost value.
bool point_reached(std::uint64_t bits);
// Drops the staging memory of a device that maps no host memory once it is lost (copy.cpp).
void forget_staging(const DeviceState& d);
// Returns the staging allocations in its memory that no copy holds: a device's own, or the
// host's for the host device (copy.cpp).
void release_idle_staging(const DeviceState& d);

// A device's mapping of memory it does not own, shared by every live borrow of that memory
// on that device. Released once the borrowing device has run the work submitted until then.
struct Mapping {
  std::shared_ptr<DeviceState> device;  // the borrowing device
  std::optional<edge::Region> region;   // the driver's mapping; none where the device
                                        // addresses the memory as it is
  std::uint64_t address = 0;            // the memory's first byte in the device's work
  ~Mapping();
};

// What makes a buffer a borrow: the device it is on, its mapping, and whether it ended.
struct Borrow {
  std::shared_ptr<DeviceState> device;
  std::shared_ptr<Mapping> mapping;
  std::optional<std::string> dead;  // why it ended (Buffer::unborrow)
  int holds = 0;                    // host claims through it
};

// An allocation of a device's memory, which every buffer over it shares, with its stamps
// and the host's claims on it.
struct Allocation {
  std::shared_ptr<DeviceState> device;
  std::optional<edge::Region> region;  // none for memory rig does not own (of_host)
  std::size_t region_bytes = 0;        // the region's size: a size class of the cache
  std::uint64_t address = 0;
  std::optional<std::uintptr_t> host;
  std::intptr_t handle = 0;
  std::size_t bytes = 0;
  Memory memory = Memory::Device;
  Access access = Access::ReadWrite;
  std::shared_ptr<const void> owner;  // keeps caller memory alive (of_host)
  bool host_paged = false;            // memory the host pages: host's, a memory device's
  bool no_cache = false;              // described for DMA: never back to the cache
  bool handle_only = false;           // named by its handle; no address
  std::optional<edge::IoRegion> io;   // an io device's region

  // Guards everything below.
  SpinLock lock;
  std::optional<std::string> dead;  // why it was consumed
  // Stamps: the last write, and per device the last use, as packed points.
  std::uint64_t last_write = 0;
  std::vector<std::uint64_t> uses;
  // Claims: the host's read claims, an exclusive holder, and memory outside the claims.
  int readers = 0;
  const void* exclusive = nullptr;
  bool outside = false;
  // Where a consume moved the memory while others read it: their releases go there.
  std::shared_ptr<Allocation> successor;
  // Each borrowing device's mapping of it.
  std::vector<std::weak_ptr<Mapping>> mappings;

  void use(std::uint64_t point, bool writes);
  ~Allocation();
};

struct ImageState {
  std::shared_ptr<DeviceState> device;
  edge::ImageId id = 0;
  std::shared_ptr<Allocation> code;  // the memory a placed image lies in
  std::mutex mutex;
  std::vector<std::weak_ptr<FunctionState>> functions;
  ~ImageState();
};

struct FunctionState {
  std::shared_ptr<ImageState> image;
  std::string name;
  edge::Entry entry;
};

struct HoldState {
  std::function<void()> release;
  ~HoldState() {
    if (release) release();
  }
};

// A launch of a submission: where its parameters lie in a run and how refs patch them.
struct LaunchPart {
  int part = 0;
  std::shared_ptr<FunctionState> function;
  std::uint32_t params = 0;
  std::uint32_t offset = 0;  // in the run's parameter storage
  std::vector<Submission::Ref> refs;
  std::vector<std::uint32_t> ref_offsets;
};

// A copy of a submission: its ends, fixed or a run's buffer.
struct CopyPart {
  int part = 0;
  Submission::Side src, dst;
  std::vector<rig_box> boxes;
  std::optional<std::byte> fill;
};

struct SubmissionState {
  std::shared_ptr<DeviceState> device;
  std::vector<rig_part> parts;  // handed to the driver, under the device's turn
  std::vector<std::vector<std::uint32_t>> after;
  std::vector<LaunchPart> launches;
  std::vector<CopyPart> copies;
  std::vector<Buffer> part_buffers;  // words and fill arguments
  int reads = 0, writes = 0;
  std::vector<std::pair<Buffer, Access>> fixed;
  std::vector<std::shared_ptr<const void>> keep;
  std::optional<Hold> hold;
  std::uint32_t param_bytes = 0;  // run storage it needs
  std::atomic<std::uint64_t> last_value{0};
  ~SubmissionState();
};

}  // namespace rig::detail

namespace rig {
struct Run::Storage {
  struct Geometry {
    std::uint32_t groups[3] = {1, 1, 1};
    std::uint32_t threads[3] = {1, 1, 1};
    std::uint32_t shared = 0;
  };
  std::vector<std::byte> params;   // the caller's parameters
  std::vector<std::byte> patched;  // with refs patched, handed to the driver
  std::vector<Geometry> geometry;
  std::vector<std::uint64_t> producers;  // packed points the submit waits for
  std::vector<rig_wait> waits;           // the in-queue waits
  void fit(std::size_t param_bytes, std::size_t launches) {
    if (params.size() < param_bytes) {
      params.resize(param_bytes);
      patched.resize(param_bytes);
    }
    if (geometry.size() < launches) geometry.resize(launches);
  }
};
}  // namespace rig

#include <fmt/format.h>

template <class... A>
void rig::detail::DeviceState::refuse(fmt::format_string<A...> f, A&&... a) const {
  throw std::invalid_argument(fmt::format("{}: {}", name, fmt::format(f, std::forward<A>(a)...)));
}
