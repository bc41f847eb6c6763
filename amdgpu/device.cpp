// The AMD driver's device (device.hpp): opening, facts, stopping; the functions of rig/amd.hpp.
#include "device.hpp"

#include <sys/mman.h>

namespace rig::amd::driver {

const rig_driver Device::kTable{room, submit, commit, settle, nullptr};

KfdResult<void> Device::make_queue(Ring& r, std::uint32_t bytes, std::uint32_t type, std::uint64_t rptr,
                                   std::uint64_t wptr) {
  auto ring = make_block(bytes, kUncachedGttFlags);
  if (!ring) return std::unexpected(ring.error());
  r.ring = *ring;
  r.words = reinterpret_cast<std::uint32_t*>(r.ring.address);
  r.dwords = bytes / 4;
  r.bytes = type == KFD_IOC_QUEUE_TYPE_SDMA;
  r.rptr_memory = reinterpret_cast<volatile std::uint64_t*>(control_host_ + rptr);
  r.wptr_memory = reinterpret_cast<volatile std::uint64_t*>(control_host_ + wptr);
  if (auto made = create_queue(r, type, 0, rptr, wptr, r.queue_id, r.doorbell, r.doorbell_page); !made) return made;
  r.created = true;
  return {};
}

KfdResult<void> Device::create_queue(const Ring& r, std::uint32_t type, std::uint32_t xcc, std::uint64_t rptr,
                                     std::uint64_t wptr, std::uint32_t& id, volatile std::uint64_t*& doorbell,
                                     void*& page_mapping) {
  kfd_ioctl_create_queue_args q{};
  q.ring_base_address = r.ring.address;
  q.ring_size = std::uint32_t(r.ring.bytes);
  q.read_pointer_address = control_.address + rptr;
  q.write_pointer_address = control_.address + wptr;
  q.queue_type = type;
  // Bits 8..15 of queue_percentage name the XCC a PM4 queue runs on (kfd_chardev.c:
  // pm4_target_xcc; kfd_mqd_manager_v9.c gives each XCC's MQD of a PM4 queue that target,
  // logical XCC id 0 and TG chunk size 0).
  q.queue_percentage = KFD_MAX_QUEUE_PERCENTAGE | xcc << 8;
  q.queue_priority = 7;
  if (type == KFD_IOC_QUEUE_TYPE_COMPUTE) {
    q.eop_buffer_address = eop_.address, q.eop_buffer_size = eop_.bytes;
    q.ctx_save_restore_address = cwsr_.address;
    q.ctx_save_restore_size = std::uint32_t(gpu_.get("cwsr_size"));
    q.ctl_stack_size = std::uint32_t(gpu_.get("ctl_stack_size"));
  }
  auto made = kfd_.create_queue(q);
  if (!made) return std::unexpected(made.error());
  id = made->queue_id;
  // The doorbell page: KFD's offset names it; the queue's doorbell lies within.
  std::uint64_t page = made->doorbell_offset & ~(kDoorbellBytes - 1);
  auto bell = seam_.mmap(nullptr, kDoorbellBytes, PROT_READ | PROT_WRITE, MAP_SHARED, kfd_.kfd_fd(), off_t(page));
  if (!bell) {
    kfd_.destroy_queue(id);
    return std::unexpected(KfdError{"mapping the doorbells: " + os::describe(bell.error()), bell.error()});
  }
  page_mapping = *bell;
  doorbell = reinterpret_cast<volatile std::uint64_t*>(static_cast<std::byte*>(*bell) + (made->doorbell_offset - page));
  return {};
}

Result<void> Device::open() {
  auto fail = [&](const KfdError& e) { return std::unexpected(e.what); };
  auto gen = generation_of(gpu_);
  if (!gen) return std::unexpected(gen.error());
  gen_ = *gen;
  sdma_ = sdma_of(gen_);
  limits_ = code_limits(gpu_);
  xccs_ = gpu_.xccs();
  if (auto r = kfd_.open(std::uint32_t(gpu_.get("drm_render_minor", 128))); !r) return fail(r.error());
  // The timeline words of every device, so that queues write this one and wait on others.
  auto words = reinterpret_cast<std::uint64_t>(&rig_words[0]) & ~(kPage - 1);
  auto words_end = round_up(reinterpret_cast<std::uint64_t>(&rig_words[RIG_WORDS]), kPage);
  auto mapped = map_user(words, words_end - words);
  if (!mapped) return fail(mapped.error());
  words_map_ = *mapped;
  auto word = reinterpret_cast<std::uint64_t>(word_);
  if (word < words || word + 8 > words_end) {  // a word of the caller's own (spec: opener)
    auto own = map_user(word & ~(kPage - 1), kPage);
    if (!own) return fail(own.error());
    word_map_ = *own;
  }
  auto control = make_block(kControlBytes, kUncachedGttFlags);
  if (!control) return fail(control.error());
  control_ = *control;
  control_host_ = reinterpret_cast<std::byte*>(control_.address);
  std::memset(control_host_, 0, control_.bytes);
  auto kernargs = make_block(o_.kernarg_bytes, kGttFlags);
  if (!kernargs) return fail(kernargs.error());
  kernargs_ = *kernargs;
  auto eop = make_block(kPage, kGttFlags);
  if (!eop) return fail(eop.error());
  eop_ = *eop;
  auto cwsr = make_block(std::max<std::uint64_t>(gpu_.get("cwsr_size"), kPage), kVramFlags);
  if (!cwsr) return fail(cwsr.error());
  cwsr_ = *cwsr;

  {  // The process's event page: made by its first device, mapped for each GPU.
    auto& process = kfd_.process();
    std::lock_guard g(process.mutex());
    auto& page = process.event_page();
    if (!page.bytes) {
      auto events = make_block(kEventPageBytes, kUncachedGttFlags);
      if (!events) return fail(events.error());
      page.address = events->address, page.bytes = events->bytes, page.handle = events->handle;
      page.mapped_on.push_back(gpu_.gpu_id);
    } else if (std::find(page.mapped_on.begin(), page.mapped_on.end(), gpu_.gpu_id) == page.mapped_on.end()) {
      if (auto m = kfd_.map(page.handle); !m) return fail(m.error());
      page.mapped_on.push_back(gpu_.gpu_id);
    }
    auto signal = kfd_.create_event(KFD_IOC_EVENT_SIGNAL, true, page.registered ? 0 : page.handle);
    if (!signal) return fail(signal.error());
    page.registered = true;
    signal_event_ = signal->event_id, events_made_[0] = true;
    mailbox_ = page.address + std::uint64_t(signal->event_slot_index) * 8;
  }
  auto memory = kfd_.create_event(KFD_IOC_EVENT_MEMORY, false);
  if (!memory) return fail(memory.error());
  memory_event_ = memory->event_id, events_made_[1] = true;
  auto hw = kfd_.create_event(KFD_IOC_EVENT_HW_EXCEPTION, false);
  if (!hw) return fail(hw.error());
  hw_event_ = hw->event_id, events_made_[2] = true;

  if (auto r = make_queue(compute_, o_.compute_ring_bytes, KFD_IOC_QUEUE_TYPE_COMPUTE, kComputeRptr, kComputeWptr); !r)
    return fail(r.error());
  // Several XCCs: each XCC's command processor reads the compute ring through a queue of its
  // own, the write pointer shared, the read pointers apart.
  if (xccs_ > kXccMax) return std::unexpected(fmt::format("{} XCCs, over the {} PRED_EXEC can select", xccs_, kXccMax));
  for (std::uint32_t x = 1; x < xccs_; ++x) {
    auto& c = compute_;
    if (auto r = create_queue(c, KFD_IOC_QUEUE_TYPE_COMPUTE, x, kXccRptrs + 8 * x, kComputeWptr,
                              c.other_ids[x - 1], c.other_doorbells[x - 1], c.other_pages[x - 1]);
        !r)
      return fail(r.error());
    c.others = x;
  }
  if (auto r = make_queue(copy_, o_.copy_ring_bytes, KFD_IOC_QUEUE_TYPE_SDMA, kCopyRptr, kCopyWptr); !r)
    return fail(r.error());
  if (xccs_ > 1) {
    auto slots = make_block(kSlots * kSlotDwords * 4, kUncachedGttFlags);
    if (!slots) return fail(slots.error());
    slots_ = *slots;
  }
  try {
    build_value_packets();
    if (xccs_ > 1) place_xccs();
  } catch (const std::exception& e) {
    return std::unexpected(fmt::format("{}: {}", name_, e.what()));
  }
  // "the device's values start after the value the word holds"
  submitted_ = load(word_);
  correlate();
  return {};
}

Device::~Device() {
  if (!stopped_) stop("the driver was dropped");
  std::lock_guard g(mutex_);
  for (auto& [id, b] : regions_) drop_block(b);
  drop_block(scratch_);
  for (auto& b : scratch_retired_) drop_block(b);
}

edge::Facts Device::facts() {
  edge::Facts f;
  f.arch = gpu_.arch;
  f.budget = gpu_.vram_bytes;
  f.queues = {{"COMPUTE:0", {Kind::Words, Kind::Fill, Kind::Launch}}, {"COPY:0", {Kind::Words, Kind::Copy, Kind::Fill}}};
  f.copy_engine = 1;
  f.completion = edge::Completion::Store;
  f.waits = {true, true};
  f.may_block = false;
  f.hang_ms = o_.hang_ms;
  f.maps_host = true;
  f.host_addresses = true;
  f.alignment = kPage;
  if (gpu_.cache_bytes) f.cache_bytes = gpu_.cache_bytes;
  auto abi = std::make_shared<Abi>();
  abi->arch = gpu_.arch;
  abi->wave_size = limits_.wave_size;
  abi->compute_units = std::uint32_t(gpu_.compute_units());
  abi->xccs = xccs_;
  abi->lds_bytes = limits_.lds_bytes;
  abi->timeline_word = reinterpret_cast<std::uint64_t>(word_);
  f.capability = edge::declare(kAbi, std::shared_ptr<const Abi>(abi));
  f.word = word_;
  f.bus = gpu_.bus();
  f.edge = &edge_;
  return f;
}

void Device::stop(std::string_view) {
  if (stopped_) return;
  stopped_ = true;
  for (Ring* r : {&compute_, &copy_}) {
    for (std::uint32_t i = 0; i < r->others; ++i) {
      kfd_.destroy_queue(r->other_ids[i]);
      seam_.munmap(r->other_pages[i], kDoorbellBytes);
    }
    r->others = 0;
    if (r->created) kfd_.destroy_queue(r->queue_id), r->created = false;
    if (r->doorbell_page) seam_.munmap(r->doorbell_page, kDoorbellBytes), r->doorbell_page = nullptr;
    drop_block(r->ring);
  }
  std::uint32_t ids[3] = {signal_event_, memory_event_, hw_event_};
  for (int i = 0; i < 3; ++i)
    if (events_made_[i]) kfd_.destroy_event(ids[i]), events_made_[i] = false;
  drop_block(kernargs_);
  drop_block(eop_);
  drop_block(cwsr_);
  drop_block(control_);
  drop_block(slots_);
  drop_block(words_map_);
  drop_block(word_map_);
  // The queues are gone: the word shows the dropped values, after which rig frees memory.
  if (submitted_ > load(word_)) __atomic_store_n(word_, submitted_, __ATOMIC_RELEASE);
}


}  // namespace rig::amd::driver

namespace rig::amd {

using driver::Device;

Result<std::vector<GpuInfo>> gpus(os::Seam& seam) {
  auto topology = read_topology(seam);
  if (!topology) return std::unexpected(topology.error());
  std::vector<GpuInfo> out;
  for (std::size_t i = 0; i < topology->size(); ++i) {
    auto& g = (*topology)[i];
    out.push_back({int(i), g.arch, g.gpu_id, g.vram_bytes, g.bus(), g.compute_units(), g.xccs()});
  }
  return out;
}

Result<RingView> ring_of(edge::Driver& driver, int queue) {
  auto* device = dynamic_cast<Device*>(&driver);
  if (!device) return std::unexpected(std::string("not a driver of rig's AMD driver"));
  if (queue != 0 && queue != 1)
    return std::unexpected(fmt::format("no queue {}: the queues are 0 (COMPUTE:0) and 1 (COPY:0)", queue));
  return device->ring_view(queue);
}

edge::Opener<> opener(int index, os::Seam& seam, Options options) {
  for (std::uint32_t bytes : {options.compute_ring_bytes, options.copy_ring_bytes, options.kernarg_bytes})
    if (bytes < 4096 || (bytes & (bytes - 1)))
      throw std::invalid_argument(fmt::format("AMD:{}: ring size {} is not a power of two of at least 4096", index, bytes));
  std::string name = fmt::format("AMD:{}", index);
  return {name, [index, &seam, options, name](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
            auto topology = read_topology(seam);
            if (!topology) return std::unexpected(fmt::format("{}: no KFD topology: {}", name, topology.error()));
            if (index < 0 || std::size_t(index) >= topology->size())
              return std::unexpected(fmt::format("{}: the KFD topology lists {} GPUs", name, topology->size()));
            auto device = std::make_unique<Device>(seam, (*topology)[std::size_t(index)], index, options, word);
            if (auto opened = device->open(); !opened) {
              device->stop("the open failed");
              return std::unexpected(fmt::format("{}: {}", name, opened.error()));
            }
            return std::unique_ptr<edge::Driver>(std::move(device));
          }};
}

}  // namespace rig::amd
