// conformance_targets.cpp — the NVIDIA driver's targets of the conformance suite
// (docs/conformance.md): the driver of nvgpu/ on the simulator of tests/sim/nv, a Hopper
// whose channels run on threads of their own, as the real kernel driver answers it
// ("NV-SIM:sm_90") and refusing what gVisor's nvproxy refuses ("NV-SIM:sm_90/gvisor").
//
// Each device is a simulated GPU of its own. The laws load tests/cuda/kernels.cu as nvcc built
// it (the committed sm_90 fatbin, scripts/nv-kernels), which each simulator registers so that
// its engines find the kernels by their SASS, and launch its function of no parameters, `empty`.
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <rig/nv.hpp>
#include "conformance.hpp"
#include "nv/code.hpp"
#include "nv/sim.hpp"
#include "push.hpp"

namespace {

using namespace rig;
namespace conformance = rig::conformance;

// Short enough for the hang laws to take about a second, long enough that a simulator slowed
// by a loaded machine (or a sanitizer) still makes progress within it.
const int kHangMs = 500 * conformance::slowdown();

// The image the laws load: the CUDA tests' kernels as nvcc built them for sm_90.
const std::vector<std::byte>& fatbin() {
  static const std::vector<std::byte> bytes = conformance::file_bytes(RIG_NV_CONFORMANCE_KERNELS "/kernels.sm_90.fatbin");
  return bytes;
}

// A new simulator, its engines given the image's kernels. rig keeps a device's driver, and with it the seam, after the device
// closes, so every simulator lives until the process exits.
sim::nv::Simulator& new_simulator(bool gvisor) {
  static auto* mutex = new std::mutex;
  static auto* all = new std::vector<std::unique_ptr<sim::nv::Simulator>>;
  std::lock_guard g(*mutex);
  sim::nv::Config config;
  config.gvisor = gvisor;
  auto& sim = *all->emplace_back(std::make_unique<sim::nv::Simulator>(config));
  if (auto added = sim.code().add_fatbin(fatbin(), 90, "kernels.sm_90.fatbin"); !added)
    throw std::runtime_error(fmt::format("registering the conformance kernels: {}", added.error()));
  return sim;
}

// Work of one value that runs at least a given time, as a long kernel would: a semaphore
// acquire on COMPUTE:0 of a flag in the device's memory, which a thread raises that long after
// the value starts, that is once the device's word shows the value before it.
class SlowWork {
 public:
  explicit SlowWork(Device d) : device_(std::move(d)) {}

  Point submit(std::chrono::milliseconds ms) {
    std::lock_guard g(mutex_);
    if (!flag_) {
      flag_ = Buffer::create(device_, 4096, Memory::Mapped);
      flag_->write<std::uint64_t>([](std::span<std::uint64_t> x) { x[0] = 0; });
    }
    // Each slow value waits for a larger flag than the one before: the flag only rises.
    const std::uint64_t n = ++raised_;
    std::uint32_t storage[16];
    nv::Push push(storage);
    nv::semaphore_acquire(push, flag_->address(), n);
    return conformance::submit_flag_wait(device_, push.words(), Memory::Mapped, *flag_, n, 8, ms);
  }

 private:
  std::mutex mutex_;
  Device device_;
  std::optional<Buffer> flag_;
  std::uint64_t raised_ = 0;
};

conformance::Target simulator_target(bool gvisor) {
  const std::string name = gvisor ? "NV-SIM:sm_90/gvisor" : "NV-SIM:sm_90";
  conformance::Target t;
  t.name = name;
  t.about = fmt::format("rig's NVIDIA driver on the simulator of tests/sim/nv (a Hopper per device{}, hang_ms {})",
                        gvisor ? ", refusing what gVisor's nvproxy refuses" : "", kHangMs);
  t.commit_bound = 1;  // submit rings the doorbells itself (rig/nv.hpp)
  t.image = fatbin();
  t.function = "empty";
  t.open = [name, gvisor](const conformance::Wrap& wrap) {
    sim::nv::Simulator* sim = &new_simulator(gvisor);
    // driver_target gives the device a name of its own, counts the memory its driver
    // allocates, and wraps its opener.
    conformance::Opened o = conformance::driver_target(name, [sim] { return rig::nv::opener(0, *sim, {kHangMs}); }, 1).open(wrap);
    o.slow = [work = std::make_shared<SlowWork>(o.device)](std::chrono::milliseconds ms) { return work->submit(ms); };
    return o;
  };
  return t;
}

conformance::Registration nv_targets{"nvgpu", [] {
  std::vector<conformance::Target> out;
  out.push_back(simulator_target(false));
  // The gVisor mode differs in which mapping calls the simulator refuses, not in what runs
  // concurrently: sanitizer builds, which are here for the concurrency, run the other mode only.
  if (!conformance::sanitized()) out.push_back(simulator_target(true));
  return out;
}};

}  // namespace
