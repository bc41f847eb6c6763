// The GPUs on this machine's PCI bus (pci.hpp).
#include "pci.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <xf86drm.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

namespace rig::tool {
namespace {

constexpr std::string_view system_sysfs_pci = "/sys/bus/pci";

// PCI base classes listed as GPUs (pci.hpp says why these two).
constexpr std::uint16_t display_class = 0x03;
constexpr std::uint16_t accelerator_class = 0x12;

// PCI vendor IDs (pci.ids).
constexpr std::uint16_t amd_vendor = 0x1002;
constexpr std::uint16_t nvidia_vendor = 0x10de;

std::string address_of(unsigned domain, unsigned bus, unsigned device, unsigned function) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return out;
}

bool is_gpu_class(std::uint16_t class_id) {
  return class_id >> 8 == display_class || class_id >> 8 == accelerator_class;
}

}  // namespace

RenderNodes drm_render_nodes() {
  std::map<std::string, std::string> nodes;
  int count = drmGetDevices2(0, nullptr, 0);
  if (count > 0) {
    std::vector<drmDevicePtr> devices(std::size_t(count), nullptr);
    int got = drmGetDevices2(0, devices.data(), count);
    for (int i = 0; i < got; ++i) {
      const drmDevice* d = devices[std::size_t(i)];
      if (d->bustype != DRM_BUS_PCI || !d->businfo.pci || !(d->available_nodes & (1 << DRM_NODE_RENDER))) continue;
      const drmPciBusInfo& at = *d->businfo.pci;
      nodes.emplace(address_of(at.domain, at.bus, at.dev, at.func), d->nodes[DRM_NODE_RENDER]);
    }
    if (got > 0) drmFreeDevices(devices.data(), got);
  }
  return [nodes = std::move(nodes)](std::string_view address) -> std::optional<std::string> {
    auto it = nodes.find(lowercase(address));
    if (it == nodes.end()) return std::nullopt;
    return it->second;
  };
}

RenderNodes sysfs_render_nodes(std::string sysfs_pci) {
  return [root = std::move(sysfs_pci)](std::string_view address) -> std::optional<std::string> {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::optional<std::string> lowest;
    for (fs::directory_iterator it(fs::path(root) / "devices" / address / "drm", ec), end; !ec && it != end;
         it.increment(ec)) {
      std::string name = it->path().filename().string();
      std::string_view minor = std::string_view(name).substr(std::min(name.size(), std::size_t(7)));
      if (!name.starts_with("renderD") || minor.empty() ||
          !std::all_of(minor.begin(), minor.end(), [](unsigned char c) { return std::isdigit(c); }))
        continue;
      if (!lowest || name.size() < lowest->size() || (name.size() == lowest->size() && name < *lowest))
        lowest = name;
    }
    if (!lowest) return std::nullopt;
    return "/dev/dri/" + *lowest;
  };
}

RenderNodes render_nodes_for(const std::string& sysfs_pci) {
  if (sysfs_pci == system_sysfs_pci) return drm_render_nodes();
  return sysfs_render_nodes(sysfs_pci);
}

std::string sysfs_pci_root() {
  const char* env = std::getenv("RIG_SYSFS_PCI");
  return env && *env ? std::string(env) : std::string(system_sysfs_pci);
}

PciScan scan_gpus(const std::string& sysfs_pci, const RenderNodes& render_nodes) {
  pci::Listing listing = pci::list_functions(sysfs_pci, [](const pci::Function& f) { return is_gpu_class(f.class_id); });
  PciScan scan{sysfs_pci, {}, std::move(listing.notes)};
  for (pci::Function& f : listing.functions) {
    PciGpu gpu{std::move(f), std::nullopt};
    gpu.render_node = render_nodes(gpu.address);
    scan.gpus.push_back(std::move(gpu));
  }
  return scan;
}

std::vector<std::string> opened_as(const PciGpu& gpu, const Reach& reach) {
  std::vector<std::string> names;
  for (const auto& [name, bus] : reach.opened)
    if (bus && lowercase(*bus) == lowercase(gpu.address)) names.push_back(name);
  return names;
}

std::string why(const PciGpu& gpu, const Reach& reach) {
  if (auto names = opened_as(gpu, reach); !names.empty()) {
    std::vector<std::string> ways;
    for (const auto& name : names)
      ways.push_back(name.starts_with("CUDA:") ? fmt::format("{} opens it through libcuda", name)
                                               : fmt::format("opened as {}", name));
    return fmt::format("{}", fmt::join(ways, "; "));
  }
  for (const auto& [address, failure] : reach.failed)
    if (lowercase(address) == lowercase(gpu.address)) return fmt::format("opening it failed: {}", failure);
  if (!gpu.driver) {
    if (gpu.vendor_id == amd_vendor) return "no kernel driver bound: rig's AMD driver needs amdgpu with KFD";
    if (gpu.vendor_id == nvidia_vendor) return "no kernel driver bound: rig reaches NVIDIA GPUs through the nvidia kernel module";
    return "no kernel driver bound";
  }
  const std::string& driver = *gpu.driver;
  if (driver == "vfio-pci") return "bound to vfio-pci: rig's VFIO path is not built yet";
  if (driver == "amdgpu") {
    if (!reach.amd_driver) return "bound to amdgpu: this rig is built without its AMD driver";
    if (!reach.kfd) return "needs /dev/kfd (amdgpu with KFD)";
    if (reach.amd_none) return fmt::format("bound to amdgpu, but KFD lists no GPU: {}", *reach.amd_none);
    return "bound to amdgpu, but KFD's topology does not list it";
  }
  if (driver == "radeon") return "bound to radeon: rig's AMD driver needs amdgpu with KFD";
  if (driver == "nvidia") {
    if (!reach.cuda_driver)
      return "bound to nvidia: this rig is built without its CUDA driver, and rig's own NVIDIA driver is not built yet";
    if (reach.cuda_none) return fmt::format("bound to nvidia, but libcuda gives no device: {}", *reach.cuda_none);
    return "bound to nvidia, but libcuda lists no device at this address (CUDA_VISIBLE_DEVICES?)";
  }
  if (driver == "nouveau") return "bound to nouveau: rig's NVIDIA driver needs the nvidia kernel module";
  return fmt::format("bound to {}: rig has no driver that works through {}", driver, driver);
}

}  // namespace rig::tool
