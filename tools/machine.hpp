// machine.hpp — the devices of this machine that the rig tool reaches by name: the host
// device ("CPU"), memory devices ("MEM…"), the disk device ("DISK"), AMD GPUs through KFD
// ("AMD:N"; with RIG_SIM=amd one simulated gfx1100) and CUDA GPUs through libcuda ("CUDA:N"),
// as this build of the tool has them, and the devices of the `rig serve` agents that
// RIG_REMOTE lists ("DEVICE@HOST").
#pragma once

#include <rig/edge.hpp>
#include <rig/rig.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rig::tool {

// The host device, then every GPU that opens; `report` gets a line for each driver or GPU
// that could not be opened, saying why. Where `failed_at` is given, it also gets that line by
// PCI address ("0000:03:00.0") for each GPU whose opener knew its address.
std::vector<Device> open_all(const std::function<void(const std::string&)>& report,
                             std::map<std::string, std::string>* failed_at = nullptr);

// The device `name` names, opened; Error saying why where there is none of that name.
Result<Device> open_named(const std::string& name);

// The names open_named takes, one a line with what each is, for a message that refuses one.
std::vector<std::string> device_names();

// Each GPU open_all would open, and each device of the agents RIG_REMOTE lists, as a way to open more devices of it: its name, what it is,
// a maker of its opener, and the bound within which its driver commits on its own.
struct Gpu {
  std::string name, about;
  std::function<edge::Opener<>()> make;
  std::optional<std::uint64_t> commit_bound;
  // For a simulated GPU, holds (true) or releases its engines, which then take no new
  // work; empty for a real one.
  std::function<void(bool)> hold_engines;
  // Its PCI address ("0000:03:00.0"), where the driver knows it before opening.
  std::optional<std::string> bus;
};
std::vector<Gpu> gpu_openers(const std::function<void(const std::string&)>& report);

// The agents RIG_REMOTE lists, comma-separated HOST:PORT addresses; empty where it is unset.
std::vector<std::string> remote_agents();

// The ways this build of the tool reaches GPUs: whether it has the AMD driver and KFD is
// there for it (/dev/kfd, or the simulated GPU of RIG_SIM=amd), whether it has the CUDA
// driver, and why each lists no GPU where it lists none.
struct GpuPaths {
  bool amd = false, kfd = false, cuda = false;
  std::optional<std::string> amd_none, cuda_none;
};
GpuPaths gpu_paths();

// The NVIDIA kernel driver's version as rig's NVIDIA driver reads it (through the simulator
// with RIG_SIM=nv), or Error saying why; Error too where this build has no NVIDIA driver.
Result<std::string> nv_driver_version();

}  // namespace rig::tool
