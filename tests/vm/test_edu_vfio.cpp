// vfio::Device on a real kernel's vfio-pci, with a real (emulated) Intel IOMMU, on QEMU's edu
// device (edu.hpp). It runs inside the VM that run_vm.py boots, as root, with the edu
// function bound to vfio-pci; outside such a VM it fails saying so.
#include "edu.hpp"

#include <pci_bus.hpp>
#include <vfio.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>

using namespace rig;
using namespace rig::vfio;

namespace {

std::string edu_address() {
  auto found = pci::find("/sys/bus/pci", edu::vendor_id, edu::device_id);
  REQUIRE_MESSAGE(!found.empty(), "no edu device (1234:11e8): this program runs inside the VM of tests/vm/run_vm.py");
  return found.front();
}

std::unique_ptr<Device> open_edu() {
  Options options;
  options.dma_bits = edu::dma_bits;
  auto device = Device::open(os::system(), edu_address(), options);
  REQUIRE_MESSAGE(device.has_value(), device.error());
  REQUIRE((*device)->set_bus_master(true).has_value());
  return std::move(*device);
}

// Page-aligned process memory, unmapped when it goes.
struct Pages {
  explicit Pages(std::size_t bytes) : bytes(bytes) {
    auto got = os::system().mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    REQUIRE(got.has_value());
    base = static_cast<std::uint8_t*>(*got);
  }
  ~Pages() { os::system().munmap(base, bytes); }
  std::size_t bytes;
  std::uint8_t* base = nullptr;
};

// The physical address of the page holding `p` (/proc/self/pagemap: 8 bytes a page, the frame
// number in bits 0..54 where bit 63 says the page is present; root sees the frame numbers).
std::uint64_t physical_address(const void* p) {
  int fd = os::system().open("/proc/self/pagemap", O_RDONLY);
  REQUIRE(fd >= 0);
  std::uint64_t entry = 0;
  auto page = reinterpret_cast<std::uintptr_t>(p) / 4096;
  ssize_t n = os::system().pread(fd, &entry, sizeof entry, off_t(page * sizeof entry));
  os::system().close(fd);
  REQUIRE(n == sizeof entry);
  REQUIRE((entry >> 63) == 1);
  return (entry & ((std::uint64_t(1) << 55) - 1)) * 4096;
}

// Runs one transfer of edu's DMA engine and waits until its start bit clears.
void dma(const Mmio& bar, std::uint64_t source, std::uint64_t destination, std::uint64_t bytes, std::uint64_t command) {
  bar.write64(edu::dma_source, source);
  bar.write64(edu::dma_destination, destination);
  bar.write64(edu::dma_count, bytes);
  bar.write64(edu::dma_command, command | edu::dma_start);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (bar.read64(edu::dma_command) & edu::dma_start) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "edu's DMA did not finish in 10 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The kernel's log since boot (/dev/kmsg, read without blocking to its end).
std::string kernel_log() {
  int fd = os::system().open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
  REQUIRE(fd >= 0);
  std::string log;
  char record[8192];
  for (;;) {
    ssize_t n = os::system().read(fd, record, sizeof record);
    if (n == -EPIPE) continue;  // a record was overwritten: go on from the next
    if (n <= 0) break;
    log.append(record, std::size_t(n));
  }
  os::system().close(fd);
  return log;
}

}  // namespace

TEST_CASE("edu's BAR0 answers its identification and liveness registers") {
  auto device = open_edu();
  auto bar = device->map(edu::bar);
  REQUIRE_MESSAGE(bar.has_value(), bar.error());
  CHECK(bar->size() == 1 << 20);
  CHECK((bar->read32(edu::identification) & edu::identification_mask) == edu::identification_low);
  for (std::uint32_t value : {0u, 0x12345678u, 0xffffffffu}) {
    bar->write32(edu::liveness, value);
    CHECK(bar->read32(edu::liveness) == ~value);
  }
}

TEST_CASE("DMA goes both ways through the IOMMU at an IOVA that is not the buffer's physical address") {
  auto device = open_edu();
  auto bar = device->map(edu::bar);
  REQUIRE(bar.has_value());
  Pages memory(2 * 4096);
  auto iova = device->map_dma(memory.base, memory.bytes);
  REQUIRE_MESSAGE(iova.has_value(), iova.error());
  CHECK(*iova + memory.bytes <= std::uint64_t(1) << edu::dma_bits);
  CHECK(*iova != physical_address(memory.base));
  constexpr std::size_t bytes = edu::largest_transfer;
  for (std::size_t i = 0; i < bytes; ++i) memory.base[i] = std::uint8_t(i * 7 + 3);
  std::memset(memory.base + 4096, 0, bytes);
  dma(*bar, *iova, edu::buffer_address, bytes, 0);                       // RAM -> edu
  dma(*bar, edu::buffer_address, *iova + 4096, bytes, edu::dma_to_ram);  // edu -> RAM
  CHECK(std::memcmp(memory.base, memory.base + 4096, bytes) == 0);
  REQUIRE(device->unmap_dma(*iova).has_value());
}

TEST_CASE("edu's interrupts arrive as MSI through an eventfd") {
  auto device = open_edu();
  auto bar = device->map(edu::bar);
  REQUIRE(bar.has_value());
  REQUIRE(device->interrupts(Irq::Msi) >= 1);
  auto on = device->enable_interrupts(Irq::Msi);
  REQUIRE_MESSAGE(on.has_value(), on.error());
  CHECK(device->wait_interrupt(0, 0) == 0);
  bar->write32(edu::interrupt_raise, 0x5);
  CHECK(device->wait_interrupt(0, 5000) >= 1);
  CHECK(bar->read32(edu::interrupt_status) == 0x5);
  bar->write32(edu::interrupt_acknowledge, 0x5);
  CHECK(bar->read32(edu::interrupt_status) == 0);
  // A DMA that asks for it raises dma_done_value when it finishes.
  Pages memory(4096);
  auto iova = device->map_dma(memory.base, memory.bytes);
  REQUIRE(iova.has_value());
  dma(*bar, *iova, edu::buffer_address, 64, edu::dma_interrupt);
  CHECK(device->wait_interrupt(0, 5000) >= 1);
  CHECK(bar->read32(edu::interrupt_status) == edu::dma_done_value);
  bar->write32(edu::interrupt_acknowledge, edu::dma_done_value);
  device->disable_interrupts(Irq::Msi);
  CHECK_THROWS_AS(device->wait_interrupt(0, 0), std::invalid_argument);
}

TEST_CASE("a DMA to an unmapped IOVA is blocked by the IOMMU, and the kernel logs the DMAR fault") {
  auto device = open_edu();
  auto bar = device->map(edu::bar);
  REQUIRE(bar.has_value());
  Pages memory(4096);
  auto iova = device->map_dma(memory.base, memory.bytes);
  REQUIRE(iova.has_value());
  // First the mapping works: edu writes its buffer's first bytes into the memory.
  std::memset(memory.base, 0x11, 64);
  dma(*bar, *iova, edu::buffer_address, 64, 0);
  std::memset(memory.base, 0, 64);
  dma(*bar, edu::buffer_address, *iova, 64, edu::dma_to_ram);
  CHECK(memory.base[0] == 0x11);
  // Then, unmapped, the same DMA reaches nothing.
  REQUIRE(device->unmap_dma(*iova).has_value());
  std::memset(memory.base, 0xaa, 64);
  const std::string before = kernel_log();
  dma(*bar, edu::buffer_address, *iova, 64, edu::dma_to_ram);
  CHECK(memory.base[0] == 0xaa);
  CHECK(memory.base[63] == 0xaa);
  // The fault is reported through the IOMMU's fault interrupt: give the kernel a moment.
  const std::string fault = fmt::format("fault addr 0x{:x}", *iova);
  std::string log;
  for (int tries = 0; tries < 100; ++tries) {
    log = kernel_log();
    if (log.size() > before.size() && log.find(fault, before.size()) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  INFO("kernel log since the DMA: ", log.substr(std::min(before.size(), log.size())));
  CHECK(log.find("DMAR", before.size()) != std::string::npos);
  CHECK(log.find(fault, before.size()) != std::string::npos);
}

TEST_CASE("after a reset the device answers again and DMA through the mappings made before it still works") {
  auto device = open_edu();
  REQUIRE(device->can_reset());
  auto bar = device->map(edu::bar);
  REQUIRE(bar.has_value());
  Pages memory(4096);
  auto iova = device->map_dma(memory.base, memory.bytes);
  REQUIRE(iova.has_value());
  auto reset = device->reset();
  REQUIRE_MESSAGE(reset.has_value(), reset.error());
  REQUIRE(device->set_bus_master(true).has_value());
  CHECK((bar->read32(edu::identification) & edu::identification_mask) == edu::identification_low);
  bar->write32(edu::liveness, 0x0f0f0f0f);
  CHECK(bar->read32(edu::liveness) == 0xf0f0f0f0);
  for (std::size_t i = 0; i < 128; ++i) memory.base[i] = std::uint8_t(0x40 + i);
  dma(*bar, *iova, edu::buffer_address, 64, 0);
  dma(*bar, edu::buffer_address, *iova + 64, 64, edu::dma_to_ram);
  CHECK(std::memcmp(memory.base, memory.base + 64, 64) == 0);
}

TEST_CASE("a DMA map outside edu's 28-bit mask is refused and nothing is mapped") {
  auto device = open_edu();
  Pages memory(4096);
  CHECK_THROWS_WITH_AS(device->map_dma_at(memory.base, 4096, std::uint64_t(1) << edu::dma_bits),
                       doctest::Contains("outside the device's 28-bit DMA mask"), std::invalid_argument);
  CHECK(device->iovas().taken().empty());
  CHECK_THROWS_AS(device->enable_interrupts(Irq::Msix), std::invalid_argument);  // edu has no MSI-X
  CHECK_THROWS_AS(device->region(1), std::invalid_argument);                     // nor a BAR1
}

TEST_CASE("while one process holds edu's group a second open is busy, and after closing it opens again") {
  auto device = open_edu();
  Options options;
  options.dma_bits = edu::dma_bits;
  auto second = Device::open(os::system(), device->address(), options);
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().find("is busy") != std::string::npos);
  Pages memory(4096);
  REQUIRE(device->map_dma(memory.base, memory.bytes).has_value());
  REQUIRE(device->enable_interrupts(Irq::Msi).has_value());
  device.reset();  // closes it, with its mapping and interrupts
  auto again = Device::open(os::system(), edu_address(), options);
  REQUIRE_MESSAGE(again.has_value(), again.error());
  CHECK((*again)->iovas().taken().empty());
}

TEST_CASE("the function is described from sysfs: bound to vfio-pci, in an IOMMU group, with a reset method") {
  auto f = read_function(os::system(), edu_address());
  REQUIRE(f.has_value());
  CHECK(f->driver == "vfio-pci");
  CHECK(f->iommu_group.has_value());
  CHECK(!f->reset_methods.empty());
  auto missing = read_function(os::system(), "0000:00:1e.7");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().find("no such PCI function") != std::string::npos);
}

TEST_CASE("Debian's kernel has no iommufd, and opening through it says so") {
  Options options;
  options.interface = Interface::Iommufd;
  auto device = Device::open(os::system(), edu_address(), options);
  REQUIRE_FALSE(device.has_value());
  CHECK(device.error().find("/dev/iommu is absent: this kernel has no iommufd") != std::string::npos);
}
