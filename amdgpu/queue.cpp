// The AMD driver's hand-over (device.hpp): room, submit, commit and settle, the rings the
// queues read and the kernel-argument area. The packets themselves are encoding.cpp's.
#include "device.hpp"

namespace rig::amd::driver {

// Bytes in a cache line of the host's.
constexpr std::uint64_t kLine = 64;

bool Device::runs(const rig_part& p, std::uint32_t i, char* why) const {
  if (p.queue > 1) return rig_never(why, "part %u: queue %u, but the device has 2 queues", i, p.queue), false;
  switch (p.kind) {
    case RIG_KIND_WORDS:
    case RIG_KIND_FILL: {
      if (p.kind == RIG_KIND_FILL && p.work.fill.segment_bytes) {
        rig_never(why, "part %u: a fill that writes segments of %s, which the AMD driver does not build yet", i,
                  edge::bytes_figure(p.work.fill.segment_bytes).text);
        return false;
      }
      // On several XCCs, XCC 0 alone runs a compute part's words, under one PRED_EXEC.
      const std::uint32_t dwords = part_dwords(p);
      if (xccs_ > 1 && p.queue == 0 && dwords > pm4::kPredExecCountMax) {
        rig_never(why, "part %u: %s of %u dwords, over the %u that one PRED_EXEC runs on XCC 0 alone of the %u XCCs", i,
                  p.kind == RIG_KIND_WORDS ? "words" : "a fill", dwords, pm4::kPredExecCountMax, xccs_);
        return false;
      }
      return true;
    }
    case RIG_KIND_COPY:
      if (p.queue == 1) return true;
      return rig_never(why, "part %u: queue COMPUTE:0 does not run Copy (COPY:0 does)", i), false;
    case RIG_KIND_LAUNCH: {
      if (p.queue != 0) return rig_never(why, "part %u: queue COPY:0 does not run Launch (COMPUTE:0 does)", i), false;
      auto& l = p.work.launch;
      auto* t = static_cast<const LaunchTemplate*>(l.launch);
      if (!t) return rig_never(why, "part %u: a launch of no kernel", i), false;
      static constexpr char axes[] = "xyz";
      std::uint64_t threads = 1;
      for (int k = 0; k < 3; ++k) {
        if (!l.groups[k] || !l.threads[k]) {
          rig_never(why, "part %u: a launch of %ux%ux%u groups of %ux%ux%u threads has an empty dimension", i,
                    l.groups[0], l.groups[1], l.groups[2], l.threads[0], l.threads[1], l.threads[2]);
          return false;
        }
        if (l.threads[k] > 1024) {
          rig_never(why, "part %u: %u threads in %c, over the limit of 1024 per group", i, l.threads[k], axes[k]);
          return false;
        }
        threads *= l.threads[k];
      }
      if (threads > t->max_threads) {
        rig_never(why, "part %u: %llu threads per group, over %s's limit of %u", i, (unsigned long long)threads,
                  t->name, t->max_threads);
        return false;
      }
      if (std::uint64_t(t->group_segment) + l.shared > limits_.lds_bytes) {
        rig_never(why, "part %u: %s of shared memory (%s asked, %s of the kernel's own), over the limit of %s", i,
                  edge::bytes_figure(std::uint64_t(t->group_segment) + l.shared).text,
                  edge::bytes_figure(l.shared).text, edge::bytes_figure(t->group_segment).text,
                  edge::bytes_figure(limits_.lds_bytes).text);
        return false;
      }
      return true;
    }
  }
  return rig_never(why, "part %u: kind %u, no kind of work", i, p.kind), false;
}

Plan Device::plan(const rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) const {
  Plan p;
  p.compute = value_dwords_ + waits * kWait64Dwords;
  std::uint64_t copy_at = copy_.wptr;  // SDMA padding depends on where packets land
  std::uint64_t largest = 0;  // the largest SDMA block: the most padding the ring's end costs
  auto copy_packet = [&](std::uint64_t dwords) {
    largest = std::max(largest, dwords);
    std::uint64_t left = copy_.dwords - copy_at % copy_.dwords;
    std::uint64_t cost = dwords <= left ? dwords : left + dwords;
    copy_at += cost, p.copy += cost;
  };
  bool copies = false;
  std::uint64_t kernarg_at = kernarg_pos_;
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto& part = parts[i];
    if (count > signal_at_.size()) {
      rig_never(why, "%u parts, over the limit of %zu in a submission", count, signal_at_.size());
      p.never = true;
      return p;
    }
    if (!runs(part, i, why)) {
      p.never = true;
      return p;
    }
    bool on_copy = part.queue == 1;
    copies |= on_copy;
    // A wait for each earlier part of the other queue it follows, and that part's signal.
    for (std::uint32_t a = 0; a < part.after_count; ++a) {
      if (part.after[a] >= i) continue;
      if (parts[part.after[a]].queue == part.queue) continue;
      if (on_copy) copy_packet(sdma::kPollRegmemSize), p.compute += kReleaseDwords, ++p.compute_signals;
      else p.compute += kWait32Dwords, copy_packet(sdma::kFenceSize), ++p.copy_signals;
    }
    switch (part.kind) {
      case RIG_KIND_WORDS:
      case RIG_KIND_FILL: {
        const std::uint32_t n = part_dwords(part);
        if (on_copy) {
          copy_packet(n);
        } else if (xccs_ > 1) {  // an indirect buffer of XCC 0's, its words in the kernel-argument area
          p.compute += (n ? kIbDwords : 0) + kXccPartDwords;
          if (n) {
            const std::uint64_t cost = kernarg_cost(kernarg_at, once_bytes(n));
            kernarg_at += cost, p.kernargs += cost;
          }
        } else {
          p.compute += n;
        }
        break;
      }
      case RIG_KIND_COPY: {
        const auto& c = part.work.copy;
        if (!c.dst || (c.fill < 0 && !c.src)) {
          rig_never(why, "part %u: a copy whose %s has no address (memory named by handle only)", i,
                    c.dst ? "source" : "destination");
          p.never = true;
          return p;
        }
        for (std::uint32_t b = 0; b < c.count; ++b) {
          const auto& box = c.boxes[b];
          if (!box.rows || !box.width) continue;
          bool flat = box.src_pitch == box.width && box.dst_pitch == box.width;
          std::uint64_t rows = flat ? 1 : box.rows, bytes = flat ? box.rows * box.width : box.width;
          std::uint64_t chunks = (bytes + sdma::max_chunk(sdma_) - 1) / sdma::max_chunk(sdma_);
          std::uint64_t packet = c.fill >= 0 ? sdma::kConstFillSize : sdma::kCopyLinearSize;
          if (rows * chunks > copy_.dwords) {
            rig_never(why, "part %u: box %u takes %llu SDMA packets, over the %llu dwords of the COPY:0 ring", i, b,
                      (unsigned long long)(rows * chunks), (unsigned long long)copy_.dwords);
            p.never = true;
            return p;
          }
          for (std::uint64_t r = 0; r < rows * chunks; ++r) copy_packet(packet);
        }
        break;
      }
      case RIG_KIND_LAUNCH: {
        p.compute += launch_dwords_;
        auto* t = static_cast<const LaunchTemplate*>(part.work.launch.launch);
        std::uint64_t bytes = round_up(t->kernarg_bytes, 64) + 64;  // + a dispatch packet
        const std::uint64_t cost = kernarg_cost(kernarg_at, bytes);
        kernarg_at += cost, p.kernargs += cost;
        break;
      }
    }
  }
  if (copies) {
    p.compute += kReleaseDwords + kWait32Dwords;
    copy_packet(sdma::kPollRegmemSize);
    copy_packet(sdma::kFenceSize);
    ++p.compute_signals, ++p.copy_signals;
    p.copy += largest;  // blocks smaller than planned may move where the ring's end falls
  }
  return p;
}

void Device::reclaim() {
  if (flight_tail_ == flight_head_) return;
  const std::uint64_t reached = load(word_);
  // The flights' values increase: all of them are done (the common case after a wait), or
  // those before the first one not reached.
  std::uint64_t done = flight_tail_;
  if (flight(flight_head_ - 1).value <= reached) done = flight_head_;
  else
    while (flight(done).value <= reached) ++done;
  if (done == flight_tail_) return;
  const auto& f = flight(done - 1);
  compute_.tail = f.compute_end, copy_.tail = f.copy_end, kernarg_tail_ = f.kernarg_end;
  flight_tail_ = done;
}

const LaunchTemplate* Device::lone_launch(const rig_part* parts, std::uint32_t count, std::uint32_t waits) const {
  if (count != 1 || waits || parts[0].kind != RIG_KIND_LAUNCH || parts[0].queue != 0) return nullptr;
  const auto& l = parts[0].work.launch;
  const auto* t = static_cast<const LaunchTemplate*>(l.launch);
  // Built for this geometry: runs() took it when it was built, and what it checks of the
  // kernel does not change.
  return t && t->built.same(l, scratch_.address, scratch_.bytes) ? t : nullptr;
}

void Device::submit_lone(const LaunchTemplate& t, const rig_launch& l, std::uint64_t v, bool timed) {
  BuiltLaunch& b = t.built;
  BuiltLaunch::Lone& lone = b.lone[timed];
  const std::uint64_t start = compute_.wptr;
  mark(start + lone.packets_at, 0, v, 0, t.name);
  time_value(v, timed);
  const std::uint64_t args = place_kernargs(t, l);
  // What differs from launch to launch is patched into the value's words, then they are
  // copied into the ring whole.
  std::uint32_t* const words = lone.words.data();
  patch_user(b, args, v, [&](std::uint32_t at, std::uint64_t x) { put64(words, lone.user_at + at, x); });
  if (xccs_ > 1) {
    const std::uint64_t slot = slot_of(v);
    std::memcpy(slot_words(v) + kSlotTail + kPredDwords + pm4::kReleaseMemData, &v, 8);
    put64(words, lone.barrier_at, ++barriers_ * xccs_);
    put64(words, lone.ibs_at[2], slot + kSlotTail * 4);
    if (timed) {
      stamp_slot(v);
      put64(words, lone.ibs_at[0], slot + kSlotStart * 4);
      put64(words, lone.ibs_at[1], slot + kSlotEnd * 4);
    }
  } else {
    put64(words, lone.word_at, v);
    if (timed) {
      put64(words, lone.stamps_at[0], stamps_of(v));
      put64(words, lone.stamps_at[1], stamps_of(v) + 8);
    }
  }
  compute_.put(lone.words);
  flight(flight_head_++) = {v, compute_.wptr - compute_held_, copy_.wptr, kernarg_pos_};
  ring_doorbell(compute_);
  // The lines the next such launch writes, fetched for writing now so that it does not wait
  // for them: its words in the ring, its kernel arguments, its flight's record and its mark.
  __builtin_prefetch(&flight(flight_head_), 1);
  __builtin_prefetch(&marks_[marks_sequence_.load(std::memory_order_relaxed) / 2 % kMarks], 1);
  const std::uint64_t n = lone.words.size();
  for (std::uint64_t i = 0; i < n + kLine / 4; i += kLine / 4)
    __builtin_prefetch(compute_.words + ((compute_.wptr + std::min(i, n - 1)) & (compute_.dwords - 1)), 1);
  const std::uint64_t args_at = kernargs_.address + kernarg_offset(kernarg_pos_), bytes = b.kernargs.size();
  for (std::uint64_t i = 0; i < bytes + kLine; i += kLine)
    __builtin_prefetch(reinterpret_cast<const void*>(args_at + std::min(i, bytes - 1)), 1);
}

bool Device::lone_fits(const LaunchTemplate& t) const {
  Plan p;  // what plan() would find, without its walk
  p.compute = value_dwords_ + launch_dwords_;
  p.kernargs = kernarg_cost(kernarg_pos_, t.built.kernargs.size());
  return fits(p);
}

bool Device::fits(const Plan& p) const {
  return compute_.wptr + p.compute - compute_.tail <= compute_.dwords &&
         copy_.wptr + p.copy - copy_.tail <= copy_.dwords &&
         kernarg_pos_ + p.kernargs - kernarg_tail_ <= kernargs_.bytes && flight_head_ - flight_tail_ < flight_limit_;
}

void Device::time_value(std::uint64_t v, bool timed) {
  timed_[v % kFlights] = timed;
  if (timed) std::memset(reinterpret_cast<void*>(stamps_of(v)), 0, 16);
}

// The scratch's mark of a lone launch: a tag, then the template.
constexpr std::uint64_t kLoneTag = 0x656e6f6c2d646d61;  // "amd-lone"

void Device::note_lone(rig_part* parts, const LaunchTemplate* t) {
  static_assert(RIG_SCRATCH >= 2 * sizeof(std::uint64_t));
  const std::uint64_t mark[2] = {t ? kLoneTag : 0, reinterpret_cast<std::uint64_t>(t)};
  std::memcpy(parts[0].scratch, mark, sizeof mark);
}

const LaunchTemplate* Device::noted_lone(const rig_part* parts, std::uint32_t count, std::uint32_t waits) {
  if (count != 1 || waits) return nullptr;
  std::uint64_t mark[2];
  std::memcpy(mark, parts[0].scratch, sizeof mark);
  // The part's own template, so that a mark left by an earlier room of other parts is no mark.
  return mark[0] == kLoneTag && mark[1] == reinterpret_cast<std::uint64_t>(parts[0].work.launch.launch)
             ? reinterpret_cast<const LaunchTemplate*>(mark[1])
             : nullptr;
}

int Device::room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
  auto& d = self(edge);
  if (d.stopped_) return rig_never(why, "the device is stopped");
  const auto* t = d.lone_launch(parts, count, waits);
  if (count) note_lone(parts, t);
  // What the word shows is read only when the queues seem full: on a GPU it is memory the
  // GPU writes, and most values fit in what the last reading freed.
  if (t && d.lone_fits(*t)) return RIG_FITS;
  d.reclaim();
  if (t && d.lone_fits(*t)) return RIG_FITS;
  return d.room_for(parts, count, waits, why);
}

int Device::room_for(const rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
  Plan p = plan(parts, count, waits, why);
  if (p.never) return RIG_NEVER;
  if (p.compute > compute_.dwords)
    return rig_never(why, "%u part%s and %u waits take %s of the COMPUTE:0 ring, over its %s", count,
                     count == 1 ? "" : "s", waits,
                     edge::bytes_figure(p.compute * 4).text, edge::bytes_figure(compute_.dwords * 4).text);
  if (p.copy > copy_.dwords)
    return rig_never(why, "%u part%s and %u waits take %s of the COPY:0 ring, over its %s", count,
                     count == 1 ? "" : "s", waits,
                     edge::bytes_figure(p.copy * 4).text, edge::bytes_figure(copy_.dwords * 4).text);
  if (p.kernargs > kernargs_.bytes)
    return rig_never(why, "%u part%s take%s %s of kernel arguments, over the %s of their area", count,
                     count == 1 ? "" : "s", count == 1 ? "s" : "",
                     edge::bytes_figure(p.kernargs).text, edge::bytes_figure(kernargs_.bytes).text);
  bool idle = flight_tail_ == flight_head_;
  if (compute_sequence_ + p.compute_signals >= o_.sequence_limit ||
      copy_sequence_ + p.copy_signals >= o_.sequence_limit) {
    if (!idle) return RIG_LATER;
    // Both queues have passed every sequence wait: the words restart at 0.
    std::memset(control_host_ + kComputeSequence, 0, 4);
    std::memset(control_host_ + kCopySequence, 0, 4);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    compute_sequence_ = copy_sequence_ = 0;
  }
  if (fits(p)) return RIG_FITS;
  if (!idle) return RIG_LATER;
  return rig_never(why, "%u part%s and %u waits take %s of the COMPUTE:0 ring, %s of the COPY:0 ring and %s of "
                   "kernel arguments, which the empty rings of %s, %s and %s cannot hold where they now start",
                   count, count == 1 ? "" : "s", waits, edge::bytes_figure(p.compute * 4).text,
                   edge::bytes_figure(p.copy * 4).text, edge::bytes_figure(p.kernargs).text,
                   edge::bytes_figure(compute_.dwords * 4).text, edge::bytes_figure(copy_.dwords * 4).text,
                   edge::bytes_figure(kernargs_.bytes).text);
}

void Device::mark(std::uint64_t position, std::uint32_t queue, std::uint64_t v, std::uint32_t part, const char* what) {
  // A sequence lock with one writer (rig's turn): odd while the mark is written.
  const std::uint64_t sequence = marks_sequence_.load(std::memory_order_relaxed);
  marks_sequence_.store(sequence + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  auto& m = marks_[sequence / 2 % kMarks];
  constexpr auto relaxed = std::memory_order_relaxed;
  m.position.store(position, relaxed), m.queue.store(queue, relaxed), m.value.store(v, relaxed);
  m.part.store(part, relaxed), m.what.store(what, relaxed);
  marks_sequence_.store(sequence + 2, std::memory_order_release);
}

void Device::place_words(Ring& ring, std::span<const std::uint32_t> words, bool sdma) {
  if (sdma) {  // SDMA packets never straddle the ring's end: pad with NOPs (opcode 0) first
    std::uint64_t left = ring.dwords - ring.wptr % ring.dwords;
    if (words.size() > left)
      for (; left; --left) ring.words[ring.wptr++ & (ring.dwords - 1)] = sdma::kOpNop;
  }
  for (auto w : words) ring.words[ring.wptr++ & (ring.dwords - 1)] = w;  // rings are powers of two
}

void Device::launch(pm4::Pm4& pc, const rig_launch& l, std::uint64_t v) {
  const auto& t = *static_cast<const LaunchTemplate*>(l.launch);
  BuiltLaunch& b = t.built;
  if (!b.same(l, scratch_.address, scratch_.bytes)) build_launch(t, l);
  const std::uint64_t args = place_kernargs(t, l);
  const std::uint64_t start = pc.position();
  pc.packets(b.packets);  // into the compute ring, whose positions pc's are
  patch_user(b, args, v, [&](std::uint32_t at, std::uint64_t x) { compute_.set64(start + b.user_at + at, x); });
}

std::uint64_t Device::take_kernargs(std::uint64_t bytes) {
  kernarg_pos_ += kernarg_cost(kernarg_pos_, bytes) - bytes;  // to the start if they would straddle the end
  const std::uint64_t at = kernargs_.address + kernarg_offset(kernarg_pos_);
  kernarg_pos_ += bytes;
  return at;
}

std::uint64_t Device::place_kernargs(const LaunchTemplate& t, const rig_launch& l) {
  // The kernel arguments: the launch's parameters, then the hidden arguments, then an HSA
  // dispatch packet for kernels that read one (dispatch_ptr).
  const BuiltLaunch& b = t.built;
  const std::uint64_t bytes = b.kernargs.size();
  const std::uint64_t at = take_kernargs(bytes);
  auto* args = reinterpret_cast<std::byte*>(at);
  std::memcpy(args, b.kernargs.data(), bytes);
  // rig gives at most the explicit arguments' bytes (the entry's parameter bytes).
  std::memcpy(args, l.params, std::min<std::uint64_t>(l.param_bytes, t.explicit_bytes));
  std::memcpy(args + round_up(t.kernarg_bytes, 64) + 40, &at, 8);  // the dispatch packet's kernarg_address
  return at;
}

int Device::failed(const char** failure, std::string why) {
  std::lock_guard g(fault_mutex_);
  *failure = messages_.emplace_back(std::move(why)).c_str();
  return RIG_FAILED;
}

void Device::ring_doorbell(Ring& r) {
  std::uint64_t pointer = r.bytes ? r.wptr * 4 : r.wptr;
  std::atomic_thread_fence(std::memory_order_release);  // packets before the pointer
  __atomic_store_n(r.wptr_memory, pointer, __ATOMIC_RELEASE);
  __atomic_store_n(r.doorbell, pointer, __ATOMIC_RELEASE);
  // The other XCCs' queues over the ring; the count and the doorbells' addresses read once,
  // since the stores through them could otherwise be taken to change them.
  volatile std::uint64_t* const* other = r.other_doorbells.data();
  for (volatile std::uint64_t* const* end = other + r.others; other != end; ++other)
    __atomic_store_n(*other, pointer, __ATOMIC_RELEASE);
}

int Device::submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                   std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times, const char** failure) {
  auto& d = self(edge);
  d.submitted_ = v;  // "the last value rig gave the driver's submit", even if it fails
  if (!d.faulted_.load() && !d.stopped_) {
    if (const auto* t = noted_lone(parts, count, wait_count)) {  // room found it a lone launch
      d.submit_lone(*t, parts[0].work.launch, v, times != nullptr);
      return RIG_COMMITTED;
    }
  }
  return d.submit_parts(parts, count, waits, wait_count, v, times, failure);
}

int Device::submit_parts(const rig_part* parts, std::uint32_t count, const rig_wait* waits, std::uint32_t wait_count,
                         std::uint64_t v, std::uint64_t* times, const char** failure) {
  if (faulted_.load()) {
    std::lock_guard g(fault_mutex_);
    return failed(failure, fault_);
  }
  if (stopped_) return failed(failure, "submit after stop");
  try {
    pm4::Pm4 pc(gen_, std::span(compute_.words, compute_.dwords), compute_.wptr);
    sdma::Sdma ps(std::span(copy_.words, copy_.dwords), copy_.wptr, sdma_);
    const std::uint64_t seq_c = control_.address + kComputeSequence, seq_s = control_.address + kCopySequence;
    const std::uint64_t stamps = stamps_of(v);
    if (times && xccs_ > 1) stamp_slot(v);
    bool copies = false;
    for (std::uint32_t i = 0; i < count; ++i) copies |= parts[i].queue == 1;
    // Foreign waits: the producer's word, which the GPU reaches through rig_words.
    auto words_begin = words_map_.address, words_end = words_map_.address + words_map_.bytes;
    for (std::uint32_t w = 0; w < wait_count; ++w) {
      auto address = reinterpret_cast<std::uint64_t>(waits[w].word);
      if (address < words_begin || address + 8 > words_end)
        return failed(failure, fmt::format("value {} waits for device {}'s word at {:#x}, outside rig_words, "
                                             "which its queues cannot read", v, waits[w].device, address));
      pc.wait_mem64(address, pm4::Compare::GreaterEqual, waits[w].value);
    }
    // A GPU clock stored at `address` when the work before it is done (by XCC 0 alone, from
    // the value's slot, where several XCCs read the ring).
    auto stamp = [&](std::uint64_t address) {
      if (xccs_ > 1) return pc.indirect_buffer(slot_of(v) + (address == stamps ? kSlotStart : kSlotEnd) * 4,
                                               std::uint32_t(kPredDwords + kReleaseDwords));
      const std::uint64_t at = pc.position();
      pc.packets(stamp_);
      compute_.set64(at + pm4::kReleaseMemAddress, address);
    };
    // Device order: the previous value's dispatches are done and its writes visible.
    pc.packets(head());
    time_value(v, times != nullptr);
    if (times) stamp(stamps);
    if (copies) {  // the copy queue starts this value after the compute queue got here
      pc.release_mem({seq_c, ++compute_sequence_, pm4::DataSel::Low32, pm4::IntSel::None, 0, false});
      ps.poll_mem(seq_c, sdma::Compare::GreaterEqual, compute_sequence_);
    }
    // Which parts a part of the other queue follows: they signal when done.
    for (std::uint32_t i = 0; i < count; ++i) signal_at_[i] = 0;
    std::array<bool, 64> signals{};
    for (std::uint32_t i = 0; i < count; ++i)
      for (std::uint32_t a = 0; a < parts[i].after_count; ++a) {
        auto j = parts[i].after[a];
        if (j < i && parts[j].queue != parts[i].queue) signals[j] = true;
      }
    for (std::uint32_t i = 0; i < count; ++i) {
      auto& part = parts[i];
      bool on_copy = part.queue == 1;
      for (std::uint32_t a = 0; a < part.after_count; ++a) {
        auto j = part.after[a];
        if (j >= i || parts[j].queue == part.queue) continue;
        if (on_copy) ps.poll_mem(seq_c, sdma::Compare::GreaterEqual, signal_at_[j]);
        else pc.wait_mem32(seq_s, pm4::Compare::GreaterEqual, signal_at_[j]);
      }
      Ring& ring = on_copy ? copy_ : compute_;
      std::uint64_t start = on_copy ? ps.position() : pc.position();
      switch (part.kind) {
        case RIG_KIND_WORDS:
        case RIG_KIND_FILL: {
          const char* what = part.kind == RIG_KIND_WORDS ? "words" : "a fill";
          // A fill's words, written into `buffer` (room for `capacity`): false once it failed.
          std::uint32_t filled = 0;
          auto fill = [&](std::uint32_t* buffer, std::uint32_t capacity) {
            auto& f = part.work.fill;
            FillQueue q{buffer, capacity, 0, on_copy ? kEngineSdma : kEnginePm4, 0, v};
            if (int code = f.fn(&q, f.arg, v))
              return failed(failure, fmt::format("the fill of value {} part {} returned {}", v, i, code)), false;
            if (q.count > capacity)
              return failed(failure, fmt::format("the fill of value {} part {} wrote {} dwords, more than its {}", v,
                                                   i, q.count, capacity)), false;
            filled = q.count;
            return true;
          };
          if (xccs_ > 1 && !on_copy) {
            // Every XCC runs the ring's packets: XCC 0 alone runs the part's, under PRED_EXEC in
            // an indirect buffer (PRED_EXEC works in indirect buffers only) in the kernel-argument
            // area, where room planned its bytes; the barrier below holds the other XCCs.
            const std::uint32_t capacity = part_dwords(part);
            if (!capacity) break;
            const std::uint64_t at = take_kernargs(once_bytes(capacity));
            auto* ib = reinterpret_cast<std::uint32_t*>(at);
            if (part.kind == RIG_KIND_WORDS) std::memcpy(ib + kPredDwords, part.work.words.words, capacity * 4);
            else if (!fill(ib + kPredDwords, capacity)) return RIG_FAILED;
            const std::uint32_t n = part.kind == RIG_KIND_WORDS ? capacity : filled;
            if (!n) break;
            pm4::Pm4(gen_, std::span(ib, kPredDwords)).pred_exec(1, n);
            mark(start, 0, v, i, what);
            pc.indirect_buffer(at, std::uint32_t(kPredDwords) + n);
          } else {
            std::span<const std::uint32_t> words;
            std::array<std::uint32_t, kFillDefaultUnits> fill_words;
            std::vector<std::uint32_t> big;
            if (part.kind == RIG_KIND_WORDS) {
              words = {part.work.words.words, part.work.words.count};
            } else {
              const std::uint32_t capacity = part_dwords(part);
              std::uint32_t* buffer = fill_words.data();
              if (capacity > fill_words.size()) big.resize(capacity), buffer = big.data();
              if (!fill(buffer, capacity)) return RIG_FAILED;
              words = {buffer, filled};
            }
            // The writers' positions move on past the words placed by hand.
            ring.wptr = start;
            place_words(ring, words, on_copy);
            if (on_copy) ps = sdma::Sdma(std::span(ring.words, ring.dwords), ring.wptr, sdma_);
            else pc = pm4::Pm4(gen_, std::span(ring.words, ring.dwords), ring.wptr);
            mark(start, part.queue, v, i, what);
          }
          break;
        }
        case RIG_KIND_COPY:
          mark(start, 1, v, i, part.work.copy.fill >= 0 ? "a fill of memory" : "a copy");
          copy(ps, part.work.copy);
          break;
        case RIG_KIND_LAUNCH: {
          auto* t = static_cast<const LaunchTemplate*>(part.work.launch.launch);
          mark(start, 0, v, i, t->name);
          launch(pc, part.work.launch, v);
          break;
        }
      }
      // Several XCCs: a compute part that signals or is followed by more is done on every XCC,
      // and its writes visible to each, before the next part or its signal (a Words or Fill
      // part, which XCC 0 alone runs, too: the others wait for it there).
      if (xccs_ > 1 && !on_copy && (signals[i] || i + 1 < count)) {
        barrier(pc);
        pc.acquire_mem();
      }
      if (signals[i]) {
        if (on_copy) ps.fence(seq_s, signal_at_[i] = ++copy_sequence_);
        else pc.release_mem({seq_c, signal_at_[i] = ++compute_sequence_, pm4::DataSel::Low32});
      }
    }
    if (copies) {  // the value's copies are done before its word
      ps.fence(seq_s, ++copy_sequence_);
      pc.wait_mem32(seq_s, pm4::Compare::GreaterEqual, copy_sequence_);
    }
    if (times) stamp(stamps + 8);
    // The word takes v, then sleepers are woken.
    const std::uint64_t tail_at = pc.position();
    pc.packets(tail());
    if (xccs_ > 1) {  // every XCC's work is done when XCC 0 stores the word from v's slot
      std::memcpy(slot_words(v) + kSlotTail + kPredDwords + pm4::kReleaseMemData, &v, 8);
      compute_.set64(tail_at + kBarrierReference, ++barriers_ * xccs_);
      compute_.set64(tail_at + kBarrierDwords + 1, slot_of(v) + kSlotTail * 4);
    } else {
      compute_.set64(tail_at + pm4::kReleaseMemData, v);
    }
    compute_.wptr = pc.position();
    flight(flight_head_++) = {v, compute_.wptr - compute_held_, copies ? ps.position() : copy_.wptr,
                                           kernarg_pos_};
    if (copies) {
      copy_.wptr = ps.position();
      ring_doorbell(copy_);
    }
    ring_doorbell(compute_);
  } catch (const std::exception& e) {
    return failed(failure, fmt::format("encoding value {}: {}", v, e.what()));
  }
  return RIG_COMMITTED;
}

void Device::correlate() {
  std::uint64_t before = rig_now_ns();
  auto c = kfd_.clock_counters();
  std::uint64_t after = rig_now_ns();
  if (!c) return;
  sync_gpu_ = c->gpu_clock_counter, sync_host_ = before + (after - before) / 2;
}

std::uint64_t Device::gpu_to_host(std::uint64_t ticks) {
  auto delta = std::int64_t(ticks - sync_gpu_) * std::int64_t(1'000'000'000 / kGpuClockHz);
  return std::uint64_t(std::int64_t(sync_host_) + delta);
}

int Device::settle(void* edge, std::uint64_t v, std::uint64_t* times, const char** failure) {
  auto& d = self(edge);
  if (times[0] || times[1]) return RIG_OK;  // "a later call finds the times written and leaves them"
  if (!d.timed_[v % kFlights]) return d.failed(failure, fmt::format("value {} was not timed", v));
  auto* stamps = reinterpret_cast<const volatile std::uint64_t*>(d.stamps_of(v));
  std::uint64_t start = stamps[0], end = stamps[1];
  if (!start || !end) return d.failed(failure, fmt::format("value {} has a stamp its work never wrote", v));
  if (rig_now_ns() - d.sync_host_ > 1'000'000'000) d.correlate();  // drift stays small
  times[0] = d.gpu_to_host(start), times[1] = std::max(d.gpu_to_host(end), times[0]);
  return RIG_OK;
}


}  // namespace rig::amd::driver
