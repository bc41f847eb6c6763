// gpu.cpp — the process-wide state of each GPU and the host registrations (gpu.hpp).
#include "gpu.hpp"

#include <fmt/format.h>
#include <rig/rig_edge.h>
#include <unistd.h>

#include <utility>

namespace rig::cuda {

using namespace api;

namespace {

// GPUs, by library and ordinal. Never destroyed: a GPU's queue of collected graphs and its
// retained context outlive every device, and the graphs of a device may be collected after
// static destruction began.
struct Gpus {
  std::mutex mutex;
  std::map<std::pair<const Library*, int>, std::shared_ptr<Gpu>> all;
};
Gpus& gpus() {
  static auto* g = new Gpus;
  return *g;
}

// rig_words as each libcuda registers them: the whole pages that hold the array, since a
// registration covers pages. The registration is made once per library, in the context of
// the GPU that first needs it, and made again once a reset of that context took it away.
struct Registration {
  Gpu* owner = nullptr;
  std::uint64_t generation = 0;
};
struct Words {
  std::mutex mutex;
  std::map<const Library*, Registration> by_library;
};
Words& words_registry() {
  static auto* w = new Words;
  return *w;
}
std::uintptr_t page_size() {
  static const auto n = std::uintptr_t(sysconf(_SC_PAGESIZE));
  return n;
}

// Host ranges borrowed by map_host, by library and host address.
struct Borrowed {
  std::size_t bytes;
  int borrows;
  Gpu* owner;  // whose context registered it
  std::uint64_t generation;
};
struct Borrows {
  std::mutex mutex;
  std::map<std::pair<const Library*, std::uintptr_t>, Borrowed> ranges;
};
Borrows& borrows() {
  static auto* b = new Borrows;
  return *b;
}
// Drops one borrow of the range at `host` (the registry's lock held), unregistering it with
// the last.
void release_locked(Borrows& b, const Library& lib, const HostBorrow& borrow);

}  // namespace

Gpu::Gpu(const Library& l, int o, CUdevice d, std::string n, CUcontext ctx)
    : lib(l), ordinal(o), device(d), name(std::move(n)), context_(ctx), pid_(getpid()) {}

Result<std::shared_ptr<Gpu>> Gpu::get(const Library& lib, int ordinal) {
  auto& g = gpus();
  std::lock_guard l(g.mutex);
  auto key = std::make_pair(&lib, ordinal);
  if (auto it = g.all.find(key); it != g.all.end()) return it->second;
  const Api& a = lib.api;
  CUdevice device = 0;
  if (CUresult r = a.cuDeviceGet(&device, ordinal))
    return std::unexpected(fmt::format("cuDeviceGet({}) failed: {}", ordinal, describe(lib, r)));
  char name[256] = {};
  if (a.cuDeviceGetName(name, sizeof name - 1, device) != CUDA_SUCCESS) name[0] = 0;
  CUcontext ctx = nullptr;
  if (CUresult r = a.cuDevicePrimaryCtxRetain(&ctx, device))
    return std::unexpected(fmt::format("cannot retain the primary context of GPU {} ({}): {}", ordinal,
                                       name, describe(lib, r)));
  auto gpu = std::make_shared<Gpu>(lib, ordinal, device, name, ctx);
  g.all.emplace(key, gpu);
  return gpu;
}

CUcontext Gpu::context() const {
  std::lock_guard l(mutex_);
  return context_;
}

Result<void> Gpu::recover() {
  if (!suspect_.exchange(false)) return {};
  const Api& a = lib.api;
  std::lock_guard l(mutex_);
  CUresult r;
  {
    Current c(a, context_);
    r = a.cuCtxSynchronize();
  }
  if (r == CUDA_SUCCESS) return {};
  // The context failed (a sticky error): only a reset makes the GPU usable again. It
  // destroys everything the context held, which every object of this generation forgets.
  if (CUresult e = a.cuDevicePrimaryCtxReset(device))
    return std::unexpected(fmt::format("its context failed ({}) and cannot be reset: {}", describe(lib, r),
                                       describe(lib, e)));
  CUcontext ctx = nullptr;
  if (CUresult e = a.cuDevicePrimaryCtxRetain(&ctx, device))
    return std::unexpected(fmt::format("its context failed ({}); after a reset it cannot be retained: {}",
                                       describe(lib, r), describe(lib, e)));
  context_ = ctx;
  modules_.clear();
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return {};
}

void Gpu::retain(CUmodule m) {
  std::lock_guard l(mutex_);
  ++modules_[m];
}

void Gpu::release(CUmodule m, std::uint64_t generation) {
  std::lock_guard l(mutex_);
  if (generation != generation_.load()) return;  // the reset unloaded it
  auto it = modules_.find(m);
  if (it == modules_.end() || --it->second > 0) return;
  modules_.erase(it);
  Current c(lib.api, context_);
  lib.api.cuModuleUnload(m);  // an error here (a failed context) leaves nothing to do
}

void Gpu::collect(DoomedGraph g) {
  std::lock_guard l(queue_mutex_);
  queue_.push_back(std::move(g));
}

void Gpu::drain() {
  std::unique_lock busy(drain_mutex_, std::try_to_lock);
  if (!busy) return;  // "A cleanup already running on another domain is left to it."
  std::vector<DoomedGraph> doomed;
  {
    std::lock_guard l(queue_mutex_);
    doomed.swap(queue_);
  }
  if (doomed.empty() || getpid() != pid_) return;  // a child of fork destroys nothing inherited
  const Api& a = lib.api;
  Current c(a, context());
  for (auto& g : doomed) {
    // The graph first, then the modules it kept: "destroys the queued graphs before it
    // unloads their images". Errors (a failed context) leave nothing more to do.
    if (g.generation == generation()) {
      a.cuGraphExecDestroy(g.exec);
      a.cuGraphDestroy(g.graph);
    }
    for (CUmodule m : g.modules) release(m, g.generation);
  }
}

Result<CUdeviceptr> Gpu::words() {
  const Api& a = lib.api;
  auto& w = words_registry();
  const auto first = reinterpret_cast<std::uintptr_t>(&rig_words[0]);
  const std::uintptr_t base = first & ~(page_size() - 1);
  const std::uintptr_t end = (first + sizeof rig_words + page_size() - 1) & ~(page_size() - 1);
  std::lock_guard l(w.mutex);
  Current c(a, context());
  Registration& r = w.by_library[&lib];
  if (!r.owner || r.owner->generation() != r.generation) {
    CUresult e = a.cuMemHostRegister(reinterpret_cast<void*>(base), end - base,
                                     CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    // Already registered: a registration that survived its context's reset, which serves.
    if (e != CUDA_SUCCESS && e != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
      return std::unexpected(
          fmt::format("cannot register rig's timeline words with CUDA (cuMemHostRegister): {}", describe(lib, e)));
    r.owner = this;
    r.generation = generation();
  }
  CUdeviceptr at = 0;
  if (CUresult r = a.cuMemHostGetDevicePointer(&at, reinterpret_cast<void*>(base), 0))
    return std::unexpected(fmt::format("rig's timeline words have no device address: {}", describe(lib, r)));
  return at + (first - base);
}

std::optional<HostBorrow> borrow_host(Gpu& gpu, std::uintptr_t host, std::size_t bytes, bool& no_room) {
  const Api& a = gpu.lib.api;
  auto& b = borrows();
  no_room = false;
  std::lock_guard l(b.mutex);
  Current c(a, gpu.context());
  HostBorrow borrow;
  borrow.host = host;
  const auto key = std::make_pair(&gpu.lib, host);
  auto it = b.ranges.find(key);
  if (it != b.ranges.end() && it->second.owner->generation() != it->second.generation) {
    b.ranges.erase(it);  // its context was reset, which took the registration away
    it = b.ranges.end();
  }
  if (it != b.ranges.end() && it->second.bytes == bytes) {
    ++it->second.borrows;
    borrow.registered = true;
    borrow.owner = it->second.owner;
    borrow.generation = it->second.generation;
  } else {
    CUresult r = a.cuMemHostRegister(reinterpret_cast<void*>(host), bytes,
                                     CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      no_room = true;
      return std::nullopt;
    }
    if (r == CUDA_SUCCESS) {
      b.ranges[key] = Borrowed{bytes, 1, &gpu, gpu.generation()};
      borrow.registered = true;
      borrow.owner = &gpu;
      borrow.generation = gpu.generation();
    } else if (r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
      return std::nullopt;  // CUDA refuses these pages (read-only, not supported, …)
    }
  }
  // A range registered by someone else serves if it covers every byte, mapped.
  CUdeviceptr first = 0, last = 0;
  bool mapped = a.cuMemHostGetDevicePointer(&first, reinterpret_cast<void*>(host), 0) == CUDA_SUCCESS &&
                a.cuMemHostGetDevicePointer(&last, reinterpret_cast<void*>(host + bytes - 1), 0) == CUDA_SUCCESS &&
                last - first == bytes - 1;
  if (!mapped) {
    if (borrow.registered) release_locked(b, gpu.lib, borrow);
    return std::nullopt;
  }
  borrow.address = first;
  return borrow;
}

void return_host(const Library& lib, const HostBorrow& borrow) {
  auto& b = borrows();
  std::lock_guard l(b.mutex);
  release_locked(b, lib, borrow);
}

Result<CUdeviceptr> caller_word(Gpu& gpu, const volatile std::uint64_t* word, std::optional<HostBorrow>& borrowed) {
  const Api& a = gpu.lib.api;
  const auto at = reinterpret_cast<std::uintptr_t>(word);
  CUdeviceptr address = 0;
  {
    Current c(a, gpu.context());
    if (a.cuMemHostGetDevicePointer(&address, reinterpret_cast<void*>(at), 0) == CUDA_SUCCESS) return address;
  }
  const std::uintptr_t page = at & ~(page_size() - 1);
  bool no_room = false;
  auto borrow = borrow_host(gpu, page, page_size(), no_room);
  if (!borrow)
    return std::unexpected(fmt::format("the timeline word at {:#x} lies outside rig_words, and CUDA {} the page that "
                                       "holds it (cuMemHostRegister)",
                                       at, no_room ? "has no memory left to map" : "refuses to map"));
  if (borrow->registered) borrowed = *borrow;
  return borrow->address + (at - page);
}

namespace {
void release_locked(Borrows& b, const Library& lib, const HostBorrow& borrow) {
  const std::uintptr_t host = borrow.host;
  auto it = b.ranges.find(std::make_pair(&lib, host));
  if (it == b.ranges.end() || it->second.owner != borrow.owner || it->second.generation != borrow.generation) return;
  if (--it->second.borrows > 0) return;
  Gpu& owner = *it->second.owner;
  if (owner.generation() == it->second.generation) {
    Current c(owner.lib.api, owner.context());
    owner.lib.api.cuMemHostUnregister(reinterpret_cast<void*>(host));
  }
  b.ranges.erase(it);
}
}  // namespace

}  // namespace rig::cuda
