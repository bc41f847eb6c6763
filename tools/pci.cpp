// The GPUs on this machine's PCI bus (pci.hpp).
#include "pci.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#ifndef RIG_STATIC_BUNDLE  // a static bundle has no libpci (Debian ships it shared only)
extern "C" {
#include <pci/pci.h>
}
#endif
#include <xf86drm.h>

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdio>
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

#ifndef RIG_STATIC_BUNDLE
// libpci reports through two callbacks of the access, which carry no context: an error must
// not return, so it throws this, which unwinds through libpci's frames (its C is built with
// unwind tables); a warning is kept in the notes of the scan in progress on this thread.
struct LibpciError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
thread_local std::vector<std::string>* scan_notes = nullptr;

std::string vformat_c(const char* format, va_list args) {
  char text[1024];
  std::vsnprintf(text, sizeof text, format, args);
  return text;
}
[[noreturn]] void on_libpci_error(char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string text = vformat_c(format, args);
  va_end(args);
  throw LibpciError(text);
}
void on_libpci_warning(char* format, ...) {
  va_list args;
  va_start(args, format);
  std::string text = vformat_c(format, args);
  va_end(args);
  if (scan_notes && std::find(scan_notes->begin(), scan_notes->end(), text) == scan_notes->end())
    scan_notes->push_back(std::move(text));
}
void on_libpci_debug(char*, ...) {}

struct PciCleanup {
  void operator()(pci_access* a) const { pci_cleanup(a); }
};

// pci.ids' name for the IDs `flags` asks about (libpci prints them in hex where pci.ids has
// no name); udev's hwdb is not asked, so the names are pci.ids' own.
template <typename... Ids>
std::string name_of(pci_access* a, int flags, Ids... ids) {
  char text[256] = {};
  const char* got = pci_lookup_name(a, text, sizeof text, flags | PCI_LOOKUP_NO_HWDB, int(ids)...);
  return got ? got : "";
}
#endif

[[maybe_unused]] bool is_gpu_class(std::uint16_t class_id) {
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
  PciScan scan{sysfs_pci, {}, {}};
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::path(sysfs_pci) / "devices", ec)) {
    scan.notes.push_back(fmt::format("no PCI bus here: {}/devices is absent", sysfs_pci));
    return scan;
  }
#ifdef RIG_STATIC_BUNDLE
  (void)render_nodes;
  scan.notes.push_back("this rig is a static bundle, built without libpci: it lists no GPU of the PCI bus");
  return scan;
#else
  std::unique_ptr<pci_access, PciCleanup> access(pci_alloc());
  if (!access) {
    scan.notes.push_back("cannot list the PCI bus: libpci could not start");
    return scan;
  }
  pci_access* a = access.get();
  a->error = on_libpci_error;
  a->warning = on_libpci_warning;
  a->debug = on_libpci_debug;
  a->method = PCI_ACCESS_SYS_BUS_PCI;
  scan_notes = &scan.notes;
  struct Forget {
    ~Forget() { scan_notes = nullptr; }
  } forget;
  try {
    std::string path = sysfs_pci;
    if (pci_set_param(a, const_cast<char*>("sysfs.path"), path.data()) != 0)
      throw LibpciError("this libpci has no sysfs.path parameter");
    pci_init(a);
    pci_scan_bus(a);
  } catch (const LibpciError& e) {
    scan.notes.push_back(fmt::format("cannot list the PCI bus at {}: {}", sysfs_pci, e.what()));
    return scan;
  }
  for (pci_dev* d = a->devices; d; d = d->next) {
    std::string address = address_of(unsigned(d->domain), d->bus, d->dev, d->func);
    try {
      int known = pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_DRIVER);
      if (!(known & PCI_FILL_CLASS) || !is_gpu_class(d->device_class)) continue;
      PciGpu gpu;
      gpu.address = address;
      gpu.vendor_id = d->vendor_id;
      gpu.device_id = d->device_id;
      gpu.class_id = d->device_class;
      gpu.vendor = name_of(a, PCI_LOOKUP_VENDOR, d->vendor_id);
      gpu.device = name_of(a, PCI_LOOKUP_DEVICE, d->vendor_id, d->device_id);
      gpu.kind = name_of(a, PCI_LOOKUP_CLASS, d->device_class);
      if (known & PCI_FILL_DRIVER)
        if (const char* driver = pci_get_string_property(d, PCI_FILL_DRIVER); driver && *driver) gpu.driver = driver;
      gpu.render_node = render_nodes(address);
      scan.gpus.push_back(std::move(gpu));
    } catch (const LibpciError& e) {
      scan.notes.push_back(fmt::format("{} left out: {}", address, e.what()));
    }
  }
  // libpci gives numbers without a word where it has no pci.ids to read.
  if (!scan.gpus.empty() && a->id_file_name && ::access(a->id_file_name, R_OK) != 0)
    scan.notes.push_back(fmt::format("no pci.ids at {}: names show as numbers (install the pci.ids package)",
                                     a->id_file_name));
  std::sort(scan.gpus.begin(), scan.gpus.end(), [](const PciGpu& x, const PciGpu& y) { return x.address < y.address; });
  return scan;
#endif
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
