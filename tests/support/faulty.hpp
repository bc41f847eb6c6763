// faulty.hpp — a driver that wraps any other driver and injects failures into its calls.
//
// faulty::wrap(opener) is an opener whose devices are the inner opener's, with every call
// forwarded, except the calls a test arms to fail. It works with any edge::Opener: the fake
// driver, the host's memory device driver (rig::cpu::make_memory_driver), the host device's
// driver, or a hardware driver.
//
// The C functions go through the wrapper's own C state: the facts' edge is the wrapper's, whose
// first member points to the wrapper's struct rig_driver, and each of its functions forwards to
// the inner driver's table with the inner edge. settle and measures are NULL where the inner
// driver's are. The word, the queues and every other fact are the inner driver's.
//
// What an injected failure does, by call:
//   Room      fail: RIG_NEVER with the reason (a refusal: rig raises invalid_argument, the
//             device goes on); no room: RIG_LATER. The inner driver's reasons pass through.
//   Submit    fail: RIG_FAILED with the reason, without handing the parts to the inner driver
//   Commit    fail: RIG_FAILED with the reason
//   Settle, Measures   fail: RIG_FAILED with the reason
//   Alloc     fail: throws edge::Fault; no room: nullopt
//   Map       (map_host and map_peer) fail: throws edge::Fault; no room: NoRoom
//   Image     fail: throws edge::Fault (a fault of the device, not a rejection); no room: Error
//   Entry     fail: throws edge::Fault; no room: NoMemory
//   Grow      fail: throws edge::Fault; no room: Short
//   Signaled  fail: throws edge::Fault (rig calls it only for a word of the driver's own)
//   Sleep     fail: throws edge::Fault, as a device that faulted while rig waited
// An armed call fails on its n-th call (1-based, counted from the wrap's first device), or each
// call with probability p from a seed. An injected failure changes nothing in the inner
// driver: rig loses the device for it and stops the inner driver as for any loss.
#pragma once

#include <rig/edge.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace rig::faulty {

class Driver;

// The calls of a driver where a failure, or a "no room" answer, can be injected.
enum class Call { Room, Submit, Commit, Settle, Measures, Alloc, Map, Image, Entry, Grow, Signaled, Sleep };
inline constexpr int kCalls = 12;

// The name of a call, as the wrapper's messages spell it ("submit").
std::string_view name(Call);

// The test's side of the devices one wrapped opener makes. Thread-safe.
class Control {
 public:
  Control();
  ~Control();

  // Fails the n-th call of a kind (counted over the whole wrap), or each call with
  // probability p from `seed`, with reason `why`. fail_nth with n = 0 disarms the kind.
  void fail_nth(Call, std::uint64_t n, std::string why = "injected fault");
  void fail_with_probability(Call, double p, std::uint64_t seed, std::string why = "injected fault");
  // Fails the next call of a kind: fail_nth(c, calls(c) + 1, why).
  void fail_next(Call, std::string why = "injected fault");
  // Answers "no room" on the n-th call of a kind, or with probability p. invalid_argument for
  // Submit, Commit, Settle, Measures, Signaled and Sleep, which have no such answer.
  void no_room_nth(Call, std::uint64_t n);
  void no_room_with_probability(Call, double p, std::uint64_t seed);
  // Disarms every kind.
  void disarm();
  // Calls f after each stop of the inner driver, before rig's stop returns: for a test that
  // lets other devices run at the moment a lost device's word may show its dropped values.
  void after_stop(std::function<void()> f);

  // How many calls of a kind the wrapper saw, and how many it failed or answered "no room".
  std::uint64_t calls(Call) const;
  std::uint64_t injected(Call) const;
  std::uint64_t injected() const;  // of every kind

  struct State;

 private:
  friend class Driver;
  std::unique_ptr<State> s_;
};

// An opener of the inner opener's devices, under `name` (default: the inner one's), wrapped,
// and its Control.
std::pair<edge::Opener<>, std::shared_ptr<Control>> wrap(edge::Opener<> inner, std::string name = "");

}  // namespace rig::faulty
