// Interruption: rig::interrupt makes every wait in progress raise Interrupted within 200 ms,
// from any thread or a signal handler, and the interrupted work, its device and its memory
// go on as if the wait had never been made.
#include <doctest/doctest.h>
#include <rig/rig.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include <sys/time.h>

#include "../support/fake_driver.hpp"
#include "support.hpp"

using namespace rig;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Part = Submission::Part;

namespace {

std::string unique_name() {
  static std::atomic<int> n{0};
  return "FAKE-INTERRUPT-" + std::to_string(n++);
}

// A fake device whose work runs only when the test steps it, so a wait blocks until then.
struct Held {
  std::pair<edge::Opener<>, std::shared_ptr<fake::Control>> made = fake::opener(unique_name(), {.runs_when_asleep = false});
  std::shared_ptr<fake::Control> control = made.second;
  Device device = *open(made.first);
  // Submits one value of work, which runs once the test steps the device.
  Point submit_one() {
    Run run;
    return submit(test::words(device), run, {}, {});
  }
};

// Calls interrupt after `after`, noting when.
struct Interrupter {
  std::atomic<Clock::rep> at{0};
  std::thread thread;
  explicit Interrupter(std::chrono::milliseconds after) {
    thread = std::thread([this, after] {
      std::this_thread::sleep_for(after);
      at.store(Clock::now().time_since_epoch().count());
      interrupt();
    });
  }
  ~Interrupter() { thread.join(); }
  // How long after the interrupt `t` came.
  std::chrono::milliseconds until(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::time_point(Clock::duration(at.load())));
  }
};

// The promise is 200 ms; the check allows for a loaded machine, where a thread may wait
// its turn far longer than the wait's 50 ms slices.
constexpr auto kPromptly = 1000ms;

}  // namespace

TEST_CASE("interrupt: a blocked wait raises Interrupted promptly, and the work goes on") {
  Held h;
  Point p = h.submit_one();
  {
    Interrupter i(50ms);
    CHECK_THROWS_WITH_AS(p.wait(), doctest::Contains("the wait for value 1 was interrupted"), Interrupted);
    CHECK(i.until(Clock::now()) < kPromptly);
  }
  CHECK(!h.device.lost());
  CHECK(!p.reached());
  CHECK(h.control->step() == 1);
  p.wait();  // the same value, waited for again
  CHECK(h.device.signaled() == 1);
  CHECK(h.control->violations().empty());
  h.device.close();
}

TEST_CASE("interrupt: a wait that starts after it is not interrupted") {
  Held h;
  interrupt();
  Point p = h.submit_one();
  std::thread stepper([&] {
    std::this_thread::sleep_for(100ms);
    h.control->step();
  });
  p.wait();
  stepper.join();
  CHECK(p.reached());
  h.device.close();
}

TEST_CASE("interrupt: every wait in progress on any thread is interrupted") {
  Held h;
  Point p = h.submit_one();
  std::atomic<int> interrupted{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 3; ++i)
    waiters.emplace_back([&] {
      try {
        p.wait();
      } catch (const Interrupted& e) {
        if (e.device() == h.device.name() && e.value() == p.value()) interrupted++;
      }
    });
  std::this_thread::sleep_for(100ms);
  interrupt();
  for (auto& t : waiters) t.join();
  CHECK(interrupted.load() == 3);
  h.control->step();
  p.wait();
  h.device.close();
}

namespace {
void on_alarm(int) { interrupt(); }
}  // namespace

TEST_CASE("interrupt: a signal handler may interrupt a wait") {
  Held h;
  Point p = h.submit_one();
  struct sigaction action {}, before {};
  action.sa_handler = on_alarm;
  sigemptyset(&action.sa_mask);
  REQUIRE(sigaction(SIGALRM, &action, &before) == 0);
  itimerval timer{};
  timer.it_value.tv_usec = 50'000;
  REQUIRE(setitimer(ITIMER_REAL, &timer, nullptr) == 0);
  CHECK_THROWS_AS(p.wait(), Interrupted);
  sigaction(SIGALRM, &before, nullptr);
  CHECK(!h.device.lost());
  h.control->step();
  p.wait();
  h.device.close();
}

TEST_CASE("interrupt: an interrupted host read releases its claim and loses no data") {
  Held h;
  Buffer b = Buffer::create(h.device, 64);
  Part fill{"", {}, Submission::Copy{{std::nullopt, 0}, {std::nullopt, 0}, {Box::row(64)}, std::byte{7}}};
  auto s = Submission::make(h.device, std::span(&fill, 1), 0, 1);
  Run run;
  Buffer w[] = {b};
  submit(s, run, {}, w);
  {
    Interrupter i(50ms);
    CHECK_THROWS_AS(b.read<std::uint8_t>([](auto) { FAIL("read before the fill ran"); }), Interrupted);
  }
  // No claim stays behind: a donation, not whole while a read claim holds its memory, is.
  const std::vector<Buffer> donate[] = {{b}};
  CHECK(claim::with({}, donate, [&](const claim::Claims& c) { return c.exclusive(b); }));
  h.control->step();
  b.read<std::uint8_t>([](auto bytes) {
    CHECK(bytes[0] == 7);
    CHECK(bytes[63] == 7);
  });
  h.device.close();
}

TEST_CASE("interrupt: close interrupted leaves the device open, and a later close finishes") {
  Held h;
  h.submit_one();
  {
    Interrupter i(50ms);
    CHECK_THROWS_AS(h.device.close(), Interrupted);
  }
  CHECK(!h.device.lost());
  h.control->step();
  h.device.close();
  CHECK(h.device.lost() == std::optional<std::string>("closed"));
}
