// machine.hpp — the devices of this machine that the rig tool reaches by name: the host
// device ("CPU"), memory devices ("MEM…"), the disk device ("DISK"), AMD GPUs through KFD
// ("AMD:N"; with RIG_SIM=amd one simulated gfx1100) and CUDA GPUs through libcuda ("CUDA:N"),
// as this build of the tool has them.
#pragma once

#include <rig/rig.hpp>

#include <functional>
#include <string>
#include <vector>

namespace rig::tool {

// The host device, then every GPU that opens; `report` gets a line for each driver or GPU
// that could not be opened, saying why.
std::vector<Device> open_all(const std::function<void(const std::string&)>& report);

// The device `name` names, opened; Error saying why where there is none of that name.
Result<Device> open_named(const std::string& name);

// The names open_named takes, one a line with what each is, for a message that refuses one.
std::vector<std::string> device_names();

}  // namespace rig::tool
