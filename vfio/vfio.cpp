// A PCI function through vfio-pci (vfio.hpp).
#include "vfio.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <linux/pci_regs.h>
#include <linux/vfio.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

namespace rig::vfio {
namespace {

// The driver whose devices user space drives, and those the kernel lets share a group with
// it (drivers/vfio/group.c: vfio-pci, pci-stub, and pcieport for bridges).
constexpr std::string_view vfio_driver = "vfio-pci";
constexpr std::string_view tolerated_drivers[] = {"vfio-pci", "pci-stub", "pcieport"};

// The smallest IOMMU page where the kernel reports none.
constexpr std::uint64_t default_page = 4096;

std::string last_component(std::string_view path) {
  auto slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

// A PCI address as sysfs writes it (lowercase "dddd:bb:dd.f"), or nullopt where `address`
// is not one.
std::optional<std::string> canonical(std::string_view address) {
  // DDDD:BB:DD.F: 4 + 1 + 2 + 1 + 2 + 1 + 1 characters.
  if (address.size() != 12 || address[4] != ':' || address[7] != ':' || address[10] != '.') return std::nullopt;
  std::string out(address);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    if (!std::isxdigit(static_cast<unsigned char>(out[i]))) return std::nullopt;
    out[i] = char(std::tolower(static_cast<unsigned char>(out[i])));
  }
  if (out[11] > '7') return std::nullopt;  // a function number is 0..7
  std::uint32_t device = std::uint32_t(std::stoul(out.substr(8, 2), nullptr, 16));
  if (device > 0x1f) return std::nullopt;  // a device number is 0..31
  return out;
}

std::optional<std::uint16_t> hex_id(const std::string& text) {
  std::string t = trimmed(text);
  if (t.size() < 3 || t.size() > 6 || t[0] != '0' || t[1] != 'x') return std::nullopt;
  if (!std::all_of(t.begin() + 2, t.end(), [](unsigned char c) { return std::isxdigit(c); })) return std::nullopt;
  return std::uint16_t(std::stoul(t.substr(2), nullptr, 16));
}

std::string bind_hint(const std::string& sysfs, const std::string& address) {
  return fmt::format("echo vfio-pci > {0}/bus/pci/devices/{1}/driver_override; "
                     "echo {1} > {0}/bus/pci/drivers_probe",
                     sysfs, address);
}

}  // namespace

std::string_view name_of(Irq kind) {
  switch (kind) {
    case Irq::Intx: return "INTx";
    case Irq::Msi: return "MSI";
    case Irq::Msix: return "MSI-X";
  }
  return "?";
}

Result<Function> read_function(os::Seam& seam, std::string_view address, const Paths& paths) {
  std::optional<std::string> at = canonical(address);
  if (!at)
    throw std::invalid_argument(
        fmt::format("\"{}\" is not a PCI address: write it as domain:bus:device.function, 0000:03:00.0", address));
  const std::string dir = fmt::format("{}/bus/pci/devices/{}", paths.sysfs, *at);
  Function f;
  f.address = *at;
  auto vendor = os::read_text(seam, (dir + "/vendor").c_str());
  if (!vendor) {
    if (vendor.error() == -ENOENT) return std::unexpected(fmt::format("{}: no such PCI function ({} is absent)", *at, dir));
    return std::unexpected(fmt::format("{}: cannot read {}/vendor: {}", *at, dir, os::describe(vendor.error())));
  }
  auto device = os::read_text(seam, (dir + "/device").c_str());
  auto vendor_id = hex_id(*vendor);
  auto device_id = device ? hex_id(*device) : std::nullopt;
  if (!vendor_id || !device_id) return std::unexpected(fmt::format("{}: sysfs's vendor or device file is garbled", *at));
  f.vendor_id = *vendor_id;
  f.device_id = *device_id;
  if (auto driver = seam.readlink((dir + "/driver").c_str())) f.driver = last_component(*driver);
  if (auto group = seam.readlink((dir + "/iommu_group").c_str())) {
    std::string number = last_component(*group);
    if (number.empty() || !std::all_of(number.begin(), number.end(), [](unsigned char c) { return std::isdigit(c); }))
      return std::unexpected(fmt::format("{}: its iommu_group link points at \"{}\", not a group", *at, *group));
    f.iommu_group = unsigned(std::stoul(number));
  }
  if (auto methods = os::read_text(seam, (dir + "/reset_method").c_str())) {
    std::string text = trimmed(*methods);
    for (std::size_t i = 0; i < text.size();) {
      std::size_t end = text.find(' ', i);
      if (end == std::string::npos) end = text.size();
      if (end > i) f.reset_methods.push_back(text.substr(i, end - i));
      i = end + 1;
    }
  }
  return f;
}

// ---- Mmio ----

void Mmio::check(std::uint64_t offset, unsigned bytes) const {
  if (offset > size_ || size_ - offset < bytes || offset % bytes)
    throw std::invalid_argument(fmt::format("{}: a {}-byte access at {:#x} is outside its {:#x} bytes or unaligned",
                                            name_, bytes, offset, size_));
}
std::uint32_t Mmio::read32(std::uint64_t offset) const {
  check(offset, 4);
  return *reinterpret_cast<volatile std::uint32_t*>(base_ + offset);
}
void Mmio::write32(std::uint64_t offset, std::uint32_t value) const {
  check(offset, 4);
  *reinterpret_cast<volatile std::uint32_t*>(base_ + offset) = value;
}
std::uint64_t Mmio::read64(std::uint64_t offset) const {
  check(offset, 8);
  return *reinterpret_cast<volatile std::uint64_t*>(base_ + offset);
}
void Mmio::write64(std::uint64_t offset, std::uint64_t value) const {
  check(offset, 8);
  *reinterpret_cast<volatile std::uint64_t*>(base_ + offset) = value;
}

// ---- Device ----

Device::Device(os::Seam& seam, Function function, const Options& options)
    : seam_(seam), function_(std::move(function)), paths_(options.paths), iovas_({}, options.dma_bits, default_page) {}

Result<std::unique_ptr<Device>> Device::open(os::Seam& seam, std::string_view address, const Options& options) {
  if (options.dma_bits < 12 || options.dma_bits > 64)
    throw std::invalid_argument(fmt::format("{}: a DMA mask of {} bits: a device's mask has 12 to 64 bits", address,
                                            options.dma_bits));
  auto function = read_function(seam, address, options.paths);
  if (!function) return std::unexpected(function.error());
  const Function& f = *function;
  if (options.interface == Interface::Iommufd) {
    const std::string iommu = options.paths.dev + "/iommu";
    int fd = seam.open(iommu.c_str(), O_RDWR);
    if (fd >= 0) seam.close(fd);
    if (fd == -ENOENT)
      return std::unexpected(fmt::format("{}: {} is absent: this kernel has no iommufd (built without CONFIG_IOMMUFD); "
                                         "open it through the type1 container",
                                         f.address, iommu));
    return std::unexpected(fmt::format("{}: rig's iommufd path is not built yet; open it through the type1 container",
                                       f.address));
  }
  const std::string& sysfs = options.paths.sysfs;
  if (!f.driver)
    return std::unexpected(fmt::format("{}: no driver is bound; bind it to vfio-pci: {}", f.address, bind_hint(sysfs, f.address)));
  if (*f.driver != vfio_driver)
    return std::unexpected(fmt::format("{}: bound to {}; unbind it (echo {} > {}/bus/pci/devices/{}/driver/unbind) and "
                                       "bind it to vfio-pci: {}",
                                       f.address, *f.driver, f.address, sysfs, f.address, bind_hint(sysfs, f.address)));
  if (!f.iommu_group)
    return std::unexpected(fmt::format("{}: no IOMMU group: no IOMMU translates for it (enable VT-d or AMD-Vi in the "
                                       "firmware and boot with intel_iommu=on or amd_iommu=on)",
                                       f.address));
  std::unique_ptr<Device> device(new Device(seam, f, options));
  if (auto ready = device->setup(); !ready) return std::unexpected(ready.error());
  return device;
}

Result<void> Device::setup() {
  const std::string& at = function_.address;
  const unsigned n = *function_.iommu_group;
  const std::string container_path = paths_.dev + "/vfio/vfio";
  container_ = seam_.open(container_path.c_str(), O_RDWR);
  if (container_ == -ENOENT)
    return std::unexpected(fmt::format("{}: {} is absent: load vfio-pci (modprobe vfio-pci)", at, container_path));
  if (container_ == -EACCES || container_ == -EPERM)
    return std::unexpected(fmt::format("{}: no permission to open {}: run as root or give this user the file", at, container_path));
  if (container_ < 0) return std::unexpected(fmt::format("{}: cannot open {}: {}", at, container_path, os::describe(container_)));
  if (int v = seam_.ioctl(container_, VFIO_GET_API_VERSION, nullptr); v != VFIO_API_VERSION)
    return std::unexpected(fmt::format("{}: {} speaks VFIO API {}, not {}", at, container_path, v, VFIO_API_VERSION));
  if (seam_.ioctl(container_, VFIO_CHECK_EXTENSION, reinterpret_cast<void*>(std::uintptr_t(VFIO_TYPE1v2_IOMMU))) <= 0)
    return std::unexpected(fmt::format("{}: the kernel's VFIO has no type1 IOMMU: load vfio_iommu_type1", at));

  const std::string group_path = fmt::format("{}/vfio/{}", paths_.dev, n);
  group_ = seam_.open(group_path.c_str(), O_RDWR);
  if (group_ == -EBUSY)
    return std::unexpected(fmt::format("{}: IOMMU group {} is busy: another process has {} open", at, n, group_path));
  if (group_ == -EACCES || group_ == -EPERM)
    return std::unexpected(fmt::format("{}: no permission to open {}: run as root or chown it to this user", at, group_path));
  if (group_ == -ENOENT)
    return std::unexpected(fmt::format("{}: {} is absent though the function is bound to vfio-pci", at, group_path));
  if (group_ < 0) return std::unexpected(fmt::format("{}: cannot open {}: {}", at, group_path, os::describe(group_)));

  vfio_group_status status{};
  status.argsz = sizeof status;
  if (int r = seam_.ioctl(group_, VFIO_GROUP_GET_STATUS, &status); r < 0)
    return std::unexpected(fmt::format("{}: VFIO_GROUP_GET_STATUS on {}: {}", at, group_path, os::describe(r)));
  if (!(status.flags & VFIO_GROUP_FLAGS_VIABLE)) {
    std::vector<std::string> others;
    const std::string members = fmt::format("{}/kernel/iommu_groups/{}/devices", paths_.sysfs, n);
    if (auto names = seam_.list(members.c_str())) {
      std::sort(names->begin(), names->end());
      for (const std::string& other : *names) {
        if (other == at) continue;
        auto driver = seam_.readlink(fmt::format("{}/bus/pci/devices/{}/driver", paths_.sysfs, other).c_str());
        if (!driver) continue;
        std::string name = last_component(*driver);
        if (std::find(std::begin(tolerated_drivers), std::end(tolerated_drivers), name) != std::end(tolerated_drivers)) continue;
        others.push_back(fmt::format("{} is bound to {}", other, name));
      }
    }
    if (others.empty())
      return std::unexpected(fmt::format("{}: IOMMU group {} is not viable: bind every function of {} to vfio-pci", at, n, members));
    return std::unexpected(fmt::format("{}: IOMMU group {} is not viable: {}; bind {} to vfio-pci too", at, n,
                                       fmt::join(others, ", "), others.size() == 1 ? "it" : "them"));
  }
  if (!(status.flags & VFIO_GROUP_FLAGS_CONTAINER_SET)) {
    if (int r = seam_.ioctl(group_, VFIO_GROUP_SET_CONTAINER, &container_); r < 0)
      return std::unexpected(fmt::format("{}: cannot add IOMMU group {} to a container: {}", at, n, os::describe(r)));
  }
  if (int r = seam_.ioctl(container_, VFIO_SET_IOMMU, reinterpret_cast<void*>(std::uintptr_t(VFIO_TYPE1v2_IOMMU))); r < 0)
    return std::unexpected(fmt::format("{}: cannot set the type1 IOMMU on the container: {}", at, os::describe(r)));

  // The IOMMU's page sizes and usable IOVA ranges: a first call says how large the answer
  // with its capability chain is, a second reads it.
  std::vector<IovaRange> usable;
  std::uint64_t page = default_page;
  {
    std::vector<std::uint64_t> buffer((sizeof(vfio_iommu_type1_info) + 7) / 8);
    auto* info = reinterpret_cast<vfio_iommu_type1_info*>(buffer.data());
    info->argsz = sizeof *info;
    int r = seam_.ioctl(container_, VFIO_IOMMU_GET_INFO, info);
    if (r >= 0 && info->argsz > sizeof *info) {
      std::uint32_t want = info->argsz;
      buffer.assign((want + 7) / 8, 0);
      info = reinterpret_cast<vfio_iommu_type1_info*>(buffer.data());
      info->argsz = want;
      r = seam_.ioctl(container_, VFIO_IOMMU_GET_INFO, info);
    }
    if (r < 0) return std::unexpected(fmt::format("{}: VFIO_IOMMU_GET_INFO: {}", at, os::describe(r)));
    if (info->flags & VFIO_IOMMU_INFO_PGSIZES && info->iova_pgsizes)
      page = info->iova_pgsizes & -info->iova_pgsizes;  // the smallest page size it offers
    const std::size_t bytes = buffer.size() * 8;
    std::uint32_t offset = (info->flags & VFIO_IOMMU_INFO_CAPS) ? info->cap_offset : 0;
    for (int hops = 0; offset && hops < 64; ++hops) {
      if (offset + sizeof(vfio_info_cap_header) > bytes) break;
      auto* header = reinterpret_cast<const vfio_info_cap_header*>(reinterpret_cast<const std::byte*>(buffer.data()) + offset);
      if (header->id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE &&
          offset + sizeof(vfio_iommu_type1_info_cap_iova_range) <= bytes) {
        auto* cap = reinterpret_cast<const vfio_iommu_type1_info_cap_iova_range*>(header);
        for (std::uint32_t i = 0; i < cap->nr_iovas; ++i) {
          if (offset + sizeof *cap + (i + 1) * sizeof(vfio_iova_range) > bytes) break;
          usable.push_back({cap->iova_ranges[i].start, cap->iova_ranges[i].end});
        }
      }
      offset = header->next;
    }
  }
  iovas_ = IovaSpace(std::move(usable), iovas_.dma_bits(), page);

  device_ = seam_.ioctl(group_, VFIO_GROUP_GET_DEVICE_FD, const_cast<char*>(at.c_str()));
  if (device_ == -EBUSY) return std::unexpected(fmt::format("{}: the device is busy: another process or container has it open", at));
  if (device_ < 0) return std::unexpected(fmt::format("{}: cannot get the device from IOMMU group {}: {}", at, n, os::describe(device_)));

  vfio_device_info info{};
  info.argsz = sizeof info;
  if (int r = seam_.ioctl(device_, VFIO_DEVICE_GET_INFO, &info); r < 0)
    return std::unexpected(fmt::format("{}: VFIO_DEVICE_GET_INFO: {}", at, os::describe(r)));
  if (!(info.flags & VFIO_DEVICE_FLAGS_PCI)) return std::unexpected(fmt::format("{}: vfio says this is not a PCI device", at));
  can_reset_ = info.flags & VFIO_DEVICE_FLAGS_RESET;
  for (std::uint32_t i = 0; i < info.num_regions; ++i) {
    vfio_region_info region{};
    region.argsz = sizeof region;
    region.index = i;
    Region r{i};
    if (seam_.ioctl(device_, VFIO_DEVICE_GET_REGION_INFO, &region) >= 0) {
      r.size = region.size;
      r.offset = region.offset;
      r.readable = region.flags & VFIO_REGION_INFO_FLAG_READ;
      r.writable = region.flags & VFIO_REGION_INFO_FLAG_WRITE;
      r.mappable = region.flags & VFIO_REGION_INFO_FLAG_MMAP;
    }
    regions_.push_back(r);
  }
  mapped_.assign(regions_.size(), {nullptr, 0});
  for (std::uint32_t i = 0; i < info.num_irqs; ++i) {
    vfio_irq_info irq{};
    irq.argsz = sizeof irq;
    irq.index = i;
    irq_counts_.push_back(seam_.ioctl(device_, VFIO_DEVICE_GET_IRQ_INFO, &irq) >= 0 ? irq.count : 0);
  }
  return {};
}

Device::~Device() {
  if (irq_on_) disable_interrupts(*irq_on_);
  for (auto& [base, bytes] : mapped_)
    if (base) seam_.munmap(base, bytes);
  if (container_ >= 0 && device_ >= 0) {
    for (const auto& [iova, bytes] : iovas_.taken()) {
      vfio_iommu_type1_dma_unmap unmap{};
      unmap.argsz = sizeof unmap;
      unmap.iova = iova;
      unmap.size = bytes;
      seam_.ioctl(container_, VFIO_IOMMU_UNMAP_DMA, &unmap);
    }
  }
  if (device_ >= 0) seam_.close(device_);
  if (group_ >= 0) seam_.close(group_);
  if (container_ >= 0) seam_.close(container_);
}

const Region& Device::region(unsigned index) const {
  if (index >= regions_.size() || regions_[index].size == 0)
    throw std::invalid_argument(fmt::format("{}: the device has no region {} (it has {} region indexes; an empty one is absent)",
                                            address(), index, regions_.size()));
  return regions_[index];
}

Result<Mmio> Device::map(unsigned index) {
  const Region& r = region(index);
  std::string name = index <= VFIO_PCI_BAR5_REGION_INDEX ? fmt::format("{} BAR{}", address(), index)
                                                           : fmt::format("{} region {}", address(), index);
  if (!r.mappable) throw std::invalid_argument(fmt::format("{}: vfio-pci does not let it be mapped (use read/write)", name));
  auto& [base, bytes] = mapped_[index];
  if (!base) {
    int prot = (r.readable ? PROT_READ : 0) | (r.writable ? PROT_WRITE : 0);
    auto got = seam_.mmap(nullptr, r.size, prot, MAP_SHARED, device_, off_t(r.offset));
    if (!got) return std::unexpected(fmt::format("{}: mmap of {:#x} bytes failed: {}", name, r.size, os::describe(got.error())));
    base = *got;
    bytes = r.size;
  }
  return Mmio(std::move(name), static_cast<volatile std::byte*>(base), r.size);
}

Result<std::uint32_t> Device::read_config(std::uint32_t offset, unsigned bytes) {
  const Region& config = region(VFIO_PCI_CONFIG_REGION_INDEX);
  if ((bytes != 1 && bytes != 2 && bytes != 4) || offset > config.size || config.size - offset < bytes)
    throw std::invalid_argument(fmt::format("{}: a {}-byte config read at {:#x}: widths are 1, 2 or 4 within its {:#x} bytes",
                                            address(), bytes, offset, config.size));
  std::uint32_t value = 0;
  ssize_t r = seam_.pread(device_, &value, bytes, off_t(config.offset + offset));
  if (r != ssize_t(bytes))
    return std::unexpected(fmt::format("{}: config read at {:#x}: {}", address(), offset, r < 0 ? os::describe(int(r)) : "short"));
  return value;  // little-endian, as x86 and arm64 hosts are
}

Result<void> Device::write_config(std::uint32_t offset, std::uint32_t value, unsigned bytes) {
  const Region& config = region(VFIO_PCI_CONFIG_REGION_INDEX);
  if ((bytes != 1 && bytes != 2 && bytes != 4) || offset > config.size || config.size - offset < bytes)
    throw std::invalid_argument(fmt::format("{}: a {}-byte config write at {:#x}: widths are 1, 2 or 4 within its {:#x} bytes",
                                            address(), bytes, offset, config.size));
  ssize_t r = seam_.pwrite(device_, &value, bytes, off_t(config.offset + offset));
  if (r != ssize_t(bytes))
    return std::unexpected(fmt::format("{}: config write at {:#x}: {}", address(), offset, r < 0 ? os::describe(int(r)) : "short"));
  return {};
}

Result<void> Device::set_bus_master(bool on) {
  auto command = read_config(PCI_COMMAND, 2);
  if (!command) return std::unexpected(command.error());
  std::uint32_t bits = PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY;
  return write_config(PCI_COMMAND, on ? (*command | bits) : (*command & ~std::uint32_t(PCI_COMMAND_MASTER)), 2);
}

Result<std::uint64_t> Device::map_dma(void* host, std::size_t bytes) {
  if (bytes == 0 || bytes % iovas_.page() || reinterpret_cast<std::uintptr_t>(host) % iovas_.page())
    throw std::invalid_argument(fmt::format("{}: DMA mapping of {:#x} bytes at {}: memory and size must be multiples of the "
                                            "IOMMU's {:#x}-byte page",
                                            address(), bytes, host, iovas_.page()));
  auto iova = iovas_.pick(bytes);
  if (!iova)
    throw std::invalid_argument(fmt::format("{}: no free IOVA range of {:#x} bytes below the device's {}-bit DMA mask",
                                            address(), bytes, iovas_.dma_bits()));
  return map_dma_at(host, bytes, *iova);
}

Result<std::uint64_t> Device::map_dma_at(void* host, std::size_t bytes, std::uint64_t iova) {
  if (reinterpret_cast<std::uintptr_t>(host) % iovas_.page())
    throw std::invalid_argument(fmt::format("{}: DMA mapping of memory at {}: it must start on an IOMMU page ({:#x} bytes)",
                                            address(), host, iovas_.page()));
  if (auto why = iovas_.refuse(iova, bytes)) throw std::invalid_argument(fmt::format("{}: DMA mapping at {}", address(), *why));
  vfio_iommu_type1_dma_map map{};
  map.argsz = sizeof map;
  map.flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
  map.vaddr = reinterpret_cast<std::uintptr_t>(host);
  map.iova = iova;
  map.size = bytes;
  if (int r = seam_.ioctl(container_, VFIO_IOMMU_MAP_DMA, &map); r < 0) {
    std::string hint = r == -ENOMEM ? ": pinning it passes RLIMIT_MEMLOCK (ulimit -l) or memory is short" : "";
    return std::unexpected(fmt::format("{}: the IOMMU refused to map {:#x} bytes at IOVA {:#x}: {}{}", address(), bytes, iova,
                                       os::describe(r), hint));
  }
  iovas_.take(iova, bytes);
  return iova;
}

Result<void> Device::unmap_dma(std::uint64_t iova) {
  auto it = iovas_.taken().find(iova);
  if (it == iovas_.taken().end())
    throw std::invalid_argument(fmt::format("{}: no DMA mapping starts at IOVA {:#x}", address(), iova));
  vfio_iommu_type1_dma_unmap unmap{};
  unmap.argsz = sizeof unmap;
  unmap.iova = iova;
  unmap.size = it->second;
  if (int r = seam_.ioctl(container_, VFIO_IOMMU_UNMAP_DMA, &unmap); r < 0)
    return std::unexpected(fmt::format("{}: unmapping IOVA {:#x}: {}", address(), iova, os::describe(r)));
  iovas_.give_back(iova);
  return {};
}

unsigned Device::interrupts(Irq kind) const {
  unsigned index = unsigned(kind);
  return index < irq_counts_.size() ? irq_counts_[index] : 0;
}

Result<void> Device::enable_interrupts(Irq kind, unsigned count) {
  unsigned have = interrupts(kind);
  if (count == 0 || count > have)
    throw std::invalid_argument(fmt::format("{}: {} {} vector{} asked for: the device has {}", address(), count, name_of(kind),
                                            count == 1 ? "" : "s", have));
  if (irq_on_) disable_interrupts(*irq_on_);
  std::vector<int> fds;
  auto close_all = [&] {
    for (int fd : fds) seam_.close(fd);
  };
  for (unsigned i = 0; i < count; ++i) {
    int fd = seam_.eventfd(0, EFD_NONBLOCK);
    if (fd < 0) {
      close_all();
      return std::unexpected(fmt::format("{}: eventfd for {} vector {}: {}", address(), name_of(kind), i, os::describe(fd)));
    }
    fds.push_back(fd);
  }
  std::vector<std::byte> buffer(sizeof(vfio_irq_set) + count * sizeof(std::int32_t));
  auto* set = reinterpret_cast<vfio_irq_set*>(buffer.data());
  set->argsz = std::uint32_t(buffer.size());
  set->flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
  set->index = unsigned(kind);
  set->start = 0;
  set->count = count;
  for (unsigned i = 0; i < count; ++i) {
    std::int32_t fd = fds[i];
    std::memcpy(set->data + i * sizeof fd, &fd, sizeof fd);
  }
  if (int r = seam_.ioctl(device_, VFIO_DEVICE_SET_IRQS, set); r < 0) {
    close_all();
    return std::unexpected(fmt::format("{}: vfio-pci refused to deliver {} to eventfds: {}", address(), name_of(kind), os::describe(r)));
  }
  irq_on_ = kind;
  irq_fds_ = std::move(fds);
  return {};
}

void Device::disable_interrupts(Irq kind) {
  if (irq_on_ != kind) return;
  vfio_irq_set set{};
  set.argsz = sizeof set;
  set.flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
  set.index = unsigned(kind);
  seam_.ioctl(device_, VFIO_DEVICE_SET_IRQS, &set);
  for (int fd : irq_fds_) seam_.close(fd);
  irq_fds_.clear();
  irq_on_.reset();
}

int Device::interrupt_fd(unsigned vector) const {
  if (!irq_on_ || vector >= irq_fds_.size())
    throw std::invalid_argument(fmt::format("{}: interrupt vector {} is not on ({})", address(), vector,
                                            irq_on_ ? fmt::format("{} has {} on", name_of(*irq_on_), irq_fds_.size())
                                                    : std::string("no interrupts are on")));
  return irq_fds_[vector];
}

std::uint64_t Device::wait_interrupt(unsigned vector, int timeout_ms) {
  int fd = interrupt_fd(vector);
  pollfd p{fd, POLLIN, 0};
  if (seam_.poll(&p, 1, timeout_ms) <= 0) return 0;
  std::uint64_t fired = 0;
  if (seam_.read(fd, &fired, sizeof fired) != ssize_t(sizeof fired)) return 0;
  if (irq_on_ == Irq::Intx) {
    vfio_irq_set set{};
    set.argsz = sizeof set;
    set.flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK;
    set.index = VFIO_PCI_INTX_IRQ_INDEX;
    set.count = 1;
    seam_.ioctl(device_, VFIO_DEVICE_SET_IRQS, &set);
  }
  return fired;
}

Result<void> Device::reset() {
  if (!can_reset_)
    return std::unexpected(fmt::format("{}: vfio-pci cannot reset it: it has no reset method (sysfs reset_method lists none)", address()));
  if (int r = seam_.ioctl(device_, VFIO_DEVICE_RESET, nullptr); r < 0)
    return std::unexpected(fmt::format("{}: the reset failed: {}", address(), os::describe(r)));
  return {};
}

}  // namespace rig::vfio
