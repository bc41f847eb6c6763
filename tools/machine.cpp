// The devices of this machine that the rig tool reaches by name (machine.hpp).
#include "machine.hpp"

#include <rig/config.h>

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string_view>

#include <unistd.h>

#if RIG_DRIVER_DISK
#include <rig/disk.hpp>
#endif
#if RIG_DRIVER_AMD
#include <rig/amd.hpp>
#include "sim.hpp"  // tests/sim/amd/
#endif
#if RIG_DRIVER_NV
#include <rig/nv.hpp>
#include "../bench/bench.hpp"
#include "nv/code.hpp"
#include "nv/sim.hpp"  // tests/sim/nv/
#endif
#if RIG_DRIVER_CUDA
#include <rig/cuda.hpp>
#endif
#if RIG_DRIVER_REMOTE
#include <rig/remote.hpp>
#endif

namespace rig::tool {
namespace {

#if RIG_DRIVER_AMD || RIG_DRIVER_NV || RIG_DRIVER_CUDA
// The GPU index in `name` after `prefix` ("AMD:0" after "AMD:"), or nullopt.
std::optional<int> index_after(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix) || name.size() == prefix.size()) return std::nullopt;
  int index = -1;
  const char* end = name.data() + name.size();
  auto [at, ec] = std::from_chars(name.data() + prefix.size(), end, index);
  if (ec != std::errc() || at != end || index < 0) return std::nullopt;
  return index;
}
#endif

#if RIG_DRIVER_AMD
// The seam AMD GPUs are reached through: the system's, or with RIG_SIM=amd a simulated
// gfx1100 (RIG_SIM=amd:mi300x, amd:mi300a or amd:mi250x: that part's gfx942 or gfx90a), the
// same one for every command of the tool.
sim::amd::Simulator* amd_simulator() {
  const char* s = std::getenv("RIG_SIM");
  if (!s) return nullptr;
  const std::string_view which = s;
  std::optional<sim::amd::Config> config;
  if (which == "amd") config = sim::amd::Config{};
  else if (which == "amd:mi300x") config = sim::amd::Config::mi300x();
  else if (which == "amd:mi300a") config = sim::amd::Config::mi300a();
  else if (which == "amd:mi250x") config = sim::amd::Config::mi250x();
  if (!config) return nullptr;
  static auto* simulated = new sim::amd::Simulator(*config);  // outlives the devices
  return simulated;
}
os::Seam& amd_seam() {
  if (auto* simulated = amd_simulator()) return *simulated;
  return os::system();
}
#endif

#if RIG_DRIVER_NV
// The seam NVIDIA GPUs are reached through by rig's own driver: the system's, or with
// RIG_SIM=nv a simulated Hopper (RIG_SIM=nv:ampere: an Ampere, nv:gvisor: a Hopper refusing
// what gVisor's nvproxy refuses), the same one for every command of the tool.
sim::nv::Simulator* nv_simulator() {
  const char* s = std::getenv("RIG_SIM");
  if (!s) return nullptr;
  const std::string_view which = s;
  std::optional<sim::nv::Config> config;
  if (which == "nv") config = sim::nv::Config{};
  else if (which == "nv:ampere") config = sim::nv::Config{}, config->classes = sim::nv::kAmpere;
  else if (which == "nv:gvisor") config = sim::nv::Config{}, config->gvisor = true;
  if (!config) return nullptr;
  static auto* simulated = [&] {
    auto* sim = new sim::nv::Simulator(*config);  // outlives the devices
    // Its engines know the launch benches' kernels (nvcc's, which the simulator runs).
    const unsigned sm = config->classes.sm;
    (void)sim->code().add_fatbin(bench::nvidia_kernels(fmt::format("sm_{}", sm)), sm, "the benches' kernels");
    return sim;
  }();
  return simulated;
}
// With RIG_NV_TRACE=FILE, every call of the driver through that seam is appended to FILE with
// its answer (nv::TracingSeam).
os::Seam& nv_seam() {
  static os::Seam* seam = [] {
    os::Seam* base = nv_simulator();
    if (!base) base = &os::system();
    const char* trace = std::getenv("RIG_NV_TRACE");
    if (trace && *trace) return static_cast<os::Seam*>(new nv::TracingSeam(*base, trace));  // outlives the devices
    return base;
  }();
  return *seam;
}
#endif

}  // namespace

std::vector<Gpu> gpu_openers(const std::function<void(const std::string&)>& report) {
  std::vector<Gpu> out;
#if RIG_DRIVER_AMD
  auto* simulator = amd_simulator();
  if (auto gpus = amd::gpus(amd_seam()))
    for (const auto& g : *gpus)
      out.push_back({fmt::format("AMD:{}", g.index),
                     fmt::format("the AMD driver on GPU {} ({}) through KFD{}", g.index, g.arch,
                                 simulator ? ", simulated (RIG_SIM=amd)" : ""),
                     [i = g.index] { return amd::opener(i, amd_seam()); },
                     1,  // submit rings the doorbells itself (rig/amd.hpp)
                     simulator ? std::function<void(bool)>([simulator](bool held) { simulator->hold(held); })
                               : std::function<void(bool)>(),
                     g.bus});
#endif
#if RIG_DRIVER_NV
  auto* nv_simulated = nv_simulator();
  if (auto gpus = nv::gpus(nv_seam()))
    for (const auto& g : *gpus)
      out.push_back({fmt::format("NV:{}", g.index),
                     fmt::format("rig's NVIDIA driver on GPU {} through RM and UVM{}", g.index,
                                 nv_simulated ? ", simulated (RIG_SIM=nv)" : ""),
                     [i = g.index] { return nv::opener(i, nv_seam()); },
                     1,  // submit rings the doorbells itself (rig/nv.hpp)
                     nv_simulated ? std::function<void(bool)>([nv_simulated](bool held) { nv_simulated->hold(held); })
                                  : std::function<void(bool)>(),
                     g.bus});
#endif
#if RIG_DRIVER_CUDA
  // Where libcuda is absent or too old, say why and list none.
  if (auto gpus = rig::cuda::device_count()) {
    for (int i = 0; i < *gpus; ++i)
      out.push_back({fmt::format("CUDA:{}", i), fmt::format("the CUDA driver on GPU {} through libcuda", i),
                     [i] { return rig::cuda::opener(i); },
                     1,  // CUDA runs what is enqueued: submit always commits (rig/cuda.hpp)
                     {},
                     std::nullopt});  // libcuda gives the address once the device is open
  } else {
    report(fmt::format("CUDA: {}", gpus.error()));
  }
#endif
#if RIG_DRIVER_REMOTE
  for (const auto& agent : remote_agents()) {
    auto names = remote::devices(agent);
    if (!names) {
      report(fmt::format("RIG_REMOTE: {}", names.error()));
      continue;
    }
    auto host = agent.substr(0, agent.rfind(':'));
    for (const auto& name : *names)
      out.push_back({fmt::format("{}@{}", name, host), fmt::format("{} of the agent at {} (RIG_REMOTE)", name, agent),
                     [agent, name] { return remote::opener(agent, name); },
                     1,  // the agent commits each value it is given
                     {},
                     std::nullopt});
  }
#endif
  (void)report;
  return out;
}

std::vector<std::string> remote_agents() {
  std::vector<std::string> out;
  const char* list = std::getenv("RIG_REMOTE");
  if (!list) return out;
  std::string_view rest = list;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto one = rest.substr(0, comma);
    if (!one.empty()) out.emplace_back(one);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<Device> open_all(const std::function<void(const std::string&)>& report,
                             std::map<std::string, std::string>* failed_at) {
  std::vector<Device> found{host()};
  for (const auto& gpu : gpu_openers(report)) {
    auto d = open(gpu.make());
    if (d) {
      found.push_back(*d);
    } else {
      report(d.error());
      if (failed_at && gpu.bus) (*failed_at)[*gpu.bus] = d.error();
    }
  }
  return found;
}

GpuPaths gpu_paths() {
  GpuPaths paths;
#if RIG_DRIVER_AMD
  paths.amd = true;
  paths.kfd = amd_simulator() || ::access("/dev/kfd", F_OK) == 0;
  if (auto gpus = amd::gpus(amd_seam()); !gpus) paths.amd_none = gpus.error();
#endif
#if RIG_DRIVER_CUDA
  paths.cuda = true;
  if (auto gpus = rig::cuda::device_count(); !gpus) paths.cuda_none = gpus.error();
#endif
  return paths;
}

Result<std::string> nv_driver_version() {
#if RIG_DRIVER_NV
  return nv::driver_version(nv_seam());
#else
  return std::unexpected(std::string("this rig is built without its NVIDIA driver (-Dnv=disabled)"));
#endif
}

std::vector<std::string> device_names() {
  std::vector<std::string> out{"CPU (the host device)", "MEM, or any name starting with MEM (a new memory device)"};
#if RIG_DRIVER_DISK
  out.push_back("DISK (the disk io device)");
#endif
#if RIG_DRIVER_AMD
  if (auto gpus = amd::gpus(amd_seam()))
    for (const auto& g : *gpus) out.push_back(fmt::format("AMD:{} ({})", g.index, g.arch));
#endif
#if RIG_DRIVER_NV
  if (auto gpus = nv::gpus(nv_seam()))
    for (const auto& g : *gpus) out.push_back(fmt::format("NV:{}", g.index));
#endif
#if RIG_DRIVER_CUDA
  if (auto gpus = rig::cuda::device_count()) {
    for (int i = 0; i < *gpus; ++i) out.push_back(fmt::format("CUDA:{}", i));
  } else {
    out.push_back(fmt::format("no CUDA:N ({})", gpus.error()));
  }
#endif
#if RIG_DRIVER_REMOTE
  for (const auto& agent : remote_agents())
    out.push_back(fmt::format("DEVICE@HOST for each device of the agent at {} (RIG_REMOTE)", agent));
#endif
  return out;
}

Result<Device> open_named(const std::string& name) {
  if (name == "CPU") return host();
  if (name.starts_with("MEM")) return memory_device(name);
#if RIG_DRIVER_DISK
  if (name == "DISK") return open_io(rig::disk::opener());
#endif
#if RIG_DRIVER_AMD
  if (auto index = index_after(name, "AMD:")) {
    auto gpus = amd::gpus(amd_seam());
    if (!gpus) return std::unexpected(fmt::format("no device is named {}: {}", name, gpus.error()));
    for (const auto& g : *gpus)
      if (g.index == *index) return open(amd::opener(g.index, amd_seam()));
  }
#endif
#if RIG_DRIVER_NV
  if (auto index = index_after(name, "NV:")) return open(nv::opener(*index, nv_seam()));
#endif
#if RIG_DRIVER_CUDA
  if (auto index = index_after(name, "CUDA:")) {
    auto gpus = rig::cuda::device_count();
    if (!gpus) return std::unexpected(fmt::format("no device is named {}: {}", name, gpus.error()));
    if (*index < *gpus) return open(rig::cuda::opener(*index));
  }
#endif
#if RIG_DRIVER_REMOTE
  if (name.find('@') != std::string::npos)
    for (auto& gpu : gpu_openers([](const std::string&) {}))
      if (gpu.name == name) return open(gpu.make());
#endif
  return std::unexpected(fmt::format("no device is named {}", name));
}

}  // namespace rig::tool
