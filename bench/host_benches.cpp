// Launch benches: a launch's round trip, an empty grid over every worker, and a batch of 64
// launches in one submission, each of an empty kernel, on the host device or an NVIDIA device
// (sm_90, sm_80), the devices these benches carry a kernel for.
#include <rig/host_kernel.h>
#include <rig/rig.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <thread>

#include "bench.hpp"
#include "floors.hpp"

extern const unsigned char rig_demo_object[];
extern const std::size_t rig_demo_object_size;
extern const unsigned char rig_bench_nv_kernels_sm_80[], rig_bench_nv_kernels_sm_90[];
extern const std::size_t rig_bench_nv_kernels_sm_80_size, rig_bench_nv_kernels_sm_90_size;

namespace rig::bench {
namespace {

// Launches in the batch bench's one submission.
constexpr int kBatch = 64;
// Round trips on a GPU (whose launches a simulator may run a thousand times slower).
constexpr std::uint64_t kGpuRounds = 1000;

// `name`, marked with the device where it is not the host device, these benches' own.
std::string named(std::string name, const Device& d) { return d == host() ? name : on(std::move(name), d); }

// launch + wait of an empty kernel over `groups` groups, ns per round trip.
Spread launch_and_wait(const Device& d, int repeats, std::uint64_t n, std::uint32_t groups) {
  Submission::Part part{"", {}, Submission::Launch{empty_kernel(d), 0, {}}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  run.groups(s.block(0), groups);
  return measure(repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) submit(s, run, {}, {}).wait();
  });
}

// Whether d runs the host device's x86-64 objects: the host device, or an agent's host
// device of a machine like this one.
bool runs_host_objects(const Device& d) {
  return d == host() || (d.name().starts_with("CPU@") && d.arch() == host().arch());
}

}  // namespace

std::span<const std::byte> nvidia_kernels(std::string_view arch) {
  if (arch == "sm_90") return {reinterpret_cast<const std::byte*>(rig_bench_nv_kernels_sm_90), rig_bench_nv_kernels_sm_90_size};
  if (arch == "sm_80") return {reinterpret_cast<const std::byte*>(rig_bench_nv_kernels_sm_80), rig_bench_nv_kernels_sm_80_size};
  return {};
}

Function empty_kernel(const Device& d) {
  if (auto why = refuses_empty_kernel(d)) throw std::invalid_argument(*why);
  const bool on_host = runs_host_objects(d);
  auto image = Image::load(d, on_host ? std::span(reinterpret_cast<const std::byte*>(rig_demo_object), rig_demo_object_size)
                                      : nvidia_kernels(d.arch()));
  if (!image) throw std::runtime_error(image.error());
  auto f = image->resolve(on_host ? "demo_empty" : "empty");
  if (!f) throw std::runtime_error(fmt::format("{}: the benches' kernels have no empty kernel", d.name()));
  return *f;
}

std::optional<std::string> refuses_empty_kernel(const Device& d) {
  if (auto why = refuses_launch(d); !why || d.queues().empty() || !runs(d, Kind::Launch)) return why;
  if (!nvidia_kernels(d.arch()).empty()) return std::nullopt;
  return fmt::format("the launch benches carry an empty kernel for the host device (CPU, an x86-64 ELF object) and "
                     "for NVIDIA devices of sm_90 and sm_80 only, none for {} (arch {})",
                     d.name(), d.arch());
}

std::optional<std::string> refuses_launch(const Device& d) {
  if (d.queues().empty()) return fmt::format("{} is an io device, which runs no work", d.name());
  if (!runs(d, Kind::Launch)) {
    std::vector<std::string_view> queues;
    for (const auto& q : d.queues()) queues.push_back(q.name);
    return fmt::format("{} runs no launches (its queues: {})", d.name(), fmt::join(queues, ", "));
  }
  if (!runs_host_objects(d))
    return fmt::format("the launch benches carry an empty kernel for the host device (CPU, an x86-64 ELF object) "
                       "only, none for {} (arch {})",
                       d.name(), d.arch());
  return std::nullopt;
}

std::vector<Figure> roundtrip(const Options& o) {
  const Device d = o.device.value_or(host());
  const std::uint64_t n = d == host() ? 20000 : kGpuRounds;
  std::vector<Figure> out;
  if (d.name().find('@') != std::string::npos) {
    // A remote device: beside UCX's own active-message round trip, the two measured in turn,
    // a run of each per repeat (each figure is the median of its runs).
    std::vector<double> rig_runs;
    UcxFloorInTurn floor("ucp_am_lat", 8, 20000);
    for (int r = 0; r < o.repeats; ++r) {
      rig_runs.push_back(launch_and_wait(d, 1, 2000, 1).median);
      floor.run();
    }
    return {make_figure(named("roundtrip", d), spread_of(rig_runs), "ns", floor.spread(), floor.name(" round trip"),
                        "launch + wait of an empty one-group kernel on the agent's host device")};
  }
  Spread rig = launch_and_wait(d, o.repeats, n, 1);
  Spread ping = spin_ping_pong(o.repeats, n);
  out.push_back(make_figure(named("roundtrip", d), rig, "ns", ping, "two-thread atomic ping-pong",
                            fmt::format("launch + wait of an empty one-group kernel on {}", d.name())));
  std::string why;
  if (auto cl = opencl_empty_kernel(o.repeats, 2000, why)) {
    out.push_back(make_figure(named("roundtrip-vs-opencl", d), rig, "ns", *cl, "OpenCL (PoCL) enqueue + finish",
                              "the same round trip beside OpenCL's empty kernel on the CPU"));
  } else {
    out.push_back(make_figure(named("roundtrip-vs-opencl", d), rig, "ns", {}, "OpenCL unavailable: " + why, ""));
  }
  return out;
}

std::vector<Figure> grid(const Options& o) {
  const Device d = o.device.value_or(host());
  const std::uint64_t n = 20000;
  const int workers = int(std::max(1u, std::thread::hardware_concurrency()));
  Spread rig = launch_and_wait(d, o.repeats, n, 16);
  Spread omp = openmp_empty_region(o.repeats, n, workers);
  return {make_figure(named("grid", d), rig, "ns", omp,
                      fmt::format("OpenMP empty parallel region ({} threads)", workers),
                      "launch + wait of an empty 16-group grid over every worker of the host device")};
}

std::vector<Figure> batch(const Options& o) {
  const Device d = o.device.value_or(host());
  const std::uint64_t n = d == host() ? 4000 : kGpuRounds / kBatch;
  Function kernel = empty_kernel(d);
  std::vector<Submission::Part> parts(kBatch, Submission::Part{"", {}, Submission::Launch{kernel, 0, {}}});
  auto s = Submission::make(d, parts, 0, 0);
  Run run;
  for (int i = 0; i < kBatch; ++i) run.groups(s.block(i), 1);
  Spread rig = measure(o.repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) submit(s, run, {}, {}).wait();
  });
  if (d != host()) {
    // The host cannot learn that another agent's work is done faster than a spin hand-off.
    Spread ping = spin_ping_pong(o.repeats, n);
    return {make_figure(named("batch", d), rig, "ns", ping, "two-thread atomic ping-pong",
                        fmt::format("one submission of {} launches of an empty one-group kernel + wait, on {} (ns per "
                                    "submission)",
                                    kBatch, d.name()))};
  }
  // The floor: what the host device cannot avoid doing for the same work: hand it to
  // another thread, which calls the kernel 64 times, and learn that it is done.
  Spread floor = spin_hand_off(o.repeats, n, reinterpret_cast<rig_host_kernel*>(kernel.entry()), kBatch);
  return {make_figure(named("batch", d), rig, "ns", floor,
                      fmt::format("spin hand-off to a thread that calls the kernel {} times", kBatch),
                      fmt::format("one submission of {} launches of an empty one-group kernel + wait, on the host "
                                  "device (ns per submission)",
                                  kBatch))};
}

}  // namespace rig::bench
