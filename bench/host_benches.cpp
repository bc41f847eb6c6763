// Benches on the host device: a launch's round trip, and an empty grid over every worker.
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <thread>

#include "bench.hpp"
#include "floors.hpp"

extern const unsigned char rig_demo_object[];
extern const std::size_t rig_demo_object_size;

namespace rig::bench {
namespace {

Function empty_kernel() {
  auto image = Image::load(host(), std::span(reinterpret_cast<const std::byte*>(rig_demo_object),
                                             rig_demo_object_size));
  if (!image) throw std::runtime_error(image.error());
  return *image->resolve("demo_empty");
}

// launch + wait of an empty kernel over `groups` groups, ns per round trip.
Spread launch_and_wait(int repeats, std::uint64_t n, std::uint32_t groups) {
  Device cpu = host();
  Submission::Part part{"", {}, Submission::Launch{empty_kernel(), 0, {}}};
  auto s = Submission::make(cpu, std::span(&part, 1), 0, 0);
  Run run;
  run.groups(s.block(0), groups);
  return measure(repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) submit(s, run, {}, {}).wait();
  });
}

}  // namespace

std::vector<Figure> roundtrip(const Options& o) {
  const std::uint64_t n = 20000;
  std::vector<Figure> out;
  Spread rig = launch_and_wait(o.repeats, n, 1);
  Spread ping = spin_ping_pong(o.repeats, n);
  out.push_back(make_figure("roundtrip", rig, "ns", ping, "two-thread atomic ping-pong",
                            "launch + wait of an empty one-group kernel on the host device"));
  std::string why;
  if (auto cl = opencl_empty_kernel(o.repeats, 2000, why)) {
    out.push_back(make_figure("roundtrip-vs-opencl", rig, "ns", *cl, "OpenCL (PoCL) enqueue + finish",
                              "the same round trip beside OpenCL's empty kernel on the CPU"));
  } else {
    Figure f = make_figure("roundtrip-vs-opencl", rig, "ns", {}, "OpenCL unavailable: " + why, "");
    out.push_back(f);
  }
  return out;
}

std::vector<Figure> grid(const Options& o) {
  const std::uint64_t n = 20000;
  const int workers = int(std::max(1u, std::thread::hardware_concurrency()));
  Spread rig = launch_and_wait(o.repeats, n, 16);
  Spread omp = openmp_empty_region(o.repeats, n, workers);
  return {make_figure("grid", rig, "ns", omp, fmt::format("OpenMP empty parallel region ({} threads)", workers),
                      "launch + wait of an empty 16-group grid over every worker of the host device")};
}

}  // namespace rig::bench
