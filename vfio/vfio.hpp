// vfio.hpp — a PCI function driven from user space through the kernel's vfio-pci driver.
//
// A driverless path (a GPU driver with no kernel driver of its own) opens its PCI function
// here: the function must be bound to vfio-pci, sit in an IOMMU group all of whose other
// members are bound to vfio-pci (or to no driver), and the process must be allowed to open
// /dev/vfio/GROUP. The device is reached through the type1 IOMMU container interface
// (/dev/vfio/vfio + /dev/vfio/GROUP). The iommufd interface (/dev/iommu and the
// /dev/vfio/devices/vfioN cdevs) is not built: Debian 12's kernels are built without it.
//
// Every system call goes through the os::Seam the device was opened with. Nothing here
// knows any vendor.
//
// Errors: what the machine's set-up refuses (no such function, another driver, no IOMMU, a
// group that is not viable, a busy device, no permission) is a Result error that names the
// function and what to do; a misuse (a region or interrupt index the device lacks, a DMA
// range outside the mask, overlapping, or unaligned) throws std::invalid_argument naming the
// function and the reason; what the kernel refuses of a call that was well formed (pinning
// memory past RLIMIT_MEMLOCK, a reset that failed) is a Result error. After any of these the
// device is as it was before the call.
#pragma once

#include "iova.hpp"

#include <rig/edge.hpp>
#include <rig/os.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rig::vfio {

// Where the kernel's files are: tests point these at a fake tree.
struct Paths {
  std::string sysfs = "/sys";  // bus/pci/devices/ADDRESS, kernel/iommu_groups/N
  std::string dev = "/dev";    // vfio/vfio, vfio/N
};

// What sysfs says of a PCI function.
struct Function {
  std::string address;                  // "0000:00:03.0"
  std::uint16_t vendor_id = 0, device_id = 0;
  std::optional<std::string> driver;    // the bound driver ("vfio-pci"), none if unbound
  std::optional<unsigned> iommu_group;  // none where no IOMMU translates for it
  std::vector<std::string> reset_methods;  // sysfs reset_method: "flr", "pm", "bus", ...
};

// The sysfs facts of the function at `address` (as "0000:00:03.0"). A Result error where
// sysfs has no such function ("0000:00:09.0: no such PCI function (…/devices/0000:00:09.0 is
// absent)"). Throws std::invalid_argument for an address not written DDDD:BB:DD.F.
Result<Function> read_function(os::Seam& seam, std::string_view address, const Paths& paths = {});

// The kinds of interrupt vfio-pci delivers, by its index for them.
enum class Irq : unsigned { Intx = 0, Msi = 1, Msix = 2 };
std::string_view name_of(Irq kind);

// A region of the device (a BAR, the config space, a ROM) as vfio-pci describes it.
struct Region {
  unsigned index = 0;
  std::uint64_t size = 0;    // 0 where the device has no such region
  std::uint64_t offset = 0;  // where the region's bytes lie in the device's file
  bool readable = false, writable = false, mappable = false;
};

// A region mapped into the process: 32- and 64-bit accesses at byte offsets, each checked
// against the region's size (std::invalid_argument naming the region beyond it).
class Mmio {
 public:
  std::uint32_t read32(std::uint64_t offset) const;
  void write32(std::uint64_t offset, std::uint32_t value) const;
  std::uint64_t read64(std::uint64_t offset) const;
  void write64(std::uint64_t offset, std::uint64_t value) const;
  std::uint64_t size() const { return size_; }

 private:
  friend class Device;
  Mmio(std::string name, volatile std::byte* base, std::uint64_t size) : name_(std::move(name)), base_(base), size_(size) {}
  void check(std::uint64_t offset, unsigned bytes) const;
  std::string name_;  // "0000:00:03.0 BAR0"
  volatile std::byte* base_;
  std::uint64_t size_;
};

// The kernel interfaces a device can be opened through.
enum class Interface {
  Type1,    // /dev/vfio/vfio (a container with the type1 IOMMU) and /dev/vfio/GROUP
  Iommufd,  // /dev/iommu and /dev/vfio/devices/vfioN: not built yet
};

// How a device is opened.
struct Options {
  // The device's DMA mask in bits: the IOVAs it can drive (QEMU's edu device: 28). The
  // kernel cannot know it for a device it does not drive; the IOVAs given out stay below it.
  unsigned dma_bits = 64;
  Interface interface = Interface::Type1;
  Paths paths;
};

class Device {
 public:
  // Opens the function at `address` (as "0000:00:03.0") through its IOMMU group. A Result
  // error, naming the function and what to do, where: sysfs has no such function; it is
  // bound to another driver or none (bind it to vfio-pci); it has no IOMMU group (no IOMMU:
  // enable it); /dev/vfio/vfio is absent (load vfio-pci) or lacks the type1 IOMMU; the group
  // is not viable (it names each other member bound to another driver); the group or the
  // device is open elsewhere (busy); the process may not open the group's file
  // (permission). Through Interface::Iommufd it is a Result error saying why: the kernel has
  // no /dev/iommu (built without CONFIG_IOMMUFD, as Debian 12's are), or rig's iommufd path is
  // not built yet. Throws std::invalid_argument for a malformed address or `options.dma_bits`
  // outside 12..64. Nothing stays open after a failure.
  static Result<std::unique_ptr<Device>> open(os::Seam& seam, std::string_view address, const Options& options = {});

  // Closes the device: turns its interrupts off, unmaps its regions and every DMA mapping,
  // and closes the device, its group and its container, so that the function can be opened
  // again at once.
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Function& function() const { return function_; }
  const std::string& address() const { return function_.address; }
  unsigned group() const { return *function_.iommu_group; }

  // The region at `index` (BARs 0..5 are 0..5, the config space 7). Throws
  // std::invalid_argument for an index the device does not have.
  const Region& region(unsigned index) const;
  // Maps region `index` into the process for the device's lifetime (a second call gives
  // the same mapping). Throws std::invalid_argument where the region is absent, empty or
  // cannot be mapped; a Result error where mmap fails.
  Result<Mmio> map(unsigned index);

  // Reads or writes `bytes` (1, 2 or 4) of the config space at `offset`, little-endian.
  // Throws std::invalid_argument for another width or an offset past the config space;
  // the write's and read's kernel failures are Result errors.
  Result<std::uint32_t> read_config(std::uint32_t offset, unsigned bytes);
  Result<void> write_config(std::uint32_t offset, std::uint32_t value, unsigned bytes);
  // Turns bus mastering (the device's own DMA) and memory decoding on or off in the
  // config space's command register: vfio-pci leaves bus mastering off.
  Result<void> set_bus_master(bool on);

  // Maps `bytes` of process memory at `host` (both multiples of the IOMMU's page) for the
  // device to read and write at a new IOVA, the lowest free one below the DMA mask, and
  // returns it. Throws std::invalid_argument for unaligned or empty memory, or where no
  // free IOVA range below the mask is large enough; a Result error where the kernel refuses
  // (pinning past RLIMIT_MEMLOCK). Nothing is mapped after a failure.
  Result<std::uint64_t> map_dma(void* host, std::size_t bytes);
  // As map_dma, at the given `iova`: throws std::invalid_argument where the range is
  // unaligned, outside the DMA mask or the IOMMU's usable ranges, or overlaps a mapping.
  Result<std::uint64_t> map_dma_at(void* host, std::size_t bytes, std::uint64_t iova);
  // Unmaps the mapping that starts at `iova`, after which the device's accesses there are
  // blocked by the IOMMU. Throws std::invalid_argument where no mapping starts at `iova`.
  Result<void> unmap_dma(std::uint64_t iova);
  // The IOVAs taken, by first IOVA: their sizes; the allocator's space.
  const IovaSpace& iovas() const { return iovas_; }

  // How many vectors of `kind` the device has (0 where it has none).
  unsigned interrupts(Irq kind) const;
  // Delivers vectors 0..count-1 of `kind` to new eventfds, which the device owns and which
  // wait_interrupt reads. Only one kind is on at a time (vfio-pci's rule): enabling one
  // turns the other off. Throws std::invalid_argument where the device has fewer than
  // `count` vectors of `kind` (or `count` is 0); a Result error where the kernel refuses.
  Result<void> enable_interrupts(Irq kind, unsigned count = 1);
  // Stops delivering `kind`'s vectors and closes their eventfds (nothing where none is on).
  void disable_interrupts(Irq kind);
  // Waits at most `timeout_ms` for vector `vector` of the kind that is on, and returns how
  // many times it fired since the last wait (0 when the time ran out). Throws
  // std::invalid_argument where that vector is not on. An INTx vector is unmasked after it
  // is read (vfio-pci masks the line each time it fires).
  std::uint64_t wait_interrupt(unsigned vector, int timeout_ms);
  // The eventfd of vector `vector` of the kind that is on, for a caller's own poll; throws
  // std::invalid_argument where that vector is not on.
  int interrupt_fd(unsigned vector) const;

  // Whether vfio-pci can reset the function (it has a reset method).
  bool can_reset() const { return can_reset_; }
  // Resets the function (its registers to their power-on values; DMA mappings stay). A
  // Result error where it cannot be reset or the reset failed.
  Result<void> reset();

 private:
  Device(os::Seam& seam, Function function, const Options& options);
  os::Seam& seam_;
  Function function_;
  Paths paths_;
  int container_ = -1, group_ = -1, device_ = -1;
  std::vector<Region> regions_;
  std::vector<unsigned> irq_counts_;
  bool can_reset_ = false;
  IovaSpace iovas_;
  std::vector<std::pair<void*, std::size_t>> mapped_;  // by region index; {nullptr, 0} unmapped
  std::optional<Irq> irq_on_;
  std::vector<int> irq_fds_;
  Result<void> setup();
};

}  // namespace rig::vfio
