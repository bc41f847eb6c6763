// pci.hpp — the GPUs on this machine's PCI bus, whether or not rig opens them: their names
// (from pci.ids, through libpci), their kernel driver, their render node (through libdrm),
// and why rig can or cannot open each.
//
// A GPU here is a PCI function of class 0x03 (display controllers: VGA 0x0300, XGA 0x0301,
// 3D 0x0302, other 0x0380; NVIDIA's compute GPUs are 3D controllers, AMD's Instinct parts
// "other" display controllers) or 0x12 (processing accelerators, where compute-only parts
// without a display engine list themselves).
#pragma once

#include <pci_bus.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rig::tool {

// One GPU on the bus: its function (address, IDs, class, names, driver) and its render node.
struct PciGpu : pci::Function {
  std::optional<std::string> render_node;  // "/dev/dri/renderD128", if it has one
};
// The render node of the function at a PCI address ("0000:03:00.0"), or nullopt.
using RenderNodes = std::function<std::optional<std::string>(std::string_view address)>;

// The render nodes libdrm lists (drmGetDevices2), matched by PCI bus address. None where
// there is no DRM device (no /dev/dri).
RenderNodes drm_render_nodes();

// The render nodes a sysfs PCI tree lists under each function's directory,
// `sysfs_pci`/devices/ADDRESS/drm/renderD*, as "/dev/dri/renderD*"; for a tree libdrm does
// not read (a test's fake tree).
RenderNodes sysfs_render_nodes(std::string sysfs_pci);

// The render nodes of the tree at `sysfs_pci`: libdrm's for the system's "/sys/bus/pci",
// sysfs_render_nodes' for another.
RenderNodes render_nodes_for(const std::string& sysfs_pci);

// What a scan of the bus found: the GPUs, in address order, and a line for each thing that
// could not be listed (no PCI bus, a function whose sysfs files are missing or garbled, a
// missing pci.ids).
struct PciScan {
  std::string sysfs_pci;  // the tree read: "/sys/bus/pci"
  std::vector<PciGpu> gpus;
  std::vector<std::string> notes;
};

// The GPUs of the sysfs PCI tree at `sysfs_pci` ("/sys/bus/pci"), read through libpci's
// sysfs method, with their render nodes from `render_nodes`. Never throws for what the tree
// holds: where there is no `sysfs_pci`/devices (no PCI bus, as in many containers), it lists
// none and says so in one note; where libpci cannot read the tree, it lists none and the
// note says why; a function it cannot read is left out with a note naming it.
PciScan scan_gpus(const std::string& sysfs_pci, const RenderNodes& render_nodes);

// The tree `rig devices` reads: $RIG_SYSFS_PCI where set (a fake tree for tests), else
// "/sys/bus/pci".
std::string sysfs_pci_root();

// What rig reached on this machine, for saying why it can or cannot open each GPU.
struct Reach {
  // The devices opened, by name ("AMD:0", "CUDA:1"), each with its facts' PCI address.
  std::vector<std::pair<std::string, std::optional<std::string>>> opened;
  // Why opening the GPU at an address failed, by address ("0000:03:00.0"), where its opener
  // knew the address.
  std::map<std::string, std::string> failed;
  bool amd_driver = false;             // this rig is built with its AMD driver
  bool kfd = false;                    // /dev/kfd is there (or the AMD GPU is simulated)
  std::optional<std::string> amd_none; // why the AMD driver lists no GPU, where it lists none
  bool cuda_driver = false;            // this rig is built with its CUDA driver
  std::optional<std::string> cuda_none;  // why libcuda gives no device, where it gives none
};

// The devices of `reach.opened` at `gpu`'s address, in order (addresses compare without
// regard to case).
std::vector<std::string> opened_as(const PciGpu& gpu, const Reach& reach);

// Why rig can or cannot open `gpu`, in a sentence for a user: "opened as AMD:0",
// "CUDA:0 opens it through libcuda", "needs /dev/kfd (amdgpu with KFD)",
// "bound to vfio-pci: rig's VFIO path is not built yet", "no kernel driver bound", ...
std::string why(const PciGpu& gpu, const Reach& reach);

}  // namespace rig::tool
