// Buffers: allocations and their stamps, the per-device cache, borrows and their mappings,
// views, host access, claims, and the return of memory once the work that uses it is done.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "profile_hooks.hpp"
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

namespace {

// Regions come in size classes, so that the cache serves a later request of a similar size:
// whole 4 KiB pages up to 64 KiB, then multiples of a quarter of the next power of two
// (at most a quarter more than asked).
std::size_t size_class(std::size_t n) {
  if (n <= 64 * 1024) return (n + 4095) & ~std::size_t(4095);
  std::size_t step = std::bit_ceil(n) / 4;
  return (n + step - 1) / step * step;
}

// The memory returns: once other devices' uses are reached, into its device's cache with
// its own device's last use, which a reuse inherits.
void return_memory(const std::shared_ptr<DeviceState>& d, Cached c, std::vector<std::uint64_t> uses,
                   bool cacheable) {
  std::vector<std::uint64_t> foreign;
  for (auto u : uses) {
    if (index_of(u) == d->index)
      c.own_point = u;
    else
      foreign.push_back(u);
  }
  d->defer(std::move(foreign), [d, c, cacheable] { d->give_back(c, cacheable); });
}

}  // namespace

Allocation::~Allocation() {
  if (io) {  // an io device's region returns to it once the work that used its pages is done
    auto d = device;
    auto r = *io;
    // Also after its stop: its pages may outlive the stop in other devices' work, so a
    // region's free is what unmaps them. The calls lock keeps it apart from stop.
    d->defer(uses, [d, r] {
      std::lock_guard g(d->calls);
      d->io->free(r);
    });
    return;
  }
  if (!region) return;  // caller memory, or memory a consume or free moved away
  return_memory(device, Cached{*region, {address, host, handle}, region_bytes, memory, 0}, uses, !no_cache);
}

Mapping::~Mapping() {
  if (!region) return;
  auto d = device;
  edge::Region r = *region;
  // Released once the borrowing device has run the work submitted until now.
  d->defer({pack(d->index, d->submitted.load())}, [d, r] {
    std::lock_guard g(d->calls);
    {
      std::lock_guard l(d->loss_mutex);
      if (!d->may_free()) return;
    }
    d->driver->free(r);
  });
}

void DeviceState::free_region(edge::Region r, std::size_t bytes) {
  {
    std::lock_guard g(calls);
    {
      std::lock_guard l(loss_mutex);
      // A lost device's memory goes back only once its word shows its last value.
      if (!may_free()) return;
    }
    driver->free(r);
  }
  used.fetch_sub(bytes);
}

void DeviceState::give_back(Cached c, bool cacheable) {
  if (!cacheable || is_lost.load()) {
    std::vector<std::uint64_t> own;
    if (c.own_point) own.push_back(c.own_point);
    defer(std::move(own), [this, r = c.region, n = c.bytes] { free_region(r, n); });
    return;
  }
  std::lock_guard g(cache_mutex);
  cache.push_back(c);
  cached_bytes += c.bytes;
}

std::optional<Cached> DeviceState::take_cached(Memory memory, std::size_t bytes) {
  std::lock_guard g(cache_mutex);
  for (auto it = cache.rbegin(); it != cache.rend(); ++it) {
    if (it->memory != memory || it->bytes != bytes) continue;
    Cached c = *it;
    cache.erase(std::next(it).base());
    cached_bytes -= c.bytes;
    return c;
  }
  return std::nullopt;
}

void DeviceState::free_cache(std::size_t keep) {
  std::vector<Cached> out;
  {
    std::lock_guard g(cache_mutex);
    while (cached_bytes > keep && !cache.empty()) {
      out.push_back(cache.front());
      cached_bytes -= cache.front().bytes;
      cache.erase(cache.begin());
    }
  }
  for (auto& c : out) {
    std::vector<std::uint64_t> own;
    if (c.own_point) own.push_back(c.own_point);
    defer(std::move(own), [this, r = c.region, n = c.bytes] { free_region(r, n); });
  }
}

namespace {

// Runs every device's due returns: memory of one device may be kept by another's, such as
// the buffers a submission on a device that borrowed it keeps until its work is done.
void drain_every_device() {
  for (const auto& other : all_devices()) other->drain();
}

// Waits for every deferred act's points, then runs the acts: reclamation's second round.
void wait_for_deferred(DeviceState& d) {
  std::vector<std::uint64_t> points;
  {
    std::lock_guard g(d.deferred_mutex);
    for (auto& x : d.deferred) points.insert(points.end(), x.points.begin(), x.points.end());
  }
  for (auto p : points) {
    try {
      Point::from_bits(p).wait();
    } catch (const Lost&) {
    }
  }
  d.drain();
}

std::shared_ptr<Allocation> from_cache(const std::shared_ptr<DeviceState>& d, const Cached& c, std::size_t n) {
  auto a = std::make_shared<Allocation>();
  a->device = d;
  a->memory = c.memory;
  a->bytes = n;
  a->region = c.region;
  a->region_bytes = c.bytes;
  a->address = c.where.address.value_or(0);
  a->handle_only = !c.where.address;
  a->host = c.where.host;
  a->handle = c.where.handle;
  a->host_paged = d->runs_on_host;
  if (c.own_point) {  // the reuse follows the work that last used the memory
    a->last_write = c.own_point;
    a->uses.push_back(c.own_point);
  }
  return a;
}

// One try of the driver: a region, nullopt if no room; Lost for a fault or a region that
// breaks the facts.
std::optional<Cached> driver_alloc(DeviceState& d, Memory memory, std::size_t bytes) {
  std::optional<edge::Region> r;
  edge::Location where;
  std::string fault;
  {
    std::lock_guard g(d.calls);
    d.check_live();
    try {
      r = d.driver->alloc(memory, bytes);
      if (r) {
        where = d.driver->locate(*r);
        if (where.address && *where.address % d.facts.alignment != 0) {
          d.driver->free(*r);
          fault = fmt::format("its driver allocated at {:#x}, off its alignment of {}", *where.address,
                              d.facts.alignment);
        } else if (d.facts.host_addresses && !where.host) {
          d.driver->free(*r);
          fault = "its driver allocated memory the host does not address, against its facts";
        }
      }
    } catch (const edge::Fault& e) {
      fault = fmt::format("fault during an allocation of {} bytes: {}", bytes, e.what());
    }
  }
  if (!fault.empty()) {
    d.lose(fault);
    d.throw_lost();
  }
  if (!r) return std::nullopt;
  d.used.fetch_add(bytes);
  return Cached{*r, where, bytes, memory, 0};
}

// Frees cached memory until `bytes` more fit the budget; false if they still do not.
bool fit_budget(DeviceState& d, std::size_t bytes) {
  std::size_t budget = d.budget.load();
  if (d.used.load() + bytes <= budget) return true;
  std::size_t over = d.used.load() + bytes - budget;
  std::size_t cached;
  {
    std::lock_guard g(d.cache_mutex);
    cached = d.cached_bytes;
  }
  d.free_cache(cached > over ? cached - over : 0);
  d.drain();
  return d.used.load() + bytes <= budget;
}

// A new region of `memory`, from the cache or the driver, with the rounds of reclamation.
std::optional<Cached> obtain(DeviceState& d, Memory memory, std::size_t bytes) {
  if (!fit_budget(d, bytes))
    throw OutOfMemory(d.name, bytes, fmt::format("{} of its budget of {} bytes are in use", d.used.load(),
                                                 d.budget.load()));
  for (int round = 0; round < 4; ++round) {
    if (auto got = driver_alloc(d, memory, bytes)) return got;
    if (round == 0) d.free_cache();       // round 1: return the cache
    if (round == 1) {                     // round 2: return idle staging, wait for work that holds memory
      detail::release_idle_staging(d);
      wait_for_deferred(d);
    }
    if (round == 2) {                     // round 3: return what that freed, and the cache again
      drain_every_device();
      d.free_cache();
    }
  }
  return std::nullopt;
}

std::shared_ptr<Allocation> allocate(const std::shared_ptr<DeviceState>& d, std::size_t n, Memory memory) {
  d->check_live();
  if (!d->computes) d->refuse("an io device's memory is made by Buffer::of_io");
  if (memory == Memory::Pinned && d->facts.host_addresses)
    d->refuse("Pinned memory asked of a device whose memory the host addresses; use Device memory");
  if (memory == Memory::Mapped && d->facts.host_addresses) memory = Memory::Device;
  auto a = std::make_shared<Allocation>();
  a->device = d;
  a->memory = memory;
  a->bytes = n;
  a->host_paged = d->runs_on_host;
  if (n == 0) return a;
  d->drain();
  const std::size_t bytes = size_class(n);
  if (auto c = d->take_cached(memory, bytes)) return from_cache(d, *c, n);
  std::optional<Cached> got;
  if (memory == Memory::Mapped) {
    // Where the window has no room, Pinned memory; no freeing of the cache first.
    if (d->used.load() + bytes <= d->budget.load()) got = driver_alloc(*d, Memory::Mapped, bytes);
    if (!got) {
      memory = Memory::Pinned;
      if (auto c = d->take_cached(memory, bytes)) return from_cache(d, *c, n);
    }
  }
  if (!got) got = obtain(*d, memory, bytes);
  if (!got) throw OutOfMemory(d->name, n, "its driver has no room after returning its cache and waiting for its work");
  return from_cache(d, *got, n);
}

std::optional<std::string> dead_reason(const Allocation& a, const Borrow* b) {
  if (b && b->dead) return b->dead;
  std::lock_guard g(const_cast<Allocation&>(a).lock);
  return a.dead;
}

}  // namespace

std::shared_ptr<Allocation> allocate_on(const std::shared_ptr<DeviceState>& d, std::size_t n, Memory memory) {
  return allocate(d, n, memory);
}

}  // namespace detail

using detail::Allocation;

Buffer Buffer::create(const Device& d, std::size_t n, Memory memory) {
  auto shared = detail::shared_device_at(d.index());
  if (!profile::hooks::taking()) return Buffer(detail::allocate(shared, n, memory), nullptr, 0, n);
  std::uint64_t start = rig_now_ns();
  Buffer b(detail::allocate(shared, n, memory), nullptr, 0, n);
  profile::hooks::event(profile::Record::What::Allocation, *shared, n, start);
  return b;
}

Buffer Buffer::of_string(std::string_view bytes) {
  Buffer b = create(host(), bytes.size());
  if (!bytes.empty()) std::memcpy(reinterpret_cast<void*>(*b.alloc_->host), bytes.data(), bytes.size());
  return b;
}

Buffer Buffer::of_host(std::span<std::byte> bytes, std::shared_ptr<const void> owner) {
  auto h = host();
  auto a = std::make_shared<Allocation>();
  a->device = detail::shared_device_at(h.index());
  a->bytes = bytes.size();
  a->address = reinterpret_cast<std::uintptr_t>(bytes.data());
  a->host = reinterpret_cast<std::uintptr_t>(bytes.data());
  a->handle = std::intptr_t(a->address);
  a->owner = owner ? std::move(owner) : std::make_shared<int>(0);
  a->host_paged = true;
  a->outside = true;
  return Buffer(std::move(a), nullptr, 0, bytes.size());
}

Buffer Buffer::of_io(const Device& device, edge::IoRegion r, Access access, std::size_t n) {
  auto d = detail::shared_device_at(device.index());
  if (!d->io) d->refuse("of_io on a device that is not an io device");
  d->check_live();
  auto a = std::make_shared<Allocation>();
  a->device = d;
  a->bytes = n;
  a->io = r;
  a->access = access;
  a->outside = true;
  a->handle_only = true;
  return Buffer(std::move(a), nullptr, 0, n);
}

std::optional<edge::IoRegion> Buffer::io(const void* key) const {
  if (auto why = dead()) alloc_->device->refuse("io of a dead buffer ({})", *why);
  if (!alloc_->io || alloc_->device->io->region_key() != key) return std::nullopt;
  return alloc_->io;
}

std::optional<Buffer> Buffer::borrow(const Device& device, const Buffer& b) {
  auto d = detail::shared_device_at(device.index());
  if (auto why = b.dead()) d->refuse("a borrow of a dead buffer ({})", *why);
  d->check_live();
  Allocation& a = *b.alloc_;
  a.device->check_live();  // a borrow is a use of the memory
  if (b.device() == device) return b;
  if (a.device == d) return Buffer(b.alloc_, nullptr, b.first_, b.length_);  // back on its owner
  {
    std::lock_guard g(a.lock);
    if (a.exclusive) d->refuse("a borrow of memory a claim holds exclusive");
    for (auto& w : a.mappings)
      if (auto m = w.lock(); m && m->device == d)
        return Buffer(b.alloc_, std::make_shared<detail::Borrow>(detail::Borrow{d, m, std::nullopt, 0}), b.first_,
                      b.length_);
  }
  auto m = std::make_shared<detail::Mapping>();
  m->device = d;
  // The host address of the memory and whether the host pages it: an io device's memory
  // borrows as its pages in host memory, where the io device gives them.
  std::optional<std::uintptr_t> host = a.host;
  bool host_memory = a.host_paged;
  if (a.io && a.bytes) {
    if (!d->computes) return std::nullopt;  // an io device maps no other's memory
    auto pages = a.device->io->pages(*a.io);  // std::system_error where the io device fails
    if (!pages) return std::nullopt;
    if (pages->size() < a.bytes)
      a.device->refuse("its io region's pages hold {} bytes of its {}", pages->size(), a.bytes);
    host = reinterpret_cast<std::uintptr_t>(pages->data());
    host_memory = true;
  }
  if (a.bytes == 0) {
    // Empty memory borrows on every device of its machine.
  } else if (d->runs_on_host && host) {
    m->address = *host;  // the device's work is this process's code
  } else if (!d->computes) {
    return std::nullopt;
  } else {
    if (host_memory && (!d->facts.maps_host || !host || *host % 4096)) return std::nullopt;
    for (int round = 0;; ++round) {
      edge::Mapping answer;
      std::string fault;
      {
        std::lock_guard g(d->calls);
        d->check_live();
        try {
          std::size_t bytes = host_memory && (a.io || !a.region_bytes) ? (a.bytes + 4095) & ~std::size_t(4095)
                                                                      : a.region_bytes;
          answer = host_memory ? d->driver->map_host(*host, bytes)
                               : d->driver->map_peer({a.handle_only ? std::nullopt : std::optional(a.address), a.host,
                                                      a.handle},
                                                     bytes);
          if (auto* r = std::get_if<edge::Region>(&answer)) {
            auto where = d->driver->locate(*r);
            m->region = *r;
            m->address = where.address.value_or(0);
          }
        } catch (const edge::Fault& e) {
          fault = e.what();
        }
      }
      if (!fault.empty()) {
        d->lose(fmt::format("fault while mapping {} bytes of {}: {}", a.bytes, a.device->name, fault));
        d->throw_lost();
      }
      if (std::holds_alternative<edge::Never>(answer)) return std::nullopt;
      if (std::holds_alternative<edge::Region>(answer)) break;
      if (round > 0) throw OutOfMemory(d->name, a.bytes, "its driver has no room for the mapping");
      d->drain();  // no room: return memory and ask once more
      d->free_cache();
    }
  }
  {
    std::lock_guard g(a.lock);
    std::erase_if(a.mappings, [](auto& w) { return w.expired(); });
    a.mappings.push_back(m);
  }
  return Buffer(b.alloc_, std::make_shared<detail::Borrow>(detail::Borrow{d, std::move(m), std::nullopt, 0}), b.first_,
                b.length_);
}

Buffer Buffer::view(std::size_t first, std::size_t length) const {
  auto& d = *alloc_->device;
  if (auto why = dead()) d.refuse("a view of a dead buffer ({})", *why);
  if (first > length_ || length > length_ - first)
    d.refuse("a view of bytes {}..{} of a buffer of {} bytes", first, first + length, length_);
  return Buffer(alloc_, borrow_, first_ + first, length);
}

bool Buffer::free(std::string_view why) {
  Allocation& a = *alloc_;
  if (auto reason = dead()) a.device->refuse("free of a dead buffer ({})", *reason);
  if (!spans()) return false;
  std::optional<edge::Region> region;
  std::vector<std::uint64_t> uses;
  {
    std::lock_guard g(a.lock);
    if (a.outside || a.readers > 0 || a.exclusive) return false;
    a.dead = std::string(why);
    std::swap(region, a.region);
    uses = a.uses;
  }
  if (region)
    detail::return_memory(a.device, detail::Cached{*region, {a.address, a.host, a.handle}, a.region_bytes, a.memory, 0},
                          std::move(uses), !a.no_cache);
  return true;
}

bool Buffer::unborrow(std::string_view why) {
  auto& d = *alloc_->device;
  if (auto reason = dead()) d.refuse("unborrow of a dead buffer ({})", *reason);
  if (!borrow_) d.refuse("unborrow of a buffer that is not a borrow on another device");
  if (!spans()) d.refuse("unborrow of a view of part of a borrow");
  std::lock_guard g(alloc_->lock);
  if (borrow_->holds > 0) return false;
  borrow_->dead = std::string(why);
  borrow_->mapping.reset();
  return true;
}

Device Buffer::device() const { return Device(borrow_ ? borrow_->device : alloc_->device); }
Access Buffer::access() const { return alloc_->access; }
bool Buffer::is_borrowed() const { return borrow_ != nullptr || alloc_->owner != nullptr; }
bool Buffer::spans() const { return first_ == 0 && length_ == alloc_->bytes; }
bool Buffer::overlaps(const Buffer& o) const {
  return alloc_ == o.alloc_ && length_ && o.length_ && first_ < o.first_ + o.length_ && o.first_ < first_ + length_;
}
std::optional<std::string> Buffer::dead() const { return detail::dead_reason(*alloc_, borrow_.get()); }
std::uint64_t Buffer::address() const {
  if (borrow_) return (borrow_->mapping ? borrow_->mapping->address : 0) + first_;
  return alloc_->address + first_;
}
std::optional<std::uintptr_t> Buffer::host_address() const {
  if (alloc_->host) return *alloc_->host + first_;
  // A borrow on a device whose work is this process's code, of memory the host reaches only
  // through it: an io device's pages.
  if (borrow_ && borrow_->mapping && borrow_->device->runs_on_host && alloc_->bytes)
    return borrow_->mapping->address + first_;
  return std::nullopt;
}

namespace {
// The points a host access must follow: the last write for Read, every use for ReadWrite.
std::vector<std::uint64_t> points_to_follow(Allocation& a, Access access) {
  std::lock_guard g(a.lock);
  if (access == Access::Read) {
    if (detail::value_of(a.last_write)) return {a.last_write};
    return {};
  }
  return a.uses;
}
}  // namespace

void Buffer::wait(Access access) const {
  if (auto why = dead()) alloc_->device->refuse("a wait on a dead buffer ({})", *why);
  for (auto p : points_to_follow(*alloc_, access)) Point::from_bits(p).wait();
}

bool Buffer::reached(Access access) const {
  if (auto why = dead()) alloc_->device->refuse("reached on a dead buffer ({})", *why);
  for (auto p : points_to_follow(*alloc_, access))
    if (!Point::from_bits(p).reached()) return false;
  return true;
}

Buffer::HostClaim Buffer::host_claim(bool writing) const {
  alloc_->device->check_live();  // every use of a lost device's memory raises Lost
  claim::read(*this);
  HostClaim held(this);
  wait(writing ? Access::ReadWrite : Access::Read);
  return HostClaim(std::exchange(held.buffer, nullptr));
}

Buffer::HostClaim::~HostClaim() {
  if (buffer) claim::release(*buffer);
}

std::pair<std::byte*, std::size_t> Buffer::host_bytes(std::size_t size, std::size_t align, bool writing) const {
  auto& d = *alloc_->device;
  if (auto why = dead()) d.refuse("host access to a dead buffer ({})", *why);
  if (writing && alloc_->access == Access::Read) d.refuse("a host write of a read-only buffer");
  if (length_ == 0) return {nullptr, 0};
  auto host = host_address();
  if (!host) d.refuse("host access to memory the host does not address; copy it instead");
  if (length_ % size) d.refuse("host access as elements of {} bytes to a buffer of {} bytes", size, length_);
  std::uintptr_t p = *host;
  if (p % align) d.refuse("host access as elements aligned to {} at address {:#x}", align, p);
  return {reinterpret_cast<std::byte*>(p), length_};
}

void Buffer::export_memory() {
  auto& d = *alloc_->device;
  if (auto why = dead()) d.refuse("export of a dead buffer ({})", *why);
  if (d.index != host().index() || borrow_)
    d.refuse("export of memory that is not the host device's; copy it into a host buffer");
  {
    std::lock_guard g(alloc_->lock);
    if (alloc_->exclusive) d.refuse("export of memory a claim holds exclusive");
  }
  wait(Access::ReadWrite);
  std::lock_guard g(alloc_->lock);
  alloc_->outside = true;
}

Result<edge::Dma> Buffer::dma(std::string_view pci_function) const {
  auto& d = *alloc_->device;
  if (auto why = dead()) d.refuse("dma of a dead buffer ({})", *why);
  if (length_ == 0) d.refuse("dma of an empty buffer");
  if (alloc_->io) d.refuse("dma of an io device's memory, which the host reaches only through its library");
  if (!alloc_->region) d.refuse("dma of the caller's memory (of_host), which rig did not allocate and cannot describe");
  d.check_live();
  {
    std::lock_guard g(alloc_->lock);
    if (alloc_->exclusive) d.refuse("dma of memory a claim holds exclusive");
    alloc_->outside = true;
    alloc_->no_cache = true;
  }
  std::lock_guard g(d.calls);
  try {
    return d.driver->dma(*alloc_->region, pci_function);
  } catch (const edge::Fault& e) {
    return std::unexpected(fmt::format("{}: {}", d.name, e.what()));
  }
}

std::intptr_t Buffer::handle() const {
  auto& d = *alloc_->device;
  if (auto why = dead()) d.refuse("handle of a dead buffer ({})", *why);
  if (d.index == host().index()) d.refuse("handle of host memory, which no driver object names");
  return alloc_->handle;
}

bool Buffer::aligned(std::ptrdiff_t at, std::size_t n) const {
  auto& d = *alloc_->device;
  if (auto why = dead()) d.refuse("aligned on a dead buffer ({})", *why);
  if (!std::has_single_bit(n)) d.refuse("aligned to {}, not a positive power of two", n);
  if (alloc_->handle_only) {
    if (n > d.facts.alignment) d.refuse("aligned to {} of handle-only memory, past its alignment of {}", n, d.facts.alignment);
    return (std::uint64_t(first_) + std::uint64_t(at)) % n == 0;
  }
  return (address() + std::uint64_t(at)) % n == 0;
}

bool reaches(const Device& d, const Device& other) {
  if (d == other) return true;
  auto& a = d.state();
  auto& b = other.state();
  if (!a.computes) return false;
  if (a.runs_on_host) return b.facts.host_addresses;
  if (b.runs_on_host) return a.facts.maps_host;
  return false;
}

// --- claims ---------------------------------------------------------------------------

namespace claim {

void read(const Buffer& b) {
  Allocation& a = *b.allocation();
  if (auto why = b.dead()) a.device->refuse("a claim on a dead buffer ({})", *why);
  std::lock_guard g(a.lock);
  if (a.exclusive) a.device->refuse("a read claim on memory a claim holds exclusive");
  if (a.outside) return;
  ++a.readers;
  if (b.borrowed()) ++b.borrowed()->holds;
}

void release(const Buffer& b) {
  // A consume of memory others still read moved their claims to the new memory.
  Allocation* a = b.allocation().get();
  std::shared_ptr<Allocation> next;
  for (;;) {
    std::lock_guard g(a->lock);
    if (!a->successor) {
      if (a->outside && a->readers == 0) return;
      if (a->readers == 0) a->device->refuse("a release of a read claim never taken");
      --a->readers;
      break;
    }
    next = a->successor;
    a = next.get();
  }
  std::lock_guard g(b.allocation()->lock);
  if (b.borrowed() && b.borrowed()->holds > 0) --b.borrowed()->holds;
}

bool Claims::exclusive(const Buffer& b) const {
  std::lock_guard g(b.allocation()->lock);
  return b.allocation()->exclusive == id();
}

bool Claims::reads(const Buffer& b) const {
  return std::any_of(read_.begin(), read_.end(), [&](const Buffer& r) { return r.allocation() == b.allocation(); });
}

Buffer Claims::consume(std::string_view why, const Buffer& b) {
  Allocation& a = *b.allocation();
  if (auto reason = b.dead()) a.device->refuse("consume of a dead buffer ({})", *reason);
  const bool whole = exclusive(b);
  if (!whole && !reads(b)) a.device->refuse("consume of memory these claims do not hold");
  auto fresh = std::make_shared<Allocation>();
  {
    std::lock_guard g(a.lock);
    fresh->device = a.device;
    std::swap(fresh->region, a.region);
    fresh->region_bytes = a.region_bytes;
    fresh->address = a.address;
    fresh->host = a.host;
    fresh->handle = a.handle;
    fresh->bytes = a.bytes;
    fresh->memory = a.memory;
    // Memory others may still read admits only Read from here on.
    fresh->access = whole ? a.access : Access::Read;
    fresh->owner = a.owner;
    fresh->host_paged = a.host_paged;
    fresh->no_cache = a.no_cache;
    fresh->handle_only = a.handle_only;
    fresh->last_write = a.last_write;
    fresh->uses = a.uses;
    if (!whole) {
      // The read claims, these claims' and others', move to the new memory, and the old
      // buffers keep it alive while a claim through them may still read it.
      fresh->readers = std::exchange(a.readers, 0);
      a.successor = fresh;
    }
    a.dead = std::string(why);
  }
  return Buffer(std::move(fresh), nullptr, b.offset(), b.length());
}

namespace {

// Holds every memory of `group` exclusive for `claims` if no claim holds any of them and
// none is outside the claims; false, taking nothing, otherwise. The memories' locks are
// taken in one order, so two such calls never wait on each other in a circle.
bool hold_exclusive(const std::vector<Buffer>& group, const void* claims) {
  std::vector<Allocation*> memories;
  for (const auto& b : group) memories.push_back(b.allocation().get());
  std::sort(memories.begin(), memories.end());
  memories.erase(std::unique(memories.begin(), memories.end()), memories.end());
  std::vector<std::unique_lock<detail::SpinLock>> locks;
  for (auto* a : memories) locks.emplace_back(a->lock);
  for (auto* a : memories)
    if (a->outside || a->exclusive || a->readers || a->dead) return false;
  for (auto* a : memories) a->exclusive = claims;
  return true;
}

}  // namespace

void take(std::span<const Buffer> read, std::span<const std::vector<Buffer>> donate, Claims& claims) {
  // Check everything first, so that a refusal takes nothing.
  for (const auto& group : donate)
    for (const auto& b : group)
      if (auto why = b.dead()) b.allocation()->device->refuse("a donation of a dead buffer ({})", *why);
  for (const auto& b : read)
    if (auto why = b.dead()) b.allocation()->device->refuse("a claim on a dead buffer ({})", *why);
  for (std::size_t i = 0; i < donate.size(); ++i)
    for (const auto& b : donate[i]) {
      for (std::size_t j = 0; j < i; ++j)
        for (const auto& other : donate[j])
          if (other.allocation() == b.allocation())
            b.allocation()->device->refuse("a donation names one memory in two groups ({} and {})", j, i);
      for (const auto& r : read)
        if (r.allocation() == b.allocation()) b.allocation()->device->refuse("a memory both read and donated");
    }
  // Each group whole, or else under read claims only.
  auto read_claim = [&](const Buffer& b) {
    claim::read(b);
    claims.read_.push_back(b);
  };
  try {
    for (const auto& group : donate) {
      if (hold_exclusive(group, claims.id())) {
        claims.exclusive_.push_back(&group);
        continue;
      }
      for (const auto& b : group) read_claim(b);
    }
    for (const auto& b : read) read_claim(b);
  } catch (...) {
    give_back(claims);
    throw;
  }
}

void give_back(Claims& claims) noexcept {
  for (const auto& b : claims.read_) {
    try {
      release(b);
    } catch (...) {
    }
  }
  claims.read_.clear();
  for (const auto* group : claims.exclusive_)
    for (const auto& b : *group) {
      std::lock_guard g(b.allocation()->lock);
      if (b.allocation()->exclusive == claims.id()) b.allocation()->exclusive = nullptr;
    }
  claims.exclusive_.clear();
}

}  // namespace claim

// --- Device's memory ----------------------------------------------------------------------

void Device::set_budget(std::size_t bytes) {
  auto& d = *state_;
  d.budget.store(bytes);
  if (d.used.load() > bytes) {
    detail::release_idle_staging(d);
    detail::drain_every_device();
    std::size_t over = d.used.load() - bytes;
    std::size_t cached;
    {
      std::lock_guard g(d.cache_mutex);
      cached = d.cached_bytes;
    }
    d.free_cache(cached > over ? cached - over : 0);
  }
}

void Device::free_cache() {
  detail::release_idle_staging(*state_);  // staging in its memory, kept for reuse too
  detail::drain_every_device();  // what is due goes to the cache first
  state_->free_cache();
}

Hold Hold::make(std::function<void()> release) {
  auto s = std::make_shared<detail::HoldState>();
  s->release = std::move(release);
  return Hold(std::move(s));
}

}  // namespace rig
