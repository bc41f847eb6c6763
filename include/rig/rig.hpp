// rig.hpp — the public API: devices, points, buffers, images, submissions.
//
// A program opens devices, allocates buffers, loads code and submits work. rig orders
// that work on per-device timelines: a device's work is one sequence of submissions
// numbered 1, 2, 3, …, its values; value v is reached once every submission up to v has
// completed. Every function may be called from any thread.
//
// Errors: misuse raises std::invalid_argument, a lost device rig::Lost, memory
// rig::OutOfMemory; an expected failure (a driver rejecting a binary) is a Result error.
// Every message names the device and the reason.
#pragma once

#include <rig/edge.hpp>
#include <rig/rig.h>

#include <array>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace rig {

namespace detail {
struct DeviceState;
struct Allocation;
struct Borrow;
struct Mapping;
struct ImageState;
struct FunctionState;
struct SubmissionState;
struct HoldState;
}  // namespace detail

class Device;

// A device was lost: every later use of it, its memory, or memory waiting on its unreached
// values raises this. what() is "NAME lost: why".
class Lost : public std::runtime_error {
 public:
  Lost(std::string device, std::string why);
  const std::string& device() const { return device_; }
  const std::string& why() const { return why_; }

 private:
  std::string device_, why_;
};

// An allocation did not fit the device's budget, or its driver had no memory for it after
// the rounds of reclamation.
class OutOfMemory : public std::runtime_error {
 public:
  OutOfMemory(std::string device, std::size_t bytes, std::string why);
  const std::string& device() const { return device_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::string device_;
  std::size_t bytes_;
};

// A wait was interrupted (rig::interrupt) before its value was reached. Any call that waits
// may raise it: Device::wait and close, Point::wait, Buffer::wait, host access, blocking
// copies and fills, an allocation waiting for memory to return. What the call handed to
// devices before goes on; what it had not done yet is not done (a host read never ran its
// function, a blocking copy through staging may have moved only its first chunks); the
// devices, their memory and their claims are as they were, and a later wait for the same
// value returns once it is reached.
class Interrupted : public std::runtime_error {
 public:
  Interrupted(std::string device, std::uint64_t value);
  const std::string& device() const { return device_; }
  std::uint64_t value() const { return value_; }

 private:
  std::string device_;
  std::uint64_t value_;
};

// Interrupts every wait in progress on any thread: each raises Interrupted within 200 ms,
// having lost nothing. Waits that start later are not interrupted. Async-signal-safe, so
// that a signal handler (SIGINT) may call it.
void interrupt() noexcept;

// A handle to a device. Handles are cheap to copy; == compares identity.
class Device {
 public:
  // The device's name: "CPU", a memory device's name, "AMD:0", "NV:0", "CUDA:0", …
  std::string_view name() const;
  // Its architecture from its facts: "x86_64", "gfx1100", "sm_90"; "" for no processor.
  std::string_view arch() const;
  // True iff it has a queue, so runs work (false for an io device).
  bool computes() const;
  // True iff its work is this process's code (the host device and memory devices).
  bool runs_on_host() const;
  // Its queues, in the order of its facts.
  std::span<const Queue> queues() const;
  // The bytes of its last-level cache, if its driver knows them.
  std::optional<std::size_t> cache_bytes() const;
  // The record its driver declared under `key`, or null if it declared none there.
  template <class T>
  const T* capability(const edge::Key<T>& key) const;
  // Its facts as read at open.
  const edge::Facts& facts() const;
  // Its index: its points' device index, and its timeline word's index in rig_words.
  std::uint16_t index() const;

  // The bytes of memory it may hold, and the bytes it holds now.
  std::size_t budget() const;
  std::size_t used() const;
  // Sets the budget, returning cached memory until the device is under it. It never frees
  // live memory: allocations over it raise OutOfMemory.
  void set_budget(std::size_t bytes);
  // Returns every cached region to the driver (once the device's work on it is done), and
  // the staging allocations of its own memory (a device that maps no host memory) that no
  // copy holds.
  void free_cache();

  // The last value assigned to a submission (0 if none).
  std::uint64_t submitted() const;
  // The last value the device's word showed, after committing its submitted work.
  // Raises Lost if the device is lost.
  std::uint64_t signaled();
  // Returns once value v is reached. Raises invalid_argument if v > submitted(), and Lost
  // if the device is lost before it reaches v.
  void wait(std::uint64_t v);

  // Why the device was lost, or nullopt while it is live.
  std::optional<std::string> lost() const;
  // Waits for the submitted work, then loses the device with reason "closed".
  // Closing a lost device does nothing.
  void close();

  bool operator==(const Device& o) const { return state_ == o.state_; }
  explicit Device(std::shared_ptr<detail::DeviceState> s) : state_(std::move(s)) {}
  detail::DeviceState& state() const { return *state_; }

 private:
  std::shared_ptr<detail::DeviceState> state_;
  const void* capability_of(const void* key) const;
};

// The host device, "CPU": this process's memory; it loads relocatable ELF objects and runs
// their kernels over a grid on worker threads (rig/host_kernel.h). Opened at first use.
Device host();
// A new memory device named `name`: host memory with a timeline of its own, whose queue
// "COPY:0" runs copies and fills inside submit. Raises invalid_argument if a live device
// already has that name.
Device memory_device(std::string_view name);
// Opens the device `opener` names. Error if its make fails or a fault occurs while reading
// its facts. Raises invalid_argument if a live device already has that name, or if its
// facts break the contract (edge::Facts).
template <class T>
Result<Device> open(const edge::Opener<T>& opener);
// Opens the io device `opener` names: memory the host reads and writes through calls, such
// as files (edge::Io). Error if its make fails. An open live device of that name is returned.
template <class T>
Result<Device> open_io(const edge::IoOpener<T>& opener);
// Loses every device but the host with reason `why`, for good: later opens give an Error
// naming it. For a process that must stop using hardware, such as after a fatal error.
void fail(std::string_view why);
// The reason fail was given, or nullopt.
std::optional<std::string> failure();
// The devices open now, in the order they opened.
std::vector<Device> devices();
// The drivers built into this rig, by the names its build options give them: "host" and
// "memory" always, then those of "amd", "cuda" and "disk" whose dependencies the build had
// (rig/config.h says the same to the preprocessor: RIG_DRIVER_AMD, …).
std::span<const std::string_view> drivers();
// This rig's version, "MAJOR.MINOR.PATCH": the library's, which may differ from the headers'
// RIG_VERSION only where a program was built against other headers than it runs with.
std::string_view version();

// A value of a device's timeline: 16 bits of device index, 48 bits of value.
class Point {
 public:
  Point() = default;  // value 0 of the host device, always reached
  Point(const Device& d, std::uint64_t value);
  Device device() const;
  std::uint64_t value() const { return bits_ & kValueMask; }
  std::uint16_t index() const { return std::uint16_t(bits_ >> 48); }
  std::uint64_t bits() const { return bits_; }
  static Point from_bits(std::uint64_t bits) { return Point(bits); }
  // True iff the value is reached; commits it first. Raises Lost as Device::wait does.
  bool reached() const;
  // Returns once the value is reached (Device::wait).
  void wait() const;
  bool operator==(const Point&) const = default;

  static constexpr std::uint64_t kValueMask = (std::uint64_t(1) << 48) - 1;

 private:
  explicit Point(std::uint64_t bits) : bits_(bits) {}
  std::uint64_t bits_ = 0;
};

// Access that memory admits, or that a use takes.
enum class Access { Read, ReadWrite };

// rows rows of width bytes; row i starts at src_offset + i * src_pitch of the source and
// dst_offset + i * dst_pitch of the destination.
struct Box {
  std::size_t src_offset = 0, dst_offset = 0, width = 0, rows = 0, src_pitch = 0, dst_pitch = 0;
  // One row of n bytes.
  static Box row(std::size_t n, std::size_t src_offset = 0, std::size_t dst_offset = 0) {
    return Box{src_offset, dst_offset, n, n ? std::size_t(1) : 0, n, n};
  }
};

// Bytes of a device's memory: all of an allocation, or a view of part of it. Buffers over
// one allocation share its stamps: work through any of them is ordered as work on it.
// The contract of each function is spec/Rig.Buffer.txt's; docs/buffers.md sums it up.
class Buffer {
 public:
  // --- Making buffers ---------------------------------------------------------------
  // n new bytes of d's memory of kind `memory`, with unspecified contents. Mapped memory
  // falls back to Pinned memory, then to Device memory where the host addresses d's memory.
  // Raises invalid_argument if memory is Pinned and the host addresses d's memory, or d is
  // an io device; OutOfMemory if it exceeds d's budget, or d's driver has no room after the
  // rounds of reclamation; Lost if d is lost or its driver faults.
  static Buffer create(const Device& d, std::size_t n, Memory memory = Memory::Device);
  // A host buffer holding a copy of `bytes`.
  static Buffer of_string(std::string_view bytes);
  // A host buffer over `bytes` without a copy; `owner` keeps them alive as long as rig
  // needs them. Each call makes a new allocation with stamps of its own; its memory is
  // outside the claims.
  static Buffer of_host(std::span<std::byte> bytes, std::shared_ptr<const void> owner);
  // A buffer over the n bytes of region r of the io device `io`, admitting `access`. Its
  // memory is outside the claims, and r returns to the io device once unreachable. Raises
  // invalid_argument if `io` is not an io device, and Lost if it is lost or closed.
  static Buffer of_io(const Device& io, edge::IoRegion r, Access access, std::size_t n);
  // A buffer on d over b's bytes without a copy, or nullopt if d cannot map b's memory.
  // It is b for b on d. Raises invalid_argument if b is dead or, on another device, its
  // memory is held exclusive; OutOfMemory if d's driver has no room for the mapping; Lost
  // if d is lost or faults.
  static std::optional<Buffer> borrow(const Device& d, const Buffer& b);

  // The `length` bytes of this buffer from its byte `first` on. Raises invalid_argument if
  // the buffer is dead or the bytes do not lie inside it.
  Buffer view(std::size_t first, std::size_t length) const;

  // Returns the memory early: false, changing nothing, if the buffer does not span its
  // memory, another claim holds it, or it is outside the claims; otherwise every buffer
  // over it is dead with reason `why`, the memory returns once its work is done, and true.
  // Raises invalid_argument if the buffer is dead.
  bool free(std::string_view why = "freed");
  // Ends this borrow early: false, changing nothing, if a claim through it keeps it;
  // otherwise every buffer of the borrow is dead with `why`, its hold of the mapping ends,
  // and true. Raises invalid_argument if dead, or not a borrow on a device other than its
  // memory's owner, or a view of part of one.
  bool unborrow(std::string_view why = "unborrowed");

  // --- Properties (never raise) -------------------------------------------------------
  Device device() const;
  std::size_t length() const { return length_; }
  std::size_t offset() const { return first_; }  // in its allocation
  Access access() const;
  // True iff it lies over memory something other than its device holds: caller memory
  // (of_host) or another device's memory (borrow).
  bool is_borrowed() const;
  // True iff its bytes are all of its allocation.
  bool spans() const;
  // True iff the two share a byte of memory.
  bool overlaps(const Buffer& other) const;
  // Why its memory was consumed or its borrow ended, or nullopt while it is usable.
  std::optional<std::string> dead() const;
  // The address of its first byte in its device's work, and on the host if the host
  // addresses it.
  std::uint64_t address() const;
  std::optional<std::uintptr_t> host_address() const;

  // --- Host access ------------------------------------------------------------------
  // Returns once the work a host access `access` must follow is done: for Read every
  // device's last write, for ReadWrite every use. Raises invalid_argument if dead, Lost if
  // that work's device is lost before it.
  void wait(Access access) const;
  // True iff wait would not block; commits the work it waits for.
  bool reached(Access access) const;

  // f(std::span<const T>) over the bytes, under a read claim, once the last write is done.
  // Raises invalid_argument if dead, held exclusive, if the host does not address the
  // memory, or if the length is not a whole number of T or the first byte is not aligned.
  template <class T, class F>
  auto read(F&& f) const {
    auto claim = host_claim(false);
    return f(std::span<const T>(host_span<T>(false)));
  }
  // f(std::span<T>) over the bytes, under a read claim, once every use is done; work
  // submitted after it returns sees f's writes. Raises as read, and if it admits only Read.
  template <class T, class F>
  auto write(F&& f) {
    auto claim = host_claim(true);
    return f(host_span<T>(true));
  }
  // The bytes as T for good, once every use is done; the memory leaves the claims. Raises
  // invalid_argument also if the memory is not the host device's.
  template <class T>
  std::span<T> export_as() {
    export_memory();
    return host_span<T>(false);
  }

  // --- Copying ----------------------------------------------------------------------
  // Copies each box's rows from src into dst, one box after the other, after `waits` and
  // what the memory orders; returns a point reached once every byte is there. Routes: the
  // host copies where it addresses both sides; a device copies directly between memory on
  // it; anything else passes through staging memory. Raises invalid_argument if a side is
  // dead, they share a byte, a box does not fit, dst admits only Read, a side is held
  // exclusive, or no device can copy between them; Lost and OutOfMemory as submit does.
  static Point submit_copy(const Buffer& src, const Buffer& dst, std::span<const Box> boxes,
                           std::span<const Point> waits = {});
  // src's bytes into dst, returning once they are there. Raises invalid_argument also if
  // they differ in length.
  static void copy(const Buffer& src, const Buffer& dst);
  // Copies `bytes` into the buffer from its byte `at`, and the buffer's bytes from `at`
  // into `out`; they return once the bytes are where they go. Raise invalid_argument if the
  // range does not lie inside the buffer, and as copy does.
  void blit_from(std::span<const std::byte> bytes, std::size_t at);
  void blit_to(std::size_t at, std::span<std::byte> out) const;
  // Sets every byte to `byte`, after `waits`: the host where it addresses the buffer,
  // otherwise the copy engine of its device. Returns a point as submit_copy does.
  Point submit_fill(std::byte byte, std::span<const Point> waits = {});
  void fill(std::byte byte);

  // --- Low level --------------------------------------------------------------------
  // The io region the memory lies in, if it is an io device's memory of a library whose
  // region key is `key`. Raises invalid_argument if the buffer is dead.
  std::optional<edge::IoRegion> io(const void* key) const;
  // How PCI function `pci_function` reaches the whole allocation by DMA, as its device's
  // driver describes it (Error with the driver's reason where it cannot): host() and memory
  // devices give a dma-buf of an allocation of their own pages through /dev/udmabuf. The
  // memory leaves the claims for good, also where the driver refused, and never returns to
  // the cache. Raises invalid_argument if dead, empty, the caller's memory (of_host), an io
  // device's, or held exclusive by a claim, and Lost if its device is lost.
  Result<edge::Dma> dma(std::string_view pci_function) const;
  // The driver's object for the memory, which the buffer starts offset() bytes into.
  // Raises invalid_argument if dead or host memory.
  std::intptr_t handle() const;
  // True iff the address `at` bytes past the first byte is a multiple of n. Raises
  // invalid_argument if dead or n is not a positive power of two.
  bool aligned(std::ptrdiff_t at, std::size_t n) const;

  bool operator==(const Buffer& o) const {
    return alloc_ == o.alloc_ && borrow_ == o.borrow_ && first_ == o.first_ && length_ == o.length_;
  }
  const std::shared_ptr<detail::Allocation>& allocation() const { return alloc_; }
  const std::shared_ptr<detail::Borrow>& borrowed() const { return borrow_; }
  Buffer(std::shared_ptr<detail::Allocation> a, std::shared_ptr<detail::Borrow> borrow, std::size_t first,
         std::size_t length)
      : alloc_(std::move(a)), borrow_(std::move(borrow)), first_(first), length_(length) {}

 private:
  // A read claim on the memory for a host access, after the wait it needs.
  struct HostClaim {
    const Buffer* buffer = nullptr;
    HostClaim(const HostClaim&) = delete;
    explicit HostClaim(const Buffer* b) : buffer(b) {}
    ~HostClaim();
  };
  HostClaim host_claim(bool writing) const;
  void export_memory();
  template <class T>
  std::span<T> host_span(bool writing) const {
    static_assert(std::is_trivially_copyable_v<T>);
    auto [p, n] = host_bytes(sizeof(T), alignof(T), writing);
    return std::span<T>(reinterpret_cast<T*>(p), n / sizeof(T));
  }
  std::pair<std::byte*, std::size_t> host_bytes(std::size_t size, std::size_t align,
                                                bool writing) const;

  std::shared_ptr<detail::Allocation> alloc_;
  std::shared_ptr<detail::Borrow> borrow_;
  std::size_t first_ = 0, length_ = 0;
};

// The buffer as C code sees it (rig.h); valid while `b` is.
inline const struct rig_buffer* c_buffer(const Buffer& b) { return reinterpret_cast<const struct rig_buffer*>(&b); }

// True iff d's work can address other's memory once borrowed (Buffer::borrow).
bool reaches(const Device& d, const Device& other);

// The host's own claims on memory, which order its accesses against donations.
namespace claim {
// Takes a read claim on b's memory; raises invalid_argument if it is held exclusive.
void read(const Buffer& b);
// Releases a read claim read took.
void release(const Buffer& b);
// The memory a `with` call holds: donation groups it holds exclusive, and memory under its
// read claims.
class Claims {
 public:
  // True iff these claims hold b's memory exclusive.
  bool exclusive(const Buffer& b) const;
  // True iff these claims hold b's memory under a read claim (not exclusive).
  bool reads(const Buffer& b) const;
  // b's memory, which these claims hold, as a new buffer over the same bytes with the same
  // stamps; every earlier buffer over the memory is dead with `why`. The new buffer admits
  // what the memory admits where these claims hold it exclusive, and only Read where they
  // hold a read claim, as other claims may still read it. Raises invalid_argument if b is
  // dead or these claims do not hold its memory.
  Buffer consume(std::string_view why, const Buffer& b);
  const void* id() const { return this; }

  Claims() = default;
  Claims(const Claims&) = delete;
  Claims& operator=(const Claims&) = delete;

 private:
  friend void take(std::span<const Buffer>, std::span<const std::vector<Buffer>>, Claims&);
  friend void give_back(Claims&) noexcept;
  std::vector<const std::vector<Buffer>*> exclusive_;  // the groups held exclusive
  std::vector<Buffer> read_;                           // a read claim each
};
void take(std::span<const Buffer> read, std::span<const std::vector<Buffer>> donate, Claims& claims);
void give_back(Claims& claims) noexcept;
// Calls f(claims) holding a read claim on each of `read`, and each group of `donate`
// exclusive as a whole where no other claim holds any of its memories and none is outside
// the claims, else under read claims; then releases them. f asks claims.exclusive(b) which
// groups it may write over. Raises invalid_argument, taking nothing, if a buffer is dead,
// a memory is read and donated or in two groups, or another claim holds memory exclusive
// that this call must read.
template <class F>
auto with(std::span<const Buffer> read, std::span<const std::vector<Buffer>> donate, F&& f) {
  Claims claims;
  take(read, donate, claims);
  struct Release {
    Claims& claims;
    ~Release() { give_back(claims); }
  } release{claims};
  return f(claims);
}
}  // namespace claim

// Keeps driver objects alive until every submission made with it is done: `release` runs
// once the last handle is gone and every such submission's work is reached.
class Hold {
 public:
  static Hold make(std::function<void()> release);
  explicit Hold(std::shared_ptr<detail::HoldState> s) : state_(std::move(s)) {}
  const std::shared_ptr<detail::HoldState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::HoldState> state_;
};

class Function;

// Code loaded on a device.
class Image {
 public:
  // Loads `binary` on d: a relocatable ELF object for the host device, a code object for
  // AMD, a cubin for NV. Each call loads it again. Error "NAME: reason" if d's driver
  // rejects it; d stays usable. Raises invalid_argument if d loads no code, Lost if d is
  // lost or its driver faults during the load.
  static Result<Image> load(const Device& d, std::span<const std::byte> binary);
  Device device() const;
  // The image's function `name`, made ready to launch, or nullopt if it has none.
  // Raises OutOfMemory if the device has no memory for its launches' needs, Lost if lost.
  std::optional<Function> resolve(std::string_view name) const;
  // May start making `name` ready; returns without waiting. Does nothing on devices that
  // make functions ready at once (all of rig's drivers so far).
  void prepare(std::string_view name) const;

  bool operator==(const Image& o) const { return state_ == o.state_; }
  explicit Image(std::shared_ptr<detail::ImageState> s) : state_(std::move(s)) {}
  const std::shared_ptr<detail::ImageState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::ImageState> state_;
};

// A function of a loaded image; it keeps its image loaded.
class Function {
 public:
  std::string_view name() const;
  Image image() const;
  // The parameter bytes it reads, if its driver knows them; launches must give as many.
  std::optional<std::size_t> params() const;
  // The most threads a group may have, if its driver knows it.
  std::optional<std::size_t> threads() const;
  // The value compiled code names it by (a host function's address, a kernel descriptor's
  // address, a CUfunction). Valid only while the function is reachable.
  std::uintptr_t entry() const;

  bool operator==(const Function& o) const { return state_ == o.state_; }
  explicit Function(std::shared_ptr<detail::FunctionState> s) : state_(std::move(s)) {}
  const std::shared_ptr<detail::FunctionState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::FunctionState> state_;
};

class Run;

// Work prepared once and submitted many times (rig::submit).
class Submission {
 public:
  // 8 parameter bytes at `at` that rig fills at each submit.
  struct Ref {
    enum class What {
      Buffer,     // the address of the run's buffer `slot` plus the offset stored at `at`
      Unordered,  // the same for a fixed buffer `slot`, with no stamps: the caller orders it
      Entry,      // the entry of `function`, which the submission keeps loaded
    };
    std::uint32_t at = 0;
    What what = What::Buffer;
    std::uint32_t slot = 0;
    std::optional<Function> function;
  };
  // One end of a copy: a fixed buffer, or the run's buffer `slot`.
  struct Side {
    std::optional<Buffer> fixed;
    std::uint32_t slot = 0;
  };
  struct Words {  // 32-bit words for the queue, in host memory
    Buffer words;
  };
  struct Fill {  // fn(queue context, arg's host address, value) during the hand-over
    int (*fn)(void* queue, void* arg, std::uint64_t v);
    Buffer arg;
    std::uint32_t ring_units = 0, segment_bytes = 0;
  };
  struct Copy {  // rows of bytes from src into dst, or, with `fill`, dst's rows set to it
    Side src, dst;
    std::vector<Box> boxes;
    std::optional<std::byte> fill;
  };
  struct Launch {  // `function` over a grid, reading `params` parameter bytes
    Function function;
    std::uint32_t params = 0;
    std::vector<Ref> refs;
  };
  // A part: the queue it goes on (by name; "" for the default queue of its kind), the
  // earlier parts it starts after, and its work.
  struct Part {
    std::string queue;
    std::vector<int> after;
    std::variant<Words, Fill, Copy, Launch> work;
  };

  // Prepares `parts` for d. Each submit names `reads` buffers the work reads and `writes`
  // buffers it writes, in that order (the run's buffers, slots 0 … reads+writes-1);
  // `fixed` buffers are used by every submit with the access given. `keep` stays alive,
  // and `hold` is held, while the submission or its work lives.
  // Raises invalid_argument naming d, the part and the reason if: there are no parts; a
  // part's queue is unknown or does not run its kind; an `after` is not an earlier part; a
  // launch's function is of another device or gives fewer bytes than the function reads or
  // more than 4096; a ref is not 8-byte aligned, lies outside the parameters, shares its
  // offset with another, or names a slot or fixed buffer that does not exist; a buffer is
  // dead or on another device; a fixed buffer written admits only Read; a copy's box does
  // not fit its fixed ends.
  static Submission make(const Device& d, std::span<const Part> parts, int reads, int writes,
                         std::span<const std::pair<Buffer, Access>> fixed = {},
                         std::vector<std::shared_ptr<const void>> keep = {},
                         std::optional<Hold> hold = {});
  Device device() const;

  // Where part `part`'s geometry and parameters lie in a Run.
  class Block {
   public:
    int part() const { return part_; }
    std::uint32_t params() const { return params_; }
    const void* owner() const { return owner_; }  // the submission's state

   private:
    friend class Submission;
    friend class Run;
    int part_ = -1;
    std::uint32_t launch_ = 0;   // index among the launches
    std::uint32_t offset_ = 0;   // of the parameters in the run's storage
    std::uint32_t params_ = 0;   // parameter bytes
    std::uint32_t threads_ = 0;  // the function's limit, 0 if unknown
    const void* owner_ = nullptr;
  };
  // Raises invalid_argument if part is not a launch of this submission.
  Block block(int part) const;

  bool operator==(const Submission& o) const { return state_ == o.state_; }
  explicit Submission(std::shared_ptr<detail::SubmissionState> s) : state_(std::move(s)) {}
  const std::shared_ptr<detail::SubmissionState>& state() const { return state_; }

 private:
  std::shared_ptr<detail::SubmissionState> state_;
};

// The caller's storage for one submit at a time: each launch's geometry and parameters.
// It grows to fit the submissions it serves and never shrinks, so submits after the first
// allocate nothing. Groups and threads start at 1, shared memory at 0, parameters at 0.
class Run {
 public:
  Run();
  ~Run();
  Run(Run&&) noexcept;
  Run& operator=(Run&&) noexcept;

  // Raise invalid_argument for a dimension of 0, threads over the function's limit, or a
  // block of no launch.
  void groups(const Submission::Block& b, std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1);
  void threads(const Submission::Block& b, std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1);
  void shared(const Submission::Block& b, std::uint32_t bytes);
  // Stores `value` at byte `offset` of the block's parameters. Raises invalid_argument if
  // it does not lie inside them.
  template <class T>
  void set(const Submission::Block& b, std::size_t offset, T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(param_bytes(b, offset, sizeof(T)), &value, sizeof(T));
  }

  struct Storage;
  Storage& storage() { return *storage_; }

 private:
  std::byte* param_bytes(const Submission::Block& b, std::size_t offset, std::size_t n);
  std::unique_ptr<Storage> storage_;
};

// Submits s once: its work reads `reads` and writes `writes` (the run's buffers, as many as
// s was made with), after `waits`, after the last write of what it reads and after every
// use of what it writes. Returns the point reached once the work is done. A submit that
// waits for nothing allocates nothing.
// Raises invalid_argument if s is another device's … (see docs/api.md): the buffers do not
// match the submission's counts, are dead, on another device, or written while read-only; a
// wait names a value not yet submitted; the parts can never fit the device's queues. Raises
// Lost if the device is lost or a wait's device was lost before reaching it; OutOfMemory if
// the queues must grow and the device has no memory for it.
Point submit(const Submission& s, Run& run, std::span<const Buffer> reads,
             std::span<const Buffer> writes, std::span<const Point> waits = {});

template <class T>
const T* Device::capability(const edge::Key<T>& key) const {
  return static_cast<const T*>(capability_of(&key));
}

namespace detail {
Result<Device> open_io_driver(std::string name, std::string_view rig_version,
                              const std::function<Result<std::unique_ptr<edge::Io>>()>& make);
Result<Device> open_driver(std::string name, std::string_view rig_version,
                           const std::function<Result<std::unique_ptr<edge::Driver>>(volatile std::uint64_t*)>& make);
}

template <class T>
Result<Device> open(const edge::Opener<T>& opener) {
  return detail::open_driver(opener.name, opener.rig_version, [&](volatile std::uint64_t* word)
                                              -> Result<std::unique_ptr<edge::Driver>> {
    auto made = opener.make(word);
    if (!made) return std::unexpected(made.error());
    return std::unique_ptr<edge::Driver>(std::move(*made));
  });
}

template <class T>
Result<Device> open_io(const edge::IoOpener<T>& opener) {
  return detail::open_io_driver(opener.name, opener.rig_version, [&]() -> Result<std::unique_ptr<edge::Io>> {
    auto made = opener.make();
    if (!made) return std::unexpected(made.error());
    return std::unique_ptr<edge::Io>(std::move(*made));
  });
}

}  // namespace rig
