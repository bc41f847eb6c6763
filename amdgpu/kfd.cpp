// KFD ioctls through the OS seam (kfd.hpp).
#include "kfd.hpp"

#include <fmt/format.h>

#include <fcntl.h>

namespace rig::amd {

namespace {

// A userptr buffer: host pages the GPU reads and writes.
constexpr std::uint32_t kUserptrFlags = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
                                        KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;

template <class A>
KfdResult<void> issue(os::Seam& seam, int fd, unsigned long request, A& args, const char* name) {
  int r = seam.ioctl(fd, request, &args);
  if (r < 0) return std::unexpected(KfdError{fmt::format("{}: {}", name, os::describe(r)), r});
  return {};
}

}  // namespace

KfdResult<KfdProcess*> KfdProcess::of(os::Seam& seam) {
  static std::mutex m;
  static auto* processes = new std::map<os::Seam*, KfdProcess*>;  // never destroyed, as KFD's
  std::lock_guard g(m);
  if (auto it = processes->find(&seam); it != processes->end()) return it->second;
  int fd = seam.open("/dev/kfd", O_RDWR);
  if (fd < 0) return std::unexpected(KfdError{fmt::format("/dev/kfd: {}", os::describe(fd)), fd});
  kfd_ioctl_get_version_args v{};
  if (auto r = issue(seam, fd, AMDKFD_IOC_GET_VERSION, v, "AMDKFD_IOC_GET_VERSION"); !r) {
    seam.close(fd);
    return std::unexpected(r.error());
  }
  if (v.major_version != 1) {
    seam.close(fd);
    return std::unexpected(
        KfdError{fmt::format("KFD interface {}.{}, not 1.x", v.major_version, v.minor_version), -EINVAL});
  }
  auto* p = new KfdProcess(seam);
  p->fd_ = fd;
  p->version_ = {v.major_version, v.minor_version};
  (*processes)[&seam] = p;
  return p;
}

KfdResult<int> KfdProcess::render(std::uint32_t gpu_id, std::uint32_t render_minor) {
  std::lock_guard g(mutex_);
  if (auto it = renders_.find(gpu_id); it != renders_.end()) return it->second;
  std::string node = fmt::format("/dev/dri/renderD{}", render_minor);
  int fd = seam_.open(node.c_str(), O_RDWR);
  if (fd < 0) return std::unexpected(KfdError{fmt::format("{}: {}", node, os::describe(fd)), fd});
  kfd_ioctl_acquire_vm_args vm{std::uint32_t(fd), gpu_id};
  if (auto r = issue(seam_, fd_, AMDKFD_IOC_ACQUIRE_VM, vm, "AMDKFD_IOC_ACQUIRE_VM"); !r) {
    seam_.close(fd);
    return std::unexpected(r.error());
  }
  renders_[gpu_id] = fd;
  return fd;
}

template <class A>
KfdResult<void> Kfd::call(unsigned long request, A& args, const char* name) {
  return issue(seam_, process_->fd(), request, args, name);
}

KfdResult<void> Kfd::open(std::uint32_t render_minor) {
  auto p = KfdProcess::of(seam_);
  if (!p) return std::unexpected(p.error());
  process_ = *p;
  auto r = process_->render(gpu_id_, render_minor);
  if (!r) return std::unexpected(r.error());
  render_ = *r;
  return {};
}

KfdResult<Kfd::Buffer> Kfd::alloc(std::uint64_t va, std::uint64_t bytes, std::uint32_t flags, std::uint64_t mmap_offset) {
  kfd_ioctl_alloc_memory_of_gpu_args a{};
  a.va_addr = va, a.size = bytes, a.gpu_id = gpu_id_, a.flags = flags, a.mmap_offset = mmap_offset;
  if (auto r = call(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, a, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"); !r)
    return std::unexpected(r.error());
  return Buffer{a.handle, a.mmap_offset};
}

KfdResult<int> Kfd::export_dmabuf(std::uint64_t handle) {
  KfdExportDmabufArgs a{handle, std::uint32_t(O_CLOEXEC), 0};
  if (auto r = call(kIocExportDmabuf, a, "AMDKFD_IOC_EXPORT_DMABUF"); !r) return std::unexpected(r.error());
  return int(a.dmabuf_fd);
}

KfdResult<void> Kfd::map(std::uint64_t handle) {
  std::uint32_t ids[1] = {gpu_id_};
  kfd_ioctl_map_memory_to_gpu_args a{handle, reinterpret_cast<std::uint64_t>(ids), 1, 0};
  if (auto r = call(AMDKFD_IOC_MAP_MEMORY_TO_GPU, a, "AMDKFD_IOC_MAP_MEMORY_TO_GPU"); !r) return r;
  if (a.n_success != 1)
    return std::unexpected(KfdError{fmt::format("AMDKFD_IOC_MAP_MEMORY_TO_GPU mapped on {} of 1 GPUs", a.n_success), -EIO});
  return {};
}

KfdResult<void> Kfd::unmap(std::uint64_t handle) {
  std::uint32_t ids[1] = {gpu_id_};
  kfd_ioctl_unmap_memory_from_gpu_args a{handle, reinterpret_cast<std::uint64_t>(ids), 1, 0};
  return call(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, a, "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU");
}

KfdResult<void> Kfd::free(std::uint64_t handle) {
  kfd_ioctl_free_memory_of_gpu_args a{handle};
  return call(AMDKFD_IOC_FREE_MEMORY_OF_GPU, a, "AMDKFD_IOC_FREE_MEMORY_OF_GPU");
}

KfdResult<std::uint64_t> Kfd::map_userptr(std::uint64_t host, std::uint64_t bytes) {
  std::lock_guard g(process_->mutex());
  auto& shared = process_->userptrs()[{gpu_id_, host, bytes}];
  if (!shared.users) {
    auto buffer = alloc(host, bytes, kUserptrFlags, host);
    if (!buffer) {
      process_->userptrs().erase({gpu_id_, host, bytes});
      return std::unexpected(buffer.error());
    }
    if (auto m = map(buffer->handle); !m) {
      free(buffer->handle);
      process_->userptrs().erase({gpu_id_, host, bytes});
      return std::unexpected(m.error());
    }
    shared.handle = buffer->handle;
  }
  ++shared.users;
  return shared.handle;
}

void Kfd::unmap_userptr(std::uint64_t host, std::uint64_t bytes) {
  std::lock_guard g(process_->mutex());
  auto it = process_->userptrs().find({gpu_id_, host, bytes});
  if (it == process_->userptrs().end() || --it->second.users) return;
  unmap(it->second.handle);
  free(it->second.handle);
  process_->userptrs().erase(it);
}

KfdResult<kfd_process_device_apertures> Kfd::apertures() {
  kfd_process_device_apertures nodes[16]{};
  kfd_ioctl_get_process_apertures_new_args a{};
  a.kfd_process_device_apertures_ptr = reinterpret_cast<std::uint64_t>(nodes);
  a.num_of_nodes = 16;
  if (auto r = call(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, a, "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW"); !r)
    return std::unexpected(r.error());
  for (std::uint32_t i = 0; i < a.num_of_nodes && i < 16; ++i)
    if (nodes[i].gpu_id == gpu_id_) return nodes[i];
  return std::unexpected(KfdError{fmt::format("no apertures for GPU {}", gpu_id_), -ENODEV});
}

KfdResult<kfd_ioctl_create_queue_args> Kfd::create_queue(kfd_ioctl_create_queue_args args) {
  args.gpu_id = gpu_id_;
  if (auto r = call(AMDKFD_IOC_CREATE_QUEUE, args, "AMDKFD_IOC_CREATE_QUEUE"); !r) return std::unexpected(r.error());
  return args;
}

KfdResult<void> Kfd::destroy_queue(std::uint32_t queue_id) {
  kfd_ioctl_destroy_queue_args a{queue_id, 0};
  return call(AMDKFD_IOC_DESTROY_QUEUE, a, "AMDKFD_IOC_DESTROY_QUEUE");
}

KfdResult<kfd_ioctl_create_event_args> Kfd::create_event(std::uint32_t type, bool auto_reset,
                                                         std::uint64_t event_page_handle) {
  kfd_ioctl_create_event_args a{};
  a.event_type = type, a.auto_reset = auto_reset, a.event_page_offset = event_page_handle;
  if (auto r = call(AMDKFD_IOC_CREATE_EVENT, a, "AMDKFD_IOC_CREATE_EVENT"); !r) return std::unexpected(r.error());
  return a;
}

KfdResult<void> Kfd::destroy_event(std::uint32_t event_id) {
  kfd_ioctl_destroy_event_args a{event_id, 0};
  return call(AMDKFD_IOC_DESTROY_EVENT, a, "AMDKFD_IOC_DESTROY_EVENT");
}

KfdResult<std::uint32_t> Kfd::wait_events(std::span<kfd_event_data> events, std::uint32_t timeout_ms) {
  kfd_ioctl_wait_events_args a{};
  a.events_ptr = reinterpret_cast<std::uint64_t>(events.data());
  a.num_events = std::uint32_t(events.size());
  a.wait_for_all = 0;
  a.timeout = timeout_ms;
  if (auto r = call(AMDKFD_IOC_WAIT_EVENTS, a, "AMDKFD_IOC_WAIT_EVENTS"); !r) return std::unexpected(r.error());
  return a.wait_result;
}

KfdResult<kfd_ioctl_get_clock_counters_args> Kfd::clock_counters() {
  kfd_ioctl_get_clock_counters_args a{};
  a.gpu_id = gpu_id_;
  if (auto r = call(AMDKFD_IOC_GET_CLOCK_COUNTERS, a, "AMDKFD_IOC_GET_CLOCK_COUNTERS"); !r)
    return std::unexpected(r.error());
  return a;
}

}  // namespace rig::amd
