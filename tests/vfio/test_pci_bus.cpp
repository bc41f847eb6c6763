// pci::find and pci::list_functions (pci_bus.hpp) on a fake sysfs tree (tests/tool/fake_pci.hpp);
// tests/tool/test_pci.cpp checks the GPU listing built on them.
#include <pci_bus.hpp>

#include "../tool/fake_pci.hpp"

#include <doctest/doctest.h>

TEST_CASE("find gives the addresses of the functions with both IDs, in address order") {
  rig::test::FakePci pci;
  pci.add("0000:00:05.0", 0x1234, 0x11e8, 0x00ff00, "vfio-pci");
  pci.add("0000:00:02.0", 0x1234, 0x11e8, 0x00ff00);
  pci.add("0000:00:03.0", 0x1234, 0x1111, 0x030000, "bochs-drm");  // same vendor, another device
  pci.add("0000:00:04.0", 0x8086, 0x11e8, 0x020000, "e1000e");     // same device ID, another vendor
  CHECK(rig::pci::find(pci.root(), 0x1234, 0x11e8) == std::vector<std::string>{"0000:00:02.0", "0000:00:05.0"});
  CHECK(rig::pci::find(pci.root(), 0x10de, 0x2330).empty());
}

TEST_CASE("find, from sysfs alone, passes over a function whose ID files are garbled and finds none without a bus") {
  rig::test::FakePci pci;
  pci.add("0000:00:02.0", 0x1234, 0x11e8, 0x00ff00);
  pci.add("0000:00:03.0", 0x1234, 0x11e8, 0x00ff00);
  pci.write("0000:00:03.0", "vendor", "1234\n");  // no 0x
  pci.add("0000:00:04.0", 0x1234, 0x11e8, 0x00ff00);
  pci.write("0000:00:04.0", "device", "0x11e8zz\n");
  CHECK(rig::pci::find(pci.root(), 0x1234, 0x11e8) == std::vector<std::string>{"0000:00:02.0"});
  CHECK(rig::pci::find("/nonexistent/bus/pci", 0x1234, 0x11e8).empty());
}

TEST_CASE("a listing carries each function's bound driver, and none for an unbound one") {
  rig::test::FakePci pci;
  pci.add("0000:00:02.0", 0x1234, 0x11e8, 0x00ff00, "vfio-pci");
  pci.add("0000:00:03.0", 0x1234, 0x11e8, 0x00ff00);
  auto listing = rig::pci::list_functions(pci.root(), [](const rig::pci::Function&) { return true; });
  REQUIRE(listing.functions.size() == 2);
  CHECK(listing.functions[0].driver == "vfio-pci");
  CHECK_FALSE(listing.functions[1].driver.has_value());
  CHECK(listing.functions[0].class_id == 0x00ff);
}

TEST_CASE("a tree without a PCI bus lists nothing and says so") {
  auto listing = rig::pci::list_functions("/nonexistent/bus/pci", [](const rig::pci::Function&) { return true; });
  CHECK(listing.functions.empty());
  REQUIRE(listing.notes.size() == 1);
  CHECK(listing.notes[0] == "no PCI bus here: /nonexistent/bus/pci/devices is absent");
}
