// local.hpp — how the devices whose work is this process's own code open: the host device
// and memory devices (host/devices.cpp), through the same path as every driver's opener.
// Internal to rig.
#pragma once

#include <rig/edge.hpp>
#include <rig/rig.hpp>

namespace rig::detail {

// Opens `opener`'s device as one that runs on the host (Device::runs_on_host): at index 0,
// the host device's, when `host_index`, else at the next free index. A live device of the
// same name is returned as it is.
Result<Device> open_local(const edge::Opener<>& opener, bool host_index);

}  // namespace rig::detail
