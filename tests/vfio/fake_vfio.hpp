// A fake kernel for vfio/: an os::Seam that answers as sysfs, /dev/vfio/vfio (a type1
// container), /dev/vfio/GROUP and vfio-pci's device files do, all in memory, so that each
// refusal of vfio::Device can be set up and its message checked, and what the device left
// behind (descriptors, mappings, interrupts) seen after it.
#pragma once

#include <rig/os.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rig::test {

class FakeVfio final : public os::Seam {
 public:
  static constexpr const char* sysfs = "/fake/sys";
  static constexpr const char* dev = "/fake/dev";

  // A PCI function in the fake sysfs.
  struct Function {
    std::string address;
    unsigned vendor = 0x1234, device = 0x11e8;
    std::optional<std::string> driver = "vfio-pci";
    std::optional<unsigned> group;  // none: no IOMMU
    std::string reset_method = "flr";
    // vfio-pci's regions by index (BAR0..5, ROM, config): sizes; 0 is an absent region.
    std::array<std::uint64_t, 9> regions = {1 << 20, 0, 0, 0, 0, 0, 0, 256, 0};
    std::array<unsigned, 5> irqs = {1, 1, 0, 0, 0};  // INTx, MSI, MSI-X, ERR, REQ
  };
  void add(Function f);

  // Set-ups of the kernel.
  bool vfio_module = true;     // /dev/vfio/vfio exists
  bool iommufd = false;        // /dev/iommu exists
  int group_open_error = 0;    // what opening /dev/vfio/GROUP answers (-EACCES), 0 to succeed
  int device_fd_error = 0;     // what VFIO_GROUP_GET_DEVICE_FD answers (-EBUSY), 0 to succeed
  int map_dma_error = 0;       // what VFIO_IOMMU_MAP_DMA answers (-ENOMEM), 0 to succeed
  int set_irqs_error = 0;      // what VFIO_DEVICE_SET_IRQS answers on enabling, 0 to succeed
  // The IOMMU's usable IOVA ranges, reported through the IOVA-range capability.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> iova_ranges = {{0, 0xfedfffff}, {0xfef00000, ~std::uint64_t(0)}};

  // What was done to it.
  std::size_t open_descriptors() const { return files_.size(); }
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> dma;  // IOVA: (vaddr, size)
  std::size_t mapped_regions() const { return regions_mapped_.size(); }
  int irq_index = -1;                 // the index delivering to eventfds, -1 none
  std::vector<int> irq_eventfds;      // their descriptors
  int resets = 0;
  std::array<std::uint8_t, 256> config{};
  // Fires vector `vector` of the interrupts on: its eventfd counts one more.
  void fire(unsigned vector);

  int open(const char* path, int flags) override;
  int close(int fd) override;
  int ioctl(int fd, unsigned long request, void* arg) override;
  std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) override;
  int munmap(void* addr, std::size_t length) override;
  int poll(pollfd* fds, nfds_t count, int timeout_ms) override;
  ssize_t read(int fd, void* buffer, std::size_t n) override;
  int eventfd(unsigned initial, int flags) override;
  ssize_t pread(int fd, void* buffer, std::size_t n, off_t offset) override;
  ssize_t pwrite(int fd, const void* buffer, std::size_t n, off_t offset) override;
  std::expected<std::string, int> readlink(const char* path) override;
  std::expected<std::vector<std::string>, int> list(const char* path) override;

 private:
  enum class Kind { Text, Container, Group, Device, Event };
  struct File {
    Kind kind = Kind::Text;
    std::string text = {};  // Text: the content
    std::size_t at = 0;     // Text: the position
    unsigned group = 0;     // Group
    std::string address = {};  // Device
    std::uint64_t count = 0;  // Event
  };
  int add_file(File f);
  const Function* function(const std::string& address) const;
  int device_ioctl(File& f, unsigned long request, void* arg);

  std::vector<Function> functions_;
  std::map<int, File> files_;
  int next_fd_ = 100;
  std::set<unsigned> groups_open_;
  bool container_has_group_ = false, iommu_set_ = false;
  std::map<void*, std::vector<std::byte>> regions_mapped_;
};

}  // namespace rig::test
