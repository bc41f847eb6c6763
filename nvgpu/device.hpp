// device.hpp — the NVIDIA driver's device, shared by the files of nvgpu/ that implement it
// (internal: rig/nv.hpp is the driver's contract).
//
// The channels' GPFIFO rings, USERDs, push buffers and the sequence words are driver memory
// the CPU writes through RM mappings; the CPU writes a value's methods into the push buffers,
// a GP entry into each ring, GPPut into USERD, and the channel's token into the doorbell.
//
// The files follow the contract's concepts: rm.cpp the kernel driver's calls; device.cpp
// opening (the bring-up), the facts and closing; memory.cpp regions (RM memory mapped in the
// GPU's VA space through UVM external ranges); queue.cpp the hand-over (room, submit,
// commit); code.cpp images.
#pragma once

#include <rig/nv.hpp>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <array>
#include <map>
#include <span>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "launch.hpp"
#include "rm.hpp"

namespace rig::nv::driver {

constexpr std::uint64_t kPage = 4096;
inline std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }

// The classes of a GPU generation the driver makes objects of (OGKM class headers).
struct Generation {
  const char* arch;        // the facts' arch
  const char* name;        // the generation, for messages
  std::uint32_t channel;   // *_CHANNEL_GPFIFO_A
  std::uint32_t compute;   // *_COMPUTE_A
  std::uint32_t copy;      // *_DMA_COPY_A
  std::uint32_t usermode;  // *_USERMODE_A
};
// HOPPER_CHANNEL_GPFIFO_A c86f, HOPPER_COMPUTE_A cbc0, HOPPER_DMA_COPY_A c8b5, HOPPER_USERMODE_A c661.
inline constexpr Generation kHopper{"sm_90", "Hopper", 0xC86F, 0xCBC0, 0xC8B5, 0xC661};
// AMPERE_CHANNEL_GPFIFO_A c56f, AMPERE_COMPUTE_A c6c0, AMPERE_DMA_COPY_A c6b5, AMPERE_USERMODE_A c461.
inline constexpr Generation kAmpere{"sm_80", "Ampere", 0xC56F, 0xC6C0, 0xC6B5, 0xC461};

// The kernel driver branch whose layouts rm.hpp defines.
constexpr const char* kKnownBranch = "580";
constexpr const char* kVersionOverride = "RIG_NV_DRIVER_VERSION_OK";

// The usermode page's size and the doorbell's offset in it (facts, bring-up step 10).
constexpr std::uint64_t kUsermodeBytes = 0x10000, kDoorbell = 0x90;

// The channels' memory: one video-memory buffer with both GPFIFO rings and both USERDs.
constexpr std::uint32_t kGpEntries = 1024;  // GP entries of 8 bytes per ring
constexpr std::uint64_t kGpRingBytes = 0x10000;
constexpr std::uint64_t kUserdAt = 2 * kGpRingBytes, kUserdBytes = 0x1000;
constexpr std::uint64_t kChannelMemoryBytes = kUserdAt + 2 * kUserdBytes;

// Where the driver places its regions in the GPU's VA space: below 2^40, the limit of host
// semaphores and GP entries (push.hpp), and above 2^32, where x86-64 processes place no memory
// but a non-PIE program's image; map_host refuses host memory inside it.
constexpr std::uint64_t kHeapBase = 1ull << 32, kHeapEnd = 1ull << 40;

// The part of the GPU's VA space each channel is registered with UVM for (UVM_REGISTER_CHANNEL,
// facts step 19: UVM then knows the channel, so that it can take the channel's faults on the
// external ranges); taken from the driver's heap. How much RM places there on a real GPU is an
// open question: 64 MiB is a guess that leaves room.
constexpr std::uint64_t kChannelRangeBytes = 64ull << 20;

// The push buffers: a ring of system memory per channel, written by the CPU.
constexpr std::uint64_t kPushBytes = 1 << 20;
// The subchannels the engines are bound to (facts: bring-up step 21).
constexpr std::uint32_t kComputeSubchannel = 1, kCopySubchannel = 4;
// Bounds of the words room plans for (each above what its verbs write, push.cpp).
constexpr std::uint64_t kBindWords = 4;      // SET_OBJECT
constexpr std::uint64_t kAcquireWords = 8;   // a host semaphore acquire
constexpr std::uint64_t kReleaseWords = 8;   // a host semaphore release
constexpr std::uint64_t kBoxWords = 24;      // a copy or fill of one row or box
constexpr std::uint64_t kEndWords = kReleaseWords + 4;  // the timeline release and NON_STALL_INTERRUPT
constexpr std::uint32_t kFillWords = 4096;  // what a Fill may write that gives no ring_units
// A timed value's extra words on the compute channel: its start and end stamps and the release
// the copy channel waits on before its first part; on the copy channel, that acquire.
constexpr std::uint64_t kTimedWords = 3 * kReleaseWords;
// The control page's words: each channel's sequence word (64-bit), which it releases for the
// other channel to acquire.
constexpr std::uint64_t kComputeSequence = 0, kCopySequence = 8;

// The stamps: a slot per value in flight (a value takes a GP entry of the compute ring, so
// fewer than kGpEntries are in flight), each two 16-byte semaphore records (payload v, then
// the GPU's timer in ns) written at the value's start and end.
constexpr std::uint64_t kStampSlots = kGpEntries, kStampSlotBytes = 32;
constexpr std::uint64_t kStampsBytes = kStampSlots * kStampSlotBytes;
// How often settle reads the GPU's timer again, so that the clocks' drift stays small.
constexpr std::uint64_t kCorrelateEveryNs = 1'000'000'000;

// A region: RM memory, its GPU range and its CPU mapping, if any.
struct Block {
  std::uint32_t memory = 0;      // the RM handle
  std::uint64_t address = 0;     // the GPU address of its first byte
  std::uint64_t bytes = 0;       // of the range (whole pages)
  std::byte* host = nullptr;     // the CPU mapping, or null
  int map_fd = -1;               // the /dev/nvidia<minor> file the CPU mapping goes through
  std::uint64_t linear = 0;      // RM's linear address of the CPU mapping
  std::uintptr_t borrowed = 0;   // map_host: the caller's pages, which the CPU addresses as they are
  std::uintptr_t share = 0;      // map_host: the key of the host mapping it shares (host_maps_)
  bool ranged = false;           // a UVM external range is made
  bool from_heap = false;        // address came from the driver's heap (not map_host)
  bool system = false;           // system memory (Pinned), not video memory
};

// A channel: its RM objects, its GPFIFO ring and USERD, its push buffer.
struct Channel {
  std::uint32_t handle = 0, engine = 0;
  std::uint32_t token = 0;  // the work-submit token the doorbell takes
  std::uint64_t ring_address = 0, userd_offset = 0;
  std::uint32_t* gp_ring = nullptr;  // the CPU's view of the GPFIFO ring
  std::byte* userd = nullptr;        // the CPU's view of USERD
  Block push;                        // the push buffer
  std::uint64_t push_head = 0;       // bytes written, ever
  std::uint64_t push_tail = 0;       // bytes the GPU is done with (by the timeline word)
  std::uint64_t gp_put = 0;          // GP entries written, ever
  std::uint64_t gp_tail = 0;         // GP entries done
  std::uint64_t sequence = 0;        // the last value of its sequence word released
  bool bound = false;                // its engine class is bound (SET_OBJECT)
  std::uint64_t uvm_range = 0;       // the VA range UVM knows it by (UVM_REGISTER_CHANNEL), or 0
  std::uint32_t engine_class = 0, subchannel = 0;
  std::vector<std::uint32_t> words;  // the value being encoded
};

// A value in flight: where each channel's push buffer and GP ring end after it.
struct Flight {
  std::uint64_t value = 0;
  std::uint64_t push_end[2]{}, gp_end[2]{};
  std::uint64_t launch_end = 0;  // the launch ring's head after it
};

// Host memory the GPU sees at an address of the driver's (rig_words, the timeline word).
struct Window {
  std::uintptr_t host = 0;
  std::uint64_t bytes = 0, address = 0;
};

// The values in flight, oldest first, in storage of their own: each ends on the compute
// channel, whose ring room keeps below kGpEntries entries, so no more are ever in flight and
// the hand-over allocates nothing.
class Flights {
 public:
  bool empty() const { return head_ == tail_; }
  const Flight& front() const { return slots_[tail_ % kGpEntries]; }
  void pop_front() { ++tail_; }
  void push_back(const Flight& f) { slots_[head_++ % kGpEntries] = f; }
  void clear() { head_ = tail_ = 0; }

 private:
  std::array<Flight, kGpEntries> slots_{};
  std::uint64_t head_ = 0, tail_ = 0;
};

class Device;
struct Edge {
  const rig_driver* table;
  Device* self;
};

class Device final : public edge::Driver {
 public:
  Device(os::Seam& seam, int index, volatile std::uint64_t* word, Options options)
      : rm_(seam), index_(index), name_(fmt::format("NV:{}", index)), word_(word), options_(options) {
    edge_ = {&kTable, this};
  }
  ~Device() override { close(); }

  // The bring-up (rig/nv.hpp): Error naming the device, the step and the reason.
  Result<void> open();
  edge::Facts facts() override;

  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override;
  void free(edge::Region r) override;
  edge::Location locate(edge::Region r) override;
  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes) override;
  // A Dmabuf of the region's whole memory at offset 0, for any PCI function: the kernel
  // module's NV_ESC_EXPORT_TO_DMABUF_FD on /dev/nvidia<minor> (rm.hpp: one piece, the region's
  // handle from 0 over its whole pages, DEFAULT mapping, no CPU mapping). The dma-buf holds its
  // own reference to the memory (the module dups the handle), so it outlives the region.
  // Error naming the device, the region (its GPU address, bytes, kind and RM handle) and the
  // module's status where it refuses: Pinned system memory and host memory map_host mapped
  // (the module exports only video memory from a GPU with memory of its own), and anything
  // else it checks; Error naming the errno where the ioctl fails (under gVisor's nvproxy,
  // which passes it on only with the rdma capability).
  Result<edge::Dma> dma(edge::Region r, std::string_view pci_function) override;

  Result<edge::Code> image(std::span<const std::byte> binary) override;
  edge::EntryAnswer entry(edge::ImageId image, std::string_view name) override;
  void unload(edge::ImageId image) override;

  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override;
  void stop(std::string_view why) override;

  bool is_open() const { return open_; }
  Objects objects() const { return {rm_.root, vaspace_}; }
  ComputeRings compute_rings() const {
    return {compute_.push.host, kPushBytes, compute_.push_head, launch_ring_.host, kLaunchRingBytes, launch_head_};
  }

  static int room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why);
  static int submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                    std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times, const char** failure);
  static int commit(void*, std::uint64_t, const char**) { return RIG_OK; }
  static int settle(void* edge, std::uint64_t v, std::uint64_t* times, const char** failure);
  static const rig_driver kTable;

 private:
  static Device& self(void* edge) { return *static_cast<Edge*>(edge)->self; }

  // ---- device.cpp
  Result<void> check_version();
  Result<void> make_channels();
  // System memory of `bytes` placed for the GPU and the CPU, zeroed; Error naming `what`.
  Result<Block> placed_sysmem(std::uint64_t bytes, std::string_view what);
  // Stops the device (stop), then frees every RM object, UVM range and CPU mapping, and
  // closes the files; idempotent.
  void close();
  std::string failed(std::string_view step, const std::string& why) const;

  Result<void> map_windows();
  Result<void> make_events();
  // The fault a channel's error notifier shows, or "".
  std::string notified_fault() const;
  // The GPU's address of the host word at `host` through a window, or 0.
  std::uint64_t window_address(const volatile void* host) const;

  // ---- queue.cpp
  void reclaim();
  // Bytes channel c's push buffer takes for `bytes` more from its head: those skipped to its
  // start where they would straddle its end, and theirs.
  std::uint64_t push_cost(const Channel& c, std::uint64_t bytes) const;
  // The words of each channel (bounds) and the launch ring's bytes the parts take, or RIG_NEVER.
  int plan(const rig_part* parts, std::uint32_t count, std::uint32_t waits, std::uint64_t words[2],
           std::uint64_t& launch_bytes, char* why) const;
  void put(Channel& c, std::span<const std::uint32_t> w) { c.words.insert(c.words.end(), w.begin(), w.end()); }
  void sync(int from, int to);
  // Puts the value's words on channel c's ring; `tag` is what the entry holds (entry_tags_).
  void hand_over(Channel& c, std::uint64_t tag, const Kernel* kernel = nullptr);
  // ", value 12 part 0" for the value channel `ch` (0 compute, 1 copy) stopped in: the first
  // one the word does not show that has an entry on it (each channel runs its entries in
  // order, and a value's entries end before its word); its part where the entry holds one.
  std::string fault_place(int ch) const;
  // Timing: the GPU's timer against rig_now_ns (TIMER_GET_TIME between two host readings, the
  // tightest of a few); a GPU time in ns on the host's clock; value `value`'s stamps written
  // into `times` (Error if a stamp is not the value's).
  Result<void> correlate();
  std::uint64_t gpu_to_host(std::uint64_t gpu_ns) const;
  Result<void> convert(std::uint64_t value, std::uint64_t* times);
  // Writes the GP entry of `words` words at `address` and rings the channel's doorbell.
  void ring(Channel& c, std::uint64_t address, std::uint32_t words);

  // ---- launch.cpp
  // Room's checks of launch part i against its kernel's and the GPU's limits: RIG_FITS, or
  // RIG_NEVER naming the part, the limit and the value asked.
  int check_launch(const rig_part& p, std::uint32_t i, char* why) const;
  // Bytes of the launch ring a launch of `k` takes (bank 0 and its QMD), and what `bytes` more
  // take from `head` on: those skipped to its start where they would straddle its end, and theirs.
  std::uint64_t slot_bytes(const Kernel& k) const;
  std::uint64_t launch_cost(std::uint64_t head, std::uint64_t bytes) const;
  // Writes launch `l` (bank 0 and the QMD) into the launch ring and its methods on the compute
  // channel's words.
  void encode_launch(Channel& c, const rig_launch& l);
  // The lone launch value: `parts` is one launch alone, with no waits, of the geometry its
  // kernel was built for last, and submit may copy its prebuilt words.
  const Kernel* lone_launch(const rig_part* parts, std::uint32_t count, std::uint32_t waits) const;
  bool lone_fits(const Kernel& k) const;
  void submit_lone(const Kernel& k, const rig_launch& l, std::uint64_t v);
  void build_launch(const Kernel& k, const rig_launch& l);
  // Bank 0 and the QMD of `l` into the ring's next slot; returns the QMD's GPU address.
  std::uint64_t place_launch(const Kernel& k, const rig_launch& l);

  // ---- code.cpp
  const LaunchLimits& limits() const;  // the GPU generation's
  // The record compiled code reads (rig/nv_abi.hpp), read from RM once.
  edge::Capability abi_capability();
  // The launch ring, made on the first entry; false when RM has no memory for it.
  bool make_launch_ring();
  // Frees every image's memory and the launch ring (close).
  void drop_code();

  // ---- memory.cpp
  // A block of RM memory `memory` of `bytes` (whole pages): mapped in the GPU's VA space (at
  // `at`, or a heap address when 0) and, with `cpu`, for the CPU. Error says which step failed.
  Result<Block> place(std::uint32_t memory, std::uint64_t bytes, bool cpu, std::uint64_t at = 0);
  Result<std::uint32_t> make_memory(std::uint32_t klass, std::uint64_t bytes);
  Result<std::byte*> map_cpu(std::uint32_t parent, std::uint32_t memory, std::uint64_t bytes, int& fd,
                             std::uint64_t& linear);
  void unmap_cpu(std::uint32_t parent, std::uint32_t memory, std::byte* host, std::uint64_t bytes, int fd,
                 std::uint64_t linear);
  // Undoes place (and frees the RM memory).
  void drop(Block& b);
  std::uint64_t take_heap(std::uint64_t bytes);
  void give_heap(std::uint64_t address, std::uint64_t bytes);

  Rm rm_;
  int index_;
  std::string name_;
  volatile std::uint64_t* word_;
  Options options_;
  Edge edge_;
  bool open_ = false, stopped_ = false;
  std::uint64_t submitted_ = 0;  // the last value submit encoded

  const Generation* gen_ = nullptr;
  std::uint64_t vram_bytes_ = 0;
  std::string bus_;
  std::uint32_t minor_ = 0;
  std::uint8_t uuid_[16]{};
  std::uint32_t device_ = 0, subdevice_ = 0, usermode_ = 0, vaspace_ = 0, group_ = 0, share_ = 0;
  // The channels' error notifiers (compute, copy), their CPU mappings, and the OS events:
  // the compute engine's non-stall interrupt and RC errors, on one /dev/nvidiactl file.
  std::uint32_t notifier_[2]{};
  std::byte* notifier_page_[2]{};
  int notifier_fd_[2]{-1, -1};
  std::uint64_t notifier_linear_[2]{};
  int event_fd_ = -1;
  bool event_made_ = false;
  std::uint32_t rc_event_ = 0;
  std::mutex fault_lock_;
  std::string fault_;  // the first fault seen, "" while none
  std::byte* usermode_page_ = nullptr;
  int usermode_fd_ = -1;
  std::uint64_t usermode_linear_ = 0;
  Block channel_memory_;
  Channel compute_, copy_;  // channel 0 is COMPUTE's (queue 1), channel 1 COPY's (queue 0)
  Channel* channel_of(std::uint32_t queue) { return queue == 0 ? &copy_ : &compute_; }
  Block control_;           // the sequence words
  Block stamps_;            // the timed values' stamps (kStampSlots slots)
  // The value whose pair of times each stamp slot holds, until they are written (settle, or
  // the submit that takes the slot again).
  struct Timed {
    std::uint64_t value = 0;
    std::uint64_t* times = nullptr;
  };
  std::vector<Timed> timed_ = std::vector<Timed>(kStampSlots);
  std::int64_t gpu_to_host_ns_ = 0;   // host ns − GPU ns at the last correlation
  std::uint64_t correlated_at_ = 0;   // rig_now_ns then (0: never)
  std::uint64_t last_end_ = 0;        // the end of the value converted last, on the host's clock
  std::vector<Window> windows_;
  std::vector<Block> window_blocks_;
  Flights flights_;
  // What each GP entry of each ring (compute, copy) holds: its value in bits 47:0, in bits
  // 63:48 the part where it holds one and kSeveralParts where more; written by submit before
  // the doorbell, read by sleep when a channel faults.
  static constexpr std::uint64_t kSeveralParts = 0xffff;
  std::unique_ptr<std::atomic<std::uint64_t>[]> entry_tags_[2]{
      std::make_unique<std::atomic<std::uint64_t>[]>(kGpEntries),
      std::make_unique<std::atomic<std::uint64_t>[]>(kGpEntries)};
  // The kernel of each compute GP entry whose one part is a launch (else null), for the fault's
  // words; a fault names it only while its image is loaded (kernel_name).
  std::unique_ptr<std::atomic<const Kernel*>[]> entry_kernels_ = std::make_unique<std::atomic<const Kernel*>[]>(kGpEntries);
  // The name of `k` if an image loaded holds it, else "".
  std::string kernel_name(const Kernel* k) const;

  // Images (code.cpp) and the launch ring (launch.cpp), which the timeline word reclaims as it
  // does the push buffers.
  struct LoadedImage {
    Block memory;  // Mapped video memory: the kernels' code, the module's banks and globals
    std::map<std::string, std::unique_ptr<Kernel>, std::less<>> kernels;
  };
  std::map<edge::ImageId, LoadedImage> images_;  // under memory_lock_
  edge::ImageId next_image_ = 1;
  const LaunchLimits* limits_ = nullptr;
  std::uint32_t sm_count_ = 0;
  Block launch_ring_;
  std::uint64_t launch_head_ = 0, launch_tail_ = 0;  // bytes written and done, ever
  // The compute channel's memory windows and local memory store: set at all, and for which of
  // the stores image made (store_generation_). image may run on another thread than room and
  // submit, so it only publishes a store (under memory_lock_) and counts a generation; room
  // notes the generation it planned for, and submit sets that store, so the words room counted
  // are the words submit writes.
  bool windows_set_ = false;
  std::uint64_t windows_generation_ = 0;          // the store set on the channel (room, submit)
  mutable std::uint64_t planned_generation_ = 0;  // the store room planned for
  std::atomic<std::uint64_t> store_generation_{0};
  bool windows_due() const { return !windows_set_ || windows_generation_ != planned_generation_; }
  // The local memory backing store, for local_per_thread_ bytes a thread (0: none yet). An
  // image with a bigger frame gets a fresh one; those before it stay until close, since
  // launches in flight may still use them. Under memory_lock_.
  Block local_store_;
  std::uint32_t local_per_thread_ = 0;
  std::vector<Block> local_retired_;

  mutable std::mutex memory_lock_;  // the regions and the heap
  std::map<std::uintptr_t, Block> blocks_;
  // Host memory map_host mapped, by its first byte: the GPU's VA space takes a range once, so
  // a mapping inside one made already shares it.
  struct HostMap {
    Block block;
    std::uint32_t refs = 0;
  };
  std::map<std::uintptr_t, HostMap> host_maps_;
  std::uintptr_t next_region_ = 1;
  std::uint64_t heap_top_ = kHeapBase;
  std::multimap<std::uint64_t, std::uint64_t> heap_free_;  // bytes -> address
};

// The open device of rig's NVIDIA driver that `driver` is; Error if it is another driver's or
// closed (objects_of, compute_rings_of).
inline Result<Device*> open_device(edge::Driver& driver) {
  auto* device = dynamic_cast<Device*>(&driver);
  if (!device) return std::unexpected(std::string("not a device of rig's NVIDIA driver"));
  if (!device->is_open()) return std::unexpected(std::string("the device is closed"));
  return device;
}

}  // namespace rig::nv::driver
