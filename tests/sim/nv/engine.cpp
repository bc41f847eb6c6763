// engine.cpp — one channel's GPFIFO engine (engine.hpp): the PBDMA loop over GP entries, the
// host methods, the copy class and the compute class, each method checked against its class
// header (decode.hpp) before it is executed.
//
// What the engine does not simulate it refuses, stopping the channel with an error that names
// the method: block-linear and physical copies, conditional-interrupt semaphores, subroutine
// GP entries, QMD types other than a plain grid, floating-point semaphore reductions.
#include "engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "code.hpp"
#include "decode.hpp"

namespace rig::sim::nv {

namespace {

// The RC codes a real GPU reports (OGKM src/common/sdk/nvidia/inc/nverror.h).
constexpr std::uint32_t xid_gr_exception = 13;   // ROBUST_CHANNEL_GR_EXCEPTION
constexpr std::uint32_t xid_mmu_fault = 31;      // ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT
constexpr std::uint32_t xid_pbdma_error = 32;    // ROBUST_CHANNEL_PBDMA_ERROR
constexpr std::uint32_t xid_class_error = 69;    // ROBUST_CHANNEL_GR_CLASS_ERROR

// NvNotification (OGKM nvos.h): timeStamp 0-7, info32 8-11, info16 12-13, status 14-15.
constexpr std::size_t notifier_info32 = 8, notifier_info16 = 12, notifier_status = 14;
constexpr std::uint16_t notifier_status_error = 0xffff;
// info16: the engine (OGKM cl2080_notification.h NV2080_ENGINE_TYPE_GRAPHICS, _COPY0).
constexpr std::uint16_t engine_type_graphics = 0x1, engine_type_copy0 = 0x9;

// USERD (clc86f.h Nvc86fControl): GPGet 0x88, GPPut 0x8C.
constexpr std::size_t userd_gp_get = 0x88, userd_gp_put = 0x8C;
constexpr std::uint64_t gp_entry_bytes = 8;       // NVC86F_GP_ENTRY__SIZE
constexpr unsigned extended_base_shift = 40;      // the extended base is address bits 56:40

// Host methods (clc56f.h / clc86f.h), on every subchannel below 0x100.
constexpr std::uint32_t host_methods_end = 0x100;
enum Host_method : std::uint32_t {
  set_object = 0x00, illegal = 0x04, nop = 0x08, non_stall_interrupt = 0x20, fb_flush = 0x24,
  mem_op_a = 0x28, mem_op_b = 0x2c, mem_op_c = 0x30, mem_op_d = 0x34,
  sem_addr_lo = 0x5c, sem_addr_hi = 0x60, sem_payload_lo = 0x64, sem_payload_hi = 0x68, sem_execute = 0x6c,
  wfi = 0x78,
};
constexpr std::uint32_t set_object_nvclass_mask = 0xffff;  // NVC56F_SET_OBJECT_NVCLASS 15:0
constexpr std::uint32_t sem_addr_lo_mask = 0xfffffffc;     // SEM_ADDR_LO_OFFSET 31:2, in place
constexpr std::uint32_t c86f_sem_addr_hi_mask = 0x1ffffff;  // NVC86F_SEM_ADDR_HI_OFFSET 24:0
constexpr std::uint32_t c56f_sem_addr_hi_mask = 0xff;       // NVC56F_SEM_ADDR_HI_OFFSET 7:0

// Copy methods (clc8b5.h; the same offsets on clc6b5.h).
enum Copy_method : std::uint32_t {
  copy_nop = 0x100, copy_pm_trigger = 0x140,
  set_semaphore_a = 0x240, set_semaphore_b = 0x244, set_semaphore_payload = 0x248,
  set_semaphore_payload_upper = 0x24c,  // C8B5 only
  set_src_phys_mode = 0x260, set_dst_phys_mode = 0x264, launch_dma = 0x300,
  offset_in_upper = 0x400, offset_in_lower = 0x404, offset_out_upper = 0x408, offset_out_lower = 0x40c,
  pitch_in = 0x410, pitch_out = 0x414, line_length_in = 0x418, line_count = 0x41c,
  set_remap_const_a = 0x700, set_remap_const_b = 0x704, set_remap_components = 0x708,
  // SET_DST_BLOCK_SIZE .. DST_ORIGIN_Y: the block-linear surfaces, used only by block-linear
  // transfers (refused at LAUNCH_DMA).
  block_linear_first = 0x70c, block_linear_last = 0x750,
};
constexpr std::uint32_t c8b5_upper_mask = 0x1ffffff;  // NVC8B5_OFFSET_IN_UPPER_UPPER 24:0
constexpr std::uint32_t c6b5_upper_mask = 0x1ffff;    // NVC6B5_OFFSET_IN_UPPER_UPPER 16:0

// Compute methods (clcbc0.h; the same offsets on clc6c0.h).
enum Compute_method : std::uint32_t {
  no_operation = 0x100, wait_for_idle = 0x110, invalidate_shader_caches = 0x21c, invalidate_sked_caches = 0x298,
  set_shader_shared_memory_window_a = 0x2a0, set_shader_shared_memory_window_b = 0x2a4,
  send_pcas_a = 0x2b4, send_signaling_pcas2_b = 0x2c0,
  set_shader_local_memory_non_throttled_a = 0x2e4, set_shader_local_memory_non_throttled_b = 0x2e8,
  set_shader_local_memory_non_throttled_c = 0x2ec,
  set_shader_local_memory_a = 0x790, set_shader_local_memory_b = 0x794,
  set_shader_local_memory_window_a = 0x7b0, set_shader_local_memory_window_b = 0x7b4,
  set_shader_cache_control = 0xd94, invalidate_shader_caches_no_wfi = 0x1698,
};
constexpr std::uint32_t window_upper_mask = 0x1ffff;       // *_WINDOW_A_BASE_ADDRESS_UPPER 16:0
constexpr std::uint32_t local_memory_upper_mask = 0x1ffffff;  // SET_SHADER_LOCAL_MEMORY_A 24:0
constexpr std::uint32_t local_memory_sm_mask = 0x1ff;         // SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C 8:0
constexpr unsigned qmd_address_shift = 8;                   // SEND_PCAS_A_QMD_ADDRESS_SHIFTED8
// SEND_SIGNALING_PCAS2_B_PCAS_ACTION 3:0.
enum Pcas_action : std::uint32_t {
  pcas_nop = 0, pcas_invalidate = 1, pcas_schedule = 2, pcas_invalidate_copy_schedule = 3, pcas_prefetch = 8,
  pcas_prefetch_schedule = 9, pcas_invalidate_prefetch_copy_schedule = 0xa,
  pcas_invalidate_prefetch_copy_force_require_scheduling = 0xb,
};

// Launch limits of sm_80/sm_90 (CUDA programming guide, compute capabilities table).
constexpr std::uint64_t max_grid_x = 0x7fffffff;
constexpr std::uint32_t max_block_xy = 1024, max_block_z = 64, max_block_threads = 1024;
constexpr std::uint32_t max_registers = 255;
constexpr std::uint64_t max_threads_per_sm = 2048;  // resident threads per SM, on sm_80 and sm_90 alike
constexpr std::uint32_t max_shared_sm90 = 228 * 1024, max_shared_sm80 = 164 * 1024;  // incl. the 1 KiB reserved

// The channel stops: `xid` and the reason (without the channel's name).
struct Fault {
  std::uint32_t xid;
  std::string why;
};
// The engine is being destroyed while it waits.
struct Quit {};
// The channel is held while it waits on an acquire: the entry is set aside, to be resumed.
struct Preempted {};

}  // namespace

struct Engine::Impl {
  Channel_setup setup;
  std::thread thread;

  std::mutex m;
  std::condition_variable cv;
  bool quit = false, held = false, busy = false, pending = false;
  std::uint64_t rings = 0;  // doorbells so far
  std::vector<std::uint32_t> allowed;

  std::atomic<bool> is_stopped{false};
  std::atomic<std::uint64_t> n_methods{0}, n_launches{0}, n_instructions{0}, n_bytes{0};

  // PBDMA state.
  Pushbuffer_state pushbuffer;
  // An entry set aside in an acquire by hold(true): its index, the methods of it already run
  // and the subdevice masks it started with.
  struct {
    bool active = false;
    std::uint32_t index = 0;
    std::size_t done = 0;
    Pushbuffer_state start;
  } resume;
  std::uint64_t extended_base = 0;
  std::array<std::uint32_t, 8> bound{};  // the class on each subchannel, 0 for none

  // Host semaphore state.
  std::uint64_t sem_address = 0, sem_payload = 0;

  // Copy state.
  struct {
    std::uint64_t semaphore = 0, payload = 0, in = 0, out = 0;
    std::uint32_t pitch_in = 0, pitch_out = 0, line_length = 0, line_count = 0;
    std::uint32_t const_a = 0, const_b = 0, components = 0;
  } copy;

  // Compute state.
  struct {
    std::uint64_t shared_window = 0, local_window = 0, local_memory = 0;
    std::uint64_t local_memory_size = 0;  // NON_THROTTLED_A/B: SIZE_UPPER 7:0, SIZE_LOWER 31:0
    std::uint32_t local_memory_sms = 0;   // NON_THROTTLED_C: MAX_SM_COUNT 8:0
    std::uint64_t qmd = 0;
  } compute;

  explicit Impl(Channel_setup s) : setup(std::move(s)) {}

  void main();
  void drain();
  void entry(std::uint32_t index);
  void execute(const Method& method);
  void host(const Method& method);
  void copy_method(std::uint32_t cls, const Method& method);
  void compute_method(std::uint32_t cls, const Method& method);
  void run_launch_dma(std::uint32_t cls, std::uint32_t word);
  void launch(std::uint32_t cls);
  void fail(const Fault& f);

  // --- memory through the Space ------------------------------------------------------------
  // Calls fn(host, offset, bytes) over each mapping [va, va + size) lies in; an MMU fault
  // naming `what` when any of it is not mapped (or not writable).
  template <class Fn>
  void each_span(std::uint64_t va, std::uint64_t size, bool write, std::string_view what, Fn&& fn) {
    std::uint64_t done = 0;
    if (va + size < va)
      throw Fault{xid_mmu_fault, fmt::format("MMU fault: {} at {:#x} ({} bytes) wraps the address space", what, va, size)};
    while (done < size) {
      const std::uint64_t at = va + done;
      auto mapping = setup.space->map(at, 1, write);
      if (!mapping)
        throw Fault{xid_mmu_fault, fmt::format("MMU fault: {} at {:#x} ({} of {} bytes at {:#x}, {}) is not mapped{}", what,
                                               at, size - done, size, va, write ? "write" : "read",
                                               write ? " writable" : "")};
      const std::uint64_t n = std::min(size - done, mapping->base + mapping->size - at);
      fn(mapping->host + (at - mapping->base), done, n);
      done += n;
    }
  }
  std::vector<std::byte> read(std::uint64_t va, std::uint64_t size, std::string_view what) {
    // All of it must be mapped before the bytes are taken: a length from the push buffer
    // never sizes an allocation the Space cannot back.
    each_span(va, size, false, what, [](std::byte*, std::uint64_t, std::uint64_t) {});
    std::vector<std::byte> out(size);
    each_span(va, size, false, what, [&](std::byte* h, std::uint64_t off, std::uint64_t n) { std::memcpy(out.data() + off, h, n); });
    return out;
  }
  // Host bytes of a `size`-byte semaphore at `va`, which must be `size`-aligned and in one mapping.
  std::byte* word_at(std::uint64_t va, unsigned size, bool write, std::string_view what) {
    if (va % size != 0)
      throw Fault{xid_mmu_fault, fmt::format("{} at {:#x} is not {}-byte aligned", what, va, size)};
    auto mapping = setup.space->map(va, size, write);
    if (!mapping)
      throw Fault{xid_mmu_fault,
                  fmt::format("MMU fault: {} at {:#x} ({} bytes, {}) is not mapped{}", what, va, size,
                              write ? "write" : "read", write ? " writable" : "")};
    return mapping->host + (va - mapping->base);
  }
  static std::uint64_t load(std::byte* p, unsigned size) {
    if (size == 8) {
      if (reinterpret_cast<std::uintptr_t>(p) % 8 == 0)
        return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p)).load(std::memory_order_acquire);
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    if (reinterpret_cast<std::uintptr_t>(p) % 4 == 0)
      return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(p)).load(std::memory_order_acquire);
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  static void store(std::byte* p, unsigned size, std::uint64_t v) {
    if (size == 8) {
      if (reinterpret_cast<std::uintptr_t>(p) % 8 == 0) {
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(p)).store(v, std::memory_order_release);
      } else {
        std::memcpy(p, &v, 8);
      }
      return;
    }
    const auto w = static_cast<std::uint32_t>(v);
    if (reinterpret_cast<std::uintptr_t>(p) % 4 == 0) {
      std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(p)).store(w, std::memory_order_release);
    } else {
      std::memcpy(p, &w, 4);
    }
  }
  // old -> reduce(old, operand), atomically when the word is aligned on the host.
  static void reduce_at(std::byte* p, unsigned size, Reduction r, std::uint64_t operand, bool is_unsigned) {
    const unsigned width = size * 8;
    if (size == 8 && reinterpret_cast<std::uintptr_t>(p) % 8 == 0) {
      std::atomic_ref<std::uint64_t> a(*reinterpret_cast<std::uint64_t*>(p));
      std::uint64_t old = a.load();
      while (!a.compare_exchange_weak(old, reduce(r, old, operand, width, is_unsigned))) {
      }
    } else if (size == 4 && reinterpret_cast<std::uintptr_t>(p) % 4 == 0) {
      std::atomic_ref<std::uint32_t> a(*reinterpret_cast<std::uint32_t*>(p));
      std::uint32_t old = a.load();
      while (!a.compare_exchange_weak(old, static_cast<std::uint32_t>(reduce(r, old, operand, width, is_unsigned)))) {
      }
    } else {
      store(p, size, reduce(r, load(p, size), operand, width, is_unsigned));
    }
  }
  std::uint64_t now() const { return setup.clock_ns ? setup.clock_ns() : 0; }

  // Waits until `met()` holds, reading memory again on every doorbell and at least every
  // 50 microseconds, as an acquire does on hardware; set aside (Preempted) when the channel
  // is held meanwhile.
  template <class Met>
  void wait_until(Met&& met) {
    std::uint64_t seen = 0;
    {
      std::lock_guard lk(m);
      seen = rings;
    }
    while (!met()) {
      std::unique_lock lk(m);
      if (quit) throw Quit{};
      if (held) throw Preempted{};
      cv.wait_for(lk, std::chrono::microseconds(50), [&] { return quit || held || rings != seen; });
      seen = rings;
    }
  }

  std::uint32_t* userd_word(std::size_t offset) const {
    return reinterpret_cast<std::uint32_t*>(setup.userd + offset);
  }
  bool is_hopper() const { return setup.channel_class == hopper_channel_gpfifo_a; }
};

// --- the thread ------------------------------------------------------------------------------

void Engine::Impl::main() {
  for (;;) {
    {
      std::unique_lock lk(m);
      busy = false;
      cv.notify_all();
      cv.wait(lk, [&] { return quit || (pending && !held); });
      if (quit) return;
      pending = false;
      busy = true;
    }
    try {
      drain();
    } catch (const Fault& f) {
      fail(f);
    } catch (const Preempted&) {
      std::lock_guard lk(m);
      pending = true;  // taken up again on hold(false)
    } catch (const Quit&) {
      return;
    } catch (const std::exception& e) {
      // Nothing a push buffer says may end the simulator: what escaped stops the channel.
      fail(Fault{xid_pbdma_error, fmt::format("the simulator could not execute the channel's work: {}", e.what())});
    }
  }
}

void Engine::Impl::drain() {
  while (!is_stopped.load()) {
    {
      std::lock_guard lk(m);
      if (quit) throw Quit{};
      if (held) {
        pending = true;  // taken up again on hold(false)
        return;
      }
    }
    const std::uint32_t put = std::atomic_ref<std::uint32_t>(*userd_word(userd_gp_put)).load(std::memory_order_acquire);
    const std::uint32_t get = std::atomic_ref<std::uint32_t>(*userd_word(userd_gp_get)).load(std::memory_order_relaxed);
    if (put >= setup.gpfifo_entries)
      throw Fault{xid_pbdma_error, fmt::format("GPPut {} is past the ring's {} entries", put, setup.gpfifo_entries)};
    if (get == put) return;
    entry(get);
    // GPGet passes an entry once its methods are done: the driver may reuse the slot then.
    std::atomic_ref<std::uint32_t>(*userd_word(userd_gp_get)).store((get + 1) % setup.gpfifo_entries,
                                                                     std::memory_order_release);
  }
}

void Engine::Impl::entry(std::uint32_t index) {
  const std::uint64_t slot = setup.gpfifo_va + gp_entry_bytes * index;
  const auto raw = read(slot, gp_entry_bytes, fmt::format("GP entry {}", index));
  std::uint32_t w[2];
  std::memcpy(w, raw.data(), sizeof w);
  auto e = decode_gp_entry(w[0], w[1], setup.channel_class);
  if (!e) throw Fault{xid_pbdma_error, fmt::format("GP entry {}: {}", index, e.error())};
  switch (e->kind) {
    case Gp_entry::Kind::nop:
    case Gp_entry::Kind::gp_crc:  // CRCs are checks the simulator's memory never fails
    case Gp_entry::Kind::pb_crc:
      return;
    case Gp_entry::Kind::illegal:
      throw Fault{xid_pbdma_error, fmt::format("GP entry {} has OPCODE ILLEGAL", index)};
    case Gp_entry::Kind::extended_base:
      extended_base = e->operand;
      return;
    case Gp_entry::Kind::segment:
      break;
  }
  if (e->subroutine)
    throw Fault{xid_pbdma_error, fmt::format("GP entry {}: subroutine (LEVEL 1) entries are not simulated", index)};
  if (e->conditional)
    throw Fault{xid_pbdma_error, fmt::format("GP entry {}: conditional fetch (FETCH 1) is not simulated", index)};
  const std::uint64_t address = e->address | (extended_base << extended_base_shift);
  const auto bytes = read(address, std::uint64_t{e->length} * 4,
                          fmt::format("push buffer segment of GP entry {} ({} words)", index, e->length));
  std::vector<std::uint32_t> words(e->length);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  // An entry set aside in an acquire is decoded again from the masks it started with, and
  // its methods before the acquire are not run again.
  std::size_t skip = 0;
  if (resume.active && resume.index == index) {
    pushbuffer = resume.start;
    skip = resume.done;
  }
  resume.active = false;
  const Pushbuffer_state start = pushbuffer;
  const Segment segment = decode_segment(words, pushbuffer);
  for (std::size_t i = skip; i < segment.methods.size(); ++i) {
    const Method& method = segment.methods[i];
    try {
      execute(method);
    } catch (Fault& f) {
      f.why = fmt::format("push buffer at {:#x} word {}: {}", address, method.at, f.why);
      throw;
    } catch (const Preempted&) {
      resume = {true, index, i, start};
      throw;
    }
    n_methods.fetch_add(1, std::memory_order_relaxed);
  }
  if (segment.error)
    throw Fault{xid_pbdma_error, fmt::format("push buffer at {:#x} (GP entry {}): {}", address, index, *segment.error)};
}

void Engine::Impl::execute(const Method& method) {
  if (method.method < host_methods_end) return host(method);
  const std::uint32_t cls = bound[method.subchannel];
  if (cls == 0)
    throw Fault{xid_class_error, fmt::format("method {:#x} on subchannel {}, which has no object (SET_OBJECT first)",
                                             method.method, method.subchannel)};
  if (cls == hopper_dma_copy_a || cls == ampere_dma_copy_a) return copy_method(cls, method);
  return compute_method(cls, method);
}

void Engine::Impl::fail(const Fault& f) {
  is_stopped.store(true);
  const std::string why = fmt::format("{}: {}", setup.name, f.why);
  if (std::byte* n = setup.error_notifier) {
    const std::uint64_t stamp = now();
    const std::uint32_t info32 = f.xid;
    const std::uint16_t info16 = setup.kind == Engine_kind::copy ? engine_type_copy0 : engine_type_graphics;
    std::memcpy(n, &stamp, sizeof stamp);
    std::memcpy(n + notifier_info32, &info32, sizeof info32);
    std::memcpy(n + notifier_info16, &info16, sizeof info16);
    // The status last, released: a reader that sees it sees the rest.
    std::byte* status = n + notifier_status;
    if (reinterpret_cast<std::uintptr_t>(status) % alignof(std::uint16_t) == 0) {
      std::atomic_ref<std::uint16_t>(*reinterpret_cast<std::uint16_t*>(status))
          .store(notifier_status_error, std::memory_order_release);
    } else {
      std::memcpy(status, &notifier_status_error, sizeof notifier_status_error);
    }
  }
  if (setup.stopped) setup.stopped(f.xid, why);
}

// --- host methods ----------------------------------------------------------------------------

void Engine::Impl::host(const Method& method) {
  const std::uint32_t data = method.data;
  switch (method.method) {
    case set_object: {
      const std::uint32_t cls = data & set_object_nvclass_mask;
      bool ok;
      {
        std::lock_guard lk(m);
        ok = std::find(allowed.begin(), allowed.end(), cls) != allowed.end();
      }
      if (!ok)
        throw Fault{xid_class_error, fmt::format("SET_OBJECT on subchannel {}: class {:#06x} is not allocated on the channel",
                                                 method.subchannel, cls)};
      const bool copy_class = cls == hopper_dma_copy_a || cls == ampere_dma_copy_a;
      const bool compute_class = cls == hopper_compute_a || cls == ampere_compute_a;
      const bool hopper_class = cls == hopper_dma_copy_a || cls == hopper_compute_a;
      if (!copy_class && !compute_class)
        throw Fault{xid_class_error, fmt::format("SET_OBJECT on subchannel {}: class {:#06x} is not simulated",
                                                 method.subchannel, cls)};
      if ((setup.kind == Engine_kind::copy) != copy_class || hopper_class != is_hopper())
        throw Fault{xid_class_error,
                    fmt::format("SET_OBJECT on subchannel {}: class {:#06x} does not run on a {} channel of class {:#06x}",
                                method.subchannel, cls, setup.kind == Engine_kind::copy ? "copy" : "compute",
                                setup.channel_class)};
      bound[method.subchannel] = cls;
      return;
    }
    case illegal:
      throw Fault{xid_pbdma_error, fmt::format("the ILLEGAL method (data {:#x})", data)};
    case nop:
    case fb_flush:  // the simulator's memory is coherent: flushes, membars and invalidations
    case mem_op_a:  // have nothing to do
    case mem_op_b:
    case mem_op_c:
    case mem_op_d:
    case wfi:  // every method before this one is done
      return;
    case non_stall_interrupt:
      if (setup.nonstall) setup.nonstall();
      return;
    case sem_addr_lo:
      sem_address = (sem_address & ~0xffffffffull) | (data & sem_addr_lo_mask);
      return;
    case sem_addr_hi:
      sem_address = (sem_address & 0xffffffffull) |
                    (std::uint64_t{data & (is_hopper() ? c86f_sem_addr_hi_mask : c56f_sem_addr_hi_mask)} << 32);
      return;
    case sem_payload_lo:
      sem_payload = (sem_payload & ~0xffffffffull) | data;
      return;
    case sem_payload_hi:
      sem_payload = (sem_payload & 0xffffffffull) | (std::uint64_t{data} << 32);
      return;
    case sem_execute: {
      auto s = decode_sem_execute(data);
      if (!s) throw Fault{xid_pbdma_error, s.error()};
      const unsigned size = s->payload_64 ? 8 : 4;
      const std::uint64_t mask = s->payload_64 ? ~0ull : 0xffffffffull;
      const std::uint64_t payload = sem_payload & mask;
      const std::string_view what = "SEM_EXECUTE semaphore";
      switch (s->op) {
        case Sem_execute::Op::release: {
          std::byte* p = word_at(sem_address, s->release_timestamp ? 16 : size, true, what);
          if (s->release_timestamp) store(p + 8, 8, now());
          store(p, size, payload);
          return;
        }
        case Sem_execute::Op::reduction:
          reduce_at(word_at(sem_address, size, true, what), size, s->reduction, payload, s->reduction_unsigned);
          return;
        default: {
          const auto op = s->op;
          // The word is mapped again on every look: the memory may go while the acquire waits.
          wait_until([&] {
            const std::uint64_t v = load(word_at(sem_address, size, false, what), size) & mask;
            switch (op) {
              case Sem_execute::Op::acquire: return v == payload;
              case Sem_execute::Op::acquire_strict_geq: return v >= payload;
              case Sem_execute::Op::acquire_circ_geq:
                return size == 8 ? static_cast<std::int64_t>(v - payload) >= 0
                                 : static_cast<std::int32_t>(static_cast<std::uint32_t>(v - payload)) >= 0;
              case Sem_execute::Op::acquire_and: return (v & payload) != 0;
              case Sem_execute::Op::acquire_nor: return (~(v | payload) & mask) != 0;
              default: return true;
            }
          });
          return;
        }
      }
    }
    default:
      throw Fault{xid_pbdma_error, fmt::format("host method {:#x} (data {:#x}) is not simulated on class {:#06x}",
                                               method.method, data, setup.channel_class)};
  }
}

// --- copy ------------------------------------------------------------------------------------

void Engine::Impl::copy_method(std::uint32_t cls, const Method& method) {
  const std::uint32_t d = method.data;
  const std::uint64_t upper = d & (cls == hopper_dma_copy_a ? c8b5_upper_mask : c6b5_upper_mask);
  const auto set_hi = [&](std::uint64_t& v) { v = (v & 0xffffffffull) | (upper << 32); };
  const auto set_lo = [&](std::uint64_t& v) { v = (v & ~0xffffffffull) | d; };
  switch (method.method) {
    case copy_nop:
    case copy_pm_trigger:
    case set_src_phys_mode:  // used only by physical transfers (refused at LAUNCH_DMA)
    case set_dst_phys_mode:
      return;
    case set_semaphore_a: return set_hi(copy.semaphore);
    case set_semaphore_b: return set_lo(copy.semaphore);
    case set_semaphore_payload: return set_lo(copy.payload);
    case set_semaphore_payload_upper:
      if (cls != hopper_dma_copy_a) break;
      copy.payload = (copy.payload & 0xffffffffull) | (std::uint64_t{d} << 32);
      return;
    case launch_dma: return run_launch_dma(cls, d);
    case offset_in_upper: return set_hi(copy.in);
    case offset_in_lower: return set_lo(copy.in);
    case offset_out_upper: return set_hi(copy.out);
    case offset_out_lower: return set_lo(copy.out);
    case pitch_in: copy.pitch_in = d; return;
    case pitch_out: copy.pitch_out = d; return;
    case line_length_in: copy.line_length = d; return;
    case line_count: copy.line_count = d; return;
    case set_remap_const_a: copy.const_a = d; return;
    case set_remap_const_b: copy.const_b = d; return;
    case set_remap_components: copy.components = d; return;
    default:
      if (method.method >= block_linear_first && method.method <= block_linear_last && method.method % 4 == 0) return;
      break;
  }
  throw Fault{xid_class_error,
              fmt::format("method {:#x} (data {:#x}) is not a method of class {:#06x}", method.method, d, cls)};
}

void Engine::Impl::run_launch_dma(std::uint32_t cls, std::uint32_t word) {
  auto dma = decode_launch_dma(word, cls);
  if (!dma) throw Fault{xid_class_error, dma.error()};
  const auto refuse = [&](std::string_view what) {
    return Fault{xid_class_error, fmt::format("LAUNCH_DMA {:#010x}: {} is not simulated", word, what)};
  };
  if (dma->transfer != Launch_dma::Transfer::none) {
    if (!dma->src_pitch || !dma->dst_pitch) throw refuse("a block-linear layout");
    if (dma->src_physical || dma->dst_physical) throw refuse("a physical address");
    const std::uint64_t lines = dma->multi_line ? copy.line_count : 1;
    std::optional<Remap> remap;
    if (dma->remap) {
      auto r = decode_remap(copy.components);
      if (!r) throw Fault{xid_class_error, fmt::format("LAUNCH_DMA {:#010x}: {}", word, r.error())};
      remap = *r;
    }
    if (dma->memory_scrub && remap) throw refuse("a memory scrub with remapping");
    // Bytes a line reads and writes: LINE_LENGTH_IN counts bytes, or elements when remapping.
    const std::uint64_t in_bytes = remap ? std::uint64_t{copy.line_length} * remap->src_components * remap->component_size
                                         : copy.line_length;
    const std::uint64_t out_bytes = remap ? std::uint64_t{copy.line_length} * remap->dst_components * remap->component_size
                                          : copy.line_length;
    const bool reads_source = !dma->memory_scrub &&
        (!remap || std::any_of(remap->dst.begin(), remap->dst.begin() + remap->dst_components,
                               [](Remap::Source s) { return s <= Remap::Source::src_w; }));
    for (std::uint64_t l = 0; l < lines; ++l) {
      const std::uint64_t src = copy.in + l * copy.pitch_in, dst = copy.out + l * copy.pitch_out;
      const std::string dst_what = fmt::format("LAUNCH_DMA destination line {}", l);
      each_span(dst, out_bytes, true, dst_what, [](std::byte*, std::uint64_t, std::uint64_t) {});
      std::vector<std::byte> line;
      if (reads_source) line = read(src, in_bytes, fmt::format("LAUNCH_DMA source line {}", l));
      std::vector<std::byte> out;
      if (dma->memory_scrub) {
        out.assign(out_bytes, std::byte{0});
      } else if (!remap) {
        out = std::move(line);
      } else {
        out.resize(out_bytes);
        const std::uint32_t cs = remap->component_size;
        // Components a NO_WRITE leaves as they are: start from the destination's bytes.
        const bool keeps = std::any_of(remap->dst.begin(), remap->dst.begin() + remap->dst_components,
                                       [](Remap::Source s) { return s == Remap::Source::no_write; });
        if (keeps) out = read(dst, out_bytes, dst_what);
        for (std::uint64_t e = 0; e < copy.line_length; ++e) {
          for (std::uint32_t c = 0; c < remap->dst_components; ++c) {
            std::byte* to = out.data() + (e * remap->dst_components + c) * cs;
            const auto s = remap->dst[c];
            if (s == Remap::Source::no_write) continue;
            if (s == Remap::Source::const_a || s == Remap::Source::const_b) {
              const std::uint32_t v = s == Remap::Source::const_a ? copy.const_a : copy.const_b;
              std::memcpy(to, &v, std::min<std::uint32_t>(cs, 4));
              continue;
            }
            const auto from = static_cast<std::uint32_t>(s);
            if (from >= remap->src_components)
              throw Fault{xid_class_error, fmt::format("LAUNCH_DMA {:#010x}: remap DST_{} reads source component {} of {}", word,
                                                       "XYZW"[c], from, remap->src_components)};
            std::memcpy(to, line.data() + (e * remap->src_components + from) * cs, cs);
          }
        }
      }
      each_span(dst, out_bytes, true, dst_what,
                [&](std::byte* h, std::uint64_t off, std::uint64_t n) { std::memcpy(h, out.data() + off, n); });
      n_bytes.fetch_add(out_bytes, std::memory_order_relaxed);
    }
  }
  if (dma->semaphore != Launch_dma::Semaphore::none) {
    if (dma->semaphore == Launch_dma::Semaphore::conditional_interrupt) throw refuse("a conditional-interrupt semaphore");
    const unsigned size = dma->payload_two_words ? 8 : 4;
    const bool four = dma->semaphore == Launch_dma::Semaphore::four_word;
    std::byte* p = word_at(copy.semaphore, four ? 16 : size, true, "LAUNCH_DMA semaphore");
    if (dma->reduction_enable) {
      if (four) throw refuse("a reduction on a four-word semaphore");
      if (dma->reduction > 7) throw refuse(fmt::format("SEMAPHORE_REDUCTION {}", dma->reduction));
      // NVC8B5_LAUNCH_DMA_SEMAPHORE_REDUCTION: IMIN 0, IMAX 1, IXOR 2, IAND 3, IOR 4, IADD 5, INC 6, DEC 7.
      static constexpr Reduction order[] = {Reduction::min, Reduction::max, Reduction::bit_xor, Reduction::bit_and,
                                            Reduction::bit_or, Reduction::add, Reduction::inc, Reduction::dec};
      reduce_at(p, size, order[dma->reduction], copy.payload, dma->reduction_unsigned);
    } else {
      if (four) store(p + 8, 8, now());
      store(p, size, copy.payload);
    }
  }
  if (dma->interrupt == Launch_dma::Interrupt::non_blocking && setup.nonstall) setup.nonstall();
  if (dma->interrupt == Launch_dma::Interrupt::blocking) throw refuse("a blocking interrupt");
}

// --- compute ---------------------------------------------------------------------------------

void Engine::Impl::compute_method(std::uint32_t cls, const Method& method) {
  const std::uint32_t d = method.data;
  switch (method.method) {
    case no_operation:
    case wait_for_idle:
    case invalidate_shader_caches:
    case invalidate_sked_caches:
    case invalidate_shader_caches_no_wfi:
    case set_shader_cache_control:
    case set_shader_local_memory_non_throttled_a:
      compute.local_memory_size = (compute.local_memory_size & 0xffffffffull) | (std::uint64_t{d & 0xff} << 32);
      return;
    case set_shader_local_memory_non_throttled_b:
      compute.local_memory_size = (compute.local_memory_size & ~0xffffffffull) | d;
      return;
    case set_shader_local_memory_non_throttled_c:
      compute.local_memory_sms = d & local_memory_sm_mask;
      return;
    case set_shader_shared_memory_window_a:
      compute.shared_window = (compute.shared_window & 0xffffffffull) | (std::uint64_t{d & window_upper_mask} << 32);
      return;
    case set_shader_shared_memory_window_b:
      compute.shared_window = (compute.shared_window & ~0xffffffffull) | d;
      return;
    case set_shader_local_memory_window_a:
      compute.local_window = (compute.local_window & 0xffffffffull) | (std::uint64_t{d & window_upper_mask} << 32);
      return;
    case set_shader_local_memory_window_b:
      compute.local_window = (compute.local_window & ~0xffffffffull) | d;
      return;
    case set_shader_local_memory_a:
      compute.local_memory = (compute.local_memory & 0xffffffffull) | (std::uint64_t{d & local_memory_upper_mask} << 32);
      return;
    case set_shader_local_memory_b:
      compute.local_memory = (compute.local_memory & ~0xffffffffull) | d;
      return;
    case send_pcas_a:
      compute.qmd = std::uint64_t{d} << qmd_address_shift;
      return;
    case send_signaling_pcas2_b:
      switch (d & 0xf) {
        case pcas_nop:
        case pcas_invalidate:
        case pcas_prefetch:
          return;
        case pcas_schedule:
        case pcas_invalidate_copy_schedule:
        case pcas_prefetch_schedule:
        case pcas_invalidate_prefetch_copy_schedule:
        case pcas_invalidate_prefetch_copy_force_require_scheduling:
          return launch(cls);
        default:
          throw Fault{xid_class_error, fmt::format("SEND_SIGNALING_PCAS2_B {:#x}: PCAS_ACTION {} is not simulated", d, d & 0xf)};
      }
    default:
      break;
  }
  throw Fault{xid_class_error,
              fmt::format("method {:#x} (data {:#x}) is not a method of class {:#06x}", method.method, d, cls)};
}

void Engine::Impl::launch(std::uint32_t cls) {
  const bool hopper = cls == hopper_compute_a;
  const std::uint64_t qmd_va = compute.qmd;
  const std::size_t words_n = hopper ? qmd_v04_words : qmd_v03_words;
  const auto raw = read(qmd_va, words_n * 4, "QMD");
  std::vector<std::uint32_t> words(words_n);
  std::memcpy(words.data(), raw.data(), raw.size());
  auto decoded = hopper ? decode_qmd_v04(words) : decode_qmd_v03(words);
  const auto bad = [&](std::string_view why) {
    return Fault{xid_gr_exception, fmt::format("QMD at {:#x}: {}", qmd_va, why)};
  };
  if (!decoded) throw bad(decoded.error());
  const Qmd& q = *decoded;
  if (hopper && q.minor != 0) throw bad(fmt::format("QMD version {}.{}, class {:#06x} takes 4.0", q.major, q.minor, cls));
  if (!q.is_grid) throw bad(fmt::format("QMD_TYPE {} is not a plain grid of CTAs", q.qmd_type));
  if (q.grid[0] == 0 || q.grid[1] == 0 || q.grid[2] == 0)
    throw bad(fmt::format("an empty grid {}x{}x{}", q.grid[0], q.grid[1], q.grid[2]));
  if (q.grid[0] > max_grid_x) throw bad(fmt::format("grid width {} is over {}", q.grid[0], max_grid_x));
  if (q.block[0] == 0 || q.block[1] == 0 || q.block[2] == 0)
    throw bad(fmt::format("an empty block {}x{}x{}", q.block[0], q.block[1], q.block[2]));
  const std::uint64_t threads = std::uint64_t{q.block[0]} * q.block[1] * q.block[2];
  if (q.block[0] > max_block_xy || q.block[1] > max_block_xy || q.block[2] > max_block_z || threads > max_block_threads)
    throw bad(fmt::format("block {}x{}x{} is over the limits ({}x{}x{}, {} threads)", q.block[0], q.block[1], q.block[2],
                          max_block_xy, max_block_xy, max_block_z, max_block_threads));
  if (q.registers == 0 || q.registers > max_registers)
    throw bad(fmt::format("REGISTER_COUNT {} is not in 1..{}", q.registers, max_registers));
  const std::uint32_t max_shared = hopper ? max_shared_sm90 : max_shared_sm80;
  if (q.shared_memory_size > max_shared)
    throw bad(fmt::format("SHARED_MEMORY_SIZE {} is over the {} bytes an SM has", q.shared_memory_size, max_shared));
  const auto& bank0 = q.banks[0];
  if (!bank0.valid) throw bad("constant bank 0 is not valid");
  if (!setup.code) throw bad("no kernels are registered on the channel");
  auto kernel = setup.code->find(q.program_address, *setup.space);
  if (!kernel) throw bad(fmt::format("program address {:#x}: {}", q.program_address, kernel.error()));
  const Kernel& k = **kernel;
  const auto bad_k = [&](std::string_view why) {
    return Fault{xid_gr_exception, fmt::format("QMD at {:#x} for kernel {}: {}", qmd_va, k.name, why)};
  };
  if (q.registers < k.registers)
    throw bad_k(fmt::format("REGISTER_COUNT {} is below the {} registers the kernel uses", q.registers, k.registers));
  if (q.shared_memory_size < k.static_shared)
    throw bad_k(fmt::format("SHARED_MEMORY_SIZE {} is below the kernel's {} bytes of static shared memory",
                            q.shared_memory_size, k.static_shared));
  if (k.max_threads != 0 && threads > k.max_threads)
    throw bad_k(fmt::format("block of {} threads is over the kernel's maximum of {}", threads, k.max_threads));
  if (std::uint64_t{k.param_offset} + k.param_size > bank0.size)
    throw bad_k(fmt::format("constant bank 0 has {} bytes, the parameters end at {:#x}", bank0.size,
                            k.param_offset + k.param_size));
  // Local memory: the QMD gives each thread at least the kernel's frame, and the channel has a
  // backing store (SET_SHADER_LOCAL_MEMORY_A/B) of that much for every thread an SM holds, on
  // every SM the store is sized for (NON_THROTTLED_A/B/C).
  const std::uint64_t per_thread = std::uint64_t{q.local_memory_low} + q.local_memory_high;
  if (per_thread < k.local_bytes)
    throw bad_k(fmt::format("SHADER_LOCAL_MEMORY_LOW_SIZE {} + HIGH_SIZE {} is below the kernel's {} bytes of local "
                            "memory per thread", q.local_memory_low, q.local_memory_high, k.local_bytes));
  if (per_thread > 0) {
    if (compute.local_memory == 0 || compute.local_memory_size == 0 || compute.local_memory_sms == 0)
      throw bad_k(fmt::format("{} bytes of local memory per thread, and the channel has no local memory backing store "
                              "(SET_SHADER_LOCAL_MEMORY_A/B and NON_THROTTLED_A/B/C)", per_thread));
    const std::uint64_t need = per_thread * max_threads_per_sm * compute.local_memory_sms;
    if (compute.local_memory_size < need)
      throw bad_k(fmt::format("the local memory backing store's {:#x} bytes are below the {:#x} that {} bytes per "
                              "thread take on {} SMs of {} threads", compute.local_memory_size, need, per_thread,
                              compute.local_memory_sms, max_threads_per_sm));
    if (setup.sm_count != 0 && compute.local_memory_sms < setup.sm_count)
      throw bad_k(fmt::format("the local memory backing store is sized for {} SMs of the GPU's {}",
                              compute.local_memory_sms, setup.sm_count));
    read(compute.local_memory, need, "the local memory backing store");
  }
  const auto params = read(bank0.address + k.param_offset, k.param_size, "kernel parameters in constant bank 0");
  std::vector<Placement> placements;
  for (const Symbol& s : k.symbols) {
    if (s.bank >= qmd_banks || !q.banks[s.bank].valid)
      throw bad_k(fmt::format("variable {} lives in constant bank {}, which is not valid", s.name, s.bank));
    const auto& bank = q.banks[s.bank];
    const std::uint32_t need = s.kind == Symbol::Kind::address_in_bank ? 8 : 1;
    if (std::uint64_t{s.offset} + need > bank.size)
      throw bad_k(fmt::format("variable {} at offset {:#x} of constant bank {} is past its {} bytes", s.name, s.offset,
                              s.bank, bank.size));
    std::uint64_t address = bank.address + s.offset;
    if (s.kind == Symbol::Kind::address_in_bank) {
      const auto bytes = read(address, 8, fmt::format("address of variable {} in constant bank {}", s.name, s.bank));
      std::memcpy(&address, bytes.data(), 8);
    }
    placements.push_back({s.name, address});
  }
  ptx::Launch l;
  l.grid = {q.grid[0], q.grid[1], q.grid[2]};
  l.block = {q.block[0], q.block[1], q.block[2]};
  l.dynamic_shared = q.shared_memory_size - k.static_shared;
  l.params = params;
  if (compute.shared_window != 0) l.shared_window = compute.shared_window;
  if (compute.local_window != 0) l.local_window = compute.local_window;
  auto stats = setup.code->run(k, l, *setup.space, placements);
  if (!stats) {
    const bool page_fault = stats.error().find("page fault") != std::string::npos;
    throw Fault{page_fault ? xid_mmu_fault : xid_gr_exception, fmt::format("kernel {}: {}", k.name, stats.error())};
  }
  n_launches.fetch_add(1, std::memory_order_relaxed);
  n_instructions.fetch_add(stats->instructions, std::memory_order_relaxed);
  for (unsigned i = 0; i < qmd_releases; ++i) {
    const auto& r = q.releases[i];
    if (!r.enable) continue;
    const std::string what = fmt::format("QMD release {} semaphore", i);
    const bool four = r.size == Qmd::Release::Size::four_words;
    const unsigned size = r.size == Qmd::Release::Size::two_words || r.payload_64 ? 8 : 4;
    std::byte* p = word_at(r.address, four ? 16 : size, true, what);
    if (r.reduction_enable) {
      if (four) throw bad(fmt::format("release {}: a reduction on a four-word semaphore is not simulated", i));
      reduce_at(p, size, r.reduction, r.payload, r.reduction_unsigned);
    } else {
      if (four) store(p + 8, 8, now());
      store(p, size, r.payload);
    }
  }
}

// --- Engine ----------------------------------------------------------------------------------

Engine::Engine(Channel_setup setup) : impl_(std::make_unique<Impl>(std::move(setup))) {
  impl_->thread = std::thread([impl = impl_.get()] { impl->main(); });
}

Engine::~Engine() {
  {
    std::lock_guard lk(impl_->m);
    impl_->quit = true;
  }
  impl_->cv.notify_all();
  impl_->thread.join();
}

void Engine::allow(std::uint32_t class_id) {
  std::lock_guard lk(impl_->m);
  impl_->allowed.push_back(class_id);
}

void Engine::doorbell() {
  {
    std::lock_guard lk(impl_->m);
    impl_->pending = true;
    ++impl_->rings;
  }
  impl_->cv.notify_all();
}

void Engine::hold(bool held) {
  std::unique_lock lk(impl_->m);
  impl_->held = held;
  impl_->cv.notify_all();
  if (held) impl_->cv.wait(lk, [&] { return !impl_->busy; });
}

bool Engine::stopped() const { return impl_->is_stopped.load(); }
std::uint64_t Engine::methods() const { return impl_->n_methods.load(); }
std::uint64_t Engine::launches() const { return impl_->n_launches.load(); }
std::uint64_t Engine::instructions() const { return impl_->n_instructions.load(); }
std::uint64_t Engine::bytes_copied() const { return impl_->n_bytes.load(); }

}  // namespace rig::sim::nv
