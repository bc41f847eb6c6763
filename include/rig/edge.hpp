// edge.hpp — the C++ side of the contract between rig and its drivers (spec/Rig_edge.txt).
//
// A driver runs one kind of hardware for rig. It implements edge::Driver, whose functions
// rig calls to allocate and map memory, load code and grow queues, and the five C functions
// of rig_edge.h, which run work. A library for memory that the host reads and writes
// through calls, such as files, implements edge::Io instead. A program passes a driver's
// Opener to rig::open.
#pragma once

#include <rig/config.h>
#include <rig/rig_edge.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rig {

// An expected failure, such as a driver rejecting a binary: the value or the reason.
template <class T>
using Result = std::expected<T, std::string>;

// The kinds of work of a part, as rig_edge.h tags them.
enum class Kind : std::uint32_t {
  Words = RIG_KIND_WORDS,    // 32-bit words placed on the queue
  Fill = RIG_KIND_FILL,      // a C function called with the queue's context
  Copy = RIG_KIND_COPY,      // a copy of rows of bytes, or a fill with a byte
  Launch = RIG_KIND_LAUNCH,  // a function of an image over a grid
};

// The kinds of a device's memory.
enum class Memory {
  Device,  // the device's own memory
  Pinned,  // page-locked host memory the device's driver allocates for it
  Mapped,  // the device's own memory, which the host addresses through a window
};

// A device's queue: its name ("COMPUTE:0"), which is its lane in a profile, and the
// kinds of work it runs.
struct Queue {
  std::string name;
  std::vector<Kind> runs;
  bool operator==(const Queue&) const = default;
};

namespace edge {

// How a device's word advances: a store its queue runs, or the host.
enum class Completion { Store, Host };

// The producers a device's queues wait for; rig waits on the host for the others.
struct Waits {
  bool stores = false;  // its queues wait for a Store producer
  bool hosts = false;   // its queues wait for a Host producer
};

// A region of a device's memory, as its driver names it: an opaque value rig gives back
// to the driver's free and locate.
struct Region {
  std::uintptr_t id = 0;
  bool operator==(const Region&) const = default;
};

// Where a region lies.
struct Location {
  std::optional<std::uint64_t> address;  // as the device's work addresses it; none: handle only
  std::optional<std::uintptr_t> host;    // the host address of its first byte, if any
  std::intptr_t handle = 0;              // the driver's object for the region
};

// A driver's answers to a request to map memory (map_host, map_peer).
struct Never {};   // it never maps this memory
struct NoRoom {};  // it has no room for the mapping now; rig may return memory and ask again
using Mapping = std::variant<Region, Never, NoRoom>;

// A key under which a driver's ABI library declares the record compiled code reads.
// Keys compare by identity: define one per record type, as a static object.
template <class T>
class Key {
 public:
  explicit Key(std::string name) : name_(std::move(name)) {}
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;
  std::string_view name() const { return name_; }

 private:
  std::string name_;
};

// A record under its key, as a device's facts carry it.
struct Capability {
  const void* key = nullptr;
  std::shared_ptr<const void> value;
};

template <class T>
Capability declare(const Key<T>& key, std::shared_ptr<const T> value) {
  return Capability{&key, std::move(value)};
}

// What rig reads of a device once, when it opens. rig::open refuses (invalid_argument)
// facts whose copy_engine names no queue or one that does not run Copy, whose hang_ms or
// cache_bytes is below 1, whose alignment is not a power of two, or whose edge is null or
// points to a null driver table.
struct Facts {
  std::string arch;                       // "gfx1100", "sm_90", "x86_64"; "" for no processor
  std::size_t budget = 0;                 // bytes of own memory the device should hold at most
  std::vector<Queue> queues;              // its queues
  std::optional<int> copy_engine;         // the index of its copy engine in queues
  Completion completion = Completion::Host;
  Waits waits;                            // the producers its queues wait for
  bool may_block = false;                 // room/submit/commit may block on the device
  std::optional<int> hang_ms;             // lost after this long without progress
  // Its word moves as its sleep progresses it (a connection the waiting thread polls): rig
  // calls sleep at once, rather than spinning on the word first.
  bool sleep_polls = false;
  bool maps_host = false;                 // it maps page-aligned host memory (map_host)
  // Mapping host memory costs it about a message, whatever the size (no pages pinned): rig
  // borrows a large copy's host side on the device, which copies it directly, rather than
  // packing it into staging.
  bool maps_host_cheaply = false;
  bool host_addresses = false;            // the host addresses every region it allocates
  std::size_t alignment = 1;              // every region's address is a multiple of this
  std::optional<std::size_t> cache_bytes; // its last-level cache
  std::vector<std::pair<std::string, int>> counters;  // measured around each launch
  Capability capability;                  // the ABI record compiled code reads
  // The timeline word: the address rig gave make, or a word of the driver's own, which
  // rig reads through Driver::signaled.
  const volatile std::uint64_t* word = nullptr;
  std::optional<std::string> bus;         // the PCI function's bus address, "0000:03:00.0"
  void* edge = nullptr;                   // the C state; its first member points to a rig_driver
};

// An image the driver loaded, as the driver names it.
using ImageId = std::uintptr_t;

// A binary the driver took: loaded by its library, or to be placed in n bytes of the
// device's memory, where the function gives the image and the bytes rig places at the
// region's start. The function must not block or fault.
struct Loaded {
  ImageId image;
};
struct Place {
  std::size_t bytes;
  std::function<std::pair<ImageId, std::string>(Region)> place;
};
using Code = std::variant<Loaded, Place>;

// A function of an image, as the driver names it.
struct Entry {
  std::uint64_t code = 0;              // what compiled code names it by
  const void* launch = nullptr;        // what submit reads to launch it (rig_launch.launch)
  std::optional<std::size_t> params;   // parameter bytes it reads, from byte 0
  std::optional<std::size_t> threads;  // most threads per group
};
struct Absent {};  // the image has no function of that name
struct NoMemory {  // no memory for what its launches need; rig reclaims and asks again
  std::size_t bytes;
};
using EntryAnswer = std::variant<Entry, Absent, NoMemory>;

// A driver's answer to grow: made, or short of memory (rig reclaims and asks again).
struct Grown {};
struct Short {
  std::size_t bytes;
};
using GrowAnswer = std::variant<Grown, Short>;

// How another PCI function reaches memory by DMA.
struct Bus {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // (address, bytes), 4 KiB multiples
};
struct Dmabuf {
  int fd;              // close-on-exec; the caller closes it
  std::size_t offset;  // of the region's first byte
};
using Dma = std::variant<Bus, Dmabuf>;

// A figure written out for the reason of a RIG_NEVER (rig_never), in a buffer of its own:
// pass its text to %s. Making one allocates nothing.
struct Figure {
  char text[24];
};
// Bytes in the largest binary unit that divides them: "64 KiB", "1 GiB", "1000 bytes".
Figure bytes_figure(std::uint64_t n) noexcept;
// A count from 1024 on as a power of two, or one less, where it is one ("2^33", "2^32-1");
// else its digits ("1000").
Figure count_figure(std::uint64_t n) noexcept;

// A fault of the device: rig loses the device with what() as the reason.
class Fault : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A driver: the functions rig calls on one device besides the C functions. rig calls them
// from any thread, at most one at a time per device (signaled and sleep excepted, which
// any number of threads may call at once), and they may run while a C function of the same
// device runs on another thread: a driver guards the state they share. Nothing runs beside
// stop.
class Driver {
 public:
  virtual ~Driver() = default;

  // The device's facts, read once when it opens. A Fault makes the open return Error.
  virtual Facts facts() = 0;

  // A region of at least `bytes` bytes of memory of kind `memory`, or nullopt if the
  // device has no room now (rig reclaims memory and asks again). Fault: lost.
  virtual std::optional<Region> alloc(Memory memory, std::size_t bytes) = 0;
  // Returns a region that alloc, map_host or map_peer made.
  virtual void free(Region) = 0;
  // Where a region lies.
  virtual Location locate(Region) = 0;

  // A mapping for the device's work of `bytes` bytes of host memory at `host`, which
  // starts on a page. The default maps nothing.
  virtual Mapping map_host(std::uintptr_t host, std::size_t bytes);
  // A mapping of another device's region, located at `peer`.
  virtual Mapping map_peer(const Location& peer, std::size_t bytes);

  // Takes a binary: Error (the driver's reason) when it rejects it.
  virtual Result<Code> image(std::span<const std::byte> binary) = 0;
  // The image's function `name`.
  virtual EntryAnswer entry(ImageId image, std::string_view name) = 0;
  // Unloads an image once the work that used it is done.
  virtual void unload(ImageId image) = 0;

  // Grows the device's queues for parts that room answered RIG_GROW. The default grows
  // nothing: a driver that answers RIG_GROW must override it.
  virtual GrowAnswer grow();

  // The value the device's own word shows, for a word other than the one rig gave.
  virtual std::uint64_t signaled();
  // Blocks until the word shows v or `most` has passed, whichever is first; may return
  // early. The default sleeps on nothing and returns at once (rig then backs off).
  virtual void sleep(std::uint64_t v, std::chrono::nanoseconds most);

  // Stops the device for good, with the reason it was lost. No other call of the driver
  // is in flight, and none follows but free and unload once the word shows the last
  // submitted value.
  virtual void stop(std::string_view why) = 0;

  // How PCI function `pci_function` reaches a region by DMA; Error if the driver cannot.
  virtual Result<Dma> dma(Region region, std::string_view pci_function);
};

// A region of an io device: memory as its library represents it.
struct IoRegion {
  std::uintptr_t id = 0;
};

// A device of memory that the host reads and writes through calls, such as files.
class Io {
 public:
  virtual ~Io() = default;
  // The key its regions are declared under (Buffer::of_io checks it).
  virtual const void* region_key() const = 0;
  // A new region of n bytes; invalid_argument if the library cannot make one.
  virtual IoRegion alloc(std::size_t n) = 0;
  virtual void free(IoRegion) = 0;
  // Reads into `into` the region's bytes from `at` on, and writes `from` there.
  virtual void read(IoRegion, std::uint64_t at, std::span<std::byte> into) = 0;
  virtual void write(IoRegion, std::uint64_t at, std::span<const std::byte> from) = 0;
  // The region's pages in host memory, for borrows; nullopt where it has none.
  virtual std::optional<std::span<std::byte>> pages(IoRegion) = 0;
  // Starts reading n bytes from `at` ahead of their use.
  virtual void prefetch(IoRegion, std::uint64_t at, std::size_t n) = 0;
  // Stops the device for good, with the reason it was lost. No other call is in flight, and
  // none follows but free, which rig calls for each region once the work that used its
  // pages is done: the pages stay valid until then.
  virtual void stop(std::string_view why) = 0;
};

// An opener of a named device. Making one opens nothing: make opens a new device handle
// whose timeline word lies at `word`, or gives an Error when it cannot, such as when the
// hardware is missing. make may raise the word's value, never lower it.
//
// A driver built outside rig pins the exact rig version it was built against (the contract
// may change in any minor release): `rig_version` is the version of the headers the opener
// was made with, which rig::open compares with the library's own and refuses when they
// differ. Leave it as it is.
template <class T = Driver>
struct Opener {
  std::string name;
  std::function<Result<std::unique_ptr<T>>(volatile std::uint64_t* word)> make;
  std::string_view rig_version = RIG_VERSION;
};

// An opener of a named io device; rig_version as for Opener.
template <class T = Io>
struct IoOpener {
  std::string name;
  std::function<Result<std::unique_ptr<T>>()> make;
  std::string_view rig_version = RIG_VERSION;
};

}  // namespace edge
}  // namespace rig
