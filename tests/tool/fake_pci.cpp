// A fake sysfs PCI tree (fake_pci.hpp).
#include "fake_pci.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace rig::test {

namespace fs = std::filesystem;

FakePci::FakePci() {
  std::string pattern = (fs::temp_directory_path() / "rig-fake-pci-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot make a temporary folder for a fake PCI tree");
  top_ = pattern;
  root_ = top_ / "bus" / "pci";
  fs::create_directories(root_ / "devices");
  fs::create_directories(root_ / "drivers");
}

FakePci::~FakePci() {
  std::error_code ec;
  fs::remove_all(top_, ec);
}

void FakePci::write(const std::string& address, const std::string& name, const std::string& text) {
  std::ofstream(function(address) / name) << text;
}

void FakePci::add(const std::string& address, unsigned vendor, unsigned device, unsigned pci_class,
                  std::optional<std::string> driver, std::optional<std::string> render) {
  fs::create_directories(function(address));
  write(address, "vendor", fmt::format("0x{:04x}\n", vendor));
  write(address, "device", fmt::format("0x{:04x}\n", device));
  write(address, "class", fmt::format("0x{:06x}\n", pci_class));
  // The first bytes of configuration space: vendor, device, command, status, revision, class.
  std::string config(64, '\0');
  config[0] = char(vendor & 0xff), config[1] = char(vendor >> 8);
  config[2] = char(device & 0xff), config[3] = char(device >> 8);
  config[9] = char(pci_class & 0xff), config[10] = char((pci_class >> 8) & 0xff), config[11] = char(pci_class >> 16);
  write(address, "config", config);
  if (driver) {
    fs::create_directories(root_ / "drivers" / *driver);
    fs::create_directory_symlink(fs::path("..") / ".." / "drivers" / *driver, function(address) / "driver");
  }
  if (render) fs::create_directories(function(address) / "drm" / *render);
}

}  // namespace rig::test
