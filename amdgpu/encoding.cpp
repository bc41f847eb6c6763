// The AMD driver's encoding (device.hpp): the packets of a value's head and tail, of a
// launch and of a copy. What differs between processors' generations lives here and in
// code.cpp.
#include "device.hpp"

namespace rig::amd::driver {

// gfx_target_version of the gfx9 processors the driver builds packets for (KFD's
// kfd_device.c: gfx90a is 90010, gfx942 90402).
constexpr std::uint64_t kGfx90a = 90010, kGfx942 = 90402;

Result<pm4::Gen> generation_of(const Gpu& gpu) {
  const std::uint64_t version = gpu.get("gfx_target_version");
  if (version >= 110000 && version < 120000) return pm4::Gen::Gfx11;
  if (version >= 120000 && version < 130000) return pm4::Gen::Gfx12;
  if (version == kGfx90a || version == kGfx942) return pm4::Gen::Gfx9_4;
  return std::unexpected(fmt::format(
      "{}: the driver builds packets for gfx90a, gfx942, gfx11 and gfx12 only", gpu.arch));
}

sdma::Version sdma_of(pm4::Gen gen) { return gen == pm4::Gen::Gfx9_4 ? sdma::Version::Sdma4 : sdma::Version::Sdma6; }

std::uint64_t Device::scratch_per_wave(const LaunchTemplate& t) const {
  return round_up(std::uint64_t(std::max(t.private_segment, 1024u)) * limits_.wave_size, pm4::tmpring_granule(gen_));
}

std::array<std::uint32_t, 16> Device::user_sgprs(const LaunchTemplate& t, BuiltLaunch& b) const {
  // In the order the descriptor's properties list them.
  std::array<std::uint32_t, 16> user{};
  std::uint32_t n = 0;
  auto put64 = [&](std::uint64_t x, std::int8_t* place = nullptr) {
    if (n + 2 <= user.size()) user[n] = std::uint32_t(x), user[n + 1] = std::uint32_t(x >> 32);
    if (place && n + 2 <= t.user_sgprs) *place = std::int8_t(n);  // only those the launch sets
    n += 2;
  };
  b.packet_sgpr = b.kernarg_sgpr = b.id_sgpr = -1;
  using KD = KernelDescriptor;
  const bool scratch = uses_scratch(t);
  if (t.properties & KD::kPrivateSegmentBuffer) {  // a buffer resource over the scratch
    std::uint64_t base = scratch ? scratch_.address : 0;
    std::array<std::uint32_t, 4> rsrc{std::uint32_t(base), std::uint32_t(base >> 32) | 1u << 31, 0xffffffffu, 0x20c14000u};
    for (auto w : rsrc)
      if (n < user.size()) user[n++] = w;
  }
  if (t.properties & KD::kDispatchPtr) put64(0, &b.packet_sgpr);
  if (t.properties & KD::kQueuePtr) put64(0);  // no amd_queue_t: kernels that read it are not supported
  if (t.properties & KD::kKernargSegmentPtr) put64(0, &b.kernarg_sgpr);
  if (t.properties & KD::kDispatchId) put64(0, &b.id_sgpr);
  if (t.properties & KD::kFlatScratchInit) put64(scratch ? scratch_.address : 0);
  if (t.properties & KD::kPrivateSegmentSize && n < user.size()) user[n++] = t.private_segment;
  return user;
}

bool Device::uses_scratch(const LaunchTemplate& t) const {
  return scratch_.bytes && (t.private_segment || (t.properties & KernelDescriptor::kUsesDynamicStack));
}

void Device::build_launch(const LaunchTemplate& t, const rig_launch& l) {
  BuiltLaunch& b = t.built;
  b.valid = false;
  std::uint32_t dims = l.groups[2] > 1 || l.threads[2] > 1 ? 3 : l.groups[1] > 1 || l.threads[1] > 1 ? 2 : 1;
  // The kernel arguments but for the parameters and the dispatch packet's kernarg address.
  b.kernargs.assign(round_up(t.kernarg_bytes, 64) + 64, std::byte{0});
  std::byte* args = b.kernargs.data();
  for (auto& h : t.hidden) {
    std::uint64_t value = 0;
    switch (h.kind) {
      case Hidden::BlockCountX: value = l.groups[0]; break;
      case Hidden::BlockCountY: value = l.groups[1]; break;
      case Hidden::BlockCountZ: value = l.groups[2]; break;
      case Hidden::GroupSizeX: value = l.threads[0]; break;
      case Hidden::GroupSizeY: value = l.threads[1]; break;
      case Hidden::GroupSizeZ: value = l.threads[2]; break;
      case Hidden::GridDims: value = dims; break;
      case Hidden::DynamicLds: value = l.shared; break;
      case Hidden::Zero: break;
    }
    if (h.offset + std::min<std::uint32_t>(h.size, 8) > t.kernarg_bytes) continue;
    std::memcpy(args + h.offset, &value, std::min<std::uint32_t>(h.size, 8));
  }
  {  // hsa_kernel_dispatch_packet_t: setup, group and grid sizes, segment sizes, object
    std::byte* p = args + round_up(t.kernarg_bytes, 64);
    std::uint16_t setup = std::uint16_t(dims);
    std::uint16_t group[3] = {std::uint16_t(l.threads[0]), std::uint16_t(l.threads[1]), std::uint16_t(l.threads[2])};
    std::uint32_t grid[3] = {l.groups[0] * l.threads[0], l.groups[1] * l.threads[1], l.groups[2] * l.threads[2]};
    std::uint32_t segments[2] = {t.private_segment, t.group_segment + l.shared};
    std::memcpy(p + 2, &setup, 2);
    std::memcpy(p + 4, group, 6);
    std::memcpy(p + 12, grid, 12);
    std::memcpy(p + 24, segments, 8);
    std::memcpy(p + 32, &t.descriptor, 8);
  }
  // The packets, their user SGPRs to be patched per launch.
  const bool scratch = uses_scratch(t);
  std::uint32_t lds = (t.group_segment + l.shared + kLdsGranule - 1) / kLdsGranule;
  std::uint32_t rsrc2 = (t.rsrc2 & ~(0x1ffu << 15)) | (lds & 0x1ff) << 15;
  std::uint32_t tmpring = 0;
  if (scratch) {
    const std::uint64_t per_wave = scratch_per_wave(t);
    const std::uint64_t waves = std::min<std::uint64_t>(scratch_slice_ / per_wave, pm4::kTmpringWavesMax);
    tmpring = pm4::tmpring_size(gen_, std::uint32_t(waves), per_wave);
  }
  std::uint32_t pgm[2] = {std::uint32_t(t.code >> 8), std::uint32_t(t.code >> 40)};
  std::uint32_t rsrc12[2] = {t.rsrc1, rsrc2};
  std::uint32_t zero3[3] = {0, 0, 0};
  std::uint32_t start_threads[6] = {0, 0, 0, l.threads[0], l.threads[1], l.threads[2]};
  std::uint32_t scratch_base[2] = {std::uint32_t((scratch ? scratch_.address : 0) >> 8),
                                   std::uint32_t((scratch ? scratch_.address : 0) >> 40)};
  std::array<std::uint32_t, kLaunchDwords> words{};
  pm4::Pm4 pc(gen_, words);
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_LO, pgm);
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_RSRC1, rsrc12);
  pc.set_sh_reg(pm4::reg::COMPUTE_PGM_RSRC3, t.rsrc3);
  pc.set_sh_reg(pm4::reg::COMPUTE_TMPRING_SIZE, tmpring);
  if (pm4::has_dispatch_scratch_base(gpu_.get("gfx_target_version"))) {
    // On several XCCs each XCC's base is its own slice's, from the scratch's indirect buffer
    // (as many dwords as the SET_SH_REG it takes the place of).
    static_assert(kIbDwords == pm4::Pm4::set_sh_reg_size(2));
    if (scratch && xccs_ > 1) pc.indirect_buffer(scratch_bases_, xccs_ * kScratchBaseDwords);
    else pc.set_sh_reg(pm4::reg::COMPUTE_DISPATCH_SCRATCH_BASE_LO, scratch_base);
  }
  pc.set_sh_reg(pm4::reg::COMPUTE_RESTART_X, zero3);
  const std::uint32_t user_at = pc.size() + 2;  // past the SET_SH_REG's header and register
  const auto user = user_sgprs(t, b);  // patched per launch
  if (t.user_sgprs) pc.set_sh_reg(pm4::reg::COMPUTE_USER_DATA_0, std::span(user).first(t.user_sgprs));
  pc.set_sh_reg(pm4::reg::COMPUTE_RESOURCE_LIMITS, 0);
  pc.set_sh_reg(pm4::reg::COMPUTE_START_X, start_threads);
  pc.dispatch_direct(l.groups[0], l.groups[1], l.groups[2], t.wave32);
  pc.cs_partial_flush();  // the next part starts once this dispatch has completed
  b.packets.assign(words.begin(), words.begin() + pc.size());
  b.user_at = user_at;
  for (bool timed : {false, true}) {  // the lone values, as submit_parts would write them
    auto& lone = b.lone[timed];
    auto& w = lone.words;
    auto at = [&] { return std::uint32_t(w.size()); };
    w.assign(head().begin(), head().end());
    auto put_stamp = [&](int which) {
      if (xccs_ > 1) {  // an indirect buffer of the slot's stamp, its address patched
        lone.ibs_at[which] = at() + 1;
        std::array<std::uint32_t, kIbDwords> ib{};
        pm4::Pm4(gen_, ib).indirect_buffer(0, kPredDwords + kReleaseDwords);
        w.insert(w.end(), ib.begin(), ib.end());
      } else {
        lone.stamps_at[which] = at() + pm4::kReleaseMemAddress;
        w.insert(w.end(), stamp_.begin(), stamp_.end());
      }
    };
    if (timed) put_stamp(0);
    lone.packets_at = at(), lone.user_at = at() + user_at;
    w.insert(w.end(), b.packets.begin(), b.packets.end());
    if (timed) put_stamp(1);
    if (xccs_ > 1) {  // XCC 0 stores the stamps and the word from the value's slot
      lone.barrier_at = at() + std::uint32_t(kBarrierReference);
      lone.ibs_at[2] = at() + std::uint32_t(kBarrierDwords) + 1;
    } else {
      lone.word_at = at() + pm4::kReleaseMemData;
    }
    w.insert(w.end(), tail().begin(), tail().end());
  }
  std::memcpy(b.geometry.data(), geometry(l), kGeometryBytes);
  b.scratch_address = scratch_.address, b.scratch_bytes = scratch_.bytes;
  b.valid = true;
}

void Device::place_scratch() {
  if (xccs_ == 1) {
    scratch_slice_ = scratch_.bytes, scratch_bases_ = 0;
    return;
  }
  // Several XCCs run a dispatch's waves at once, each XCC's in the scratch its own
  // COMPUTE_DISPATCH_SCRATCH_BASE names: slice x of the scratch is XCC x's, its base set under
  // PRED_EXEC for that XCC alone, in an indirect buffer at the scratch's end (PRED_EXEC works
  // in indirect buffers only), as tinygrad's ops_amd.py sets scratch + x * (size / XCCs).
  scratch_slice_ = (scratch_.bytes - kScratchBasesBytes) / xccs_ / pm4::tmpring_granule(gen_) * pm4::tmpring_granule(gen_);
  scratch_bases_ = scratch_.address + scratch_.bytes - kScratchBasesBytes;
  pm4::Pm4 ib(gen_, std::span(reinterpret_cast<std::uint32_t*>(scratch_bases_), xccs_ * kScratchBaseDwords));
  for (std::uint32_t x = 0; x < xccs_; ++x) {
    const std::uint64_t base = scratch_.address + x * scratch_slice_;
    const std::uint32_t lo_hi[2] = {std::uint32_t(base >> 8), std::uint32_t(base >> 40)};
    ib.pred_exec(1u << x, pm4::Pm4::set_sh_reg_size(2));
    ib.set_sh_reg(pm4::reg::COMPUTE_DISPATCH_SCRATCH_BASE_LO, lo_hi);
  }
}

void Device::copy(sdma::Sdma& ps, const rig_copy& c) {
  for (std::uint32_t b = 0; b < c.count; ++b) {
    const auto& box = c.boxes[b];
    if (!box.rows || !box.width) continue;
    bool flat = box.src_pitch == box.width && box.dst_pitch == box.width;
    std::uint64_t rows = flat ? 1 : box.rows, bytes = flat ? box.rows * box.width : box.width;
    for (std::uint64_t r = 0; r < rows; ++r) {
      std::uint64_t dst = c.dst + box.dst_offset + r * box.dst_pitch;
      if (c.fill >= 0) ps.fill(dst, std::uint8_t(c.fill), bytes);
      else ps.copy_linear(dst, c.src + box.src_offset + r * box.src_pitch, bytes);
    }
  }
}

void Device::build_value_packets() {
  pm4::Pm4 head(gen_, head_);
  head.cs_partial_flush();
  head.acquire_mem();
  head_dwords_ = head.size();
  value_dwords_ = kValueDwords - kAcquireDwords + (1 + pm4::acquire_mem_body(gen_));
  const pm4::Release word{reinterpret_cast<std::uint64_t>(word_), 0, pm4::DataSel::Data64, pm4::IntSel::None, 0, true};
  const pm4::Release wake{mailbox_, signal_event_, pm4::DataSel::Low32, pm4::IntSel::InterruptAfterWriteConfirm,
                          signal_event_, false};
  pm4::Pm4(gen_, stamp_).release_mem(
      {control_.address + kStamps, 0, pm4::DataSel::GpuClock, pm4::IntSel::None, 0, false});
  if (xccs_ == 1) {
    pm4::Pm4 tail(gen_, tail_);
    tail.release_mem(word);
    tail.release_mem(wake);
    tail_dwords_ = tail.size();
    return;
  }
  // Several XCCs read the ring and each runs every packet: a value ends with a barrier of all
  // of them, after which XCC 0 alone (PRED_EXEC, in an indirect buffer of the value's slot)
  // stores the word and raises the interrupt. Its stamps are XCC 0's too, from the slot.
  {
    pm4::Pm4 b(gen_, barrier_);
    b.release_mem({0, 0, pm4::DataSel::None, pm4::IntSel::None, 0, true});
    b.atomic_add64(control_.address + kXccBarrier, 1);
    b.wait_mem64(control_.address + kXccBarrier, pm4::Compare::GreaterEqual, 0);  // the reference is patched
  }
  pm4::Pm4 tail(gen_, tail_);
  tail.packets(barrier_);
  tail.indirect_buffer(0, std::uint32_t(kSlotTailDwords));  // the slot's address is patched
  tail_dwords_ = tail.size();
  value_dwords_ += kXccValueDwords;
  launch_dwords_ = kLaunchDwords + kXccPartDwords;
  compute_held_ = tail_dwords_ - kBarrierRead;
  flight_limit_ = kSlots;
  // Each slot's packets, its word's value (and a timed value's stamps' addresses) patched per
  // value.
  for (std::uint64_t v = 0; v < kSlots; ++v) {
    std::span<std::uint32_t> slot(slot_words(v), kSlotDwords);
    for (std::uint64_t which : {0, 1}) {
      pm4::Pm4 s(gen_, slot.subspan(which ? kSlotEnd : kSlotStart, kPredDwords + kReleaseDwords));
      s.pred_exec(1, std::uint32_t(kReleaseDwords));
      s.release_mem({stamps_of(v) + 8 * which, 0, pm4::DataSel::GpuClock, pm4::IntSel::None, 0, false});
    }
    pm4::Pm4 s(gen_, slot.subspan(kSlotTail, kSlotTailDwords));
    s.pred_exec(1, std::uint32_t(2 * kReleaseDwords));
    s.release_mem(word);
    s.release_mem(wake);
  }
}

void Device::barrier(pm4::Pm4& pc) {
  const std::uint64_t at = pc.position();
  pc.packets(barrier_);
  compute_.set64(at + kBarrierReference, ++barriers_ * xccs_);
}

void Device::place_xccs() {
  // Dispatches are shared out a group at a time (COMPUTE_TG_CHUNK_SIZE 1, as KFD's MQD has
  // for an AQL queue), each XCC taking the groups of its place (COMPUTE_CURRENT_LOGIC_XCC_ID,
  // set under PRED_EXEC for that XCC alone, in an indirect buffer).
  auto* places = reinterpret_cast<std::uint32_t*>(control_host_ + kXccPlaces);
  constexpr std::uint32_t kPlaceDwords = kPredDwords + pm4::Pm4::set_sh_reg_size(1);
  pm4::Pm4 ib(gen_, std::span(places, xccs_ * kPlaceDwords));
  for (std::uint32_t x = 0; x < xccs_; ++x) {
    ib.pred_exec(1u << x, pm4::Pm4::set_sh_reg_size(1));
    ib.set_sh_reg(pm4::reg::COMPUTE_CURRENT_LOGIC_XCC_ID, x);
  }
  pm4::Pm4 pc(gen_, std::span(compute_.words, compute_.dwords), compute_.wptr);
  pc.set_sh_reg(pm4::reg::COMPUTE_TG_CHUNK_SIZE, 1);
  pc.indirect_buffer(control_.address + kXccPlaces, ib.size());
  compute_.wptr = pc.position();  // the first value's doorbell publishes it
}


}  // namespace rig::amd::driver
