// The NVIDIA driver's images (device.hpp): not built yet, and refused as such.
#include "device.hpp"

namespace rig::nv::driver {

Result<edge::Code> Device::image(std::span<const std::byte>) {
  return std::unexpected(name_ + ": loading kernels is not built yet in rig's NVIDIA driver");
}

edge::EntryAnswer Device::entry(edge::ImageId, std::string_view) { return edge::Absent{}; }

void Device::unload(edge::ImageId) {}

}  // namespace rig::nv::driver
