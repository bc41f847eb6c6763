// The functions on a PCI bus, through libpci (pci_bus.hpp).
#include "pci_bus.hpp"

#include <fmt/format.h>

#ifndef RIG_STATIC_BUNDLE  // a static bundle has no libpci (Debian ships it shared only)
extern "C" {
#include <pci/pci.h>
}
#endif

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

namespace rig::pci {
namespace {

std::string address_of(unsigned domain, unsigned bus, unsigned device, unsigned function) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", domain, bus, device, function);
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

}  // namespace

Listing list_functions(const std::string& sysfs_pci, const Keep& keep) {
  Listing listing{sysfs_pci, {}, {}};
  std::error_code ec;
  if (!std::filesystem::is_directory(std::filesystem::path(sysfs_pci) / "devices", ec)) {
    listing.notes.push_back(fmt::format("no PCI bus here: {}/devices is absent", sysfs_pci));
    return listing;
  }
#ifdef RIG_STATIC_BUNDLE
  (void)keep;
  listing.notes.push_back("this rig is a static bundle, built without libpci: it lists no function of the PCI bus");
  return listing;
#else
  std::unique_ptr<pci_access, PciCleanup> access(pci_alloc());
  if (!access) {
    listing.notes.push_back("cannot list the PCI bus: libpci could not start");
    return listing;
  }
  pci_access* a = access.get();
  a->error = on_libpci_error;
  a->warning = on_libpci_warning;
  a->debug = on_libpci_debug;
  a->method = PCI_ACCESS_SYS_BUS_PCI;
  scan_notes = &listing.notes;
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
    listing.notes.push_back(fmt::format("cannot list the PCI bus at {}: {}", sysfs_pci, e.what()));
    return listing;
  }
  for (pci_dev* d = a->devices; d; d = d->next) {
    std::string address = address_of(unsigned(d->domain), d->bus, d->dev, d->func);
    try {
      int known = pci_fill_info(d, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_DRIVER);
      if (!(known & PCI_FILL_CLASS)) continue;
      Function f;
      f.address = address;
      f.vendor_id = d->vendor_id;
      f.device_id = d->device_id;
      f.class_id = d->device_class;
      if (known & PCI_FILL_DRIVER)
        if (const char* driver = pci_get_string_property(d, PCI_FILL_DRIVER); driver && *driver) f.driver = driver;
      if (!keep(f)) continue;
      f.vendor = name_of(a, PCI_LOOKUP_VENDOR, d->vendor_id);
      f.device = name_of(a, PCI_LOOKUP_DEVICE, d->vendor_id, d->device_id);
      f.kind = name_of(a, PCI_LOOKUP_CLASS, d->device_class);
      listing.functions.push_back(std::move(f));
    } catch (const LibpciError& e) {
      listing.notes.push_back(fmt::format("{} left out: {}", address, e.what()));
    }
  }
  // libpci gives numbers without a word where it has no pci.ids to read.
  if (!listing.functions.empty() && a->id_file_name && ::access(a->id_file_name, R_OK) != 0)
    listing.notes.push_back(fmt::format("no pci.ids at {}: names show as numbers (install the pci.ids package)",
                                        a->id_file_name));
  std::sort(listing.functions.begin(), listing.functions.end(),
            [](const Function& x, const Function& y) { return x.address < y.address; });
  return listing;
#endif
}

}  // namespace rig::pci
