// bench_host_queue — launch latency of the host queue: room + submit of an empty kernel,
// then a spin on the timeline word until it shows the value. Prints the median, 90th and
// 99th percentiles over many launches, beside floors measured in the same run: a spin
// hand-off between two threads and, when built with OpenMP, an empty parallel region.
//
//   bench_host_queue [launches]      (default 100000)
#include "host_driver.hpp"

#include <rig/rig_edge.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {

void relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void report(const char* what, std::vector<std::uint64_t>& ns) {
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) { return double(ns[std::size_t(q * double(ns.size() - 1))]) / 1000.0; };
  std::printf("%-44s median %7.3f us   p90 %7.3f us   p99 %7.3f us\n", what, at(0.5), at(0.9),
              at(0.99));
}

// Round trips of a spin hand-off between this thread and another.
std::vector<std::uint64_t> spin_handoff(int n) {
  std::atomic<std::uint64_t> ping{0}, pong{0};
  std::thread other([&] {
    for (std::uint64_t i = 1; i <= std::uint64_t(n); ++i) {
      while (ping.load(std::memory_order_acquire) != i) relax();
      pong.store(i, std::memory_order_release);
    }
  });
  std::vector<std::uint64_t> ns;
  ns.reserve(std::size_t(n));
  for (std::uint64_t i = 1; i <= std::uint64_t(n); ++i) {
    const std::uint64_t t0 = rig_now_ns();
    ping.store(i, std::memory_order_release);
    while (pong.load(std::memory_order_acquire) != i) relax();
    ns.push_back(rig_now_ns() - t0);
  }
  other.join();
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100'000;
  alignas(8) static volatile std::uint64_t word = 0;
  auto driver = rig::cpu::make_host_driver(&word);
  const auto facts = driver->facts();
  void* edge = facts.edge;
  const rig_driver* table = *static_cast<const rig_driver* const*>(edge);

  std::ifstream in(std::string(RIG_HOST_KERNEL_DIR) + "/host_saxpy.o", std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> object(chars.size());
  std::memcpy(object.data(), chars.data(), chars.size());
  auto code = driver->image(object);
  if (!code) {
    std::fprintf(stderr, "cannot load host_saxpy.o: %s\n", code.error().c_str());
    return 1;
  }
  const auto entry =
      std::get<rig::edge::Entry>(driver->entry(std::get<rig::edge::Loaded>(*code).image, "empty"));

  std::uint64_t v = 0;
  auto launches = [&](std::uint32_t groups) {
    rig_part part;
    std::memset(&part, 0, sizeof part);
    part.kind = RIG_KIND_LAUNCH;
    part.work.launch.code = entry.code;
    part.work.launch.launch = entry.launch;
    part.work.launch.groups[0] = groups;
    part.work.launch.groups[1] = part.work.launch.groups[2] = 1;
    part.work.launch.threads[0] = part.work.launch.threads[1] = part.work.launch.threads[2] = 1;
    std::vector<std::uint64_t> ns;
    ns.reserve(std::size_t(n));
    for (int i = 0; i < n + n / 10; ++i) {
      const std::uint64_t t0 = rig_now_ns();
      const char* failure = nullptr;
      char why[RIG_WHY] = "";
      if (table->room(edge, &part, 1, 0, why) != RIG_FITS ||
          table->submit(edge, &part, 1, nullptr, 0, ++v, nullptr, &failure) != RIG_COMMITTED) {
        std::fprintf(stderr, "submit failed\n");
        std::exit(1);
      }
      while (__atomic_load_n(&word, __ATOMIC_ACQUIRE) < v) relax();
      if (i >= n / 10) ns.push_back(rig_now_ns() - t0);  // the first tenth warms up
    }
    return ns;
  };

  auto one = launches(1);
  report("host queue: empty kernel, 1 group", one);
  auto sixteen = launches(16);
  report("host queue: empty kernel, 16 groups", sixteen);
  auto handoff = spin_handoff(n);
  report("floor: spin hand-off round trip", handoff);
#if defined(_OPENMP)
  std::vector<std::uint64_t> omp;
  omp.reserve(std::size_t(n));
  for (int i = 0; i < n + n / 10; ++i) {
    const std::uint64_t t0 = rig_now_ns();
#pragma omp parallel
    { relax(); }
    if (i >= n / 10) omp.push_back(rig_now_ns() - t0);
  }
  report("floor: OpenMP empty parallel region", omp);
#endif
  driver->stop("the benchmark is over");
  return 0;
}
