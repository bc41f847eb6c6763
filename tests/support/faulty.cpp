// faulty.cpp — a wrapping driver that injects failures into any driver's calls (faulty.hpp).
#include "faulty.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <deque>
#include <mutex>
#include <random>
#include <stdexcept>

namespace rig::faulty {

std::string_view name(Call c) {
  static constexpr std::string_view names[kCalls] = {"room",  "submit", "commit", "settle",
                                                     "measures", "alloc", "map", "image",
                                                     "entry", "grow",   "signaled", "sleep"};
  return names[int(c)];
}

namespace {

// Injected answers for one kind of call: the n-th call, or each with probability p.
struct Plan {
  std::uint64_t nth = 0;
  double p = 0;
  std::mt19937_64 rng;
  std::string why;
  bool hits(std::uint64_t n) {
    return (nth != 0 && n == nth) || (p > 0 && std::uniform_real_distribution<>(0, 1)(rng) < p);
  }
};

enum class Answer { Go, NoRoom, Fail };

}  // namespace

struct Control::State {
  mutable std::mutex m;
  std::array<Plan, kCalls> fail, no_room;
  std::array<std::uint64_t, kCalls> calls{}, injected{};
  std::deque<std::string> messages;  // failures handed to rig: they outlive the devices
  std::function<void()> after_stop;

  // Counts a call and gives its injected answer; `why` is the failure's message.
  Answer ask(Call c, std::string& why) {
    std::lock_guard g(m);
    const int i = int(c);
    const std::uint64_t n = ++calls[std::size_t(i)];
    if (fail[std::size_t(i)].hits(n)) {
      ++injected[std::size_t(i)];
      why = fmt::format("{} (faulty: {} call {})", fail[std::size_t(i)].why, name(c), n);
      return Answer::Fail;
    }
    if (no_room[std::size_t(i)].hits(n)) {
      ++injected[std::size_t(i)];
      return Answer::NoRoom;
    }
    return Answer::Go;
  }
  const char* keep(std::string why) {
    std::lock_guard g(m);
    return messages.emplace_back(std::move(why)).c_str();
  }
};

// A device of the inner driver, seen through the wrapper.
class Driver final : public edge::Driver {
  // The wrapper's C state: "the state's first member must point to the driver's struct
  // rig_driver".
  struct Edge {
    const rig_driver* table;
    Driver* self;
  };

  std::shared_ptr<Control> control_;
  Control::State& s_;
  std::unique_ptr<edge::Driver> inner_;
  void* inner_edge_ = nullptr;
  const rig_driver* inner_c_ = nullptr;
  rig_driver table_{};
  Edge edge_{&table_, this};

 public:
  Driver(std::shared_ptr<Control> control, std::unique_ptr<edge::Driver> inner)
      : control_(std::move(control)), s_(*control_->s_), inner_(std::move(inner)) {}

  edge::Facts facts() override {
    edge::Facts f = inner_->facts();
    // Facts rig refuses (a null edge or table) pass through as they are, so rig refuses them.
    if (!f.edge || !*static_cast<const rig_driver* const*>(f.edge)) return f;
    inner_edge_ = f.edge;
    inner_c_ = *static_cast<const rig_driver* const*>(f.edge);
    table_ = rig_driver{room, submit, commit, inner_c_->settle ? settle : nullptr,
                        inner_c_->measures ? measures : nullptr};
    f.edge = &edge_;
    return f;
  }

  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override {
    if (no_room(Call::Alloc)) return std::nullopt;
    return inner_->alloc(memory, bytes);
  }
  void free(edge::Region r) override { inner_->free(r); }
  edge::Location locate(edge::Region r) override { return inner_->locate(r); }

  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes) override {
    if (no_room(Call::Map)) return edge::NoRoom{};
    return inner_->map_host(host, bytes);
  }
  edge::Mapping map_peer(const edge::Location& peer, std::size_t bytes) override {
    if (no_room(Call::Map)) return edge::NoRoom{};
    return inner_->map_peer(peer, bytes);
  }

  Result<edge::Code> image(std::span<const std::byte> binary) override {
    std::string why;
    switch (s_.ask(Call::Image, why)) {
      case Answer::Fail: throw edge::Fault(why);
      case Answer::NoRoom: return std::unexpected(std::string("faulty: the image was rejected"));
      case Answer::Go: break;
    }
    return inner_->image(binary);
  }
  edge::EntryAnswer entry(edge::ImageId image, std::string_view name) override {
    if (no_room(Call::Entry)) return edge::NoMemory{4096};
    return inner_->entry(image, name);
  }
  void unload(edge::ImageId image) override { inner_->unload(image); }

  edge::GrowAnswer grow() override {
    if (no_room(Call::Grow)) return edge::Short{4096};
    return inner_->grow();
  }

  std::uint64_t signaled() override {
    std::string why;
    if (s_.ask(Call::Signaled, why) == Answer::Fail) throw edge::Fault(why);
    return inner_->signaled();
  }
  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override {
    std::string why;
    if (s_.ask(Call::Sleep, why) == Answer::Fail) throw edge::Fault(why);
    inner_->sleep(v, most);
  }

  void stop(std::string_view why) override {
    inner_->stop(why);
    std::function<void()> then;
    {
      std::lock_guard g(s_.m);
      then = s_.after_stop;
    }
    if (then) then();
  }
  Result<edge::Dma> dma(edge::Region region, std::string_view pci_function) override {
    return inner_->dma(region, pci_function);
  }

 private:
  static Driver& self(void* edge) { return *static_cast<Edge*>(edge)->self; }

  // For the C++ functions: an injected failure throws edge::Fault; true for "no room".
  bool no_room(Call c) {
    std::string why;
    auto a = s_.ask(c, why);
    if (a == Answer::Fail) throw edge::Fault(why);
    return a == Answer::NoRoom;
  }
  int failed(const char** failure, std::string why) {
    *failure = s_.keep(std::move(why));
    return RIG_FAILED;
  }

  // ---- The C functions: each forwards to the inner table with the inner edge.

  // An injected failure is a RIG_NEVER whose reason names the injection; else the inner
  // driver's answer, and its reason, pass through.
  static int room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
    auto& d = self(edge);
    std::string injected;
    switch (d.s_.ask(Call::Room, injected)) {
      case Answer::Fail: return rig_never(why, "%s", injected.c_str());
      case Answer::NoRoom: return RIG_LATER;
      case Answer::Go: break;
    }
    return d.inner_c_->room(d.inner_edge_, parts, count, waits, why);
  }
  static int submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                    std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times, const char** failure) {
    auto& d = self(edge);
    std::string why;
    if (d.s_.ask(Call::Submit, why) == Answer::Fail) return d.failed(failure, std::move(why));
    return d.inner_c_->submit(d.inner_edge_, parts, count, waits, wait_count, v, times, failure);
  }
  static int commit(void* edge, std::uint64_t v, const char** failure) {
    auto& d = self(edge);
    std::string why;
    if (d.s_.ask(Call::Commit, why) == Answer::Fail) return d.failed(failure, std::move(why));
    return d.inner_c_->commit(d.inner_edge_, v, failure);
  }
  static int settle(void* edge, std::uint64_t v, std::uint64_t* times, const char** failure) {
    auto& d = self(edge);
    std::string why;
    if (d.s_.ask(Call::Settle, why) == Answer::Fail) return d.failed(failure, std::move(why));
    return d.inner_c_->settle(d.inner_edge_, v, times, failure);
  }
  static int measures(void* edge, std::uint64_t v, std::uint64_t* out, const char** failure) {
    auto& d = self(edge);
    std::string why;
    if (d.s_.ask(Call::Measures, why) == Answer::Fail) return d.failed(failure, std::move(why));
    return d.inner_c_->measures(d.inner_edge_, v, out, failure);
  }
};

// ---- Control and the wrap.

Control::Control() : s_(std::make_unique<State>()) {}
Control::~Control() = default;

void Control::fail_nth(Call c, std::uint64_t n, std::string why) {
  std::lock_guard g(s_->m);
  s_->fail[std::size_t(c)] = Plan{n, 0, {}, std::move(why)};
}
void Control::fail_with_probability(Call c, double p, std::uint64_t seed, std::string why) {
  std::lock_guard g(s_->m);
  s_->fail[std::size_t(c)] = Plan{0, p, std::mt19937_64(seed), std::move(why)};
}
void Control::fail_next(Call c, std::string why) {
  std::lock_guard g(s_->m);
  s_->fail[std::size_t(c)] = Plan{s_->calls[std::size_t(c)] + 1, 0, {}, std::move(why)};
}

static void check_no_room(Call c) {
  switch (c) {
    case Call::Submit: case Call::Commit: case Call::Settle: case Call::Measures:
    case Call::Signaled: case Call::Sleep:
      throw std::invalid_argument(fmt::format("faulty: {} has no \"no room\" answer", name(c)));
    default: break;
  }
}
void Control::no_room_nth(Call c, std::uint64_t n) {
  check_no_room(c);
  std::lock_guard g(s_->m);
  s_->no_room[std::size_t(c)] = Plan{n, 0, {}, {}};
}
void Control::no_room_with_probability(Call c, double p, std::uint64_t seed) {
  check_no_room(c);
  std::lock_guard g(s_->m);
  s_->no_room[std::size_t(c)] = Plan{0, p, std::mt19937_64(seed), {}};
}
void Control::disarm() {
  std::lock_guard g(s_->m);
  for (auto& p : s_->fail) p = Plan{};
  for (auto& p : s_->no_room) p = Plan{};
}
void Control::after_stop(std::function<void()> f) {
  std::lock_guard g(s_->m);
  s_->after_stop = std::move(f);
}
std::uint64_t Control::calls(Call c) const {
  std::lock_guard g(s_->m);
  return s_->calls[std::size_t(c)];
}
std::uint64_t Control::injected(Call c) const {
  std::lock_guard g(s_->m);
  return s_->injected[std::size_t(c)];
}
std::uint64_t Control::injected() const {
  std::lock_guard g(s_->m);
  std::uint64_t n = 0;
  for (auto x : s_->injected) n += x;
  return n;
}

std::pair<edge::Opener<>, std::shared_ptr<Control>> wrap(edge::Opener<> inner, std::string name) {
  auto control = std::make_shared<Control>();
  if (name.empty()) name = inner.name;
  auto make = [control, inner = std::move(inner)](volatile std::uint64_t* word)
      -> Result<std::unique_ptr<edge::Driver>> {
    auto made = inner.make(word);
    if (!made) return std::unexpected(made.error());
    return std::make_unique<Driver>(control, std::move(*made));
  };
  return {edge::Opener<>{std::move(name), std::move(make)}, control};
}

}  // namespace rig::faulty
