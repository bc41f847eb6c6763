// device.hpp — the AMD driver's device, shared by the files of amdgpu/ that implement it
// (internal: rig/amd.hpp is the driver's contract).
//
// The files follow the contract's concepts: device.cpp opens the device, states its facts
// and stops it; memory.cpp its memory (KFD buffers mapped for host and GPU at one address);
// queue.cpp the hand-over (room, submit, commit, settle) and the queues' rings; encoding.cpp
// the packets a value and a launch take, which is where processors' generations differ;
// code.cpp code objects and their kernels; faults.cpp sleeping and faults.
//
// The queues' rings, their read/write pointers, the sequence words and the timestamp slots
// are driver memory mapped for host and GPU at one address; the host writes packets into the
// rings, stores the write pointer and rings the doorbell. The device's progress is the
// timeline word (rig_words[index]), which a RELEASE_MEM at the end of each value writes.
#pragma once

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

#include "code_object.hpp"
#include "kfd.hpp"
#include "pm4.hpp"
#include "sdma.hpp"
#include "topology.hpp"

namespace rig::amd::driver {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint32_t kLdsGranule = 512;     // COMPUTE_PGM_RSRC2.LDS_SIZE unit
constexpr std::uint32_t kFlights = 4096;       // values in flight at most (and timestamp slots)
constexpr std::uint32_t kMarks = 8192;         // part starts remembered for fault reports
constexpr std::uint64_t kGpuClockHz = 100'000'000;  // the GPU timestamp counter (assumed)
// XCCs a GPU's partition has at most (PRED_EXEC's VIRTUAL_XCC_ID_SELECT has 8 bits): on a GPU
// of several, the compute queue is one PM4 queue per XCC over one ring, each naming its XCC
// in queue_percentage (docs/amd.md, "Several XCCs").
constexpr std::uint32_t kXccMax = 8;

// KFD's per-allocation flags for each kind of memory.
constexpr std::uint32_t kVramFlags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC |
                                     KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE |
                                     KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
constexpr std::uint32_t kGttFlags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
                                    KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
constexpr std::uint32_t kUncachedGttFlags = kGttFlags | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT |
                                            KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;

inline std::uint64_t round_up(std::uint64_t n, std::uint64_t to) { return (n + to - 1) / to * to; }
inline std::uint64_t load(const volatile std::uint64_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }

// The control page: queue pointers and the sequence words the queues sync through; on a
// GPU of several XCCs, the read pointers of XCC 1 and up (XCC 0's is kComputeRptr), the
// XCCs' barrier count and the indirect buffer that gives each XCC its place.
constexpr std::uint64_t kComputeRptr = 0, kComputeWptr = 8, kCopyRptr = 16, kCopyWptr = 24;
constexpr std::uint64_t kComputeSequence = 64, kCopySequence = 128;
constexpr std::uint64_t kXccBarrier = 192;  // 64 bits: every XCC adds 1 at each barrier
constexpr std::uint64_t kXccRptrs = 256;    // XCC i's read pointer at kXccRptrs + 8 * i
constexpr std::uint64_t kXccPlaces = 512;   // PRED_EXEC + SET_SH_REG per XCC
constexpr std::uint64_t kStamps = kPage;  // kFlights slots of (start, end) GPU clocks
constexpr std::uint64_t kControlBytes = kPage + kFlights * 16;

// Dwords of the fixed packets (header included).
constexpr std::uint64_t kReleaseDwords = 1 + pm4::kReleaseMemBody;
constexpr std::uint64_t kAcquireDwords = 1 + pm4::kAcquireMemBody;
constexpr std::uint64_t kFlushDwords = 1 + pm4::kEventWriteBody;
constexpr std::uint64_t kWait32Dwords = 1 + pm4::kWaitRegMemBody;
constexpr std::uint64_t kWait64Dwords = 1 + pm4::kWaitRegMem64Body;
constexpr std::uint64_t kIbDwords = 1 + pm4::kIndirectBufferBody;
constexpr std::uint64_t kPredDwords = 1 + pm4::kPredExecBody;
// An XCC barrier: RELEASE_MEM (this XCC's work done, its L2 written back), ATOMIC_MEM (+1 to
// the count), WAIT_REG_MEM64 (until every XCC has added its 1); between parts, ACQUIRE_MEM
// after it. Where its wait's reference lies, for patching.
constexpr std::uint64_t kBarrierDwords = kReleaseDwords + 1 + pm4::kAtomicMemBody + kWait64Dwords;
constexpr std::uint64_t kBarrierReference = kReleaseDwords + 1 + pm4::kAtomicMemBody + pm4::kWaitRegMem64Reference;
// Of a barrier, the dwords every XCC has read once the count says all of them arrived (the
// wait's and what follows may still be ahead of some): the ring is reclaimed up to there.
constexpr std::uint64_t kBarrierRead = kReleaseDwords + 1 + pm4::kAtomicMemBody;
// A value's slot of XCC 0's packets (in indirect buffers, where PRED_EXEC works): the start
// stamp, the end stamp, then the word's store and the interrupt; each under PRED_EXEC.
constexpr std::uint64_t kSlotStart = 0, kSlotEnd = kPredDwords + kReleaseDwords;
constexpr std::uint64_t kSlotTail = 2 * (kPredDwords + kReleaseDwords);
constexpr std::uint64_t kSlotTailDwords = kPredDwords + 2 * kReleaseDwords;
constexpr std::uint64_t kSlotDwords = 40;
static_assert(kSlotTail + kSlotTailDwords <= kSlotDwords);
// Several XCCs: the end of a scratch allocation holds the indirect buffer that sets each
// XCC's COMPUTE_DISPATCH_SCRATCH_BASE (PRED_EXEC and a SET_SH_REG of two registers per XCC).
constexpr std::uint64_t kScratchBaseDwords = kPredDwords + 4;
constexpr std::uint64_t kScratchBasesBytes = kPage;
static_assert(kXccMax * kScratchBaseDwords * 4 <= kScratchBasesBytes);
// Slots, and so values in flight, on several XCCs: value v's slot is v % kSlots, written again
// once v is reached (XCC 0 has stored the word from it, the other XCCs skip it). Few enough
// that the slots stay in the host's caches (20 KiB): a slot rewritten from memory per value
// cost a launch's submit more than its ring's copy did.
constexpr std::uint64_t kSlots = 128;
static_assert((kSlots & (kSlots - 1)) == 0 && (kFlights & (kFlights - 1)) == 0 && kSlots <= kFlights);

// The dwords a Words or Fill part may write: its words, or the fill's ring_units (1024 when 0).
inline std::uint32_t part_dwords(const rig_part& p) {
  if (p.kind == RIG_KIND_WORDS) return p.work.words.count;
  return p.work.fill.ring_units ? p.work.fill.ring_units : kFillDefaultUnits;
}
// On several XCCs, the bytes of the kernel-argument area a compute part's `dwords` words take
// as XCC 0's indirect buffer: a PRED_EXEC and the words, in whole 64-byte lines so that the
// kernel arguments after them stay aligned.
inline std::uint64_t once_bytes(std::uint64_t dwords) { return round_up((kPredDwords + dwords) * 4, 64); }

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
inline const std::byte* geometry(const rig_launch& l) { return reinterpret_cast<const std::byte*>(&l.groups); }

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
    // Several XCCs: the tail barrier's reference and the indirect buffers' addresses (the end
    // one at ibs_at[2]); the word is then patched in the value's slot, not the ring.
    std::uint32_t barrier_at = 0;
    std::array<std::uint32_t, 3> ibs_at{};
  };
  std::array<Lone, 2> lone;
  std::vector<std::byte> kernargs;

  bool same(const rig_launch& l, std::uint64_t scratch_at, std::uint64_t scratch_size) const {
    return valid && scratch_address == scratch_at && scratch_bytes == scratch_size &&
           std::memcmp(geometry.data(), driver::geometry(l), kGeometryBytes) == 0;
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
  // Several XCCs: the queues of XCC 1 and up over this ring, each with its doorbell.
  std::uint32_t others = 0;
  std::array<std::uint32_t, kXccMax - 1> other_ids{};
  std::array<volatile std::uint64_t*, kXccMax - 1> other_doorbells{};
  std::array<void*, kXccMax - 1> other_pages{};

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

// The packets' generation of the GPU's processor (encoding.cpp), from its
// gfx_target_version; Error naming the processor where the driver builds none for it.
Result<pm4::Gen> generation_of(const Gpu& gpu);
// The SDMA engine of a generation (encoding.cpp): SDMA 4 on gfx9, SDMA 6 and 7 after.
sdma::Version sdma_of(pm4::Gen gen);

// What the processor's code may use (code.cpp): the lanes of the waves the driver launches
// and the group-shared bytes a group may use (the smaller of the processor's limit and the
// topology's lds_size_in_kb).
struct CodeLimits {
  std::uint32_t wave_size = 32;
  std::uint32_t lds_bytes = 64 << 10;
};
CodeLimits code_limits(const Gpu& gpu);

// A launch: PGM_LO/HI, RSRC1/2, RSRC3, TMPRING, SCRATCH_BASE, RESTART, USER_DATA (16 at
// most), RESOURCE_LIMITS, START/NUM_THREAD, DISPATCH_DIRECT, CS_PARTIAL_FLUSH.
constexpr std::uint64_t kLaunchDwords = 4 + 4 + 3 + 3 + 4 + 5 + 18 + 3 + 8 + 5 + 2;
// A value's own packets on the compute queue: the waits' share aside, the barrier, the
// sequence signal, the word, the interrupt and two stamps, with gfx10+'s ACQUIRE_MEM (a
// device's own, value_dwords_, has its generation's).
constexpr std::uint64_t kValueDwords = kFlushDwords + kAcquireDwords + 5 * kReleaseDwords + kWait32Dwords;
// What several XCCs add to a value: the tail's barrier and the indirect buffers of its
// stamps and word; to a compute part, a barrier and ACQUIRE_MEM after it.
constexpr std::uint64_t kXccValueDwords = kBarrierDwords + 3 * kIbDwords;
constexpr std::uint64_t kXccPartDwords = kBarrierDwords + kAcquireDwords;

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
  Result<edge::Dma> dma(edge::Region r, std::string_view pci_function) override;

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

  // ---- device.cpp: opening.
  KfdResult<void> make_queue(Ring& r, std::uint32_t bytes, std::uint32_t type, std::uint64_t rptr,
                             std::uint64_t wptr);
  // A queue over r's ring on XCC `xcc` (its read pointer at control offset rptr); its id, doorbell
  // and doorbell page.
  KfdResult<void> create_queue(const Ring& r, std::uint32_t type, std::uint32_t xcc, std::uint64_t rptr,
                               std::uint64_t wptr, std::uint32_t& id, volatile std::uint64_t*& doorbell,
                               void*& page);
  // Several XCCs: gives each XCC its place in a shared dispatch (before any value).
  void place_xccs();

  // ---- memory.cpp: memory the driver owns, mapped for host and GPU at one address.
  KfdResult<Block> make_block(std::uint64_t bytes, std::uint32_t flags);
  void drop_block(Block& b);
  KfdResult<Block> map_user(std::uint64_t host, std::uint64_t bytes);

  // ---- queue.cpp: the hand-over. The functions a lone launch's room and submit call are
  // inline, defined in queue.cpp and called there only, so that they inline into room and
  // submit as they did when the driver was one file.
  inline void reclaim();
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
  inline const LaunchTemplate* lone_launch(const rig_part* parts, std::uint32_t count, std::uint32_t waits) const;
  // What room found of a value, kept in its first part's scratch (rig_edge.h: room and submit
  // may keep there what they derive from the parts) for the submit after it: the lone
  // launch's template, or null for any other value.
  static inline void note_lone(rig_part* parts, const LaunchTemplate* t);
  static inline const LaunchTemplate* noted_lone(const rig_part* parts, std::uint32_t count, std::uint32_t waits);
  inline void submit_lone(const LaunchTemplate& t, const rig_launch& l, std::uint64_t v, bool timed);
  // Whether a lone launch of t fits the queues as last reclaimed.
  inline bool lone_fits(const LaunchTemplate& t) const;
  // Whether a submission planned as p fits the queues as last reclaimed.
  inline bool fits(const Plan& p) const;
  // Where kernel-argument position `pos` lies in their area (a power of two, as the opener
  // checks).
  std::uint64_t kernarg_offset(std::uint64_t pos) const { return pos & (kernargs_.bytes - 1); }
  // The bytes kernel arguments of `bytes` take from position `at`: those skipped to the
  // area's start when they would straddle its end, and theirs.
  std::uint64_t kernarg_cost(std::uint64_t at, std::uint64_t bytes) const {
    const std::uint64_t left = kernargs_.bytes - kernarg_offset(at);
    return bytes <= left ? bytes : left + bytes;
  }
  // Flight i's record: the first flight_limit_ records (a power of two) serve, so that on
  // several XCCs, whose values in flight are few, a submit writes a record it wrote recently.
  Flight& flight(std::uint64_t i) { return flights_[i & (flight_limit_ - 1)]; }
  // Where value v's (start, end) GPU clocks go: its slot of the control page's stamps.
  std::uint64_t stamps_of(std::uint64_t v) const { return control_.address + kStamps + (v % kFlights) * 16; }
  // Records whether value v is timed; a timed value's slot is zeroed for its work to write.
  inline void time_value(std::uint64_t v, bool timed);
  // Takes `bytes` of the kernel-argument area at its position (from its start where they would
  // straddle its end): their address.
  inline std::uint64_t take_kernargs(std::uint64_t bytes);
  // Places a launch's kernel arguments: returns their address.
  inline std::uint64_t place_kernargs(const LaunchTemplate& t, const rig_launch& l);
  // Writes the per-launch user SGPRs' values through set(dword offset from USER_DATA_0's
  // value, the 64 bits).
  template <class Set>
  static void patch_user(const BuiltLaunch& b, std::uint64_t kernargs, std::uint64_t v, Set&& set) {
    const std::uint64_t packet = kernargs + b.kernargs.size() - 64;  // the dispatch packet ends them
    if (b.packet_sgpr >= 0) set(b.packet_sgpr, packet);
    if (b.kernarg_sgpr >= 0) set(b.kernarg_sgpr, kernargs);
    if (b.id_sgpr >= 0) set(b.id_sgpr, v);
  }
  // Writes v into dwords at and at + 1 of `words`, low half first.
  static void put64(std::uint32_t* words, std::uint32_t at, std::uint64_t v) { std::memcpy(words + at, &v, 8); }
  void place_words(Ring& ring, std::span<const std::uint32_t> words, bool sdma);
  inline void mark(std::uint64_t position, std::uint32_t queue, std::uint64_t v, std::uint32_t part, const char* what);
  inline void ring_doorbell(Ring& r);
  int failed(const char** failure, std::string why);
  std::uint64_t gpu_to_host(std::uint64_t ticks);
  void correlate();

  // ---- encoding.cpp: the packets, where processors' generations differ.
  // Builds t.built for launches of l's geometry on the scratch there is now.
  void build_launch(const LaunchTemplate& t, const rig_launch& l);
  // A launch's user SGPRs, with zero for the per-launch addresses and id, whose places go
  // into b.
  std::array<std::uint32_t, 16> user_sgprs(const LaunchTemplate& t, BuiltLaunch& b) const;
  bool uses_scratch(const LaunchTemplate& t) const;
  // A copy's boxes as SDMA packets.
  void copy(sdma::Sdma& ps, const rig_copy& c);
  // Encodes head_, tail_ and stamp_ (open); with several XCCs, barrier_ and the slots.
  void build_value_packets();
  // Several XCCs: a barrier of every XCC (its reference the next count), at pc.
  void barrier(pm4::Pm4& pc);
  // Several XCCs: value v's slot of XCC 0's packets; a timed value's stamps' addresses are
  // written into it (stamp_slot).
  void stamp_slot(std::uint64_t v) {
    std::uint32_t* slot = slot_words(v);
    const std::uint64_t at[2] = {stamps_of(v), stamps_of(v) + 8};
    std::memcpy(slot + kSlotStart + kPredDwords + pm4::kReleaseMemAddress, &at[0], 8);
    std::memcpy(slot + kSlotEnd + kPredDwords + pm4::kReleaseMemAddress, &at[1], 8);
  }
  std::uint64_t slot_of(std::uint64_t v) const { return slots_.address + (v % kSlots) * kSlotDwords * 4; }
  std::uint32_t* slot_words(std::uint64_t v) const { return reinterpret_cast<std::uint32_t*>(slot_of(v)); }
  // Sets scratch_slice_ for scratch_ (all of it on one XCC) and, with several XCCs, writes
  // the indirect buffer that gives each XCC its slice's base (code.cpp calls it for a new
  // scratch).
  void place_scratch();
  // The scratch bytes a wave of t takes: its lanes' private segments (1 KiB each at least),
  // in the generation's COMPUTE_TMPRING_SIZE.WAVESIZE units.
  std::uint64_t scratch_per_wave(const LaunchTemplate& t) const;

  // ---- faults.cpp: what a stopped queue was running.
  std::string describe_stop(int queue) const;

  os::Seam& seam_;
  Kfd kfd_;
  Gpu gpu_;
  Options o_;
  std::string name_;
  pm4::Gen gen_ = pm4::Gen::Gfx11;  // the packets' generation (generation_of)
  sdma::Version sdma_ = sdma::Version::Sdma6;  // its SDMA engine's (sdma_of)
  CodeLimits limits_;                // what the processor's code may use (code_limits)
  std::uint32_t xccs_ = 1;           // the topology's num_xcc: compute dies, a compute queue each
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
  std::uint64_t scratch_slice_ = 0;  // the scratch bytes of each XCC's waves (place_scratch)
  std::uint64_t scratch_bases_ = 0;  // several XCCs: the indirect buffer of each XCC's base

  // Driver memory.
  Block words_map_, word_map_, control_, eop_, cwsr_, kernargs_;
  Block slots_;  // several XCCs: kSlots slots of kSlotDwords
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
  std::uint64_t barriers_ = 0;  // XCC barriers encoded: the count's reference is xccs_ times it
  std::uint64_t flight_limit_ = kFlights;  // values in flight at most (a power of two): kSlots on several XCCs
  std::uint64_t flight_head_ = 0, flight_tail_ = 0;  // [tail, head) of flights_ are in flight
  std::atomic<std::uint64_t> marks_sequence_{0};  // twice the marks written: odd while one is
  // A value's packets that are the same for every value, encoded at open and copied: its head
  // (the barrier before its work), its tail (the word's store, its value patched, and the
  // interrupt that wakes sleepers) and a timestamp's store (its slot patched).
  std::array<std::uint32_t, kFlushDwords + kAcquireDwords> head_{};  // gfx10+'s size; gfx9's is a dword less
  std::uint32_t head_dwords_ = 0;
  std::uint64_t value_dwords_ = 0;  // kValueDwords with the generation's ACQUIRE_MEM
  std::span<const std::uint32_t> head() const { return std::span(head_).first(head_dwords_); }
  std::array<std::uint32_t, std::max(2 * kReleaseDwords, kBarrierDwords + kIbDwords)> tail_{};
  std::array<std::uint32_t, kReleaseDwords> stamp_{};
  std::array<std::uint32_t, kBarrierDwords> barrier_{};
  std::uint64_t tail_dwords_ = 2 * kReleaseDwords;  // in the ring: several XCCs' a barrier and an IB
  std::uint64_t launch_dwords_ = kLaunchDwords;  // with several XCCs, a barrier after it
  // Several XCCs: the dwords at a value's end that some XCC may still read after its word
  // (the tail barrier's wait and indirect buffer), which its flight does not free.
  std::uint64_t compute_held_ = 0;
  std::span<const std::uint32_t> tail() const { return std::span(tail_).first(tail_dwords_); }
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

}  // namespace rig::amd::driver
