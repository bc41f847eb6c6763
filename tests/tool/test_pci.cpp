// The GPUs on the PCI bus (tools/pci.hpp), read from a fake sysfs tree.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "../../tools/pci.hpp"
#include "fake_pci.hpp"

using rig::tool::PciGpu;
using rig::tool::PciScan;
using rig::tool::Reach;

namespace {

// A machine with four GPUs and the sound function of the first:
//   03:00.0 AMD Navi 31 bound to amdgpu, render node renderD128 (and a card0 node)
//   03:00.1 the same card's HD audio, bound to snd_hda_intel: no GPU
//   1b:00.0 NVIDIA H100 SXM5 bound to nvidia, render node renderD129
//   41:00.0 NVIDIA H100 PCIe bound to vfio-pci
//   c1:00.0 AMD Navi 21 with no driver
struct Machine {
  rig::test::FakePci pci;
  Machine() {
    pci.add("0000:03:00.0", 0x1002, 0x744c, 0x030000, "amdgpu", "renderD128");
    std::filesystem::create_directories(pci.function("0000:03:00.0") / "drm" / "card0");
    pci.add("0000:03:00.1", 0x1002, 0xab30, 0x040300, "snd_hda_intel");
    pci.add("0000:1b:00.0", 0x10de, 0x2330, 0x030200, "nvidia", "renderD129");
    pci.add("0000:41:00.0", 0x10de, 0x2331, 0x030200, "vfio-pci");
    pci.add("0000:c1:00.0", 0x1002, 0x73bf, 0x030000);
  }
  PciScan scan() const { return rig::tool::scan_gpus(pci.root(), rig::tool::sysfs_render_nodes(pci.root())); }
};

const PciGpu* at(const PciScan& scan, const std::string& address) {
  for (const auto& g : scan.gpus)
    if (g.address == address) return &g;
  return nullptr;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the scan lists every display and accelerator function, in address order, and nothing else") {
  Machine m;
  m.pci.add("0000:42:00.0", 0x1e52, 0x0001, 0x120000);  // a processing accelerator
  m.pci.add("0000:00:1f.0", 0x8086, 0x1234, 0x020000, "e1000e");  // a network function
  PciScan scan = m.scan();
  std::vector<std::string> addresses;
  for (const auto& g : scan.gpus) addresses.push_back(g.address);
  CHECK(addresses == std::vector<std::string>{"0000:03:00.0", "0000:1b:00.0", "0000:41:00.0", "0000:42:00.0",
                                              "0000:c1:00.0"});
  CHECK(scan.notes.empty());
  CHECK(scan.sysfs_pci == m.pci.root());
}

TEST_CASE("a GPU carries its IDs, class and pci.ids' names") {
  Machine m;
  PciScan scan = m.scan();
  const PciGpu* amd = at(scan, "0000:03:00.0");
  REQUIRE(amd);
  CHECK(amd->vendor_id == 0x1002);
  CHECK(amd->device_id == 0x744c);
  CHECK(amd->class_id == 0x0300);
  CHECK(amd->vendor == "Advanced Micro Devices, Inc. [AMD/ATI]");
  CHECK(contains(amd->device, "Navi 31"));
  CHECK(amd->kind == "VGA compatible controller");
  const PciGpu* h100 = at(scan, "0000:1b:00.0");
  REQUIRE(h100);
  CHECK(h100->vendor == "NVIDIA Corporation");
  CHECK(contains(h100->device, "H100 SXM5"));
  CHECK(h100->kind == "3D controller");
}

TEST_CASE("a GPU carries the kernel driver bound to it, or none") {
  Machine m;
  PciScan scan = m.scan();
  CHECK(at(scan, "0000:03:00.0")->driver == "amdgpu");
  CHECK(at(scan, "0000:1b:00.0")->driver == "nvidia");
  CHECK(at(scan, "0000:41:00.0")->driver == "vfio-pci");
  CHECK(!at(scan, "0000:c1:00.0")->driver);
}

TEST_CASE("a GPU carries its render node from the drm entries of its folder") {
  Machine m;
  PciScan scan = m.scan();
  CHECK(at(scan, "0000:03:00.0")->render_node == "/dev/dri/renderD128");
  CHECK(at(scan, "0000:1b:00.0")->render_node == "/dev/dri/renderD129");
  CHECK(!at(scan, "0000:41:00.0")->render_node);
  CHECK(!at(scan, "0000:c1:00.0")->render_node);
}

TEST_CASE("a tree with no devices folder is no PCI bus: none listed, one note") {
  rig::test::FakePci pci;
  std::filesystem::remove_all(std::filesystem::path(pci.root()) / "devices");
  PciScan scan = rig::tool::scan_gpus(pci.root(), rig::tool::sysfs_render_nodes(pci.root()));
  CHECK(scan.gpus.empty());
  REQUIRE(scan.notes.size() == 1);
  CHECK(scan.notes[0] == "no PCI bus here: " + pci.root() + "/devices is absent");
}

TEST_CASE("a function whose files are missing is left out with a note naming it; the others are listed") {
  Machine m;
  m.pci.add("0000:05:00.0", 0x1002, 0x744c, 0x030000);
  std::filesystem::remove(m.pci.function("0000:05:00.0") / "class");
  PciScan scan = m.scan();
  CHECK(scan.gpus.size() == 4);
  CHECK(!at(scan, "0000:05:00.0"));
  REQUIRE(scan.notes.size() == 1);
  CHECK(scan.notes[0].starts_with("0000:05:00.0 left out: "));
  CHECK(contains(scan.notes[0], "class"));
}

TEST_CASE("garbled files neither crash the scan nor hide the other GPUs") {
  Machine m;
  m.pci.add("0000:06:00.0", 0x10de, 0x2330, 0x030200);
  m.pci.write("0000:06:00.0", "vendor", "not a number\n");
  m.pci.write("0000:06:00.0", "device", std::string(4000, 'x'));
  std::filesystem::create_directories(m.pci.function("0000:06:00.0") / "drm" / "renderDx");
  PciScan scan = m.scan();
  CHECK(at(scan, "0000:03:00.0"));
  CHECK(at(scan, "0000:c1:00.0"));
  if (const PciGpu* odd = at(scan, "0000:06:00.0")) CHECK(!odd->render_node);
  else CHECK(std::any_of(scan.notes.begin(), scan.notes.end(), [](const std::string& n) { return n.starts_with("0000:06:00.0"); }));
}

TEST_CASE("a tree libpci cannot read lists none, with a note saying why") {
  Machine m;
  std::filesystem::create_directories(std::filesystem::path(m.pci.root()) / "devices" / "not-an-address");
  PciScan scan = m.scan();
  CHECK(scan.gpus.empty());
  REQUIRE(scan.notes.size() == 1);
  CHECK(scan.notes[0].starts_with("cannot list the PCI bus at " + m.pci.root() + ": "));
  CHECK(contains(scan.notes[0], "not-an-address"));
}

TEST_CASE("an opened device whose facts give a GPU's address is how rig opens it") {
  Machine m;
  PciScan scan = m.scan();
  Reach reach;
  reach.opened = {{"CPU", std::nullopt}, {"AMD:0", "0000:03:00.0"}, {"CUDA:0", "0000:1B:00.0"}};
  reach.amd_driver = reach.kfd = reach.cuda_driver = true;
  CHECK(rig::tool::why(*at(scan, "0000:03:00.0"), reach) == "opened as AMD:0");
  CHECK(rig::tool::why(*at(scan, "0000:1b:00.0"), reach) == "CUDA:0 opens it through libcuda");
  CHECK(rig::tool::opened_as(*at(scan, "0000:1b:00.0"), reach) == std::vector<std::string>{"CUDA:0"});
  CHECK(rig::tool::opened_as(*at(scan, "0000:41:00.0"), reach).empty());
}

TEST_CASE("a GPU rig does not open says why, from its binding and what this rig reached") {
  Machine m;
  PciScan scan = m.scan();
  const PciGpu& amd = *at(scan, "0000:03:00.0");
  const PciGpu& h100 = *at(scan, "0000:1b:00.0");
  Reach reach;
  reach.opened = {{"CPU", std::nullopt}};
  CHECK(rig::tool::why(*at(scan, "0000:41:00.0"), reach) == "bound to vfio-pci: rig's VFIO path is not built yet");
  CHECK(rig::tool::why(*at(scan, "0000:c1:00.0"), reach) ==
        "no kernel driver bound: rig's AMD driver needs amdgpu with KFD");
  CHECK(rig::tool::why(amd, reach) == "bound to amdgpu: this rig is built without its AMD driver");
  CHECK(rig::tool::why(h100, reach) ==
        "bound to nvidia: this rig is built without its CUDA driver, and rig's own NVIDIA driver is not built yet");

  reach.amd_driver = true;
  CHECK(rig::tool::why(amd, reach) == "needs /dev/kfd (amdgpu with KFD)");
  reach.kfd = true;
  CHECK(rig::tool::why(amd, reach) == "bound to amdgpu, but KFD's topology does not list it");
  reach.failed["0000:03:00.0"] = "AMD:0: KFD refused its queue";
  CHECK(rig::tool::why(amd, reach) == "opening it failed: AMD:0: KFD refused its queue");

  reach.cuda_driver = true;
  reach.cuda_none = "libcuda.so.1 is not installed";
  CHECK(rig::tool::why(h100, reach) == "bound to nvidia, but libcuda gives no device: libcuda.so.1 is not installed");
  reach.cuda_none.reset();
  CHECK(contains(rig::tool::why(h100, reach), "libcuda lists no device at this address"));

  PciGpu other = h100;
  other.driver = "nouveau";
  CHECK(rig::tool::why(other, reach) == "bound to nouveau: rig's NVIDIA driver needs the nvidia kernel module");
  other.driver.reset();
  CHECK(rig::tool::why(other, reach) ==
        "no kernel driver bound: rig reaches NVIDIA GPUs through the nvidia kernel module");
  other.vendor_id = 0x8086;
  CHECK(rig::tool::why(other, reach) == "no kernel driver bound");
  other.driver = "i915";
  CHECK(rig::tool::why(other, reach) == "bound to i915: rig has no driver that works through i915");
}
