// The simulated NVIDIA GPU (sim.hpp): its files, the seam's calls, the framing of escapes
// (request sizes, the file each escape belongs to, NV_ESC_IOCTL_XFER_CMD), host memory, the
// VA spaces' page tables and the doorbell watcher. RM's objects are in rm.cpp, UVM in uvm.cpp.
#include "state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <unistd.h>

namespace rig::sim::nv {
namespace {

constexpr unsigned ioc_nr(unsigned long request) { return unsigned(request & 0xFF); }
constexpr unsigned ioc_type(unsigned long request) { return unsigned((request >> 8) & 0xFF); }
constexpr std::size_t ioc_size(unsigned long request) { return std::size_t((request >> 16) & 0x3FFF); }

std::string status_name(std::uint32_t s) {
  using namespace abi;
  switch (s) {
    case NV_ERR_BUSY_RETRY: return "NV_ERR_BUSY_RETRY";
    case NV_ERR_GPU_UUID_NOT_FOUND: return "NV_ERR_GPU_UUID_NOT_FOUND";
    case NV_ERR_ILLEGAL_ACTION: return "NV_ERR_ILLEGAL_ACTION";
    case NV_ERR_IN_USE: return "NV_ERR_IN_USE";
    case NV_ERR_INSERT_DUPLICATE_NAME: return "NV_ERR_INSERT_DUPLICATE_NAME";
    case NV_ERR_INSUFFICIENT_RESOURCES: return "NV_ERR_INSUFFICIENT_RESOURCES";
    case NV_ERR_INVALID_ADDRESS: return "NV_ERR_INVALID_ADDRESS";
    case NV_ERR_INVALID_ARGUMENT: return "NV_ERR_INVALID_ARGUMENT";
    case NV_ERR_INVALID_CHANNEL: return "NV_ERR_INVALID_CHANNEL";
    case NV_ERR_INVALID_CLASS: return "NV_ERR_INVALID_CLASS";
    case NV_ERR_INVALID_CLIENT: return "NV_ERR_INVALID_CLIENT";
    case NV_ERR_INVALID_DEVICE: return "NV_ERR_INVALID_DEVICE";
    case NV_ERR_INVALID_FLAGS: return "NV_ERR_INVALID_FLAGS";
    case NV_ERR_INVALID_LIMIT: return "NV_ERR_INVALID_LIMIT";
    case NV_ERR_INVALID_OBJECT: return "NV_ERR_INVALID_OBJECT";
    case NV_ERR_INVALID_OBJECT_HANDLE: return "NV_ERR_INVALID_OBJECT_HANDLE";
    case NV_ERR_INVALID_OBJECT_PARENT: return "NV_ERR_INVALID_OBJECT_PARENT";
    case NV_ERR_INVALID_OFFSET: return "NV_ERR_INVALID_OFFSET";
    case NV_ERR_INVALID_PARAM_STRUCT: return "NV_ERR_INVALID_PARAM_STRUCT";
    case NV_ERR_INVALID_STATE: return "NV_ERR_INVALID_STATE";
    case NV_ERR_NO_MEMORY: return "NV_ERR_NO_MEMORY";
    case NV_ERR_NOT_SUPPORTED: return "NV_ERR_NOT_SUPPORTED";
    case NV_ERR_OBJECT_NOT_FOUND: return "NV_ERR_OBJECT_NOT_FOUND";
    case NV_ERR_OPERATING_SYSTEM: return "NV_ERR_OPERATING_SYSTEM";
    case NV_ERR_STATE_IN_USE: return "NV_ERR_STATE_IN_USE";
    case NV_ERR_UVM_ADDRESS_IN_USE: return "NV_ERR_UVM_ADDRESS_IN_USE";
    case NV_ERR_GENERIC: return "NV_ERR_GENERIC";
  }
  return fmt::format("status {:#x}", s);
}

// The struct size each escape takes (RM_ALLOC takes two; CARD_INFO and ATTACH_GPUS_TO_FD
// take arrays), or 0 for an escape the simulator does not know.
std::size_t escape_size(unsigned nr) {
  using namespace abi;
  switch (nr) {
    case NV_ESC_RM_ALLOC_MEMORY: return sizeof(NVOS02_with_fd);
    case NV_ESC_RM_FREE: return sizeof(NVOS00);
    case NV_ESC_RM_CONTROL: return sizeof(NVOS54);
    case NV_ESC_RM_MAP_MEMORY: return sizeof(NVOS33_with_fd);
    case NV_ESC_RM_UNMAP_MEMORY: return sizeof(NVOS34);
    case NV_ESC_RM_GET_EVENT_DATA: return sizeof(NVOS41);
    case NV_ESC_REGISTER_FD: return sizeof(nv_ioctl_register_fd);
    case NV_ESC_ALLOC_OS_EVENT:
    case NV_ESC_FREE_OS_EVENT: return sizeof(nv_ioctl_os_event);
    case NV_ESC_CHECK_VERSION_STR: return sizeof(nv_ioctl_rm_api_version);
    case NV_ESC_IOCTL_XFER_CMD: return sizeof(nv_ioctl_xfer);
    case NV_ESC_EXPORT_TO_DMABUF_FD: return sizeof(nv_ioctl_export_to_dma_buf_fd);
  }
  return 0;
}

const char* escape_name(unsigned nr) {
  using namespace abi;
  switch (nr) {
    case NV_ESC_RM_ALLOC_MEMORY: return "RM_ALLOC_MEMORY";
    case NV_ESC_RM_FREE: return "RM_FREE";
    case NV_ESC_RM_CONTROL: return "RM_CONTROL";
    case NV_ESC_RM_ALLOC: return "RM_ALLOC";
    case NV_ESC_RM_MAP_MEMORY: return "RM_MAP_MEMORY";
    case NV_ESC_RM_UNMAP_MEMORY: return "RM_UNMAP_MEMORY";
    case NV_ESC_RM_GET_EVENT_DATA: return "RM_GET_EVENT_DATA";
    case NV_ESC_RM_MAP_MEMORY_DMA: return "RM_MAP_MEMORY_DMA";
    case NV_ESC_RM_UNMAP_MEMORY_DMA: return "RM_UNMAP_MEMORY_DMA";
    case NV_ESC_CARD_INFO: return "CARD_INFO";
    case NV_ESC_REGISTER_FD: return "REGISTER_FD";
    case NV_ESC_ALLOC_OS_EVENT: return "ALLOC_OS_EVENT";
    case NV_ESC_FREE_OS_EVENT: return "FREE_OS_EVENT";
    case NV_ESC_CHECK_VERSION_STR: return "CHECK_VERSION_STR";
    case NV_ESC_IOCTL_XFER_CMD: return "IOCTL_XFER_CMD";
    case NV_ESC_ATTACH_GPUS_TO_FD: return "ATTACH_GPUS_TO_FD";
    case NV_ESC_EXPORT_TO_DMABUF_FD: return "EXPORT_TO_DMABUF_FD";
  }
  return "an unknown escape";
}

}  // namespace

// ThreadSanitizer orders threads by the addresses their atomics name. The driver stores GPPut
// and rings the doorbell through its CPU mapping of USERD and the usermode page, and the engines
// and the doorbell watcher load them through the backing's own view: with a second mapping the
// two sides name different addresses for the same bytes, and TSan, seeing no order between them,
// reports the bytes that a submission publishes as racing. A TSan build therefore hands out the
// view itself as the CPU mapping (so an access after munmap goes unnoticed there); every other
// build maps the memfd afresh, so that such an access faults as on the real kernel.
#if defined(__SANITIZE_THREAD__)
constexpr bool kAliasCpuMappings = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kAliasCpuMappings = true;
#else
constexpr bool kAliasCpuMappings = false;
#endif
#else
constexpr bool kAliasCpuMappings = false;
#endif

// ---- The caller's memory.

bool copy_from_user(std::uint64_t address, void* to, std::size_t n) {
  if (n == 0) return true;
  iovec local{to, n}, remote{reinterpret_cast<void*>(address), n};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == ssize_t(n);
}

bool copy_to_user(std::uint64_t address, const void* from, std::size_t n) {
  if (n == 0) return true;
  iovec local{const_cast<void*>(from), n}, remote{reinterpret_cast<void*>(address), n};
  return process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == ssize_t(n);
}

bool user_accessible(const void* address, std::size_t n) {
  std::vector<std::byte> bytes(n);
  const auto a = reinterpret_cast<std::uint64_t>(address);
  return copy_from_user(a, bytes.data(), n) && copy_to_user(a, bytes.data(), n);
}

// ---- Host memory and VA spaces.

Backing::~Backing() {
  if (memfd >= 0) {
    ::munmap(view, size);
    ::close(memfd);
  }
  if (vram_used) vram_used->fetch_sub(size);
}

std::shared_ptr<Backing> make_backing(std::uint64_t size, const char* name) {
  auto b = std::make_shared<Backing>();
  b->memfd = memfd_create(name, MFD_CLOEXEC);
  if (b->memfd < 0) return nullptr;
  if (ftruncate(b->memfd, off_t(size)) != 0) return nullptr;
  void* v = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, b->memfd, 0);
  if (v == MAP_FAILED) return nullptr;
  b->view = static_cast<std::byte*>(v);
  b->size = size;
  return b;
}

std::optional<ptx::Mapping> VaSpace::map(std::uint64_t address, std::uint64_t size, bool write) {
  std::shared_lock lock(mutex);
  auto it = maps.upper_bound(address);
  if (it == maps.begin()) return std::nullopt;
  --it;
  const Map& m = it->second;
  if (address - it->first >= m.size || size > m.size - (address - it->first)) return std::nullopt;
  if (write && !m.writable) return std::nullopt;
  return ptx::Mapping{it->first, m.size, m.backing->view + m.offset};
}

void VaSpace::erase(std::uint64_t va, std::uint64_t size, std::vector<std::shared_ptr<Backing>>& gone) {
  std::unique_lock lock(mutex);
  const std::uint64_t end = va + size;
  auto it = maps.upper_bound(va);
  if (it != maps.begin()) --it;
  while (it != maps.end() && it->first < end) {
    const std::uint64_t a = it->first, b = a + it->second.size;
    if (b <= va) {
      ++it;
      continue;
    }
    Map m = it->second;
    it = maps.erase(it);
    gone.push_back(m.backing);
    if (a < va) maps.emplace(a, Map{va - a, m.backing, m.offset, m.writable});
    if (b > end) it = maps.emplace(end, Map{b - end, m.backing, m.offset + (end - a), m.writable}).first;
  }
}

void VaSpace::insert(std::uint64_t va, Map m, std::vector<std::shared_ptr<Backing>>& gone) {
  erase(va, m.size, gone);
  std::unique_lock lock(mutex);
  maps.emplace(va, std::move(m));
}

std::uint32_t Channel::gpput() const {
  return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(userd->view + userd_offset + kUserdGpPut))
      .load(std::memory_order_acquire);
}

bool Channel::idle() const {
  auto* get = reinterpret_cast<std::uint32_t*>(userd->view + userd_offset + kUserdGpGet);
  return std::atomic_ref<std::uint32_t>(*get).load(std::memory_order_acquire) == gpput();
}

// ---- Engines and the bytes they may hold.

void Simulator::Impl::retire(const std::shared_ptr<VaSpace>& space, std::vector<std::shared_ptr<Backing>> gone) {
  if (gone.empty()) return;
  Retired r;
  for (auto& [h, c] : clients)
    for (auto& [oh, o] : c.objects)
      if (o.channel && o.channel->box && o.channel->space == space && !o.channel->box->engine->stopped() &&
          !o.channel->idle())
        r.engines.emplace_back(o.channel->box, o.channel->box->engine->methods());
  if (r.engines.empty()) return;  // no engine is inside an entry: the bytes go now
  r.bytes = std::move(gone);
  retired.push_back(std::move(r));
}

void Simulator::Impl::sweep_retired() {
  for (Retired& r : retired)
    std::erase_if(r.engines, [](auto& e) {
      auto box = e.first.lock();
      return !box || box->engine->stopped() || box->engine->methods() > e.second;
    });
  std::erase_if(retired, [](const Retired& r) { return r.engines.empty(); });
}

void Simulator::Impl::settle(std::unique_lock<std::mutex>& lock) {
  if (!retired.empty()) sweep_retired();
  if (dying.empty()) return;
  auto dead = std::move(dying);
  dying.clear();
  lock.unlock();
  dead.clear();  // joins their threads, whose hooks may want the lock
  lock.lock();
}

void Simulator::Impl::schedule(Channel& ch, bool enable) {
  ch.scheduled = enable;
  if (!enable || ch.box) return;
  auto box = std::make_shared<EngineBox>();
  box->space = ch.space, box->userd = ch.userd, box->notifier = ch.error_notifier;
  Channel_setup setup;
  setup.name = fmt::format("channel {:#x} ({})", ch.handle, ch.kind == Engine_kind::compute ? "compute" : "copy");
  setup.kind = ch.kind;
  setup.channel_class = ch.channel_class;
  setup.space = box->space.get();
  setup.userd = box->userd->view + ch.userd_offset;
  setup.gpfifo_va = ch.gpfifo_va;
  setup.gpfifo_entries = ch.gpfifo_entries;
  setup.error_notifier = box->notifier ? box->notifier->view : nullptr;
  setup.code = &code;
  setup.sm_count = 1 * 1 * 2;  // GR_GET_INFO's GPCs x TPCs per GPC x SMs per TPC (rm.cpp)
  const bool compute = ch.kind == Engine_kind::compute;
  setup.nonstall = [this, compute] {
    std::lock_guard lock(mutex);
    fire_locked(compute ? abi::NV2080_NOTIFIERS_GR0 : abi::NV2080_NOTIFIERS_CE0, true, 0, 0);
  };
  setup.stopped = [this, compute, name = setup.name](std::uint32_t xid, const std::string& why) {
    std::lock_guard lock(mutex);
    fault_log.push_back(fmt::format("{}: Xid {}: {}", name, xid, why));
    fire_locked(abi::NV2080_NOTIFIERS_RC_ERROR, false, xid,
                std::uint16_t(compute ? abi::NV2080_ENGINE_TYPE_GRAPHICS : abi::NV2080_ENGINE_TYPE_COPY0));
  };
  setup.clock_ns = [this] { return now_ns(); };
  box->engine = std::make_unique<Engine>(std::move(setup));
  for (std::uint32_t k : ch.classes) box->engine->allow(k);
  ch.last_gpput = ch.gpput();
  ch.box = std::move(box);
}

// ---- Construction.

Simulator::Impl::Impl(Config c) : config(std::move(c)) { watcher = std::thread([this] { watch(); }); }

Simulator::Impl::~Impl() {
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  moved.notify_all();
  watcher.join();
}

std::uint32_t Simulator::Impl::refuse(std::uint32_t status, std::string what) {
  error_log.push_back(fmt::format("{} ({})", what, status_name(status)));
  return status;
}

int Simulator::Impl::refuse_errno(int negative_errno, std::string what) {
  error_log.push_back(fmt::format("{} (ioctl fails: {})", what, os::describe(negative_errno)));
  return negative_errno;
}

Simulator::Simulator(Config config) : impl_(std::make_unique<Impl>(std::move(config))) {}

Simulator::~Simulator() {
  {
    std::unique_lock lock(impl_->mutex);
    while (!impl_->clients.empty()) impl_->free_client(impl_->clients.begin()->first);
    impl_->settle(lock);
    impl_->retired.clear();
  }
  impl_.reset();
}

Code& Simulator::code() { return impl_->code; }

const Config& Simulator::config() const { return impl_->config; }

// ---- Files.

int Simulator::open(const char* path, int flags) {
  const std::string p = path;
  Node node;
  if (p == "/dev/nvidiactl") node = Node::ctl;
  else if (p == fmt::format("/dev/nvidia{}", impl_->config.minor)) node = Node::dev;
  else if (p == "/dev/nvidia-uvm") node = Node::uvm;
  else if (p.starts_with("/dev/nvidia")) return -ENOENT;  // other GPUs and nodes: not here
  else return os::system().open(path, flags);
  std::lock_guard lock(impl_->mutex);
  const int fd = impl_->next_fd++;
  impl_->files[fd].node = node;
  return fd;
}

int Simulator::close(int fd) {
  if (fd < kFirstFd) return os::system().close(fd);
  std::unique_lock lock(impl_->mutex);
  auto it = impl_->files.find(fd);
  if (it == impl_->files.end()) return -EBADF;
  impl_->close_file(fd, it->second);
  impl_->files.erase(fd);
  impl_->settle(lock);
  return 0;
}

ssize_t Simulator::read(int fd, void* buffer, std::size_t n) {
  if (fd < kFirstFd) return os::system().read(fd, buffer, n);
  std::lock_guard lock(impl_->mutex);
  return impl_->files.contains(fd) ? -EINVAL : -EBADF;  // RM's files are not read
}

int Simulator::eventfd(unsigned initial, int flags) { return os::system().eventfd(initial, flags); }

int Simulator::poll(pollfd* fds, nfds_t count, int timeout_ms) {
  std::vector<pollfd> real;
  std::vector<nfds_t> real_index;
  for (nfds_t i = 0; i < count; ++i)
    if (fds[i].fd < kFirstFd) real.push_back(fds[i]), real_index.push_back(i);
  if (real.size() == count) return os::system().poll(fds, count, timeout_ms);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  std::unique_lock lock(impl_->mutex);
  for (;;) {
    int ready = 0;
    for (nfds_t i = 0; i < count; ++i) {
      if (fds[i].fd < kFirstFd) continue;
      auto it = impl_->files.find(fds[i].fd);
      fds[i].revents = it == impl_->files.end() ? POLLNVAL
                       : it->second.pending.empty() ? 0
                                                    : short((POLLIN | POLLPRI) & fds[i].events);
      ready += fds[i].revents != 0;
    }
    if (!real.empty()) {
      lock.unlock();
      int r = os::system().poll(real.data(), real.size(), 0);
      lock.lock();
      if (r < 0) return r;
      for (std::size_t k = 0; k < real.size(); ++k) fds[real_index[k]].revents = real[k].revents;
      ready += r;
    }
    if (ready || (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)) return ready;
    // Events wake the simulator's files at once; real descriptors are looked at each 1 ms.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
    if (timeout_ms >= 0) until = std::min(until, deadline);
    impl_->moved.wait_until(lock, until);
  }
}

// ---- Mappings.

std::expected<void*, int> Simulator::mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) {
  if (fd < kFirstFd) return os::system().mmap(addr, length, prot, flags, fd, offset);
  std::lock_guard lock(impl_->mutex);
  auto it = impl_->files.find(fd);
  if (it == impl_->files.end()) return std::unexpected(-EBADF);
  File& f = it->second;
  if (f.node != Node::dev || !f.context_live) {
    impl_->error_log.push_back(fmt::format("mmap of file {}: no RM_MAP_MEMORY mapping context on it", fd));
    return std::unexpected(-EINVAL);
  }
  const std::uint64_t rounded = (f.ctx_length + kPage - 1) & ~(kPage - 1);
  if (length != f.ctx_length && length != rounded) {
    impl_->error_log.push_back(fmt::format("mmap of file {}: {} bytes, but its mapping context has {}", fd, length,
                                           f.ctx_length));
    return std::unexpected(-EINVAL);
  }
  if (offset != 0) {
    impl_->error_log.push_back(fmt::format("mmap of file {}: offset {:#x}, not 0", fd, offset));
    return std::unexpected(-EINVAL);
  }
  void* v;
  if (kAliasCpuMappings && !addr && prot == (PROT_READ | PROT_WRITE) && (flags & MAP_SHARED)) {
    v = f.ctx_backing->view + f.ctx_offset;
    impl_->cpu_views.emplace(v, Impl::CpuView{length, f.ctx_backing});
  } else {
    v = ::mmap(addr, length, prot, flags, f.ctx_backing->memfd, off_t(f.ctx_offset));
    if (v == MAP_FAILED) return std::unexpected(-errno);
  }
  impl_->moved.notify_all();  // a usermode page may now be written
  return v;
}

int Simulator::munmap(void* addr, std::size_t length) {
  if (kAliasCpuMappings) {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->cpu_views.find(addr);
    if (it != impl_->cpu_views.end()) {
      if (it->second.length != length) {
        impl_->error_log.push_back(fmt::format("munmap of {}: {} bytes, but it was mapped with {}", addr, length,
                                               it->second.length));
        return -EINVAL;
      }
      impl_->cpu_views.erase(it);
      return 0;
    }
  }
  return os::system().munmap(addr, length);
}

// ---- Ioctls.

int Simulator::ioctl(int fd, unsigned long request, void* arg) {
  if (fd < kFirstFd) return os::system().ioctl(fd, request, arg);
  std::unique_lock lock(impl_->mutex);
  auto it = impl_->files.find(fd);
  if (it == impl_->files.end()) return -EBADF;
  if (impl_->fail_request == request && impl_->fail_request != 0) {
    impl_->fail_request = 0;
    return impl_->fail_error;
  }
  File& file = it->second;
  int result;
  if (file.node == Node::uvm) result = impl_->uvm_ioctl(fd, file, request, arg);
  else if (ioc_type(request) != abi::kIoctlMagic)
    result = impl_->refuse_errno(-ENOTTY, fmt::format("ioctl {:#x} on file {}: not an NVIDIA escape", request, fd));
  else result = impl_->escape(fd, file, ioc_nr(request), arg, ioc_size(request));
  impl_->settle(lock);
  return result;
}

int Simulator::Impl::escape(int fd, File& file, unsigned nr, void* arg, std::size_t size) {
  using namespace abi;
  const char* name = escape_name(nr);
  if (!arg) return refuse_errno(-EFAULT, fmt::format("{} on file {}: no parameters", name, fd));
  if (config.gvisor && (nr == NV_ESC_RM_MAP_MEMORY_DMA || nr == NV_ESC_RM_UNMAP_MEMORY_DMA))
    return refuse_errno(-EINVAL, fmt::format("{}: gVisor's nvproxy allows it only with graphics or video "
                                             "capabilities", name));
  if (config.gvisor && nr == NV_ESC_EXPORT_TO_DMABUF_FD)
    return refuse_errno(-EINVAL, fmt::format("{}: gVisor's nvproxy allows it only with the rdma capability", name));
  if (nr == NV_ESC_IOCTL_XFER_CMD) {
    if (size != sizeof(nv_ioctl_xfer))
      return refuse_errno(-EINVAL, fmt::format("IOCTL_XFER_CMD: {} bytes, not {}", size, sizeof(nv_ioctl_xfer)));
    if (!user_accessible(arg, size)) return refuse_errno(-EFAULT, "IOCTL_XFER_CMD: its 16 bytes are not readable");
    auto* x = static_cast<nv_ioctl_xfer*>(arg);
    if (x->cmd == NV_ESC_IOCTL_XFER_CMD || !x->ptr)
      return refuse_errno(-EINVAL, fmt::format("IOCTL_XFER_CMD: escape {:#x} at {:#x} cannot be transferred", x->cmd,
                                               x->ptr));
    return escape(fd, file, x->cmd, reinterpret_cast<void*>(x->ptr), x->size);
  }
  // The struct's size must be the escape's (RM_ALLOC: NVOS21 or NVOS64; arrays: whole entries).
  if (nr == NV_ESC_RM_ALLOC) {
    if (size != sizeof(NVOS21) && size != sizeof(NVOS64))
      return refuse_errno(-EINVAL, fmt::format("RM_ALLOC: {} bytes, neither NVOS21's {} nor NVOS64's {}", size,
                                               sizeof(NVOS21), sizeof(NVOS64)));
  } else if (nr == NV_ESC_CARD_INFO || nr == NV_ESC_ATTACH_GPUS_TO_FD) {
    const std::size_t entry = nr == NV_ESC_CARD_INFO ? sizeof(nv_ioctl_card_info) : sizeof(std::uint32_t);
    if (size == 0 || size % entry)
      return refuse_errno(-EINVAL, fmt::format("{}: {} bytes, not a whole number of {}-byte entries", name, size,
                                               entry));
  } else if (escape_size(nr) == 0) {
    return refuse_errno(-EINVAL, fmt::format("escape {:#x} on file {}: {}", nr, fd,
                                             config.gvisor ? "nvproxy does not allow it" : "not an escape RM answers"));
  } else if (size != escape_size(nr)) {
    return refuse_errno(-EINVAL, fmt::format("{}: {} bytes, not {}", name, size, escape_size(nr)));
  }
  if (!user_accessible(arg, size))
    return refuse_errno(-EFAULT, fmt::format("{} on file {}: its {} bytes at {} are not the caller's to read and "
                                             "write", name, fd, size, arg));
  const bool ctl = file.node == Node::ctl;
  switch (nr) {
    case NV_ESC_CHECK_VERSION_STR: {
      auto* p = static_cast<nv_ioctl_rm_api_version*>(arg);
      const std::string ours = config.driver_version;
      if (p->cmd == NV_RM_API_VERSION_CMD_QUERY) {
        p->reply = NV_RM_API_VERSION_REPLY_RECOGNIZED;
        std::memset(p->versionString, 0, sizeof p->versionString);
        std::memcpy(p->versionString, ours.data(), std::min(ours.size(), sizeof p->versionString - 1));
        return 0;
      }
      if (p->cmd != NV_RM_API_VERSION_CMD_STRICT && p->cmd != NV_RM_API_VERSION_CMD_RELAXED)
        return refuse_errno(-EINVAL, fmt::format("CHECK_VERSION_STR: command {:#x} is none of STRICT, RELAXED, QUERY",
                                                 p->cmd));
      const std::string theirs(p->versionString, strnlen(p->versionString, sizeof p->versionString));
      if (theirs == ours) {
        p->reply = NV_RM_API_VERSION_REPLY_RECOGNIZED;
        return 0;
      }
      p->reply = NV_RM_API_VERSION_REPLY_UNRECOGNIZED;
      std::memset(p->versionString, 0, sizeof p->versionString);
      std::memcpy(p->versionString, ours.data(), std::min(ours.size(), sizeof p->versionString - 1));
      return refuse_errno(-EINVAL, fmt::format("CHECK_VERSION_STR: the caller is built for \"{}\", the driver is "
                                               "\"{}\"", theirs, ours));
    }
    case NV_ESC_CARD_INFO: {
      auto* cards = static_cast<nv_ioctl_card_info*>(arg);
      std::memset(cards, 0, size);
      cards[0].valid = 1;
      cards[0].pci_info = {0, 0x41, 0, 0, 0x10DE, std::uint16_t(config.classes.sm == 90 ? 0x2335 : 0x20B0)};
      cards[0].gpu_id = config.gpu_id;
      cards[0].fb_size = config.vram_bytes;
      cards[0].minor_number = config.minor;
      return 0;
    }
    case NV_ESC_ATTACH_GPUS_TO_FD: {
      auto* ids = static_cast<const std::uint32_t*>(arg);
      for (std::size_t i = 0; i < size / 4; ++i)
        if (ids[i] != config.gpu_id)
          return refuse_errno(-EINVAL, fmt::format("ATTACH_GPUS_TO_FD: no GPU has id {:#x} (the GPU is {:#x})",
                                                   ids[i], config.gpu_id));
      return 0;
    }
    case NV_ESC_REGISTER_FD: {
      auto* p = static_cast<nv_ioctl_register_fd*>(arg);
      if (file.node != Node::dev)
        return refuse_errno(-EINVAL, fmt::format("REGISTER_FD on file {}: only a /dev/nvidia{} file registers",
                                                 fd, config.minor));
      auto ctl_file = files.find(p->ctl_fd);
      if (ctl_file == files.end() || ctl_file->second.node != Node::ctl)
        return refuse_errno(-EINVAL, fmt::format("REGISTER_FD: {} is not an open /dev/nvidiactl file", p->ctl_fd));
      if (file.registered_ctl >= 0)
        return refuse_errno(-EINVAL, fmt::format("REGISTER_FD: file {} is already registered to {}", fd,
                                                 file.registered_ctl));
      file.registered_ctl = p->ctl_fd;
      return 0;
    }
    case NV_ESC_RM_ALLOC: {
      // NVOS21 is NVOS64's head; their status fields differ in place.
      auto* p21 = static_cast<NVOS21*>(arg);
      std::uint32_t h = p21->hObjectNew;
      const std::uint32_t status = alloc(fd, p21->hRoot, p21->hObjectParent, h, p21->hClass, p21->pAllocParms);
      if (status == NV_OK) p21->hObjectNew = h;
      if (size == sizeof(NVOS64)) static_cast<NVOS64*>(arg)->status = status;
      else p21->status = status;
      return 0;
    }
    case NV_ESC_RM_FREE: {
      auto* p = static_cast<NVOS00*>(arg);
      p->status = free(p->hRoot, p->hObjectOld);
      return 0;
    }
    case NV_ESC_RM_CONTROL: {
      auto* p = static_cast<NVOS54*>(arg);
      p->status = control(p->hClient, p->hObject, p->cmd, p->params, p->paramsSize);
      return 0;
    }
    case NV_ESC_RM_ALLOC_MEMORY: {
      auto* p = static_cast<NVOS02_with_fd*>(arg);
      if (ctl) return refuse_errno(-EINVAL, fmt::format("RM_ALLOC_MEMORY on /dev/nvidiactl: it belongs to "
                                                        "/dev/nvidia{}", config.minor));
      // nvproxy's rmAllocMemory knows system (0x3E), local (0x3F, 0x40) and OS-descriptor memory.
      const std::uint32_t k = p->params.hClass;
      if (config.gvisor && k != NV01_MEMORY_SYSTEM && k != NV01_MEMORY_LOCAL_PRIVILEGED && k != NV01_MEMORY_LOCAL_USER &&
          k != NV01_MEMORY_SYSTEM_OS_DESCRIPTOR)
        return refuse_errno(-EINVAL, fmt::format("RM_ALLOC_MEMORY class {:#x}: nvproxy has no handler for it", k));
      p->params.status = alloc_memory(fd, *p);
      return 0;
    }
    case NV_ESC_RM_MAP_MEMORY: {
      if (!ctl) return refuse_errno(-EINVAL, "RM_MAP_MEMORY on a GPU file: it belongs to /dev/nvidiactl");
      auto* p = static_cast<NVOS33_with_fd*>(arg);
      p->params.status = map_memory(*p);
      return 0;
    }
    case NV_ESC_RM_UNMAP_MEMORY: {
      if (!ctl) return refuse_errno(-EINVAL, "RM_UNMAP_MEMORY on a GPU file: it belongs to /dev/nvidiactl");
      auto* p = static_cast<NVOS34*>(arg);
      p->status = unmap_memory(*p);
      return 0;
    }
    case NV_ESC_ALLOC_OS_EVENT:
    case NV_ESC_FREE_OS_EVENT: {
      auto* p = static_cast<nv_ioctl_os_event*>(arg);
      p->Status = os_event(fd, file, *p, nr == NV_ESC_ALLOC_OS_EVENT);
      return 0;
    }
    case NV_ESC_RM_GET_EVENT_DATA: {
      auto* p = static_cast<NVOS41*>(arg);
      p->status = event_data(file, *p);
      return 0;
    }
    case NV_ESC_EXPORT_TO_DMABUF_FD: {
      // The module answers it on a GPU's file only (nv.c: NV_ACTUAL_DEVICE_ONLY).
      if (ctl) return refuse_errno(-EINVAL, fmt::format("EXPORT_TO_DMABUF_FD on /dev/nvidiactl: it belongs to "
                                                        "/dev/nvidia{}", config.minor));
      auto* p = static_cast<nv_ioctl_export_to_dma_buf_fd*>(arg);
      p->status = export_dmabuf(*p);
      return 0;
    }
  }
  return refuse_errno(-EINVAL, fmt::format("{} on file {}: not answered", name, fd));
}

// ---- The doorbell watcher.

void Simulator::Impl::watch() {
  using namespace std::chrono;
  unsigned idle = 0;
  std::unique_lock lock(mutex);
  while (!stopping) {
    // The usermode pages alive now.
    std::vector<std::shared_ptr<Backing>> pages;
    for (auto& [h, c] : clients)
      for (auto& [oh, o] : c.objects)
        if (o.klass == config.classes.usermode && o.memory) pages.push_back(o.memory);
    if (pages.empty()) {
      moved.wait(lock);
      continue;
    }
    bool rang = false;
    for (auto& page : pages) {
      std::atomic_ref<std::uint32_t> bell(*reinterpret_cast<std::uint32_t*>(page->view + kDoorbellOffset));
      if (bell.load(std::memory_order_acquire) == 0) continue;
      const std::uint32_t token = bell.exchange(0, std::memory_order_acq_rel);
      if (token) ring(token), rang = true;
    }
    pages.clear();
    idle = rang ? 0 : idle + 1;
    // Spin (yielding) for a while after a ring, then back off to 200 µs sleeps.
    lock.unlock();
    if (idle < 256) std::this_thread::yield();
    else std::this_thread::sleep_for(microseconds(idle < 1024 ? 20 : 200));
    lock.lock();
  }
}

void Simulator::Impl::ring(std::uint32_t token) {
  std::shared_ptr<Channel> hit;
  for (auto& [h, c] : clients)
    for (auto& [oh, o] : c.objects)
      if (o.channel && o.channel->token == token) hit = o.channel;
  if (!hit) {
    ++stray;
    error_log.push_back(fmt::format("doorbell: token {:#x} names no channel", token));
    return;
  }
  ++doorbells;
  // The page keeps only the last token written: a channel whose GPPut moved since it was last
  // woken is woken too, so that a token overwritten before the watcher took it is not lost.
  for (auto& [h, c] : clients)
    for (auto& [oh, o] : c.objects) {
      Channel* ch = o.channel.get();
      if (!ch || !ch->scheduled || !ch->box) continue;
      const std::uint32_t put = ch->gpput();
      if (ch == hit.get() || put != ch->last_gpput) {
        ch->last_gpput = put;
        ch->box->engine->doorbell();
      }
    }
}

// ---- For tests.

std::vector<std::string> Simulator::errors() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->error_log;
}

std::vector<std::string> Simulator::faults() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->fault_log;
}

std::size_t Simulator::live_objects() const {
  std::lock_guard lock(impl_->mutex);
  std::size_t n = 0;
  for (auto& [h, c] : impl_->clients) n += c.objects.size();
  return n;
}

std::size_t Simulator::live_cpu_mappings() const {
  std::lock_guard lock(impl_->mutex);
  return std::size_t(std::count_if(impl_->files.begin(), impl_->files.end(),
                                   [](auto& f) { return f.second.context_live; }));
}

std::size_t Simulator::live_uvm_ranges() const {
  std::lock_guard lock(impl_->mutex);
  std::size_t n = 0;
  for (auto& [fd, u] : impl_->uvm) n += u.ranges.size();
  return n;
}

std::size_t Simulator::live_uvm_maps() const {
  std::lock_guard lock(impl_->mutex);
  std::set<VaSpace*> spaces;
  for (auto& [fd, u] : impl_->uvm)
    if (u.space) spaces.insert(u.space.get());
  std::size_t n = 0;
  for (VaSpace* s : spaces) {
    std::shared_lock va_lock(s->mutex);
    n += s->maps.size();
  }
  return n;
}

std::size_t Simulator::open_files() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->files.size();
}

std::uint64_t Simulator::doorbells() const { return impl_->doorbells.load(); }
std::uint64_t Simulator::stray_doorbells() const { return impl_->stray.load(); }
std::size_t Simulator::dmabuf_exports() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->dmabuf_exports;
}

bool Simulator::read_gpu(std::uint32_t client, std::uint32_t vaspace, std::uint64_t va, void* out,
                         std::size_t n) const {
  std::shared_ptr<VaSpace> space;
  {
    std::lock_guard lock(impl_->mutex);
    Object* o = impl_->object(client, vaspace);
    if (!o || !o->va) return false;
    space = o->va;
  }
  auto m = space->map(va, n, false);
  if (!m) return false;
  std::memcpy(out, m->host + (va - m->base), n);
  return true;
}

void Simulator::fire(std::uint32_t notify_index, bool nonstall) {
  std::lock_guard lock(impl_->mutex);
  impl_->fire_locked(notify_index, nonstall, 0, 0);
}

void Simulator::hold(bool held) {
  std::vector<std::shared_ptr<Channel>> channels;  // kept alive while held outside the lock
  {
    std::lock_guard lock(impl_->mutex);
    for (auto& [h, c] : impl_->clients)
      for (auto& [oh, o] : c.objects)
        if (o.channel && o.channel->box) channels.push_back(o.channel);
  }
  for (auto& ch : channels) ch->box->engine->hold(held);
}

void Simulator::fail_next_ioctl(unsigned long request, int negative_errno) {
  std::lock_guard lock(impl_->mutex);
  impl_->fail_request = request, impl_->fail_error = negative_errno;
}

}  // namespace rig::sim::nv
