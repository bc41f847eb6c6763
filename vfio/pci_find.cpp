// A PCI function's address by its IDs, from sysfs alone (pci_bus.hpp: find).
#include "pci_bus.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace rig::pci {
namespace {

// The number in a sysfs ID file ("0x1234\n"), or nullopt.
std::optional<std::uint16_t> read_id(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || !text.starts_with("0x")) return std::nullopt;
  unsigned value = 0;
  const auto [end, error] = std::from_chars(text.data() + 2, text.data() + text.size(), value, 16);
  if (error != std::errc() || end != text.data() + text.size() || value > 0xffff) return std::nullopt;
  return std::uint16_t(value);
}

}  // namespace

std::vector<std::string> find(const std::string& sysfs_pci, std::uint16_t vendor_id, std::uint16_t device_id) {
  std::vector<std::string> addresses;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(sysfs_pci) / "devices", ec)) {
    if (read_id(entry.path() / "vendor") == vendor_id && read_id(entry.path() / "device") == device_id)
      addresses.push_back(entry.path().filename().string());
  }
  std::sort(addresses.begin(), addresses.end());
  return addresses;
}

}  // namespace rig::pci
