// The NVIDIA driver's hand-over (device.hpp): room, submit, commit.
//
// A value is encoded into each channel's push buffer as one GP entry per channel it uses: the
// channel waits (64-bit semaphore acquires) for the foreign values it needs, runs its parts in
// order, and where the next part is the other channel's, releases its sequence word for the
// other channel to acquire. The compute channel ends every value: it acquires the copy
// channel's sequence word if the copy channel ran parts since, releases v into the device's
// timeline word and raises the non-stall interrupt. Submit rings the doorbells itself, so it
// always commits. Copy runs copies and fills of boxes on the copy engine, Words places words
// on the compute channel as they are, Fill lets a function write them (FillQueue), Launch
// writes its bank 0 and QMD into the launch ring and SEND_PCAS on the compute channel
// (launch.cpp); a lone repeated launch takes its own path there.
#include "device.hpp"

#include "push.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

namespace rig::nv::driver {

void Device::reclaim() {
  const std::uint64_t done = __atomic_load_n(word_, __ATOMIC_ACQUIRE);
  while (!flights_.empty() && flights_.front().value <= done) {
    const Flight& f = flights_.front();
    for (int i = 0; i < 2; ++i) {
      Channel& c = i == 0 ? compute_ : copy_;
      c.push_tail = f.push_end[i], c.gp_tail = f.gp_end[i];
    }
    launch_tail_ = f.launch_end;
    flights_.pop_front();
  }
}

std::uint64_t Device::push_cost(const Channel& c, std::uint64_t bytes) const {
  const std::uint64_t left = kPushBytes - c.push_head % kPushBytes;
  return bytes <= left ? bytes : left + bytes;
}

int Device::plan(const rig_part* parts, std::uint32_t count, std::uint32_t waits, std::uint64_t words[2],
                 std::uint64_t& launch_bytes, char* why) const {
  // words[0]: the compute channel's, words[1]: the copy channel's, as bounds.
  words[0] = kBindWords + kEndWords + kTimedWords + kAcquireWords * (waits + 1);
  words[1] = 0;
  launch_bytes = 0;
  std::uint64_t launch_at = launch_head_;
  planned_generation_ = store_generation_.load(std::memory_order_acquire);
  bool windows = !windows_due();
  int last = -1;
  for (std::uint32_t i = 0; i < count; ++i) {
    const rig_part& p = parts[i];
    if (p.queue > 1) return rig_never(why, "part %u: no queue %u (NV:%d has COPY:0 and COMPUTE:0)", i, p.queue, index_);
    const int ch = p.queue == 0 ? 1 : 0;
    const std::uint32_t kind = p.kind;
    if (p.queue == 0 && kind != RIG_KIND_COPY && kind != RIG_KIND_FILL)
      return rig_never(why, "part %u: COPY:0 runs Copy and Fill, not kind %u", i, kind);
    if (p.queue == 1 && kind != RIG_KIND_WORDS && kind != RIG_KIND_FILL && kind != RIG_KIND_LAUNCH)
      return rig_never(why, "part %u: COMPUTE:0 runs Words, Fill and Launch, not kind %u", i, kind);
    if (kind == RIG_KIND_LAUNCH)
      if (int r = check_launch(p, i, why); r != RIG_FITS) return r;
    if (words[ch] == 0) words[ch] = kBindWords + kAcquireWords * (waits + (ch == 1 ? 1 : 0));
    if (last >= 0 && last != ch) words[last] += kReleaseWords, words[ch] += kAcquireWords;
    last = ch;
    if (kind == RIG_KIND_WORDS) {
      words[ch] += p.work.words.count;
    } else if (kind == RIG_KIND_LAUNCH) {
      words[ch] += kLaunchWords + (windows ? 0 : kWindowWords);
      windows = true;
      const std::uint64_t cost = launch_cost(launch_at, slot_bytes(*static_cast<const Kernel*>(p.work.launch.launch)));
      launch_at += cost, launch_bytes += cost;
    } else if (kind == RIG_KIND_FILL) {
      words[ch] += p.work.fill.ring_units ? p.work.fill.ring_units : kFillWords;
    } else {
      const rig_copy& c = p.work.copy;
      if ((c.fill < 0 && c.src == 0) || c.dst == 0)
        return rig_never(why, "part %u: a copy end without an address (NV:%d's memory all has one)", i, index_);
      for (std::uint32_t b = 0; b < c.count; ++b) {
        const rig_box& box = c.boxes[b];
        if (box.width > 0xffffffffu || box.src_pitch > 0xffffffffu || box.dst_pitch > 0xffffffffu)
          return rig_never(why, "part %u: box %u: a width or pitch of %s, over the copy engine's 32 bits", i, b,
                           edge::bytes_figure(std::max({box.width, box.src_pitch, box.dst_pitch})).text);
        // A fill writes a row at a time; a copy of rows at once.
        words[ch] += kBoxWords * (c.fill >= 0 ? std::max<std::uint64_t>(box.rows, 1) : 1);
      }
    }
  }
  if (last == 1) words[1] += kReleaseWords, words[0] += kAcquireWords;
  for (int ch = 0; ch < 2; ++ch)
    if (words[ch] * 4 > kPushBytes / 2)
      return rig_never(why, "%s's part of the submission takes %s of push buffer, over the most a value may take (%s)",
                       ch == 0 ? "COMPUTE:0" : "COPY:0", edge::bytes_figure(words[ch] * 4).text,
                       edge::bytes_figure(kPushBytes / 2).text);
  if (launch_bytes > kLaunchRingBytes / 2)
    return rig_never(why, "the submission's launches take %s of the launch ring, over the most a value may take (%s)",
                     edge::bytes_figure(launch_bytes).text, edge::bytes_figure(kLaunchRingBytes / 2).text);
  return RIG_FITS;
}

int Device::room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
  Device& d = self(edge);
  d.reclaim();
  if (const Kernel* k = d.lone_launch(parts, count, waits); k && d.lone_fits(*k)) return RIG_FITS;
  std::uint64_t words[2], launch_bytes;
  if (int r = d.plan(parts, count, waits, words, launch_bytes, why); r != RIG_FITS) return r;
  if (d.launch_head_ - d.launch_tail_ + launch_bytes > kLaunchRingBytes) return RIG_LATER;
  for (int ch = 0; ch < 2; ++ch) {
    const Channel& c = ch == 0 ? d.compute_ : d.copy_;
    if (words[ch] == 0) continue;
    if (c.push_head - c.push_tail + d.push_cost(c, words[ch] * 4) > kPushBytes) return RIG_LATER;
    if (c.gp_put - c.gp_tail + 1 >= kGpEntries) return RIG_LATER;
  }
  return RIG_FITS;
}

void Device::sync(int from, int to) {
  // `from` releases its next sequence value; `to` waits for it.
  Channel& f = from == 0 ? compute_ : copy_;
  Channel& t = to == 0 ? compute_ : copy_;
  const std::uint64_t at = control_.address + (from == 0 ? kComputeSequence : kCopySequence);
  std::uint32_t storage[16];
  Push rel(storage);
  semaphore_release(rel, at, ++f.sequence);
  put(f, rel.words());
  Push acq(storage);
  semaphore_acquire(acq, at, f.sequence);
  put(t, acq.words());
}

void Device::hand_over(Channel& c, std::uint64_t tag, const Kernel* kernel) {
  if (c.words.empty()) return;
  entry_tags_[&c == &compute_ ? 0 : 1][c.gp_put % kGpEntries].store(tag, std::memory_order_relaxed);
  if (&c == &compute_) entry_kernels_[c.gp_put % kGpEntries].store(kernel, std::memory_order_relaxed);
  const std::uint64_t bytes = c.words.size() * 4;
  const std::uint64_t cost = push_cost(c, bytes);
  c.push_head += cost - bytes;  // skipped to the start where it would straddle the end
  const std::uint64_t at = c.push_head % kPushBytes;
  std::memcpy(c.push.host + at, c.words.data(), bytes);
  c.push_head += bytes;
  ring(c, c.push.address + at, std::uint32_t(c.words.size()));
  c.words.clear();
}

void Device::ring(Channel& c, std::uint64_t address, std::uint32_t words) {
  const auto entry = gp_entry(address, words);
  std::memcpy(c.gp_ring + (c.gp_put % kGpEntries) * 2, entry.data(), 8);
  ++c.gp_put;
  std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(c.userd + 0x8C))  // USERD GPPut (facts)
      .store(std::uint32_t(c.gp_put % kGpEntries), std::memory_order_release);
  std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(usermode_page_ + kDoorbell))
      .store(c.token, std::memory_order_release);
}

int Device::submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits, std::uint32_t wait_count,
                   std::uint64_t v, std::uint64_t* times, const char** failure) {
  Device& d = self(edge);
  const bool was_bound[2] = {d.compute_.bound, d.copy_.bound}, had_windows = d.windows_set_;
  const std::uint64_t had_generation = d.windows_generation_;
  try {
    if (!times)
      if (const Kernel* k = d.lone_launch(parts, count, wait_count)) {
        d.submit_lone(*k, parts[0].work.launch, v);
        return RIG_COMMITTED;
      }
    Timed& slot = d.timed_[v % kStampSlots];
    const std::uint64_t stamps = d.stamps_.address + (v % kStampSlots) * kStampSlotBytes;
    if (times && slot.times) {
      // The value that held the slot is done (fewer than kStampSlots values are in flight):
      // its times are written now, as settle would.
      if (auto r = d.convert(slot.value, slot.times); !r) throw std::runtime_error(r.error());
      slot = {};
    }
    std::uint32_t storage[64];
    bool started[2] = {false, false};
    auto start = [&](int ch) {
      if (started[ch]) return;
      started[ch] = true;
      Channel& c = ch == 0 ? d.compute_ : d.copy_;
      Push p(storage);
      if (!c.bound) set_object(p, c.subchannel, c.engine_class), c.bound = true;
      for (std::uint32_t w = 0; w < wait_count; ++w) {
        const std::uint64_t at = d.window_address(waits[w].word);
        if (!at) throw std::invalid_argument("a wait on a timeline word outside rig_words");
        semaphore_acquire(p, at, waits[w].value);
      }
      if (p.size()) d.put(c, p.words());
    };
    int last = -1;
    // Each channel's parts of the value: how many, and the last.
    std::uint32_t parts_on[2] = {0, 0}, part_on[2] = {0, 0};
    if (times) {
      // The start stamp, on the compute channel once the value's waits are met and the values
      // before it are done (the compute channel ends each); a first part on the copy channel
      // follows it.
      start(0);
      std::memset(d.stamps_.host + (stamps - d.stamps_.address), 0, kStampSlotBytes);
      Push p(storage);
      semaphore_release(p, stamps, v, true);
      d.put(d.compute_, p.words());
      last = 0;
    }
    for (std::uint32_t i = 0; i < count; ++i) {
      const rig_part& part = parts[i];
      const int ch = part.queue == 0 ? 1 : 0;
      Channel& c = ch == 0 ? d.compute_ : d.copy_;
      start(ch);
      if (last >= 0 && last != ch) d.sync(last, ch);
      last = ch;
      ++parts_on[ch], part_on[ch] = i;
      if (part.kind == RIG_KIND_WORDS) {
        d.put(c, {part.work.words.words, part.work.words.count});
        continue;
      }
      if (part.kind == RIG_KIND_LAUNCH) {
        d.encode_launch(c, part.work.launch);
        continue;
      }
      if (part.kind == RIG_KIND_FILL) {
        const rig_fill& f = part.work.fill;
        const std::size_t at = c.words.size();
        const std::uint32_t room = f.ring_units ? f.ring_units : kFillWords;
        c.words.resize(at + room);
        FillQueue q{c.words.data() + at, room, 0, c.subchannel};
        if (const int e = f.fn(&q, f.arg, v); e != 0)
          throw std::runtime_error(fmt::format("part {}: its fill returned {}", i, e));
        if (q.count > room)
          throw std::runtime_error(fmt::format("part {}: its fill wrote {} words, over its {}", i, q.count, room));
        c.words.resize(at + q.count);
        continue;
      }
      const rig_copy& cp = part.work.copy;
      for (std::uint32_t b = 0; b < cp.count; ++b) {
        const rig_box& box = cp.boxes[b];
        if (box.width == 0 || box.rows == 0) continue;
        const std::uint64_t dst = cp.dst + box.dst_offset, src = cp.src + box.src_offset;
        for (std::uint64_t row = 0; row < (cp.fill >= 0 ? box.rows : 1); ++row) {
          Push p(storage);
          if (cp.fill >= 0)
            fill(p, c.subchannel, c.engine_class, dst + row * box.dst_pitch, box.width, std::uint8_t(cp.fill));
          else if (box.rows == 1)
            copy_1d(p, c.subchannel, c.engine_class, dst, src, box.width);
          else
            copy_2d(p, c.subchannel, c.engine_class, dst, std::uint32_t(box.dst_pitch), src,
                    std::uint32_t(box.src_pitch), std::uint32_t(box.width), std::uint32_t(box.rows));
          d.put(c, p.words());
        }
      }
    }
    start(0);
    if (last == 1) d.sync(1, 0);
    Push end(storage);
    if (times) semaphore_release(end, stamps + 16, v, true);
    semaphore_release(end, d.window_address(d.word_), v);
    non_stall_interrupt(end);
    d.put(d.compute_, end.words());
    Flight f{v, {}, {}};
    // The copy channel's entry first, so that the compute channel's acquire finds it running.
    auto tag = [&](int ch) {
      return v | (parts_on[ch] == 1 ? std::uint64_t(part_on[ch]) : kSeveralParts) << 48;
    };
    d.hand_over(d.copy_, tag(1));
    const rig_part& only = parts[part_on[0]];
    const bool one_launch = parts_on[0] == 1 && only.kind == RIG_KIND_LAUNCH;
    d.hand_over(d.compute_, tag(0), one_launch ? static_cast<const Kernel*>(only.work.launch.launch) : nullptr);
    f.push_end[0] = d.compute_.push_head, f.push_end[1] = d.copy_.push_head;
    f.gp_end[0] = d.compute_.gp_put, f.gp_end[1] = d.copy_.gp_put;
    f.launch_end = d.launch_head_;
    d.flights_.push_back(f);
    d.submitted_ = v;
    if (times) slot = {v, times};
  } catch (const std::exception& e) {
    d.compute_.words.clear(), d.copy_.words.clear();  // nothing of the value reached a ring
    d.compute_.bound = was_bound[0], d.copy_.bound = was_bound[1], d.windows_set_ = had_windows;
    d.windows_generation_ = had_generation;
    thread_local std::string why;
    why = d.name_ + ": " + e.what();
    *failure = why.c_str();
    return RIG_FAILED;
  }
  return RIG_COMMITTED;
}

Result<void> Device::correlate() {
  // The tightest of a few readings: the GPU's time lies between the host's two.
  std::uint64_t best = ~0ull;
  for (int i = 0; i < 3; ++i) {
    TimerGetTime t{};
    const std::uint64_t before = rig_now_ns();
    if (auto r = rm_.control(subdevice_, kCtrlTimerGetTime, &t, sizeof t, "TIMER_GET_TIME"); !r) return r;
    const std::uint64_t after = rig_now_ns();
    if (after - before < best) {
      best = after - before;
      gpu_to_host_ns_ = std::int64_t(before + (after - before) / 2) - std::int64_t(t.time_nsec);
      correlated_at_ = after;
    }
  }
  return {};
}

std::uint64_t Device::gpu_to_host(std::uint64_t gpu_ns) const { return std::uint64_t(std::int64_t(gpu_ns) + gpu_to_host_ns_); }

Result<void> Device::convert(std::uint64_t value, std::uint64_t* times) {
  const auto* slot = stamps_.host + (value % kStampSlots) * kStampSlotBytes;
  std::uint64_t record[4];
  std::memcpy(record, const_cast<const std::byte*>(slot), sizeof record);
  if (record[0] != value || record[2] != value)
    return std::unexpected(fmt::format("value {}'s {} stamp holds the payload {}: the GPU never wrote it", value,
                                       record[0] != value ? "start" : "end", record[0] != value ? record[0] : record[2]));
  if (rig_now_ns() - correlated_at_ > kCorrelateEveryNs)
    if (auto r = correlate(); !r) return r;
  // Device order: a value starts once the one before it ended.
  times[0] = std::max(gpu_to_host(record[1]), last_end_);
  times[1] = std::max(gpu_to_host(record[3]), times[0]);
  last_end_ = times[1];
  return {};
}

int Device::settle(void* edge, std::uint64_t v, std::uint64_t* times, const char** failure) {
  Device& d = self(edge);
  if (times[0] || times[1]) return RIG_OK;  // written already (a later submit took its slot)
  Timed& slot = d.timed_[v % kStampSlots];
  if (slot.value != v || slot.times != times) return RIG_OK;  // the submit that took its slot wrote them
  auto r = d.convert(v, times);
  slot = {};
  if (r) return RIG_OK;
  thread_local std::string why;
  why = d.name_ + ": " + r.error();
  *failure = why.c_str();
  return RIG_FAILED;
}

}  // namespace rig::nv::driver
