// Devices: the registry of open devices and their timeline words, opening, the timeline
// (commit, wait), loss, and deferred work.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <thread>

#include <pthread.h>

#include "local.hpp"
#include "state.hpp"

namespace rig {

Lost::Lost(std::string device, std::string why)
    : std::runtime_error(fmt::format("{} lost: {}", device, why)),
      device_(std::move(device)),
      why_(std::move(why)) {}

OutOfMemory::OutOfMemory(std::string device, std::size_t bytes, std::string why)
    : std::runtime_error(fmt::format("{}: out of memory for {} bytes: {}", device, bytes, why)),
      device_(std::move(device)),
      bytes_(bytes) {}

Interrupted::Interrupted(std::string device, std::uint64_t value)
    : std::runtime_error(fmt::format("{}: the wait for value {} was interrupted", device, value)),
      device_(std::move(device)),
      value_(value) {}

namespace detail {
namespace {

// Counts the calls of interrupt: a wait that sees it change while it sleeps raises
// Interrupted. Lock-free, so interrupt is async-signal-safe.
std::atomic<std::uint64_t> interrupts{0};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

// Device indices are timeline word indices. Index 0 is the host device's. An index is
// given to one device for the life of the process, so that a Point always names the
// device whose value it is.
struct Registry {
  std::mutex mutex;  // opens, one at a time
  std::array<std::atomic<DeviceState*>, RIG_WORDS> table{};
  std::vector<std::shared_ptr<DeviceState>> devices;  // every device opened, by index
  std::uint32_t next = 1;
  std::string failure;  // rig::fail's reason
};

void forked();

Registry& registry() {
  static Registry* r = [] {
    auto* made = new Registry;  // never destroyed: devices outlive static destruction
    pthread_atfork(nullptr, nullptr, forked);
    return made;
  }();
  return *r;
}

// In a child of fork, every device is lost for good: its driver's threads and queues are
// the parent's. Nothing is stopped or freed, and no lock is taken (the child has one thread).
void forked() {
  auto& r = registry();
  for (auto& slot : r.table) {
    DeviceState* d = slot.load();
    if (!d || d->is_lost.load()) continue;
    new (&d->loss_mutex) std::mutex();
    d->why = "forked";
    d->reached_at_loss = d->word();
    d->is_lost.store(true);
  }
}

constexpr auto kSleepSlice = std::chrono::milliseconds(50);

void validate(const DeviceState& d) {
  const auto& f = d.facts;
  if (f.copy_engine) {
    int i = *f.copy_engine;
    if (i < 0 || std::size_t(i) >= f.queues.size())
      d.refuse("facts name copy engine {}, but the device has {} queues", i, f.queues.size());
    const auto& runs = f.queues[std::size_t(i)].runs;
    if (std::find(runs.begin(), runs.end(), Kind::Copy) == runs.end())
      d.refuse("facts name queue {} ({}) as copy engine, but it runs no Copy", i,
               f.queues[std::size_t(i)].name);
  }
  if (f.hang_ms && *f.hang_ms < 1) d.refuse("facts give hang_ms {}, below 1", *f.hang_ms);
  if (f.cache_bytes && *f.cache_bytes < 1) d.refuse("facts give cache_bytes 0");
  if (!std::has_single_bit(f.alignment))
    d.refuse("facts give alignment {}, not a power of two", f.alignment);
  if (!f.edge) d.refuse("facts give a null edge");
  if (!*static_cast<const rig_driver* const*>(f.edge))
    d.refuse("the edge's first member is null, not a driver table");
  for (const auto& q : f.queues)
    for (Kind k : q.runs)
      if (std::uint32_t(k) < 1 || std::uint32_t(k) > 4)
        d.refuse("queue {} runs an unknown kind {}", q.name, std::uint32_t(k));
  for (const auto& [counter, n] : f.counters)
    if (n < 1) d.refuse("counter {} has {} values, below 1", counter, n);
}

// Where each kind goes when a part names no queue (spec: Rig_edge.queue).
void choose_default_queues(DeviceState& d) {
  const auto& qs = d.facts.queues;
  auto runs = [&](std::size_t i, Kind k) {
    return std::find(qs[i].runs.begin(), qs[i].runs.end(), k) != qs[i].runs.end();
  };
  for (std::size_t i = 0; i < qs.size(); ++i) {
    for (Kind k : {Kind::Fill, Kind::Launch})
      if (d.default_queue[int(k)] < 0 && runs(i, k)) d.default_queue[int(k)] = int(i);
  }
  for (std::size_t i = 0; i < qs.size() && d.default_queue[int(Kind::Words)] < 0; ++i)
    if (runs(i, Kind::Words) && runs(i, Kind::Launch)) d.default_queue[int(Kind::Words)] = int(i);
  for (std::size_t i = 0; i < qs.size() && d.default_queue[int(Kind::Words)] < 0; ++i)
    if (runs(i, Kind::Words)) d.default_queue[int(Kind::Words)] = int(i);
  if (d.facts.copy_engine) d.default_queue[int(Kind::Copy)] = *d.facts.copy_engine;
}

using Make = std::function<Result<std::unique_ptr<edge::Driver>>(volatile std::uint64_t*)>;

// Opens a device at `index` (the registry's lock held). Error if make fails or the facts
// fault; invalid_argument for facts that break the contract.
Result<std::shared_ptr<DeviceState>> open_at(std::uint16_t index, std::string name, const Make& make) {
  volatile std::uint64_t* word = &rig_words[index];
  auto made = make(word);
  if (!made) return std::unexpected(fmt::format("{}: {}", name, made.error()));
  auto d = std::make_shared<DeviceState>();
  d->index = index;
  d->name = std::move(name);
  d->driver = std::move(*made);
  try {
    d->facts = d->driver->facts();
  } catch (const edge::Fault& e) {
    d->driver->stop(e.what());
    return std::unexpected(fmt::format("{}: fault while reading its facts: {}", d->name, e.what()));
  }
  try {
    validate(*d);
  } catch (...) {
    d->driver->stop("its facts break the driver contract");
    throw;
  }
  d->edge = d->facts.edge;
  d->c = *static_cast<const rig_driver* const*>(d->edge);
  d->own_word = d->facts.word != word;
  d->computes = !d->facts.queues.empty();
  d->budget = d->facts.budget;
  choose_default_queues(*d);
  std::uint64_t base = d->own_word ? d->driver->signaled() : d->word();
  if (d->own_word) __atomic_store_n(&rig_words[index], base, __ATOMIC_RELEASE);
  d->submitted = base;
  d->committed = base;
  return d;
}

using Build = std::function<Result<std::shared_ptr<DeviceState>>(std::uint16_t index)>;

// Opens `name` unless a live device has it, which it returns: `build` makes the device at
// the index given, the host's fixed 0 or the next free one.
Result<Device> open_named(const std::string& name, const Build& build, bool fixed_zero = false) {
  auto& r = registry();
  std::lock_guard g(r.mutex);
  if (!r.failure.empty() && !fixed_zero) return std::unexpected(fmt::format("{}: rig failed: {}", name, r.failure));
  for (auto& d : r.devices)
    if (d && d->name == name && !d->is_lost.load()) return Device(d);
  std::uint16_t index = 0;
  if (!fixed_zero) {
    if (r.next >= RIG_WORDS)
      throw std::invalid_argument(fmt::format("{}: no device index left ({} opened)", name, RIG_WORDS));
    index = std::uint16_t(r.next);
  }
  auto opened = build(index);
  if (!opened) return std::unexpected(opened.error());
  if (!fixed_zero) ++r.next;
  if (r.devices.size() <= index) r.devices.resize(index + 1u);
  r.devices[index] = *opened;
  r.table[index].store(opened->get(), std::memory_order_release);
  return Device(*opened);
}

Result<Device> open_named(std::string name, const Make& make, bool fixed_zero = false) {
  return open_named(name, [&](std::uint16_t index) { return open_at(index, name, make); }, fixed_zero);
}

}  // namespace

DeviceState* device_at(std::uint16_t index) {
  return registry().table[index].load(std::memory_order_acquire);
}

std::vector<std::shared_ptr<DeviceState>> all_devices() {
  auto& r = registry();
  std::lock_guard g(r.mutex);
  std::vector<std::shared_ptr<DeviceState>> out;
  for (auto& d : r.devices)
    if (d) out.push_back(d);
  return out;
}

std::shared_ptr<DeviceState> shared_device_at(std::uint16_t index) {
  auto& r = registry();
  std::lock_guard g(r.mutex);
  return index < r.devices.size() ? r.devices[index] : nullptr;
}

bool point_reached(std::uint64_t bits) {
  std::uint64_t v = value_of(bits);
  if (v == 0) return true;
  DeviceState* d = device_at(index_of(bits));
  if (!d) throw std::invalid_argument(fmt::format("no device has index {}", index_of(bits)));
  return d->reached(v);
}

namespace {

// Error where an opener was made with other headers than this library's (edge::Opener).
std::optional<std::string> mismatched(const std::string& name, std::string_view rig_version) {
  if (rig_version == RIG_VERSION) return std::nullopt;
  return fmt::format("{}: its driver was built against rig {}, and this library is rig {}: a driver pins "
                     "the exact rig version it is built against; rebuild it with rig {}'s headers",
                     name, rig_version, RIG_VERSION, RIG_VERSION);
}

}  // namespace

Result<Device> open_driver(std::string name, std::string_view rig_version, const Make& make) {
  if (auto why = mismatched(name, rig_version)) return std::unexpected(*why);
  return open_named(std::move(name), make);
}

Result<Device> open_io_driver(std::string name, std::string_view rig_version,
                              const std::function<Result<std::unique_ptr<edge::Io>>()>& make) {
  if (auto why = mismatched(name, rig_version)) return std::unexpected(*why);
  return open_named(name, [&](std::uint16_t index) -> Result<std::shared_ptr<DeviceState>> {
    auto made = make();
    if (!made) return std::unexpected(fmt::format("{}: {}", name, made.error()));
    auto d = std::make_shared<DeviceState>();
    d->index = index;
    d->name = name;
    d->io = std::move(*made);
    d->budget = SIZE_MAX;
    d->reached_at_loss = d->word();
    d->submitted = d->committed = d->word();
    return d;
  });
}

// --- the timeline -----------------------------------------------------------------------

std::uint64_t DeviceState::read_word() {
  if (!own_word) return word();
  std::uint64_t v;
  sleepers.fetch_add(1);
  if (is_lost.load()) {
    sleepers.fetch_sub(1);
    return word();
  }
  try {
    v = driver->signaled();
  } catch (const edge::Fault& e) {
    sleepers.fetch_sub(1);
    lose(e.what());
    return word();
  }
  sleepers.fetch_sub(1);
  std::uint64_t w = word();
  while (v > w && !__atomic_compare_exchange_n(&rig_words[index], &w, v, true, __ATOMIC_RELEASE,
                                               __ATOMIC_RELAXED)) {
  }
  return std::max(v, w);
}

bool DeviceState::reached(std::uint64_t v) {
  // The word first: a loss's stop may raise it to values never reached, but only after the
  // loss is marked, so a word read before a look that finds no loss shows real progress.
  // Once lost, the values reached before the loss count, and any other raises Lost.
  auto after_loss = [&] {
    if (v > reached_at_loss) throw_lost();
    return true;
  };
  const std::uint64_t w = word();
  if (is_lost.load(std::memory_order_acquire)) return after_loss();
  if (w >= v) return true;
  if (!own_word) return false;
  const std::uint64_t shown = read_word();
  if (is_lost.load(std::memory_order_acquire)) return after_loss();  // lost meanwhile
  return shown >= v;
}

void DeviceState::commit_through(std::uint64_t v) {
  if (committed.load(std::memory_order_acquire) >= v) return;
  turn.lock();
  if (committed.load() >= v) {
    turn.unlock();
    return;
  }
  if (is_lost.load()) {
    turn.unlock();
    throw_lost();
  }
  const char* failure = nullptr;
  if (c->commit(edge, v, &failure) == RIG_FAILED) {
    lose(failure ? failure : "commit failed", true);
    throw_lost();
  }
  std::uint64_t c0 = committed.load();
  while (c0 < v && !committed.compare_exchange_weak(c0, v)) {
  }
  turn.unlock();
}

void DeviceState::wait(std::uint64_t v) {
  const std::uint64_t interrupts_at_start = interrupts.load(std::memory_order_relaxed);
  std::uint64_t s = submitted.load(std::memory_order_acquire);
  // The word may show a value before its submit has noted it as submitted.
  if (v > s && v > word()) refuse("wait for value {}, but only {} were submitted", v, s);
  if (reached(v)) return;
  commit_through(v);
  // Tens of microseconds (4000 pauses): most hand-offs end here. Not where the driver's sleep
  // is what moves the word: spinning would only hold back the thread that moves it.
  for (int i = 0; i < 4000 && !facts.sleep_polls; ++i) {
    if (word() >= v && reached(v)) return;  // reached: a lost device's word may show dropped values
    cpu_relax();
  }
  using clock = std::chrono::steady_clock;
  auto progress_at = clock::now();
  std::uint64_t seen = word();
  // Each round sleeps at most a slice (50 ms), so an interrupt is seen well within 200 ms.
  while (true) {
    if (reached(v)) return;
    std::uint64_t w = read_word();
    if (w >= v && reached(v)) return;
    if (interrupts.load(std::memory_order_relaxed) != interrupts_at_start) throw Interrupted(name, v);
    if (w != seen) {
      seen = w;
      progress_at = clock::now();
    } else if (facts.hang_ms &&
               clock::now() - progress_at > std::chrono::milliseconds(*facts.hang_ms)) {
      lose(fmt::format("no progress for {} ms", *facts.hang_ms));
      continue;
    }
    sleepers.fetch_add(1);
    if (!is_lost.load()) {
      try {
        driver->sleep(v, kSleepSlice);
      } catch (const edge::Fault& e) {
        sleepers.fetch_sub(1);
        lose(e.what());
        continue;
      }
    }
    sleepers.fetch_sub(1);
  }
}

// --- loss ---------------------------------------------------------------------------------

void DeviceState::throw_lost() const {
  std::lock_guard g(loss_mutex);
  throw Lost(name, why);
}

void DeviceState::lose(std::string reason, bool holding_turn) {
  {
    std::lock_guard g(loss_mutex);
    if (is_lost.load()) {
      if (holding_turn) turn.unlock();
      return;
    }
    why = std::move(reason);
    reached_at_loss = word();
    is_lost.store(true, std::memory_order_release);
  }
  // Before stop, which may raise the word to show dropped values that a waiting queue would
  // then pass.
  spread_loss();
  // Stop once no call of the driver is in flight: the turn covers the C functions, calls
  // the C++ ones, and sleepers drain within a sleep slice.
  if (!holding_turn) turn.lock();
  {
    std::lock_guard g(calls);
    while (sleepers.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::string reason_copy;
    {
      std::lock_guard l(loss_mutex);
      reason_copy = why;
    }
    if (driver)
      driver->stop(reason_copy);
    else
      io->stop(reason_copy);
    {
      std::lock_guard l(loss_mutex);
      stopped = true;
    }
    turn.unlock();
  }
  // Outside the calls lock, which returning memory takes: its staging memory, its cache,
  // and what waited for values its stop made reached.
  forget_staging(*this);
  if (driver) {
    free_cache();
    drain();
  }
}

void DeviceState::note_queue_waits(std::span<const rig_wait> waits, std::uint64_t own) {
  std::lock_guard g(queue_waits_mutex);
  if (queue_waits.size() > 64) {  // forget the waits of work that completed
    std::uint64_t w = word();
    std::erase_if(queue_waits, [w](const auto& q) { return q[2] <= w; });
  }
  for (const auto& x : waits) queue_waits.push_back({x.device, x.value, own});
}

// A queue that waits for a value this device never reached waits forever: its device is
// lost too, with reason "NAME lost".
void DeviceState::spread_loss() {
  for (auto& other : all_devices()) {
    if (other.get() == this || other->is_lost.load()) continue;
    bool stuck = false;
    {
      std::lock_guard g(other->queue_waits_mutex);
      std::uint64_t w = other->word();
      for (const auto& q : other->queue_waits)
        if (q[0] == index && q[1] > reached_at_loss && q[2] > w) stuck = true;
    }
    if (stuck) other->lose(fmt::format("{} lost", name));
  }
}

DeviceState::~DeviceState() = default;

// --- deferred work --------------------------------------------------------------------

namespace {
// True iff what waits for point p may go ahead: p is reached, or p is a lost device's and
// that device has stopped with its word at its last submitted value.
bool due(std::uint64_t p) {
  try {
    return point_reached(p);
  } catch (const Lost&) {
    DeviceState* d = device_at(index_of(p));
    std::lock_guard g(d->loss_mutex);
    return d->may_free();
  }
}
}  // namespace

void DeviceState::defer(std::vector<std::uint64_t> points, std::function<void()> act) {
  bool now = true;
  for (auto p : points)
    if (!due(p)) now = false;
  if (now) {
    act();
    return;
  }
  std::lock_guard g(deferred_mutex);
  deferred.push_back(Deferred{std::move(points), std::move(act)});
}

void DeviceState::drain() {
  std::vector<Deferred> ready;
  {
    std::lock_guard g(deferred_mutex);
    auto all_due = [](const Deferred& x) { return std::all_of(x.points.begin(), x.points.end(), due); };
    auto it = std::stable_partition(deferred.begin(), deferred.end(),
                                    [&](const Deferred& x) { return !all_due(x); });
    std::move(it, deferred.end(), std::back_inserter(ready));
    deferred.erase(it, deferred.end());
  }
  for (auto& x : ready) x.act();
}

}  // namespace detail

// --- Device -------------------------------------------------------------------------------

std::string_view Device::name() const { return state_->name; }
std::string_view Device::arch() const { return state_->facts.arch; }
bool Device::computes() const { return state_->computes; }
bool Device::runs_on_host() const { return state_->runs_on_host; }
std::span<const Queue> Device::queues() const { return state_->facts.queues; }
std::optional<std::size_t> Device::cache_bytes() const { return state_->facts.cache_bytes; }
const edge::Facts& Device::facts() const { return state_->facts; }
std::uint16_t Device::index() const { return state_->index; }
const void* Device::capability_of(const void* key) const {
  const auto& c = state_->facts.capability;
  return c.key == key ? c.value.get() : nullptr;
}
std::size_t Device::budget() const { return state_->budget.load(); }
std::size_t Device::used() const { return state_->used.load(); }
std::uint64_t Device::submitted() const { return state_->submitted.load(); }

std::uint64_t Device::signaled() {
  auto& d = *state_;
  d.check_live();
  d.commit_through(d.submitted.load());
  return d.read_word();
}

void Device::wait(std::uint64_t v) { state_->wait(v); }

std::optional<std::string> Device::lost() const {
  std::lock_guard g(state_->loss_mutex);
  if (!state_->is_lost.load()) return std::nullopt;
  return state_->why;
}

void Device::close() {
  auto& d = *state_;
  if (d.is_lost.load()) return;
  d.wait(d.submitted.load());
  d.drain();
  d.lose("closed");
}

std::span<const std::string_view> drivers() {
  static constexpr std::string_view built[] = {
      "host", "memory",
#if RIG_DRIVER_AMD
      "amd",
#endif
#if RIG_DRIVER_NV
      "nv",
#endif
#if RIG_DRIVER_CUDA
      "cuda",
#endif
#if RIG_DRIVER_DISK
      "disk",
#endif
#if RIG_DRIVER_REMOTE
      "remote",
#endif
  };
  return built;
}

std::string_view version() { return RIG_VERSION; }

void interrupt() noexcept { detail::interrupts.fetch_add(1, std::memory_order_relaxed); }

void fail(std::string_view why) {
  {
    auto& r = detail::registry();
    std::lock_guard g(r.mutex);
    if (r.failure.empty()) r.failure = std::string(why);
  }
  for (auto& d : detail::all_devices())
    if (d->index != 0 && !d->is_lost.load()) d->lose(std::string(why));
}

std::optional<std::string> failure() {
  auto& r = detail::registry();
  std::lock_guard g(r.mutex);
  if (r.failure.empty()) return std::nullopt;
  return r.failure;
}

std::vector<Device> devices() {
  auto& r = detail::registry();
  std::lock_guard g(r.mutex);
  std::vector<Device> out;
  for (auto& d : r.devices)
    if (d && !d->is_lost.load()) out.emplace_back(d);
  return out;
}

Result<Device> detail::open_local(const edge::Opener<>& opener, bool host_index) {
  auto opened = open_named(opener.name, opener.make, host_index);
  if (opened) opened->state().runs_on_host = true;
  return opened;
}

// --- Point --------------------------------------------------------------------------------

Point::Point(const Device& d, std::uint64_t value) : bits_(detail::pack(d.state().index, value)) {
  if (value > kValueMask) d.state().refuse("value {} does not fit 48 bits", value);
}

Device Point::device() const {
  auto d = detail::shared_device_at(index());
  if (!d) {
    if (index() == 0) return host();
    throw std::invalid_argument(fmt::format("no device has index {}", index()));
  }
  return Device(d);
}

bool Point::reached() const {
  if (value() == 0) return true;
  auto* d = detail::device_at(index());
  if (!d) throw std::invalid_argument(fmt::format("no device has index {}", index()));
  if (d->reached(value())) return true;
  d->commit_through(value());
  return d->read_word() >= value();
}

void Point::wait() const {
  if (value() == 0) return;
  auto* d = detail::device_at(index());
  if (!d) throw std::invalid_argument(fmt::format("no device has index {}", index()));
  d->wait(value());
}

}  // namespace rig
