// support.cpp — the laws' shared pieces (law.hpp).
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "law.hpp"

namespace rig::conformance::detail {

std::string unique(std::string_view base) {
  static std::atomic<int> n{0};
  return fmt::format("{}~{}", base, n++);
}

struct Async::State {
  mutable std::mutex m;
  mutable std::condition_variable cv;
  bool done = false;
  bool lost = false;
  std::string message;
  std::exception_ptr error;
};

Async::Async(std::function<void()> f) : s_(std::make_shared<State>()) {
  std::thread([s = s_, f = std::move(f)] {
    std::exception_ptr error;
    std::string message;
    bool lost = false;
    try {
      f();
    } catch (const Lost& e) {
      lost = true;
      message = e.what();
      error = std::current_exception();
    } catch (const std::exception& e) {
      message = e.what();
      error = std::current_exception();
    } catch (...) {
      message = "an unknown exception";
      error = std::current_exception();
    }
    std::lock_guard g(s->m);
    s->done = true;
    s->lost = lost;
    s->message = std::move(message);
    s->error = error;
    s->cv.notify_all();
  }).detach();
}

bool Async::ended() const {
  std::lock_guard g(s_->m);
  return s_->done;
}

bool Async::wait(std::chrono::milliseconds limit) const {
  std::unique_lock l(s_->m);
  return s_->cv.wait_for(l, limit, [&] { return s_->done; });
}

std::string Async::raised() const {
  std::lock_guard g(s_->m);
  return s_->message;
}

bool Async::raised_lost() const {
  std::lock_guard g(s_->m);
  return s_->lost;
}

void Async::rethrow() const {
  std::lock_guard g(s_->m);
  if (s_->error) std::rethrow_exception(s_->error);
}

void Async::rethrow_unless_lost() const {
  std::lock_guard g(s_->m);
  if (s_->error && !s_->lost) std::rethrow_exception(s_->error);
}

bool within(std::chrono::milliseconds limit, std::function<void()> f) {
  Async a(std::move(f));
  if (!a.wait(limit)) return false;
  a.rethrow();
  return true;
}

std::optional<std::string> lost_within(std::chrono::milliseconds limit, std::function<void()> f) {
  Async a(std::move(f));
  if (!a.wait(limit)) return std::nullopt;
  a.rethrow_unless_lost();
  return a.raised();
}

// --- Context --------------------------------------------------------------------------------

Context::Context(const Target& t) : target(t) {}

Context::~Context() {
  if (!finished_) finish();
}

Opened Context::own(Opened o) {
  owned_.push_back({o.device, o.step, o.violations, true});
  return o;
}

Opened Context::device() {
  if (target.shared) {
    Opened o = target.shared();
    // Not closed at the end, but its breaches count.
    if (o.violations) owned_.push_back({o.device, nullptr, o.violations, false});
    return o;
  }
  return fresh();
}

Opened Context::fresh(const Wrap& wrap) {
  if (!target.open) skip("the target opens no new device, which this law loses, closes or wraps");
  return own(target.open(wrap));
}

std::pair<Opened, std::shared_ptr<faulty::Control>> Context::faulty() {
  std::shared_ptr<faulty::Control> control;
  Opened o = fresh([&](edge::Opener<> inner) {
    auto [wrapped, c] = faulty::wrap(std::move(inner));
    control = c;
    return wrapped;
  });
  if (!control) fail("the target's open did not pass its opener through the wrap it was given");
  return {o, control};
}

Device Context::memory() {
  Device m = memory_device(unique("CONF-MEM"));
  owned_.push_back({m, nullptr, nullptr, true});
  return m;
}

std::pair<Device, std::shared_ptr<fake::Control>> Context::held_fake(fake::Options options, const Wrap& wrap) {
  options.runs_when_asleep = false;
  auto [opener, control] = fake::opener(unique("CONF-HELD"), options);
  auto d = open(wrap ? wrap(opener) : opener);
  if (!d) fail("a fake device did not open: {}", d.error());
  owned_.push_back({*d, [c = control](std::size_t n) { return c->step(n); },
                    [c = control] { return c->violations(); }, true});
  return {*d, control};
}

std::vector<std::string> Context::finish() {
  finished_ = true;
  std::vector<std::string> problems;
  // Later devices first: a consumer closes before the producer it may wait for.
  for (auto it = owned_.rbegin(); it != owned_.rend(); ++it) {
    Owned o = *it;
    if (!o.close || o.device.lost()) continue;
    auto stop = std::make_shared<std::atomic<bool>>(false);
    std::thread stepper;
    if (o.step)
      stepper = std::thread([stop, step = o.step] {
        while (!stop->load()) {
          step(SIZE_MAX);
          std::this_thread::sleep_for(200us);
        }
      });
    bool closed = false;
    try {
      closed = within(10s, [d = o.device]() mutable { d.close(); });
    } catch (const std::exception& e) {
      problems.push_back(fmt::format("closing {} raised: {}", o.device.name(), e.what()));
      closed = true;
    }
    stop->store(true);
    if (stepper.joinable()) {
      if (closed)
        stepper.join();
      else
        stepper.detach();
    }
    if (!closed) problems.push_back(fmt::format("closing {} did not return within 10 s", o.device.name()));
  }
  for (auto& o : owned_)
    if (o.violations)
      for (auto& v : o.violations()) problems.push_back(fmt::format("{}'s driver saw rig break the contract: {}", o.device.name(), v));
  return problems;
}

Clock::Clock(std::vector<Opened> devices) : stop_(std::make_shared<std::atomic<bool>>(false)) {
  std::erase_if(devices, [](const Opened& o) { return !o.step; });
  if (devices.empty()) return;
  thread_ = std::thread([stop = stop_, devices] {
    while (!stop->load()) {
      for (const auto& o : devices)
        if (!o.device.lost()) o.step(SIZE_MAX);
      std::this_thread::sleep_for(100us);
    }
  });
}

Clock::~Clock() {
  stop_->store(true);
  if (thread_.joinable()) thread_.join();
}

// --- Bytes ----------------------------------------------------------------------------------

std::vector<std::uint8_t> pattern(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> out(n);
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 1);
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t r = rng();
    for (std::size_t k = 0; k < 8 && i + k < n; ++k) out[i + k] = std::uint8_t(r >> (8 * k));
  }
  return out;
}

void put(Buffer& b, const std::vector<std::uint8_t>& bytes, std::size_t at) {
  b.blit_from(std::as_bytes(std::span(bytes)), at);
}

std::vector<std::uint8_t> get(const Buffer& b) {
  std::vector<std::uint8_t> out(b.length());
  b.blit_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

void expect_bytes(const Buffer& b, const std::vector<std::uint8_t>& expected, std::string_view what) {
  auto got = get(b);
  require(got.size() == expected.size(), "{}: {} bytes, expected {}", what, got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != expected[i]) {
      std::size_t wrong = 0;
      for (std::size_t j = i; j < got.size(); ++j) wrong += got[j] != expected[j];
      fail("{}: byte {} of {} is {:#04x}, expected {:#04x} ({} bytes differ)", what, i, got.size(), got[i],
           expected[i], wrong);
    }
}

void expect_all(const Buffer& b, std::uint8_t byte, std::string_view what) {
  expect_bytes(b, std::vector<std::uint8_t>(b.length(), byte), what);
}

// --- Devices and work -------------------------------------------------------------------------

bool runs(const Device& d, Kind k) {
  for (const auto& q : d.queues())
    for (Kind r : q.runs)
      if (r == k) return true;
  return false;
}

std::vector<std::string> copy_queues(const Device& d) {
  std::vector<std::string> out;
  for (const auto& q : d.queues())
    for (Kind r : q.runs)
      if (r == Kind::Copy) out.push_back(q.name);
  return out;
}

void need_copy_engine(const Device& d) {
  if (!d.facts().copy_engine) skip("its facts name no copy engine, and this law's work is copies");
}

Submission copy_submission(const Device& d, const Buffer& src, const Buffer& dst, std::string queue) {
  Submission::Part part{std::move(queue), {}, Submission::Copy{{src, 0}, {dst, 0}, {Box::row(src.length())}, {}}};
  std::pair<Buffer, Access> fixed[] = {{src, Access::Read}, {dst, Access::ReadWrite}};
  return Submission::make(d, std::span(&part, 1), 0, 0, fixed);
}

Submission fill_submission(const Device& d, const Buffer& dst, std::uint8_t byte, std::string queue) {
  Submission::Part part{std::move(queue), {},
                        Submission::Copy{{std::nullopt, 0}, {dst, 0}, {Box::row(dst.length())}, std::byte{byte}}};
  std::pair<Buffer, Access> fixed[] = {{dst, Access::ReadWrite}};
  return Submission::make(d, std::span(&part, 1), 0, 0, fixed);
}

Point go(const Submission& s, std::span<const Point> waits) {
  Run run;
  return submit(s, run, {}, {}, waits);
}

std::uint64_t raw_word(const Device& d) {
  const auto* word = d.facts().word;
  if (!word) word = &rig_words[d.index()];
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

std::size_t copy_size(const Context& c, std::size_t n) {
  const auto rate = c.target.copy_bytes_per_second;
  if (!rate) return n;
  constexpr std::size_t page = 4096;
  const auto quarter = std::size_t(*rate / 4) / page * page;
  return std::min(n, std::max(page, quarter));
}

std::chrono::milliseconds copy_limit(const Context& c, std::size_t bytes, std::chrono::milliseconds limit) {
  const auto rate = c.target.copy_bytes_per_second;
  if (!rate) return limit;
  const auto needed = std::chrono::milliseconds(std::int64_t(4000.0 * double(bytes) / *rate));
  return std::max(limit, needed);
}

bool settle(const Opened& o, Point p, std::chrono::milliseconds limit) {
  if (!o.step) return within(limit, [p] { p.wait(); });
  auto until = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (p.reached()) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    o.step(SIZE_MAX);
    std::this_thread::sleep_for(50us);
  }
}

}  // namespace rig::conformance::detail
