// fake_driver.hpp — a driver over host memory whose queue runs only when a test steps it.
//
// It is the skeleton new drivers start from (as IREE's null driver is): fake_driver.cpp
// keeps the whole contract of spec/Rig_edge.txt in one short file, each obligation beside
// the sentence it keeps. Tests use it to drive rig's core deterministically: work runs when
// the test calls Control::step, or when rig sleeps in the driver; any call can be made to
// fail; and the driver records every breach of the contract by its caller (violations).
//
// The device: queues "COMPUTE:0" {Words, Fill, Copy, Launch} and, if Options::copy_queue,
// "COPY:0" {Words, Copy, Fill}, its copy engine. Memory is host memory, aligned to 256, whose
// device address is its host address. Its queues hold Options::capacity entries, one per
// part and one per wait; grow doubles them up to Options::grow_to. It commits on its own
// every Options::commit_every values (k = 1: submit always returns RIG_COMMITTED). A Fill's
// function is called during submit (rig_edge.h); Words are logged when they run; a launch
// calls the Kernel defined under its function's name. A timed value's start and end are
// written before the word shows it. stop drops the queued work and raises the word to the
// last submitted value. An own word is an 8-byte region that rig frees after stop. make
// opens a new handle even while an earlier one is not stopped.
#pragma once

#include <rig/edge.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace rig::fake {

// The calls of the driver where a failure, or a "no room" answer, can be injected.
enum class Call { Room, Submit, Commit, Settle, Alloc, Map, Image, Entry, Grow, Signaled };

struct Options {
  std::string arch = "fake";
  std::size_t budget = 64 << 20;        // the facts' budget
  std::optional<std::size_t> memory{};  // live bytes alloc hands out, then nullopt; default budget
  std::uint32_t capacity = 64;          // queue entries: one per part, one per wait
  std::uint32_t grow_to = 256;          // the most entries grow reaches
  bool may_block = false;
  std::uint32_t commit_every = 1;       // k: it commits on its own every k values
  edge::Waits waits{true, true};        // the producers its queues wait for in-queue
  edge::Completion completion = edge::Completion::Store;
  bool own_word = false;                // a word of its own, read through signaled
  bool copy_queue = true;               // a second queue "COPY:0" as the copy engine
  std::optional<int> hang_ms{};
  bool runs_when_asleep = true;         // sleep runs committed work; else only step does
  bool place_images = false;            // image answers Place instead of Loaded
  bool host_addresses = true;           // false: locate gives no host address (like VRAM),
                                        // so rig copies through staging memory; Pinned
                                        // memory still has one
  bool maps_host = true;                // false: it maps no host memory, so rig stages its
                                        // copies through its Pinned memory
  bool maps_host_cheaply = false;       // the facts' maps_host_cheaply
  std::vector<std::pair<std::string, int>> counters{};  // measured per launch: values 1, 2, 3…
};

// The context a Fill part's function is called with, during submit: the queue it writes
// to. The words it appends run with the value's other parts and appear in the log.
struct FillQueue {
  std::uint32_t queue;
  std::vector<std::uint32_t> words;
};

// A part that ran, in the order parts ran: its value, its queue, its kind and its words
// (a Words part's, or those its Fill function wrote).
struct Ran {
  std::uint64_t value;
  std::uint32_t queue;
  Kind kind;
  std::vector<std::uint32_t> words;
};

// A kernel: what a launch of the image function of the same name runs, once per launch
// (it walks the grid itself if it cares), given the launch's parameter bytes.
using Kernel = std::function<void(std::span<const std::byte> params, const rig_launch&)>;

class Driver;

// The test's side of the fake devices one opener makes, shared with them. Queue calls act
// on the device that make opened last. Thread-safe; a kernel must not call step.
class Control {
 public:
  Control();
  ~Control();

  // Runs up to n committed values, in order; returns how many ran. It stops early at a
  // value whose waits are not yet met (its producer's word is below the wait's value).
  std::size_t step(std::size_t n = SIZE_MAX);
  // Values submitted and not yet run, committed or not.
  std::uint64_t pending() const;
  // Faults the device now, as a GPU's page fault would: its word stops, and later submits,
  // commits, settles and sleeps fail with `why`.
  void fault(std::string why);

  // Fails the n-th call (1-based) of a kind, or each with probability p from `seed`: the C
  // functions return RIG_FAILED with `why` (room answers RIG_NEVER), the C++ functions
  // throw edge::Fault(why), image returns Error(why).
  void fail_nth(Call, std::uint64_t n, std::string why = "injected");
  void fail_with_probability(Call, double p, std::uint64_t seed, std::string why = "injected");
  // Answers the n-th call of a kind "no room": room RIG_LATER, alloc nullopt, map_host
  // NoRoom, entry NoMemory, grow Short. invalid_argument for the other kinds.
  void no_room_nth(Call, std::uint64_t n);
  // How many calls of a kind were made.
  std::uint64_t calls(Call) const;

  // Regions alloc and map_host made and free has not returned; their bytes
  // (allocations only); images loaded and not unloaded. For leak checks.
  std::size_t live_regions() const;
  std::size_t live_bytes() const;
  std::size_t live_images() const;
  // The host memory map_host mapped and free has not returned: (address, bytes) each.
  std::vector<std::pair<std::uintptr_t, std::size_t>> mappings() const;
  // Sets the live bytes alloc hands out before it answers nullopt.
  void set_memory(std::size_t bytes);

  // Whether the last device made was stopped, and the reason rig gave.
  bool stopped() const;
  std::string stop_reason() const;

  // Registers the kernel that launches of image functions named `name` run. A launch of a
  // function without one faults the device.
  void define(std::string name, Kernel kernel);
  // The parts that ran, in order.
  std::vector<Ran> log() const;
  // The breaches of the contract by the driver's caller, such as a call after stop, two
  // calls of one device at once, a submit out of order, or a copy outside its regions'
  // bytes; each is also printed to stderr. A test of rig checks it stays empty.
  std::vector<std::string> violations() const;

 private:
  friend class Driver;
  struct State;
  std::unique_ptr<State> s_;
  std::unique_lock<std::recursive_mutex> lock() const;
};

// An opener of fake devices named `name`, and their Control. invalid_argument if
// commit_every is 0 or grow_to is below capacity.
std::pair<edge::Opener<>, std::shared_ptr<Control>> opener(std::string name, Options options = {});

}  // namespace rig::fake
