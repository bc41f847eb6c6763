// The simulated AMD GPU (sim.hpp): files, sysfs, KFD ioctls, memory and events here; the
// queues' engines at the end (the command processor and the SDMA engine).
#include "sim.hpp"

#include <fmt/format.h>

#include <linux/kfd_ioctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <variant>

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "decode.hpp"
#include "../dmabuf.hpp"
#include "gfx11.hpp"
#include "gfx9.hpp"

namespace rig::sim::amd {
namespace {

constexpr std::uint64_t kPage = 4096;
// AMDKFD_IOC_EXPORT_DMABUF (linux/kfd_ioctl.h, KFD interface 1.12), which Debian 12's header
// lacks.
struct ExportDmabufArgs {
  std::uint64_t handle;
  std::uint32_t flags;
  std::uint32_t dmabuf_fd;
};
constexpr unsigned long kExportDmabuf = _IOWR('K', 0x24, ExportDmabufArgs);
constexpr std::uint32_t kExportMinor = 12;
constexpr int kFirstFd = 1 << 20;  // fake descriptors: far above any the process holds
constexpr std::uint64_t kUnsignaled = ~0ull;               // KFD's UNSIGNALED_EVENT_SLOT
constexpr std::uint32_t kFirstOtherEvent = 0x80000000u;    // ids of events without a slot
constexpr std::uint64_t kMmapTypeDoorbell = 3ull << 62;    // KFD_MMAP_TYPE_DOORBELL
constexpr std::uint64_t kGpuIdShift = 46;                  // KFD_MMAP_GPU_ID
constexpr std::uint64_t kDoorbellPage = 8192;
constexpr std::uint64_t kGpuvmBase = 1ull << 16, kGpuvmLimit = (1ull << 47) - 1;
constexpr std::uint64_t kCwsrBytes = 2 << 20, kCtlStackBytes = 0x7000;

std::uint64_t gfx_version(const std::string& arch) {
  // "gfx1100" -> 110000; the last two characters are minor and stepping in hex.
  std::string digits = arch.substr(3);
  unsigned major = unsigned(std::stoul(digits.substr(0, digits.size() - 2)));
  unsigned minor = unsigned(std::stoul(digits.substr(digits.size() - 2, 1), nullptr, 16));
  unsigned stepping = unsigned(std::stoul(digits.substr(digits.size() - 1), nullptr, 16));
  return major * 10000 + minor * 100 + stepping;
}

bool compare(std::uint32_t function, std::uint64_t value, std::uint64_t reference) {
  switch (function) {
    case 0: return true;
    case 1: return value < reference;
    case 2: return value <= reference;
    case 3: return value == reference;
    case 4: return value != reference;
    case 5: return value >= reference;
    case 6: return value > reference;
  }
  return false;
}

}  // namespace

// ---- State.

struct Bo {
  std::uint64_t handle = 0, va = 0, size = 0, mmap_offset = 0;
  std::uint32_t flags = 0;
  int memfd = -1;
  std::byte* view = nullptr;  // the simulator's own mapping (the user's pages for a userptr)
  bool userptr = false, mapped = false;
};

struct Event {
  std::uint32_t id = 0, type = 0, slot = 0;
  bool auto_reset = false, signaled = false;
  std::uint64_t generation = 0;  // counts set_event
  kfd_event_data data{};
};

struct Queue;

struct Sysfs {
  std::string text;
  std::size_t at = 0;
};
enum class Node { Kfd, Render };
using File = std::variant<Node, Sysfs>;

struct Simulator::Impl final : gfx11::Memory {
  Config config;
  std::string arch;
  Pm4Dialect dialect;  // the command processor's PM4: gfx9's for gfx9 processors (and SDMA 4)
  mutable std::mutex mutex;  // files, buffers, queues, events
  std::condition_variable events_moved;
  std::shared_mutex vm_mutex;  // the GPU page table
  std::map<int, File> files;
  int next_fd = kFirstFd;
  std::map<std::string, std::string> sysfs;
  int vm_render = -1;  // the render file whose VM KFD uses for the GPU (ACQUIRE_VM)
  bool vm_acquired = false;
  std::map<std::uint64_t, Bo> buffers;         // by handle
  struct Mapped {
    std::uint64_t size;
    std::byte* view;
  };
  std::map<std::uint64_t, Mapped> vm;  // the GPU page table: va -> what it maps (vm_mutex)
  std::map<std::uint64_t, std::uint64_t> host_maps;  // host address -> bytes of BO mappings
  std::uint64_t next_handle = 1, vram_used = 0;
  std::size_t dmabuf_exports = 0;
  std::map<std::uint32_t, Event> events;
  std::uint64_t event_page = 0;  // the BO handle of the signal page
  std::uint32_t next_other_event = kFirstOtherEvent;
  std::map<std::uint32_t, std::unique_ptr<Queue>> queues;
  std::uint32_t next_queue = 1;
  int doorbell_fd = -1;
  std::byte* doorbells = nullptr;  // the doorbell page, as the engines and the driver map it
  std::size_t doorbell_maps = 0;   // mappings of it handed out and not unmapped
  std::vector<std::string> fault_log;
  // Held engines sleep until released (or their queue is destroyed): while a test holds
  // them they take no CPU from the threads it times. Under hold_mutex: the engines running
  // and those parked; `released` wakes engines (parked, or idle in a Backoff) when the hold
  // changes, `parks` wakes hold() as they park.
  std::atomic<bool> held{false};
  std::mutex hold_mutex;
  std::condition_variable released, parks;
  std::uint32_t engines = 0, parked = 0;
  std::atomic<std::uint64_t> dispatches{0}, instructions{0}, pm4{0}, sdma{0};
  std::mutex stores_mutex;
  std::unordered_map<std::uint64_t, std::uint64_t> stores;  // RELEASE_MEM stores by address
  // The scratch each XCC's share of a dispatch uses, by the ring the XCCs' queues read and the
  // dispatch's place among that ring's dispatches: the XCCs run one dispatch's shares at once,
  // so their scratch must not overlap. An entry goes once every XCC has run its share, or with
  // the ring's queues. Under scratch_mutex.
  struct ScratchUse {
    std::uint32_t xcc;
    std::uint64_t begin, end;
    bool runs;  // the XCC's share has groups: an XCC without any uses none of its scratch
  };
  std::mutex scratch_mutex;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::vector<ScratchUse>> scratch_uses;
  // Records XCC `xcc`'s scratch [begin, end) for dispatch `ordinal` of `ring`: the XCC whose
  // scratch it overlaps, if one does.
  std::optional<ScratchUse> use_scratch(std::uint64_t ring, std::uint64_t ordinal, ScratchUse use);
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
  unsigned long fail_request = 0;
  int fail_error = 0;

  explicit Impl(Config c);
  ~Impl() override;

  std::uint64_t clock() const {
    return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - epoch)
                             .count()) / 10;
  }

  // gfx11::Memory, and the engines' view of memory: null outside mapped memory.
  std::byte* at(std::uint64_t address, std::size_t bytes, bool write) override;
  // The same view for the gfx9 interpreter.
  struct Gfx9Memory final : gfx9::Memory {
    Impl& sim;
    explicit Gfx9Memory(Impl& s) : sim(s) {}
    std::byte* at(std::uint64_t address, std::size_t bytes, bool write) override { return sim.at(address, bytes, write); }
  } gfx9_memory{*this};

  // Events: KFD's set_event, and an interrupt carrying a context id.
  void set_event(Event& e);
  void interrupt(std::uint32_t context);
  void fault(Queue& q, std::string why, bool page, std::uint64_t address, bool write);
  // While the engines are held, q's engine sleeps here, counted as parked.
  void park(const Queue& q);

  int ioctl(int fd, unsigned long request, void* arg);
  int alloc(kfd_ioctl_alloc_memory_of_gpu_args& a);
  int map(std::uint64_t handle, std::uint64_t ids, std::uint32_t n, std::uint32_t& done, bool on);
  int free(std::uint64_t handle);
  int create_queue(kfd_ioctl_create_queue_args& a);
  int destroy_queue(std::uint32_t id);
  int create_event(kfd_ioctl_create_event_args& a);
  int wait_events(kfd_ioctl_wait_events_args& a);
};

// gfx942's registers for sharing a dispatch among XCCs (dword addresses: gc_9_4_3_offset.h
// regCOMPUTE_TG_CHUNK_SIZE 0x0e27 and tinygrad's regCOMPUTE_CURRENT_LOGIC_XCC_ID 0x0e25, from
// the GC base 0x2000), which a PM4 queue's MQD sets to 0 (kfd_mqd_manager_v9.c).
constexpr std::uint32_t kCurrentLogicXccId = 0x2E25, kTgChunkSize = 0x2E27;

// A queue and its engine's thread.
struct Queue {
  Simulator::Impl& sim;
  std::uint32_t id, type, doorbell;  // doorbell: its index in the doorbell page
  std::uint64_t ring, ring_bytes, rptr_address, wptr_address;
  std::uint64_t rptr = 0;  // consumed, in the queue's units (dwords for PM4, bytes for SDMA)
  std::uint32_t xcc = 0;   // a compute queue's XCC, whose command processor runs it
  std::uint64_t dispatched = 0;  // DISPATCH_DIRECTs run, the same count on every XCC of a ring
  std::atomic<bool> stop{false};
  bool faulted = false;
  std::array<std::uint32_t, 0x400> sh{};     // SH registers, from 0x2C00
  std::array<bool, 0x400> sh_written{};
  std::thread thread;

  Queue(Simulator::Impl& s, std::uint32_t id, std::uint32_t type, std::uint32_t doorbell, std::uint64_t ring,
        std::uint64_t ring_bytes, std::uint64_t rptr_address, std::uint64_t wptr_address)
      : sim(s), id(id), type(type), doorbell(doorbell), ring(ring), ring_bytes(ring_bytes), rptr_address(rptr_address),
        wptr_address(wptr_address) {}
  std::string name() const { return fmt::format("{} queue {}", type == KFD_IOC_QUEUE_TYPE_SDMA ? "SDMA" : "COMPUTE", id); }
  void run();
  bool step_pm4(std::uint64_t wptr);
  bool step_sdma(std::uint64_t wptr);
  bool pm4_packet(const Pm4Packet& p, const std::string& name, int depth);
  bool sdma_packet(const SdmaPacket& p, const std::string& name);
  bool wait_until(std::uint64_t address, bool wide, std::uint32_t function, std::uint64_t reference, std::uint64_t mask,
                  const char* what);
  bool write(std::uint64_t address, const void* data, std::size_t n, const char* what);
  bool read(std::uint64_t address, void* data, std::size_t n, const char* what);
  bool dispatch(const DispatchDirect& d);
  void page_fault(std::uint64_t address, bool write, const char* what) {
    sim.fault(*this, fmt::format("page fault at {:#x} ({}) by {}", address, write ? "write" : "read", what), true,
              address, write);
  }
};

// ---- Construction, sysfs.

Simulator::Impl::Impl(Config c)
    : config(std::move(c)), arch(config.arch),
      dialect(arch.starts_with("gfx9") ? Pm4Dialect::Gfx9 : Pm4Dialect::Gfx10Plus) {
  const std::string root = "/sys/devices/virtual/kfd/kfd/topology";
  sysfs[root + "/generation_id"] = "1\n";
  sysfs[root + "/nodes/0/gpu_id"] = "0\n";
  sysfs[root + "/nodes/0/name"] = "\n";
  sysfs[root + "/nodes/0/properties"] =
      "cpu_cores_count 2\nsimd_count 0\nmem_banks_count 1\ncaches_count 0\nio_links_count 1\n"
      "gfx_target_version 0\nvendor_id 0\ndevice_id 0\n";
  sysfs[root + "/nodes/0/mem_banks/0/properties"] = "heap_type 0\nsize_in_bytes 8589934592\nflags 0\n";
  if (config.gpu_present) {
    // gfx9's CUs have 4 SIMDs of 64 lanes (and at most 8 waves each, as rocminfo's 32 waves
    // per CU of these parts); gfx11's 2 SIMDs of 32 lanes, 16 waves each. Each gfx942 XCC has
    // 4 shader engines (MI300X: 32 in all), a gfx90a GCD 8.
    const bool gfx9 = dialect == Pm4Dialect::Gfx9;
    const std::uint32_t simd_per_cu = gfx9 ? 4 : 2, wave = gfx9 ? 64 : 32, waves = gfx9 ? 8 : 16;
    const std::uint32_t arrays = arch == "gfx942" ? 4 * config.xccs : arch == "gfx90a" ? 8 : 1;
    const std::uint32_t cu_per_array = (config.compute_units + arrays - 1) / arrays;
    std::string n = root + "/nodes/1";
    sysfs[n + "/gpu_id"] = fmt::format("{}\n", config.gpu_id);
    sysfs[n + "/name"] = arch + "\n";
    sysfs[n + "/properties"] = fmt::format(
        "cpu_cores_count 0\nsimd_count {}\nmem_banks_count 1\ncaches_count 1\nio_links_count 1\n"
        "max_waves_per_simd {}\nlds_size_in_kb 64\nwave_front_size {}\narray_count {}\nsimd_arrays_per_engine 1\n"
        "cu_per_simd_array {}\nsimd_per_cu {}\nmax_slots_scratch_cu 32\ngfx_target_version {}\nvendor_id 4098\n"
        "device_id 29772\nlocation_id 768\ndomain 0\ndrm_render_minor {}\nnum_sdma_engines 1\n"
        "num_sdma_queues_per_engine 6\nnum_cp_queues 8\nnum_xcc {}\ncwsr_size {}\nctl_stack_size {}\n",
        config.compute_units * simd_per_cu, waves, wave, arrays, cu_per_array, simd_per_cu, gfx_version(arch),
        config.render_minor, config.xccs, kCwsrBytes, kCtlStackBytes);
    sysfs[n + "/mem_banks/0/properties"] =
        fmt::format("heap_type 1\nsize_in_bytes {}\nflags 0\nwidth 256\nmem_clk_max 1000\n", config.vram_bytes);
    sysfs[n + "/caches/0/properties"] = "level 2\nsize 4096\ncache_line_size 128\ncache_lines_per_tag 1\n";
  }
  doorbell_fd = memfd_create("rig-sim-doorbells", MFD_CLOEXEC);
  if (doorbell_fd < 0 || ftruncate(doorbell_fd, kDoorbellPage) != 0) throw std::runtime_error("sim: no memfd");
  void* v = ::mmap(nullptr, kDoorbellPage, PROT_READ | PROT_WRITE, MAP_SHARED, doorbell_fd, 0);
  if (v == MAP_FAILED) throw std::runtime_error("sim: cannot map the doorbells");
  doorbells = static_cast<std::byte*>(v);
}

Simulator::Impl::~Impl() {
  std::vector<std::uint32_t> ids;
  {
    std::lock_guard g(mutex);
    for (auto& [id, q] : queues) ids.push_back(id);
  }
  for (auto id : ids) destroy_queue(id);
  for (auto& [h, b] : buffers) {
    if (!b.userptr && b.view) ::munmap(b.view, b.size);
    if (b.memfd >= 0) ::close(b.memfd);
  }
  ::munmap(doorbells, kDoorbellPage);
  ::close(doorbell_fd);
}

Simulator::Simulator(Config config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Simulator::~Simulator() = default;

const Config& Simulator::config() const { return impl_->config; }

int Simulator::open(const char* path, int flags) {
  auto& s = *impl_;
  std::lock_guard g(s.mutex);
  std::string p = path;
  int fd = s.next_fd++;
  if (p == "/dev/kfd") {
    if ((flags & O_ACCMODE) != O_RDWR) return -EACCES;
    s.files[fd] = Node::Kfd;
  } else if (s.config.gpu_present && p == fmt::format("/dev/dri/renderD{}", s.config.render_minor)) {
    if ((flags & O_ACCMODE) != O_RDWR) return -EACCES;
    s.files[fd] = Node::Render;
  } else if (auto it = s.sysfs.find(p); it != s.sysfs.end()) {
    if ((flags & O_ACCMODE) != O_RDONLY) return -EACCES;
    s.files[fd] = Sysfs{it->second, 0};
  } else if (p.starts_with("/sys/devices/virtual/kfd") || p.starts_with("/dev/dri") || p == "/dev/kfd") {
    return -ENOENT;
  } else {
    --s.next_fd;
    return os::system().open(path, flags);  // not the simulator's
  }
  return fd;
}

int Simulator::close(int fd) {
  auto& s = *impl_;
  if (fd < kFirstFd) return os::system().close(fd);
  std::lock_guard g(s.mutex);
  return s.files.erase(fd) ? 0 : -EBADF;
}

ssize_t Simulator::read(int fd, void* buffer, std::size_t n) {
  auto& s = *impl_;
  if (fd < kFirstFd) return os::system().read(fd, buffer, n);
  std::lock_guard g(s.mutex);
  auto it = s.files.find(fd);
  if (it == s.files.end()) return -EBADF;
  auto* f = std::get_if<Sysfs>(&it->second);
  if (!f) return -EINVAL;
  std::size_t k = std::min(n, f->text.size() - f->at);
  std::memcpy(buffer, f->text.data() + f->at, k);
  f->at += k;
  return ssize_t(k);
}

int Simulator::poll(pollfd* fds, nfds_t count, int timeout_ms) {
  for (nfds_t i = 0; i < count; ++i)
    if (fds[i].fd >= kFirstFd) return -EINVAL;  // the simulator's files are not pollable
  return os::system().poll(fds, count, timeout_ms);
}

int Simulator::eventfd(unsigned initial, int flags) { return os::system().eventfd(initial, flags); }

// ---- Memory.

std::byte* Simulator::Impl::at(std::uint64_t address, std::size_t bytes, bool) {
  std::shared_lock g(vm_mutex);
  auto it = vm.upper_bound(address);
  if (it == vm.begin()) return nullptr;
  --it;
  std::uint64_t va = it->first, size = it->second.size;
  if (address - va > size || bytes > size - (address - va)) return nullptr;
  return it->second.view + (address - va);
}

std::expected<void*, int> Simulator::mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) {
  auto& s = *impl_;
  if (fd < kFirstFd) return os::system().mmap(addr, length, prot, flags, fd, offset);
  std::lock_guard g(s.mutex);
  auto it = s.files.find(fd);
  if (it == s.files.end()) return std::unexpected(-EBADF);
  auto* node = std::get_if<Node>(&it->second);
  if (!node) return std::unexpected(-ENODEV);
  if (!(flags & MAP_SHARED)) return std::unexpected(-EINVAL);
  auto off = std::uint64_t(offset);
  if (*node == Node::Kfd) {  // the doorbell page
    if ((off & (3ull << 62)) != kMmapTypeDoorbell || ((off >> kGpuIdShift) & 0xffff) != s.config.gpu_id)
      return std::unexpected(-EINVAL);
    if (length != kDoorbellPage || (off & 0x3fffffffffffull) != 0) return std::unexpected(-EINVAL);
    if (flags & MAP_FIXED) return std::unexpected(-EINVAL);
    // Every mapping is the engines' own, so that a doorbell's store and an engine's load of
    // it are one address (ThreadSanitizer then sees the order they give), counted until
    // unmapped.
    ++s.doorbell_maps;
    return static_cast<void*>(s.doorbells);
  }
  // The render node: a buffer's pages, by its mmap offset.
  for (auto& [h, b] : s.buffers) {
    if (b.userptr || b.mmap_offset != off) continue;
    if (length != b.size) return std::unexpected(-EINVAL);
    void* v = ::mmap(addr, length, prot, flags, b.memfd, 0);
    if (v == MAP_FAILED) return std::unexpected(-errno);
    s.host_maps[reinterpret_cast<std::uint64_t>(v)] = length;
    return v;
  }
  return std::unexpected(-EINVAL);
}

int Simulator::munmap(void* addr, std::size_t length) {
  auto& s = *impl_;
  {
    std::lock_guard g(s.mutex);
    if (addr == s.doorbells) {  // the doorbell page stays the engines' (mmap)
      if (length != kDoorbellPage || !s.doorbell_maps) return -EINVAL;
      --s.doorbell_maps;
      return 0;
    }
    s.host_maps.erase(reinterpret_cast<std::uint64_t>(addr));
  }
  return os::system().munmap(addr, length);
}

int Simulator::Impl::alloc(kfd_ioctl_alloc_memory_of_gpu_args& a) {
  if (!vm_acquired) return -EINVAL;  // no VM acquired for the GPU yet
  if (a.gpu_id != config.gpu_id) return -EINVAL;
  std::uint32_t kinds = a.flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT |
                                   KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL |
                                   KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP);
  if (__builtin_popcount(kinds) != 1) return -EINVAL;
  if (kinds & (KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP)) return -EINVAL;  // not simulated
  if (!a.size || a.size % kPage || a.va_addr % kPage) return -EINVAL;
  if (a.va_addr < kGpuvmBase || a.va_addr + a.size - 1 > kGpuvmLimit) return -EINVAL;
  for (auto& [h, b] : buffers)  // KFD refuses a virtual range that overlaps another buffer's
    if (a.va_addr < b.va + b.size && b.va < a.va_addr + a.size) return -EINVAL;
  Bo b;
  b.handle = (std::uint64_t(config.gpu_id) << 48) | next_handle++;
  b.va = a.va_addr, b.size = a.size, b.flags = a.flags;
  if (kinds == KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) {
    // The user's pages must exist (KFD pins them); the GPU address is the host address.
    if (a.mmap_offset != a.va_addr) return -EINVAL;
    if (msync(reinterpret_cast<void*>(a.mmap_offset), a.size, MS_ASYNC) != 0) return -EFAULT;
    b.userptr = true;
    b.view = reinterpret_cast<std::byte*>(a.mmap_offset);
  } else {
    if (kinds == KFD_IOC_ALLOC_MEM_FLAGS_VRAM) {
      if (vram_used + a.size > config.vram_bytes) return -ENOMEM;
      vram_used += a.size;
    }
    b.memfd = memfd_create("rig-sim-bo", MFD_CLOEXEC);
    if (b.memfd < 0 || ftruncate(b.memfd, off_t(a.size)) != 0) return -ENOMEM;
    void* v = ::mmap(nullptr, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, b.memfd, 0);
    if (v == MAP_FAILED) return -ENOMEM;
    b.view = static_cast<std::byte*>(v);
    b.mmap_offset = (b.handle & 0xffffffffffffull) << 12;
    a.mmap_offset = b.mmap_offset;
  }
  a.handle = b.handle;
  buffers[b.handle] = b;
  return 0;
}

int Simulator::Impl::map(std::uint64_t handle, std::uint64_t ids, std::uint32_t n, std::uint32_t& done, bool on) {
  auto it = buffers.find(handle);
  if (it == buffers.end()) return -EINVAL;
  if (n == 0 || done > n || !ids) return -EINVAL;
  auto* gpu_ids = reinterpret_cast<const std::uint32_t*>(ids);
  for (std::uint32_t i = done; i < n; ++i)
    if (gpu_ids[i] != config.gpu_id) return -EINVAL;
  Bo& b = it->second;
  if (!on && !b.mapped) return -EINVAL;
  {
    std::unique_lock g(vm_mutex);
    if (on) vm[b.va] = {b.size, b.view};
    else vm.erase(b.va);
  }
  b.mapped = on;
  done = n;
  return 0;
}

int Simulator::Impl::free(std::uint64_t handle) {
  auto it = buffers.find(handle);
  if (it == buffers.end()) return -EINVAL;
  Bo& b = it->second;
  if (b.mapped) return -EBUSY;  // KFD refuses to free a buffer still mapped for a GPU
  if (b.handle == event_page) return -EPERM;  // KFD: "Free signal BO is not allowed"
  if (!b.userptr) {
    ::munmap(b.view, b.size);
    ::close(b.memfd);
    if (b.flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) vram_used -= b.size;
  }
  buffers.erase(it);
  return 0;
}

// ---- Events.

void Simulator::Impl::set_event(Event& e) {
  ++e.generation;
  e.signaled = true;
  events_moved.notify_all();
}

void Simulator::Impl::interrupt(std::uint32_t context) {
  std::lock_guard g(mutex);
  auto* slots = [&]() -> volatile std::uint64_t* {
    auto b = buffers.find(event_page);
    return b == buffers.end() ? nullptr : reinterpret_cast<volatile std::uint64_t*>(b->second.view);
  }();
  if (!slots) return;
  // KFD: the event the context names, if its slot was written; else every written slot.
  auto fire = [&](Event& e) {
    if (e.type != KFD_IOC_EVENT_SIGNAL || slots[e.slot] == kUnsignaled) return false;
    slots[e.slot] = kUnsignaled;
    set_event(e);
    return true;
  };
  if (auto it = events.find(context); it != events.end() && fire(it->second)) return;
  for (auto& [id, e] : events) fire(e);
}

void Simulator::Impl::fault(Queue& q, std::string why, bool page, std::uint64_t address, bool write) {
  std::lock_guard g(mutex);
  q.faulted = true;
  fault_log.push_back(fmt::format("{}: {}", q.name(), why));
  for (auto& [id, e] : events) {
    if (page && e.type == KFD_IOC_EVENT_MEMORY) {
      auto& m = e.data.memory_exception_data;
      m.failure.NotPresent = 1, m.failure.ReadOnly = 0, m.failure.NoExecute = 0, m.failure.imprecise = 0;
      m.va = address & ~(kPage - 1);
      m.gpu_id = config.gpu_id;
      m.ErrorType = KFD_MEM_ERR_NO_RAS;
      (void)write;
      set_event(e);
    } else if (!page && e.type == KFD_IOC_EVENT_HW_EXCEPTION) {
      auto& h = e.data.hw_exception_data;
      h.reset_type = KFD_HW_EXCEPTION_PER_ENGINE_RESET, h.reset_cause = KFD_HW_EXCEPTION_GPU_HANG;
      h.memory_lost = 0, h.gpu_id = config.gpu_id;
      set_event(e);
    }
  }
}

int Simulator::Impl::create_event(kfd_ioctl_create_event_args& a) {
  Event e;
  e.type = a.event_type;
  e.auto_reset = a.auto_reset;
  if (a.event_type == KFD_IOC_EVENT_SIGNAL) {
    if (a.event_page_offset && event_page) return -EINVAL;  // KFD: the event page is already set
    if (a.event_page_offset) {  // the process's first signal event names the page's buffer
      auto b = buffers.find(a.event_page_offset);
      if (b == buffers.end() || !(b->second.flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT)) return -EINVAL;
      if (b->second.size < KFD_SIGNAL_EVENT_LIMIT * 8) return -EINVAL;
      event_page = b->second.handle;
    }
    if (!event_page) return -EINVAL;  // a page KFD allocates itself (mapped through /dev/kfd) is not simulated
    std::uint32_t slot = 0;
    while (slot < KFD_SIGNAL_EVENT_LIMIT && events.count(slot)) ++slot;
    if (slot == KFD_SIGNAL_EVENT_LIMIT) return -ENOSPC;
    e.id = e.slot = slot;
    reinterpret_cast<volatile std::uint64_t*>(buffers[event_page].view)[slot] = kUnsignaled;
    a.event_slot_index = slot;
    a.event_trigger_data = slot;
  } else if (a.event_type == KFD_IOC_EVENT_MEMORY || a.event_type == KFD_IOC_EVENT_HW_EXCEPTION) {
    e.id = next_other_event++;
    a.event_trigger_data = 0;
  } else {
    return -EINVAL;  // other event types are not simulated
  }
  a.event_id = e.id;
  a.event_page_offset = 0;
  events[e.id] = e;
  return 0;
}

int Simulator::Impl::wait_events(kfd_ioctl_wait_events_args& a) {
  if (!a.num_events || a.num_events > KFD_SIGNAL_EVENT_LIMIT || !a.events_ptr) return -EINVAL;
  auto* data = reinterpret_cast<kfd_event_data*>(a.events_ptr);
  std::unique_lock g(mutex);
  std::vector<std::uint64_t> seen(a.num_events);
  for (std::uint32_t i = 0; i < a.num_events; ++i) {
    auto it = events.find(data[i].event_id);
    if (it == events.end()) return -EINVAL;
    seen[i] = it->second.generation;
  }
  auto ready = [&] {
    bool any = false;
    for (std::uint32_t i = 0; i < a.num_events; ++i) {
      auto& e = events.at(data[i].event_id);
      if (!e.signaled && e.generation == seen[i]) continue;
      any = true;
      data[i].memory_exception_data = e.data.memory_exception_data;  // the union's larger member
      if (e.auto_reset) e.signaled = false;
    }
    return any;
  };
  bool done = ready();
  if (!done && a.timeout) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.timeout);
    while (!done && events_moved.wait_until(g, until) != std::cv_status::timeout) {
      for (std::uint32_t i = 0; i < a.num_events; ++i)
        if (!events.count(data[i].event_id)) return -EINVAL;  // destroyed while waited on
      done = ready();
    }
    if (!done) done = ready();
  }
  a.wait_result = done ? KFD_IOC_WAIT_RESULT_COMPLETE : KFD_IOC_WAIT_RESULT_TIMEOUT;
  return 0;
}

// ---- Queues.

int Simulator::Impl::create_queue(kfd_ioctl_create_queue_args& a) {
  if (!vm_acquired || a.gpu_id != config.gpu_id) return -EINVAL;
  if (a.queue_type != KFD_IOC_QUEUE_TYPE_COMPUTE && a.queue_type != KFD_IOC_QUEUE_TYPE_SDMA)
    return -EINVAL;  // AQL and XGMI SDMA queues are not simulated
  if ((a.queue_percentage & 0xff) > KFD_MAX_QUEUE_PERCENTAGE || a.queue_priority > KFD_MAX_QUEUE_PRIORITY)
    return -EINVAL;
  // Bits 8..15: the XCC a PM4 compute queue runs on (kfd_chardev.c's pm4_target_xcc). The
  // queue's command processor is that XCC's, and it alone reads the ring; one past the
  // GPU's XCCs is refused here (what KFD then does is not known: the firmware reads it).
  const std::uint32_t target_xcc = (a.queue_percentage >> 8) & 0xff;
  if (a.queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE && target_xcc >= config.xccs) return -EINVAL;
  if (a.ring_size < KFD_MIN_QUEUE_RING_SIZE || (a.ring_size & (a.ring_size - 1))) return -EINVAL;
  auto mapped = [&](std::uint64_t address, std::uint64_t n) { return at(address, n, true) != nullptr; };
  if (!mapped(a.ring_base_address, a.ring_size)) return -EFAULT;
  if (!mapped(a.read_pointer_address, 8) || !mapped(a.write_pointer_address, 8)) return -EFAULT;
  if (a.read_pointer_address % 8 || a.write_pointer_address % 8) return -EINVAL;
  if (a.queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE) {
    // gfx10+ compute queues need an end-of-pipe buffer and a context save area of the
    // topology's sizes (CWSR).
    if (!a.eop_buffer_size || !mapped(a.eop_buffer_address, a.eop_buffer_size)) return -EINVAL;
    if (a.ctx_save_restore_size < kCwsrBytes || a.ctl_stack_size != kCtlStackBytes ||
        !mapped(a.ctx_save_restore_address, a.ctx_save_restore_size))
      return -EINVAL;
  }
  std::uint32_t id = next_queue++;
  std::uint32_t doorbell = id;  // its 64-bit doorbell's index in the page
  if (doorbell * 8 >= kDoorbellPage) return -ENOSPC;
  reinterpret_cast<volatile std::uint64_t*>(doorbells)[doorbell] = 0;
  *reinterpret_cast<volatile std::uint64_t*>(at(a.read_pointer_address, 8, true)) = 0;
  auto q = std::make_unique<Queue>(*this, id, a.queue_type, doorbell, a.ring_base_address, a.ring_size,
                                   a.read_pointer_address, a.write_pointer_address);
  q->xcc = a.queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE ? target_xcc : 0;
  if (a.queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE && config.xccs > 1)  // a PM4 queue's MQD: no split
    for (std::uint32_t r : {kCurrentLogicXccId, kTgChunkSize}) q->sh[r - 0x2C00] = 0, q->sh_written[r - 0x2C00] = true;
  a.queue_id = id;
  a.doorbell_offset = kMmapTypeDoorbell | std::uint64_t(config.gpu_id) << kGpuIdShift | std::uint64_t(doorbell) * 8;
  auto* raw = q.get();
  queues[id] = std::move(q);
  {
    std::lock_guard h(hold_mutex);
    ++engines;
  }
  raw->thread = std::thread([raw] { raw->run(); });
  return 0;
}

int Simulator::Impl::destroy_queue(std::uint32_t id) {
  std::unique_ptr<Queue> q;
  {
    std::lock_guard g(mutex);
    auto it = queues.find(id);
    if (it == queues.end()) return -EINVAL;
    q = std::move(it->second);
    queues.erase(it);
  }
  {
    std::lock_guard g(hold_mutex);
    q->stop = true;
    --engines;
  }
  released.notify_all();
  parks.notify_all();
  q->thread.join();
  {
    std::lock_guard g(scratch_mutex);
    std::erase_if(scratch_uses, [&](const auto& use) { return use.first.first == q->ring; });
  }
  return 0;
}

std::optional<Simulator::Impl::ScratchUse> Simulator::Impl::use_scratch(std::uint64_t ring, std::uint64_t ordinal,
                                                                        ScratchUse use) {
  std::lock_guard g(scratch_mutex);
  auto& uses = scratch_uses[{ring, ordinal}];
  for (const auto& other : uses)
    if (use.runs && other.runs && use.begin < other.end && other.begin < use.end) return other;
  uses.push_back(use);
  if (uses.size() == config.xccs) scratch_uses.erase({ring, ordinal});
  return std::nullopt;
}

// ---- The ioctls.

int Simulator::ioctl(int fd, unsigned long request, void* arg) {
  if (fd < kFirstFd) return os::system().ioctl(fd, request, arg);
  return impl_->ioctl(fd, request, arg);
}

int Simulator::Impl::ioctl(int fd, unsigned long request, void* arg) {
  std::unique_lock g(mutex);
  auto it = files.find(fd);
  if (it == files.end()) return -EBADF;
  auto* node = std::get_if<Node>(&it->second);
  if (!node || *node != Node::Kfd) return -ENOTTY;
  if (!arg) return -EFAULT;
  if (fail_request == request) {
    fail_request = 0;
    return fail_error;
  }
  switch (request) {
    case AMDKFD_IOC_GET_VERSION: {
      auto& a = *static_cast<kfd_ioctl_get_version_args*>(arg);
      a.major_version = KFD_IOCTL_MAJOR_VERSION, a.minor_version = config.kfd_minor;
      return 0;
    }
    case kExportDmabuf: {
      // KFD before 1.12 has no such ioctl; an unknown handle is EINVAL; amdgpu's prime export
      // refuses a userptr buffer (EPERM). The dma-buf is a new descriptor of the buffer's
      // pages (its memfd), close-on-exec as asked; no flag but O_CLOEXEC is taken (stricter
      // than KFD, which passes the flags on to the new descriptor).
      if (config.kfd_minor < kExportMinor) return -ENOTTY;
      auto& a = *static_cast<ExportDmabufArgs*>(arg);
      auto b = buffers.find(a.handle);
      if (b == buffers.end()) return -EINVAL;
      if (a.flags & ~std::uint32_t(O_CLOEXEC)) return -EINVAL;
      if (b->second.userptr) return -EPERM;
      const int fd = dmabuf_of_memfd(b->second.memfd, a.flags & O_CLOEXEC);
      if (fd < 0) return fd;
      a.dmabuf_fd = std::uint32_t(fd);
      ++dmabuf_exports;
      return 0;
    }
    case AMDKFD_IOC_ACQUIRE_VM: {
      auto& a = *static_cast<kfd_ioctl_acquire_vm_args*>(arg);
      auto r = files.find(int(a.drm_fd));
      if (r == files.end() || !std::holds_alternative<Node>(r->second) || std::get<Node>(r->second) != Node::Render)
        return -EINVAL;
      if (a.gpu_id != config.gpu_id || !config.gpu_present) return -EINVAL;
      // KFD: acquiring again with the same render file does nothing; another file is refused.
      if (vm_acquired) return int(a.drm_fd) == vm_render ? 0 : -EBUSY;
      vm_acquired = true, vm_render = int(a.drm_fd);
      return 0;
    }
    case AMDKFD_IOC_GET_PROCESS_APERTURES_NEW: {
      auto& a = *static_cast<kfd_ioctl_get_process_apertures_new_args*>(arg);
      std::uint32_t gpus = config.gpu_present ? 1 : 0;
      if (a.num_of_nodes == 0) return a.num_of_nodes = gpus, 0;
      if (!a.kfd_process_device_apertures_ptr) return -EFAULT;
      auto* out = reinterpret_cast<kfd_process_device_apertures*>(a.kfd_process_device_apertures_ptr);
      if (gpus && a.num_of_nodes >= 1) {
        out[0] = {};
        out[0].gpu_id = config.gpu_id;
        out[0].gpuvm_base = kGpuvmBase, out[0].gpuvm_limit = kGpuvmLimit;
        out[0].lds_base = 1ull << 61, out[0].lds_limit = (1ull << 61) + 0xffffffff;
        out[0].scratch_base = 2ull << 61, out[0].scratch_limit = (2ull << 61) + 0xffffffff;
      }
      a.num_of_nodes = std::min(a.num_of_nodes, gpus);
      return 0;
    }
    case AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: return alloc(*static_cast<kfd_ioctl_alloc_memory_of_gpu_args*>(arg));
    case AMDKFD_IOC_MAP_MEMORY_TO_GPU: {
      auto& a = *static_cast<kfd_ioctl_map_memory_to_gpu_args*>(arg);
      return map(a.handle, a.device_ids_array_ptr, a.n_devices, a.n_success, true);
    }
    case AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: {
      auto& a = *static_cast<kfd_ioctl_unmap_memory_from_gpu_args*>(arg);
      return map(a.handle, a.device_ids_array_ptr, a.n_devices, a.n_success, false);
    }
    case AMDKFD_IOC_FREE_MEMORY_OF_GPU: return free(static_cast<kfd_ioctl_free_memory_of_gpu_args*>(arg)->handle);
    case AMDKFD_IOC_CREATE_QUEUE: return create_queue(*static_cast<kfd_ioctl_create_queue_args*>(arg));
    case AMDKFD_IOC_DESTROY_QUEUE: {
      auto id = static_cast<kfd_ioctl_destroy_queue_args*>(arg)->queue_id;
      g.unlock();
      return destroy_queue(id);
    }
    case AMDKFD_IOC_CREATE_EVENT: return create_event(*static_cast<kfd_ioctl_create_event_args*>(arg));
    case AMDKFD_IOC_DESTROY_EVENT: {
      auto id = static_cast<kfd_ioctl_destroy_event_args*>(arg)->event_id;
      if (!events.erase(id)) return -EINVAL;
      events_moved.notify_all();
      return 0;
    }
    case AMDKFD_IOC_WAIT_EVENTS: {
      g.unlock();
      return wait_events(*static_cast<kfd_ioctl_wait_events_args*>(arg));
    }
    case AMDKFD_IOC_GET_CLOCK_COUNTERS: {
      auto& a = *static_cast<kfd_ioctl_get_clock_counters_args*>(arg);
      if (a.gpu_id != config.gpu_id) return -EINVAL;
      timespec raw{}, boot{};
      clock_gettime(CLOCK_MONOTONIC_RAW, &raw);
      clock_gettime(CLOCK_BOOTTIME, &boot);
      a.gpu_clock_counter = clock();
      a.cpu_clock_counter = std::uint64_t(raw.tv_sec) * 1'000'000'000u + std::uint64_t(raw.tv_nsec);
      a.system_clock_counter = std::uint64_t(boot.tv_sec) * 1'000'000'000u + std::uint64_t(boot.tv_nsec);
      a.system_clock_freq = 1'000'000'000;
      return 0;
    }
  }
  return -ENOTTY;  // an ioctl the simulator does not implement
}

// ---- For tests.

std::vector<std::string> Simulator::faults() const {
  std::lock_guard g(impl_->mutex);
  return impl_->fault_log;
}
std::uint64_t Simulator::clock() const { return impl_->clock(); }
std::size_t Simulator::live_buffers() const {
  std::lock_guard g(impl_->mutex);
  return impl_->buffers.size();
}
std::size_t Simulator::dmabuf_exports() const {
  std::lock_guard g(impl_->mutex);
  return impl_->dmabuf_exports;
}
std::size_t Simulator::live_doorbell_maps() const {
  std::lock_guard g(impl_->mutex);
  return impl_->doorbell_maps;
}
std::size_t Simulator::live_queues() const {
  std::lock_guard g(impl_->mutex);
  return impl_->queues.size();
}
std::uint64_t Simulator::stores_to(std::uint64_t address) const {
  std::lock_guard g(impl_->stores_mutex);
  auto it = impl_->stores.find(address);
  return it == impl_->stores.end() ? 0 : it->second;
}

std::vector<std::uint32_t> Simulator::compute_queue_xccs() const {
  std::lock_guard g(impl_->mutex);
  std::vector<std::uint32_t> out;
  for (const auto& [id, q] : impl_->queues)
    if (q->type == KFD_IOC_QUEUE_TYPE_COMPUTE) out.push_back(q->xcc);
  return out;
}
std::size_t Simulator::live_events() const {
  std::lock_guard g(impl_->mutex);
  return impl_->events.size();
}
std::size_t Simulator::open_files() const {
  std::lock_guard g(impl_->mutex);
  return impl_->files.size();
}
std::uint64_t Simulator::dispatches() const { return impl_->dispatches; }
std::uint64_t Simulator::instructions() const { return impl_->instructions; }
std::uint64_t Simulator::pm4_packets() const { return impl_->pm4; }
std::uint64_t Simulator::sdma_packets() const { return impl_->sdma; }
void Simulator::hold(bool held) {
  auto& s = *impl_;
  std::unique_lock g(s.hold_mutex);
  s.held = held;
  s.released.notify_all();
  // An engine parks between packets: one amid a long dispatch is not waited for past 1 s.
  if (held) s.parks.wait_for(g, std::chrono::seconds(1), [&] { return s.parked >= s.engines; });
}

void Simulator::Impl::park(const Queue& q) {
  std::unique_lock g(hold_mutex);
  if (!held || q.stop) return;
  ++parked;
  parks.notify_all();
  released.wait(g, [&] { return !held || q.stop; });
  --parked;
}
void Simulator::fail_next_ioctl(unsigned long request, int negative_errno) {
  std::lock_guard g(impl_->mutex);
  impl_->fail_request = request, impl_->fail_error = negative_errno;
}

// ---- The engines.

namespace {

// Waits a little longer each time nothing happened: spins, then sleeps up to 1 ms, or until
// the engines are held.
struct Backoff {
  Simulator::Impl& sim;
  unsigned idle = 0;
  void pause() {
    if (++idle < 64) return std::this_thread::yield();
    auto us = std::min(1000u, 10u << std::min(idle - 64, 7u));
    std::unique_lock g(sim.hold_mutex);
    sim.released.wait_for(g, std::chrono::microseconds(us), [&] { return sim.held.load(); });
  }
  void reset() { idle = 0; }
};

}  // namespace

void Queue::run() {
  auto* bell = reinterpret_cast<volatile std::uint64_t*>(sim.doorbells) + doorbell;
  Backoff backoff{sim};
  while (!stop) {
    if (sim.held) {  // a held engine reads nothing, its doorbell included
      sim.park(*this);
      continue;
    }
    if (faulted) {
      backoff.pause();
      continue;
    }
    std::uint64_t wptr = __atomic_load_n(bell, __ATOMIC_ACQUIRE);
    if (wptr == rptr) {
      backoff.pause();
      continue;
    }
    backoff.reset();
    // The write pointer in memory must agree with the doorbell (the CP reads both).
    auto* memory = sim.at(wptr_address, 8, false);
    std::uint64_t in_memory = memory ? __atomic_load_n(reinterpret_cast<volatile std::uint64_t*>(memory), __ATOMIC_ACQUIRE) : 0;
    const char* unit = type == KFD_IOC_QUEUE_TYPE_SDMA ? "bytes" : "dwords";
    std::uint64_t ring_units = type == KFD_IOC_QUEUE_TYPE_SDMA ? ring_bytes : ring_bytes / 4;
    if (!memory) {
      page_fault(wptr_address, false, "the write pointer's read");
    } else if (in_memory < wptr) {
      sim.fault(*this, fmt::format("the doorbell says {} {} but the write pointer in memory {}", wptr, unit, in_memory),
                false, 0, false);
    } else if (wptr < rptr || wptr - rptr > ring_units) {
      sim.fault(*this, fmt::format("the write pointer {} moved back or past the ring ({} {} consumed, ring of {})",
                                   wptr, rptr, unit, ring_units), false, 0, false);
    } else if (type == KFD_IOC_QUEUE_TYPE_SDMA && wptr % 4) {
      sim.fault(*this, fmt::format("the write pointer {} is not a whole number of dwords", wptr), false, 0, false);
    } else {
      while (rptr < wptr && !stop && !faulted && !sim.held) {
        bool ok = type == KFD_IOC_QUEUE_TYPE_SDMA ? step_sdma(wptr) : step_pm4(wptr);
        if (!ok) break;
        if (auto* r = sim.at(rptr_address, 8, true))
          __atomic_store_n(reinterpret_cast<volatile std::uint64_t*>(r), rptr, __ATOMIC_RELEASE);
      }
    }
  }
}

bool Queue::read(std::uint64_t address, void* data, std::size_t n, const char* what) {
  auto* p = sim.at(address, n, false);
  if (!p) return page_fault(address, false, what), false;
  std::memcpy(data, p, n);
  return true;
}

bool Queue::write(std::uint64_t address, const void* data, std::size_t n, const char* what) {
  auto* p = sim.at(address, n, true);
  if (!p) return page_fault(address, true, what), false;
  if (n == 8) __atomic_store_n(reinterpret_cast<std::uint64_t*>(p), *static_cast<const std::uint64_t*>(data), __ATOMIC_RELEASE);
  else if (n == 4) __atomic_store_n(reinterpret_cast<std::uint32_t*>(p), *static_cast<const std::uint32_t*>(data), __ATOMIC_RELEASE);
  else std::memcpy(p, data, n);
  return true;
}

bool Queue::wait_until(std::uint64_t address, bool wide, std::uint32_t function, std::uint64_t reference,
                       std::uint64_t mask, const char* what) {
  Backoff backoff{sim};
  for (;;) {
    if (sim.held) sim.park(*this);  // reading nothing meanwhile
    auto* p = sim.at(address, wide ? 8 : 4, false);
    if (!p) return page_fault(address, false, what), false;
    std::uint64_t value = wide ? __atomic_load_n(reinterpret_cast<const std::uint64_t*>(p), __ATOMIC_ACQUIRE)
                               : __atomic_load_n(reinterpret_cast<const std::uint32_t*>(p), __ATOMIC_ACQUIRE);
    if (compare(function, value & mask, reference)) return true;
    if (stop) return false;
    backoff.pause();
  }
}

bool Queue::step_pm4(std::uint64_t wptr) {
  const std::uint64_t dwords = ring_bytes / 4;
  std::uint32_t header;
  if (!read(ring + (rptr % dwords) * 4, &header, 4, "the ring's read")) return false;
  std::uint32_t n = pm4_length(header);
  if (rptr + n > wptr) {
    sim.fault(*this, fmt::format("PM4 header {:#010x} at dword {} needs {} dwords; the write pointer is at {}", header,
                                 rptr, n, wptr), false, 0, false);
    return false;
  }
  std::vector<std::uint32_t> words(n);
  for (std::uint32_t i = 0; i < n; ++i)
    if (!read(ring + ((rptr + i) % dwords) * 4, &words[i], 4, "the ring's read")) return false;
  auto decoded = decode_pm4(words, sim.dialect);
  if (auto* bad = std::get_if<Malformed>(&decoded)) {
    sim.fault(*this, fmt::format("{} (at ring dword {})", bad->why, rptr), false, 0, false);
    return false;
  }
  auto& d = std::get<Decoded<Pm4Packet>>(decoded);
  ++sim.pm4;
  if (!pm4_packet(d.packet, d.name, 0)) return false;
  rptr += n;
  return true;
}

bool Queue::pm4_packet(const Pm4Packet& packet, const std::string& name, int depth) {
  if (auto* s = std::get_if<SetShReg>(&packet)) {
    for (std::size_t i = 0; i < s->values.size(); ++i) {
      sh[s->first - 0x2C00 + i] = s->values[i];
      sh_written[s->first - 0x2C00 + i] = true;
    }
    return true;
  }
  if (auto* d = std::get_if<DispatchDirect>(&packet)) return dispatch(*d);
  if (auto* r = std::get_if<ReleaseMem>(&packet)) {
    // Every earlier packet of this queue has completed (dispatches run to their end): its end
    // of pipe is now. Only this XCC's: the XCCs reading one ring each reach their own.
    if (r->data_sel) {
      std::lock_guard g(sim.stores_mutex);
      ++sim.stores[r->address];
    }
    if (r->data_sel == 1) {
      std::uint32_t v = std::uint32_t(r->data);
      if (!write(r->address, &v, 4, "RELEASE_MEM")) return false;
    } else if (r->data_sel == 2) {
      if (!write(r->address, &r->data, 8, "RELEASE_MEM")) return false;
    } else if (r->data_sel == 3) {
      std::uint64_t now = sim.clock();
      if (!write(r->address, &now, 8, "RELEASE_MEM")) return false;
    }
    if (r->int_sel) sim.interrupt(r->context);
    return true;
  }
  if (auto* a = std::get_if<AtomicMem>(&packet)) {  // a 64-bit add, atomic against every engine
    auto* p = sim.at(a->address, 8, true);
    if (!p) return page_fault(a->address, true, "ATOMIC_MEM"), false;
    __atomic_fetch_add(reinterpret_cast<std::uint64_t*>(p), a->source, __ATOMIC_ACQ_REL);
    return true;
  }
  if (std::holds_alternative<PredExec>(packet)) {  // in an indirect buffer, its loop reads it
    sim.fault(*this, "PM4 PRED_EXEC in the ring: the command processor predicates packets in indirect buffers only",
              false, 0, false);
    return false;
  }
  if (auto* w = std::get_if<WaitMem>(&packet))
    return wait_until(w->address, w->wide, w->function, w->reference, w->mask, name.c_str());
  if (auto* w = std::get_if<WriteData>(&packet))
    return write(w->address, w->data.data(), w->data.size() * 4, "WRITE_DATA");
  if (auto* c = std::get_if<CopyData>(&packet)) {
    std::uint64_t value = 0;
    std::size_t n = c->wide ? 8 : 4;
    if (c->src_sel == 9) value = sim.clock();
    else if (c->src_sel == 5) value = c->source;
    else if (!read(c->source, &value, n, "COPY_DATA")) return false;
    return write(c->address, &value, n, "COPY_DATA");
  }
  if (auto* ib = std::get_if<IndirectBuffer>(&packet)) {
    // The command processor runs two levels of indirect buffers: the GC has CP_IB1_* and
    // CP_IB2_* registers (amdgpu's gfx files list both among the registers they dump,
    // gc_reg_list_*); a third level is refused.
    if (depth >= 2) {
      sim.fault(*this, "PM4 INDIRECT_BUFFER inside a second-level indirect buffer: the command processor has two levels",
                false, 0, false);
      return false;
    }
    std::vector<std::uint32_t> words(ib->dwords);
    if (!read(ib->address, words.data(), words.size() * 4, "INDIRECT_BUFFER")) return false;
    std::span<const std::uint32_t> rest = words;
    while (!rest.empty()) {
      auto decoded = decode_pm4(rest, sim.dialect);
      if (std::holds_alternative<Incomplete>(decoded)) {
        sim.fault(*this, fmt::format("PM4 indirect buffer at {:#x}: its last packet runs past its {} dwords", ib->address,
                                     ib->dwords), false, 0, false);
        return false;
      }
      if (auto* bad = std::get_if<Malformed>(&decoded)) {
        sim.fault(*this, fmt::format("{} (in the indirect buffer at {:#x})", bad->why, ib->address), false, 0, false);
        return false;
      }
      auto& d = std::get<Decoded<Pm4Packet>>(decoded);
      ++sim.pm4;
      rest = rest.subspan(d.dwords);
      if (auto* p = std::get_if<PredExec>(&d.packet)) {
        // The next p->dwords run where the mask selects this queue's XCC (its place in the
        // partition) and are skipped elsewhere.
        if (p->dwords > rest.size()) {
          sim.fault(*this, fmt::format("PM4 PRED_EXEC over {} dwords in the indirect buffer at {:#x}, which has {} left",
                                       p->dwords, ib->address, rest.size()), false, 0, false);
          return false;
        }
        if (!(p->xcc_mask >> xcc & 1)) rest = rest.subspan(p->dwords);
        continue;
      }
      if (!pm4_packet(d.packet, d.name, depth + 1)) return false;
    }
    return true;
  }
  return true;  // NOP, ACQUIRE_MEM, EVENT_WRITE: the simulator's work is already complete and visible
}

bool Queue::dispatch(const DispatchDirect& d) {
  auto reg = [&](std::uint32_t r) { return sh[r - 0x2C00]; };
  auto need = [&](std::uint32_t r, const char* what) {
    if (sh_written[r - 0x2C00]) return true;
    sim.fault(*this, fmt::format("PM4 DISPATCH_DIRECT before {} was set", what), false, 0, false);
    return false;
  };
  // Registers (dword addresses) the dispatch reads.
  constexpr std::uint32_t PGM_LO = 0xB830 / 4, PGM_HI = 0xB834 / 4, RSRC1 = 0xB848 / 4, RSRC2 = 0xB84C / 4,
                          RSRC3 = 0xB8A0 / 4, NUM_THREAD_X = 0xB81C / 4, START_X = 0xB810 / 4, USER_DATA_0 = 0xB900 / 4;
  if (!need(PGM_LO, "COMPUTE_PGM_LO") || !need(PGM_HI, "COMPUTE_PGM_HI") || !need(RSRC1, "COMPUTE_PGM_RSRC1") ||
      !need(RSRC2, "COMPUTE_PGM_RSRC2") || !need(RSRC3, "COMPUTE_PGM_RSRC3"))
    return false;
  for (int k = 0; k < 3; ++k)
    if (!need(NUM_THREAD_X + k, "COMPUTE_NUM_THREAD_X/Y/Z") || !need(START_X + k, "COMPUTE_START_X/Y/Z"))
      return false;
  constexpr std::uint32_t TMPRING_SIZE = 0xB860 / 4;
  const std::uint64_t code = (std::uint64_t(reg(PGM_HI)) << 32 | reg(PGM_LO)) << 8;
  const std::uint32_t rsrc2 = reg(RSRC2);
  std::array<std::uint32_t, 16> user_data{};
  std::uint32_t user = (rsrc2 >> 1) & 0x1f;
  for (std::uint32_t i = 0; i < user; ++i) {
    if (!need(USER_DATA_0 + i, "the COMPUTE_USER_DATA registers its USER_SGPR count reads")) return false;
    user_data[i] = reg(USER_DATA_0 + i);
  }
  std::uint32_t threads[3];
  for (int k = 0; k < 3; ++k) {
    if (reg(START_X + k)) {
      sim.fault(*this, "PM4 DISPATCH_DIRECT with COMPUTE_START_X/Y/Z not 0 is not simulated", false, 0, false);
      return false;
    }
    std::uint32_t t = reg(NUM_THREAD_X + k);
    if (t >> 16 || !t) {  // partial groups (NUM_THREAD_PARTIAL) are not simulated
      sim.fault(*this, fmt::format("PM4 DISPATCH_DIRECT with COMPUTE_NUM_THREAD {:#x}", t), false, 0, false);
      return false;
    }
    threads[k] = t;
  }
  auto finish = [&](bool ok, bool page_fault, std::uint64_t address, bool write, const std::string& fault,
                    std::uint64_t instructions) {
    sim.instructions += instructions;
    if (ok) return true;
    if (stop) return false;
    sim.fault(*this, fault, page_fault, page_fault ? address : 0, page_fault && write);
    return false;
  };
  if (sim.dialect == Pm4Dialect::Gfx9) {
    // gfx90a and gfx942 run wave64 only (the decoder's gfx9 dialect refuses CS_W32_EN).
    // Private memory per work-item is COMPUTE_TMPRING_SIZE.WAVESIZE (1 KiB units on gfx9,
    // bits 12..24) over the wave's 64 lanes.
    if (!need(TMPRING_SIZE, "COMPUTE_TMPRING_SIZE")) return false;
    gfx9::Dispatch g;
    g.target = sim.arch == "gfx90a" ? gfx9::Target::gfx90a : gfx9::Target::gfx942;
    g.code = code, g.rsrc1 = reg(RSRC1), g.rsrc2 = rsrc2, g.rsrc3 = reg(RSRC3), g.user_data = user_data;
    for (int k = 0; k < 3; ++k) g.threads[k] = threads[k];
    g.groups[0] = d.x, g.groups[1] = d.y, g.groups[2] = d.z;
    g.wave64 = true;
    g.private_bytes = std::uint32_t(((reg(TMPRING_SIZE) >> 12) & 0x1fff) * 1024 / 64);
    // Several XCCs: the queue's XCC runs its share of the grid, chunks of COMPUTE_TG_CHUNK_SIZE
    // groups dealt out in turn by COMPUTE_CURRENT_LOGIC_XCC_ID; with a chunk size of 0 (what
    // KFD's MQD gives a PM4 queue) it runs the whole grid.
    if (sim.config.xccs > 1) {
      const std::uint32_t chunk = reg(kTgChunkSize) & 0xffff, logical = reg(kCurrentLogicXccId);
      if (chunk && logical >= sim.config.xccs) {
        sim.fault(*this, fmt::format("PM4 DISPATCH_DIRECT with COMPUTE_CURRENT_LOGIC_XCC_ID {} on a GPU of {} XCCs",
                                     logical, sim.config.xccs), false, 0, false);
        return false;
      }
      g.chunk = chunk, g.share = logical, g.shares = sim.config.xccs;
    }
    const std::uint64_t ordinal = dispatched++;
    // On gfx942 the waves' private memory lies at the scratch base this XCC's packets set
    // (COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI, in 256-byte units), WAVES (bits 0..11) slots of
    // WAVESIZE each: all of it mapped, and on several XCCs none of it another XCC's for the
    // same dispatch.
    if (g.private_bytes && g.target == gfx9::Target::gfx942) {
      constexpr std::uint32_t SCRATCH_BASE_LO = 0xB840 / 4, SCRATCH_BASE_HI = 0xB844 / 4;
      if (!need(SCRATCH_BASE_LO, "COMPUTE_DISPATCH_SCRATCH_BASE_LO") ||
          !need(SCRATCH_BASE_HI, "COMPUTE_DISPATCH_SCRATCH_BASE_HI"))
        return false;
      g.scratch_base = (std::uint64_t(reg(SCRATCH_BASE_HI)) << 32 | reg(SCRATCH_BASE_LO)) << 8;
      g.scratch_waves = reg(TMPRING_SIZE) & 0xfff;
      const std::uint64_t bytes = std::uint64_t(g.scratch_waves) * 64 * g.private_bytes;
      if (!g.scratch_base || !bytes || !sim.at(g.scratch_base, bytes, true)) {
        sim.fault(*this, fmt::format("PM4 DISPATCH_DIRECT on XCC {}: its scratch of {} waves of {} bytes at {:#x} is "
                                     "not all mapped", xcc, g.scratch_waves, 64 * g.private_bytes, g.scratch_base),
                  true, g.scratch_base, true);
        return false;
      }
      const bool runs = !g.chunk || std::uint64_t(g.share) * g.chunk < std::uint64_t(d.x) * d.y * d.z;
      if (sim.config.xccs > 1)
        if (auto other = sim.use_scratch(ring, ordinal, {xcc, g.scratch_base, g.scratch_base + bytes, runs})) {
          sim.fault(*this, fmt::format("PM4 DISPATCH_DIRECT on XCC {}: its scratch [{:#x}, {:#x}) overlaps XCC {}'s "
                                       "[{:#x}, {:#x}) in the same dispatch, whose waves run at once (each XCC needs its own)",
                                       xcc, g.scratch_base, g.scratch_base + bytes, other->xcc, other->begin,
                                       other->end), false, 0, false);
          return false;
        }
    }
    ++sim.dispatches;
    auto o = gfx9::run(g, sim.gfx9_memory, stop);
    return finish(o.ok, o.page_fault, o.fault_address, o.write, o.fault, o.instructions);
  }
  gfx11::Dispatch g;
  g.code = code, g.rsrc1 = reg(RSRC1), g.rsrc2 = rsrc2, g.rsrc3 = reg(RSRC3), g.user_data = user_data;
  for (int k = 0; k < 3; ++k) g.threads[k] = threads[k];
  g.groups[0] = d.x, g.groups[1] = d.y, g.groups[2] = d.z;
  g.wave32 = d.wave32;
  if (!g.wave32) {
    sim.fault(*this, fmt::format("PM4 DISPATCH_DIRECT without CS_W32_EN on {}: the simulator runs its code in wave32 only",
                                 sim.arch), false, 0, false);
    return false;
  }
  if (!sim.arch.starts_with("gfx11")) {
    sim.fault(*this, fmt::format("PM4 DISPATCH_DIRECT on {}: the simulator interprets gfx11 and gfx9 code only", sim.arch),
              false, 0, false);
    return false;
  }
  ++sim.dispatches;
  auto o = gfx11::run(g, sim, stop);
  return finish(o.ok, o.page_fault, o.fault_address, o.write, o.fault, o.instructions);
}

bool Queue::step_sdma(std::uint64_t wptr) {
  const std::uint64_t dwords = ring_bytes / 4, at = rptr / 4, end = wptr / 4;
  // SDMA packets never straddle the ring's end: read up to it and no further.
  std::uint64_t until_end = dwords - at % dwords;
  std::uint64_t available = std::min(end - at, until_end);
  std::vector<std::uint32_t> words(std::min<std::uint64_t>(available, 1u << 16));
  if (!read(ring + (at % dwords) * 4, words.data(), words.size() * 4, "the ring's read")) return false;
  auto decoded = decode_sdma(words, sim.dialect == Pm4Dialect::Gfx9 ? SdmaVersion::Sdma4 : SdmaVersion::Sdma6);
  if (auto* inc = std::get_if<Incomplete>(&decoded)) {
    std::string why = available == until_end && end - at > until_end
                          ? fmt::format("an SDMA packet at dword {} straddles the ring's end", at)
                          : fmt::format("an SDMA packet at dword {} runs past the write pointer ({} dwords needed)", at,
                                        inc->needed);
    sim.fault(*this, why, false, 0, false);
    return false;
  }
  if (auto* bad = std::get_if<Malformed>(&decoded)) {
    sim.fault(*this, fmt::format("{} (at ring dword {})", bad->why, at), false, 0, false);
    return false;
  }
  auto& d = std::get<Decoded<SdmaPacket>>(decoded);
  ++sim.sdma;
  if (!sdma_packet(d.packet, d.name)) return false;
  rptr += std::uint64_t(d.dwords) * 4;
  return true;
}

bool Queue::sdma_packet(const SdmaPacket& packet, const std::string& name) {
  if (auto* c = std::get_if<SdmaCopy>(&packet)) {
    auto* src = sim.at(c->src, c->bytes, false);
    if (!src) return page_fault(c->src, false, "SDMA COPY_LINEAR"), false;
    auto* dst = sim.at(c->dst, c->bytes, true);
    if (!dst) return page_fault(c->dst, true, "SDMA COPY_LINEAR"), false;
    std::memmove(dst, src, c->bytes);
    return true;
  }
  if (auto* f = std::get_if<SdmaFill>(&packet)) {
    auto* dst = sim.at(f->dst, f->bytes, true);
    if (!dst) return page_fault(f->dst, true, "SDMA CONSTANT_FILL"), false;
    if (f->dwords)
      for (std::uint64_t i = 0; i < f->bytes; i += 4) std::memcpy(dst + i, &f->data, 4);
    else
      std::memset(dst, int(f->data & 0xff), f->bytes);
    return true;
  }
  if (auto* w = std::get_if<SdmaWrite>(&packet)) return write(w->address, w->data.data(), w->data.size() * 4, "SDMA WRITE");
  if (auto* f = std::get_if<SdmaFence>(&packet)) return write(f->address, &f->value, 4, "SDMA FENCE");
  if (auto* t = std::get_if<SdmaTrap>(&packet)) return sim.interrupt(t->context), true;
  if (auto* p = std::get_if<SdmaPoll>(&packet))
    return wait_until(p->address, false, p->function, p->reference, p->mask, name.c_str());
  if (auto* t = std::get_if<SdmaTimestamp>(&packet)) {
    std::uint64_t now = sim.clock();
    return write(t->address, &now, 8, "SDMA TIMESTAMP");
  }
  return true;  // NOP
}

}  // namespace rig::sim::amd
