// A fake sysfs PCI tree in a temporary folder, laid out as the kernel lays out
// /sys/bus/pci: devices/ADDRESS/{vendor,device,class,config}, a driver link into drivers/,
// and drm/renderD* for a function with a render node.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace rig::test {

class FakePci {
 public:
  FakePci();
  ~FakePci();
  FakePci(const FakePci&) = delete;
  FakePci& operator=(const FakePci&) = delete;

  // The tree's root, to give as sysfs.path ("…/bus/pci").
  std::string root() const { return root_.string(); }
  // The folder of the function at `address`.
  std::filesystem::path function(const std::string& address) const { return root_ / "devices" / address; }

  // Adds the function at `address` with these IDs and class (0x030000: a VGA controller),
  // bound to `driver` if given, with the render node `render` ("renderD128") if given.
  void add(const std::string& address, unsigned vendor, unsigned device, unsigned pci_class,
           std::optional<std::string> driver = std::nullopt, std::optional<std::string> render = std::nullopt);

  // Writes `text` as the file `name` of the function at `address`.
  void write(const std::string& address, const std::string& name, const std::string& text);

 private:
  std::filesystem::path top_, root_;
};

}  // namespace rig::test
