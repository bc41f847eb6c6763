// The host device and memory devices: the host's drivers opened through the core's opening
// path, as every driver's opener is (core/local.hpp).
#include <rig/rig.hpp>

#include <stdexcept>

#include "../core/local.hpp"
#include "host_driver.hpp"

namespace rig {
namespace {

Device opened(Result<Device> d) {
  if (!d) throw std::runtime_error(d.error());
  return *d;
}

}  // namespace

Device host() {
  static Device h = opened(detail::open_local({"CPU", cpu::make_host_driver}, true));
  return h;
}

Device memory_device(std::string_view name) {
  if (name.empty()) throw std::invalid_argument("memory_device: the name is empty");
  if (name == "CPU") throw std::invalid_argument("memory_device: CPU is the host device's name");
  host();  // the host device holds index 0
  return opened(detail::open_local({std::string(name), cpu::make_memory_driver}, false));
}

}  // namespace rig
