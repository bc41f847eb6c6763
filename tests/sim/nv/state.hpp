// state.hpp — the simulated NVIDIA GPU's state, shared by its files: sim.cpp (files, the
// seam, escapes' framing, the doorbell watcher), rm.cpp (RM's objects, allocations, frees,
// controls, memory and CPU mappings, OS events) and uvm.cpp (UVM's VA spaces, ranges and
// mappings). Not a public header.
#pragma once

#include "abi.hpp"
#include "code.hpp"
#include "engine.hpp"
#include "gpu.hpp"
#include "sim.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace rig::sim::nv {

inline constexpr std::uint64_t kPage = 4096;
inline constexpr int kFirstFd = 1 << 21;  // the simulator's descriptors: far above any real one
inline constexpr std::uint64_t kUsermodeBytes = 0x10000;   // facts: usermode page, map 0x10000
inline constexpr std::uint64_t kDoorbellOffset = 0x90;     // NOTIFY_CHANNEL_PENDING
inline constexpr std::uint64_t kUserdBytes = 0x200;        // one channel's USERD
inline constexpr std::uint64_t kUserdGpGet = 0x88;         // facts: USERD GPGet
inline constexpr std::uint64_t kUserdGpPut = 0x8C;         // facts: USERD GPPut
inline constexpr std::uint32_t kFirstToken = 0x100;        // work-submit tokens: never 0
// kfifoGetMaxChannelGroupSize on Volta and later (OGKM kernel_fifo_gv100.c): more channels in
// one group RM refuses with NV_ERR_INSUFFICIENT_RESOURCES (kernel_channel_group.c).
inline constexpr std::uint32_t kMaxChannelsPerGroup = 128;
inline constexpr std::uint32_t NV_ERR_GENERIC = 0xFFFF;    // nvstatuscodes.h

// The kernel's copy_from_user/copy_to_user in process: false when any of the caller's bytes
// at `address` cannot be read (written), instead of a crash.
bool copy_from_user(std::uint64_t address, void* to, std::size_t n);
bool copy_to_user(std::uint64_t address, const void* from, std::size_t n);
// Whether [address, +n) can be read and written.
bool user_accessible(const void* address, std::size_t n);

// Host bytes the simulator owns (a memfd and its own mapping) or the caller's pages (an OS
// descriptor). Shared: RM's memory object, UVM's mappings and mapping contexts hold it; the
// video memory it accounts for returns when the last holder goes.
struct Backing {
  int memfd = -1;               // -1 for the caller's pages
  std::byte* view = nullptr;
  std::uint64_t size = 0;
  std::atomic<std::uint64_t>* vram_used = nullptr;  // video memory: the account to return it to
  Backing() = default;
  Backing(const Backing&) = delete;
  Backing& operator=(const Backing&) = delete;
  ~Backing();
};
// A memfd of `size` bytes mapped for the simulator, or null when the system refuses.
std::shared_ptr<Backing> make_backing(std::uint64_t size, const char* name);

// One GPU virtual address space: what UVM mapped into a FERMI_VASPACE_A.
struct VaSpace final : Space {
  struct Map {
    std::uint64_t size;
    std::shared_ptr<Backing> backing;
    std::uint64_t offset;  // into the backing
    bool writable;
  };
  std::uint64_t base = 0, limit = 0;  // [base, limit) the VA space spans
  std::shared_mutex mutex;
  std::map<std::uint64_t, Map> maps;  // by GPU address
  std::optional<ptx::Mapping> map(std::uint64_t address, std::uint64_t size, bool write) override;
  // Maps [va, va + size) to `backing` at `offset`, replacing what lay there; the bytes of
  // what it replaced are added to `gone`.
  void insert(std::uint64_t va, Map m, std::vector<std::shared_ptr<Backing>>& gone);
  // Unmaps [va, va + size), splitting maps that straddle its ends; the bytes of what went are
  // added to `gone`.
  void erase(std::uint64_t va, std::uint64_t size, std::vector<std::shared_ptr<Backing>>& gone);
};

// A scheduled channel's engine and what its Channel_setup points into, which outlive it
// (the engine is declared last: it goes first).
struct EngineBox {
  std::shared_ptr<VaSpace> space;
  std::shared_ptr<Backing> userd, notifier;
  std::unique_ptr<Engine> engine;
};

// Bytes unmapped from a VA space that an engine may still be using in the method it was in:
// kept until each such engine has finished a method since (or is gone, or stopped).
struct Retired {
  std::vector<std::shared_ptr<Backing>> bytes;
  std::vector<std::pair<std::weak_ptr<EngineBox>, std::uint64_t>> engines;  // engine, its methods() then
};

struct Channel {
  std::uint32_t client = 0, handle = 0, tsg = 0;
  std::uint32_t channel_class = 0;
  Engine_kind kind = Engine_kind::compute;
  std::shared_ptr<VaSpace> space;
  std::shared_ptr<Backing> userd;
  std::uint64_t userd_offset = 0;
  std::shared_ptr<Backing> error_notifier;
  std::uint64_t gpfifo_va = 0;
  std::uint32_t gpfifo_entries = 0;
  std::uint32_t token = 0;
  bool scheduled = false;
  bool uvm_registered = false;
  std::uint32_t last_gpput = 0;
  std::set<std::uint32_t> classes;  // engine objects allocated under it
  std::shared_ptr<EngineBox> box;   // once scheduled
  std::uint32_t gpput() const;     // USERD's GPPut now
  bool idle() const;                // GPGet has reached GPPut: no entry is in the engine
};

struct Object {
  std::uint32_t handle = 0, parent = 0, klass = 0;
  std::vector<std::uint32_t> children;
  std::shared_ptr<Backing> memory;      // memory classes and the usermode page
  std::shared_ptr<VaSpace> va;          // FERMI_VASPACE_A
  std::uint32_t va_flags = 0;
  std::shared_ptr<Channel> channel;     // GPFIFO channels
  std::uint32_t engine_type = 0;        // channel groups
  std::uint32_t ctx_vaspace = 0;        // context shares: their VA space's handle
  int event_fd = -1;                    // OS events: the file they make readable
  std::uint32_t notify_index = 0;       // OS events: index and NV01_EVENT_* flags
  std::map<std::uint32_t, std::uint32_t> notification;  // subdevices: index -> action
};

struct Client {
  std::uint32_t handle = 0;
  int ctl_fd = -1;  // the control file it was allocated on: closing it frees the client
  std::map<std::uint32_t, Object> objects;  // the client's own object included
};

enum class Node : std::uint8_t { ctl, dev, uvm };

struct File {
  Node node = Node::ctl;
  // /dev/nvidia<minor>
  int registered_ctl = -1;  // REGISTER_FD
  bool context_used = false, context_live = false;
  std::uint32_t ctx_client = 0, ctx_memory = 0;
  std::uint64_t ctx_offset = 0, ctx_length = 0, ctx_cookie = 0;
  std::shared_ptr<Backing> ctx_backing;
  // Any RM file: OS events allocated on it and events fired and not yet taken.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> os_events;  // (client, device)
  struct Pending {
    std::uint32_t object, notify_index, info32;
    std::uint16_t info16;
  };
  std::deque<Pending> pending;
  // /dev/nvidia-uvm
  enum class Uvm : std::uint8_t { uninitialized, va_space, mm } uvm = Uvm::uninitialized;
  std::uint64_t uvm_flags = 0;
};

// UVM's state of one VA-space file.
struct UvmSpace {
  bool gpu_registered = false;
  std::uint32_t va_client = 0, va_handle = 0;  // the RM VA space registered for the GPU
  std::shared_ptr<VaSpace> space;
  struct Range {
    std::uint64_t length;
    bool external;                 // an external range, or a channel's (REGISTER_CHANNEL)
    std::uint32_t client = 0, channel = 0;
  };
  std::map<std::uint64_t, Range> ranges;  // by base
};

struct Simulator::Impl {
  Config config;
  mutable std::mutex mutex;  // everything below but the counters
  std::condition_variable moved;  // events fired, usermode pages added
  std::map<int, File> files;
  int next_fd = kFirstFd;
  std::map<std::uint32_t, Client> clients;
  std::uint32_t next_client = 0xC1D00001, next_handle = 0xCAF00001;
  std::uint32_t next_token = kFirstToken;
  std::uint64_t next_cookie = 0x10000000;
  std::atomic<std::uint64_t> vram_used{0};
  std::map<int, UvmSpace> uvm;  // by VA-space file
  std::vector<std::string> error_log, fault_log;
  // Under ThreadSanitizer, the CPU mappings handed out (see Simulator::mmap): each is the
  // backing's own view, kept alive until the caller unmaps it.
  struct CpuView {
    std::size_t length;
    std::shared_ptr<Backing> backing;
  };
  std::map<void*, CpuView> cpu_views;
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
  unsigned long fail_request = 0;
  int fail_error = 0;
  // The doorbell watcher.
  std::thread watcher;
  bool stopping = false;
  std::atomic<std::uint64_t> doorbells{0}, stray{0};
  std::size_t dmabuf_exports = 0;  // dma-bufs EXPORT_TO_DMABUF_FD made
  // The kernels launches may run; engines freed under the lock and destroyed after it
  // (their hooks take it); bytes waiting for engines to move on.
  Code code;
  std::vector<std::shared_ptr<EngineBox>> dying;
  std::vector<Retired> retired;

  explicit Impl(Config c);
  ~Impl();

  std::uint64_t now_ns() const {
    return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - epoch).count());
  }
  // Records a refusal and returns its code.
  std::uint32_t refuse(std::uint32_t status, std::string what);
  int refuse_errno(int negative_errno, std::string what);

  // sim.cpp
  // Bytes gone from `space`: freed at once unless an engine on it is inside an entry.
  void retire(const std::shared_ptr<VaSpace>& space, std::vector<std::shared_ptr<Backing>> gone);
  void sweep_retired();
  // After a call, with the lock held by `lock`: destroys the engines freed, outside the lock.
  void settle(std::unique_lock<std::mutex>& lock);
  void schedule(Channel& ch, bool enable);
  int escape(int fd, File& file, unsigned nr, void* arg, std::size_t size);
  void watch();
  void ring(std::uint32_t token);

  // rm.cpp
  Client* client(std::uint32_t h) {
    auto it = clients.find(h);
    return it == clients.end() ? nullptr : &it->second;
  }
  Object* object(std::uint32_t client, std::uint32_t h) {
    Client* c = this->client(client);
    if (!c) return nullptr;
    auto it = c->objects.find(h);
    return it == c->objects.end() ? nullptr : &it->second;
  }
  std::uint32_t alloc(int fd, std::uint32_t h_client, std::uint32_t h_parent, std::uint32_t& h_new,
                      std::uint32_t klass, std::uint64_t params);
  std::uint32_t free(std::uint32_t h_client, std::uint32_t h_object);
  void free_tree(Client& c, std::uint32_t h);
  void free_client(std::uint32_t h);
  std::uint32_t control(std::uint32_t h_client, std::uint32_t h_object, std::uint32_t cmd, std::uint64_t params,
                        std::uint32_t size);
  std::uint32_t control_in_copy(Client& c, Object& o, std::uint32_t cmd, std::uint64_t params, const std::string& what);
  std::uint32_t alloc_memory(int fd, abi::NVOS02_with_fd& p);
  std::uint32_t map_memory(abi::NVOS33_with_fd& p);
  std::uint32_t unmap_memory(abi::NVOS34& p);
  std::uint32_t export_dmabuf(abi::nv_ioctl_export_to_dma_buf_fd& p);
  std::uint32_t os_event(int fd, File& file, abi::nv_ioctl_os_event& p, bool allocate);
  std::uint32_t event_data(File& file, abi::NVOS41& p);
  void fire_locked(std::uint32_t notify_index, bool nonstall, std::uint32_t info32, std::uint16_t info16);
  void drop_contexts(const Backing* b);  // RM_FREE of memory: its mapping contexts go
  void close_file(int fd, File& file);

  // uvm.cpp
  int uvm_ioctl(int fd, File& file, unsigned long request, void* arg);
  void uvm_forget_channel(std::uint32_t client, std::uint32_t channel);
};

}  // namespace rig::sim::nv
