// Stress: threads submitting many launches with cross-device waits.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "../support/fake_driver.hpp"
#include "support.hpp"

using namespace rig;

namespace {
int launches_per_thread() {
  const char* n = std::getenv("RIG_STRESS_LAUNCHES");
  return n ? std::atoi(n) : 100000;
}
}  // namespace

TEST_CASE("four threads submitting with cross-device waits: values complete in order, words never move back") {
  const int per_thread = launches_per_thread();
  Device cpu = host();
  Device mem = memory_device("STRESS-MEM");
  auto [opener, control] = fake::opener("STRESS-FAKE", {.capacity = 256, .grow_to = 256, .commit_every = 16});
  Device fake = *open(opener);
  std::vector<Device> all{cpu, mem, fake};

  std::atomic<bool> done{false};
  std::atomic<int> backwards{0};
  std::thread sampler([&] {
    std::vector<std::uint64_t> last(all.size(), 0);
    while (!done.load()) {
      for (std::size_t i = 0; i < all.size(); ++i) {
        std::uint64_t w = __atomic_load_n(&rig_words[all[i].index()], __ATOMIC_ACQUIRE);
        if (w < last[i]) backwards++;
        last[i] = w;
      }
    }
  });

  // The latest point of each device, which the other threads wait on.
  std::atomic<std::uint64_t> latest[3] = {0, 0, 0};
  auto latest_point = [&](int i) { return Point::from_bits(latest[i].load()); };

  std::atomic<int> out_of_order{0};
  auto worker = [&](int device, int wait_on) {
    Device d = all[std::size_t(device)];
    Submission s = [&] {
      if (device == 0) return test::one_launch(d, test::kernel("nothing"), 0, 0, 0);
      Buffer words = Buffer::of_string(std::string(8, '\0'));
      Buffer src = Buffer::create(d, 64), dst = Buffer::create(d, 64);
      Submission::Part p{"", {}, Submission::Copy{{src, 0}, {dst, 0}, {Box::row(64)}, {}}};
      return Submission::make(d, std::span(&p, 1), 0, 0, std::vector{std::pair{src, Access::Read}, std::pair{dst, Access::ReadWrite}});
    }();
    Run run;
    std::uint64_t previous = 0;
    for (int i = 0; i < per_thread; ++i) {
      Point waits[] = {latest_point(wait_on)};
      Point p = (i % 8 == 0) ? submit(s, run, {}, {}, waits) : submit(s, run, {}, {});
      if (p.value() <= previous) out_of_order++;
      previous = p.value();
      std::uint64_t seen = latest[device].load();
      while (Point::from_bits(seen).value() < p.value() &&
             !latest[device].compare_exchange_weak(seen, p.bits())) {
      }
      if (i % 64 == 0) p.wait();
    }
    Point::from_bits(latest[device].load()).wait();
  };
  std::vector<std::thread> threads;
  threads.emplace_back(worker, 0, 1);  // host, waiting on the memory device
  threads.emplace_back(worker, 1, 2);  // memory device, waiting on the fake
  threads.emplace_back(worker, 2, 0);  // fake, waiting on the host
  threads.emplace_back(worker, 0, 2);  // host again, waiting on the fake
  for (auto& t : threads) t.join();
  done = true;
  sampler.join();

  CHECK(out_of_order == 0);
  CHECK(backwards == 0);
  for (auto& d : all) {
    CAPTURE(d.name());
    d.wait(d.submitted());
    CHECK(__atomic_load_n(&rig_words[d.index()], __ATOMIC_ACQUIRE) == d.submitted());
  }
  CHECK(cpu.submitted() >= std::uint64_t(2 * per_thread));
  CHECK(control->violations().empty());
  mem.close();
  fake.close();
}
