// fake_libcuda.cpp — a libcuda for tests, on host threads (fake_libcuda.h).
//
// It implements the declarations of cuda/cuda_api.hpp, the same ones rig's driver calls, and
// exports each function under the name libcuda exports it by ("cuMemAlloc_v2"), reached
// through cuGetProcAddress as libcuda's are. Read it in this order: the objects (contexts,
// memory, streams, events, modules, graphs), the stream engine, then the API by group.
#include "fake_libcuda.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda_api.hpp"
#include "cubin.hpp"
#include "ptx.hpp"

using namespace rig::cuda::api;

// ---- The objects. The opaque structs of the API's handles are defined here.

struct CUctx_st {
  int ordinal = 0;
  std::atomic<CUresult> sticky{CUDA_SUCCESS};  // the error that failed the context
  std::atomic<std::uint64_t> generation{1};   // raised by a reset
  std::set<int> peers;                        // ordinals whose memory it may reach
};

struct CUfunc_st {
  CUmod_st* module = nullptr;
  std::string name;
  std::vector<std::size_t> sizes, offsets;
  std::size_t param_bytes = 0;
  int max_threads = 1024, static_shared = 0, max_dynamic_shared = 0;
};

// A module (PTX text, or a fatbin's PTX entry) runs on the PTX interpreter; its module
// variables live in storage of its own, which its kernels' memory maps too.
struct Module_variable {
  std::unique_ptr<std::byte[]> storage;
  std::uintptr_t address = 0;  // aligned, inside storage
  std::size_t size = 0;
};

struct CUmod_st {
  CUctx_st* ctx = nullptr;
  std::deque<CUfunc_st> functions;
  std::optional<rig::ptx::Module> ptx;
  std::vector<Module_variable> variables;
};

struct CUevent_st {
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  // One reference for the handle and one for each op of a stream that names the event:
  // the last to go frees it, so that destroying an event a stream still records is safe.
  std::atomic<int> refs{1};
  std::atomic<std::uint64_t> recorded{0}, completed{0};
  std::atomic<std::uint64_t> time_ns{0};
};

struct CUgraphNode_st {
  CUfunc_st* func = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared = 0;
  std::vector<std::byte> params;
};

struct CUgraph_st {
  CUctx_st* ctx = nullptr;
  std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};

// A kernel launch as a stream or an executable graph keeps it.
struct Launch {
  CUgraphNode_st* node = nullptr;  // in an executable graph: the node it was made from
  CUfunc_st* func = nullptr;
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1}, shared = 0;
  std::vector<std::byte> params;
};

struct CUgraphExec_st {
  CUctx_st* ctx = nullptr;
  std::vector<Launch> nodes;
};

// One unit of a stream's work. Slots of a stream's ring are reused, so that their vectors
// keep their capacity and enqueueing allocates nothing once warm.
struct Op {
  enum Kind { Kernel, Graph, Copy, Copy2D, Memset, Memset2D, Write, Wait, Record, WaitEvent, Host } kind = Kernel;
  Launch launch;
  std::vector<Launch> graph;
  std::uintptr_t dst = 0, src = 0;
  std::size_t width = 0, height = 0, dst_pitch = 0, src_pitch = 0;
  unsigned char byte = 0;
  std::uint64_t value = 0;
  CUevent_st* event = nullptr;
  std::uint64_t seq = 0;
  CUhostFn fn = nullptr;
  void* user = nullptr;
};

struct CUstream_st {
  static constexpr std::size_t kRing = 64;
  CUctx_st* ctx = nullptr;
  std::uint64_t generation = 0;
  std::mutex m;
  std::condition_variable cv;
  std::vector<Op> ring = std::vector<Op>(kRing);
  std::uint64_t head = 0, tail = 0;  // ops taken, ops enqueued
  std::uint64_t done = 0;            // ops finished
  bool quit = false;                 // destroyed: finish the ring, then exit
  std::atomic<bool> abandon{false};  // reset: drop the ring and exit
  std::thread worker;
};

// Memory CUDA knows: allocations, pinned and registered host memory.
struct Block {
  enum Kind { Device, Host, Managed, Registered } kind;
  std::size_t bytes;
  CUctx_st* ctx;
};

namespace {

constexpr std::size_t kSharedOptin = 232448;  // an H100/H200's opt-in shared memory per block
constexpr std::size_t kTotalMemory = std::size_t(16) << 30;
constexpr std::size_t kFakePage = 4096;  // the host page cuMemGetHandleForAddressRange's ranges are whole of

struct Plan {
  unsigned long long countdown = 0;  // calls until the first that fails
  int result = 0;
  unsigned long long times = 0;  // calls that fail from then on
};

// Everything the fake knows. Never destroyed: stream threads may outlive static destruction.
struct State {
  std::mutex m;
  bool initialized = false;
  int devices = 2, version = 12080;
  bool memops = true, memops_functions = true, param_info = true, host_visible = false, peer = true,
       registers = true, dma_buf = true, host_dma_buf = false;
  long long dmabufs = 0;  // dma-bufs cuMemGetHandleForAddressRange made
  std::vector<std::unique_ptr<CUctx_st>> primary;
  std::map<std::uintptr_t, Block> memory;  // by start address
  std::set<CUstream_st*> streams;
  std::set<CUevent_st*> events;
  std::set<CUmod_st*> modules;
  std::set<CUfunc_st*> functions;
  std::set<CUgraph_st*> graphs;
  std::set<CUgraphExec_st*> execs;
  std::map<std::string, Plan, std::less<>> plans;
  std::map<std::string, long long, std::less<>> calls;
  long long resets = 0, launches = 0, graph_launches = 0, peer_enables = 0;
};

State& S() {
  static State* s = [] {
    auto* s = new State;
    if (const char* n = std::getenv("FAKECUDA_DEVICES")) s->devices = std::atoi(n);
    if (const char* v = std::getenv("FAKECUDA_VERSION")) s->version = std::atoi(v);
    if (const char* f = std::getenv("FAKECUDA_FAIL")) {
      std::string spec(f);
      auto a = spec.find(':'), b = spec.rfind(':');
      if (a != std::string::npos && b > a)
        s->plans[spec.substr(0, a)] = {std::strtoull(spec.c_str() + a + 1, nullptr, 10),
                                       std::atoi(spec.c_str() + b + 1), 1};
    }
    for (int i = 0; i < s->devices; ++i) {
      s->primary.push_back(std::make_unique<CUctx_st>());
      s->primary.back()->ordinal = i;
    }
    return s;
  }();
  return *s;
}

thread_local CUctx_st* t_current = nullptr;

// Counts a call of `name` and gives its injected result, if this is the call to fail.
CUresult enter(std::string_view name) {
  auto& s = S();
  std::lock_guard l(s.m);
  auto c = s.calls.find(name);
  if (c == s.calls.end()) c = s.calls.emplace(std::string(name), 0).first;
  ++c->second;
  auto p = s.plans.find(name);
  if (p == s.plans.end() || p->second.times == 0) return CUDA_SUCCESS;
  if (p->second.countdown > 1) {
    --p->second.countdown;
    return CUDA_SUCCESS;
  }
  --p->second.times;
  return p->second.result;
}

#define ENTER(name)                          \
  if (CUresult injected_ = enter(name))      \
    return injected_;                        \
  if (!S().initialized && std::string_view(name) != "cuInit") return CUDA_ERROR_NOT_INITIALIZED

// The current context, failing as CUDA does when none is current or it failed.
CUresult current(CUctx_st*& ctx) {
  ctx = t_current;
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  return ctx->sticky.load();
}

// A stream's context must be current (see fake_libcuda.h) and not failed.
CUresult stream_ready(CUstream s) {
  auto& st = S();
  {
    std::lock_guard l(st.m);
    if (!st.streams.count(s)) return CUDA_ERROR_INVALID_HANDLE;
  }
  if (t_current != s->ctx) return CUDA_ERROR_INVALID_CONTEXT;
  return s->ctx->sticky.load();
}

// The block that holds [at, at + n), or null.
const Block* find(std::uintptr_t at, std::size_t n, std::uintptr_t* start = nullptr) {
  auto& s = S();
  auto it = s.memory.upper_bound(at);
  if (it == s.memory.begin()) return nullptr;
  --it;
  if (at + n > it->first + it->second.bytes || n > it->second.bytes) return nullptr;
  if (start) *start = it->first;
  return &it->second;
}

// Whether a stream of `ctx` may touch [at, at + n): memory CUDA knows, and another GPU's
// memory only with peer access.
bool reachable(CUctx_st* ctx, std::uintptr_t at, std::size_t n) {
  auto& s = S();
  std::lock_guard l(s.m);
  const Block* b = find(at, n);
  if (!b) return false;
  if (b->kind != Block::Device || b->ctx == ctx) return true;
  return ctx->peers.count(b->ctx->ordinal) > 0;
}

std::uint64_t now_ns() {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now().time_since_epoch())
                           .count());
}

// Drops a reference to an event (its handle's, or a stream op's); the last frees it.
void unref(CUevent_st* e) {
  if (e->refs.fetch_sub(1) == 1) delete e;
}

// ---- The stream engine: each stream's thread runs its ops in order.

void fail_context(CUctx_st* ctx, CUresult r) {
  CUresult none = CUDA_SUCCESS;
  ctx->sticky.compare_exchange_strong(none, r);
}

// What a real kernel reaches: memory CUDA knows (as reachable() allows: another GPU's
// memory only with peer access) and its module's variables. Device addresses are host
// addresses.
struct Kernel_memory : rig::ptx::Memory {
  CUctx_st* ctx;
  const CUmod_st* module;
  Kernel_memory(CUctx_st* c, const CUmod_st* m) : ctx(c), module(m) {}
  std::optional<rig::ptx::Mapping> map(std::uint64_t address, std::uint64_t size, bool) override {
    for (const auto& v : module->variables)
      if (address >= v.address && address - v.address <= v.size && size <= v.size - (address - v.address))
        return rig::ptx::Mapping{v.address, v.size, reinterpret_cast<std::byte*>(v.address)};
    auto& s = S();
    std::lock_guard l(s.m);
    std::uintptr_t start = 0;
    const Block* b = find(address, size, &start);
    if (!b || (b->kind == Block::Device && b->ctx != ctx && !ctx->peers.count(b->ctx->ordinal))) return std::nullopt;
    return rig::ptx::Mapping{start, b->bytes, reinterpret_cast<std::byte*>(start)};
  }
};

// The CUresult a GPU gives for the interpreter's fault: an address outside what the kernel
// may reach is CUDA_ERROR_ILLEGAL_ADDRESS; a trap and everything else is
// CUDA_ERROR_LAUNCH_FAILED ("unspecified launch failure").
CUresult fault_result(const std::string& why) {
  for (const char* address : {"page fault at", "misaligned address", "memory access at"})
    if (why.find(address) != std::string::npos) return CUDA_ERROR_ILLEGAL_ADDRESS;
  return CUDA_ERROR_LAUNCH_FAILED;
}

void run_ptx(CUstream s, const Launch& l) {
  const CUmod_st& m = *l.func->module;
  rig::ptx::Launch launch;
  launch.grid = {l.grid[0], l.grid[1], l.grid[2]};
  launch.block = {l.block[0], l.block[1], l.block[2]};
  launch.dynamic_shared = l.shared;
  launch.params = l.params;
  Kernel_memory memory(s->ctx, &m);
  const auto r = m.ptx->run(l.func->name, launch, memory);
  if (!r) {
    std::fprintf(stderr, "fake libcuda: GPU %d: %s\n", s->ctx->ordinal, r.error().c_str());
    fail_context(s->ctx, fault_result(r.error()));
  }
}

void run_kernel(CUstream s, const Launch& l) {
  {
    auto& st = S();
    std::lock_guard g(st.m);
    ++st.launches;
  }
  run_ptx(s, l);
}

// Whether the stream's work is dropped: its context failed or was reset.
bool dropped(CUstream s) {
  return s->ctx->sticky.load() || s->abandon.load() || s->generation != s->ctx->generation.load();
}

// Waits until `ready` or the stream's work is dropped.
template <class F>
void wait_until(CUstream s, F ready) {
  for (int spins = 0; !ready(); ++spins) {
    if (dropped(s)) return;
    if (spins < 64) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void execute(CUstream s, Op& op) {
  switch (op.kind) {
    case Op::Kernel:
      run_kernel(s, op.launch);
      break;
    case Op::Graph:
      for (const auto& l : op.graph) {
        if (s->ctx->sticky.load()) break;
        run_kernel(s, l);
      }
      break;
    case Op::Copy:
      std::memmove(reinterpret_cast<void*>(op.dst), reinterpret_cast<const void*>(op.src), op.width);
      break;
    case Op::Copy2D:
      for (std::size_t r = 0; r < op.height; ++r)
        std::memmove(reinterpret_cast<void*>(op.dst + r * op.dst_pitch),
                     reinterpret_cast<const void*>(op.src + r * op.src_pitch), op.width);
      break;
    case Op::Memset:
      std::memset(reinterpret_cast<void*>(op.dst), op.byte, op.width);
      break;
    case Op::Memset2D:
      for (std::size_t r = 0; r < op.height; ++r)
        std::memset(reinterpret_cast<void*>(op.dst + r * op.dst_pitch), op.byte, op.width);
      break;
    case Op::Write:
      __atomic_store_n(reinterpret_cast<std::uint64_t*>(op.dst), op.value, __ATOMIC_RELEASE);
      break;
    case Op::Wait: {
      auto* word = reinterpret_cast<std::uint64_t*>(op.dst);
      // CU_STREAM_WAIT_VALUE_GEQ: until (int64_t)(*addr - value) >= 0.
      wait_until(s, [&] { return std::int64_t(__atomic_load_n(word, __ATOMIC_ACQUIRE) - op.value) >= 0; });
      break;
    }
    case Op::Record: {
      op.event->time_ns.store(now_ns());
      std::uint64_t c = op.event->completed.load();
      while (c < op.seq && !op.event->completed.compare_exchange_weak(c, op.seq)) {
      }
      break;
    }
    case Op::WaitEvent:
      wait_until(s, [&] { return op.event->completed.load() >= op.seq; });
      break;
    case Op::Host:
      op.fn(op.user);
      break;
  }
}

void worker(CUstream s) {
  std::unique_lock l(s->m);
  while (true) {
    s->cv.wait(l, [&] { return s->head < s->tail || s->quit || s->abandon.load(); });
    if (s->abandon.load() || (s->quit && s->head == s->tail)) break;
    Op& op = s->ring[s->head % CUstream_st::kRing];
    l.unlock();
    // A failed context runs nothing more: its work is dropped.
    if (!dropped(s)) execute(s, op);
    if (op.kind == Op::Record || op.kind == Op::WaitEvent) unref(op.event);
    l.lock();
    ++s->head;
    ++s->done;
    s->cv.notify_all();
  }
  // Ops left behind by an abandoned stream still hold their events.
  for (; s->head < s->tail; ++s->head) {
    Op& op = s->ring[s->head % CUstream_st::kRing];
    if (op.kind == Op::Record || op.kind == Op::WaitEvent) unref(op.event);
  }
  s->done = s->tail;
  s->cv.notify_all();
  if (s->quit && !s->abandon.load()) {  // destroyed: the thread was detached and frees it
    l.unlock();
    delete s;
  }
}

// Enqueues an op that `fill` describes; blocks while the ring is full. False if the stream
// was abandoned meanwhile (a reset), enqueueing nothing.
template <class F>
bool enqueue(CUstream s, F fill) {
  std::unique_lock l(s->m);
  s->cv.wait(l, [&] { return s->tail - s->head < CUstream_st::kRing || s->abandon.load(); });
  if (s->abandon.load()) return false;
  fill(s->ring[s->tail % CUstream_st::kRing]);
  ++s->tail;
  s->cv.notify_all();
  return true;
}

// Waits until the stream ran everything enqueued so far.
void drain(CUstream s) {
  std::unique_lock l(s->m);
  const std::uint64_t target = s->tail;
  while (s->done < target && !s->ctx->sticky.load() && !s->abandon.load())
    s->cv.wait_for(l, std::chrono::milliseconds(1));
}

// ---- Kernel parameters.

// The parameter buffer that cuLaunchKernel's `extra` names (CU_LAUNCH_PARAM_BUFFER_POINTER
// and _SIZE), or an error: the fake insists on exactly the bytes the kernel reads.
CUresult extra_buffer(const CUfunc_st* f, void** extra, const std::byte*& buffer) {
  const std::size_t* size = nullptr;
  buffer = nullptr;
  for (std::size_t i = 0; extra[i] != nullptr; i += 2) {
    if (extra[i] == rig::cuda_abi::kLaunchParamBufferPointer) buffer = static_cast<const std::byte*>(extra[i + 1]);
    else if (extra[i] == rig::cuda_abi::kLaunchParamBufferSize) size = static_cast<const std::size_t*>(extra[i + 1]);
    else return CUDA_ERROR_INVALID_VALUE;
  }
  if (!buffer || !size || *size != f->param_bytes) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// Whether a launch gives its parameters as the function takes them.
CUresult check_params(const CUfunc_st* f, void** kernel_params, void** extra) {
  const std::byte* buffer;
  if (extra) return extra_buffer(f, extra, buffer);
  if (!kernel_params && f->param_bytes) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// Packs a launch's parameters, which check_params accepted, into `out`.
void pack(const CUfunc_st* f, void** kernel_params, void** extra, std::vector<std::byte>& out) {
  const std::byte* buffer;
  if (extra && extra_buffer(f, extra, buffer) == CUDA_SUCCESS) {
    out.assign(buffer, buffer + f->param_bytes);
  } else if (kernel_params) {
    out.assign(f->param_bytes, std::byte{0});
    for (std::size_t i = 0; i < f->sizes.size(); ++i)
      std::memcpy(out.data() + f->offsets[i], kernel_params[i], f->sizes[i]);
  } else {
    out.clear();
  }
}

bool live_function(CUfunction f, CUctx_st* ctx) {
  auto& s = S();
  std::lock_guard l(s.m);
  return s.functions.count(f) && f->module->ctx == ctx;
}

// The checks cuLaunchKernel and kernel nodes share: dimensions within the limits.
CUresult check_dims(const CUfunc_st* f, const unsigned grid[3], const unsigned block[3], unsigned shared) {
  const unsigned max_block[3] = {1024, 1024, 64};
  std::uint64_t threads = 1;
  for (int k = 0; k < 3; ++k) {
    if (!grid[k] || !block[k] || block[k] > max_block[k]) return CUDA_ERROR_INVALID_VALUE;
    if (grid[k] > (k == 0 ? 0x7fffffffu : 65535u)) return CUDA_ERROR_INVALID_VALUE;
    threads *= block[k];
  }
  if (threads > std::uint64_t(f->max_threads) || shared > unsigned(f->max_dynamic_shared))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// ---- Modules: real PTX and fatbins.

// Loads PTX text into `m`: its kernels become functions with the PTX's parameters and
// static shared memory, its .global/.const variables get storage with their initial bytes.
CUresult load_ptx(std::string_view text, CUmod_st& m, std::string& log) {
  while (!text.empty() && text.back() == '\0') text.remove_suffix(1);
  auto module = rig::ptx::Module::load(text, "ptx");
  if (!module) {
    log = module.error();
    return CUDA_ERROR_INVALID_PTX;
  }
  for (const auto& v : module->variables()) {
    Module_variable mv;
    const std::size_t align = std::max<std::size_t>(v.align, 1);
    if (v.size > (std::size_t(1) << 32)) {
      log = "variable " + v.name + " is larger than 4 GiB";
      return CUDA_ERROR_INVALID_PTX;
    }
    mv.size = v.size;
    mv.storage = std::make_unique<std::byte[]>(v.size + align);  // zeroed
    mv.address = (reinterpret_cast<std::uintptr_t>(mv.storage.get()) + align - 1) / align * align;
    std::memcpy(reinterpret_cast<void*>(mv.address), v.init.data(), std::min<std::size_t>(v.init.size(), v.size));
    module->place(v.name, mv.address);
    m.variables.push_back(std::move(mv));
  }
  for (const auto& name : module->kernels()) {
    CUfunc_st f;
    f.module = &m;
    f.name = name;
    const auto params = module->params(name);
    for (const auto& p : *params) {
      f.offsets.push_back(p.offset);
      f.sizes.push_back(p.size);
    }
    f.param_bytes = *module->params_size(name);
    f.static_shared = int(*module->shared_size(name));
    f.max_dynamic_shared = std::max(0, int(48 * 1024) - f.static_shared);
    m.functions.push_back(std::move(f));
  }
  m.ptx = std::move(*module);
  return CUDA_SUCCESS;
}

// Loads an image as CUDA would take it: a fatbin (its newest PTX entry for compute_90 or
// older, since the fake runs PTX, not SASS) or PTX text. A cubin, or a
// fatbin without PTX, has no code the fake can run: CUDA_ERROR_NO_BINARY_FOR_GPU.
CUresult load_module(const void* image, CUmod_st& m, std::string& log) {
  const auto* bytes = static_cast<const std::byte*>(image);
  const char* text = static_cast<const char*>(image);
  std::uint32_t magic = 0;
  if (::strnlen(text, 4) == 4) std::memcpy(&magic, image, 4);  // neither magic holds a NUL
  if (magic == rig::sim::nv::cubin::kFatbinMagic) {
    std::uint64_t size;
    std::memcpy(&size, bytes + 8, 8);
    if (size > rig::sim::nv::cubin::kMaxPayload) {
      log = "the fatbin claims " + std::to_string(size) + " bytes";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    const auto entries = rig::sim::nv::cubin::read_fatbin({bytes, rig::sim::nv::cubin::kFatbinHeaderSize + size});
    if (!entries) {
      log = entries.error();
      return CUDA_ERROR_INVALID_IMAGE;
    }
    const rig::sim::nv::cubin::Fatbin_entry* ptx = nullptr;
    for (const auto& e : *entries)
      if (e.kind == rig::sim::nv::cubin::Entry_kind::ptx && e.sm <= 90 && (!ptx || e.sm > ptx->sm)) ptx = &e;
    if (!ptx) {
      log = "the fatbin has no PTX for compute_90 or older, and the fake libcuda runs only PTX";
      return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    if (CUresult r = load_ptx({reinterpret_cast<const char*>(ptx->payload.data()), ptx->payload.size()}, m, log))
      return r;
    // The launch bounds nvcc recorded (MAX_THREADS) are in the sm_90 cubin beside the PTX.
    for (const auto& e : *entries) {
      if (e.kind != rig::sim::nv::cubin::Entry_kind::elf || e.sm != 90) continue;
      const auto cubin = rig::sim::nv::cubin::read_cubin(e.payload);
      if (!cubin) {
        log = cubin.error();
        return CUDA_ERROR_INVALID_IMAGE;
      }
      for (const auto& k : cubin->kernels)
        for (auto& f : m.functions)
          if (f.name == k.name && k.max_threads) f.max_threads = int(std::min<std::uint32_t>(k.max_threads, 1024));
    }
    return CUDA_SUCCESS;
  }
  if (std::memcmp(&magic, "\x7f" "ELF", 4) == 0) {
    // A cubin's extent, as CUDA finds it: from its header (a 64-bit ELF's is 64 bytes) to
    // the end of its section headers, which nvcc writes last.
    if (text[4] != 2 || text[5] != 1) {
      log = "not a 64-bit little-endian ELF";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    std::uint64_t shoff;
    std::uint16_t shentsize, shnum;
    std::memcpy(&shoff, bytes + 40, 8);
    std::memcpy(&shentsize, bytes + 58, 2);
    std::memcpy(&shnum, bytes + 60, 2);
    const std::uint64_t size = std::max<std::uint64_t>(64, shoff + std::uint64_t(shentsize) * shnum);
    if (shoff > rig::sim::nv::cubin::kMaxPayload || size > rig::sim::nv::cubin::kMaxPayload) {
      log = "the ELF's section headers lie past " + std::to_string(rig::sim::nv::cubin::kMaxPayload) + " bytes";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    if (const auto cubin = rig::sim::nv::cubin::read_cubin({bytes, size}); !cubin) {
      log = cubin.error();
      return CUDA_ERROR_INVALID_IMAGE;
    }
    log = "a cubin holds SASS only, and the fake libcuda runs only PTX: load a fatbin with PTX, or the PTX";
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  return load_ptx(text, m, log);
}

// ---- Destruction of a context's objects (cuDevicePrimaryCtxReset).

void reset_context(CUctx_st* ctx) {
  auto& s = S();
  std::vector<CUstream_st*> doomed;
  {
    std::lock_guard l(s.m);
    for (auto it = s.streams.begin(); it != s.streams.end();)
      if ((*it)->ctx == ctx) doomed.push_back(*it), it = s.streams.erase(it);
      else ++it;
  }
  for (auto* st : doomed) {
    st->abandon.store(true);
    {
      std::lock_guard g(st->m);
      st->cv.notify_all();
    }
    if (st->worker.joinable()) st->worker.join();
    delete st;
  }
  std::lock_guard l(s.m);
  for (auto it = s.memory.begin(); it != s.memory.end();) {
    if (it->second.ctx != ctx) {
      ++it;
      continue;
    }
    if (it->second.kind != Block::Registered) std::free(reinterpret_cast<void*>(it->first));
    it = s.memory.erase(it);
  }
  std::erase_if(s.events, [&](CUevent_st* e) { return e->ctx == ctx ? (unref(e), true) : false; });
  std::erase_if(s.graphs, [&](CUgraph_st* g) { return g->ctx == ctx ? (delete g, true) : false; });
  std::erase_if(s.execs, [&](CUgraphExec_st* g) { return g->ctx == ctx ? (delete g, true) : false; });
  std::erase_if(s.modules, [&](CUmod_st* m) {
    if (m->ctx != ctx) return false;
    for (auto& f : m->functions) s.functions.erase(&f);
    delete m;
    return true;
  });
  ctx->peers.clear();
  ctx->sticky.store(CUDA_SUCCESS);
  ctx->generation.fetch_add(1);
  ++s.resets;
}

}  // namespace

// ---- The API. Every function is exported under libcuda's name for it.

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT CUresult cuInit(unsigned flags) {
  ENTER("cuInit");
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  auto& s = S();
  std::lock_guard l(s.m);
  s.initialized = true;
  return s.devices > 0 ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

EXPORT CUresult cuDriverGetVersion(int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = S().version;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorName(CUresult r, const char** name) {
  static const std::map<CUresult, const char*> names = {
      {0, "CUDA_SUCCESS"}, {1, "CUDA_ERROR_INVALID_VALUE"}, {2, "CUDA_ERROR_OUT_OF_MEMORY"},
      {3, "CUDA_ERROR_NOT_INITIALIZED"}, {100, "CUDA_ERROR_NO_DEVICE"}, {101, "CUDA_ERROR_INVALID_DEVICE"},
      {200, "CUDA_ERROR_INVALID_IMAGE"}, {201, "CUDA_ERROR_INVALID_CONTEXT"}, {209, "CUDA_ERROR_NO_BINARY_FOR_GPU"},
      {218, "CUDA_ERROR_INVALID_PTX"},
      {400, "CUDA_ERROR_INVALID_HANDLE"}, {500, "CUDA_ERROR_NOT_FOUND"}, {600, "CUDA_ERROR_NOT_READY"},
      {700, "CUDA_ERROR_ILLEGAL_ADDRESS"}, {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"},
      {711, "CUDA_ERROR_TOO_MANY_PEERS"}, {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
      {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"}, {719, "CUDA_ERROR_LAUNCH_FAILED"},
      {801, "CUDA_ERROR_NOT_SUPPORTED"}, {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED"}, {999, "CUDA_ERROR_UNKNOWN"}};
  auto it = names.find(r);
  if (it == names.end() || !name) return CUDA_ERROR_INVALID_VALUE;
  *name = it->second;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char** text) {
  static const std::map<CUresult, const char*> texts = {
      {0, "no error"}, {1, "invalid argument"}, {2, "out of memory"}, {3, "initialization error"},
      {100, "no CUDA-capable device is detected"}, {101, "invalid device ordinal"},
      {200, "device kernel image is invalid"}, {201, "invalid device context"},
      {209, "no kernel image is available for execution on the device"},
      {218, "a PTX JIT compilation failed"}, {400, "invalid resource handle"}, {500, "named symbol not found"},
      {600, "device not ready"}, {700, "an illegal memory access was encountered"},
      {704, "peer access is already enabled"}, {711, "peer mapping resources exhausted"},
      {712, "part or all of the requested memory range is already mapped"},
      {713, "pointer does not correspond to a registered memory region"}, {719, "unspecified launch failure"},
      {801, "operation not supported"}, {217, "peer access is not supported between these two devices"},
      {999, "unknown error"}};
  auto it = texts.find(r);
  if (it == texts.end() || !text) return CUDA_ERROR_INVALID_VALUE;
  *text = it->second;
  return CUDA_SUCCESS;
}

// ---- Devices.

EXPORT CUresult cuDeviceGetCount(int* count) {
  ENTER("cuDeviceGetCount");
  *count = S().devices;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  ENTER("cuDeviceGet");
  if (ordinal < 0 || ordinal >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  ENTER("cuDeviceGetName");
  if (device < 0 || device >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, std::size_t(length), "Fake CUDA GPU %d", device);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  ENTER("cuDeviceGetAttribute");
  auto& s = S();
  if (device < 0 || device >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  switch (attribute) {
    case 1: *value = 1024; break;                                   // max threads per block
    case 2: case 3: *value = 1024; break;                           // max block x, y
    case 4: *value = 64; break;                                     // max block z
    case 5: *value = 0x7fffffff; break;                             // max grid x
    case 6: case 7: *value = 65535; break;                          // max grid y, z
    case 8: *value = 48 * 1024; break;                              // shared memory per block
    case 11: *value = 0x7fffffff; break;                            // max pitch
    case 16: *value = 132; break;                                   // multiprocessors
    case 38: *value = 50 << 20; break;                              // L2 bytes
    case 41: *value = 1; break;                                     // unified addressing
    case 75: *value = 9; break;                                     // compute capability
    case 76: *value = 0; break;
    case 93: case 122: *value = s.memops ? 1 : 0; break;            // 64-bit stream memory ops
    case 97: *value = int(kSharedOptin); break;                     // opt-in shared memory
    case 99: *value = s.registers ? 1 : 0; break;                   // cuMemHostRegister
    case 101: *value = s.host_visible ? 1 : 0; break;               // direct managed access
    case 124: *value = s.dma_buf ? 1 : 0; break;                    // cuMemAlloc ranges as dma-bufs
    case 146: *value = s.host_dma_buf ? 1 : 0; break;               // cuMemHostAlloc ranges too
    default: *value = 0;
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(std::size_t* bytes, CUdevice device) {
  ENTER("cuDeviceTotalMem");
  if (device < 0 || device >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = kTotalMemory;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetPCIBusId(char* bus, int length, CUdevice device) {
  ENTER("cuDeviceGetPCIBusId");
  if (device < 0 || device >= S().devices) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(bus, std::size_t(length), "0000:%02X:00.0", 0x1b + device);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceCanAccessPeer(int* can, CUdevice device, CUdevice peer) {
  ENTER("cuDeviceCanAccessPeer");
  auto& s = S();
  if (device < 0 || device >= s.devices || peer < 0 || peer >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  *can = s.peer && device != peer ? 1 : 0;
  return CUDA_SUCCESS;
}

// ---- Contexts.

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice device) {
  ENTER("cuDevicePrimaryCtxRetain");
  auto& s = S();
  if (device < 0 || device >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = s.primary[std::size_t(device)].get();
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  ENTER("cuDevicePrimaryCtxRelease");
  return device >= 0 && device < S().devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice device) {
  ENTER("cuDevicePrimaryCtxReset");
  auto& s = S();
  if (device < 0 || device >= s.devices) return CUDA_ERROR_INVALID_DEVICE;
  reset_context(s.primary[std::size_t(device)].get());
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  ENTER("cuCtxGetCurrent");
  *ctx = t_current;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  ENTER("cuCtxSetCurrent");
  t_current = ctx;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize() {
  ENTER("cuCtxSynchronize");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto& s = S();
  std::vector<CUstream> mine;
  {
    std::lock_guard l(s.m);
    for (auto* st : s.streams)
      if (st->ctx == ctx) mine.push_back(st);
  }
  for (auto* st : mine) drain(st);
  return ctx->sticky.load();
}

EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
  ENTER("cuCtxEnablePeerAccess");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto& s = S();
  std::lock_guard l(s.m);
  if (flags || !peer || peer == ctx) return CUDA_ERROR_INVALID_VALUE;
  if (!s.peer) return 217;  // CUDA_ERROR_PEER_ACCESS_UNSUPPORTED
  if (!ctx->peers.insert(peer->ordinal).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  ++s.peer_enables;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(std::size_t* free, std::size_t* total) {
  ENTER("cuMemGetInfo");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  *free = kTotalMemory - (std::size_t(1) << 30);
  *total = kTotalMemory;
  return CUDA_SUCCESS;
}

// ---- Memory.

namespace {
CUresult allocate(Block::Kind kind, std::size_t bytes, std::size_t align, std::uintptr_t& at) {
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  at = reinterpret_cast<std::uintptr_t>(p);
  auto& s = S();
  std::lock_guard l(s.m);
  s.memory[at] = Block{kind, bytes, ctx};
  return CUDA_SUCCESS;
}

CUresult release(std::uintptr_t at, std::initializer_list<Block::Kind> kinds) {
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto& s = S();
  std::lock_guard l(s.m);
  auto it = s.memory.find(at);
  if (it == s.memory.end() || std::find(kinds.begin(), kinds.end(), it->second.kind) == kinds.end())
    return CUDA_ERROR_INVALID_VALUE;
  if (it->second.kind != Block::Registered) std::free(reinterpret_cast<void*>(at));
  s.memory.erase(it);
  return CUDA_SUCCESS;
}
}  // namespace

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* at, std::size_t bytes) {
  ENTER("cuMemAlloc");
  std::uintptr_t p = 0;
  // Whole pages (CUDA promises 256 bytes; its allocations take pages of their own), so that
  // cuMemGetHandleForAddressRange finds a range of them.
  CUresult r = allocate(Block::Device, bytes, kFakePage, p);
  *at = p;
  return r;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr at) {
  ENTER("cuMemFree");
  return release(at, {Block::Device, Block::Managed});
}

EXPORT CUresult cuMemHostAlloc(void** host, std::size_t bytes, unsigned) {
  ENTER("cuMemHostAlloc");
  std::uintptr_t p = 0;
  CUresult r = allocate(Block::Host, bytes, 4096, p);
  *host = reinterpret_cast<void*>(p);
  return r;
}

// The range must be whole host pages of one cuMemAlloc allocation (or, where the GPU says
// so, of one cuMemHostAlloc allocation), asked for as a dma-buf descriptor with flags 0; the
// PCIe mapping flag is refused as on a platform that has none. Where the GPU reports no
// dma-buf support, CUDA_ERROR_NOT_SUPPORTED. The descriptor is a new memfd of the range's
// size, not close-on-exec (CUDA does not promise it): the fake's device memory is heap
// memory, which no descriptor can share.
EXPORT CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr at, std::size_t bytes, int type,
                                              unsigned long long flags) {
  ENTER("cuMemGetHandleForAddressRange");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  if (!handle || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return CUDA_ERROR_INVALID_VALUE;
  if (flags == 0x1) return CUDA_ERROR_NOT_SUPPORTED;  // CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE
  if (flags != 0 || bytes == 0 || at % kFakePage || bytes % kFakePage) return CUDA_ERROR_INVALID_VALUE;
  auto& s = S();
  std::lock_guard l(s.m);
  auto it = s.memory.upper_bound(at);
  if (it == s.memory.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  const Block& b = it->second;
  const std::uintptr_t end = it->first + (b.bytes + kFakePage - 1) / kFakePage * kFakePage;
  if (at < it->first || at + bytes > end || b.ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
  if (b.kind == Block::Device && !s.dma_buf) return CUDA_ERROR_NOT_SUPPORTED;
  if (b.kind == Block::Host && !s.host_dma_buf) return CUDA_ERROR_NOT_SUPPORTED;
  if (b.kind != Block::Device && b.kind != Block::Host) return CUDA_ERROR_INVALID_VALUE;
  const int fd = memfd_create("fake-cuda-dmabuf", 0);
  if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(handle) = fd;
  ++s.dmabufs;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFreeHost(void* host) {
  ENTER("cuMemFreeHost");
  return release(reinterpret_cast<std::uintptr_t>(host), {Block::Host});
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr* at, std::size_t bytes, unsigned flags) {
  ENTER("cuMemAllocManaged");
  if (flags != CU_MEM_ATTACH_GLOBAL) return CUDA_ERROR_INVALID_VALUE;
  std::uintptr_t p = 0;
  CUresult r = allocate(Block::Managed, bytes, 4096, p);
  *at = p;
  return r;
}

EXPORT CUresult cuMemAdvise(CUdeviceptr at, std::size_t bytes, int, CUdevice device) {
  ENTER("cuMemAdvise");
  auto& s = S();
  std::lock_guard l(s.m);
  const Block* b = find(at, bytes);
  if (!b || b->kind != Block::Managed || device < 0 || device >= s.devices) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* at, void* host, unsigned flags) {
  ENTER("cuMemHostGetDevicePointer");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto& s = S();
  std::lock_guard l(s.m);
  const Block* b = find(reinterpret_cast<std::uintptr_t>(host), 1);
  if (flags || !b || (b->kind != Block::Host && b->kind != Block::Registered)) return CUDA_ERROR_INVALID_VALUE;
  *at = reinterpret_cast<std::uintptr_t>(host);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister_v2(void* host, std::size_t bytes, unsigned) {
  ENTER("cuMemHostRegister");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.registers) return CUDA_ERROR_NOT_SUPPORTED;
  if (!host || !bytes) return CUDA_ERROR_INVALID_VALUE;
  const auto at = reinterpret_cast<std::uintptr_t>(host);
  // Any byte already pinned or registered: "part or all of the range is already mapped".
  auto it = s.memory.lower_bound(at);
  if (it != s.memory.end() && it->first < at + bytes && it->second.kind != Block::Device &&
      it->second.kind != Block::Managed)
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (it != s.memory.begin()) {
    auto before = std::prev(it);
    if (before->first + before->second.bytes > at && before->second.kind != Block::Device &&
        before->second.kind != Block::Managed)
      return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  s.memory[at] = Block{Block::Registered, bytes, ctx};
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostUnregister(void* host) {
  ENTER("cuMemHostUnregister");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto& s = S();
  std::lock_guard l(s.m);
  auto it = s.memory.find(reinterpret_cast<std::uintptr_t>(host));
  if (it == s.memory.end() || it->second.kind != Block::Registered) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  s.memory.erase(it);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr at) {
  ENTER("cuPointerGetAttribute");
  auto& s = S();
  std::lock_guard l(s.m);
  const Block* b = find(at, 1);
  if (!b) return CUDA_ERROR_INVALID_VALUE;
  if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
    *static_cast<unsigned*>(data) =
        b->kind == Block::Host || b->kind == Block::Registered ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  } else if (attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
    *static_cast<int*>(data) = b->ctx->ordinal;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// ---- Streams, events and memory operations.

EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned flags) {
  ENTER("cuStreamCreate");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  if (flags & ~CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  auto* s = new CUstream_st;
  s->ctx = ctx;
  s->generation = ctx->generation.load();
  s->worker = std::thread(worker, s);
  auto& st = S();
  std::lock_guard l(st.m);
  st.streams.insert(s);
  *stream = s;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  ENTER("cuStreamDestroy");
  auto& st = S();
  {
    std::lock_guard l(st.m);
    if (!st.streams.erase(s)) return CUDA_ERROR_INVALID_HANDLE;
  }
  // As CUDA does, destroy returns at once; the work already enqueued finishes, then the
  // stream's thread frees it.
  std::lock_guard g(s->m);
  s->worker.detach();
  s->quit = true;
  s->cv.notify_all();
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamQuery(CUstream s) {
  ENTER("cuStreamQuery");
  {
    auto& st = S();
    std::lock_guard l(st.m);
    if (!st.streams.count(s)) return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CUresult r = s->ctx->sticky.load()) return r;
  std::lock_guard g(s->m);
  return s->done == s->tail ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuStreamSynchronize(CUstream s) {
  ENTER("cuStreamSynchronize");
  {
    auto& st = S();
    std::lock_guard l(st.m);
    if (!st.streams.count(s)) return CUDA_ERROR_INVALID_HANDLE;
  }
  drain(s);
  return s->ctx->sticky.load();
}

EXPORT CUresult cuStreamWriteValue64_v2(CUstream s, CUdeviceptr at, cuuint64_t value, unsigned flags) {
  ENTER("cuStreamWriteValue64");
  if (CUresult r = stream_ready(s)) return r;
  if (flags != CU_STREAM_WRITE_VALUE_DEFAULT || at % 8 || !reachable(s->ctx, at, 8)) return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, [&](Op& op) {
    op.kind = Op::Write;
    op.dst = at;
    op.value = value;
  });
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitValue64_v2(CUstream s, CUdeviceptr at, cuuint64_t value, unsigned flags) {
  ENTER("cuStreamWaitValue64");
  if (CUresult r = stream_ready(s)) return r;
  if (flags != CU_STREAM_WAIT_VALUE_GEQ || at % 8 || !reachable(s->ctx, at, 8)) return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, [&](Op& op) {
    op.kind = Op::Wait;
    op.dst = at;
    op.value = value;
  });
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventCreate(CUevent* event, unsigned flags) {
  ENTER("cuEventCreate");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto* e = new CUevent_st;
  e->ctx = ctx;
  e->flags = flags;
  auto& s = S();
  std::lock_guard l(s.m);
  s.events.insert(e);
  *event = e;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  ENTER("cuEventDestroy");
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.events.erase(e)) return CUDA_ERROR_INVALID_HANDLE;
  unref(e);  // a stream that still records or waits for it holds it until then
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  ENTER("cuEventRecord");
  if (CUresult r = stream_ready(s)) return r;
  {
    auto& st = S();
    std::lock_guard l(st.m);
    if (!st.events.count(e) || e->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;
  }
  const std::uint64_t seq = e->recorded.fetch_add(1) + 1;
  e->refs.fetch_add(1);
  if (!enqueue(s, [&](Op& op) {
        op.kind = Op::Record;
        op.event = e;
        op.seq = seq;
      }))
    unref(e);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
  ENTER("cuStreamWaitEvent");
  if (CUresult r = stream_ready(s)) return r;
  {
    auto& st = S();
    std::lock_guard l(st.m);
    if (!st.events.count(e) || flags) return CUDA_ERROR_INVALID_HANDLE;
  }
  // The wait is for the event's last record when it is called; none: nothing to wait for.
  const std::uint64_t seq = e->recorded.load();
  if (seq == 0) return CUDA_SUCCESS;
  e->refs.fetch_add(1);
  if (!enqueue(s, [&](Op& op) {
        op.kind = Op::WaitEvent;
        op.event = e;
        op.seq = seq;
      }))
    unref(e);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuEventQuery(CUevent e) {
  ENTER("cuEventQuery");
  {
    auto& st = S();
    std::lock_guard l(st.m);
    if (!st.events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  }
  if (CUresult r = e->ctx->sticky.load()) return r;
  return e->completed.load() >= e->recorded.load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent e) {
  ENTER("cuEventSynchronize");
  {
    auto& st = S();
    std::lock_guard l(st.m);
    if (!st.events.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  }
  const std::uint64_t seq = e->recorded.load();
  while (e->completed.load() < seq && !e->ctx->sticky.load()) std::this_thread::yield();
  return e->ctx->sticky.load();
}

EXPORT CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  ENTER("cuEventElapsedTime");
  {
    auto& st = S();
    std::lock_guard l(st.m);
    if (!st.events.count(a) || !st.events.count(b)) return CUDA_ERROR_INVALID_HANDLE;
  }
  if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = a->ctx->sticky.load()) return r;
  if (!a->recorded.load() || !b->recorded.load()) return CUDA_ERROR_INVALID_HANDLE;
  if (a->completed.load() < a->recorded.load() || b->completed.load() < b->recorded.load())
    return CUDA_ERROR_NOT_READY;
  *ms = float(double(std::int64_t(b->time_ns.load() - a->time_ns.load())) / 1e6);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void* user) {
  ENTER("cuLaunchHostFunc");
  if (CUresult r = stream_ready(s)) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, [&](Op& op) {
    op.kind = Op::Host;
    op.fn = fn;
    op.user = user;
  });
  return CUDA_SUCCESS;
}

// ---- Copies.

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, std::size_t bytes, CUstream s) {
  ENTER("cuMemcpyAsync");
  if (CUresult r = stream_ready(s)) return r;
  if (!bytes) return CUDA_SUCCESS;
  if (!reachable(s->ctx, dst, bytes) || !reachable(s->ctx, src, bytes)) return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, [&](Op& op) {
    op.kind = Op::Copy;
    op.dst = dst, op.src = src, op.width = bytes;
  });
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemcpy2DAsync_v2(const Memcpy2D* c, CUstream s) {
  ENTER("cuMemcpy2DAsync");
  if (CUresult r = stream_ready(s)) return r;
  if (c->srcMemoryType != CU_MEMORYTYPE_UNIFIED || c->dstMemoryType != CU_MEMORYTYPE_UNIFIED || c->srcXInBytes ||
      c->srcY || c->dstXInBytes || c->dstY || c->WidthInBytes > c->srcPitch || c->WidthInBytes > c->dstPitch)
    return CUDA_ERROR_INVALID_VALUE;
  if (!c->WidthInBytes || !c->Height) return CUDA_SUCCESS;
  const std::size_t src_span = (c->Height - 1) * c->srcPitch + c->WidthInBytes;
  const std::size_t dst_span = (c->Height - 1) * c->dstPitch + c->WidthInBytes;
  if (!reachable(s->ctx, c->dstDevice, dst_span) || !reachable(s->ctx, c->srcDevice, src_span))
    return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, [&](Op& op) {
    op.kind = Op::Copy2D;
    op.dst = c->dstDevice, op.src = c->srcDevice;
    op.width = c->WidthInBytes, op.height = c->Height, op.dst_pitch = c->dstPitch, op.src_pitch = c->srcPitch;
  });
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char byte, std::size_t bytes, CUstream s) {
  ENTER("cuMemsetD8Async");
  if (CUresult r = stream_ready(s)) return r;
  if (!bytes) return CUDA_SUCCESS;
  if (!reachable(s->ctx, dst, bytes)) return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, [&](Op& op) {
    op.kind = Op::Memset;
    op.dst = dst, op.width = bytes, op.byte = byte;
  });
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr dst, std::size_t pitch, unsigned char byte, std::size_t width,
                                  std::size_t height, CUstream s) {
  ENTER("cuMemsetD2D8Async");
  if (CUresult r = stream_ready(s)) return r;
  if (width > pitch) return CUDA_ERROR_INVALID_VALUE;
  if (!width || !height) return CUDA_SUCCESS;
  if (!reachable(s->ctx, dst, (height - 1) * pitch + width)) return CUDA_ERROR_INVALID_VALUE;
  enqueue(s, [&](Op& op) {
    op.kind = Op::Memset2D;
    op.dst = dst, op.width = width, op.height = height, op.dst_pitch = pitch, op.byte = byte;
  });
  return CUDA_SUCCESS;
}

// ---- Modules and launches.

EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned count, int* options,
                                   void** values) {
  ENTER("cuModuleLoadDataEx");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto m = std::make_unique<CUmod_st>();
  m->ctx = ctx;
  std::string log;
  CUresult r = load_module(image, *m, log);
  // The JIT's error log, as CU_JIT_ERROR_LOG_BUFFER asks: NUL-terminated, its size written
  // back in place of the buffer's size.
  char* buffer = nullptr;
  std::size_t size = 0;
  int size_at = -1;
  for (unsigned i = 0; i < count; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) buffer = static_cast<char*>(values[i]);
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      size = reinterpret_cast<std::uintptr_t>(values[i]);
      size_at = int(i);
    }
  }
  if (buffer && size) {
    std::size_t n = std::min(log.size(), size - 1);
    std::memcpy(buffer, log.data(), n);
    buffer[n] = 0;
    values[size_at] = reinterpret_cast<void*>(std::uintptr_t(n));
  }
  if (r) return r;
  auto& s = S();
  std::lock_guard l(s.m);
  for (auto& f : m->functions) s.functions.insert(&f);
  *module = m.get();
  s.modules.insert(m.release());
  return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleUnload(CUmodule m) {
  ENTER("cuModuleUnload");
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.modules.erase(m)) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = m->ctx->sticky.load()) return r;
  for (auto& f : m->functions) s.functions.erase(&f);
  delete m;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  ENTER("cuModuleGetFunction");
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
  for (auto& fn : m->functions)
    if (fn.name == name) {
      *f = &fn;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuFuncGetAttribute(int* value, int attribute, CUfunction f) {
  ENTER("cuFuncGetAttribute");
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.functions.count(f)) return CUDA_ERROR_INVALID_HANDLE;
  switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = f->max_threads; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *value = f->static_shared; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = f->max_dynamic_shared; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncSetAttribute(CUfunction f, int attribute, int value) {
  ENTER("cuFuncSetAttribute");
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.functions.count(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0 ||
      std::size_t(value + f->static_shared) > kSharedOptin)
    return CUDA_ERROR_INVALID_VALUE;
  f->max_dynamic_shared = value;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuFuncGetParamInfo(CUfunction f, std::size_t index, std::size_t* offset, std::size_t* size) {
  ENTER("cuFuncGetParamInfo");
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.functions.count(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (index >= f->sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = f->offsets[index];
  *size = f->sizes[index];
  return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shared, CUstream s, void** kernel_params, void** extra) {
  ENTER("cuLaunchKernel");
  if (CUresult r = stream_ready(s)) return r;
  if (!live_function(f, s->ctx)) return CUDA_ERROR_INVALID_HANDLE;
  const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  if (CUresult r = check_dims(f, grid, block, shared)) return r;
  if (CUresult r = check_params(f, kernel_params, extra)) return r;
  enqueue(s, [&](Op& op) {
    op.kind = Op::Kernel;
    op.launch.func = f;
    std::copy(grid, grid + 3, op.launch.grid);
    std::copy(block, block + 3, op.launch.block);
    op.launch.shared = shared;
    pack(f, kernel_params, extra, op.launch.params);
  });
  return CUDA_SUCCESS;
}

// ---- Graphs.

EXPORT CUresult cuGraphCreate(CUgraph* graph, unsigned flags) {
  ENTER("cuGraphCreate");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  auto* g = new CUgraph_st;
  g->ctx = ctx;
  auto& s = S();
  std::lock_guard l(s.m);
  s.graphs.insert(g);
  *graph = g;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph g, const CUgraphNode* after, std::size_t count,
                                        const KernelNodeParams* p) {
  ENTER("cuGraphAddKernelNode");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  {
    auto& s = S();
    std::lock_guard l(s.m);
    if (!s.graphs.count(g) || g->ctx != ctx) return CUDA_ERROR_INVALID_HANDLE;
  }
  // Nodes run in the order they were added; each may follow only nodes added before it.
  for (std::size_t i = 0; i < count; ++i)
    if (std::none_of(g->nodes.begin(), g->nodes.end(), [&](auto& n) { return n.get() == after[i]; }))
      return CUDA_ERROR_INVALID_VALUE;
  if (!p || !p->func || p->kern || !live_function(p->func, ctx)) return CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  if (CUresult r = check_dims(p->func, grid, block, p->sharedMemBytes)) return r;
  auto n = std::make_unique<CUgraphNode_st>();
  n->func = p->func;
  std::copy(grid, grid + 3, n->grid);
  std::copy(block, block + 3, n->block);
  n->shared = p->sharedMemBytes;
  if (CUresult r = check_params(p->func, p->kernelParams, p->extra)) return r;
  pack(p->func, p->kernelParams, p->extra, n->params);
  *node = n.get();
  g->nodes.push_back(std::move(n));
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph g, unsigned long long flags) {
  ENTER("cuGraphInstantiateWithFlags");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  auto& s = S();
  std::lock_guard l(s.m);
  if (flags || !s.graphs.count(g) || g->ctx != ctx) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new CUgraphExec_st;
  e->ctx = ctx;
  for (auto& n : g->nodes) {
    Launch launch;
    launch.node = n.get();
    launch.func = n->func;
    std::copy(n->grid, n->grid + 3, launch.grid);
    std::copy(n->block, n->block + 3, launch.block);
    launch.shared = n->shared;
    launch.params = n->params;
    e->nodes.push_back(std::move(launch));
  }
  s.execs.insert(e);
  *exec = e;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode node, const KernelNodeParams* p) {
  ENTER("cuGraphExecKernelNodeSetParams");
  CUctx_st* ctx;
  if (CUresult r = current(ctx)) return r;
  {
    auto& s = S();
    std::lock_guard l(s.m);
    if (!s.execs.count(e) || e->ctx != ctx) return CUDA_ERROR_INVALID_HANDLE;
  }
  auto it = std::find_if(e->nodes.begin(), e->nodes.end(), [&](const Launch& x) { return x.node == node; });
  // "the function must stay the node's function"
  if (it == e->nodes.end() || !p || p->func != it->func) return CUDA_ERROR_INVALID_VALUE;
  const unsigned grid[3] = {p->gridDimX, p->gridDimY, p->gridDimZ};
  const unsigned block[3] = {p->blockDimX, p->blockDimY, p->blockDimZ};
  if (CUresult r = check_dims(p->func, grid, block, p->sharedMemBytes)) return r;
  if (CUresult r = check_params(p->func, p->kernelParams, p->extra)) return r;
  pack(p->func, p->kernelParams, p->extra, it->params);
  std::copy(grid, grid + 3, it->grid);
  std::copy(block, block + 3, it->block);
  it->shared = p->sharedMemBytes;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
  ENTER("cuGraphLaunch");
  if (CUresult r = stream_ready(s)) return r;
  {
    auto& st = S();
    std::lock_guard l(st.m);
    if (!st.execs.count(e) || e->ctx != s->ctx) return CUDA_ERROR_INVALID_HANDLE;
    ++st.graph_launches;
  }
  // The nodes' parameters as of the launch: later updates reach later launches only.
  enqueue(s, [&](Op& op) {
    op.kind = Op::Graph;
    op.graph = e->nodes;
  });
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph g) {
  ENTER("cuGraphDestroy");
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.graphs.count(g)) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = g->ctx->sticky.load()) return r;
  s.graphs.erase(g);
  delete g;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) {
  ENTER("cuGraphExecDestroy");
  auto& s = S();
  std::lock_guard l(s.m);
  if (!s.execs.count(e)) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = e->ctx->sticky.load()) return r;
  s.execs.erase(e);
  delete e;
  return CUDA_SUCCESS;
}

// ---- cuGetProcAddress: the functions by their base names, at an interface version.

namespace {
CUresult find_proc(const char* symbol, void** fn, int version, int* status) {
  auto& s = S();
  *fn = nullptr;
  auto missing = [&](int why) {
    if (status) *status = why;  // 1: symbol not found, 2: version not sufficient
    return CUDA_ERROR_NOT_FOUND;
  };
  const std::string_view name(symbol);
  if (name == "cuFuncGetParamInfo" && (!s.param_info || version < 12040)) return missing(s.param_info ? 2 : 1);
  if ((name == "cuStreamWriteValue64" || name == "cuStreamWaitValue64") && !s.memops_functions) return missing(1);
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&cuInit), &self);
  void* handle = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  // From CUDA 12.0 on, a base name gives its latest interface: the "_v2" export where
  // there is one.
  void* p = version >= 12000 ? dlsym(handle, (std::string(name) + "_v2").c_str()) : nullptr;
  if (!p) p = dlsym(handle, symbol);
  if (handle) dlclose(handle);
  if (!p) return missing(1);
  *fn = p;
  if (status) *status = 0;
  return CUDA_SUCCESS;
}
}  // namespace

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** fn, int version, cuuint64_t flags, int* status) {
  if (!symbol || !fn || flags != CU_GET_PROC_ADDRESS_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  return find_proc(symbol, fn, version, status);
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** fn, int version, cuuint64_t flags) {
  if (!symbol || !fn || flags != CU_GET_PROC_ADDRESS_DEFAULT) return CUDA_ERROR_INVALID_VALUE;
  return find_proc(symbol, fn, version, nullptr);
}

// ---- The test's controls.

EXPORT void fakecuda_fail(const char* function, unsigned long long nth, int result, unsigned long long times) {
  auto& s = S();
  std::lock_guard l(s.m);
  s.plans[function] = {nth, result, nth ? times : 0};
}

EXPORT void fakecuda_fault(int ordinal, int result) {
  auto& s = S();
  if (ordinal < 0 || ordinal >= s.devices) std::abort();
  fail_context(s.primary[std::size_t(ordinal)].get(), result);
}

EXPORT void fakecuda_set(const char* knob, long long value) {
  auto& s = S();
  std::lock_guard l(s.m);
  const std::string_view k(knob);
  if (k == "version") s.version = int(value);
  else if (k == "memops") s.memops = value != 0;
  else if (k == "memops_functions") s.memops_functions = value != 0;
  else if (k == "param_info") s.param_info = value != 0;
  else if (k == "host_visible") s.host_visible = value != 0;
  else if (k == "peer") s.peer = value != 0;
  else if (k == "register") s.registers = value != 0;
  else if (k == "dma_buf") s.dma_buf = value != 0;
  else if (k == "host_dma_buf") s.host_dma_buf = value != 0;
  else {
    std::fprintf(stderr, "fake libcuda: no knob %s\n", knob);
    std::abort();
  }
}

EXPORT long long fakecuda_count(const char* what) {
  auto& s = S();
  std::lock_guard l(s.m);
  const std::string_view w(what);
  auto count_memory = [&](bool registered) {
    return std::count_if(s.memory.begin(), s.memory.end(),
                         [&](auto& m) { return (m.second.kind == Block::Registered) == registered; });
  };
  if (w == "graphs") return (long long)s.graphs.size();
  if (w == "graph_execs") return (long long)s.execs.size();
  if (w == "modules") return (long long)s.modules.size();
  if (w == "streams") return (long long)s.streams.size();
  if (w == "events") return (long long)s.events.size();
  if (w == "allocations") return count_memory(false);
  if (w == "registrations") return count_memory(true);
  if (w == "resets") return s.resets;
  if (w == "launches") return s.launches;
  if (w == "graph_launches") return s.graph_launches;
  if (w == "peer_enables") return s.peer_enables;
  if (w == "dmabufs") return s.dmabufs;
  if (w.rfind("calls:", 0) == 0) {
    auto it = s.calls.find(w.substr(6));
    return it == s.calls.end() ? 0 : it->second;
  }
  std::fprintf(stderr, "fake libcuda: no count %s\n", what);
  std::abort();
}
