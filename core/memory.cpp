// Buffers: allocations with their stamps, views, host access, and the return of memory once
// the work that uses it is done.
#include <fmt/format.h>

#include <cstring>

#include "state.hpp"

namespace rig {
namespace detail {

void Allocation::use(std::uint64_t point, bool writes) {
  std::lock_guard g(lock);
  if (writes) last_write = point;
  std::uint16_t i = index_of(point);
  for (auto& u : uses)
    if (index_of(u) == i) {
      if (value_of(u) < value_of(point)) u = point;
      return;
    }
  uses.push_back(point);
}

Allocation::~Allocation() {
  if (!region) return;  // caller memory: its owner goes with this object
  auto d = device;
  std::size_t n = bytes;
  edge::Region r = *region;
  std::vector<std::uint64_t> points = uses;
  d->defer(std::move(points), [d, r, n] {
    std::lock_guard g(d->calls);
    {
      std::lock_guard l(d->loss_mutex);
      // A lost device's memory goes back only once its word shows its last value.
      if (d->is_lost.load() && d->word() < d->submitted.load()) return;
    }
    d->driver->free(r);
    d->used.fetch_sub(n);
  });
}

namespace {

std::shared_ptr<Allocation> allocate(const std::shared_ptr<DeviceState>& d, std::size_t n, Memory memory) {
  d->check_live();
  if (memory == Memory::Pinned && d->facts.host_addresses)
    d->refuse("Pinned memory asked of a device whose memory the host addresses; use Device memory");
  auto a = std::make_shared<Allocation>();
  a->device = d;
  a->memory = memory;
  a->bytes = n;
  if (n == 0) return a;
  d->drain();
  std::size_t budget = d->budget.load();
  if (d->used.load() + n > budget)
    throw OutOfMemory(d->name, n,
                      fmt::format("{} of its budget of {} bytes are in use", d->used.load(), budget));
  std::optional<edge::Region> r;
  edge::Location where;
  std::string fault;
  {
    std::lock_guard g(d->calls);
    d->check_live();
    try {
      r = d->driver->alloc(memory, n);
      if (r) {
        where = d->driver->locate(*r);
        if (where.address && *where.address % d->facts.alignment != 0) {
          d->driver->free(*r);
          fault = fmt::format("its driver allocated at {:#x}, off its alignment of {}",
                              *where.address, d->facts.alignment);
        } else if (d->facts.host_addresses && !where.host) {
          d->driver->free(*r);
          fault = "its driver allocated memory the host does not address, against its facts";
        }
      }
    } catch (const edge::Fault& e) {
      fault = fmt::format("fault during an allocation of {} bytes: {}", n, e.what());
    }
  }
  if (!fault.empty()) {
    d->lose(fault);
    d->throw_lost();
  }
  if (!r) throw OutOfMemory(d->name, n, "its driver has no room");
  a->region = r;
  a->address = where.address.value_or(0);
  a->host = where.host;
  a->handle = where.handle;
  d->used.fetch_add(n);
  return a;
}

}  // namespace
}  // namespace detail

Buffer Buffer::create(const Device& d, std::size_t n, Memory memory) {
  auto& state = d.state();
  auto shared = detail::shared_device_at(state.index);
  return Buffer(detail::allocate(shared, n, memory), 0, n);
}

Buffer Buffer::of_string(std::string_view bytes) {
  Buffer b = create(host(), bytes.size());
  if (!bytes.empty()) std::memcpy(reinterpret_cast<void*>(*b.alloc_->host), bytes.data(), bytes.size());
  return b;
}

Buffer Buffer::of_host(std::span<std::byte> bytes, std::shared_ptr<const void> owner) {
  auto h = host();
  auto a = std::make_shared<detail::Allocation>();
  a->device = detail::shared_device_at(h.state().index);
  a->bytes = bytes.size();
  a->address = reinterpret_cast<std::uintptr_t>(bytes.data());
  a->host = reinterpret_cast<std::uintptr_t>(bytes.data());
  a->handle = std::intptr_t(a->address);
  a->owner = std::move(owner);
  return Buffer(std::move(a), 0, bytes.size());
}

Buffer Buffer::view(std::size_t first, std::size_t length) const {
  if (auto why = dead()) alloc_->device->refuse("a view of a dead buffer ({})", *why);
  if (first > length_ || length > length_ - first)
    alloc_->device->refuse("a view of bytes {}..{} of a buffer of {} bytes", first, first + length,
                           length_);
  return Buffer(alloc_, first_ + first, length);
}

Device Buffer::device() const { return Device(alloc_->device); }
Access Buffer::access() const { return alloc_->access; }
bool Buffer::spans() const { return first_ == 0 && length_ == alloc_->bytes; }
bool Buffer::overlaps(const Buffer& o) const {
  return alloc_ == o.alloc_ && length_ && o.length_ && first_ < o.first_ + o.length_ &&
         o.first_ < first_ + length_;
}
std::optional<std::string> Buffer::dead() const {
  std::lock_guard g(alloc_->lock);
  return alloc_->dead;
}
std::uint64_t Buffer::address() const { return alloc_->address + first_; }
std::optional<std::uintptr_t> Buffer::host_address() const {
  if (!alloc_->host) return std::nullopt;
  return *alloc_->host + first_;
}

namespace {
// The points a host access must follow: the last write for Read, every use for ReadWrite.
void points_to_follow(const detail::Allocation& a, Access access, std::vector<std::uint64_t>& out) {
  auto& m = const_cast<detail::Allocation&>(a);
  std::lock_guard g(m.lock);
  if (access == Access::Read) {
    if (detail::value_of(a.last_write)) out.push_back(a.last_write);
  } else {
    out = a.uses;
  }
}
}  // namespace

void Buffer::wait(Access access) const {
  if (auto why = dead()) alloc_->device->refuse("a wait on a dead buffer ({})", *why);
  std::vector<std::uint64_t> points;
  points_to_follow(*alloc_, access, points);
  for (auto p : points) Point::from_bits(p).wait();
}

bool Buffer::reached(Access access) const {
  if (auto why = dead()) alloc_->device->refuse("reached on a dead buffer ({})", *why);
  std::vector<std::uint64_t> points;
  points_to_follow(*alloc_, access, points);
  for (auto p : points)
    if (!Point::from_bits(p).reached()) return false;
  return true;
}

std::pair<std::byte*, std::size_t> Buffer::host_bytes(std::size_t size, std::size_t align,
                                                      bool writing) const {
  auto& d = *alloc_->device;
  if (auto why = dead()) d.refuse("host access to a dead buffer ({})", *why);
  if (writing && alloc_->access == Access::Read) d.refuse("a host write of a read-only buffer");
  if (length_ == 0) return {nullptr, 0};
  if (!alloc_->host) d.refuse("host access to memory the host does not address; copy it instead");
  if (length_ % size)
    d.refuse("host access as elements of {} bytes to a buffer of {} bytes", size, length_);
  std::uintptr_t p = *alloc_->host + first_;
  if (p % align) d.refuse("host access as elements aligned to {} at address {:#x}", align, p);
  return {reinterpret_cast<std::byte*>(p), length_};
}

Hold Hold::make(std::function<void()> release) {
  auto s = std::make_shared<detail::HoldState>();
  s->release = std::move(release);
  return Hold(std::move(s));
}

}  // namespace rig
