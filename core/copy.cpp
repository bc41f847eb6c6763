// Copies, fills and blits: the host copies where it addresses both sides, a device copies
// directly between memory on it, and anything else passes through staging memory (host
// memory in 32 MiB allocations, borrowed by each device that copies through it).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "profile_hooks.hpp"
#include "state.hpp"

namespace rig {
namespace {

using detail::DeviceState;

constexpr std::size_t kStagingBytes = std::size_t(32) << 20;
// From this size on, a copy with a device that maps host memory cheaply borrows the host
// side: the mapping's message costs less than the host's pass through staging.
constexpr std::size_t kBorrowBytes = std::size_t(1) << 20;

// A reached point of the host device: what a copy the host made returns.
Point host_point() {
  Device h = host();
  return Point(h, h.state().word());
}

bool host_addressed(const Buffer& b) { return b.length() == 0 || b.host_address().has_value(); }

void refuse_copy(const Buffer& on, std::string_view why) { on.allocation()->device->refuse("copy: {}", why); }

bool row_fits(std::uint64_t off, std::uint64_t pitch, std::uint64_t rows, std::uint64_t width, std::size_t len) {
  if (rows == 0 || width == 0) return true;
  std::uint64_t last;
  if (__builtin_mul_overflow(rows - 1, pitch, &last) || __builtin_add_overflow(last, off, &last) ||
      __builtin_add_overflow(last, width, &last))
    return false;
  return last <= len;
}

// Refusals common to copies and fills: dead ends, read-only or exclusive memory, boxes that
// do not fit, and ends that share a byte.
void check(const Buffer* src, const Buffer& dst, std::span<const Box> boxes) {
  // Every use of a lost device's memory raises Lost.
  for (const Buffer* b : {src, &dst})
    if (b) b->allocation()->device->check_live();
  if (auto why = dst.dead()) refuse_copy(dst, fmt::format("the destination is dead ({})", *why));
  if (dst.access() == Access::Read) refuse_copy(dst, "the destination admits only Read");
  auto exclusive = [](const Buffer& b) {
    std::lock_guard g(b.allocation()->lock);
    return b.allocation()->exclusive != nullptr;
  };
  if (exclusive(dst)) refuse_copy(dst, "a claim holds the destination's memory exclusive");
  if (!src) return;
  if (auto why = src->dead()) refuse_copy(*src, fmt::format("the source is dead ({})", *why));
  if (exclusive(*src)) refuse_copy(*src, "a claim holds the source's memory exclusive");
  if (src->overlaps(dst)) refuse_copy(dst, "the source and the destination share a byte of memory");
  for (const Box& b : boxes) {
    if (b.width > b.src_pitch || b.width > b.dst_pitch)
      refuse_copy(dst, fmt::format("a box's pitch is below its width of {}", b.width));
    if (!row_fits(b.src_offset, b.src_pitch, b.rows, b.width, src->length()) ||
        !row_fits(b.dst_offset, b.dst_pitch, b.rows, b.width, dst.length()))
      refuse_copy(dst, fmt::format("a box of {} rows of {} bytes does not fit a source of {} and a destination of {} bytes",
                                   b.rows, b.width, src->length(), dst.length()));
  }
}

// Host claims on a copy's ends, held until it returns.
struct Claimed {
  std::vector<Buffer> held;
  void take(const Buffer& b) {
    claim::read(b);
    held.push_back(b);
  }
  ~Claimed() {
    for (auto& b : held) claim::release(b);
  }
};

void wait_all(std::span<const Point> waits) {
  for (const Point& p : waits) p.wait();
}

// One row of bytes to move: from src_offset of the source to dst_offset of the destination.
struct Piece {
  std::size_t src, dst, width;
};

// The rows of `boxes`, in order, each cut to at most `most` bytes.
std::vector<Piece> pieces(std::span<const Box> boxes, std::size_t most) {
  std::vector<Piece> out;
  for (const Box& b : boxes)
    for (std::size_t r = 0; r < b.rows; ++r)
      for (std::size_t at = 0; at < b.width; at += most)
        out.push_back({b.src_offset + r * b.src_pitch + at, b.dst_offset + r * b.dst_pitch + at,
                       std::min(most, b.width - at)});
  return out;
}

// Staging memory: allocations of 32 MiB, each kept with the points of the last transfers
// through it and the borrows of the devices that copied through it. The host's (the
// staging of every device that maps host memory), or a device's own Pinned memory for a
// device that maps none. Uploads (bytes the host writes for a device to read) pack one
// after the other in an allocation no copy holds, without waiting for the transfers of
// the earlier ones; an allocation a device writes into takes no bytes after them.
//
// With n the most allocations it has had at once, an allocation that no copy took within
// the last n takes returns when a copy gives one back: copies that run one after another,
// or a few at a time over and over, keep theirs, and a burst's extra allocations go.
class Staging {
 public:
  struct Slot {
    Buffer memory;
    std::vector<Buffer> borrows;        // one per device that copied through it: its mapping lives on
    std::vector<std::uint64_t> points;  // packed: per device, the last transfer through it
    bool held = false;
    std::size_t packed = 0;    // bytes uploads placed from its start; 0: no upload may follow
    std::uint64_t started = 0; // the take that last placed bytes at its start
    std::uint64_t taken = 0;   // the take that last took it
  };

  // Staging in host memory, or in the Pinned memory of `own`.
  explicit Staging(std::optional<Device> own = std::nullopt) : own_(std::move(own)) {}

  // An allocation no copy holds, whose transfers are done, else the one whose bytes were
  // placed from its start longest ago once its transfers are done, else a new one; its
  // bytes start at its start.
  Slot* take() {
    {
      std::unique_lock g(mutex_);
      for (auto& owned : slots_) {
        Slot& s = *owned;
        if (s.held) continue;
        try {
          if (done(s)) return start(s);
        } catch (const Lost&) {
          s.held = true;  // a lost device's transfer may still write it: never reused
        }
      }
      Slot* oldest = nullptr;
      for (auto& owned : slots_)
        if (!owned->held && (!oldest || owned->started < oldest->started)) oldest = owned.get();
      if (oldest) {
        std::vector<std::uint64_t> points = oldest->points;
        oldest->held = true;
        g.unlock();
        try {
          for (auto p : points) Point::from_bits(p).wait();
        } catch (const Lost&) {
          return fresh();  // abandoned, as above
        } catch (...) {
          g.lock();
          oldest->held = false;
          throw;
        }
        g.lock();
        return start(*oldest);
      }
    }
    return fresh();
  }
  // Room for an upload of `bytes` (at most an allocation): after earlier uploads in an
  // allocation no copy holds where it has room, with no wait; else as take. Gives the
  // allocation and where the bytes go in it.
  std::pair<Slot*, std::size_t> take_upload(std::size_t bytes) {
    {
      std::lock_guard g(mutex_);
      for (auto& owned : slots_) {
        Slot& s = *owned;
        if (s.held || s.packed == 0) continue;
        try {
          if (done(s)) {
            start(s)->packed = bytes;  // its earlier bytes are read: start again
            return {&s, 0};
          }
        } catch (const Lost&) {
          s.held = true;
          continue;
        }
        if (s.packed + bytes <= kStagingBytes) {
          const std::size_t at = s.packed;
          s.packed += bytes;
          s.held = true;
          s.taken = ++takes_;
          return {&s, at};
        }
      }
    }
    Slot* s = take();
    std::lock_guard g(mutex_);
    s->packed = bytes;
    return {s, 0};
  }
  // Lets every allocation no copy holds go: its memory returns as a freed buffer's does.
  void release_idle() {
    std::vector<std::unique_ptr<Slot>> idle;
    {
      std::lock_guard g(mutex_);
      for (auto& s : slots_)
        if (!s->held) idle.push_back(std::move(s));
      std::erase(slots_, nullptr);
    }
  }
  // Gives back an allocation taken, with the point of the transfer that last reads or
  // writes it (a reached point, such as the host's, adds nothing). Returns the allocations
  // no copy holds that no copy took within the last n takes.
  void give_back(Slot* s, Point p) {
    std::vector<std::unique_ptr<Slot>> unused;  // freed after the lock: a buffer's drop takes others
    std::lock_guard g(mutex_);
    if (p.value() != 0) {
      auto same = std::find_if(s->points.begin(), s->points.end(),
                               [&](std::uint64_t q) { return detail::index_of(q) == p.index(); });
      if (same == s->points.end())
        s->points.push_back(p.bits());
      else if (detail::value_of(*same) < p.value())
        *same = p.bits();
    }
    s->held = false;
    for (auto& owned : slots_)
      if (!owned->held && takes_ - owned->taken >= most_) unused.push_back(std::move(owned));
    std::erase(slots_, nullptr);
  }
  // The slot's memory borrowed on d.
  Buffer on(Slot* s, const Device& d) {
    for (auto& b : s->borrows)
      if (b.device() == d) return b;
    auto b = Buffer::borrow(d, s->memory);
    if (!b) d.state().refuse("copy: staging memory does not map on the device (it maps no host memory)");
    s->borrows.push_back(*b);
    return *b;
  }

 private:
  // True iff every transfer through s is done, which it then forgets; raises Lost for one
  // of a lost device that never reached it (mutex_ held).
  static bool done(Slot& s) {
    for (auto p : s.points)
      if (!detail::point_reached(p)) return false;
    s.points.clear();
    return true;
  }
  // Holds s for a copy whose bytes start at its start (mutex_ held).
  Slot* start(Slot& s) {
    s.held = true;
    s.packed = 0;
    s.started = s.taken = ++takes_;
    return &s;
  }
  Slot* fresh() {
    Buffer memory = own_ ? Buffer::create(*own_, kStagingBytes, Memory::Pinned) : Buffer::create(host(), kStagingBytes);
    if (!memory.host_address())
      own_->state().refuse("copy: its Pinned memory, through which its copies stage, has no host address");
    std::lock_guard g(mutex_);
    slots_.push_back(std::make_unique<Slot>(Slot{std::move(memory), {}, {}, false, 0, 0, 0}));
    most_ = std::max(most_, slots_.size());
    return start(*slots_.back());
  }
  std::uint64_t takes_ = 0;  // every take so far: start's and an upload's after others
  std::size_t most_ = 0;     // n: the most allocations it has had at once
  std::optional<Device> own_;
  std::mutex mutex_;
  std::deque<std::unique_ptr<Slot>> slots_;  // a copy holds its Slot* across erasures
};

// The host's staging, and the staging of each live device that maps no host memory.
struct Stagings {
  std::mutex mutex;
  Staging host;
  std::map<const detail::DeviceState*, std::shared_ptr<Staging>> own;
};

Stagings& stagings() {
  static Stagings* s = new Stagings;  // never destroyed: copies may run during exit
  return *s;
}

// The staging that copies on d pass through.
std::shared_ptr<Staging> staging_of(const Device& d) {
  auto& all = stagings();
  if (d.facts().maps_host) return std::shared_ptr<Staging>(&all.host, [](Staging*) {});
  std::lock_guard g(all.mutex);
  auto& s = all.own[&d.state()];
  if (!s) s = std::make_shared<Staging>(d);
  return s;
}

}  // namespace

namespace detail {
void release_idle_staging(const DeviceState& d) {
  auto& all = stagings();
  if (d.index == 0) return all.host.release_idle();  // the host device's memory: the host's staging
  std::shared_ptr<Staging> s;
  {
    std::lock_guard g(all.mutex);
    if (auto it = all.own.find(&d); it != all.own.end()) s = it->second;
  }
  if (s) s->release_idle();
}

// Its memory returns as any lost device's memory does, once no copy holds it.
void forget_staging(const DeviceState& d) {
  std::shared_ptr<Staging> gone;
  auto& all = stagings();
  std::lock_guard g(all.mutex);
  if (auto it = all.own.find(&d); it != all.own.end()) {
    gone = std::move(it->second);
    all.own.erase(it);
  }
}
}  // namespace detail

namespace {

// A copy of `boxes` on d's copy engine between src and dst, both on d, after `waits`.
Point device_copy(const Device& d, const Buffer& src, const Buffer& dst, std::vector<Box> boxes,
                  std::span<const Point> waits) {
  Submission::Part part{"", {}, Submission::Copy{{src, 0}, {dst, 0}, std::move(boxes), {}}};
  std::pair<Buffer, Access> fixed[] = {{src, Access::Read}, {dst, Access::ReadWrite}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0, fixed);
  Run run;
  return submit(s, run, {}, {}, waits);
}

// The device that copies between a side and staging: the side's own device where it
// copies, or the owner of the memory a borrow on a device without a copy engine lies over.
Device copier(const Buffer& b) {
  Device d = b.device();
  if (d.facts().copy_engine) return d;
  Device owner(b.allocation()->device);
  if (owner.facts().copy_engine) return owner;
  d.state().refuse("copy: neither the device nor the memory's owner has a copy engine");
}

// A side as a buffer on `d`: itself, or a borrow of it.
Buffer on_device(const Buffer& b, const Device& d) {
  if (b.device() == d) return b;
  auto got = Buffer::borrow(d, b);
  if (!got) d.state().refuse("copy: the device cannot map the memory of {}", b.device().name());
  return *got;
}

// A copy between host memory and a device that maps it cheaply (facts' maps_host_cheaply),
// of kBorrowBytes or more: the host side borrowed on the device, which copies it directly,
// with no pass of the host through staging. Nullopt where that does not apply, or the
// device cannot map that memory now (the copy then stages).
std::optional<Point> borrowed_copy(const Buffer& src, const Buffer& dst, std::span<const Box> boxes,
                                   std::span<const Point> waits, std::size_t bytes) {
  const bool from_host = host_addressed(src);
  if (bytes < kBorrowBytes || from_host == host_addressed(dst)) return std::nullopt;
  const Buffer& host_side = from_host ? src : dst;
  const Device d = (from_host ? dst : src).device();
  const edge::Facts& f = d.facts();
  if (!f.maps_host || !f.maps_host_cheaply || !f.copy_engine) return std::nullopt;
  std::optional<Buffer> borrowed;
  try {
    borrowed = Buffer::borrow(d, host_side);
  } catch (const std::invalid_argument&) {
    return std::nullopt;  // held exclusive, or dead: the staged copy says which
  } catch (const OutOfMemory&) {
    return std::nullopt;  // no room for the mapping: staging needs none on the device
  }
  if (!borrowed) return std::nullopt;
  return from_host ? device_copy(d, *borrowed, dst, {boxes.begin(), boxes.end()}, waits)
                   : device_copy(d, src, *borrowed, {boxes.begin(), boxes.end()}, waits);
}

Point staged_copy(const Buffer& src, const Buffer& dst, std::span<const Box> boxes, std::span<const Point> waits) {
  const bool from_host = host_addressed(src);
  const bool to_host = host_addressed(dst);
  std::optional<Device> reader, writer;  // the devices that copy into and out of staging
  if (!from_host) reader = copier(src);
  if (!to_host) writer = copier(dst);
  // The staging the bytes go into, and the one they leave from: the reader's and the
  // writer's, one and the same unless one of them stages in its own memory, when the host
  // moves the bytes from one into the other.
  std::shared_ptr<Staging> in = staging_of(reader ? *reader : writer ? *writer : host());
  std::shared_ptr<Staging> out = writer ? staging_of(*writer) : in;
  Point last = host_point();
  std::vector<Piece> all = pieces(boxes, kStagingBytes);
  // A chunk a device copies into staging for the host to move into dst: moved there once
  // the next chunk's device copy is under way, so that the device fills one allocation while
  // the host empties the other.
  struct Download {
    Staging::Slot* slot = nullptr;
    Point moved;
    std::vector<Box> from;
  };
  std::optional<Download> pending;
  auto finish = [&](Download& d) {
    d.moved.wait();
    Claimed c;
    c.take(dst);
    dst.wait(Access::ReadWrite);
    auto* out = reinterpret_cast<std::byte*>(*dst.host_address());
    auto* base = reinterpret_cast<const std::byte*>(*d.slot->memory.host_address());
    for (const Box& b : d.from) std::memcpy(out + b.dst_offset, base + b.src_offset, b.width);
    in->give_back(std::exchange(d.slot, nullptr), host_point());
  };
  std::size_t i = 0;
  while (i < all.size()) {
    // A chunk of pieces that fits one staging allocation.
    std::size_t used = 0, j = i;
    while (j < all.size() && used + all[j].width <= kStagingBytes) used += all[j++].width;
    // An upload packs after earlier ones; bytes a device writes start an allocation.
    Staging::Slot* slot = nullptr;
    std::size_t first = 0;  // where the chunk's bytes start in the allocation
    if (from_host)
      std::tie(slot, first) = in->take_upload(used);
    else
      slot = in->take();
    Staging::Slot* leaving = nullptr;  // out's allocation, where out is not in
    Point moved = host_point();
    try {
      std::vector<Box> into, from;
      std::size_t at = first;
      for (std::size_t k = i; k < j; ++k) {
        into.push_back(Box{all[k].src, at, all[k].width, 1, all[k].width, all[k].width});
        from.push_back(Box{at, all[k].dst, all[k].width, 1, all[k].width, all[k].width});
        at += all[k].width;
      }
      if (from_host) {
        Claimed c;
        c.take(src);
        wait_all(waits);
        src.wait(Access::Read);
        auto* s = reinterpret_cast<const std::byte*>(*src.host_address());
        auto* base = reinterpret_cast<std::byte*>(*slot->memory.host_address());
        for (const Box& b : into) std::memcpy(base + b.dst_offset, s + b.src_offset, b.width);
      } else {
        moved = device_copy(*reader, on_device(src, *reader), in->on(slot, *reader), std::move(into), waits);
      }
      Staging::Slot* source = slot;
      if (out != in) {  // the host moves the bytes into the writer's own staging
        leaving = out->take();
        moved.wait();
        std::memcpy(reinterpret_cast<void*>(*leaving->memory.host_address() + first),
                    reinterpret_cast<const void*>(*slot->memory.host_address() + first), used);
        moved = host_point();
        in->give_back(std::exchange(slot, nullptr), moved);
        source = leaving;
      }
      if (to_host) {
        // Out of the reader's staging (out is in): the chunk before moves now.
        if (pending) finish(*pending);
        pending = Download{std::exchange(slot, nullptr), moved, std::move(from)};
        last = host_point();
      } else {
        Point after[] = {moved};
        std::span<const Point> follow = from_host ? waits : std::span<const Point>(after);
        moved = device_copy(*writer, out->on(source, *writer), on_device(dst, *writer), std::move(from), follow);
        last = moved;
      }
    } catch (...) {
      if (slot) in->give_back(slot, moved);
      if (leaving) out->give_back(leaving, moved);
      if (pending && pending->slot) in->give_back(pending->slot, pending->moved);
      throw;
    }
    if (slot) in->give_back(slot, last);
    if (leaving) out->give_back(leaving, last);
    i = j;
  }
  if (pending) {
    try {
      finish(*pending);
    } catch (...) {
      if (pending->slot) in->give_back(pending->slot, pending->moved);
      throw;
    }
  }
  return last;
}

bool is_io(const Buffer& b) { return b.allocation()->io.has_value(); }

// A copy where a side is an io device's memory: the io device reads or writes host memory,
// the buffer's own where the host addresses it, else a host buffer the bytes pass through.
Point io_copy(const Buffer& src, const Buffer& dst, std::span<const Box> boxes, std::span<const Point> waits) {
  for (const Buffer* b : {&src, &dst})
    if (is_io(*b)) b->allocation()->device->check_live();
  std::vector<Piece> rows = pieces(boxes, SIZE_MAX);
  std::size_t total = 0;
  for (const auto& p : rows) total += p.width;
  // The bytes in host memory, packed in row order, where a side is not host-addressed.
  std::optional<Buffer> packed;
  std::vector<Box> to_packed, from_packed;
  if ((is_io(src) && !host_addressed(dst)) || (is_io(dst) && !host_addressed(src)) || (is_io(src) && is_io(dst))) {
    packed = Buffer::create(host(), total);
    std::size_t at = 0;
    for (const auto& p : rows) {
      to_packed.push_back(Box{p.src, at, p.width, 1, p.width, p.width});
      from_packed.push_back(Box{at, p.dst, p.width, 1, p.width, p.width});
      at += p.width;
    }
  }
  wait_all(waits);
  // First the bytes into host memory: the destination's own, or the packed buffer.
  const std::byte* source = nullptr;  // host bytes holding the source rows
  bool source_packed = false;
  if (is_io(src)) {
    auto& io = *src.allocation()->device->io;
    auto region = *src.allocation()->io;
    if (host_addressed(dst) && !is_io(dst)) {
      Claimed c;
      c.take(dst);
      dst.wait(Access::ReadWrite);
      auto* out = reinterpret_cast<std::byte*>(*dst.host_address());
      for (const auto& p : rows) io.read(region, src.offset() + p.src, std::span(out + p.dst, p.width));
      return host_point();
    }
    auto* out = reinterpret_cast<std::byte*>(*packed->host_address());
    for (const auto& b : to_packed) io.read(region, src.offset() + b.src_offset, std::span(out + b.dst_offset, b.width));
    source = out;
    source_packed = true;
  } else if (host_addressed(src)) {
    src.wait(Access::Read);
    source = reinterpret_cast<const std::byte*>(*src.host_address());
  } else {
    Buffer::submit_copy(src, *packed, to_packed).wait();
    source = reinterpret_cast<const std::byte*>(*packed->host_address());
    source_packed = true;
  }
  // Then out to the destination.
  if (is_io(dst)) {
    auto& io = *dst.allocation()->device->io;
    auto region = *dst.allocation()->io;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::size_t from = source_packed ? from_packed[i].src_offset : rows[i].src;
      io.write(region, dst.offset() + rows[i].dst, std::span(source + from, rows[i].width));
    }
    return host_point();
  }
  return Buffer::submit_copy(*packed, dst, from_packed);
}

}  // namespace

namespace {
Point route_copy(const Buffer& src, const Buffer& dst, std::span<const Box> boxes, std::span<const Point> waits);
}

Point Buffer::submit_copy(const Buffer& src, const Buffer& dst, std::span<const Box> boxes,
                          std::span<const Point> waits) {
  if (!profile::hooks::taking()) return route_copy(src, dst, boxes, waits);
  std::uint64_t start = rig_now_ns(), bytes = 0;
  for (const Box& b : boxes) bytes += b.width * b.rows;
  Point p = route_copy(src, dst, boxes, waits);
  profile::hooks::event(profile::Record::What::Copy, dst.device().state(), bytes, start,
                        fmt::format("copy {} -> {}", src.device().name(), dst.device().name()));
  return p;
}

namespace {
Point route_copy(const Buffer& src, const Buffer& dst, std::span<const Box> boxes, std::span<const Point> waits) {
  check(&src, dst, boxes);
  std::size_t bytes = 0;
  for (const Box& b : boxes) bytes += b.width * b.rows;
  if (bytes == 0) {
    wait_all(waits);
    return host_point();
  }
  if (is_io(src) || is_io(dst)) {
    if (src.allocation() == dst.allocation()) refuse_copy(dst, "both sides are one io region");
    return io_copy(src, dst, boxes, waits);
  }
  if (host_addressed(src) && host_addressed(dst)) {
    Claimed c;
    c.take(src);
    c.take(dst);
    wait_all(waits);
    src.wait(Access::Read);
    dst.wait(Access::ReadWrite);
    auto* s = reinterpret_cast<const std::byte*>(*src.host_address());
    auto* d = reinterpret_cast<std::byte*>(*dst.host_address());
    for (const Box& b : boxes)
      for (std::size_t r = 0; r < b.rows; ++r)
        std::memcpy(d + b.dst_offset + r * b.dst_pitch, s + b.src_offset + r * b.src_pitch, b.width);
    return host_point();
  }
  if (src.device() == dst.device() && src.device().facts().copy_engine)
    return device_copy(src.device(), src, dst, {boxes.begin(), boxes.end()}, waits);
  if (auto p = borrowed_copy(src, dst, boxes, waits, bytes)) return *p;
  return staged_copy(src, dst, boxes, waits);
}
}  // namespace

void Buffer::copy(const Buffer& src, const Buffer& dst) {
  if (src.length() != dst.length())
    dst.allocation()->device->refuse("copy of {} bytes into a buffer of {}", src.length(), dst.length());
  Box row = Box::row(src.length());
  Claimed c;
  c.take(src);
  c.take(dst);
  submit_copy(src, dst, std::span(&row, 1)).wait();
}

void Buffer::blit_from(std::span<const std::byte> bytes, std::size_t at) {
  if (at > length_ || bytes.size() > length_ - at)
    alloc_->device->refuse("blit of {} bytes at {} into a buffer of {}", bytes.size(), at, length_);
  if (bytes.empty()) return;
  Buffer dst = view(at, bytes.size());
  auto src = Buffer::of_host(std::span(const_cast<std::byte*>(bytes.data()), bytes.size()), nullptr);
  src.allocation()->access = Access::Read;
  copy(src, dst);
}

void Buffer::blit_to(std::size_t at, std::span<std::byte> out) const {
  if (at > length_ || out.size() > length_ - at)
    alloc_->device->refuse("blit of {} bytes at {} out of a buffer of {}", out.size(), at, length_);
  if (out.empty()) return;
  Buffer src = view(at, out.size());
  copy(src, Buffer::of_host(out, nullptr));
}

Point Buffer::submit_fill(std::byte byte, std::span<const Point> waits) {
  Box all = Box::row(length_);
  check(nullptr, *this, std::span(&all, 1));
  if (length_ == 0) {
    wait_all(waits);
    return host_point();
  }
  if (is_io(*this)) {  // the io device writes host memory that holds the byte
    wait_all(waits);
    std::vector<std::byte> chunk(std::min<std::size_t>(length_, 1 << 20), byte);
    auto& io = *alloc_->device->io;
    for (std::size_t at = 0; at < length_; at += chunk.size())
      io.write(*alloc_->io, first_ + at, std::span(chunk.data(), std::min(chunk.size(), length_ - at)));
    return host_point();
  }
  if (host_addressed(*this)) {
    Claimed c;
    c.take(*this);
    wait_all(waits);
    wait(Access::ReadWrite);
    std::memset(reinterpret_cast<void*>(*host_address()), std::to_integer<int>(byte), length_);
    return host_point();
  }
  Device d = copier(*this);
  Buffer target = on_device(*this, d);
  Submission::Part part{"", {}, Submission::Copy{{std::nullopt, 0}, {target, 0}, {all}, byte}};
  std::pair<Buffer, Access> fixed[] = {{target, Access::ReadWrite}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0, fixed);
  Run run;
  return submit(s, run, {}, {}, waits);
}

void Buffer::fill(std::byte byte) {
  Claimed c;
  c.take(*this);
  submit_fill(byte).wait();
}

}  // namespace rig
