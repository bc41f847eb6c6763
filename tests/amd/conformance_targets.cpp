// conformance_targets.cpp — the AMD driver's target of the conformance suite
// (docs/conformance.md): the driver of amdgpu/ on the simulator of tests/sim/amd, a gfx1100
// whose command processors run on threads of their own, as hardware's do, and a simulated
// MI300X (gfx942, 8 XCCs), MI300A (gfx942, 6 XCCs) and MI250X (gfx90a), whose dispatches run
// on the CDNA interpreter.
//
// Each device is a simulated GPU of its own, as a machine with many GPUs has: two devices of
// the target are two GPUs. The laws load conformance_kernels.c, built for the target's
// processor, as its image.
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <rig/amd.hpp>
#include "conformance.hpp"
#include "pm4.hpp"
#include "sim.hpp"

extern const unsigned char rig_amd_conformance_kernels[], rig_amd_conformance_kernels_gfx942[],
    rig_amd_conformance_kernels_gfx90a[];
extern const std::size_t rig_amd_conformance_kernels_size, rig_amd_conformance_kernels_gfx942_size,
    rig_amd_conformance_kernels_gfx90a_size;

namespace {

using namespace rig;
namespace conformance = rig::conformance;
namespace pm4 = rig::amd::pm4;

// Short enough for the hang laws to take about a second, long enough that a simulator slowed
// by a loaded machine (the tests run two at a time on two cores) still makes progress within
// it.
constexpr int kHangMs = 500;

// A new simulator. rig keeps a device's driver, and with it the seam, after the device
// closes, so every simulator lives until the process exits.
sim::amd::Simulator& new_simulator(const sim::amd::Config& config) {
  static auto* mutex = new std::mutex;
  static auto* all = new std::vector<std::unique_ptr<sim::amd::Simulator>>;
  std::lock_guard g(*mutex);
  return *all->emplace_back(std::make_unique<sim::amd::Simulator>(config));
}

// Work of one value that runs at least a given time, as a long kernel would: a WAIT_REG_MEM
// on COMPUTE:0 for a flag in the device's memory, which a thread raises that long after the
// value starts, that is once the device's word shows the value before it.
class SlowWork {
 public:
  SlowWork(Device d, pm4::Gen gen) : device_(std::move(d)), gen_(gen) {}

  Point submit(std::chrono::milliseconds ms) {
    std::lock_guard g(mutex_);
    if (!flag_) {
      flag_ = Buffer::create(device_, 4096);
      flag_->write<std::uint32_t>([](std::span<std::uint32_t> x) { x[0] = 0; });
    }
    // Each slow value waits for a larger flag than the one before, and its thread raises the
    // flag only after that one's value completed: the flag only rises.
    const std::uint32_t n = ++raised_;
    std::vector<std::uint32_t> words(1 + pm4::kWaitRegMemBody);
    pm4::Pm4(gen_, words).wait_mem32(flag_->address(), pm4::Compare::GreaterEqual, n);
    return conformance::submit_flag_wait(device_, words, Memory::Device, *flag_, n, 4, ms);
  }

 private:
  std::mutex mutex_;
  Device device_;
  pm4::Gen gen_;
  std::optional<Buffer> flag_;
  std::uint32_t raised_ = 0;
};

// A simulated GPU the target runs the laws on: its simulator's configuration, its PM4
// generation and conformance_kernels.c built for its processor.
struct Simulated {
  std::string name, about;
  sim::amd::Config config;
  pm4::Gen gen;
  const unsigned char* kernels;
  std::size_t kernels_size;
};

conformance::Target simulator_target(const Simulated& gpu) {
  const std::string name = gpu.name;
  conformance::Target t;
  t.name = name;
  t.about = fmt::format("the AMD driver on the simulator of tests/sim/amd ({} per device, hang_ms {})", gpu.about, kHangMs);
  t.commit_bound = 1;  // submit rings the doorbells itself (rig/amd.hpp)
  t.image.assign(reinterpret_cast<const std::byte*>(gpu.kernels),
                 reinterpret_cast<const std::byte*>(gpu.kernels) + gpu.kernels_size);
  t.function = "conf_nothing";
  t.open = [name, config = gpu.config, gen = gpu.gen](const conformance::Wrap& wrap) {
    sim::amd::Simulator* sim = &new_simulator(config);
    rig::amd::Options options;
    options.hang_ms = kHangMs;
    // driver_target gives the device a name of its own, counts the memory its driver
    // allocates, and wraps its opener.
    conformance::Opened o =
        conformance::driver_target(name, [sim, options] { return rig::amd::opener(0, *sim, options); }, 1).open(wrap);
    o.slow = [work = std::make_shared<SlowWork>(o.device, gen)](std::chrono::milliseconds ms) { return work->submit(ms); };
    return o;
  };
  return t;
}

conformance::Registration amd_targets{"amdgpu", [] {
  std::vector<conformance::Target> out;
  out.push_back(simulator_target({"AMD-SIM:gfx1100", "a gfx1100", sim::amd::Config{}, pm4::Gen::Gfx11,
                                  rig_amd_conformance_kernels, rig_amd_conformance_kernels_size}));
  out.push_back(simulator_target({"AMD-SIM:mi300x", "an MI300X, gfx942 of 8 XCCs", sim::amd::Config::mi300x(),
                                  pm4::Gen::Gfx9_4, rig_amd_conformance_kernels_gfx942,
                                  rig_amd_conformance_kernels_gfx942_size}));
  out.push_back(simulator_target({"AMD-SIM:mi300a", "an MI300A, gfx942 of 6 XCCs", sim::amd::Config::mi300a(),
                                  pm4::Gen::Gfx9_4, rig_amd_conformance_kernels_gfx942,
                                  rig_amd_conformance_kernels_gfx942_size}));
  out.push_back(simulator_target({"AMD-SIM:mi250x", "an MI250X, gfx90a", sim::amd::Config::mi250x(), pm4::Gen::Gfx9_4,
                                  rig_amd_conformance_kernels_gfx90a, rig_amd_conformance_kernels_gfx90a_size}));
  return out;
}};

}  // namespace
