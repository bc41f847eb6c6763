// cuda_driver.cpp — the CUDA driver (rig/cuda.hpp), in the contract's order: opening and
// facts, memory, code, the five C functions, sleeping and stopping; then the record's
// graphs (Rig_cuda_abi) and the opener.
#include <rig/cuda.hpp>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>

#include "cuda_api.hpp"
#include "gpu.hpp"

namespace rig::cuda {

using namespace api;

namespace {

constexpr std::size_t kAlignment = 256;  // cuMemAlloc aligns to at least 256 bytes
constexpr int kCompute = 0, kCopy = 1;   // the queues' indices in the facts
constexpr auto kStopWait = std::chrono::seconds(2);
constexpr std::uint64_t kAnchorAge = 1'000'000'000;  // re-anchor timing events each second
constexpr int kAnchorTries = 5;                      // tries at an anchor, keeping the narrowest
constexpr std::uint64_t kAnchorGood = 20'000;        // an anchor known within 10 us is kept at once

// The device whose fill runs on this thread, if any: graph() refuses to run inside a fill.
thread_local const void* t_in_fill = nullptr;

// What room and submit read of a function (Entry::launch), valid while its image is loaded.
struct FunctionInfo {
  CUfunction func = nullptr;
  std::string name;
  std::uint32_t max_threads = 0;  // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
  std::uint32_t max_shared = 0;   // dynamic shared bytes a launch may ask for
  std::optional<std::size_t> params;
};

// An image: a module and the functions resolved in it.
struct Module {
  CUmodule module = nullptr;
  std::uint64_t generation = 0;
  std::deque<FunctionInfo> functions;  // stable addresses
};

// What the record shares with the driver: the record may outlive the driver.
struct Shared {
  std::string name;  // "CUDA:0"
  std::shared_ptr<Gpu> gpu;
  CUcontext context = nullptr;
  std::uint64_t generation = 0;
  std::atomic<bool> stopping{false};
  std::atomic<int> graph_calls{0};        // record.graph calls in flight
  std::atomic<CUresult> failed{CUDA_SUCCESS};  // the context's error, once seen
  std::mutex mutex;
  std::unordered_map<CUfunction, CUmodule> functions;  // entries of images loaded, not unloaded

  const Library& lib() const { return gpu->lib; }
};

Result<cuda_abi::Graph> make_graph(const std::shared_ptr<Shared>& s, std::span<const cuda_abi::Kernel> kernels);

// A region: what alloc, map_host and map_peer made. Its id is this object's address.
struct Block {
  enum Kind { Device, Pinned, Mapped, Borrowed, Peer } kind;
  CUdeviceptr address = 0;
  std::optional<std::uintptr_t> host;
  std::size_t bytes = 0;
  std::uint64_t generation = 0;
  HostBorrow borrow{};  // a Borrowed range's, where it counted in the registry of borrows
};

// A queue: its stream and an event recorded only on it, which the other stream waits for.
struct Lane {
  CUstream stream = nullptr;
  CUevent mark = nullptr;
};

// An event whose host time is known, against which timing events convert to the host clock.
struct Anchor {
  CUevent event = nullptr;
  std::uint64_t host_ns = 0;
  int users = 0;
};

// A timed value's events, until settle converts them.
struct Timed {
  std::uint64_t v = 0;
  CUevent start = nullptr, end = nullptr;
  std::size_t anchor = 0;  // index in anchors_
};

class Driver final : public edge::Driver {
  // The facts' edge: "the state's first member must point to the driver's struct rig_driver".
  struct Edge {
    const rig_driver* table;
    Driver* self;
  };

 public:
  Driver(std::shared_ptr<Shared> shared, volatile std::uint64_t* word, CUdeviceptr word_address,
         CUdeviceptr words_address, std::optional<HostBorrow> word_page)
      : s_(std::move(shared)), lib_(s_->lib()), a_(lib_.api), gpu_(*s_->gpu), ctx_(s_->context),
        word_(word), word_address_(word_address), words_address_(words_address), word_page_(word_page) {
    edge_ = {&kTable, this};
    submitted_ = load(word_);  // "the device's values start after the value the word holds"
    Current c(a_, ctx_);
    auto attribute = [&](int which) {
      int value = 0;
      if (a_.cuDeviceGetAttribute(&value, which, gpu_.device) != CUDA_SUCCESS) value = 0;
      return value;
    };
    for (int k = 0; k < 3; ++k) {
      max_block_[k] = std::uint32_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X + k));
      max_grid_[k] = std::uint32_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X + k));
    }
    max_threads_ = std::uint32_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
    max_pitch_ = std::size_t(attribute(CU_DEVICE_ATTRIBUTE_MAX_PITCH));
    optin_shared_ = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    cc_major_ = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    cc_minor_ = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    l2_ = std::size_t(attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE));
    maps_host_ = attribute(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED) != 0;
    mapped_ = a_.cuMemAllocManaged && attribute(CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST) != 0;
    std::size_t free = 0, total = 0;
    if (CUresult r = a_.cuMemGetInfo(&free, &total)) throw setup_error("cuMemGetInfo", r);
    budget_ = free;
    char bus[32] = {};
    if (a_.cuDeviceGetPCIBusId(bus, sizeof bus - 1, gpu_.device) == CUDA_SUCCESS && bus[0]) {
      bus_ = bus;
      std::transform(bus_->begin(), bus_->end(), bus_->begin(), [](char ch) { return char(std::tolower(ch)); });
    }
    for (auto& lane : lanes_) {
      if (CUresult r = a_.cuStreamCreate(&lane.stream, CU_STREAM_NON_BLOCKING)) {
        release_streams();
        throw setup_error("cuStreamCreate", r);
      }
      if (CUresult r = a_.cuEventCreate(&lane.mark, CU_EVENT_DISABLE_TIMING)) {
        release_streams();
        throw setup_error("cuEventCreate", r);
      }
    }
    auto record = std::make_shared<cuda_abi::Record>();
    record->symbol = [lib = &lib_](std::string_view name) -> void* {
      std::string n(name);
      return dlsym(lib->handle, n.c_str());
    };
    record->graph = [s = s_](std::span<const cuda_abi::Kernel> kernels) { return make_graph(s, kernels); };
    record_ = std::move(record);
  }

  ~Driver() override {
    if (!stopped_) stop("the driver was dropped without stop");
    // The page borrowed for the word goes back once no stream may write the word: streams
    // still busy at stop keep it, as they keep the device's memory.
    if (word_page_ && quiet_) return_host(lib_, *word_page_);
  }

  edge::Facts facts() override {
    edge::Facts f;
    f.arch = fmt::format("sm_{}{}", cc_major_, cc_minor_);
    f.budget = budget_;
    f.queues = {{"COMPUTE:0", {Kind::Fill, Kind::Launch}}, {"COPY:0", {Kind::Copy, Kind::Fill}}};
    f.copy_engine = kCopy;
    f.completion = edge::Completion::Store;
    f.waits = {true, true};
    f.may_block = true;
    f.maps_host = maps_host_;
    f.host_addresses = false;
    f.alignment = kAlignment;
    if (l2_) f.cache_bytes = l2_;
    f.capability = cuda_abi::declare(record_);
    f.word = word_;
    f.bus = bus_;
    f.edge = &edge_;
    return f;
  }

  // ---- Memory.

  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override {
    Current c(a_, ctx_);
    auto b = std::make_unique<Block>();
    b->bytes = bytes;
    b->generation = s_->generation;
    CUresult r = CUDA_SUCCESS;
    const char* call = "";
    if (memory == Memory::Device) {
      b->kind = Block::Device;
      call = "cuMemAlloc";
      r = a_.cuMemAlloc(&b->address, bytes);
    } else if (memory == Memory::Pinned) {
      b->kind = Block::Pinned;
      call = "cuMemHostAlloc";
      void* host = nullptr;
      r = a_.cuMemHostAlloc(&host, bytes, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
      if (r == CUDA_SUCCESS) {
        b->host = reinterpret_cast<std::uintptr_t>(host);
        if (CUresult e = a_.cuMemHostGetDevicePointer(&b->address, host, 0)) {
          a_.cuMemFreeHost(host);
          throw fault("cuMemHostGetDevicePointer", e);
        }
      }
    } else {
      // No window where the host cannot address the GPU's memory: rig falls back to Pinned.
      if (!mapped_) return std::nullopt;
      b->kind = Block::Mapped;
      call = "cuMemAllocManaged";
      r = a_.cuMemAllocManaged(&b->address, bytes, CU_MEM_ATTACH_GLOBAL);
      if (r == CUDA_SUCCESS) {
        b->host = std::uintptr_t(b->address);
        // The device's own memory: keep its pages on the GPU (a hint; an error changes nothing).
        if (a_.cuMemAdvise)
          a_.cuMemAdvise(b->address, bytes, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, gpu_.device);
      }
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return std::nullopt;  // rig reclaims memory and asks again
    if (r != CUDA_SUCCESS) throw fault(call, r);
    return edge::Region{reinterpret_cast<std::uintptr_t>(b.release())};
  }

  void free(edge::Region region) override {
    std::unique_ptr<Block> b(block(region));
    // A region of a context that a reset destroyed is gone with it; freeing it again could
    // free memory of the new generation at the same address.
    const bool alive = b->generation == gpu_.generation();
    Current c(a_, ctx_);
    switch (b->kind) {
      case Block::Device:
      case Block::Mapped:
        if (alive) a_.cuMemFree(b->address);
        break;
      case Block::Pinned:
        if (alive) a_.cuMemFreeHost(reinterpret_cast<void*>(*b->host));
        break;
      case Block::Borrowed:
        if (b->borrow.registered) return_host(lib_, b->borrow);
        break;
      case Block::Peer:
        break;
    }
  }

  edge::Location locate(edge::Region region) override {
    const Block& b = *block(region);
    return {b.address, b.host, std::intptr_t(b.address)};
  }

  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes) override {
    if (!maps_host_ || bytes == 0) return edge::Never{};
    bool no_room = false;
    auto borrow = borrow_host(gpu_, host, bytes, no_room);
    if (no_room) return edge::NoRoom{};
    if (!borrow) return edge::Never{};
    auto* b = new Block{Block::Borrowed, borrow->address, host, bytes, s_->generation, *borrow};
    return edge::Region{reinterpret_cast<std::uintptr_t>(b)};
  }

  edge::Mapping map_peer(const edge::Location& peer, std::size_t bytes) override {
    if (!peer.address) return edge::Never{};
    const CUdeviceptr at = *peer.address;
    Current c(a_, ctx_);
    unsigned type = 0;
    if (a_.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, at) != CUDA_SUCCESS)
      return edge::Never{};  // not memory CUDA knows
    auto peer_block = [&] {
      auto* b = new Block{Block::Peer, at, std::nullopt, bytes, s_->generation, {}};
      return edge::Region{reinterpret_cast<std::uintptr_t>(b)};
    };
    if (type == CU_MEMORYTYPE_HOST) return peer_block();  // mapped host memory: portable, one address
    int ordinal = -1;
    if (a_.cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, at) != CUDA_SUCCESS)
      return edge::Never{};
    if (ordinal == gpu_.ordinal) return peer_block();
    auto other = Gpu::get(lib_, ordinal);
    if (!other) return edge::Never{};
    int can = 0;
    if (a_.cuDeviceCanAccessPeer(&can, gpu_.device, (*other)->device) != CUDA_SUCCESS || !can) return edge::Never{};
    CUresult r = a_.cuCtxEnablePeerAccess((*other)->context(), 0);
    if (r == CUDA_ERROR_TOO_MANY_PEERS) return edge::NoRoom{};
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return edge::Never{};
    return peer_block();
  }

  // cuMemGetHandleForAddressRange's dma-buf of the host pages a region lies on (offset: its
  // first byte's place in them); an Error naming CUDA's result where it refuses.
  Result<edge::Dma> dma(edge::Region region, std::string_view) override {
    const Block& b = *block(region);
    const std::string where = fmt::format("{}: {} bytes at {:#x}", s_->name, b.bytes, b.address);
    if (b.generation != gpu_.generation())
      return std::unexpected(fmt::format("{}: memory of a context that a reset destroyed", where));
    int supported = 0;
    switch (b.kind) {
      case Block::Device:
        supported = CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED;
        break;
      case Block::Pinned:
        supported = CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED;
        break;
      case Block::Mapped:
        return std::unexpected(fmt::format(
            "{}: managed memory (cuMemAllocManaged), which CUDA gives no dma-buf of: only cuMemAlloc and "
            "cuMemHostAlloc ranges have one",
            where));
      case Block::Borrowed:
      case Block::Peer:
        return std::unexpected(fmt::format("{}: another device's memory mapped here; its own driver describes it", where));
    }
    if (!a_.cuMemGetHandleForAddressRange)
      return std::unexpected(fmt::format("{}: this libcuda has no cuMemGetHandleForAddressRange (CUDA 11.7 on)", where));
    Current c(a_, ctx_);
    // The range starts and ends on host pages, as cuMemGetHandleForAddressRange requires.
    const auto page = std::uint64_t(sysconf(_SC_PAGESIZE));
    const std::uint64_t first = b.address / page * page;
    const std::uint64_t end = (b.address + b.bytes + page - 1) / page * page;
    int fd = -1;
    CUresult r = a_.cuMemGetHandleForAddressRange(&fd, first, end - first, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS) {
      int value = 0;
      a_.cuDeviceGetAttribute(&value, supported, gpu_.device);
      return std::unexpected(fmt::format("{}: cuMemGetHandleForAddressRange failed: {} (the GPU's {} is {})", where,
                                         describe(lib_, r),
                                         supported == CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
                                             ? "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED"
                                             : "CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED",
                                         value));
    }
    // The contract's dma-buf is close-on-exec; CUDA does not say that its descriptor is.
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    return edge::Dma{edge::Dmabuf{fd, std::size_t(b.address - first)}};
  }

  // ---- Code.

  Result<edge::Code> image(std::span<const std::byte> binary) override {
    gpu_.drain();  // "The driver's next … image load … destroys the queued graphs"
    if (binary.empty()) return std::unexpected(std::string("an empty binary is no cubin, fatbin or PTX"));
    // A cubin is an ELF file, a fatbin starts with its magic 0xBA55ED50 (little-endian), and
    // anything else is taken as PTX text, which CUDA reads up to a NUL: add one.
    const auto* bytes = reinterpret_cast<const unsigned char*>(binary.data());
    const char* what = "PTX";
    if (binary.size() >= 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' && bytes[3] == 'F')
      what = "cubin";
    else if (binary.size() >= 4 && bytes[0] == 0x50 && bytes[1] == 0xED && bytes[2] == 0x55 && bytes[3] == 0xBA)
      what = "fatbin";
    std::vector<char> data(binary.size() + 1, 0);
    std::memcpy(data.data(), binary.data(), binary.size());
    std::vector<char> error_log(16384, 0), info_log(4096, 0);
    int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                     CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {error_log.data(), reinterpret_cast<void*>(std::uintptr_t(error_log.size() - 1)),
                      info_log.data(), reinterpret_cast<void*>(std::uintptr_t(info_log.size() - 1))};
    CUmodule module = nullptr;
    CUresult r;
    {
      Current c(a_, ctx_);
      r = a_.cuModuleLoadDataEx(&module, data.data(), 4, options, values);
    }
    if (r != CUDA_SUCCESS) {
      note(r);
      std::string log(error_log.data());
      while (!log.empty() && std::isspace(static_cast<unsigned char>(log.back()))) log.pop_back();
      return std::unexpected(fmt::format("CUDA rejected the {} ({} bytes): {}{}{}", what, binary.size(),
                                         describe(lib_, r), log.empty() ? "" : "; JIT log: ", log));
    }
    auto* m = new Module{module, s_->generation, {}};
    gpu_.retain(module);
    return edge::Code{edge::Loaded{reinterpret_cast<edge::ImageId>(m)}};
  }

  edge::EntryAnswer entry(edge::ImageId image, std::string_view name) override {
    auto& m = *reinterpret_cast<Module*>(image);
    for (auto& f : m.functions)
      if (f.name == name) return answer(f);
    std::string n(name);
    Current c(a_, ctx_);
    CUfunction func = nullptr;
    CUresult r = a_.cuModuleGetFunction(&func, m.module, n.c_str());
    if (r == CUDA_ERROR_NOT_FOUND) return edge::Absent{};
    if (r != CUDA_SUCCESS) throw fault(fmt::format("cuModuleGetFunction({})", name), r);
    FunctionInfo info;
    info.func = func;
    info.name = n;
    int value = 0;
    if ((r = a_.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, func)))
      throw fault(fmt::format("cuFuncGetAttribute({})", name), r);
    info.max_threads = std::uint32_t(value);
    // Let launches use the GPU's opt-in shared memory: the function's limit is otherwise the
    // default 48 KiB less its static shared memory.
    int static_shared = 0;
    a_.cuFuncGetAttribute(&static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, func);
    if (optin_shared_ > static_shared)
      a_.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, optin_shared_ - static_shared);
    if (a_.cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, func) != CUDA_SUCCESS)
      value = 0;
    info.max_shared = std::uint32_t(value);
    info.params = params_of(func);
    m.functions.push_back(std::move(info));
    {
      std::lock_guard l(s_->mutex);
      s_->functions[func] = m.module;
    }
    return answer(m.functions.back());
  }

  void unload(edge::ImageId image) override {
    gpu_.drain();  // the queued graphs go before the modules they kept
    std::unique_ptr<Module> m(reinterpret_cast<Module*>(image));
    std::lock_guard l(s_->mutex);  // so that no graph retains the module meanwhile
    for (auto& f : m->functions) s_->functions.erase(f.func);
    gpu_.release(m->module, m->generation);
  }

  // ---- The C functions.

  static int room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t, char* why) {
    auto& d = self(edge);
    for (std::uint32_t i = 0; i < count; ++i)
      if (d.runs(parts[i], i, why) == RIG_NEVER) return RIG_NEVER;
    return RIG_FITS;  // the streams hold any amount of work
  }

  static int submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                    std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times, const char** failure) {
    auto& d = self(edge);
    d.submitted_ = v;  // "the last value rig gave the driver's submit", even if it fails
    if (count == 0) return d.fail(failure, fmt::format("value {} has no parts", v));
    Current c(d.a_, d.ctx_);
    if (int r = d.encode(parts, count, waits, wait_count, v, times, failure); r != RIG_OK) return r;
    return RIG_COMMITTED;  // CUDA runs what is enqueued: the commit bound k is 1
  }

  static int commit(void*, std::uint64_t, const char**) { return RIG_OK; }

  static int settle(void* edge, std::uint64_t v, std::uint64_t* times, const char** failure) {
    return self(edge).settle_value(v, times, failure);
  }

  // ---- Sleeping and stopping.

  // Polls the streams until the word shows v or `most` passed: a CUDA error there (a fault
  // of the context) is the device's fault.
  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override {
    if (stopped_) return;
    const auto until = std::chrono::steady_clock::now() + most;
    auto pause = std::chrono::microseconds(2);
    Current c(a_, ctx_);
    while (load(word_) < v) {
      for (auto& lane : lanes_) {
        CUresult r = a_.cuStreamQuery(lane.stream);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY) {
          note(r);
          s_->failed.store(r);
          throw edge::Fault(describe(lib_, r));
        }
      }
      if (std::chrono::steady_clock::now() >= until) return;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }

  void stop(std::string_view) override {
    s_->stopping.store(true);
    while (s_->graph_calls.load() > 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    stopped_ = true;
    Current c(a_, ctx_);
    enum { Idle, Failed, Busy } state = Busy;
    // A reset since (the open of a later handle after this one's context failed) destroyed
    // this handle's streams and events with the rest of the context: nothing of it runs, and
    // its handles may name objects of the new generation, which are not its to query or
    // destroy.
    if (s_->generation != gpu_.generation()) state = Failed;
    const auto until = std::chrono::steady_clock::now() + kStopWait;
    while (state == Busy && std::chrono::steady_clock::now() < until) {
      bool idle = true;
      for (auto& lane : lanes_) {
        CUresult r = a_.cuStreamQuery(lane.stream);
        if (r == CUDA_ERROR_NOT_READY) idle = false;
        else if (r != CUDA_SUCCESS) state = Failed, note(r), s_->failed.store(r);
      }
      if (state == Busy && idle) state = Idle;
      if (state == Busy) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (state == Busy) return;  // work still runs: its memory stays, and so does the word
    quiet_ = true;
    // Nothing runs any more: "once the word shows the device's last submitted value, rig frees
    // the device's remaining memory". Only ever raise it.
    std::uint64_t w = load(word_);
    while (w < submitted_ && !__atomic_compare_exchange_n(word_, &w, submitted_, true, __ATOMIC_RELEASE,
                                                          __ATOMIC_ACQUIRE)) {
    }
    if (state == Idle) release_streams();
  }

 private:
  static const rig_driver kTable;
  static Driver& self(void* edge) { return *static_cast<Edge*>(edge)->self; }
  static std::uint64_t load(const volatile std::uint64_t* w) { return __atomic_load_n(w, __ATOMIC_ACQUIRE); }

  std::runtime_error setup_error(const char* call, CUresult r) {
    return std::runtime_error(fmt::format("{} failed: {}", call, describe(lib_, r)));
  }
  edge::Fault fault(std::string_view call, CUresult r) {
    note(r);
    return edge::Fault(fmt::format("{} failed: {}", call, describe(lib_, r)));
  }
  void note(CUresult) { gpu_.suspect(); }
  int fail(const char** failure, std::string why) {
    *failure = messages_.emplace_back(std::move(why)).c_str();
    return RIG_FAILED;
  }
  int fail(const char** failure, const char* call, std::uint64_t v, CUresult r) {
    note(r);
    return fail(failure, fmt::format("{} of value {} failed: {}", call, v, describe(lib_, r)));
  }

  Block* block(edge::Region r) { return reinterpret_cast<Block*>(r.id); }

  static edge::Entry answer(const FunctionInfo& f) {
    return edge::Entry{reinterpret_cast<std::uint64_t>(f.func), &f, f.params, f.max_threads};
  }

  // The parameter bytes a function reads: the end of its last parameter, from
  // cuFuncGetParamInfo; unknown where libcuda lacks it or cannot say.
  std::optional<std::size_t> params_of(CUfunction func) {
    if (!a_.cuFuncGetParamInfo) return std::nullopt;
    std::size_t end = 0;
    for (std::size_t i = 0;; ++i) {
      std::size_t offset = 0, size = 0;
      CUresult r = a_.cuFuncGetParamInfo(func, i, &offset, &size);
      if (r == CUDA_ERROR_INVALID_VALUE) return end;  // past the last parameter
      if (r != CUDA_SUCCESS) return std::nullopt;
      end = std::max(end, offset + size);
    }
  }

  // room's test of one part: a kind its queue runs, and a launch within the limits.
  // RIG_FITS, or RIG_NEVER with the reason in why.
  int runs(const rig_part& p, std::uint32_t i, char* why) const {
    static constexpr const char* queue_names[] = {"COMPUTE:0", "COPY:0"};
    if (p.queue != kCompute && p.queue != kCopy)
      return rig_never(why, "part %u: queue %u, but the device has 2 queues", i, p.queue);
    switch (p.kind) {
      case RIG_KIND_FILL: return RIG_FITS;
      case RIG_KIND_COPY:
        if (p.queue == kCopy) return RIG_FITS;
        return rig_never(why, "part %u: queue COMPUTE:0 does not run Copy (COPY:0 does)", i);
      case RIG_KIND_LAUNCH:
        if (p.queue == kCompute) break;
        return rig_never(why, "part %u: queue COPY:0 does not run Launch (COMPUTE:0 does)", i);
      case RIG_KIND_WORDS: return rig_never(why, "part %u: queue %s does not run Words", i, queue_names[p.queue]);
      default: return rig_never(why, "part %u: kind %u, no kind of work", i, p.kind);
    }
    const auto& l = p.work.launch;
    const auto* f = static_cast<const FunctionInfo*>(l.launch);
    if (!f) return rig_never(why, "part %u: a launch of no function", i);
    static constexpr char axes[] = "xyz";
    std::uint64_t threads = 1;
    for (int k = 0; k < 3; ++k) {
      if (l.groups[k] == 0 || l.threads[k] == 0)
        return rig_never(why, "part %u: a launch of %ux%ux%u groups of %ux%ux%u threads has an empty dimension", i,
                         l.groups[0], l.groups[1], l.groups[2], l.threads[0], l.threads[1], l.threads[2]);
      if (max_grid_[k] && l.groups[k] > max_grid_[k])
        return rig_never(why, "part %u: %s groups in %c, over the GPU's limit of %s", i,
                         edge::count_figure(l.groups[k]).text, axes[k], edge::count_figure(max_grid_[k]).text);
      if (max_block_[k] && l.threads[k] > max_block_[k])
        return rig_never(why, "part %u: %u threads in %c, over the GPU's limit of %u per block", i, l.threads[k],
                         axes[k], max_block_[k]);
      threads *= l.threads[k];
    }
    if (f->max_threads && threads > f->max_threads)
      return rig_never(why, "part %u: %llu threads per block, over %s's limit of %u", i, (unsigned long long)threads,
                       f->name.c_str(), f->max_threads);
    if (max_threads_ && threads > max_threads_)
      return rig_never(why, "part %u: %llu threads per block, over the GPU's limit of %u", i,
                       (unsigned long long)threads, max_threads_);
    if (l.shared > f->max_shared)
      return rig_never(why, "part %u: %s of dynamic shared memory, over %s's limit of %s", i,
                       edge::bytes_figure(l.shared).text, f->name.c_str(), edge::bytes_figure(f->max_shared).text);
    return RIG_FITS;
  }

  // Places value v's work on the streams (the context current).
  int encode(rig_part* parts, std::uint32_t count, const rig_wait* waits, std::uint32_t wait_count,
             std::uint64_t v, std::uint64_t* times, const char** failure) {
    bool used[2] = {false, false};
    for (std::uint32_t i = 0; i < count; ++i) used[parts[i].queue] = true;
    const int head = int(parts[0].queue), last = int(parts[count - 1].queue);
    CUresult r;

    // Device order: a stream that does not already follow the previous value waits for the
    // stream that completed it (its mark, recorded once, after that value's word write).
    bool marked = false;
    for (int q : {head, 1 - head}) {
      if (!used[q] || follows_[q]) continue;
      if (!marked) {
        if ((r = a_.cuEventRecord(lanes_[last_lane_].mark, lanes_[last_lane_].stream)))
          return fail(failure, "cuEventRecord", v, r);
        marked = true;
      }
      if ((r = a_.cuStreamWaitEvent(lanes_[q].stream, lanes_[last_lane_].mark, 0)))
        return fail(failure, "cuStreamWaitEvent", v, r);
    }

    // Foreign waits, on each stream the value uses. A word in rig_words has a device
    // address; another word is waited for here, on the host.
    const auto words_first = reinterpret_cast<std::uintptr_t>(&rig_words[0]);
    for (std::uint32_t i = 0; i < wait_count; ++i) {
      const auto at = reinterpret_cast<std::uintptr_t>(waits[i].word);
      if (at >= words_first && at < words_first + sizeof rig_words) {
        for (int q : {0, 1})
          if (used[q] && (r = a_.cuStreamWaitValue64(lanes_[q].stream, words_address_ + (at - words_first),
                                                     waits[i].value, CU_STREAM_WAIT_VALUE_GEQ)))
            return fail(failure, "cuStreamWaitValue64", v, r);
      } else {
        for (auto pause = std::chrono::microseconds(1); load(waits[i].word) < waits[i].value;
             pause = std::min(pause * 2, std::chrono::microseconds(200)))
          std::this_thread::sleep_for(pause);
      }
    }

    Timed* timed = nullptr;
    if (times) {
      if (int t = begin_timing(v, timed, failure); t != RIG_OK) return t;
      if ((r = a_.cuEventRecord(timed->start, lanes_[head].stream))) return fail(failure, "cuEventRecord", v, r);
    }

    for (std::uint32_t i = 0; i < count; ++i) {
      rig_part& p = parts[i];
      const int q = int(p.queue);
      // "the parts of other queues it starts after": the other stream's work so far.
      bool joined = false;
      for (std::uint32_t k = 0; k < p.after_count && !joined; ++k) {
        if (int(parts[p.after[k]].queue) == q) continue;
        if ((r = join(1 - q, q))) return fail(failure, "cuStreamWaitEvent", v, r);
        joined = true;
      }
      CUstream stream = lanes_[q].stream;
      if (p.kind == RIG_KIND_LAUNCH) {
        const auto& l = p.work.launch;
        const auto* f = static_cast<const FunctionInfo*>(l.launch);
        std::size_t size = l.param_bytes;
        void* extra[] = {cuda_abi::kLaunchParamBufferPointer, const_cast<void*>(l.params),
                         cuda_abi::kLaunchParamBufferSize, &size, cuda_abi::kLaunchParamEnd};
        if ((r = a_.cuLaunchKernel(f->func, l.groups[0], l.groups[1], l.groups[2], l.threads[0], l.threads[1],
                                   l.threads[2], l.shared, stream, nullptr, size ? extra : nullptr))) {
          note(r);
          return fail(failure, fmt::format("cuLaunchKernel of {} of value {} failed: {}", f->name, v,
                                           describe(lib_, r)));
        }
      } else if (p.kind == RIG_KIND_COPY) {
        if ((r = copy(p.work.copy, stream)))
          return fail(failure, p.work.copy.fill >= 0 ? "a fill (cuMemsetD8Async)" : "a copy (cuMemcpyAsync)", v, r);
      } else if (p.kind == RIG_KIND_FILL) {
        t_in_fill = this;
        int code = p.work.fill.fn(stream, p.work.fill.arg, v);
        t_in_fill = nullptr;
        if (code) {
          note(code);
          return fail(failure, fmt::format("the fill of value {} returned {}", v, describe(lib_, code)));
        }
        CUcontext now = nullptr;
        if (a_.cuCtxGetCurrent(&now) == CUDA_SUCCESS && now != ctx_) {
          a_.cuCtxSetCurrent(ctx_);
          return fail(failure, fmt::format("the fill of value {} changed the current context", v));
        }
      } else {
        return fail(failure, fmt::format("value {} has a part of kind {}, which no queue runs", v, p.kind));
      }
    }

    // Completion: the last part's stream waits for the other stream's work of v, then writes
    // v into the word.
    if (used[1 - last] && (r = join(1 - last, last))) return fail(failure, "cuStreamWaitEvent", v, r);
    if (timed && (r = a_.cuEventRecord(timed->end, lanes_[last].stream))) return fail(failure, "cuEventRecord", v, r);
    if ((r = a_.cuStreamWriteValue64(lanes_[last].stream, word_address_, v, CU_STREAM_WRITE_VALUE_DEFAULT)))
      return fail(failure, "cuStreamWriteValue64", v, r);
    last_lane_ = last;
    follows_[last] = true;
    follows_[1 - last] = false;
    return RIG_OK;
  }

  // Makes stream `to` wait for the work stream `from` holds now.
  CUresult join(int from, int to) {
    if (CUresult r = a_.cuEventRecord(lanes_[from].mark, lanes_[from].stream)) return r;
    return a_.cuStreamWaitEvent(lanes_[to].stream, lanes_[from].mark, 0);
  }

  // A copy's boxes, or a fill of its destination with a byte, on `stream`.
  CUresult copy(const rig_copy& c, CUstream stream) {
    const CUdeviceptr src = c.src ? c.src : CUdeviceptr(c.src_handle) + c.src_offset;
    const CUdeviceptr dst = c.dst ? c.dst : CUdeviceptr(c.dst_handle) + c.dst_offset;
    for (std::uint32_t i = 0; i < c.count; ++i) {
      const rig_box& b = c.boxes[i];
      if (b.rows == 0 || b.width == 0) continue;
      const CUdeviceptr to = dst + b.dst_offset, from = src + b.src_offset;
      const bool dense = b.rows == 1 || (b.src_pitch == b.width && b.dst_pitch == b.width);
      const bool pitched = (!max_pitch_ || (b.src_pitch <= max_pitch_ && b.dst_pitch <= max_pitch_));
      CUresult r = CUDA_SUCCESS;
      if (c.fill >= 0) {
        const auto byte = static_cast<unsigned char>(c.fill);
        if (b.rows == 1 || b.dst_pitch == b.width) {
          r = a_.cuMemsetD8Async(to, byte, b.width * b.rows, stream);
        } else if (pitched) {
          r = a_.cuMemsetD2D8Async(to, b.dst_pitch, byte, b.width, b.rows, stream);
        } else {
          for (std::uint64_t row = 0; row < b.rows && !r; ++row)
            r = a_.cuMemsetD8Async(to + row * b.dst_pitch, byte, b.width, stream);
        }
      } else if (dense) {
        r = a_.cuMemcpyAsync(to, from, b.width * b.rows, stream);
      } else if (pitched) {
        Memcpy2D m;
        m.srcMemoryType = m.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
        m.srcDevice = from;
        m.dstDevice = to;
        m.srcPitch = b.src_pitch;
        m.dstPitch = b.dst_pitch;
        m.WidthInBytes = b.width;
        m.Height = b.rows;
        r = a_.cuMemcpy2DAsync(&m, stream);
      } else {
        for (std::uint64_t row = 0; row < b.rows && !r; ++row)
          r = a_.cuMemcpyAsync(to + row * b.dst_pitch, from + row * b.src_pitch, b.width, stream);
      }
      if (r) return r;
    }
    return CUDA_SUCCESS;
  }

  // ---- Profiles: timing events, converted to the host clock against anchors.

  // A timing event pair for value v, against an anchor no older than a second.
  int begin_timing(std::uint64_t v, Timed*& timed, const char** failure) {
    const std::uint64_t now = rig_now_ns();
    if (anchors_.empty() || now - anchor_made_ > kAnchorAge) {
      if (int r = make_anchor(v, failure); r != RIG_OK) return r;
    }
    Timed t;
    t.v = v;
    t.anchor = anchors_.size() - 1;
    for (CUevent* e : {&t.start, &t.end}) {
      if (!spare_events_.empty()) {
        *e = spare_events_.back();
        spare_events_.pop_back();
      } else if (CUresult r = a_.cuEventCreate(e, CU_EVENT_DEFAULT)) {
        return fail(failure, "cuEventCreate", v, r);
      }
    }
    ++anchors_[t.anchor].users;
    timed_.push_back(t);
    timed = &timed_.back();
    return RIG_OK;
  }

  // Records an anchor on the idle anchor stream and polls until it completes: its host time
  // is the middle of that interval. The narrowest of a few tries is kept. Unused older
  // anchors are destroyed.
  int make_anchor(std::uint64_t v, const char** failure) {
    CUresult r;
    if (!anchor_stream_ && (r = a_.cuStreamCreate(&anchor_stream_, CU_STREAM_NON_BLOCKING)))
      return fail(failure, "cuStreamCreate", v, r);
    Anchor best;
    std::uint64_t narrowest = ~std::uint64_t(0);
    for (int attempt = 0; attempt < kAnchorTries && narrowest > kAnchorGood; ++attempt) {
      CUevent event = nullptr;
      if ((r = a_.cuEventCreate(&event, CU_EVENT_DEFAULT))) return fail(failure, "cuEventCreate", v, r);
      const std::uint64_t before = rig_now_ns();
      r = a_.cuEventRecord(event, anchor_stream_);
      if (r == CUDA_SUCCESS)
        while ((r = a_.cuEventQuery(event)) == CUDA_ERROR_NOT_READY) {
        }
      const std::uint64_t after = rig_now_ns();
      if (r) {
        a_.cuEventDestroy(event);
        if (best.event) a_.cuEventDestroy(best.event);
        return fail(failure, "cuEventRecord of a timing anchor", v, r);
      }
      if (after - before < narrowest) {
        if (best.event) a_.cuEventDestroy(best.event);
        narrowest = after - before;
        best = Anchor{event, before + narrowest / 2, 0};
      } else {
        a_.cuEventDestroy(event);
      }
    }
    anchor_made_ = rig_now_ns();
    for (auto& old : anchors_)
      if (old.users == 0 && old.event) a_.cuEventDestroy(old.event), old.event = nullptr;
    if (std::all_of(anchors_.begin(), anchors_.end(), [](const Anchor& x) { return !x.event; }))
      anchors_.clear();
    anchors_.push_back(best);
    return RIG_OK;
  }

  int settle_value(std::uint64_t v, std::uint64_t* times, const char** failure) {
    auto it = std::find_if(timed_.begin(), timed_.end(), [&](const Timed& t) { return t.v == v; });
    if (it == timed_.end()) {
      if (times[0] || times[1]) return RIG_OK;  // "a later call finds the times written"
      return fail(failure, fmt::format("value {} was not timed", v));
    }
    Current c(a_, ctx_);
    Anchor& anchor = anchors_[it->anchor];
    float start_ms = 0, end_ms = 0;
    CUresult r = a_.cuEventElapsedTime(&start_ms, anchor.event, it->start);
    if (!r) r = a_.cuEventElapsedTime(&end_ms, anchor.event, it->end);
    if (r) return fail(failure, "cuEventElapsedTime", v, r);
    auto host = [&](float ms) { return anchor.host_ns + std::uint64_t(std::max(0.0, double(ms) * 1e6)); };
    std::uint64_t start = host(start_ms), end = host(end_ms);
    // "never puts a value's start before the end of the value converted before it"
    if (v > settled_value_) start = std::max(start, settled_end_);
    end = std::max(end, start);
    if (v > settled_value_) settled_value_ = v, settled_end_ = end;
    times[0] = start;
    times[1] = end;
    spare_events_.push_back(it->start);
    spare_events_.push_back(it->end);
    --anchor.users;
    timed_.erase(it);
    return RIG_OK;
  }

  void release_streams() {
    Current c(a_, ctx_);
    for (auto& lane : lanes_) {
      if (lane.stream) a_.cuStreamDestroy(lane.stream);
      if (lane.mark) a_.cuEventDestroy(lane.mark);
      lane = {};
    }
    if (anchor_stream_) a_.cuStreamDestroy(anchor_stream_), anchor_stream_ = nullptr;
    for (auto& anchor : anchors_)
      if (anchor.event) a_.cuEventDestroy(anchor.event);
    for (auto& t : timed_) a_.cuEventDestroy(t.start), a_.cuEventDestroy(t.end);
    for (CUevent e : spare_events_) a_.cuEventDestroy(e);
    anchors_.clear(), timed_.clear(), spare_events_.clear();
  }

  std::shared_ptr<Shared> s_;
  const Library& lib_;
  const Api& a_;
  Gpu& gpu_;
  const CUcontext ctx_;
  Edge edge_{};
  volatile std::uint64_t* word_;
  const CUdeviceptr word_address_;   // the word, as the streams address it
  const CUdeviceptr words_address_;  // rig_words[0], as the streams address it
  const std::optional<HostBorrow> word_page_;  // the page borrowed for a word outside rig_words
  bool quiet_ = false;  // stop found no stream running (idle, or its context failed)
  std::shared_ptr<const cuda_abi::Record> record_;

  // Facts and limits, read at open.
  std::uint32_t max_block_[3] = {}, max_grid_[3] = {}, max_threads_ = 0;
  std::size_t max_pitch_ = 0, l2_ = 0, budget_ = 0;
  int optin_shared_ = 0, cc_major_ = 0, cc_minor_ = 0;
  bool maps_host_ = false, mapped_ = false;
  std::optional<std::string> bus_;

  // The queues. Only the C functions touch these (one at a time), and stop.
  Lane lanes_[2];
  int last_lane_ = kCompute;             // the stream that completed the last value
  bool follows_[2] = {true, true};       // whether a stream's work already follows that value
  std::uint64_t submitted_ = 0;
  std::deque<std::string> messages_;     // failures handed to rig: they outlive the device

  // Profiles.
  CUstream anchor_stream_ = nullptr;
  std::vector<Anchor> anchors_;
  std::uint64_t anchor_made_ = 0;
  std::deque<Timed> timed_;
  std::vector<CUevent> spare_events_;
  std::uint64_t settled_value_ = 0, settled_end_ = 0;

  std::atomic<bool> stopped_{false};
};

const rig_driver Driver::kTable{room, submit, commit, settle, nullptr};

// ---- The record's graphs.

Result<cuda_abi::Graph> make_graph(const std::shared_ptr<Shared>& s, std::span<const cuda_abi::Kernel> kernels) {
  if (t_in_fill)
    throw std::invalid_argument(fmt::format("{}: the record's graph was called from inside a fill", s->name));
  // "The driver's stop waits for a call in flight."
  s->graph_calls.fetch_add(1);
  struct Leave {
    Shared& s;
    ~Leave() { s.graph_calls.fetch_sub(1); }
  } leave{*s};
  if (s->stopping.load()) return std::unexpected(fmt::format("{}: the device is stopping or stopped", s->name));
  const Library& lib = s->lib();
  const Api& a = lib.api;
  Gpu& gpu = *s->gpu;
  gpu.drain();  // "… or graph construction on that GPU destroys the queued graphs"
  if (CUresult failed = s->failed.load())
    return std::unexpected(fmt::format("{}: its context failed: {}", s->name, describe(lib, failed)));

  // Check every kernel, and keep its module loaded, before changing anything.
  std::vector<CUmodule> modules;
  {
    std::lock_guard l(s->mutex);
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      const auto& k = kernels[i];
      auto it = s->functions.find(k.func);
      if (it == s->functions.end())
        throw std::invalid_argument(fmt::format(
            "{}: kernel {} of the graph: its function belongs to no image loaded on the device", s->name, i));
      for (int d = 0; d < 3; ++d)
        if (k.grid[d] == 0 || k.block[d] == 0)
          throw std::invalid_argument(fmt::format("{}: kernel {} of the graph has a grid {}x{}x{} or block {}x{}x{} "
                                                  "with an empty dimension",
                                                  s->name, i, k.grid[0], k.grid[1], k.grid[2], k.block[0],
                                                  k.block[1], k.block[2]));
      if (std::find(modules.begin(), modules.end(), it->second) == modules.end()) modules.push_back(it->second);
    }
    if (s->generation != gpu.generation())
      return std::unexpected(fmt::format("{}: its context was reset by a later open", s->name));
    for (CUmodule m : modules) gpu.retain(m);
  }
  auto release = [&] {
    for (CUmodule m : modules) gpu.release(m, s->generation);
  };

  Current c(a, s->context);
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::vector<CUgraphNode> nodes;
  auto failed = [&](const char* call, CUresult r) -> Result<cuda_abi::Graph> {
    gpu.suspect();
    if (graph) a.cuGraphDestroy(graph);
    release();
    return std::unexpected(fmt::format("{}: {} failed: {}", s->name, call, describe(lib, r)));
  };
  if (CUresult r = a.cuGraphCreate(&graph, 0)) return failed("cuGraphCreate", r);
  nodes.reserve(kernels.size());
  for (const auto& k : kernels) {
    std::size_t size = k.args.size();
    void* extra[] = {cuda_abi::kLaunchParamBufferPointer, const_cast<std::byte*>(k.args.data()),
                     cuda_abi::kLaunchParamBufferSize, &size, cuda_abi::kLaunchParamEnd};
    KernelNodeParams p;
    p.func = k.func;
    p.gridDimX = k.grid[0], p.gridDimY = k.grid[1], p.gridDimZ = k.grid[2];
    p.blockDimX = k.block[0], p.blockDimY = k.block[1], p.blockDimZ = k.block[2];
    p.extra = size ? extra : nullptr;
    CUgraphNode node = nullptr;
    // Each node depends on the one before it: "each run after the one before it has completed".
    const CUgraphNode* after = nodes.empty() ? nullptr : &nodes.back();
    if (CUresult r = a.cuGraphAddKernelNode(&node, graph, after, after ? 1 : 0, &p))
      return failed("cuGraphAddKernelNode", r);
    nodes.push_back(node);
  }
  if (CUresult r = a.cuGraphInstantiateWithFlags(&exec, graph, 0)) return failed("cuGraphInstantiateWithFlags", r);
  DoomedGraph doomed{exec, graph, modules, s->generation};
  std::shared_ptr<Gpu> owner = s->gpu;
  return cuda_abi::Graph::make(exec, std::move(nodes),
                               [owner, doomed]() mutable { owner->collect(std::move(doomed)); });
}

// ---- Opening.

// libcuda with cuInit done, and the number of GPUs it finds; or why not.
struct Initialized {
  const Library* lib;
  int count;
};
Result<Initialized> initialized(const std::string& library) {
  auto lib = api::load(library);
  if (!lib) return std::unexpected(lib.error());
  const Library& l = **lib;
  CUresult r = l.api.cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE) return Initialized{&l, 0};
  if (r == CUDA_ERROR_STUB_LIBRARY)
    return std::unexpected(fmt::format(
        "libcuda is absent: {} is the CUDA toolkit's stub, not the NVIDIA driver's library ({})", l.path,
        describe(l, r)));
  if (r) return std::unexpected(fmt::format("cuInit of {} failed: {}", l.path, describe(l, r)));
  int count = 0;
  r = l.api.cuDeviceGetCount(&count);
  if (r == CUDA_ERROR_NO_DEVICE) return Initialized{&l, 0};
  if (r) return std::unexpected(fmt::format("cuDeviceGetCount of {} failed: {}", l.path, describe(l, r)));
  return Initialized{&l, count};
}

Result<std::unique_ptr<edge::Driver>> open_gpu(int ordinal, const std::string& library,
                                              volatile std::uint64_t* word) {
  auto init = initialized(library);
  if (!init) return std::unexpected(init.error());
  const Library& l = *init->lib;
  const Api& a = l.api;
  const int count = init->count;
  if (ordinal >= count)
    return std::unexpected(count == 0 ? fmt::format("libcuda ({}) finds no GPU", l.path)
                                      : fmt::format("no GPU {}: libcuda ({}) finds {}", ordinal, l.path, count));
  auto gpu = Gpu::get(l, ordinal);
  if (!gpu) return std::unexpected(gpu.error());
  Gpu& g = **gpu;
  // The timeline needs the stream memory operations, 64-bit: the library's functions, and the
  // GPU's support (an attribute of CUDA 12, or its older name).
  int memops = 0;
  if (a.cuDeviceGetAttribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, g.device) != CUDA_SUCCESS &&
      a.cuDeviceGetAttribute(&memops, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1, g.device) != CUDA_SUCCESS)
    memops = 0;
  if (!l.stream_memops || !memops)
    return std::unexpected(fmt::format(
        "GPU {} ({}) lacks 64-bit stream memory operations ({}), which rig's timeline needs; use a newer NVIDIA "
        "driver, or load the nvidia module with NVreg_EnableStreamMemOPs=1",
        ordinal, g.name,
        !l.stream_memops ? fmt::format("{} has no cuStreamWriteValue64/cuStreamWaitValue64", l.path)
                         : std::string("CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0")));
  int unified = 0;
  if (a.cuDeviceGetAttribute(&unified, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, g.device) != CUDA_SUCCESS || !unified)
    return std::unexpected(fmt::format("GPU {} ({}) lacks unified addressing, which rig's copies need", ordinal, g.name));
  // "The driver's next open … destroys the queued graphs", then a failed context is reset.
  g.drain();
  if (auto recovered = g.recover(); !recovered)
    return std::unexpected(fmt::format("GPU {} ({}): {}", ordinal, g.name, recovered.error()));
  auto words = g.words();
  if (!words) return std::unexpected(fmt::format("GPU {} ({}): {}", ordinal, g.name, words.error()));
  auto shared = std::make_shared<Shared>();
  shared->name = fmt::format("CUDA:{}", ordinal);
  shared->gpu = *gpu;
  shared->context = g.context();
  shared->generation = g.generation();
  const auto first = reinterpret_cast<std::uintptr_t>(&rig_words[0]);
  const auto at = reinterpret_cast<std::uintptr_t>(word);
  CUdeviceptr word_address = 0;
  std::optional<HostBorrow> word_page;  // the page borrowed for a word of the caller's own
  if (at >= first && at < first + sizeof rig_words) {
    word_address = *words + (at - first);
  } else {
    // A word of the caller's own (make called directly, as an agent of remote devices does).
    auto mapped = caller_word(g, word, word_page);
    if (!mapped) return std::unexpected(fmt::format("GPU {} ({}): {}", ordinal, g.name, mapped.error()));
    word_address = *mapped;
  }
  try {
    return std::make_unique<Driver>(std::move(shared), word, word_address, *words, word_page);
  } catch (const std::runtime_error& e) {  // "an Error leaves no work that writes the word"
    if (word_page) return_host(l, *word_page);
    g.suspect();
    return std::unexpected(fmt::format("GPU {} ({}) cannot be set up: {}", ordinal, g.name, e.what()));
  }
}

}  // namespace

edge::Opener<> opener(int ordinal, std::string library) {
  if (ordinal < 0) throw std::invalid_argument(fmt::format("CUDA:{}: a GPU ordinal is at least 0", ordinal));
  return {fmt::format("CUDA:{}", ordinal),
          [ordinal, library = std::move(library)](volatile std::uint64_t* word) {
            return open_gpu(ordinal, library, word);
          }};
}

Result<int> device_count(const std::string& library) {
  auto init = initialized(library);
  if (!init) return std::unexpected(init.error());
  return init->count;
}

}  // namespace rig::cuda
