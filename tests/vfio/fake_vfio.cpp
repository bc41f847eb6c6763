// The fake kernel for vfio/ (fake_vfio.hpp).
#include "fake_vfio.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <linux/vfio.h>

namespace rig::test {
namespace {

// vfio-pci places region i of a device's file at i << 40 (drivers/vfio/pci, VFIO_PCI_OFFSET_SHIFT).
constexpr unsigned region_shift = 40;
constexpr std::uint64_t config_offset = std::uint64_t(VFIO_PCI_CONFIG_REGION_INDEX) << region_shift;

std::string devices_dir() { return fmt::format("{}/bus/pci/devices/", FakeVfio::sysfs); }

}  // namespace

void FakeVfio::add(Function f) { functions_.push_back(std::move(f)); }

const FakeVfio::Function* FakeVfio::function(const std::string& address) const {
  for (const Function& f : functions_)
    if (f.address == address) return &f;
  return nullptr;
}

void FakeVfio::fire(unsigned vector) {
  if (vector < irq_eventfds.size()) files_.at(irq_eventfds[vector]).count += 1;
}

int FakeVfio::add_file(File f) {
  int fd = next_fd_++;
  files_.emplace(fd, std::move(f));
  return fd;
}

int FakeVfio::open(const char* path_c, int) {
  std::string path = path_c;
  if (path == std::string(dev) + "/vfio/vfio") return vfio_module ? add_file({Kind::Container}) : -ENOENT;
  if (path == std::string(dev) + "/iommu") return iommufd ? add_file({Kind::Text}) : -ENOENT;
  const std::string groups = std::string(dev) + "/vfio/";
  if (path.starts_with(groups)) {
    unsigned n = unsigned(std::stoul(path.substr(groups.size())));
    bool exists = std::any_of(functions_.begin(), functions_.end(),
                              [&](const Function& f) { return f.group == n && f.driver == "vfio-pci"; });
    if (!exists) return -ENOENT;
    if (group_open_error) return group_open_error;
    if (groups_open_.count(n)) return -EBUSY;
    groups_open_.insert(n);
    File g{Kind::Group};
    g.group = n;
    return add_file(g);
  }
  if (path.starts_with(devices_dir())) {
    std::string rest = path.substr(devices_dir().size());
    std::string address = rest.substr(0, rest.find('/'));
    std::string name = rest.substr(rest.find('/') + 1);
    const Function* f = function(address);
    if (!f) return -ENOENT;
    File t{Kind::Text};
    if (name == "vendor") t.text = fmt::format("{:#06x}\n", f->vendor);
    else if (name == "device") t.text = fmt::format("{:#06x}\n", f->device);
    else if (name == "reset_method" && !f->reset_method.empty()) t.text = f->reset_method + "\n";
    else return -ENOENT;
    return add_file(t);
  }
  return -ENOENT;
}

int FakeVfio::close(int fd) {
  auto it = files_.find(fd);
  if (it == files_.end()) return -EBADF;
  if (it->second.kind == Kind::Group) {
    groups_open_.erase(it->second.group);
    container_has_group_ = false;
    iommu_set_ = false;
    dma.clear();  // the container loses its IOMMU when its last group goes
  }
  files_.erase(it);
  return 0;
}

int FakeVfio::ioctl(int fd, unsigned long request, void* arg) {
  auto it = files_.find(fd);
  if (it == files_.end()) return -EBADF;
  File& f = it->second;
  switch (f.kind) {
    case Kind::Container:
      switch (request) {
        case VFIO_GET_API_VERSION: return VFIO_API_VERSION;
        case VFIO_CHECK_EXTENSION: return reinterpret_cast<std::uintptr_t>(arg) == VFIO_TYPE1v2_IOMMU ? 1 : 0;
        case VFIO_SET_IOMMU:
          if (!container_has_group_) return -EINVAL;
          iommu_set_ = true;
          return 0;
        case VFIO_IOMMU_GET_INFO: {
          auto* info = static_cast<vfio_iommu_type1_info*>(arg);
          if (!iommu_set_) return -EINVAL;
          const std::size_t cap = sizeof(vfio_iommu_type1_info_cap_iova_range) + iova_ranges.size() * sizeof(vfio_iova_range);
          const std::size_t want = sizeof(vfio_iommu_type1_info) + cap;
          std::uint32_t given = info->argsz;
          info->flags = VFIO_IOMMU_INFO_PGSIZES | VFIO_IOMMU_INFO_CAPS;
          info->iova_pgsizes = 0x1000 | 0x200000 | 0x40000000;
          if (given < want) {
            info->argsz = std::uint32_t(want);
            info->cap_offset = 0;
            return 0;
          }
          info->cap_offset = sizeof(vfio_iommu_type1_info);
          auto* range = reinterpret_cast<vfio_iommu_type1_info_cap_iova_range*>(reinterpret_cast<std::byte*>(info) + info->cap_offset);
          range->header.id = VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE;
          range->header.version = 1;
          range->header.next = 0;
          range->nr_iovas = std::uint32_t(iova_ranges.size());
          for (std::size_t i = 0; i < iova_ranges.size(); ++i)
            range->iova_ranges[i] = {iova_ranges[i].first, iova_ranges[i].second};
          return 0;
        }
        case VFIO_IOMMU_MAP_DMA: {
          auto* map = static_cast<vfio_iommu_type1_dma_map*>(arg);
          if (!iommu_set_) return -EINVAL;
          if (map_dma_error) return map_dma_error;
          for (const auto& [iova, m] : dma)
            if (map->iova < iova + m.second && iova < map->iova + map->size) return -EEXIST;
          dma[map->iova] = {map->vaddr, map->size};
          return 0;
        }
        case VFIO_IOMMU_UNMAP_DMA: {
          auto* unmap = static_cast<vfio_iommu_type1_dma_unmap*>(arg);
          auto m = dma.find(unmap->iova);
          if (m == dma.end() || m->second.second != unmap->size) return -EINVAL;
          dma.erase(m);
          return 0;
        }
      }
      return -ENOTTY;
    case Kind::Group:
      switch (request) {
        case VFIO_GROUP_GET_STATUS: {
          auto* status = static_cast<vfio_group_status*>(arg);
          bool viable = true;
          for (const Function& fn : functions_)
            if (fn.group == f.group && fn.driver && *fn.driver != "vfio-pci" && *fn.driver != "pci-stub") viable = false;
          status->flags = (viable ? VFIO_GROUP_FLAGS_VIABLE : 0) | (container_has_group_ ? VFIO_GROUP_FLAGS_CONTAINER_SET : 0);
          return 0;
        }
        case VFIO_GROUP_SET_CONTAINER: {
          int container = *static_cast<int*>(arg);
          auto c = files_.find(container);
          if (c == files_.end() || c->second.kind != Kind::Container) return -EBADF;
          container_has_group_ = true;
          return 0;
        }
        case VFIO_GROUP_GET_DEVICE_FD: {
          if (!iommu_set_) return -EINVAL;
          std::string address = static_cast<const char*>(arg);
          const Function* fn = function(address);
          if (!fn || fn->group != f.group) return -ENODEV;
          if (device_fd_error) return device_fd_error;
          File d{Kind::Device};
          d.address = address;
          return add_file(d);
        }
      }
      return -ENOTTY;
    case Kind::Device: return device_ioctl(f, request, arg);
    default: return -ENOTTY;
  }
}

int FakeVfio::device_ioctl(File& f, unsigned long request, void* arg) {
  const Function& fn = *function(f.address);
  switch (request) {
    case VFIO_DEVICE_GET_INFO: {
      auto* info = static_cast<vfio_device_info*>(arg);
      info->flags = VFIO_DEVICE_FLAGS_PCI | (fn.reset_method.empty() ? 0 : VFIO_DEVICE_FLAGS_RESET);
      info->num_regions = VFIO_PCI_NUM_REGIONS;
      info->num_irqs = VFIO_PCI_NUM_IRQS;
      return 0;
    }
    case VFIO_DEVICE_GET_REGION_INFO: {
      auto* region = static_cast<vfio_region_info*>(arg);
      if (region->index >= fn.regions.size()) return -EINVAL;
      region->size = fn.regions[region->index];
      region->offset = std::uint64_t(region->index) << region_shift;
      region->flags = region->size ? VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE : 0;
      if (region->size && region->index <= VFIO_PCI_BAR5_REGION_INDEX) region->flags |= VFIO_REGION_INFO_FLAG_MMAP;
      return 0;
    }
    case VFIO_DEVICE_GET_IRQ_INFO: {
      auto* irq = static_cast<vfio_irq_info*>(arg);
      if (irq->index >= fn.irqs.size()) return -EINVAL;
      irq->count = fn.irqs[irq->index];
      irq->flags = VFIO_IRQ_INFO_EVENTFD;
      return 0;
    }
    case VFIO_DEVICE_SET_IRQS: {
      auto* set = static_cast<vfio_irq_set*>(arg);
      if (set->index >= fn.irqs.size() || set->start + set->count > fn.irqs[set->index]) return -EINVAL;
      if (set->flags == (VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER) && set->count == 0) {
        if (int(set->index) == irq_index) {
          irq_index = -1;
          irq_eventfds.clear();
        }
        return 0;
      }
      if (set->flags == (VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK)) return 0;
      if (set->flags != (VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER)) return -EINVAL;
      if (set_irqs_error) return set_irqs_error;
      if (irq_index >= 0 && irq_index != int(set->index)) return -EINVAL;  // one kind at a time
      irq_index = int(set->index);
      irq_eventfds.clear();
      for (unsigned i = 0; i < set->count; ++i) {
        std::int32_t fd;
        std::memcpy(&fd, set->data + i * sizeof fd, sizeof fd);
        auto e = files_.find(fd);
        if (e == files_.end() || e->second.kind != Kind::Event) return -EBADF;
        irq_eventfds.push_back(fd);
      }
      return 0;
    }
    case VFIO_DEVICE_RESET:
      if (fn.reset_method.empty()) return -EINVAL;
      ++resets;
      return 0;
  }
  return -ENOTTY;
}

std::expected<void*, int> FakeVfio::mmap(void*, std::size_t length, int, int, int fd, off_t offset) {
  auto it = files_.find(fd);
  if (it == files_.end() || it->second.kind != Kind::Device) return std::unexpected(-EBADF);
  unsigned index = unsigned(std::uint64_t(offset) >> region_shift);
  const Function& fn = *function(it->second.address);
  if (index > VFIO_PCI_BAR5_REGION_INDEX || length > fn.regions[index]) return std::unexpected(-EINVAL);
  std::vector<std::byte> bytes(length);
  void* base = bytes.data();
  regions_mapped_.emplace(base, std::move(bytes));
  return base;
}

int FakeVfio::munmap(void* addr, std::size_t) { return regions_mapped_.erase(addr) ? 0 : -EINVAL; }

int FakeVfio::poll(pollfd* fds, nfds_t count, int) {
  int ready = 0;
  for (nfds_t i = 0; i < count; ++i) {
    auto it = files_.find(fds[i].fd);
    fds[i].revents = it != files_.end() && it->second.kind == Kind::Event && it->second.count ? POLLIN : 0;
    ready += fds[i].revents ? 1 : 0;
  }
  return ready;
}

ssize_t FakeVfio::read(int fd, void* buffer, std::size_t n) {
  auto it = files_.find(fd);
  if (it == files_.end()) return -EBADF;
  File& f = it->second;
  if (f.kind == Kind::Event) {
    if (n < 8) return -EINVAL;
    if (!f.count) return -EAGAIN;
    std::memcpy(buffer, &f.count, 8);
    f.count = 0;
    return 8;
  }
  if (f.kind != Kind::Text) return -EINVAL;
  std::size_t take = std::min(n, f.text.size() - f.at);
  std::memcpy(buffer, f.text.data() + f.at, take);
  f.at += take;
  return ssize_t(take);
}

int FakeVfio::eventfd(unsigned initial, int) {
  File e{Kind::Event};
  e.count = initial;
  return add_file(e);
}

ssize_t FakeVfio::pread(int fd, void* buffer, std::size_t n, off_t offset) {
  auto it = files_.find(fd);
  if (it == files_.end() || it->second.kind != Kind::Device) return -EBADF;
  std::uint64_t at = std::uint64_t(offset) - config_offset;
  if (std::uint64_t(offset) < config_offset || at + n > config.size()) return -EINVAL;
  std::memcpy(buffer, config.data() + at, n);
  return ssize_t(n);
}

ssize_t FakeVfio::pwrite(int fd, const void* buffer, std::size_t n, off_t offset) {
  auto it = files_.find(fd);
  if (it == files_.end() || it->second.kind != Kind::Device) return -EBADF;
  std::uint64_t at = std::uint64_t(offset) - config_offset;
  if (std::uint64_t(offset) < config_offset || at + n > config.size()) return -EINVAL;
  std::memcpy(config.data() + at, buffer, n);
  return ssize_t(n);
}

std::expected<std::string, int> FakeVfio::readlink(const char* path_c) {
  std::string path = path_c;
  if (!path.starts_with(devices_dir())) return std::unexpected(-ENOENT);
  std::string rest = path.substr(devices_dir().size());
  std::string address = rest.substr(0, rest.find('/'));
  std::string name = rest.find('/') == std::string::npos ? "" : rest.substr(rest.find('/') + 1);
  const Function* f = function(address);
  if (!f) return std::unexpected(-ENOENT);
  if (name == "driver" && f->driver) return "../../../bus/pci/drivers/" + *f->driver;
  if (name == "iommu_group" && f->group) return fmt::format("../../../kernel/iommu_groups/{}", *f->group);
  return std::unexpected(-ENOENT);
}

std::expected<std::vector<std::string>, int> FakeVfio::list(const char* path_c) {
  std::string path = path_c;
  const std::string groups = std::string(sysfs) + "/kernel/iommu_groups/";
  if (!path.starts_with(groups) || !path.ends_with("/devices")) return std::unexpected(-ENOENT);
  unsigned n = unsigned(std::stoul(path.substr(groups.size())));
  std::vector<std::string> names;
  for (const Function& f : functions_)
    if (f.group == n) names.push_back(f.address);
  if (names.empty()) return std::unexpected(-ENOENT);
  return names;
}

}  // namespace rig::test
