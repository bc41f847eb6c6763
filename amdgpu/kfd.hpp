// kfd.hpp — /dev/kfd and a GPU's render node, through the OS seam: the ioctls of
// linux/kfd_ioctl.h the AMD driver issues, each returning its result or an error that names
// the ioctl and the errno ("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: ENOMEM (Cannot allocate memory)").
#pragma once

#include <rig/os.hpp>

#include <linux/kfd_ioctl.h>

#include <cstdint>
#include <expected>
#include <map>
#include <mutex>
#include <vector>
#include <span>
#include <string>
#include <tuple>

namespace rig::amd {

// An error of one call, with the negative errno it failed with.
struct KfdError {
  std::string what;
  int error = 0;  // -errno
};
template <class T>
using KfdResult = std::expected<T, KfdError>;

// KFD's mmap offsets (kfd_priv.h): the type in bits 62..63 and the GPU id in bits 46..61.
constexpr std::uint64_t kMmapTypeShift = 62;
constexpr std::uint64_t kMmapTypeDoorbell = 3ull << kMmapTypeShift;
constexpr std::uint64_t kMmapGpuIdShift = 46;
// The doorbell page KFD maps per process and GPU on gfx9 and later: 8 KiB.
constexpr std::uint64_t kDoorbellBytes = 8192;
// AMDKFD_IOC_EXPORT_DMABUF (linux/kfd_ioctl.h from KFD interface 1.12, "Add DMA buf export
// ioctl"), which Debian 12's linux-libc-dev (1.11) lacks: a buffer's handle in, a
// dma-buf descriptor out, made with open(2) `flags` (O_CLOEXEC). KFD answers EINVAL for a
// handle it does not know; amdgpu's prime export refuses a userptr buffer (EPERM); a KFD
// before 1.12 has no such ioctl (ENOTTY).
struct KfdExportDmabufArgs {
  std::uint64_t handle;     // to KFD
  std::uint32_t flags;      // to KFD
  std::uint32_t dmabuf_fd;  // from KFD
};
static_assert(sizeof(KfdExportDmabufArgs) == 16);
constexpr unsigned long kIocExportDmabuf = _IOWR('K', 0x24, KfdExportDmabufArgs);
constexpr std::uint32_t kExportDmabufMinor = 12;  // the KFD interface minor version that has it

// KFD's signal event slots (an event page holds KFD_SIGNAL_EVENT_LIMIT of 8 bytes each).
constexpr std::uint64_t kEventPageBytes = KFD_SIGNAL_EVENT_LIMIT * 8;

// What KFD keeps per process, shared by every device the driver opens through one seam:
// /dev/kfd itself, each GPU's render node (whose VM is acquired once: KFD refuses a second
// render file for a GPU with EBUSY), and the signal event page (KFD takes one per process,
// refuses a second, and refuses to free it: it lives until the process exits).
class KfdProcess {
 public:
  // The process's state for `seam`, opening /dev/kfd on first use. Lives until the process
  // exits, as KFD's does.
  static KfdResult<KfdProcess*> of(os::Seam& seam);

  os::Seam& seam() { return seam_; }
  int fd() const { return fd_; }
  std::pair<std::uint32_t, std::uint32_t> version() const { return version_; }
  // The render node of GPU `gpu_id`, opened and its VM acquired for KFD on first use.
  KfdResult<int> render(std::uint32_t gpu_id, std::uint32_t render_minor);

  // The signal event page: its address (the same for host and GPU) once a device made it.
  struct EventPage {
    std::uint64_t address = 0, bytes = 0, handle = 0;
    std::vector<std::uint32_t> mapped_on;  // GPUs whose VM maps it
    bool registered = false;                // KFD took it with the process's first signal event
  };
  std::mutex& mutex() { return mutex_; }
  EventPage& event_page() { return event_page_; }

  // Host pages mapped for a GPU as a userptr buffer, shared by every device of the process
  // on that GPU (Kfd::map_userptr): the GPU has one VM per process, and KFD refuses a second
  // buffer over a range that VM maps already (EINVAL), so two devices that both map
  // rig_words, or the same host memory, share one buffer.
  struct Userptr {
    std::uint64_t handle = 0;
    std::uint32_t users = 0;
  };
  // By (gpu_id, host address, bytes); guarded by mutex().
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>, Userptr>& userptrs() { return userptrs_; }

 private:
  explicit KfdProcess(os::Seam& seam) : seam_(seam) {}
  os::Seam& seam_;
  int fd_ = -1;
  std::pair<std::uint32_t, std::uint32_t> version_{0, 0};
  std::mutex mutex_;
  std::map<std::uint32_t, int> renders_;
  EventPage event_page_;
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>, Userptr> userptrs_;
};

// KFD for one GPU of the process.
class Kfd {
 public:
  Kfd(os::Seam& seam, std::uint32_t gpu_id) : seam_(seam), gpu_id_(gpu_id) {}
  Kfd(const Kfd&) = delete;
  Kfd& operator=(const Kfd&) = delete;

  // Opens the process's /dev/kfd (checking the interface version, major 1) and the GPU's
  // render node, whose VM KFD then uses for the GPU (AMDKFD_IOC_ACQUIRE_VM).
  KfdResult<void> open(std::uint32_t render_minor);

  os::Seam& seam() { return seam_; }
  KfdProcess& process() { return *process_; }
  std::uint32_t gpu_id() const { return gpu_id_; }
  int kfd_fd() const { return process_->fd(); }
  int render_fd() const { return render_; }

  // Memory. alloc gives the buffer's handle and its mmap offset on the render node (for a
  // userptr, `mmap_offset` is the host address it maps).
  struct Buffer {
    std::uint64_t handle = 0, mmap_offset = 0;
  };
  KfdResult<Buffer> alloc(std::uint64_t va, std::uint64_t bytes, std::uint32_t flags, std::uint64_t mmap_offset = 0);
  KfdResult<void> map(std::uint64_t handle);
  KfdResult<void> unmap(std::uint64_t handle);
  KfdResult<void> free(std::uint64_t handle);
  KfdResult<kfd_process_device_apertures> apertures();
  // A new close-on-exec dma-buf descriptor of buffer `handle` (AMDKFD_IOC_EXPORT_DMABUF).
  KfdResult<int> export_dmabuf(std::uint64_t handle);
  // `bytes` of page-aligned host memory at `host`, mapped for the GPU at the same address as a
  // userptr buffer: allocated and mapped by its first user in the process, shared with the
  // later ones (KfdProcess::userptrs). Gives the buffer's handle; the error of alloc or map
  // (a range that overlaps another buffer's without being the same is refused by KFD).
  KfdResult<std::uint64_t> map_userptr(std::uint64_t host, std::uint64_t bytes);
  // One user of map_userptr's buffer is done: the last unmaps and frees it.
  void unmap_userptr(std::uint64_t host, std::uint64_t bytes);

  // Queues.
  KfdResult<kfd_ioctl_create_queue_args> create_queue(kfd_ioctl_create_queue_args args);
  KfdResult<void> destroy_queue(std::uint32_t queue_id);

  // Events. A signal event takes a slot of the process's event page, which `event_page_handle`
  // names for the process's first one (0 afterwards).
  KfdResult<kfd_ioctl_create_event_args> create_event(std::uint32_t type, bool auto_reset,
                                                      std::uint64_t event_page_handle = 0);
  KfdResult<void> destroy_event(std::uint32_t event_id);
  // Waits for any of `events` for at most timeout_ms; gives KFD_IOC_WAIT_RESULT_*.
  KfdResult<std::uint32_t> wait_events(std::span<kfd_event_data> events, std::uint32_t timeout_ms);

  KfdResult<kfd_ioctl_get_clock_counters_args> clock_counters();

 private:
  template <class A>
  KfdResult<void> call(unsigned long request, A& args, const char* name);

  os::Seam& seam_;
  KfdProcess* process_ = nullptr;
  std::uint32_t gpu_id_;
  int render_ = -1;
};

}  // namespace rig::amd
