// vfio::Device's promises (vfio.hpp) on a fake kernel: each refusal of the machine's set-up
// and of a misuse, with its message, and what a device leaves behind. The same code runs on
// a real kernel's vfio-pci in the VM tests (tests/vm/).
#include "fake_vfio.hpp"

#include <vfio.hpp>

#include <doctest/doctest.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include <linux/pci_regs.h>
#include <linux/vfio.h>

using rig::test::FakeVfio;
using namespace rig::vfio;

namespace {

constexpr const char* edu = "0000:00:02.0";

Options fake_options(unsigned dma_bits = 28) {
  Options o;
  o.dma_bits = dma_bits;
  o.paths = {FakeVfio::sysfs, FakeVfio::dev};
  return o;
}

FakeVfio::Function edu_function(unsigned group = 2) {
  FakeVfio::Function f;
  f.address = edu;
  f.group = group;
  return f;
}

std::string refusal(FakeVfio& kernel, std::string_view address = edu) {
  auto opened = Device::open(kernel, address, fake_options());
  REQUIRE_FALSE(opened.has_value());
  CHECK(kernel.open_descriptors() == 0);  // nothing stays open after a failure
  return opened.error();
}

// Page-aligned host memory for DMA maps.
struct Pages {
  explicit Pages(std::size_t bytes) : bytes(bytes), base(std::aligned_alloc(4096, bytes)) {}
  ~Pages() { std::free(base); }
  std::size_t bytes;
  void* base;
};

}  // namespace

TEST_CASE("a function bound to vfio-pci in a viable group opens, and closing it releases everything") {
  FakeVfio kernel;
  kernel.add(edu_function());
  {
    auto device = Device::open(kernel, edu, fake_options());
    REQUIRE_MESSAGE(device.has_value(), device.error());
    CHECK((*device)->address() == edu);
    CHECK((*device)->group() == 2);
    CHECK((*device)->function().vendor_id == 0x1234);
    CHECK((*device)->function().device_id == 0x11e8);
    CHECK((*device)->function().reset_methods == std::vector<std::string>{"flr"});
    CHECK((*device)->region(0).size == 1 << 20);
    CHECK((*device)->region(0).mappable);
    CHECK(kernel.open_descriptors() == 3);  // container, group, device
    Pages memory(8192);
    REQUIRE((*device)->map_dma(memory.base, memory.bytes).has_value());
    REQUIRE((*device)->map(0).has_value());
    REQUIRE((*device)->enable_interrupts(Irq::Msi).has_value());
  }
  CHECK(kernel.open_descriptors() == 0);
  CHECK(kernel.dma.empty());
  CHECK(kernel.mapped_regions() == 0);
  CHECK(kernel.irq_index == -1);
  // And it opens again at once.
  CHECK(Device::open(kernel, edu, fake_options()).has_value());
}

TEST_CASE("an address that is not written DDDD:BB:DD.F throws naming it") {
  FakeVfio kernel;
  for (const char* bad : {"00:02.0", "0000:00:02.8", "0000:00:20.0", "000g:00:02.0", ""})
    CHECK_THROWS_WITH_AS(Device::open(kernel, bad, fake_options()), doctest::Contains("is not a PCI address"),
                         std::invalid_argument);
}

TEST_CASE("a PCI function that does not exist is refused naming it") {
  FakeVfio kernel;
  kernel.add(edu_function());
  std::string why = refusal(kernel, "0000:00:09.0");
  CHECK(why.find("0000:00:09.0: no such PCI function") != std::string::npos);
}

TEST_CASE("a function bound to another driver is refused naming the driver and how to bind vfio-pci") {
  FakeVfio kernel;
  auto f = edu_function();
  f.driver = "snd_hda_intel";
  kernel.add(f);
  std::string why = refusal(kernel);
  CHECK(why.find("0000:00:02.0: bound to snd_hda_intel") != std::string::npos);
  CHECK(why.find("driver_override") != std::string::npos);
}

TEST_CASE("a function bound to no driver is refused saying to bind vfio-pci") {
  FakeVfio kernel;
  auto f = edu_function();
  f.driver.reset();
  kernel.add(f);
  std::string why = refusal(kernel);
  CHECK(why.find("no driver is bound; bind it to vfio-pci") != std::string::npos);
}

TEST_CASE("a function without an IOMMU group is refused saying the IOMMU is off") {
  FakeVfio kernel;
  auto f = edu_function();
  f.group.reset();
  kernel.add(f);
  std::string why = refusal(kernel);
  CHECK(why.find("0000:00:02.0: no IOMMU group") != std::string::npos);
  CHECK(why.find("intel_iommu=on") != std::string::npos);
}

TEST_CASE("without the vfio module the refusal says to load it") {
  FakeVfio kernel;
  kernel.add(edu_function());
  kernel.vfio_module = false;
  CHECK(refusal(kernel).find("/fake/dev/vfio/vfio is absent: load vfio-pci") != std::string::npos);
}

TEST_CASE("a group that is not viable is refused naming the other device, its driver and what to do") {
  FakeVfio kernel;
  kernel.add(edu_function(7));
  FakeVfio::Function sound;
  sound.address = "0000:00:02.1";
  sound.group = 7;
  sound.driver = "snd_hda_intel";
  kernel.add(sound);
  std::string why = refusal(kernel);
  CHECK(why == "0000:00:02.0: IOMMU group 7 is not viable: 0000:00:02.1 is bound to snd_hda_intel; bind it to vfio-pci too");
}

TEST_CASE("a group another process holds is refused as busy") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto first = Device::open(kernel, edu, fake_options());
  REQUIRE(first.has_value());
  auto second = Device::open(kernel, edu, fake_options());
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().find("IOMMU group 2 is busy") != std::string::npos);
  CHECK(kernel.open_descriptors() == 3);  // the first device's, untouched
}

TEST_CASE("a device already open elsewhere is refused as busy") {
  FakeVfio kernel;
  kernel.add(edu_function());
  kernel.device_fd_error = -EBUSY;
  CHECK(refusal(kernel).find("0000:00:02.0: the device is busy") != std::string::npos);
}

TEST_CASE("no permission on the group's file is refused saying so") {
  FakeVfio kernel;
  kernel.add(edu_function());
  kernel.group_open_error = -EACCES;
  CHECK(refusal(kernel).find("no permission to open /fake/dev/vfio/2") != std::string::npos);
}

TEST_CASE("a region the device lacks throws naming it, and the device stays usable") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto device = Device::open(kernel, edu, fake_options());
  REQUIRE(device.has_value());
  Device& d = **device;
  CHECK_THROWS_WITH_AS(d.region(1), doctest::Contains("0000:00:02.0: the device has no region 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.region(9), doctest::Contains("no region 9"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.map(1), doctest::Contains("no region 1"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.map(VFIO_PCI_CONFIG_REGION_INDEX), doctest::Contains("does not let it be mapped"), std::invalid_argument);
  CHECK(kernel.mapped_regions() == 0);
  auto bar = d.map(0);
  REQUIRE(bar.has_value());
  bar->write32(4, 0x12345678);
  CHECK(bar->read32(4) == 0x12345678);
  CHECK_THROWS_WITH_AS(bar->read32(1 << 20), doctest::Contains("0000:00:02.0 BAR0: a 4-byte access at 0x100000"),
                       std::invalid_argument);
  CHECK_THROWS_AS(bar->write64(2, 0), std::invalid_argument);  // unaligned
}

TEST_CASE("bus mastering sets the command register's master and memory bits, and clears the master bit") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto device = Device::open(kernel, edu, fake_options());
  REQUIRE(device.has_value());
  REQUIRE((*device)->set_bus_master(true).has_value());
  CHECK((kernel.config[PCI_COMMAND] & (PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY)) == (PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY));
  REQUIRE((*device)->set_bus_master(false).has_value());
  CHECK((kernel.config[PCI_COMMAND] & PCI_COMMAND_MASTER) == 0);
  CHECK((kernel.config[PCI_COMMAND] & PCI_COMMAND_MEMORY) != 0);
  CHECK_THROWS_WITH_AS((*device)->read_config(0, 3), doctest::Contains("widths are 1, 2 or 4"), std::invalid_argument);
  CHECK_THROWS_AS((*device)->read_config(255, 2), std::invalid_argument);
}

TEST_CASE("DMA maps get distinct IOVAs below the DMA mask, and unmapping gives them back") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto device = Device::open(kernel, edu, fake_options(28));
  REQUIRE(device.has_value());
  Device& d = **device;
  Pages a(8192), b(4096);
  auto ia = d.map_dma(a.base, a.bytes);
  auto ib = d.map_dma(b.base, b.bytes);
  REQUIRE(ia.has_value());
  REQUIRE(ib.has_value());
  CHECK(*ia != 0);
  CHECK((*ib >= *ia + a.bytes || *ib + b.bytes <= *ia));
  CHECK(*ib + b.bytes <= std::uint64_t(1) << 28);
  CHECK(kernel.dma.at(*ia) == std::pair<std::uint64_t, std::uint64_t>(reinterpret_cast<std::uintptr_t>(a.base), a.bytes));
  REQUIRE(d.unmap_dma(*ia).has_value());
  CHECK(kernel.dma.count(*ia) == 0);
  CHECK_THROWS_WITH_AS(d.unmap_dma(*ia), doctest::Contains("no DMA mapping starts at IOVA"), std::invalid_argument);
  // The space freed is used again.
  auto again = d.map_dma(a.base, a.bytes);
  REQUIRE(again.has_value());
  CHECK(*again == *ia);
}

TEST_CASE("a DMA map outside the mask, overlapping or unaligned throws, and nothing is mapped") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto device = Device::open(kernel, edu, fake_options(28));
  REQUIRE(device.has_value());
  Device& d = **device;
  Pages a(8192);
  CHECK_THROWS_WITH_AS(d.map_dma_at(a.base, 4096, std::uint64_t(1) << 28),
                       doctest::Contains("0000:00:02.0: DMA mapping at 0x10000000 + 0x1000 is outside the device's 28-bit DMA mask"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.map_dma_at(a.base, 8192, (std::uint64_t(1) << 28) - 4096), doctest::Contains("28-bit DMA mask"),
                       std::invalid_argument);
  CHECK(kernel.dma.empty());
  REQUIRE(d.map_dma_at(a.base, 8192, 0x100000).has_value());
  CHECK_THROWS_WITH_AS(d.map_dma_at(a.base, 4096, 0x101000), doctest::Contains("overlaps the mapping at 0x100000 + 0x2000"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.map_dma_at(a.base, 4096, 0x100800), doctest::Contains("not aligned"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.map_dma(static_cast<std::byte*>(a.base) + 1, 4096), doctest::Contains("multiples of the IOMMU's"),
                       std::invalid_argument);
  CHECK_THROWS_AS(d.map_dma(a.base, 0), std::invalid_argument);
  CHECK(kernel.dma.size() == 1);
}

TEST_CASE("IOVAs the IOMMU reserves are never given out") {
  FakeVfio kernel;
  kernel.add(edu_function());
  kernel.iova_ranges = {{0, 0xfffff}, {0x200000, ~std::uint64_t(0)}};  // 1 MiB .. 2 MiB reserved
  auto device = Device::open(kernel, edu, fake_options(32));
  REQUIRE(device.has_value());
  Pages big(0x100000);
  auto first = (*device)->map_dma(big.base, big.bytes);  // does not fit below 1 MiB past page 0
  REQUIRE(first.has_value());
  CHECK(*first == 0x200000);
  CHECK_THROWS_WITH_AS((*device)->map_dma_at(big.base, 4096, 0x180000), doctest::Contains("not in a range the IOMMU lets"),
                       std::invalid_argument);
}

TEST_CASE("a map the kernel refuses is a Result error and nothing is mapped") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto device = Device::open(kernel, edu, fake_options());
  REQUIRE(device.has_value());
  kernel.map_dma_error = -ENOMEM;
  Pages a(4096);
  auto mapped = (*device)->map_dma(a.base, a.bytes);
  REQUIRE_FALSE(mapped.has_value());
  CHECK(mapped.error().find("RLIMIT_MEMLOCK") != std::string::npos);
  CHECK((*device)->iovas().taken().empty());
}

TEST_CASE("interrupts reach their eventfd, and an index the device lacks throws") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto device = Device::open(kernel, edu, fake_options());
  REQUIRE(device.has_value());
  Device& d = **device;
  CHECK(d.interrupts(Irq::Msi) == 1);
  CHECK(d.interrupts(Irq::Msix) == 0);
  CHECK_THROWS_WITH_AS(d.enable_interrupts(Irq::Msix), doctest::Contains("1 MSI-X vector asked for: the device has 0"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.enable_interrupts(Irq::Msi, 2), doctest::Contains("2 MSI vectors asked for: the device has 1"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(d.wait_interrupt(0, 0), doctest::Contains("no interrupts are on"), std::invalid_argument);
  CHECK(kernel.irq_index == -1);
  REQUIRE(d.enable_interrupts(Irq::Msi).has_value());
  CHECK(kernel.irq_index == VFIO_PCI_MSI_IRQ_INDEX);
  CHECK(d.wait_interrupt(0, 0) == 0);
  kernel.fire(0);
  kernel.fire(0);
  CHECK(d.wait_interrupt(0, 0) == 2);
  CHECK(d.wait_interrupt(0, 0) == 0);
  CHECK_THROWS_AS(d.wait_interrupt(1, 0), std::invalid_argument);
  // Turning INTx on turns MSI off first.
  REQUIRE(d.enable_interrupts(Irq::Intx).has_value());
  CHECK(kernel.irq_index == VFIO_PCI_INTX_IRQ_INDEX);
  d.disable_interrupts(Irq::Intx);
  CHECK(kernel.irq_index == -1);
  CHECK(kernel.open_descriptors() == 3);  // the eventfds are closed
}

TEST_CASE("interrupts the kernel refuses are a Result error and leave no eventfd open") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto device = Device::open(kernel, edu, fake_options());
  REQUIRE(device.has_value());
  kernel.set_irqs_error = -EINVAL;
  auto on = (*device)->enable_interrupts(Irq::Msi);
  REQUIRE_FALSE(on.has_value());
  CHECK(on.error().find("vfio-pci refused to deliver MSI") != std::string::npos);
  CHECK(kernel.open_descriptors() == 3);
}

TEST_CASE("reset reaches the kernel, and a function without a reset method is refused") {
  FakeVfio kernel;
  kernel.add(edu_function());
  auto device = Device::open(kernel, edu, fake_options());
  REQUIRE(device.has_value());
  REQUIRE((*device)->can_reset());
  REQUIRE((*device)->reset().has_value());
  CHECK(kernel.resets == 1);

  FakeVfio other;
  auto f = edu_function();
  f.reset_method.clear();
  other.add(f);
  auto plain = Device::open(other, edu, fake_options());
  REQUIRE(plain.has_value());
  CHECK_FALSE((*plain)->can_reset());
  auto reset = (*plain)->reset();
  REQUIRE_FALSE(reset.has_value());
  CHECK(reset.error().find("0000:00:02.0: vfio-pci cannot reset it") != std::string::npos);
}

TEST_CASE("a DMA mask outside 12..64 bits throws") {
  FakeVfio kernel;
  kernel.add(edu_function());
  CHECK_THROWS_WITH_AS(Device::open(kernel, edu, fake_options(8)), doctest::Contains("12 to 64 bits"), std::invalid_argument);
  CHECK_THROWS_AS(Device::open(kernel, edu, fake_options(65)), std::invalid_argument);
}

TEST_CASE("iommufd is refused saying why: no /dev/iommu, or rig's path not built yet") {
  FakeVfio kernel;
  kernel.add(edu_function());
  Options o = fake_options();
  o.interface = Interface::Iommufd;
  auto absent = Device::open(kernel, edu, o);
  REQUIRE_FALSE(absent.has_value());
  CHECK(absent.error() == "0000:00:02.0: /fake/dev/iommu is absent: this kernel has no iommufd (built without "
                          "CONFIG_IOMMUFD); open it through the type1 container");
  kernel.iommufd = true;
  auto unbuilt = Device::open(kernel, edu, o);
  REQUIRE_FALSE(unbuilt.has_value());
  CHECK(unbuilt.error().find("rig's iommufd path is not built yet") != std::string::npos);
  CHECK(kernel.open_descriptors() == 0);
}
