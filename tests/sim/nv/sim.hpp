// sim.hpp — an NVIDIA GPU simulated at the OS seam: a fake /dev/nvidiactl, /dev/nvidia<minor>
// and /dev/nvidia-uvm implementing, in process, the resource manager's (RM's) escapes and
// UVM's ioctls as the 580 driver branch answers them (tests/sim/nv/abi.hpp has the numbers
// and structs).
//
// Pass a Simulator as the os::Seam of a driver and it talks to it as to the kernel. The
// simulator:
// - opens /dev/nvidiactl, /dev/nvidia<minor> (each open a new file: REGISTER_FD ties it to a
//   control file; each such file backs at most one RM_MAP_MEMORY CPU mapping, which is then
//   mmap'ed through it) and /dev/nvidia-uvm (INITIALIZE on one file, MM_INITIALIZE naming it
//   on a second);
// - answers the escapes CHECK_VERSION_STR, CARD_INFO, REGISTER_FD, ATTACH_GPUS_TO_FD,
//   RM_ALLOC (NVOS21 and NVOS64, told apart by the ioctl's size), RM_FREE (the object and
//   everything under it), RM_CONTROL, RM_ALLOC_MEMORY (OS descriptors, on /dev/nvidia<minor>),
//   RM_MAP_MEMORY / RM_UNMAP_MEMORY, ALLOC_OS_EVENT / FREE_OS_EVENT, GET_EVENT_DATA,
//   EXPORT_TO_DMABUF_FD (on /dev/nvidia<minor>: a dma-buf of one whole video-memory object,
//   checked as the module checks it, see rm.cpp) and NV_ESC_IOCTL_XFER_CMD (any escape whose
//   struct is too big for the ioctl's size field);
// - keeps RM's object tree: root clients (0x41), devices (0x80), subdevices (0x2080), the
//   usermode page (its class from Config), VA spaces (FERMI_VASPACE_A), channel groups
//   (KEPLER_CHANNEL_GROUP_A), context shares (FERMI_CONTEXT_SHARE_A), GPFIFO channels, the
//   compute and copy objects under them, GT200_DEBUGGER, video memory (0x40), system memory
//   (0x3E), OS descriptors (0x71), OS events (0x79) and virtual memory (0x70);
// - answers the controls rig needs, each checking its parameter size exactly;
// - answers UVM's INITIALIZE, MM_INITIALIZE, REGISTER_GPU, REGISTER_GPU_VASPACE,
//   REGISTER_CHANNEL, UNREGISTER_CHANNEL, CREATE_EXTERNAL_RANGE, MAP_EXTERNAL_ALLOCATION and FREE, mapping RM
//   memory into a VA space (a Space, gpu.hpp) at addresses inside external ranges.
//
// Refusals are RM's: the escape's status field gets RM's (or UVM's rmStatus gets UVM's)
// NV_ERR_* code and the ioctl returns 0, as the real driver does; where the real driver's
// ioctl itself fails (a size in the request that is not the escape's, an unknown escape, an
// escape on the wrong kind of file) the ioctl returns -EINVAL. Every refusal is also kept as
// text (errors()) naming the object or field and the reason.
//
// Memory: video and system memory are host memory (memfd) the simulator owns (a dma-buf of
// video memory is a new descriptor of its memfd, which the caller may map: the module's
// refuses mmap on a GPU with memory of its own); a CPU mapping
// (RM_MAP_MEMORY, then mmap of the /dev/nvidia<minor> file it named) shows the same bytes the
// GPU VA space maps; an OS descriptor is the caller's own pages. RM_FREE of memory tears its
// CPU mapping contexts down as RM does; memory UVM mapped stays alive until UVM unmaps it
// (UVM holds its own duplicate of the handle, as the real UVM does).
//
// Doorbell: the usermode page is host memory the caller maps; a watcher thread polls the
// word at +0x90 of every usermode page while any is mapped (spinning briefly after a write,
// then backing off to sleeps of at most 200 µs), takes each work-submit token written there
// (replacing it by 0; tokens are never 0) and rings that channel. A token written while the
// watcher has not yet taken the previous one replaces it, as on one register; so a doorbell
// also wakes every scheduled channel whose GPPut moved since it was last woken.
//
// gvisor mode refuses what gVisor's nvproxy refuses under its default compute+utility
// capabilities (google/gvisor pkg/sentry/devices/nvproxy version.go, frontend.go):
// NV_ESC_RM_MAP_MEMORY_DMA and UNMAP_MEMORY_DMA (need graphics/video caps: the ioctl fails
// with -EINVAL), the class NV01_MEMORY_VIRTUAL (status NV_ERR_INVALID_CLASS, as nvproxy answers
// a class it does not allow), EXPORT_TO_DMABUF_FD (needs the rdma capability: -EINVAL), the
// control NV0000 GET_BUILD_VERSION_V2 (status
// NV_ERR_NOT_SUPPORTED, as nvproxy answers a control it does not allow), and RM_ALLOC_MEMORY of
// a class other than system, local or OS-descriptor memory (-EINVAL).
#pragma once

#include <rig/os.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rig::sim::nv {

class Code;

// The classes a GPU generation exposes (GET_CLASSLIST answers these with the common ones).
struct Classes {
  std::uint32_t channel;   // GPFIFO channel
  std::uint32_t compute;   // compute engine object
  std::uint32_t copy;      // copy engine object
  std::uint32_t usermode;  // the usermode page (doorbell)
  unsigned sm;             // the SM version its kernels are built for (90, 80)
};
// Hopper GH100: HOPPER_CHANNEL_GPFIFO_A, HOPPER_COMPUTE_A, HOPPER_DMA_COPY_A, HOPPER_USERMODE_A.
inline constexpr Classes kHopper{0xC86F, 0xCBC0, 0xC8B5, 0xC661, 90};
// Ampere GA100: AMPERE_CHANNEL_GPFIFO_A, AMPERE_COMPUTE_A, AMPERE_DMA_COPY_A, AMPERE_USERMODE_A.
inline constexpr Classes kAmpere{0xC56F, 0xC6C0, 0xC6B5, 0xC461, 80};

struct Config {
  Classes classes = kHopper;
  std::uint64_t vram_bytes = 256ull << 20;  // video memory 0x40 allocations draw from
  std::string driver_version = "580.142";   // CHECK_VERSION_STR and GET_BUILD_VERSION answer it
  bool gvisor = false;                      // refuse what nvproxy refuses (see above)
  std::array<std::uint8_t, 16> uuid{0x47, 0x50, 0x55, 0x2d, 0x72, 0x69, 0x67, 0x2d,
                                    0x73, 0x69, 0x6d, 0x2d, 0x00, 0x00, 0x00, 0x01};
  std::uint32_t minor = 0;       // /dev/nvidia<minor>
  std::uint32_t gpu_id = 0x100;  // RM's id of the GPU (CARD_INFO, GPU_GET_ID_INFO_V2)
};

class Simulator final : public os::Seam {
 public:
  explicit Simulator(Config config = {});
  ~Simulator() override;
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  int open(const char* path, int flags) override;
  int close(int fd) override;
  int ioctl(int fd, unsigned long request, void* arg) override;
  std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags, int fd,
                                 off_t offset) override;
  int munmap(void* addr, std::size_t length) override;
  // The simulator's event files are readable while an OS event bound to them has fired and
  // GET_EVENT_DATA has not yet taken it; other descriptors go to the system.
  int poll(pollfd* fds, nfds_t count, int timeout_ms) override;
  ssize_t read(int fd, void* buffer, std::size_t n) override;
  int eventfd(unsigned initial, int flags) override;

  // The kernels a launch may run: register the fatbins a test launches here first.
  Code& code();

  // ---- For tests.
  const Config& config() const;
  // Every refusal so far, as text: "RM_ALLOC class 0x2080 under 0xdead: client 0xc1d00001 has
  // no object 0xdead (NV_ERR_INVALID_OBJECT_PARENT)".
  std::vector<std::string> errors() const;
  // Every channel that stopped on an error, as text: "channel 0xcaf00009 (compute): Xid 69:
  // ..." with the engine's words.
  std::vector<std::string> faults() const;
  // RM objects alive (clients and all under them), CPU mapping contexts made by
  // RM_MAP_MEMORY and not unmapped or torn down, UVM external ranges and mappings, open files.
  std::size_t live_objects() const;
  std::size_t live_cpu_mappings() const;
  std::size_t live_uvm_ranges() const;
  std::size_t live_uvm_maps() const;
  std::size_t open_files() const;
  // Doorbell rings the watcher took so far (each a token of a live channel), and tokens
  // written that named no channel.
  std::uint64_t doorbells() const;
  std::uint64_t stray_doorbells() const;
  // Dma-bufs EXPORT_TO_DMABUF_FD made so far.
  std::size_t dmabuf_exports() const;
  // Reads `n` bytes at GPU address `va` of VA space `vaspace` of client `client` into `out`, as
  // an engine reads them (through what UVM mapped). False when any byte is unmapped.
  bool read_gpu(std::uint32_t client, std::uint32_t vaspace, std::uint64_t va, void* out, std::size_t n) const;
  // Fires the OS events bound to notifier `index` of the simulator's subdevices, as the
  // GPU's interrupt would (NONSTALL ones by their engine's index with the NONSTALL flag).
  void fire(std::uint32_t notify_index, bool nonstall);
  // While held, every channel's engine takes no new GP entry and sleeps (Engine::hold), as a
  // bench that times the driver alone needs; hold(true) returns once each is out of its entry.
  void hold(bool held);
  // Fails the next call of ioctl `request` with `negative_errno` (once).
  void fail_next_ioctl(unsigned long request, int negative_errno);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rig::sim::nv
