// pci_bus.hpp — the functions on a PCI bus as libpci reads them from sysfs: their IDs, class,
// pci.ids names and bound kernel driver. `rig devices --pci` lists the GPUs among them; a
// driverless path finds its function by vendor and device ID.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace rig::pci {

// One PCI function.
struct Function {
  std::string address;                 // "0000:03:00.0": domain, bus, device, function
  std::uint16_t vendor_id = 0, device_id = 0;
  std::uint16_t class_id = 0;          // 0x0300: base class and subclass
  std::string vendor, device, kind;    // pci.ids' names of vendor, device and class
  std::optional<std::string> driver;   // the kernel driver bound ("amdgpu"), none if unbound
};

// What a listing found: the functions kept, in address order, and a line for each thing that
// could not be listed (no PCI bus, a function whose sysfs files are missing or garbled, a
// missing pci.ids).
struct Listing {
  std::string sysfs_pci;  // the tree read: "/sys/bus/pci"
  std::vector<Function> functions;
  std::vector<std::string> notes;
};

// Which functions a listing keeps, by class (0x0300) or by all their IDs.
using Keep = std::function<bool(const Function& ids)>;

// The functions of the sysfs PCI tree at `sysfs_pci` ("/sys/bus/pci") that `keep` keeps
// (asked with the IDs, class and driver filled, before the names are looked up), read
// through libpci's sysfs method. Never throws for what the tree holds: where there is no
// `sysfs_pci`/devices (no PCI bus, as in many containers), it lists none and says so in one
// note; where libpci cannot read the tree, it lists none and the note says why; a function
// it cannot read is left out with a note naming it; where it kept any and pci.ids is
// missing, a note says the names show as numbers.
Listing list_functions(const std::string& sysfs_pci, const Keep& keep);

// The addresses of the functions with these IDs on the tree at `sysfs_pci`, in order, read
// from each function's `vendor` and `device` files without libpci (pci_find.cpp, its own
// library, rig_pci_find: what a statically linked program can take). None where the tree has
// no devices folder; a function whose files are missing or garbled is not one of them.
std::vector<std::string> find(const std::string& sysfs_pci, std::uint16_t vendor_id, std::uint16_t device_id);

}  // namespace rig::pci
