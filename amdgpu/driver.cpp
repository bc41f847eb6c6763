// rig's AMD driver over the KFD (rig/amd.hpp). Read in the contract's order: opening, facts,
// memory, code, the C functions (room, submit, commit, settle), sleeping and faults, stop.
//
// The queues' rings, their read/write pointers, the sequence words and the timestamp slots
// are driver memory mapped for host and GPU at one address; the host writes packets into the
// rings, stores the write pointer and rings the doorbell. The device's progress is the
// timeline word (rig_words[index]), which a RELEASE_MEM at the end of each value writes.
#include <rig/amd.hpp>

#include <rig/amd_abi.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include <sys/mman.h>

#include "code_object.hpp"
#include "kfd.hpp"
#include "pm4.hpp"
#include "sdma.hpp"
#include "topology.hpp"

namespace rig::amd {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint32_t kLdsMax = 64 << 10;    // group-shared bytes a group may use (gfx11/12)
constexpr std::uint32_t kLdsGranule = 512;     // COMPUTE_PGM_RSRC2.LDS_SIZE unit
constexpr std::uint32_t kFlights = 4096;       // values in flight at most (and timestamp slots)
constexpr std::uint32_t kMarks = 8192;         // part starts remembered for fault reports
constexpr std::uint64_t kGpuClockHz = 100'000'000;  // the GPU timestamp counter (assumed)

// KFD's per-allocation flags for each kind of memory.
constexpr std::uint32_t kVramFlags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC |
                                     KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE |
                                     KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
constexpr std::uint32_t kGttFlags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
                                    KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
constexpr std::uint32_t kUncachedGttFlags = kGttFlags | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT |
                                            KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;

std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }
std::uint64_t load(const volatile std::uint64_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }

// The control page: queue pointers and the sequence words the queues sync through.
constexpr std::uint64_t kComputeRptr = 0, kComputeWptr = 8, kCopyRptr = 16, kCopyWptr = 24;
constexpr std::uint64_t kComputeSequence = 64, kCopySequence = 128;
constexpr std::uint64_t kStamps = kPage;  // kFlights slots of (start, end) GPU clocks
constexpr std::uint64_t kControlBytes = kPage + kFlights * 16;

// Dwords of the fixed packets (header included).
constexpr std::uint64_t kReleaseDwords = 1 + pm4::kReleaseMemBody;
constexpr std::uint64_t kAcquireDwords = 1 + pm4::kAcquireMemBody;
constexpr std::uint64_t kFlushDwords = 1 + pm4::kEventWriteBody;
constexpr std::uint64_t kWait32Dwords = 1 + pm4::kWaitRegMemBody;
constexpr std::uint64_t kWait64Dwords = 1 + pm4::kWaitRegMem64Body;

// A kernel argument the driver fills, by its metadata kind.
enum class Hidden : std::uint8_t {
  Zero, BlockCountX, BlockCountY, BlockCountZ, GroupSizeX, GroupSizeY, GroupSizeZ, GridDims, DynamicLds
};
struct HiddenArg {
  std::uint32_t offset, size;
  Hidden kind;
};

// A launch's geometry: its groups, threads and group-shared bytes, as rig_launch lays them out.
constexpr std::size_t kGeometryBytes = 7 * 4;
static_assert(offsetof(rig_launch, threads) == offsetof(rig_launch, groups) + 12 &&
              offsetof(rig_launch, shared) == offsetof(rig_launch, groups) + 24);
const std::byte* geometry(const rig_launch& l) { return reinterpret_cast<const std::byte*>(&l.groups); }

// A launch's packets and kernel arguments as built for the last launch of its function in
// another geometry: a launch of the same geometry copies them, patching what differs from
// launch to launch (the user SGPRs: the kernel arguments' and dispatch packet's addresses,
// the dispatch id; the parameters; the dispatch packet's kernel-argument address).
struct BuiltLaunch {
  bool valid = false;
  std::array<std::byte, kGeometryBytes> geometry{};
  std::uint64_t scratch_address = 0, scratch_bytes = 0;  // the scratch they program
  std::vector<std::uint32_t> packets;
  std::uint32_t user_at = 0;  // where the user SGPRs' values start in packets
  // The user SGPRs that take the dispatch packet's and kernel arguments' addresses and the
  // dispatch id, counted from the first; -1 where the kernel takes none.
  std::int8_t packet_sgpr = -1, kernarg_sgpr = -1, id_sgpr = -1;
  // A value that is this launch alone, untimed ([0]) and timed ([1]): the device's head, a
  // timestamp's store if timed, the packets, another if timed, the device's tail; where
  // the packets start in it, and the fields each launch patches: the first user SGPR's
  // value, the word's value, the stamps' addresses.
  struct Lone {
    std::vector<std::uint32_t> words;
    std::uint32_t packets_at = 0, user_at = 0, word_at = 0;
    std::array<std::uint32_t, 2> stamps_at{};
  };
  std::array<Lone, 2> lone;
  std::vector<std::byte> kernargs;

  bool same(const rig_launch& l, std::uint64_t scratch_at, std::uint64_t scratch_size) const {
    return valid && scratch_address == scratch_at && scratch_bytes == scratch_size &&
           std::memcmp(geometry.data(), rig::amd::geometry(l), kGeometryBytes) == 0;
  }
};

// What submit reads to launch a kernel (rig_launch.launch).
struct LaunchTemplate {
  std::uint64_t code = 0;        // the kernel's first instruction
  std::uint64_t descriptor = 0;  // the kernel descriptor's address (HSA kernel_object)
  std::uint32_t rsrc1 = 0, rsrc2 = 0, rsrc3 = 0;
  std::uint16_t properties = 0;
  std::uint32_t user_sgprs = 0;
  std::uint32_t kernarg_bytes = 0;   // the kernel's kernarg segment
  std::uint32_t explicit_bytes = 0;  // the bytes of its explicit arguments
  std::uint32_t group_segment = 0, private_segment = 0;
  std::uint32_t max_threads = 1024;
  bool wave32 = true;
  std::vector<HiddenArg> hidden;
  const char* name = "";  // the device's copy, which outlives the image (fault reports name it)
  // Launches of it are submitted one at a time (rig's turn on the device), so the one that
  // builds this is the one that reads it.
  mutable BuiltLaunch built;
};

// A KFD buffer mapped for the host and the GPU at one address.
struct Block {
  std::uint64_t address = 0, bytes = 0, handle = 0;
  bool userptr = false;
};

struct Image {
  std::uint64_t base = 0;
  CodeObject object;
  std::map<std::string, std::unique_ptr<LaunchTemplate>, std::less<>> entries;
};

// A value in flight: where each ring and the kernarg ring end after it.
struct Flight {
  std::uint64_t value = 0, compute_end = 0, copy_end = 0, kernarg_end = 0;
};
// Where a part's packets start on its queue, for naming the work a fault stopped at.
// Submit writes marks while sleep, on another thread, may read them: the fields are atomics,
// read whole under the marks' sequence count (Device::mark), so that submit takes no lock.
struct Mark {
  std::atomic<std::uint64_t> position{0}, value{0};
  std::atomic<std::uint32_t> queue{0}, part{0};
  std::atomic<const char*> what{""};  // a static string or a name the device keeps
};

// A queue: its ring and pointers in driver memory, and its doorbell.
struct Ring {
  Block ring;
  std::uint32_t* words = nullptr;
  std::uint64_t dwords = 0;    // ring size
  std::uint64_t wptr = 0;      // dwords written, ever
  std::uint64_t tail = 0;      // dwords the GPU is done with (by the word)
  volatile std::uint64_t* wptr_memory = nullptr;
  volatile std::uint64_t* rptr_memory = nullptr;
  volatile std::uint64_t* doorbell = nullptr;
  void* doorbell_page = nullptr;  // its mapping, unmapped at stop
  std::uint32_t queue_id = 0;
  bool created = false;
  bool bytes = false;  // SDMA pointers count bytes, PM4 pointers dwords

  // Copies `w` in at the write pointer, wrapping at the ring's end (rings are powers of two;
  // PM4 packets may straddle the end).
  void put(std::span<const std::uint32_t> w) {
    const std::uint64_t at = wptr & (dwords - 1), first = std::min<std::uint64_t>(w.size(), dwords - at);
    std::memcpy(words + at, w.data(), first * 4);
    if (first < w.size()) std::memcpy(words, w.data() + first, (w.size() - first) * 4);
    wptr += w.size();
  }
  // Overwrites the dwords at ring position `position` (written already) with `v`.
  void set64(std::uint64_t position, std::uint64_t v) {
    words[position & (dwords - 1)] = std::uint32_t(v);
    words[(position + 1) & (dwords - 1)] = std::uint32_t(v >> 32);
  }
};

// Dwords, per queue, that a submission takes, and its kernel arguments' bytes.
struct Plan {
  std::uint64_t compute = 0, copy = 0, kernargs = 0;
  std::uint32_t compute_signals = 0, copy_signals = 0;
  bool never = false;
};

class Device;
struct Edge {
  const rig_driver* table;
  Device* self;
};

class Device final : public edge::Driver {
 public:
  Device(os::Seam& seam, const Gpu& gpu, int index, const Options& o, volatile std::uint64_t* word)
      : seam_(seam), kfd_(seam, gpu.gpu_id), gpu_(gpu), o_(o), name_(fmt::format("AMD:{}", index)), word_(word) {
    edge_ = {&kTable, this};
  }
  ~Device() override;

  Result<void> open();
  edge::Facts facts() override;

  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override;
  void free(edge::Region r) override;
  edge::Location locate(edge::Region r) override;
  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes) override;

  Result<edge::Code> image(std::span<const std::byte> binary) override;
  edge::EntryAnswer entry(edge::ImageId image, std::string_view name) override;
  void unload(edge::ImageId image) override;

  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override;
  void stop(std::string_view why) override;

  RingView ring_view(int queue) const {
    const Ring& r = queue == 0 ? compute_ : copy_;
    return {r.words, r.dwords, r.wptr, reinterpret_cast<const std::byte*>(kernargs_.address), kernargs_.bytes,
            kernarg_pos_};
  }

  static int room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why);
  static int submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                    std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times, const char** failure);
  static int commit(void*, std::uint64_t, const char**) { return RIG_OK; }  // submit commits
  static int settle(void* edge, std::uint64_t v, std::uint64_t* times, const char** failure);
  static const rig_driver kTable;

 private:
  static Device& self(void* edge) { return *static_cast<Edge*>(edge)->self; }

  // Memory the driver owns, mapped for host and GPU at one address.
  KfdResult<Block> make_block(std::uint64_t bytes, std::uint32_t flags);
  void drop_block(Block& b);
  KfdResult<Block> map_user(std::uint64_t host, std::uint64_t bytes);
  KfdResult<void> make_queue(Ring& r, std::uint32_t bytes, std::uint32_t type, std::uint64_t rptr,
                             std::uint64_t wptr);

  // Hand-over helpers.
  void reclaim();
  Plan plan(const rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) const;
  // Whether the device runs part i, p; where not, writes the reason into why (RIG_WHY bytes).
  bool runs(const rig_part& p, std::uint32_t i, char* why) const;
  void launch(pm4::Pm4& pc, const rig_launch& l, std::uint64_t v);
  // room and submit of values other than lone launches, kept out of line so that a lone
  // launch's calls stay small.
  [[gnu::noinline]] int room_for(const rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why);
  [[gnu::noinline]] int submit_parts(const rig_part* parts, std::uint32_t count, const rig_wait* waits,
                                     std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times,
                                     const char** failure);
  // A value that is one launch of a geometry built before, waiting for nothing: its
  // template, else null.
  const LaunchTemplate* lone_launch(const rig_part* parts, std::uint32_t count, std::uint32_t waits) const;
  void submit_lone(const LaunchTemplate& t, const rig_launch& l, std::uint64_t v, bool timed);
  // Whether a lone launch of t fits the queues as last reclaimed.
  bool lone_fits(const LaunchTemplate& t) const;
  // Whether a submission planned as p fits the queues as last reclaimed.
  bool fits(const Plan& p) const;
  // Where kernel-argument position `pos` lies in their area (a power of two, as the opener
  // checks).
  std::uint64_t kernarg_offset(std::uint64_t pos) const { return pos & (kernargs_.bytes - 1); }
  // The bytes kernel arguments of `bytes` take from position `at`: those skipped to the
  // area's start when they would straddle its end, and theirs.
  std::uint64_t kernarg_cost(std::uint64_t at, std::uint64_t bytes) const {
    const std::uint64_t left = kernargs_.bytes - kernarg_offset(at);
    return bytes <= left ? bytes : left + bytes;
  }
  // Where value v's (start, end) GPU clocks go: its slot of the control page's stamps.
  std::uint64_t stamps_of(std::uint64_t v) const { return control_.address + kStamps + (v % kFlights) * 16; }
  // Records whether value v is timed; a timed value's slot is zeroed for its work to write.
  void time_value(std::uint64_t v, bool timed);
  // Places a launch's kernel arguments: returns their address.
  std::uint64_t place_kernargs(const LaunchTemplate& t, const rig_launch& l);
  // Writes the per-launch user SGPRs of launches whose USER_DATA_0 value lies at ring
  // position `user`.
  void patch_user(const BuiltLaunch& b, std::uint64_t user, std::uint64_t kernargs, std::uint64_t v);
  // Builds t.built for launches of l's geometry on the scratch there is now.
  void build_launch(const LaunchTemplate& t, const rig_launch& l);
  // A launch's user SGPRs, with zero for the per-launch addresses and id, whose places go
  // into b.
  std::array<std::uint32_t, 16> user_sgprs(const LaunchTemplate& t, BuiltLaunch& b) const;
  bool uses_scratch(const LaunchTemplate& t) const;
  void copy(sdma::Sdma& ps, const rig_copy& c);
  void place_words(Ring& ring, std::span<const std::uint32_t> words, bool sdma);
  void mark(std::uint64_t position, std::uint32_t queue, std::uint64_t v, std::uint32_t part, const char* what);
  void ring_doorbell(Ring& r);
  // Encodes head_, tail_ and stamp_ (open).
  void build_value_packets();
  int failed(const char** failure, std::string why);
  std::uint64_t gpu_to_host(std::uint64_t ticks);
  void correlate();
  std::string describe_stop(int queue) const;

  os::Seam& seam_;
  Kfd kfd_;
  Gpu gpu_;
  Options o_;
  std::string name_;
  pm4::Gen gen_ = pm4::Gen::Gfx11;
  volatile std::uint64_t* word_;
  Edge edge_;

  // Memory rig allocates, by region id; images; guarded by mutex_ (rig calls the C++
  // functions one at a time, but stop and sleep may meet them).
  std::mutex mutex_;
  std::unordered_map<std::uintptr_t, Block> regions_;
  std::uintptr_t next_region_ = 1;
  std::map<edge::ImageId, std::unique_ptr<Image>> images_;
  edge::ImageId next_image_ = 1;
  std::vector<Block> scratch_retired_;
  Block scratch_;

  // Driver memory.
  Block words_map_, word_map_, control_, eop_, cwsr_, kernargs_;
  std::byte* control_host_ = nullptr;
  Ring compute_, copy_;
  std::uint32_t signal_event_ = 0, memory_event_ = 0, hw_event_ = 0;
  std::uint64_t mailbox_ = 0;
  bool events_made_[3] = {};

  // The hand-over's state: under rig's turn (room, submit, settle one at a time). What a
  // submission reads lies here and above, on a few cache lines; the large arrays come last.
  bool stopped_ = false;
  std::atomic<bool> faulted_{false};  // set by sleep, read by submit
  std::uint64_t submitted_ = 0;
  std::uint64_t kernarg_pos_ = 0, kernarg_tail_ = 0;
  std::uint32_t compute_sequence_ = 0, copy_sequence_ = 0;
  std::uint64_t flight_head_ = 0, flight_tail_ = 0;  // [tail, head) of flights_ are in flight
  std::atomic<std::uint64_t> marks_sequence_{0};  // twice the marks written: odd while one is
  // A value's packets that are the same for every value, encoded at open and copied: its head
  // (the barrier before its work), its tail (the word's store, its value patched, and the
  // interrupt that wakes sleepers) and a timestamp's store (its slot patched).
  std::array<std::uint32_t, kFlushDwords + kAcquireDwords> head_{};
  std::array<std::uint32_t, 2 * kReleaseDwords> tail_{};
  std::array<std::uint32_t, kReleaseDwords> stamp_{};
  std::array<std::uint32_t, 64> signal_at_{};  // per part: the sequence value it signals
  std::uint64_t sync_gpu_ = 0, sync_host_ = 0;  // a GPU clock reading and the host's time then
  std::set<std::string, std::less<>> names_;  // kernels' names, for marks (under mutex_)

  // Faults, from sleep: the fault's description, and failures handed to rig (they outlive
  // the calls).
  std::mutex fault_mutex_;
  std::string fault_;
  std::deque<std::string> messages_;

  std::array<Flight, kFlights> flights_{};
  std::array<std::uint8_t, kFlights> timed_{};
  // Where parts start, for fault reports: submit writes them while sleep, on any thread, may
  // read them to describe a fault, under marks_sequence_.
  std::array<Mark, kMarks> marks_{};
};

const rig_driver Device::kTable{room, submit, commit, settle, nullptr};

// ---- Opening.

KfdResult<Block> Device::make_block(std::uint64_t bytes, std::uint32_t flags) {
  bytes = round_up(std::max<std::uint64_t>(bytes, 1), kPage);
  auto va = seam_.mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (!va) return std::unexpected(KfdError{"reserving an address range: " + os::describe(va.error()), va.error()});
  auto address = reinterpret_cast<std::uint64_t>(*va);
  auto buffer = kfd_.alloc(address, bytes, flags);
  if (!buffer) {
    seam_.munmap(*va, bytes);
    return std::unexpected(buffer.error());
  }
  auto host = seam_.mmap(*va, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, kfd_.render_fd(),
                         off_t(buffer->mmap_offset));
  if (!host || *host != *va) {
    kfd_.free(buffer->handle);
    seam_.munmap(*va, bytes);
    int e = host ? -EFAULT : host.error();
    return std::unexpected(KfdError{"mapping a buffer for the host: " + os::describe(e), e});
  }
  if (auto m = kfd_.map(buffer->handle); !m) {
    seam_.munmap(*va, bytes);
    kfd_.free(buffer->handle);
    return std::unexpected(m.error());
  }
  return Block{address, bytes, buffer->handle, false};
}

// Host memory, mapped for the GPU through a userptr buffer the process's devices on this GPU
// share (rig_words is mapped by every device, and KFD takes a range once per VM).
KfdResult<Block> Device::map_user(std::uint64_t host, std::uint64_t bytes) {
  auto handle = kfd_.map_userptr(host, bytes);
  if (!handle) return std::unexpected(handle.error());
  return Block{host, bytes, *handle, true};
}

void Device::drop_block(Block& b) {
  if (!b.bytes) return;
  if (b.userptr) {
    kfd_.unmap_userptr(b.address, b.bytes);
  } else {
    kfd_.unmap(b.handle);
    seam_.munmap(reinterpret_cast<void*>(b.address), b.bytes);
    kfd_.free(b.handle);
  }
  b = {};
}

KfdResult<void> Device::make_queue(Ring& r, std::uint32_t bytes, std::uint32_t type, std::uint64_t rptr,
                                   std::uint64_t wptr) {
  auto ring = make_block(bytes, kUncachedGttFlags);
  if (!ring) return std::unexpected(ring.error());
  r.ring = *ring;
  r.words = reinterpret_cast<std::uint32_t*>(r.ring.address);
  r.dwords = bytes / 4;
  r.bytes = type == KFD_IOC_QUEUE_TYPE_SDMA;
  r.rptr_memory = reinterpret_cast<volatile std::uint64_t*>(control_host_ + rptr);
  r.wptr_memory = reinterpret_cast<volatile std::uint64_t*>(control_host_ + wptr);
  kfd_ioctl_create_queue_args q{};
  q.ring_base_address = r.ring.address;
  q.ring_size = bytes;
  q.read_pointer_address = control_.address + rptr;
  q.write_pointer_address = control_.address + wptr;
  q.queue_type = type;
  q.queue_percentage = KFD_MAX_QUEUE_PERCENTAGE;
  q.queue_priority = 7;
  if (type == KFD_IOC_QUEUE_TYPE_COMPUTE) {
    q.eop_buffer_address = eop_.address, q.eop_buffer_size = eop_.bytes;
    q.ctx_save_restore_address = cwsr_.address;
    q.ctx_save_restore_size = std::uint32_t(gpu_.get("cwsr_size"));
    q.ctl_stack_size = std::uint32_t(gpu_.get("ctl_stack_size"));
  }
  auto made = kfd_.create_queue(q);
  if (!made) return std::unexpected(made.error());
  r.queue_id = made->queue_id;
  r.created = true;
  // The doorbell page: KFD's offset names it; the queue's doorbell lies within.
  std::uint64_t page = made->doorbell_offset & ~(kDoorbellBytes - 1);
  auto bell = seam_.mmap(nullptr, kDoorbellBytes, PROT_READ | PROT_WRITE, MAP_SHARED, kfd_.kfd_fd(), off_t(page));
  if (!bell) return std::unexpected(KfdError{"mapping the doorbells: " + os::describe(bell.error()), bell.error()});
  r.doorbell_page = *bell;
  r.doorbell = reinterpret_cast<volatile std::uint64_t*>(static_cast<std::byte*>(*bell) +
                                                         (made->doorbell_offset - page));
  return {};
}

Result<void> Device::open() {
  auto fail = [&](const KfdError& e) { return std::unexpected(e.what); };
  std::uint64_t version = gpu_.get("gfx_target_version");
  if (version >= 110000 && version < 120000) gen_ = pm4::Gen::Gfx11;
  else if (version >= 120000 && version < 130000) gen_ = pm4::Gen::Gfx12;
  else
    return std::unexpected(fmt::format("{} is {}: the driver builds packets for gfx11 and gfx12 only (gfx9.4 is not built yet)",
                                       name_, gpu_.arch));
  if (auto r = kfd_.open(std::uint32_t(gpu_.get("drm_render_minor", 128))); !r) return fail(r.error());
  // The timeline words of every device, so that queues write this one and wait on others.
  auto words = reinterpret_cast<std::uint64_t>(&rig_words[0]) & ~(kPage - 1);
  auto words_end = round_up(reinterpret_cast<std::uint64_t>(&rig_words[RIG_WORDS]), kPage);
  auto mapped = map_user(words, words_end - words);
  if (!mapped) return fail(mapped.error());
  words_map_ = *mapped;
  auto word = reinterpret_cast<std::uint64_t>(word_);
  if (word < words || word + 8 > words_end) {  // a word of the caller's own (spec: opener)
    auto own = map_user(word & ~(kPage - 1), kPage);
    if (!own) return fail(own.error());
    word_map_ = *own;
  }
  auto control = make_block(kControlBytes, kUncachedGttFlags);
  if (!control) return fail(control.error());
  control_ = *control;
  control_host_ = reinterpret_cast<std::byte*>(control_.address);
  std::memset(control_host_, 0, control_.bytes);
  auto kernargs = make_block(o_.kernarg_bytes, kGttFlags);
  if (!kernargs) return fail(kernargs.error());
  kernargs_ = *kernargs;
  auto eop = make_block(kPage, kGttFlags);
  if (!eop) return fail(eop.error());
  eop_ = *eop;
  auto cwsr = make_block(std::max<std::uint64_t>(gpu_.get("cwsr_size"), kPage), kVramFlags);
  if (!cwsr) return fail(cwsr.error());
  cwsr_ = *cwsr;

  {  // The process's event page: made by its first device, mapped for each GPU.
    auto& process = kfd_.process();
    std::lock_guard g(process.mutex());
    auto& page = process.event_page();
    if (!page.bytes) {
      auto events = make_block(kEventPageBytes, kUncachedGttFlags);
      if (!events) return fail(events.error());
      page.address = events->address, page.bytes = events->bytes, page.handle = events->handle;
      page.mapped_on.push_back(gpu_.gpu_id);
    } else if (std::find(page.mapped_on.begin(), page.mapped_on.end(), gpu_.gpu_id) == page.mapped_on.end()) {
      if (auto m = kfd_.map(page.handle); !m) return fail(m.error());
      page.mapped_on.push_back(gpu_.gpu_id);
    }
    auto signal = kfd_.create_event(KFD_IOC_EVENT_SIGNAL, true, page.registered ? 0 : page.handle);
    if (!signal) return fail(signal.error());
    page.registered = true;
    signal_event_ = signal->event_id, events_made_[0] = true;
    mailbox_ = page.address + std::uint64_t(signal->event_slot_index) * 8;
  }
  auto memory = kfd_.create_event(KFD_IOC_EVENT_MEMORY, false);
  if (!memory) return fail(memory.error());
  memory_event_ = memory->event_id, events_made_[1] = true;
  auto hw = kfd_.create_event(KFD_IOC_EVENT_HW_EXCEPTION, false);
  if (!hw) return fail(hw.error());
  hw_event_ = hw->event_id, events_made_[2] = true;

  if (auto r = make_queue(compute_, o_.compute_ring_bytes, KFD_IOC_QUEUE_TYPE_COMPUTE, kComputeRptr, kComputeWptr); !r)
    return fail(r.error());
  if (auto r = make_queue(copy_, o_.copy_ring_bytes, KFD_IOC_QUEUE_TYPE_SDMA, kCopyRptr, kCopyWptr); !r)
    return fail(r.error());
  try {
    build_value_packets();
  } catch (const std::exception& e) {
    return std::unexpected(fmt::format("{}: {}", name_, e.what()));
  }
  // "the device's values start after the value the word holds"
  submitted_ = load(word_);
  correlate();
  return {};
}

Device::~Device() {
  if (!stopped_) stop("the driver was dropped");
  std::lock_guard g(mutex_);
  for (auto& [id, b] : regions_) drop_block(b);
  drop_block(scratch_);
  for (auto& b : scratch_retired_) drop_block(b);
}

edge::Facts Device::facts() {
  edge::Facts f;
  f.arch = gpu_.arch;
  f.budget = gpu_.vram_bytes;
  f.queues = {{"COMPUTE:0", {Kind::Words, Kind::Fill, Kind::Launch}}, {"COPY:0", {Kind::Words, Kind::Copy, Kind::Fill}}};
  f.copy_engine = 1;
  f.completion = edge::Completion::Store;
  f.waits = {true, true};
  f.may_block = false;
  f.hang_ms = o_.hang_ms;
  f.maps_host = true;
  f.host_addresses = true;
  f.alignment = kPage;
  if (gpu_.cache_bytes) f.cache_bytes = gpu_.cache_bytes;
  auto abi = std::make_shared<Abi>();
  abi->arch = gpu_.arch;
  abi->wave_size = 32;
  std::uint64_t simd_per_cu = std::max<std::uint64_t>(gpu_.get("simd_per_cu", 2), 1);
  abi->compute_units = std::uint32_t(gpu_.get("simd_count") / simd_per_cu);
  abi->lds_bytes = std::uint32_t(std::min<std::uint64_t>(gpu_.get("lds_size_in_kb", 64) * 1024, kLdsMax));
  abi->timeline_word = reinterpret_cast<std::uint64_t>(word_);
  f.capability = edge::declare(kAbi, std::shared_ptr<const Abi>(abi));
  f.word = word_;
  f.bus = gpu_.bus();
  f.edge = &edge_;
  return f;
}

// ---- Memory.

std::optional<edge::Region> Device::alloc(Memory memory, std::size_t bytes) {
  auto block = make_block(bytes, memory == Memory::Pinned ? kGttFlags : kVramFlags);
  if (!block) {
    if (block.error().error == -ENOMEM) return std::nullopt;  // rig reclaims and asks again
    throw edge::Fault(fmt::format("allocating {} bytes: {}", bytes, block.error().what));
  }
  std::lock_guard g(mutex_);
  auto id = next_region_++;
  regions_[id] = *block;
  return edge::Region{id};
}

void Device::free(edge::Region r) {
  std::lock_guard g(mutex_);
  auto it = regions_.find(r.id);
  if (it == regions_.end()) throw edge::Fault(fmt::format("free of unknown region {}", r.id));
  drop_block(it->second);
  regions_.erase(it);
}

edge::Location Device::locate(edge::Region r) {
  std::lock_guard g(mutex_);
  auto it = regions_.find(r.id);
  if (it == regions_.end()) throw edge::Fault(fmt::format("locate of unknown region {}", r.id));
  return {it->second.address, it->second.address, std::intptr_t(it->second.handle)};
}

edge::Mapping Device::map_host(std::uintptr_t host, std::size_t bytes) {
  if (host % kPage) return edge::Never{};
  auto block = map_user(host, round_up(bytes, kPage));
  if (!block) {
    if (block.error().error == -ENOMEM) return edge::NoRoom{};
    return edge::Never{};
  }
  std::lock_guard g(mutex_);
  auto id = next_region_++;
  regions_[id] = *block;
  return edge::Region{id};
}

// ---- Code.

Result<edge::Code> Device::image(std::span<const std::byte> binary) {
  auto object = read_code_object(binary);
  if (!object) return std::unexpected(object.error());
  if (object->arch != gpu_.arch)
    return std::unexpected(fmt::format("a code object for {}, not {}", object->arch.empty() ? object->target : object->arch,
                                       gpu_.arch));
  if (auto dry = place(*object, binary, 0); !dry) return std::unexpected(dry.error());
  auto copy = std::make_shared<std::vector<std::byte>>(binary.begin(), binary.end());
  auto shared = std::make_shared<CodeObject>(std::move(*object));
  std::size_t bytes = std::max<std::uint64_t>(shared->image_bytes, 1);
  return edge::Code{edge::Place{bytes, [this, copy, shared](edge::Region region) {
    std::uint64_t base;
    {
      std::lock_guard g(mutex_);
      base = regions_.at(region.id).address;
    }
    auto placed = place(*shared, *copy, base);
    auto image = std::make_unique<Image>();
    image->base = base;
    image->object = *shared;
    std::lock_guard g(mutex_);
    auto id = next_image_++;
    images_[id] = std::move(image);
    return std::pair<edge::ImageId, std::string>{id, placed ? std::move(*placed) : std::string()};
  }}};
}

Hidden hidden_kind(std::string_view k) {
  if (k == "hidden_block_count_x") return Hidden::BlockCountX;
  if (k == "hidden_block_count_y") return Hidden::BlockCountY;
  if (k == "hidden_block_count_z") return Hidden::BlockCountZ;
  if (k == "hidden_group_size_x") return Hidden::GroupSizeX;
  if (k == "hidden_group_size_y") return Hidden::GroupSizeY;
  if (k == "hidden_group_size_z") return Hidden::GroupSizeZ;
  if (k == "hidden_grid_dims") return Hidden::GridDims;
  if (k == "hidden_dynamic_lds_size") return Hidden::DynamicLds;
  return Hidden::Zero;  // offsets, remainders (whole groups only), queue/heap/printf pointers
}

edge::EntryAnswer Device::entry(edge::ImageId id, std::string_view name) {
  std::lock_guard g(mutex_);
  auto it = images_.find(id);
  if (it == images_.end()) throw edge::Fault(fmt::format("entry of unknown image {}", id));
  auto& image = *it->second;
  if (auto e = image.entries.find(name); e != image.entries.end())
    return edge::Entry{e->second->descriptor, e->second.get(), e->second->explicit_bytes, e->second->max_threads};
  const Kernel* k = image.object.find(name);
  if (!k) return edge::Absent{};
  auto t = std::make_unique<LaunchTemplate>();
  const auto& kd = k->descriptor;
  t->descriptor = image.base + k->descriptor_address;
  t->code = image.base + k->code_address();
  t->rsrc1 = kd.compute_pgm_rsrc1, t->rsrc2 = kd.compute_pgm_rsrc2, t->rsrc3 = kd.compute_pgm_rsrc3;
  t->properties = kd.kernel_code_properties;
  t->user_sgprs = kd.user_sgpr_count();
  t->kernarg_bytes = std::max(k->kernarg_segment_size, kd.kernarg_size);
  t->group_segment = k->group_segment_fixed_size;
  t->private_segment = k->private_segment_fixed_size;
  t->max_threads = k->max_flat_workgroup_size ? k->max_flat_workgroup_size : 1024;
  t->wave32 = kd.wave32();
  if (!t->wave32) throw edge::Fault(fmt::format("kernel {} is wave64, which the driver does not launch", name));
  if (t->user_sgprs > pm4::reg::kUserDataCount)
    throw edge::Fault(fmt::format("kernel {} wants {} user SGPRs, more than 16", name, t->user_sgprs));
  for (auto& a : k->args) {
    if (a.value_kind.starts_with("hidden_")) {
      // The launch writes the ones it knows; the rest stay as the zeroed arguments have them.
      if (Hidden kind = hidden_kind(a.value_kind); kind != Hidden::Zero) t->hidden.push_back({a.offset, a.size, kind});
    } else {
      t->explicit_bytes = std::max(t->explicit_bytes, a.offset + a.size);
    }
  }
  t->name = names_.emplace(name).first->c_str();
  // Scratch for all the waves the GPU may run at once, if the kernel has private memory.
  if (t->private_segment || (kd.kernel_code_properties & KernelDescriptor::kUsesDynamicStack)) {
    std::uint64_t per_wave = round_up(std::uint64_t(std::max(t->private_segment, 1024u)) * 32, 256);
    std::uint64_t waves = std::max<std::uint64_t>(gpu_.get("simd_count"), 1) *
                          std::max<std::uint64_t>(gpu_.get("max_waves_per_simd", 16), 1);
    std::uint64_t need = per_wave * waves;
    if (scratch_.bytes < need) {
      auto block = make_block(need, kVramFlags);
      if (!block) {
        if (block.error().error == -ENOMEM) return edge::NoMemory{need};
        throw edge::Fault(fmt::format("scratch for {}: {}", name, block.error().what));
      }
      // The old scratch may serve launches in flight: it goes with the device.
      if (scratch_.bytes) scratch_retired_.push_back(scratch_);
      scratch_ = *block;
    }
  }
  auto* raw = t.get();
  image.entries.emplace(std::string(name), std::move(t));
  return edge::Entry{raw->descriptor, raw, raw->explicit_bytes, raw->max_threads};
}

void Device::unload(edge::ImageId id) {
  std::lock_guard g(mutex_);
  images_.erase(id);
}

// ---- The C functions.

// A launch: PGM_LO/HI, RSRC1/2, RSRC3, TMPRING, SCRATCH_BASE, RESTART, USER_DATA (16 at
// most), RESOURCE_LIMITS, START/NUM_THREAD, DISPATCH_DIRECT, CS_PARTIAL_FLUSH.
constexpr std::uint64_t kLaunchDwords = 4 + 4 + 3 + 3 + 4 + 5 + 18 + 3 + 8 + 5 + 2;
// A value's own packets on the compute queue: the waits' share aside, the barrier, the
// sequence signal, the word, the interrupt and two stamps.
constexpr std::uint64_t kValueDwords = kFlushDwords + kAcquireDwords + 5 * kReleaseDwords + kWait32Dwords;

bool Device::runs(const rig_part& p, std::uint32_t i, char* why) const {
  if (p.queue > 1) return rig_never(why, "part %u: queue %u, but the device has 2 queues", i, p.queue), false;
  switch (p.kind) {
    case RIG_KIND_WORDS: return true;
    case RIG_KIND_FILL:
      if (p.work.fill.segment_bytes == 0) return true;
      rig_never(why, "part %u: a fill that writes segments of %s, which the AMD driver does not build yet", i,
                edge::bytes_figure(p.work.fill.segment_bytes).text);
      return false;
    case RIG_KIND_COPY:
      if (p.queue == 1) return true;
      return rig_never(why, "part %u: queue COMPUTE:0 does not run Copy (COPY:0 does)", i), false;
    case RIG_KIND_LAUNCH: {
      if (p.queue != 0) return rig_never(why, "part %u: queue COPY:0 does not run Launch (COMPUTE:0 does)", i), false;
      auto& l = p.work.launch;
      auto* t = static_cast<const LaunchTemplate*>(l.launch);
      if (!t) return rig_never(why, "part %u: a launch of no kernel", i), false;
      static constexpr char axes[] = "xyz";
      std::uint64_t threads = 1;
      for (int k = 0; k < 3; ++k) {
        if (!l.groups[k] || !l.threads[k]) {
          rig_never(why, "part %u: a launch of %ux%ux%u groups of %ux%ux%u threads has an empty dimension", i,
                    l.groups[0], l.groups[1], l.groups[2], l.threads[0], l.threads[1], l.threads[2]);
          return false;
        }
        if (l.threads[k] > 1024) {
          rig_never(why, "part %u: %u threads in %c, over the limit of 1024 per group", i, l.threads[k], axes[k]);
          return false;
        }
        threads *= l.threads[k];
      }
      if (threads > t->max_threads) {
        rig_never(why, "part %u: %llu threads per group, over %s's limit of %u", i, (unsigned long long)threads,
                  t->name, t->max_threads);
        return false;
      }
      if (std::uint64_t(t->group_segment) + l.shared > kLdsMax) {
        rig_never(why, "part %u: %s of shared memory (%s asked, %s of the kernel's own), over the limit of %s", i,
                  edge::bytes_figure(std::uint64_t(t->group_segment) + l.shared).text,
                  edge::bytes_figure(l.shared).text, edge::bytes_figure(t->group_segment).text,
                  edge::bytes_figure(kLdsMax).text);
        return false;
      }
      return true;
    }
  }
  return rig_never(why, "part %u: kind %u, no kind of work", i, p.kind), false;
}

Plan Device::plan(const rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) const {
  Plan p;
  p.compute = kValueDwords + waits * kWait64Dwords;
  std::uint64_t copy_at = copy_.wptr;  // SDMA padding depends on where packets land
  std::uint64_t largest = 0;  // the largest SDMA block: the most padding the ring's end costs
  auto copy_packet = [&](std::uint64_t dwords) {
    largest = std::max(largest, dwords);
    std::uint64_t left = copy_.dwords - copy_at % copy_.dwords;
    std::uint64_t cost = dwords <= left ? dwords : left + dwords;
    copy_at += cost, p.copy += cost;
  };
  bool copies = false;
  std::uint64_t kernarg_at = kernarg_pos_;
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto& part = parts[i];
    if (count > signal_at_.size()) {
      rig_never(why, "%u parts, over the limit of %zu in a submission", count, signal_at_.size());
      p.never = true;
      return p;
    }
    if (!runs(part, i, why)) {
      p.never = true;
      return p;
    }
    bool on_copy = part.queue == 1;
    copies |= on_copy;
    // A wait for each earlier part of the other queue it follows, and that part's signal.
    for (std::uint32_t a = 0; a < part.after_count; ++a) {
      if (part.after[a] >= i) continue;
      if (parts[part.after[a]].queue == part.queue) continue;
      if (on_copy) copy_packet(sdma::kPollRegmemSize), p.compute += kReleaseDwords, ++p.compute_signals;
      else p.compute += kWait32Dwords, copy_packet(sdma::kFenceSize), ++p.copy_signals;
    }
    switch (part.kind) {
      case RIG_KIND_WORDS:
        if (on_copy) copy_packet(part.work.words.count);
        else p.compute += part.work.words.count;
        break;
      case RIG_KIND_FILL: {
        std::uint64_t n = part.work.fill.ring_units ? part.work.fill.ring_units : kFillDefaultUnits;
        if (on_copy) copy_packet(n);
        else p.compute += n;
        break;
      }
      case RIG_KIND_COPY: {
        const auto& c = part.work.copy;
        if (!c.dst || (c.fill < 0 && !c.src)) {
          rig_never(why, "part %u: a copy whose %s has no address (memory named by handle only)", i,
                    c.dst ? "source" : "destination");
          p.never = true;
          return p;
        }
        for (std::uint32_t b = 0; b < c.count; ++b) {
          const auto& box = c.boxes[b];
          if (!box.rows || !box.width) continue;
          bool flat = box.src_pitch == box.width && box.dst_pitch == box.width;
          std::uint64_t rows = flat ? 1 : box.rows, bytes = flat ? box.rows * box.width : box.width;
          std::uint64_t chunks = (bytes + sdma::kMaxChunk - 1) / sdma::kMaxChunk;
          std::uint64_t packet = c.fill >= 0 ? sdma::kConstFillSize : sdma::kCopyLinearSize;
          if (rows * chunks > copy_.dwords) {
            rig_never(why, "part %u: box %u takes %llu SDMA packets, over the %llu dwords of the COPY:0 ring", i, b,
                      (unsigned long long)(rows * chunks), (unsigned long long)copy_.dwords);
            p.never = true;
            return p;
          }
          for (std::uint64_t r = 0; r < rows * chunks; ++r) copy_packet(packet);
        }
        break;
      }
      case RIG_KIND_LAUNCH: {
        p.compute += kLaunchDwords;
        auto* t = static_cast<const LaunchTemplate*>(part.work.launch.launch);
        std::uint64_t bytes = round_up(t->kernarg_bytes, 64) + 64;  // + a dispatch packet
        const std::uint64_t cost = kernarg_cost(kernarg_at, bytes);
        kernarg_at += cost, p.kernargs += cost;
        break;
      }
    }
  }
  if (copies) {
    p.compute += kReleaseDwords + kWait32Dwords;
    copy_packet(sdma::kPollRegmemSize);
    copy_packet(sdma::kFenceSize);
    ++p.compute_signals, ++p.copy_signals;
    p.copy += largest;  // blocks smaller than planned may move where the ring's end falls
  }
  return p;
}

void Device::reclaim() {
  if (flight_tail_ == flight_head_) return;
  const std::uint64_t reached = load(word_);
  // The flights' values increase: all of them are done (the common case after a wait), or
  // those before the first one not reached.
  std::uint64_t done = flight_tail_;
  if (flights_[(flight_head_ - 1) % kFlights].value <= reached) done = flight_head_;
  else
    while (flights_[done % kFlights].value <= reached) ++done;
  if (done == flight_tail_) return;
  const auto& f = flights_[(done - 1) % kFlights];
  compute_.tail = f.compute_end, copy_.tail = f.copy_end, kernarg_tail_ = f.kernarg_end;
  flight_tail_ = done;
}

const LaunchTemplate* Device::lone_launch(const rig_part* parts, std::uint32_t count, std::uint32_t waits) const {
  if (count != 1 || waits || parts[0].kind != RIG_KIND_LAUNCH || parts[0].queue != 0) return nullptr;
  const auto& l = parts[0].work.launch;
  const auto* t = static_cast<const LaunchTemplate*>(l.launch);
  // Built for this geometry: runs() took it when it was built, and what it checks of the
  // kernel does not change.
  return t && t->built.same(l, scratch_.address, scratch_.bytes) ? t : nullptr;
}

void Device::submit_lone(const LaunchTemplate& t, const rig_launch& l, std::uint64_t v, bool timed) {
  const BuiltLaunch& b = t.built;
  const BuiltLaunch::Lone& lone = b.lone[timed];
  const std::uint64_t start = compute_.wptr;
  mark(start + lone.packets_at, 0, v, 0, t.name);
  time_value(v, timed);
  const std::uint64_t args = place_kernargs(t, l);
  compute_.put(lone.words);
  patch_user(b, start + lone.user_at, args, v);
  compute_.set64(start + lone.word_at, v);
  if (timed) {
    compute_.set64(start + lone.stamps_at[0], stamps_of(v));
    compute_.set64(start + lone.stamps_at[1], stamps_of(v) + 8);
  }
  flights_[flight_head_++ % kFlights] = {v, compute_.wptr, copy_.wptr, kernarg_pos_};
  ring_doorbell(compute_);
}

bool Device::lone_fits(const LaunchTemplate& t) const {
  Plan p;  // what plan() would find, without its walk
  p.compute = kValueDwords + kLaunchDwords;
  p.kernargs = kernarg_cost(kernarg_pos_, t.built.kernargs.size());
  return fits(p);
}

bool Device::fits(const Plan& p) const {
  return compute_.wptr + p.compute - compute_.tail <= compute_.dwords &&
         copy_.wptr + p.copy - copy_.tail <= copy_.dwords &&
         kernarg_pos_ + p.kernargs - kernarg_tail_ <= kernargs_.bytes && flight_head_ - flight_tail_ < kFlights;
}

void Device::time_value(std::uint64_t v, bool timed) {
  timed_[v % kFlights] = timed;
  if (timed) std::memset(reinterpret_cast<void*>(stamps_of(v)), 0, 16);
}

int Device::room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
  auto& d = self(edge);
  if (d.stopped_) return rig_never(why, "the device is stopped");
  d.reclaim();
  if (const auto* t = d.lone_launch(parts, count, waits); t && d.lone_fits(*t)) return RIG_FITS;
  return d.room_for(parts, count, waits, why);
}

int Device::room_for(const rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
  Plan p = plan(parts, count, waits, why);
  if (p.never) return RIG_NEVER;
  if (p.compute > compute_.dwords)
    return rig_never(why, "%u part%s and %u waits take %s of the COMPUTE:0 ring, over its %s", count,
                     count == 1 ? "" : "s", waits,
                     edge::bytes_figure(p.compute * 4).text, edge::bytes_figure(compute_.dwords * 4).text);
  if (p.copy > copy_.dwords)
    return rig_never(why, "%u part%s and %u waits take %s of the COPY:0 ring, over its %s", count,
                     count == 1 ? "" : "s", waits,
                     edge::bytes_figure(p.copy * 4).text, edge::bytes_figure(copy_.dwords * 4).text);
  if (p.kernargs > kernargs_.bytes)
    return rig_never(why, "%u part%s take%s %s of kernel arguments, over the %s of their area", count,
                     count == 1 ? "" : "s", count == 1 ? "s" : "",
                     edge::bytes_figure(p.kernargs).text, edge::bytes_figure(kernargs_.bytes).text);
  bool idle = flight_tail_ == flight_head_;
  if (compute_sequence_ + p.compute_signals >= o_.sequence_limit ||
      copy_sequence_ + p.copy_signals >= o_.sequence_limit) {
    if (!idle) return RIG_LATER;
    // Both queues have passed every sequence wait: the words restart at 0.
    std::memset(control_host_ + kComputeSequence, 0, 4);
    std::memset(control_host_ + kCopySequence, 0, 4);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    compute_sequence_ = copy_sequence_ = 0;
  }
  if (fits(p)) return RIG_FITS;
  if (!idle) return RIG_LATER;
  return rig_never(why, "%u part%s and %u waits take %s of the COMPUTE:0 ring, %s of the COPY:0 ring and %s of "
                   "kernel arguments, which the empty rings of %s, %s and %s cannot hold where they now start",
                   count, count == 1 ? "" : "s", waits, edge::bytes_figure(p.compute * 4).text,
                   edge::bytes_figure(p.copy * 4).text, edge::bytes_figure(p.kernargs).text,
                   edge::bytes_figure(compute_.dwords * 4).text, edge::bytes_figure(copy_.dwords * 4).text,
                   edge::bytes_figure(kernargs_.bytes).text);
}

void Device::mark(std::uint64_t position, std::uint32_t queue, std::uint64_t v, std::uint32_t part, const char* what) {
  // A sequence lock with one writer (rig's turn): odd while the mark is written.
  const std::uint64_t sequence = marks_sequence_.load(std::memory_order_relaxed);
  marks_sequence_.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  auto& m = marks_[sequence / 2 % kMarks];
  constexpr auto relaxed = std::memory_order_relaxed;
  m.position.store(position, relaxed), m.queue.store(queue, relaxed), m.value.store(v, relaxed);
  m.part.store(part, relaxed), m.what.store(what, relaxed);
  marks_sequence_.store(sequence + 2, std::memory_order_release);
}

void Device::place_words(Ring& ring, std::span<const std::uint32_t> words, bool sdma) {
  if (sdma) {  // SDMA packets never straddle the ring's end: pad with NOPs (opcode 0) first
    std::uint64_t left = ring.dwords - ring.wptr % ring.dwords;
    if (words.size() > left)
      for (; left; --left) ring.words[ring.wptr++ & (ring.dwords - 1)] = sdma::kOpNop;
  }
  for (auto w : words) ring.words[ring.wptr++ & (ring.dwords - 1)] = w;  // rings are powers of two
}

void Device::launch(pm4::Pm4& pc, const rig_launch& l, std::uint64_t v) {
  const auto& t = *static_cast<const LaunchTemplate*>(l.launch);
  BuiltLaunch& b = t.built;
  if (!b.same(l, scratch_.address, scratch_.bytes)) build_launch(t, l);
  const std::uint64_t args = place_kernargs(t, l);
  const std::uint64_t start = pc.position();
  pc.packets(b.packets);  // into the compute ring, whose positions pc's are
  patch_user(b, start + b.user_at, args, v);
}

std::uint64_t Device::place_kernargs(const LaunchTemplate& t, const rig_launch& l) {
  // The kernel arguments: the launch's parameters, then the hidden arguments, then an HSA
  // dispatch packet for kernels that read one (dispatch_ptr).
  const BuiltLaunch& b = t.built;
  const std::uint64_t bytes = b.kernargs.size();
  kernarg_pos_ += kernarg_cost(kernarg_pos_, bytes) - bytes;  // to the start if they would straddle the end
  const std::uint64_t at = kernargs_.address + kernarg_offset(kernarg_pos_);
  kernarg_pos_ += bytes;
  auto* args = reinterpret_cast<std::byte*>(at);
  std::memcpy(args, b.kernargs.data(), bytes);
  // rig gives at most the explicit arguments' bytes (the entry's parameter bytes).
  std::memcpy(args, l.params, std::min<std::uint64_t>(l.param_bytes, t.explicit_bytes));
  std::memcpy(args + round_up(t.kernarg_bytes, 64) + 40, &at, 8);  // the dispatch packet's kernarg_address
  return at;
}

void Device::patch_user(const BuiltLaunch& b, std::uint64_t user, std::uint64_t kernargs, std::uint64_t v) {
  const std::uint64_t packet = kernargs + b.kernargs.size() - 64;  // the dispatch packet ends them
  if (b.packet_sgpr >= 0) compute_.set64(user + b.packet_sgpr, packet);
  if (b.kernarg_sgpr >= 0) compute_.set64(user + b.kernarg_sgpr, kernargs);
  if (b.id_sgpr >= 0) compute_.set64(user + b.id_sgpr, v);
}

std::array<std::uint32_t, 16> Device::user_sgprs(const LaunchTemplate& t, BuiltLaunch& b) const {
  // In the order the descriptor's properties list them.
  std::array<std::uint32_t, 16> user{};
  std::uint32_t n = 0;
  auto put64 = [&](std::uint64_t x, std::int8_t* place = nullptr) {
    if (n + 2 <= user.size()) user[n] = std::uint32_t(x), user[n + 1] = std::uint32_t(x >> 32);
    if (place && n + 2 <= t.user_sgprs) *place = std::int8_t(n);  // only those the launch sets
    n += 2;
  };
  b.packet_sgpr = b.kernarg_sgpr = b.id_sgpr = -1;
  using KD = KernelDescriptor;
  const bool scratch = uses_scratch(t);
  if (t.properties & KD::kPrivateSegmentBuffer) {  // a buffer resource over the scratch
    std::uint64_t base = scratch ? scratch_.address : 0;
    std::array<std::uint32_t, 4> rsrc{std::uint32_t(base), std::uint32_t(base >> 32) | 1u << 31, 0xffffffffu, 0x20c14000u};
    for (auto w : rsrc)
      if (n < user.size()) user[n++] = w;
  }
  if (t.properties & KD::kDispatchPtr) put64(0, &b.packet_sgpr);
  if (t.properties & KD::kQueuePtr) put64(0);  // no amd_queue_t: kernels that read it are not supported
  if (t.properties & KD::kKernargSegmentPtr) put64(0, &b.kernarg_sgpr);
  if (t.properties & KD::kDispatchId) put64(0, &b.id_sgpr);
  if (t.properties & KD::kFlatScratchInit) put64(scratch ? scratch_.address : 0);
  if (t.properties & KD::kPrivateSegmentSize && n < user.size()) user[n++] = t.private_segment;
  return user;
}

bool Device::uses_scratch(const LaunchTemplate& t) const {
  return scratch_.bytes && (t.private_segment || (t.properties & KernelDescriptor::kUsesDynamicStack));
}

void Device::build_launch(const LaunchTemplate& t, const rig_launch& l) {
  BuiltLaunch& b = t.built;
  b.valid = false;
  std::uint32_t dims = l.groups[2] > 1 || l.threads[2] > 1 ? 3 : l.groups[1] > 1 || l.threads[1] > 1 ? 2 : 1;
  // The kernel arguments but for the parameters and the dispatch packet's kernarg address.
  b.kernargs.assign(round_up(t.kernarg_bytes, 64) + 64, std::byte{0});
  std::byte* args = b.kernargs.data();
  for (auto& h : t.hidden) {
    std::uint64_t value = 0;
    switch (h.kind) {
      case Hidden::BlockCountX: value = l.groups[0]; break;
      case Hidden::BlockCountY: value = l.groups[1]; break;
      case Hidden::BlockCountZ: value = l.groups[2]; break;
      case Hidden::GroupSizeX: value = l.threads[0]; break;
      case Hidden::GroupSizeY: value = l.threads[1]; break;
      case Hidden::GroupSizeZ: value = l.threads[2]; break;
      case Hidden::GridDims: value = dims; break;
      case Hidden::DynamicLds: value = l.shared; break;
      case Hidden::Zero: break;
    }
    if (h.offset + std::min<std::uint32_t>(h.size, 8) > t.kernarg_bytes) continue;
    std::memcpy(args + h.offset, &value, std::min<std::uint32_t>(h.size, 8));
  }
  {  // hsa_kernel_dispatch_packet_t: setup, group and grid sizes, segment sizes, object
    std::byte* p = args + round_up(t.kernarg_bytes, 64);
    std::uint16_t setup = std::uint16_t(dims);
    std::uint16_t group[3] = {std::uint16_t(l.threads[0]), std::uint16_t(l.threads[1]), std::uint16_t(l.threads[2])};
    std::uint32_t grid[3] = {l.groups[0] * l.threads[0], l.groups[1] * l.threads[1], l.groups[2] * l.threads[2]};
    std::uint32_t segments[2] = {t.private_segment, t.group_segment + l.shared};
    std::memcpy(p + 2, &setup, 2);
    std::memcpy(p + 4, group, 6);
    std::memcpy(p + 12, grid, 12);
    std::memcpy(p + 24, segments, 8);
    std::memcpy(p + 32, &t.descriptor, 8);
  }
  // The packets, their user SGPRs to be patched per launch.
  const bool scratch = uses_scratch(t);
  std::uint32_t lds = (t.group_segment + l.shared + kLdsGranule - 1) / kLdsGranule;
  std::uint32_t rsrc2 = (t.rsrc2 & ~(0x1ffu << 15)) | (lds & 0x1ff) << 15;
  std::uint32_t tmpring = 0;
  if (scratch) {
    std::uint64_t per_wave = round_up(std::uint64_t(std::max(t.private_segment, 1024u)) * 32, 256);
    std::uint64_t waves = std::min<std::uint64_t>(scratch_.bytes / per_wave, 0xfff);
    tmpring = std::uint32_t(waves) | std::uint32_t(per_wave / 256) << 12;  // WAVES, WAVESIZE (256-byte units)
  }
  std::uint32_t pgm[2] = {std::uint32_t(t.code >> 8), std::uint32_t(t.code >> 40)};
  std::uint32_t rsrc12[2] = {t.rsrc1, rsrc2};
  std::uint32_t zero3[3] = {0, 0, 0};
  std::uint32_t start_threads[6] = {0, 0, 0, l.threads[0], l.threads[1], l.threads[2]};
  std::uint32_t scratch_base[2] = {std::uint32_t((scratch ? scratch_.address : 0) >> 8),
                                   std::uint32_t((scratch ? scratch_.address : 0) >> 40)};
  std::array<std::uint32_t, kLaunchDwords> words{};
  pm4::Pm4 pc(gen_, words);
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_LO, pgm);
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_RSRC1, rsrc12);
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_RSRC3, t.rsrc3);
  pc.set_sh_reg(pm4::reg::COMPUTE_TMPRING_SIZE, tmpring);
  pc.set_sh_reg(pm4::reg::COMPUTE_DISPATCH_SCRATCH_BASE_LO, scratch_base);
  pc.set_sh_reg(pm4::reg::COMPUTE_RESTART_X, zero3);
  const std::uint32_t user_at = pc.size() + 2;  // past the SET_SH_REG's header and register
  const auto user = user_sgprs(t, b);  // patched per launch
  if (t.user_sgprs) pc.set_sh_reg(pm4::reg::COMPUTE_USER_DATA_0, std::span(user).first(t.user_sgprs));
  pc.set_sh_reg(pm4::reg::COMPUTE_RESOURCE_LIMITS, 0);
  pc.set_sh_reg(pm4::reg::COMPUTE_START_X, start_threads);
  pc.dispatch_direct(l.groups[0], l.groups[1], l.groups[2], t.wave32);
  pc.cs_partial_flush();  // the next part starts once this dispatch has completed
  b.packets.assign(words.begin(), words.begin() + pc.size());
  b.user_at = user_at;
  for (bool timed : {false, true}) {  // the lone values, as submit_parts would write them
    auto& lone = b.lone[timed];
    auto& w = lone.words;
    auto at = [&] { return std::uint32_t(w.size()); };
    w.assign(head_.begin(), head_.end());
    if (timed) lone.stamps_at[0] = at() + pm4::kReleaseMemAddress, w.insert(w.end(), stamp_.begin(), stamp_.end());
    lone.packets_at = at(), lone.user_at = at() + user_at;
    w.insert(w.end(), b.packets.begin(), b.packets.end());
    if (timed) lone.stamps_at[1] = at() + pm4::kReleaseMemAddress, w.insert(w.end(), stamp_.begin(), stamp_.end());
    lone.word_at = at() + pm4::kReleaseMemData;
    w.insert(w.end(), tail_.begin(), tail_.end());
  }
  std::memcpy(b.geometry.data(), geometry(l), kGeometryBytes);
  b.scratch_address = scratch_.address, b.scratch_bytes = scratch_.bytes;
  b.valid = true;
}

void Device::copy(sdma::Sdma& ps, const rig_copy& c) {
  for (std::uint32_t b = 0; b < c.count; ++b) {
    const auto& box = c.boxes[b];
    if (!box.rows || !box.width) continue;
    bool flat = box.src_pitch == box.width && box.dst_pitch == box.width;
    std::uint64_t rows = flat ? 1 : box.rows, bytes = flat ? box.rows * box.width : box.width;
    for (std::uint64_t r = 0; r < rows; ++r) {
      std::uint64_t dst = c.dst + box.dst_offset + r * box.dst_pitch;
      if (c.fill >= 0) ps.fill(dst, std::uint8_t(c.fill), bytes);
      else ps.copy_linear(dst, c.src + box.src_offset + r * box.src_pitch, bytes);
    }
  }
}

int Device::failed(const char** failure, std::string why) {
  std::lock_guard g(fault_mutex_);
  *failure = messages_.emplace_back(std::move(why)).c_str();
  return RIG_FAILED;
}

void Device::build_value_packets() {
  pm4::Pm4 head(gen_, head_);
  head.cs_partial_flush();
  head.acquire_mem();
  pm4::Pm4 tail(gen_, tail_);
  tail.release_mem({reinterpret_cast<std::uint64_t>(word_), 0, pm4::DataSel::Data64, pm4::IntSel::None, 0, true});
  tail.release_mem({mailbox_, signal_event_, pm4::DataSel::Low32, pm4::IntSel::InterruptAfterWriteConfirm,
                    signal_event_, false});
  pm4::Pm4(gen_, stamp_).release_mem(
      {control_.address + kStamps, 0, pm4::DataSel::GpuClock, pm4::IntSel::None, 0, false});
}

void Device::ring_doorbell(Ring& r) {
  std::uint64_t pointer = r.bytes ? r.wptr * 4 : r.wptr;
  std::atomic_thread_fence(std::memory_order_release);  // packets before the pointer
  __atomic_store_n(r.wptr_memory, pointer, __ATOMIC_RELEASE);
  __atomic_store_n(r.doorbell, pointer, __ATOMIC_RELEASE);
}

int Device::submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                   std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times, const char** failure) {
  auto& d = self(edge);
  d.submitted_ = v;  // "the last value rig gave the driver's submit", even if it fails
  if (!d.faulted_.load() && !d.stopped_) {
    if (const auto* t = d.lone_launch(parts, count, wait_count)) {
      d.submit_lone(*t, parts[0].work.launch, v, times != nullptr);
      return RIG_COMMITTED;
    }
  }
  return d.submit_parts(parts, count, waits, wait_count, v, times, failure);
}

int Device::submit_parts(const rig_part* parts, std::uint32_t count, const rig_wait* waits, std::uint32_t wait_count,
                         std::uint64_t v, std::uint64_t* times, const char** failure) {
  if (faulted_.load()) {
    std::lock_guard g(fault_mutex_);
    return failed(failure, fault_);
  }
  if (stopped_) return failed(failure, "submit after stop");
  try {
    pm4::Pm4 pc(gen_, std::span(compute_.words, compute_.dwords), compute_.wptr);
    sdma::Sdma ps(std::span(copy_.words, copy_.dwords), copy_.wptr);
    const std::uint64_t seq_c = control_.address + kComputeSequence, seq_s = control_.address + kCopySequence;
    const std::uint64_t stamps = stamps_of(v);
    bool copies = false;
    for (std::uint32_t i = 0; i < count; ++i) copies |= parts[i].queue == 1;
    // Foreign waits: the producer's word, which the GPU reaches through rig_words.
    auto words_begin = words_map_.address, words_end = words_map_.address + words_map_.bytes;
    for (std::uint32_t w = 0; w < wait_count; ++w) {
      auto address = reinterpret_cast<std::uint64_t>(waits[w].word);
      if (address < words_begin || address + 8 > words_end)
        return failed(failure, fmt::format("value {} waits for device {}'s word at {:#x}, outside rig_words, "
                                             "which its queues cannot read", v, waits[w].device, address));
      pc.wait_mem64(address, pm4::Compare::GreaterEqual, waits[w].value);
    }
    // A GPU clock stored at `address` when the work before it is done.
    auto stamp = [&](std::uint64_t address) {
      const std::uint64_t at = pc.position();
      pc.packets(stamp_);
      compute_.set64(at + pm4::kReleaseMemAddress, address);
    };
    // Device order: the previous value's dispatches are done and its writes visible.
    pc.packets(head_);
    time_value(v, times != nullptr);
    if (times) stamp(stamps);
    if (copies) {  // the copy queue starts this value after the compute queue got here
      pc.release_mem({seq_c, ++compute_sequence_, pm4::DataSel::Low32, pm4::IntSel::None, 0, false});
      ps.poll_mem(seq_c, sdma::Compare::GreaterEqual, compute_sequence_);
    }
    // Which parts a part of the other queue follows: they signal when done.
    for (std::uint32_t i = 0; i < count; ++i) signal_at_[i] = 0;
    std::array<bool, 64> signals{};
    for (std::uint32_t i = 0; i < count; ++i)
      for (std::uint32_t a = 0; a < parts[i].after_count; ++a) {
        auto j = parts[i].after[a];
        if (j < i && parts[j].queue != parts[i].queue) signals[j] = true;
      }
    for (std::uint32_t i = 0; i < count; ++i) {
      auto& part = parts[i];
      bool on_copy = part.queue == 1;
      for (std::uint32_t a = 0; a < part.after_count; ++a) {
        auto j = part.after[a];
        if (j >= i || parts[j].queue == part.queue) continue;
        if (on_copy) ps.poll_mem(seq_c, sdma::Compare::GreaterEqual, signal_at_[j]);
        else pc.wait_mem32(seq_s, pm4::Compare::GreaterEqual, signal_at_[j]);
      }
      Ring& ring = on_copy ? copy_ : compute_;
      std::uint64_t start = on_copy ? ps.position() : pc.position();
      switch (part.kind) {
        case RIG_KIND_WORDS:
        case RIG_KIND_FILL: {
          std::span<const std::uint32_t> words;
          std::array<std::uint32_t, kFillDefaultUnits> fill_words;
          std::vector<std::uint32_t> big;
          if (part.kind == RIG_KIND_WORDS) {
            words = {part.work.words.words, part.work.words.count};
          } else {
            auto& f = part.work.fill;
            std::uint32_t capacity = f.ring_units ? f.ring_units : kFillDefaultUnits;
            std::uint32_t* buffer = fill_words.data();
            if (capacity > fill_words.size()) big.resize(capacity), buffer = big.data();
            FillQueue q{buffer, capacity, 0, on_copy ? kEngineSdma : kEnginePm4, 0, v};
            if (int code = f.fn(&q, f.arg, v))
              return failed(failure, fmt::format("the fill of value {} part {} returned {}", v, i, code));
            if (q.count > capacity)
              return failed(failure, fmt::format("the fill of value {} part {} wrote {} dwords, more than its {}", v,
                                                   i, q.count, capacity));
            words = {buffer, q.count};
          }
          // The writers' positions move on past the words placed by hand.
          ring.wptr = start;
          place_words(ring, words, on_copy);
          if (on_copy) ps = sdma::Sdma(std::span(ring.words, ring.dwords), ring.wptr);
          else pc = pm4::Pm4(gen_, std::span(ring.words, ring.dwords), ring.wptr);
          mark(start, part.queue, v, i, part.kind == RIG_KIND_WORDS ? "words" : "a fill");
          break;
        }
        case RIG_KIND_COPY:
          mark(start, 1, v, i, part.work.copy.fill >= 0 ? "a fill of memory" : "a copy");
          copy(ps, part.work.copy);
          break;
        case RIG_KIND_LAUNCH: {
          auto* t = static_cast<const LaunchTemplate*>(part.work.launch.launch);
          mark(start, 0, v, i, t->name);
          launch(pc, part.work.launch, v);
          break;
        }
      }
      if (signals[i]) {
        if (on_copy) ps.fence(seq_s, signal_at_[i] = ++copy_sequence_);
        else pc.release_mem({seq_c, signal_at_[i] = ++compute_sequence_, pm4::DataSel::Low32});
      }
    }
    if (copies) {  // the value's copies are done before its word
      ps.fence(seq_s, ++copy_sequence_);
      pc.wait_mem32(seq_s, pm4::Compare::GreaterEqual, copy_sequence_);
    }
    if (times) stamp(stamps + 8);
    // The word takes v, then sleepers are woken.
    const std::uint64_t tail = pc.position();
    pc.packets(tail_);
    compute_.set64(tail + pm4::kReleaseMemData, v);
    compute_.wptr = pc.position();
    flights_[flight_head_++ % kFlights] = {v, compute_.wptr, copies ? ps.position() : copy_.wptr, kernarg_pos_};
    if (copies) {
      copy_.wptr = ps.position();
      ring_doorbell(copy_);
    }
    ring_doorbell(compute_);
  } catch (const std::exception& e) {
    return failed(failure, fmt::format("encoding value {}: {}", v, e.what()));
  }
  return RIG_COMMITTED;
}

void Device::correlate() {
  std::uint64_t before = rig_now_ns();
  auto c = kfd_.clock_counters();
  std::uint64_t after = rig_now_ns();
  if (!c) return;
  sync_gpu_ = c->gpu_clock_counter, sync_host_ = before + (after - before) / 2;
}

std::uint64_t Device::gpu_to_host(std::uint64_t ticks) {
  auto delta = std::int64_t(ticks - sync_gpu_) * std::int64_t(1'000'000'000 / kGpuClockHz);
  return std::uint64_t(std::int64_t(sync_host_) + delta);
}

int Device::settle(void* edge, std::uint64_t v, std::uint64_t* times, const char** failure) {
  auto& d = self(edge);
  if (times[0] || times[1]) return RIG_OK;  // "a later call finds the times written and leaves them"
  if (!d.timed_[v % kFlights]) return d.failed(failure, fmt::format("value {} was not timed", v));
  auto* stamps = reinterpret_cast<const volatile std::uint64_t*>(d.stamps_of(v));
  std::uint64_t start = stamps[0], end = stamps[1];
  if (!start || !end) return d.failed(failure, fmt::format("value {} has a stamp its work never wrote", v));
  if (rig_now_ns() - d.sync_host_ > 1'000'000'000) d.correlate();  // drift stays small
  times[0] = d.gpu_to_host(start), times[1] = std::max(d.gpu_to_host(end), times[0]);
  return RIG_OK;
}

// ---- Sleeping and faults.

std::string Device::describe_stop(int queue) const {
  const Ring& r = queue == 0 ? compute_ : copy_;
  std::uint64_t reported = load(r.rptr_memory);
  // The write pointer as the doorbell published it: a submit on another thread may be moving
  // the ring's own, and the words before the published one are written.
  std::uint64_t written = load(r.wptr_memory);
  if (r.bytes) reported /= 4, written /= 4;
  // The engine may report its read pointer within the ring or counted from the start: either
  // way it lies at most a ring behind the write pointer.
  std::uint64_t behind = (written % r.dwords + r.dwords - reported % r.dwords) % r.dwords;
  std::uint64_t rptr = written - behind;
  std::uint32_t header = r.words[rptr % r.dwords];
  std::string packet = queue == 0 ? fmt::format("PM4 header {:#010x} (opcode {:#04x})", header, (header >> 8) & 0xff)
                                  : fmt::format("SDMA header {:#010x} (opcode {})", header, header & 0xff);
  std::string where;
  // The last mark at or before rptr, read whole: again if a mark was written meanwhile (a
  // submit on another thread), a few times at most.
  constexpr auto relaxed = std::memory_order_relaxed;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint64_t sequence = marks_sequence_.load(std::memory_order_acquire);
    if (sequence % 2) continue;
    const std::uint64_t count = sequence / 2;
    bool found = false;
    std::uint64_t best_position = 0, value = 0;
    std::uint32_t part = 0;
    const char* what = "";
    for (std::uint64_t i = count > kMarks ? count - kMarks : 0; i < count; ++i) {
      const auto& m = marks_[i % kMarks];
      const std::uint64_t position = m.position.load(relaxed);
      if (int(m.queue.load(relaxed)) == queue && position <= rptr && (!found || position >= best_position)) {
        found = true, best_position = position;
        value = m.value.load(relaxed), part = m.part.load(relaxed), what = m.what.load(relaxed);
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (marks_sequence_.load(relaxed) != sequence) continue;
    if (found) where = fmt::format(" in {} (value {} part {})", what, value, part);
    break;
  }
  return fmt::format("{} stopped at ring dword {:#x}, {}{}", queue == 0 ? "COMPUTE:0" : "COPY:0", rptr, packet, where);
}

void Device::sleep(std::uint64_t v, std::chrono::nanoseconds most) {
  if (faulted_.load()) {
    std::lock_guard g(fault_mutex_);
    throw edge::Fault(fault_);
  }
  if (load(word_) >= v) return;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(most).count();
  std::array<kfd_event_data, 3> events{};
  events[0].event_id = signal_event_, events[1].event_id = memory_event_, events[2].event_id = hw_event_;
  auto r = kfd_.wait_events(events, std::uint32_t(std::clamp<long long>(ms, 1, 1000)));
  if (!r) throw edge::Fault(r.error().what);
  std::string why;
  const auto& mem = events[1].memory_exception_data;
  const auto& hw = events[2].hw_exception_data;
  // A queue is busy while its engine's read pointer is short of the write pointer the
  // doorbell published (submit, on another thread, may be moving the ring's own).
  auto busy = [](const Ring& r) {
    std::uint64_t unit = r.bytes ? 4 : 1;
    return load(r.rptr_memory) / unit % r.dwords != load(r.wptr_memory) / unit % r.dwords;
  };
  const bool busy_compute = (mem.gpu_id || hw.gpu_id) && busy(compute_);
  const bool busy_copy = (mem.gpu_id || hw.gpu_id) && busy(copy_);
  if (mem.gpu_id) {
    std::string kind = mem.failure.ReadOnly ? "write to a read-only page" : mem.failure.NoExecute ? "execute" : "page not present";
    why = fmt::format("page fault at {:#x} ({})", std::uint64_t(mem.va), kind);
    if (busy_compute) why += "; " + describe_stop(0);
    if (busy_copy) why += "; " + describe_stop(1);
  } else if (hw.gpu_id) {
    why = fmt::format("the GPU reported a hardware exception ({}{})",
                      hw.reset_cause == KFD_HW_EXCEPTION_ECC ? "ECC error" : "queue hang",
                      hw.memory_lost ? ", memory lost" : "");
    if (busy_compute) why += "; " + describe_stop(0);
    if (busy_copy) why += "; " + describe_stop(1);
  } else {
    return;
  }
  {
    std::lock_guard g(fault_mutex_);
    if (fault_.empty()) fault_ = why;
    why = fault_;
  }
  faulted_ = true;
  throw edge::Fault(why);
}

void Device::stop(std::string_view) {
  if (stopped_) return;
  stopped_ = true;
  for (Ring* r : {&compute_, &copy_}) {
    if (r->created) kfd_.destroy_queue(r->queue_id), r->created = false;
    if (r->doorbell_page) seam_.munmap(r->doorbell_page, kDoorbellBytes), r->doorbell_page = nullptr;
    drop_block(r->ring);
  }
  std::uint32_t ids[3] = {signal_event_, memory_event_, hw_event_};
  for (int i = 0; i < 3; ++i)
    if (events_made_[i]) kfd_.destroy_event(ids[i]), events_made_[i] = false;
  drop_block(kernargs_);
  drop_block(eop_);
  drop_block(cwsr_);
  drop_block(control_);
  drop_block(words_map_);
  drop_block(word_map_);
  // The queues are gone: the word shows the dropped values, after which rig frees memory.
  if (submitted_ > load(word_)) __atomic_store_n(word_, submitted_, __ATOMIC_RELEASE);
}

}  // namespace

Result<std::vector<GpuInfo>> gpus(os::Seam& seam) {
  auto topology = read_topology(seam);
  if (!topology) return std::unexpected(topology.error());
  std::vector<GpuInfo> out;
  for (std::size_t i = 0; i < topology->size(); ++i) {
    auto& g = (*topology)[i];
    out.push_back({int(i), g.arch, g.gpu_id, g.vram_bytes, g.bus()});
  }
  return out;
}

Result<RingView> ring_of(edge::Driver& driver, int queue) {
  auto* device = dynamic_cast<Device*>(&driver);
  if (!device) return std::unexpected(std::string("not a driver of rig's AMD driver"));
  if (queue != 0 && queue != 1)
    return std::unexpected(fmt::format("no queue {}: the queues are 0 (COMPUTE:0) and 1 (COPY:0)", queue));
  return device->ring_view(queue);
}

edge::Opener<> opener(int index, os::Seam& seam, Options options) {
  for (std::uint32_t bytes : {options.compute_ring_bytes, options.copy_ring_bytes, options.kernarg_bytes})
    if (bytes < 4096 || (bytes & (bytes - 1)))
      throw std::invalid_argument(fmt::format("AMD:{}: ring size {} is not a power of two of at least 4096", index, bytes));
  std::string name = fmt::format("AMD:{}", index);
  return {name, [index, &seam, options, name](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
            auto topology = read_topology(seam);
            if (!topology) return std::unexpected(fmt::format("{}: no KFD topology: {}", name, topology.error()));
            if (index < 0 || std::size_t(index) >= topology->size())
              return std::unexpected(fmt::format("{}: the KFD topology lists {} GPUs", name, topology->size()));
            auto device = std::make_unique<Device>(seam, (*topology)[std::size_t(index)], index, options, word);
            if (auto opened = device->open(); !opened) {
              device->stop("the open failed");
              return std::unexpected(fmt::format("{}: {}", name, opened.error()));
            }
            return std::unique_ptr<edge::Driver>(std::move(device));
          }};
}

}  // namespace rig::amd
