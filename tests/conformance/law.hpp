// law.hpp — what the laws share: checks, skips, the devices a law opens, and small
// operations on buffers and submissions. Internal to the conformance library.
#pragma once

#include "conformance.hpp"
#include "fake_driver.hpp"
#include "faulty.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace rig::conformance::detail {

using namespace std::chrono_literals;

// A law's check failed: the message says what was expected and what happened.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The law does not apply to the target: the reason names the missing capability.
struct Skip {
  std::string why;
};

template <class... A>
void require(bool ok, fmt::format_string<A...> f, A&&... a) {
  if (!ok) throw Failure(fmt::format(f, std::forward<A>(a)...));
}
template <class... A>
[[noreturn]] void fail(fmt::format_string<A...> f, A&&... a) {
  throw Failure(fmt::format(f, std::forward<A>(a)...));
}
[[noreturn]] inline void skip(std::string why) { throw Skip{std::move(why)}; }

// The name of an exception type, for messages.
template <class E>
constexpr std::string_view exception_name() {
  if constexpr (std::is_same_v<E, Lost>) return "Lost";
  else if constexpr (std::is_same_v<E, OutOfMemory>) return "OutOfMemory";
  else if constexpr (std::is_same_v<E, std::invalid_argument>) return "invalid_argument";
  else return "an exception";
}

// Calls f and checks it throws E; returns E's message. Fails naming `what` otherwise.
template <class E, class F>
std::string expect_throw(std::string_view what, F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    fail("{}: expected {}, but it raised: {}", what, exception_name<E>(), e.what());
  }
  fail("{}: expected {}, but it returned", what, exception_name<E>());
}

// A name no device has had in this process: "BASE~n".
std::string unique(std::string_view base);

// f running on a thread of its own, which is left running if the law ends first: f must
// capture by value what it uses.
class Async {
 public:
  explicit Async(std::function<void()> f);
  bool ended() const;
  // Waits at most `limit` for f to end; true if it did.
  bool wait(std::chrono::milliseconds limit) const;
  // Once ended: "" if f returned, else the message of what it raised.
  std::string raised() const;
  bool raised_lost() const;
  // Rethrows what f raised, if anything.
  void rethrow() const;
  // Rethrows what f raised, if anything but Lost.
  void rethrow_unless_lost() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

// Runs f on a thread of its own and waits for it at most `limit`: true if it returned (its
// exception, if any, rethrown here), false if it is still running (the thread is left).
bool within(std::chrono::milliseconds limit, std::function<void()> f);
// The same for f that may raise Lost: nullopt if it is still running, "" if it returned, and
// the Lost's message if it raised one.
std::optional<std::string> lost_within(std::chrono::milliseconds limit, std::function<void()> f);

// The devices a law opens: closed when the law ends, and checked for breaches of the
// contract that their drivers recorded.
class Context {
 public:
  explicit Context(const Target& target);
  ~Context();
  Context(const Context&) = delete;

  const Target& target;

  // A device for a law that neither loses nor closes it: the target's shared device, or a
  // new one.
  Opened device();
  // A new device of the target, which the law may lose or close. Skips where the target
  // opens no new devices.
  Opened fresh(const Wrap& wrap = {});
  // A new device of the target whose driver is wrapped in a fault-injecting one.
  std::pair<Opened, std::shared_ptr<faulty::Control>> faulty();
  // A new memory device, for work beside the target's.
  Device memory();
  // A new fake device whose work runs only when the law steps it (Control::step), its opener
  // passed through `wrap` where wrap is non-null.
  std::pair<Device, std::shared_ptr<fake::Control>> held_fake(fake::Options options = {}, const Wrap& wrap = {});

  // Adds a line to the law's outcome, such as a part of it that did not apply.
  void note(std::string line) { notes.push_back(std::move(line)); }
  std::vector<std::string> notes;

  // Closes every device opened here that is not lost, stepping those that need it, each
  // within a bound; returns what went wrong (closes that did not return, breaches).
  std::vector<std::string> finish();

 private:
  struct Owned {
    Device device;
    std::function<std::size_t(std::size_t)> step;
    std::function<std::vector<std::string>()> violations;
    bool close = true;
  };
  Opened own(Opened o);
  std::vector<Owned> owned_;
  bool finished_ = false;
};

// Steps devices whose work runs only when a test steps them, every 100 µs until it goes, as
// their hardware would: for work on one of them that waits in its queue for another's value,
// which rig does not sleep in.
class Clock {
 public:
  explicit Clock(std::vector<Opened> devices);
  ~Clock();
  Clock(const Clock&) = delete;

 private:
  std::shared_ptr<std::atomic<bool>> stop_;
  std::thread thread_;
};

// --- Slow copy engines (Target::copy_bytes_per_second) -----------------------------------
// The bytes of a law's buffers: `n`, or on a target whose copies are slow, what it copies in
// about a quarter of a second, in whole pages (one at least) and no more than n.
std::size_t copy_size(const Context& c, std::size_t n);
// How long a law waits for work that copies `bytes`: `limit`, or on a target whose copies are
// slow, four times what they take at its rate where that is longer.
std::chrono::milliseconds copy_limit(const Context& c, std::size_t bytes, std::chrono::milliseconds limit = 10s);

// --- Bytes --------------------------------------------------------------------------------

std::vector<std::uint8_t> pattern(std::size_t n, std::uint64_t seed);
void put(Buffer& b, const std::vector<std::uint8_t>& bytes, std::size_t at = 0);
std::vector<std::uint8_t> get(const Buffer& b);
// Fails unless b holds `expected`, naming the first byte that differs.
void expect_bytes(const Buffer& b, const std::vector<std::uint8_t>& expected, std::string_view what);
void expect_all(const Buffer& b, std::uint8_t byte, std::string_view what);

// --- Devices and work ---------------------------------------------------------------------

bool runs(const Device& d, Kind k);
// The names of the device's queues that run Copy.
std::vector<std::string> copy_queues(const Device& d);
// Skips unless the device has a copy engine: the laws' own work is copies.
void need_copy_engine(const Device& d);

// A submission of one copy of src into dst (whole buffers), or of a fill of dst with a byte,
// on the named queue ("": the default one).
Submission copy_submission(const Device& d, const Buffer& src, const Buffer& dst, std::string queue = "");
Submission fill_submission(const Device& d, const Buffer& dst, std::uint8_t byte, std::string queue = "");
// Submits s once (no run buffers).
Point go(const Submission& s, std::span<const Point> waits = {});

// The value the device's word shows, read as another device's queue reads it: with no call of
// rig, so nothing is committed.
std::uint64_t raw_word(const Device& d);

// Returns once p is reached, stepping the device where it needs it; false after `limit`.
bool settle(const Opened& o, Point p, std::chrono::milliseconds limit = 10s);

}  // namespace rig::conformance::detail
