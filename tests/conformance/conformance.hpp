// conformance.hpp — the laws every driver must keep, run against every device present.
//
// A law is one promise of the contract (spec/Rig_edge.txt, spec/Rig.Buffer.txt), written once
// and named after the promise: "device order: a value starts after the previous one completes
// on every queue". A target is a kind of device that the laws run on: the host device, a
// memory device, the fake driver in one of its configurations, a simulator, a GPU. run()
// runs every law on one target and gives each law's outcome: passed, failed with a message,
// or skipped with the reason (a capability the device's facts say it lacks, or a hook the
// target does not give).
//
// A driver's folder registers its targets with a Registration (docs/conformance.md):
//
//   static rig::conformance::Registration cuda_targets{"cuda", [] {
//     std::vector<rig::conformance::Target> out;
//     for (int i = 0; i < rig::cuda::count(); ++i)
//       out.push_back(rig::conformance::driver_target(fmt::format("CUDA:{}", i),
//                                                     [i] { return rig::cuda::opener(i); }, 1));
//     return out;
//   }};
#pragma once

#include <rig/rig.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig::conformance {

// A device a target opened, with what the laws may ask of it beyond rig's API. Every hook
// is optional.
struct Opened {
  Device device;
  // Runs up to n of the device's committed values, as its hardware would, and returns how
  // many ran: for a device whose work runs only when a test steps it (the fake driver, whose
  // work otherwise runs only while rig sleeps in it). Null for a device that runs on its own.
  std::function<std::size_t(std::size_t n)> step;
  // The bytes of memory its driver holds now, for leak checks. Null where unknown.
  std::function<std::size_t()> live_bytes;
  // The breaches of the contract by rig that its driver recorded. Null where it records none.
  std::function<std::vector<std::string>()> violations;
  // Submits one value of work that runs for at least the given time and returns its point.
  // Null where the target has no such work.
  std::function<Point(std::chrono::milliseconds)> slow;

  Opened(Device d) : device(std::move(d)) {}  // NOLINT: a device with no hooks
};

// Turns a device's opener into another one, such as one that wraps its driver in a
// fault-injecting driver (tests/support/faulty.hpp).
using Wrap = std::function<edge::Opener<>(edge::Opener<>)>;

// A kind of device the laws run on.
struct Target {
  std::string name;   // what `rig conform --device` takes: "CPU", "MEM", "FAKE/own_word", "CUDA:0"
  std::string about;  // one line: the driver and its configuration
  // Opens a new device of the target, with its driver's opener passed through `wrap` where
  // wrap is non-null. Null where the target cannot open another device: the laws that lose,
  // close or wrap a device then skip.
  std::function<Opened(const Wrap& wrap)> open;
  // The device the laws use when they neither lose nor close it, such as the host device,
  // which a process opens once. Null: each law opens a new one.
  std::function<Opened()> shared;
  // k: the driver commits on its own at least once every k values (spec: "The C functions"),
  // as its interface states. nullopt where unknown: the law that checks it skips.
  std::optional<std::uint64_t> commit_bound;
  // A binary the device loads, and the name of a function in it. Empty where none: the laws
  // of images skip.
  std::vector<std::byte> image;
  std::string function;
  // For an io device (edge::Io, such as the disk device): a new region of the device `d`
  // holding `contents`, as a buffer (Buffer::of_io) admitting `access`. Non-null marks an
  // io target, on which the io laws run instead of the laws of devices that compute.
  std::function<Buffer(const Device& d, std::span<const std::byte> contents, Access access)> io_region;
  // Bytes a second its copy engine moves at most, where that is so slow that the laws' own
  // sizes would outlast their time limits (QEMU's edu: one 4 KiB transfer per 100 ms of the
  // VM's clock). The laws that move many bytes then move fewer, and wait for them as long as
  // their bytes need at this rate (copy_size, copy_limit): the order laws, copies across
  // memory kinds, reader and writer, both memory returns, the staging loss, the two-thread
  // model and the busy close (docs/conformance.md, "Slow copy engines"). nullopt: the laws'
  // sizes and limits as they are, which every device but such a one meets.
  std::optional<double> copy_bytes_per_second;
};

// The built-in io target: an io device over regions of host memory (tests/support/memory_io.hpp).
Target memory_io_target();

// A target whose devices a driver's opener opens: make() is called for each new device, and
// each device is opened under a name of its own ("NAME~3"), since rig keeps one live device
// per name. Each device's live_bytes counts the bytes its driver allocated for rig (alloc)
// that rig has not freed.
Target driver_target(std::string name, std::function<edge::Opener<>()> make,
                     std::optional<std::uint64_t> commit_bound, std::string about = "");

// The bytes of the file at `path`, for a target's image (a committed kernel binary); throws
// std::runtime_error naming the file when it cannot be read.
std::vector<std::byte> file_bytes(const std::string& path);

// The targets built in: the host device, a memory device, and the fake driver in each of its
// configurations. targets() is every target present: the host device and a memory device,
// then every registered target in the order registrations ran, then the fake driver's
// configurations.
std::vector<Target> builtin_targets();
std::vector<Target> targets();

// Registers a source of targets, which targets() calls each time, so that a driver can probe
// its hardware and give none where it finds none. Use it at static initialisation through a
// Registration object, or call add_targets before targets().
void add_targets(std::string source, std::function<std::vector<Target>()> make);
struct Registration {
  Registration(std::string source, std::function<std::vector<Target>()> make) {
    add_targets(std::move(source), std::move(make));
  }
};

// For a target's slow work (Opened::slow) on a device whose queue can wait on memory:
// submits `words` — which make COMPUTE:0 wait until the first `width` (4 or 8) bytes of
// `flag` reach `n` — as one value, in a new buffer of `memory`, and starts a thread that,
// once the device's word shows the value before it, waits `ms` and stores `n` into the flag.
// The thread keeps the flag's buffer until it wrote it, and gives up if the device is lost.
// Returns the value's point.
Point submit_flag_wait(const Device& device, std::span<const std::uint32_t> words, Memory memory,
                       const Buffer& flag, std::uint64_t n, std::size_t width, std::chrono::milliseconds ms);

enum class Status { Passed, Failed, Skipped };
std::string_view status_name(Status);  // "pass", "FAIL", "skip"

// One law's outcome on one target.
struct Outcome {
  std::string law;
  Status status = Status::Passed;
  std::string message;  // why it failed or was skipped; "" when it passed
  double seconds = 0;
};

// A law: its name (the promise) and, where the core does not yet keep it, the core's missing
// behaviour. A law with a core gap that fails is reported skipped with that gap named; once it
// passes, its gap note is stale.
struct Law {
  std::string name;
  std::string core_gap;
};
const std::vector<Law>& laws();

struct RunOptions {
  std::vector<std::string> only;  // law names to run; empty: all
  // The longest a law may run before it counts as a hang; the target's later laws are then
  // skipped, since the hung law may still hold its devices.
  std::chrono::seconds timeout{60};
  std::function<void(const Outcome&)> on_outcome;  // called as each law ends
};

// The names of the laws that run on the target, in the order run() runs them.
std::vector<std::string> law_names(const Target& target);

// Runs the laws on one target.
std::vector<Outcome> run(const Target& target, const RunOptions& options = {});

// True once a law hung on some target in this process (its thread is left running).
bool hung();

// Whether this build runs under AddressSanitizer or ThreadSanitizer.
bool sanitized();

// How much work the laws do: 1 normally, less under sanitizers or where RIG_CONFORMANCE_SCALE
// (a number, such as 0.2) says.
double scale();

// How many times longer than normal a target's code takes here: 4 under sanitizers (whose
// threads run several times slower, and may be starved for longer on a loaded machine), else
// 1. Targets multiply their drivers' hang_ms by it, so that slowness is not taken for a hang.
int slowdown();

// The results of a run, one suite per target, as JUnit XML.
struct Suite {
  std::string target;
  std::vector<Outcome> outcomes;
};
std::string junit(const std::vector<Suite>& suites);

}  // namespace rig::conformance
