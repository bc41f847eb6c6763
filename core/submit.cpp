// Submissions: prepared once (Submission::make), submitted many times (rig::submit) with a
// Run's geometry and parameters. The hand-over takes the device's turn, asks room, and
// gives the next value to the driver's submit.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "profile_hooks.hpp"
#include "state.hpp"

namespace rig {
namespace detail {
namespace {

constexpr std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::Words: return "Words";
    case Kind::Fill: return "Fill";
    case Kind::Copy: return "Copy";
    case Kind::Launch: return "Launch";
  }
  return "no kind";
}

bool queue_runs(const DeviceState& d, int q, Kind k) {
  const auto& runs = d.facts.queues[std::size_t(q)].runs;
  return std::find(runs.begin(), runs.end(), k) != runs.end();
}

// The part's queue: named, or where its kind goes by default (spec: Rig_edge.queue).
int choose_queue(const DeviceState& d, const Submission::Part& p, int i, Kind k,
                 const std::vector<rig_part>& earlier) {
  if (!p.queue.empty()) {
    for (std::size_t q = 0; q < d.facts.queues.size(); ++q)
      if (d.facts.queues[q].name == p.queue) return int(q);
    d.refuse("part {}: no queue is named {}", i, p.queue);
  }
  if (k == Kind::Copy) {
    // The queue of the last earlier part it follows, where that queue runs Copy.
    for (auto it = p.after.rbegin(); it != p.after.rend(); ++it) {
      int q = int(earlier[std::size_t(*it)].queue);
      if (queue_runs(d, q, Kind::Copy)) return q;
    }
  }
  int q = d.default_queue[int(k)];
  if (q < 0) d.refuse("part {}: no queue of the device runs {}", i, kind_name(k));
  return q;
}

// The device a buffer is on: its memory's, or the borrowing device's.
const DeviceState* on(const Buffer& b) {
  return b.borrowed() ? b.borrowed()->device.get() : b.allocation()->device.get();
}

void check_buffer(const DeviceState& d, const Buffer& b, std::string_view what) {
  if (auto why = b.dead()) d.refuse("{} is dead ({})", what, *why);
  if (on(b) != &d) d.refuse("{} is on {}, not on this device", what, on(b)->name);
}

bool box_fits(const rig_box& b, std::size_t src_len, std::size_t dst_len) {
  if (b.width > b.src_pitch || b.width > b.dst_pitch) return false;
  if (b.rows == 0 || b.width == 0) return true;
  auto end = [&](std::uint64_t off, std::uint64_t pitch, std::size_t len) {
    std::uint64_t last;
    if (__builtin_mul_overflow(b.rows - 1, pitch, &last)) return false;
    if (__builtin_add_overflow(last, off, &last)) return false;
    if (__builtin_add_overflow(last, b.width, &last)) return false;
    return last <= len;
  };
  return end(b.src_offset, b.src_pitch, src_len) && end(b.dst_offset, b.dst_pitch, dst_len);
}

// Refuses a box that reaches past its copy's ends, saying where it ends.
[[noreturn]] void refuse_box(const DeviceState& d, int part, const rig_box& b, bool fill, std::size_t src_len,
                             std::size_t dst_len) {
  if (fill)
    d.refuse("part {}: a box of {} rows of {} bytes at offset {}, pitch {}, does not fit the fill's destination of "
             "{} bytes", part, b.rows, b.width, b.dst_offset, b.dst_pitch, dst_len);
  d.refuse("part {}: a box of {} rows of {} bytes (source offset {}, pitch {}; destination offset {}, pitch {}) "
           "does not fit the copy's source of {} bytes and destination of {} bytes", part, b.rows, b.width,
           b.src_offset, b.src_pitch, b.dst_offset, b.dst_pitch, src_len, dst_len);
}

}  // namespace

SubmissionState::~SubmissionState() {
  // What the submission kept lives until its last submitted work is done.
  std::uint64_t v = last_value.load();
  if (v == 0 || !device) return;
  auto kept = std::make_shared<std::tuple<std::vector<LaunchPart>, std::vector<CopyPart>, std::vector<Buffer>,
                                          std::vector<std::pair<Buffer, Access>>,
                                          std::vector<std::shared_ptr<const void>>, std::optional<Hold>>>(
      std::move(launches), std::move(copies), std::move(part_buffers), std::move(fixed), std::move(keep),
      std::move(hold));
  device->defer({pack(device->index, v)}, [kept]() mutable { kept.reset(); });
}

}  // namespace detail

Submission Submission::make(const Device& device, std::span<const Part> parts, int reads, int writes,
                            std::span<const std::pair<Buffer, Access>> fixed,
                            std::vector<std::shared_ptr<const void>> keep, std::optional<Hold> hold) {
  using namespace detail;
  auto d = shared_device_at(device.state().index);
  d->check_live();
  if (parts.empty()) d->refuse("a submission needs at least one part");
  if (reads < 0 || writes < 0) d->refuse("a submission of {} reads and {} writes", reads, writes);
  auto s = std::make_shared<SubmissionState>();
  s->device = d;
  s->reads = reads;
  s->writes = writes;
  for (std::size_t i = 0; i < fixed.size(); ++i) {
    const auto& [b, access] = fixed[i];
    check_buffer(*d, b, fmt::format("fixed buffer {}", i));
    if (access == Access::ReadWrite && b.access() == Access::Read)
      d->refuse("fixed buffer {} is written but admits only Read", i);
    s->fixed.emplace_back(b, access);
  }
  const std::uint32_t slots = std::uint32_t(reads + writes);
  s->parts.resize(parts.size());
  s->after.resize(parts.size());
  for (std::size_t n = 0; n < parts.size(); ++n) {
    const int i = int(n);
    const Part& p = parts[n];
    rig_part& c = s->parts[n];
    std::memset(&c, 0, sizeof c);
    Kind k = Kind(p.work.index() + 1);
    for (int j : p.after) {
      if (j < 0 || j >= i) d->refuse("part {}: after {} is not an earlier part", i, j);
      s->after[n].push_back(std::uint32_t(j));
    }
    int q = choose_queue(*d, p, i, k, s->parts);
    if (!queue_runs(*d, q, k))
      d->refuse("part {}: queue {} does not run {}", i, d->facts.queues[std::size_t(q)].name, kind_name(k));
    c.queue = std::uint32_t(q);
    c.kind = std::uint32_t(k);
    if (auto* w = std::get_if<Words>(&p.work)) {
      if (auto why = w->words.dead()) d->refuse("part {}: the words are dead ({})", i, *why);
      if (!w->words.host_address() && w->words.length())
        d->refuse("part {}: words must lie in memory the host addresses", i);
      if (w->words.length() % 4) d->refuse("part {}: words of {} bytes, not whole words", i, w->words.length());
      c.work.words.words = reinterpret_cast<const std::uint32_t*>(w->words.host_address().value_or(0));
      c.work.words.count = w->words.length() / 4;
      s->part_buffers.push_back(w->words);
    } else if (auto* f = std::get_if<Fill>(&p.work)) {
      if (!f->fn) d->refuse("part {}: a fill without a function", i);
      if (auto why = f->arg.dead()) d->refuse("part {}: the fill's argument is dead ({})", i, *why);
      c.work.fill.fn = f->fn;
      c.work.fill.arg = reinterpret_cast<void*>(f->arg.host_address().value_or(0));
      c.work.fill.ring_units = f->ring_units;
      c.work.fill.segment_bytes = f->segment_bytes;
      s->part_buffers.push_back(f->arg);
    } else if (auto* cp = std::get_if<Copy>(&p.work)) {
      CopyPart part{i, cp->src, cp->dst, {}, cp->fill};
      for (const Side* side : {&cp->src, &cp->dst}) {
        const bool is_dst = side == &cp->dst;
        if (!is_dst && cp->fill) continue;  // a fill reads no memory
        if (side->fixed) {
          check_buffer(*d, *side->fixed, fmt::format("part {}: the copy's {}", i, is_dst ? "destination" : "source"));
          if (is_dst && side->fixed->access() == Access::Read)
            d->refuse("part {}: the copy's destination admits only Read", i);
        } else if (side->slot >= slots) {
          d->refuse("part {}: the copy's {} names slot {}, but submits name {} buffers", i,
                    is_dst ? "destination" : "source", side->slot, slots);
        } else if (is_dst && side->slot < std::uint32_t(reads)) {
          d->refuse("part {}: the copy writes slot {}, one of the buffers submits read", i, side->slot);
        }
      }
      for (const Box& b : cp->boxes) {
        rig_box r{b.src_offset, b.dst_offset, b.width, b.rows, b.src_pitch, b.dst_pitch};
        if (b.width > b.src_pitch || b.width > b.dst_pitch)
          d->refuse("part {}: a box's pitch is below its width of {}", i, b.width);
        const std::size_t src_length = cp->fill ? SIZE_MAX : cp->src.fixed ? cp->src.fixed->length() : 0;
        if ((cp->fill || cp->src.fixed) && cp->dst.fixed && !box_fits(r, src_length, cp->dst.fixed->length()))
          refuse_box(*d, i, r, cp->fill.has_value(), src_length, cp->dst.fixed->length());
        part.boxes.push_back(r);
      }
      s->copies.push_back(std::move(part));
    } else {
      const auto& l = std::get<Launch>(p.work);
      if (!l.function.state()) d->refuse("part {}: a launch without a function", i);
      if (l.function.state()->image->device != d)
        d->refuse("part {}: function {} is loaded on {}, not on this device", i, l.function.name(),
                  l.function.state()->image->device->name);
      if (l.params > RIG_PARAMS_MAX)
        d->refuse("part {}: {} parameter bytes, over the limit of {}", i, l.params, RIG_PARAMS_MAX);
      if (auto need = l.function.params(); need && l.params < *need)
        d->refuse("part {}: {} parameter bytes, but {} reads {}", i, l.params, l.function.name(), *need);
      LaunchPart lp;
      lp.part = i;
      lp.function = l.function.state();
      lp.params = l.params;
      lp.offset = s->param_bytes;
      s->param_bytes += (l.params + 15u) & ~15u;
      for (const Ref& r : l.refs) {
        if (r.at % 8) d->refuse("part {}: a ref at byte {}, not a multiple of 8", i, r.at);
        if (std::uint64_t(r.at) + 8 > l.params)
          d->refuse("part {}: a ref at byte {} lies outside the {} parameter bytes", i, r.at, l.params);
        if (std::find(lp.ref_offsets.begin(), lp.ref_offsets.end(), r.at) != lp.ref_offsets.end())
          d->refuse("part {}: two refs at byte {}", i, r.at);
        switch (r.what) {
          case Ref::What::Buffer:
            if (r.slot >= slots) d->refuse("part {}: a ref names slot {}, but submits name {} buffers", i, r.slot, slots);
            break;
          case Ref::What::Unordered:
            if (r.slot >= s->fixed.size())
              d->refuse("part {}: an unordered ref names fixed buffer {}, but there are {}", i, r.slot, s->fixed.size());
            break;
          case Ref::What::Entry:
            if (!r.function) d->refuse("part {}: an entry ref at byte {} without a function", i, r.at);
            if (r.function->state()->image->device != d)
              d->refuse("part {}: an entry ref to {} of another device", i, r.function->name());
            break;
        }
        lp.ref_offsets.push_back(r.at);
        lp.refs.push_back(r);
      }
      c.work.launch.code = l.function.state()->entry.code;
      c.work.launch.launch = l.function.state()->entry.launch;
      c.work.launch.param_bytes = l.params;
      s->launches.push_back(std::move(lp));
    }
  }
  for (std::size_t n = 0; n < parts.size(); ++n) {
    s->parts[n].after = s->after[n].data();
    s->parts[n].after_count = std::uint32_t(s->after[n].size());
  }
  for (auto& lp : s->launches) {
    auto& c = s->parts[std::size_t(lp.part)].work.launch;
    c.ref_offsets = lp.ref_offsets.data();
    c.ref_count = std::uint32_t(lp.ref_offsets.size());
  }
  for (auto& cp : s->copies) {
    auto& c = s->parts[std::size_t(cp.part)].work.copy;
    c.boxes = cp.boxes.data();
    c.count = std::uint32_t(cp.boxes.size());
    c.fill = cp.fill ? std::int32_t(std::to_integer<std::uint8_t>(*cp.fill)) : -1;
  }
  s->keep = std::move(keep);
  s->hold = std::move(hold);
  return Submission(std::move(s));
}

Device Submission::device() const { return Device(state_->device); }

Submission::Block Submission::block(int part) const {
  const auto& launches = state_->launches;
  for (std::size_t i = 0; i < launches.size(); ++i) {
    if (launches[i].part != part) continue;
    Block b;
    b.part_ = part;
    b.launch_ = std::uint32_t(i);
    b.offset_ = launches[i].offset;
    b.params_ = launches[i].params;
    b.threads_ = std::uint32_t(launches[i].function->entry.threads.value_or(0));
    b.owner_ = state_.get();
    return b;
  }
  state_->device->refuse("part {} is not a launch of this submission", part);
}

// --- Run ------------------------------------------------------------------------------------

Run::Run() : storage_(std::make_unique<Storage>()) {
  storage_->producers.reserve(16);
  storage_->waits.reserve(16);
}
Run::~Run() = default;
Run::Run(Run&&) noexcept = default;
Run& Run::operator=(Run&&) noexcept = default;

namespace {
const detail::DeviceState& owner_device(const Submission::Block& b) {
  if (!b.owner()) throw std::invalid_argument("a block of no submission");
  return *static_cast<const detail::SubmissionState*>(b.owner())->device;
}
void check_dims(const Submission::Block& b, std::string_view what, std::uint32_t x, std::uint32_t y,
                std::uint32_t z) {
  if (!x || !y || !z)
    owner_device(b).refuse("part {}: {} {}x{}x{} has an empty dimension", b.part(), what, x, y, z);
}
}  // namespace

void Run::groups(const Submission::Block& b, std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  check_dims(b, "groups", x, y, z);
  storage_->fit(0, b.launch_ + 1u);
  auto& g = storage_->geometry[b.launch_];
  g.groups[0] = x, g.groups[1] = y, g.groups[2] = z;
}

void Run::threads(const Submission::Block& b, std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  check_dims(b, "threads", x, y, z);
  std::uint64_t n = std::uint64_t(x) * y * z;
  if (b.threads_ && n > b.threads_)
    owner_device(b).refuse("part {}: {} threads per group, over the function's limit of {}", b.part(), n,
                           b.threads_);
  storage_->fit(0, b.launch_ + 1u);
  auto& g = storage_->geometry[b.launch_];
  g.threads[0] = x, g.threads[1] = y, g.threads[2] = z;
}

void Run::shared(const Submission::Block& b, std::uint32_t bytes) {
  owner_device(b);
  storage_->fit(0, b.launch_ + 1u);
  storage_->geometry[b.launch_].shared = bytes;
}

std::byte* Run::param_bytes(const Submission::Block& b, std::size_t offset, std::size_t n) {
  if (offset > b.params_ || n > b.params_ - offset)
    owner_device(b).refuse("part {}: parameter bytes {}..{} lie outside its {} bytes", b.part(), offset,
                           offset + n, b.params_);
  storage_->fit(std::size_t(b.offset_) + b.params_, b.launch_ + 1u);
  return storage_->params.data() + b.offset_ + offset;
}

// --- submit -------------------------------------------------------------------------------

namespace {

using detail::Allocation;
using detail::DeviceState;

// Adds a producer's point, keeping the highest value per device.
void add_producer(std::vector<std::uint64_t>& producers, std::uint64_t p) {
  for (auto& q : producers)
    if (detail::index_of(q) == detail::index_of(p)) {
      if (detail::value_of(q) < detail::value_of(p)) q = p;
      return;
    }
  producers.push_back(p);
}

// What work on `a` must follow: its last write for a read, every use for a write.
void follow(const Allocation& a, bool writes, std::uint16_t self, std::vector<std::uint64_t>& producers) {
  auto& m = const_cast<Allocation&>(a);
  std::lock_guard g(m.lock);
  if (detail::value_of(a.last_write) && detail::index_of(a.last_write) != self)
    add_producer(producers, a.last_write);
  if (writes)
    for (auto u : a.uses)
      if (detail::index_of(u) != self) add_producer(producers, u);
}

const Buffer& slot_buffer(std::span<const Buffer> reads, std::span<const Buffer> writes, std::uint32_t slot) {
  return slot < reads.size() ? reads[slot] : writes[slot - reads.size()];
}

}  // namespace

Point submit(const Submission& submission, Run& run, std::span<const Buffer> reads,
             std::span<const Buffer> writes, std::span<const Point> waits) {
  auto& s = *submission.state();
  DeviceState& d = *s.device;
  d.check_live();
  if (reads.size() != std::size_t(s.reads) || writes.size() != std::size_t(s.writes))
    d.refuse("a submit of {} reads and {} writes, but the submission names {} and {}", reads.size(),
             writes.size(), s.reads, s.writes);
  for (std::size_t i = 0; i < reads.size(); ++i) {
    const auto& b = reads[i];
    if (detail::on(b) != &d || b.dead()) detail::check_buffer(d, b, fmt::format("read buffer {}", i));
  }
  for (std::size_t i = 0; i < writes.size(); ++i) {
    const auto& b = writes[i];
    if (detail::on(b) != &d || b.dead()) detail::check_buffer(d, b, fmt::format("written buffer {}", i));
    if (b.access() == Access::Read) d.refuse("written buffer {} admits only Read", i);
  }

  auto& st = run.storage();
  st.fit(s.param_bytes, s.launches.size());

  // Patch each launch's refs into a copy of its parameters.
  for (const auto& lp : s.launches) {
    if (lp.params == 0) continue;  // no bytes, no refs (a ref lies inside the parameters)
    std::byte* out = st.patched.data() + lp.offset;
    std::memcpy(out, st.params.data() + lp.offset, lp.params);
    for (const auto& r : lp.refs) {
      std::uint64_t value;
      if (r.what == Submission::Ref::What::Entry) {
        value = r.function->state()->entry.code;
      } else {
        const Buffer& b = r.what == Submission::Ref::What::Buffer ? slot_buffer(reads, writes, r.slot)
                                                                  : s.fixed[r.slot].first;
        std::uint64_t offset;
        std::memcpy(&offset, out + r.at, 8);
        value = b.address() + offset;
      }
      std::memcpy(out + r.at, &value, 8);
    }
  }
  // Check the copies' ends that are the run's buffers.
  for (const auto& cp : s.copies) {
    const Buffer& dst = cp.dst.fixed ? *cp.dst.fixed : slot_buffer(reads, writes, cp.dst.slot);
    const std::size_t src_length =
        cp.fill ? SIZE_MAX : (cp.src.fixed ? *cp.src.fixed : slot_buffer(reads, writes, cp.src.slot)).length();
    for (const auto& b : cp.boxes)
      if (!detail::box_fits(b, src_length, dst.length()))
        detail::refuse_box(d, cp.part, b, cp.fill.has_value(), src_length, dst.length());
  }

  // The points this work follows, besides the device's own earlier work.
  auto& producers = st.producers;
  producers.clear();
  for (const Point& p : waits) {
    auto* e = detail::device_at(p.index());
    if (!e) d.refuse("a wait on device index {}, which no device has", p.index());
    if (p.value() > e->submitted.load() && p.value() > e->word())
      d.refuse("a wait on value {} of {}, which has submitted only {}", p.value(), e->name,
               e->submitted.load());
    if (p.index() != d.index) add_producer(producers, p.bits());
  }
  for (const auto& b : reads) follow(*b.allocation(), false, d.index, producers);
  for (const auto& b : writes) follow(*b.allocation(), true, d.index, producers);
  for (const auto& [b, access] : s.fixed) follow(*b.allocation(), access == Access::ReadWrite, d.index, producers);

  // Foreign waits: in the queue where the device waits for that producer, else on the host.
  auto& in_queue = st.waits;
  in_queue.clear();
  for (auto p : producers) {
    DeviceState& e = *detail::device_at(detail::index_of(p));
    std::uint64_t v = detail::value_of(p);
    if (e.reached(v)) continue;  // raises Lost for a lost producer's unreached value
    e.commit_through(v);
    bool store = e.facts.completion == edge::Completion::Store;
    if (store ? d.facts.waits.stores : d.facts.waits.hosts) {
      in_queue.push_back(rig_wait{e.facts.word, v, e.index, std::uint8_t(store)});
    } else {
      e.wait(v);
    }
  }

  d.turn.lock();
  if (d.is_lost.load()) {
    d.turn.unlock();
    d.throw_lost();
  }
  for (std::size_t i = 0; i < s.launches.size(); ++i) {
    const auto& lp = s.launches[i];
    const auto& g = st.geometry[i];
    auto& c = s.parts[std::size_t(lp.part)].work.launch;
    std::memcpy(c.groups, g.groups, sizeof c.groups);
    std::memcpy(c.threads, g.threads, sizeof c.threads);
    c.shared = g.shared;
    c.params = st.patched.data() + lp.offset;
  }
  for (const auto& cp : s.copies) {
    auto& c = s.parts[std::size_t(cp.part)].work.copy;
    const Buffer& dst = cp.dst.fixed ? *cp.dst.fixed : slot_buffer(reads, writes, cp.dst.slot);
    c.dst = dst.allocation()->handle_only ? 0 : dst.address();
    c.dst_handle = dst.allocation()->handle;
    c.dst_offset = dst.offset();
    if (!cp.fill) {
      const Buffer& src = cp.src.fixed ? *cp.src.fixed : slot_buffer(reads, writes, cp.src.slot);
      c.src = src.allocation()->handle_only ? 0 : src.address();
      c.src_handle = src.allocation()->handle;
      c.src_offset = src.offset();
    }
  }
  const auto count = std::uint32_t(s.parts.size());
  const auto wait_count = std::uint32_t(in_queue.size());
  char why[RIG_WHY];  // the driver's reason of a RIG_NEVER (rig_edge.h)
  for (int attempt = 0;; ++attempt) {
    why[0] = 0;
    int room = d.c->room(d.edge, s.parts.data(), count, wait_count, why);
    if (room == RIG_FITS) break;
    if (room == RIG_NEVER) {
      d.turn.unlock();
      why[RIG_WHY - 1] = 0;  // a driver that filled it to the end without a NUL
      if (why[0]) d.refuse("{}", std::string_view(why));
      d.refuse("its queues can never hold this submission ({} parts, {} waits), and its driver gave "
               "no reason: a part names work the queue does not run, or a grid, group or shared "
               "memory past the limits",
               count, wait_count);
    }
    d.turn.unlock();
    if (room == RIG_LATER) {
      std::uint64_t next = d.word() + 1;
      if (next > d.submitted.load()) {
        // Nothing is in flight to make room: the driver will never fit it.
        d.refuse("its driver answered LATER with no work in flight ({} parts, {} waits)", count, wait_count);
      }
      d.wait(next);
    } else if (room == RIG_GROW) {
      if (attempt > 8) d.refuse("its driver kept answering GROW after growing");
      edge::GrowAnswer grown;
      std::string fault;
      {
        std::lock_guard g(d.calls);
        d.check_live();
        try {
          grown = d.driver->grow();
        } catch (const edge::Fault& e) {
          fault = e.what();
        }
      }
      if (!fault.empty()) {
        d.lose(fmt::format("fault while growing its queues: {}", fault));
        d.throw_lost();
      }
      if (auto* short_of = std::get_if<edge::Short>(&grown)) {
        d.drain();
        if (attempt > 0) throw OutOfMemory(d.name, short_of->bytes, "to grow its queues");
      }
    } else {
      d.lose(fmt::format("its driver's room answered {}, no answer of the contract", room));
      d.throw_lost();
    }
    d.turn.lock();
    if (d.is_lost.load()) {
      d.turn.unlock();
      d.throw_lost();
    }
  }
  const std::uint64_t v = d.submitted.load(std::memory_order_relaxed) + 1;
  const char* failure = nullptr;
  std::uint64_t* times = profile::hooks::taking() ? profile::hooks::value(d, s, st, v) : nullptr;
  int r = d.c->submit(d.edge, s.parts.data(), count, in_queue.data(), wait_count, v, times, &failure);
  if (r == RIG_FAILED) {
    d.lose(failure ? failure : fmt::format("submit of value {} failed", v), true);
    d.throw_lost();
  }
  d.submitted.store(v, std::memory_order_release);
  if (r == RIG_COMMITTED) d.committed.store(v, std::memory_order_release);
  const std::uint64_t point = detail::pack(d.index, v);
  for (const auto& b : reads) b.allocation()->use(point, false);
  for (const auto& b : writes) b.allocation()->use(point, true);
  for (const auto& [b, access] : s.fixed) b.allocation()->use(point, access == Access::ReadWrite);
  s.last_value.store(v, std::memory_order_release);
  if (wait_count) d.note_queue_waits(in_queue, v);
  d.turn.unlock();
  return Point::from_bits(point);
}

}  // namespace rig
