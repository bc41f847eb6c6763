// client.cpp — a remote device's driver: the contract over the wire to a `rig serve` agent,
// with the device's timeline word kept in this process (rig/remote.hpp).
#include <rig/remote.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <stdexcept>

#include <sys/stat.h>

#include "../host/futex.hpp"
#include "../host/host_memory.hpp"
#include "ucx.hpp"
#include "wire.hpp"

namespace rig::remote {

Result<std::string> token(std::string_view given) {
  if (!given.empty()) return std::string(given);
  if (const char* t = std::getenv("RIG_TOKEN"); t && *t) return std::string(t);
  const char* file = std::getenv("RIG_TOKEN_FILE");
  if (!file || !*file) return std::unexpected(std::string("no token: set RIG_TOKEN, or RIG_TOKEN_FILE to a file "
                                                          "only its owner may read"));
  struct stat st{};
  if (::stat(file, &st) != 0) return std::unexpected(fmt::format("the token file {} does not exist", file));
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return std::unexpected(fmt::format("the token file {} may be read by others (mode {:o}); chmod 600 it", file,
                                       st.st_mode & 0777));
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  if (line.empty()) return std::unexpected(fmt::format("the token file {} is empty", file));
  return line;
}

namespace {

// How long a client waits for the agent's welcome and for each reply.
constexpr auto kWelcomeLimit = std::chrono::seconds(5);
constexpr auto kReplyLimit = std::chrono::seconds(30);
constexpr auto kStopLimit = std::chrono::seconds(2);
// Readings of the agent's clock at connection, of which the shortest round trip's is kept.
constexpr int kClockReadings = 8;
// How long a sleep spins on the word, progressing the connection, before it sleeps; and
// every how many of its rounds it yields the CPU. Each round is a system call (UCX's poll of
// its sockets, 0.5–1 µs here), so a thread that shares the waiter's CPU runs within a few
// µs. Yielding each round put a scheduler pass into each, later by half a round on average
// to see the answer: round trips of a launch on a remote host device read 1.38–1.83× their
// floor (median 1.51×) against 1.30–1.90× (median 1.44×) yielding every fourth, nineteen
// pairs alternating on two cores, lower in fourteen.
constexpr std::uint64_t kSpinNs = 50'000;
constexpr std::uint32_t kSpinGiveWay = 4;
// Scratch of a part that fitted last time: this tag, then the hash of what room judges.
constexpr std::uint64_t kFittedTag = 0x31544d5247495200ull;  // "\0RIGRMT1"

class RemoteDevice;

// One connection to an agent, shared by the devices opened through it.
class Connection {
 public:
  Connection(std::string address, ucx::Address where) : address_(std::move(address)), where_(std::move(where)) {}

  ~Connection() {
    if (worker_ && ep_) worker_->close(ep_);
    worker_.reset();
  }

  const std::string& address() const { return address_; }

  // Connects and proves the token; Error as rig/remote.hpp says.
  Result<std::vector<std::string>> begin(const std::string& token) {
    try {
      worker_ = std::make_unique<ucx::Worker>(ucx::Handlers{
          [this](ucp_ep_h, std::span<const std::byte> m) { on_message(m); },
          [this](ucp_ep_h, ucs_status_t st) {
            lose(fmt::format("connection to {} lost: {}", address_, ucx::status_text(st)));
          },
          [](ucp_ep_h) {}, {},
          [this](ucp_ep_h, std::span<const std::byte> header, ucx::Payload& bytes) { on_data(header, bytes); }});
    } catch (const std::exception& e) {
      return std::unexpected(fmt::format("{}: {}", address_, e.what()));
    }
    auto ep = worker_->connect(where_);
    if (!ep) return std::unexpected(ep.error());
    ep_ = *ep;
    const std::uint64_t sent_at = rig_now_ns();
    send(wire::Hello{wire::kVersion, token});
    std::unique_lock g(mutex_);
    if (!cv_.wait_for(g, kWelcomeLimit, [&] { return welcome_ || !lost_.empty(); }))
      return std::unexpected(fmt::format("{} did not answer within {} s", address_, kWelcomeLimit.count()));
    if (!lost_.empty()) return std::unexpected(lost_);
    if (!welcome_->admitted) return std::unexpected(fmt::format("{} refused the token: {}", address_, welcome_->why));
    // The agent read its clock about halfway between the hello's sending and the welcome's
    // arrival: the offset of its clock from this one, within half that round trip.
    clock_offset_ = std::int64_t(welcome_->now) - std::int64_t(sent_at + (welcome_at_ - sent_at) / 2);
    g.unlock();
    // The first round trip is slow (the connection's set-up): the shortest of a few more
    // readings bounds the offset's error better.
    std::uint64_t best = welcome_at_ - sent_at;
    for (int i = 0; i < kClockReadings; ++i) {
      const std::uint64_t asked = rig_now_ns();
      wire::Message answer;
      try {
        answer = request(wire::Clock{});
      } catch (const edge::Fault& e) {
        return std::unexpected(std::string(e.what()));
      }
      const std::uint64_t answered = rig_now_ns();
      auto* r = std::get_if<wire::Reply>(&answer);
      if (!r || answered - asked >= best) continue;
      best = answered - asked;
      clock_offset_ = std::int64_t(r->a) - std::int64_t(asked + best / 2);
    }
    return welcome_->devices;
  }

  template <class T>
  void send(const T& m) {
    thread_local std::vector<std::byte> out;
    wire::encode(m, out);
    worker_->send(ep_, out);
  }

  // Sends d with its d.length bytes from `bytes` (registered by memh), not waiting: the
  // agent takes them before it hands d's value over, which it reports only after.
  void send_data(const wire::Data& d, const void* bytes, ucp_mem_h memh) {
    thread_local std::vector<std::byte> out;
    wire::encode(d, out);
    worker_->forget(worker_->send_data(ep_, out, bytes, std::size_t(d.length), memh));
  }

  // Sends a request and waits for its answer (Opened or Reply); Fault once the connection
  // is lost or the agent does not answer.
  template <class T>
  wire::Message request(T m) {
    std::unique_lock g(mutex_);
    if (!lost_.empty()) throw edge::Fault(lost_);
    m.request = ++requests_;
    waiting_[m.request];
    g.unlock();
    send(m);
    worker_->resume();  // the answer comes through it
    g.lock();
    const bool answered = cv_.wait_for(g, kReplyLimit, [&] { return waiting_[m.request].has_value() || !lost_.empty(); });
    auto answer = std::move(waiting_[m.request]);
    waiting_.erase(m.request);
    if (answer) return std::move(*answer);
    if (!answered)
      throw edge::Fault(fmt::format("{} did not answer a request within {} s", address_, kReplyLimit.count()));
    throw edge::Fault(lost_);
  }

  void attach(std::uint32_t id, RemoteDevice* d) {
    std::lock_guard g(mutex_);
    devices_[id] = d;
  }
  void detach(std::uint32_t id) {
    std::lock_guard g(mutex_);
    devices_.erase(id);
  }

  // Progresses the connection on this thread, unless another thread does now.
  void poll() { worker_->poll(); }
  // Ends the progress thread (at exit).
  void halt() {
    if (worker_) worker_->halt();
  }
  ucx::Worker& worker() { return *worker_; }

  std::mutex& mutex() { return mutex_; }
  std::condition_variable& cv() { return cv_; }
  // Why it was lost, or "" (mutex held).
  const std::string& lost() const { return lost_; }
  // The agent's clock minus this process's (rig_now_ns), as the welcome measured it.
  std::int64_t clock_offset() const { return clock_offset_; }

 private:
  void on_message(std::span<const std::byte> bytes);
  void on_data(std::span<const std::byte> header, ucx::Payload& bytes);
  void lose(std::string why);

  std::string address_;
  ucx::Address where_;
  std::unique_ptr<ucx::Worker> worker_;
  ucp_ep_h ep_ = nullptr;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::optional<wire::Welcome> welcome_;
  std::uint64_t welcome_at_ = 0;
  std::int64_t clock_offset_ = 0;
  std::string lost_;
  std::uint64_t requests_ = 0;
  std::map<std::uint64_t, std::optional<wire::Message>> waiting_;
  std::map<std::uint32_t, RemoteDevice*> devices_;
};

// The connections open now, by address and token.
std::mutex g_connections_mutex;
std::map<std::string, std::weak_ptr<Connection>> g_connections;

// At exit, the connections still open (their devices live on in rig to the end) stop their
// progress threads before UCX's library destructors run (those run after every handler
// std::atexit registers once the libraries are loaded).
void halt_connections() {
  std::unique_lock g(g_connections_mutex, std::try_to_lock);  // a connection being made: left be
  if (!g.owns_lock()) return;
  for (auto& [key, weak] : g_connections)
    if (auto c = weak.lock()) c->halt();
}

Result<std::shared_ptr<Connection>> connection(const std::string& address, const std::string& given_token,
                                               std::vector<std::string>* names = nullptr) {
  auto t = token(given_token);
  if (!t) return std::unexpected(t.error());
  auto where = ucx::parse_address(address);
  if (!where) return std::unexpected(where.error());
  std::lock_guard g(g_connections_mutex);
  const std::string key = address + '\n' + *t;
  if (auto c = g_connections[key].lock(); c && !names) {
    std::lock_guard cg(c->mutex());
    if (c->lost().empty()) return c;
  }
  static const bool halting_at_exit = std::atexit(halt_connections) == 0;
  (void)halting_at_exit;
  auto c = std::make_shared<Connection>(address, *where);
  auto served = c->begin(*t);
  if (!served) return std::unexpected(served.error());
  if (names) *names = *served;
  g_connections[key] = c;
  return c;
}

// A mapped window of host memory, or device memory, as this side knows it.
struct Region {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
  std::byte* host = nullptr;  // mapped host memory; null for device memory
  bool pinned = false;        // host memory of its own (Pinned), freed with it
  ucp_mem_h memh = nullptr;   // mapped host memory's registration, for its Data
};

struct EntryRecord {
  std::uint64_t entry = 0;  // the agent's number for it
};

struct RemoteEdge {
  const rig_driver* table;
  RemoteDevice* device;
};

class RemoteDevice final : public edge::Driver {
 public:
  RemoteDevice(std::shared_ptr<Connection> c, std::string name, wire::Opened o, volatile std::uint64_t* word);
  // The agent frees what the device still holds there, once its work is done.
  ~RemoteDevice() override {
    c_->detach(id_);
    c_->send(wire::Close{id_});
  }

  edge::Facts facts() override {
    edge::Facts f;
    f.arch = opened_.arch;
    f.budget = opened_.budget;
    for (const auto& q : opened_.queues) {
      Queue queue{q.name, {}};
      for (auto k : q.runs)
        if (k != RIG_KIND_FILL) queue.runs.push_back(Kind(k));
      f.queues.push_back(std::move(queue));
    }
    // A fill is a function of this process: submit calls it at the hand-over, on the first
    // queue, with no queue context (NULL), as a device without a queue of its own does.
    if (!f.queues.empty()) f.queues[0].runs.push_back(Kind::Fill);
    if (opened_.copy_engine >= 0) f.copy_engine = opened_.copy_engine;
    f.completion = edge::Completion::Host;
    f.sleep_polls = true;  // sleep progresses the connection that brings the word
    f.waits = {false, false};
    f.may_block = true;
    if (opened_.hang_ms > 0) f.hang_ms = opened_.hang_ms;
    f.maps_host = true;
    f.maps_host_cheaply = true;  // a MapHost and a UCX registration, which over tcp pins nothing
    f.host_addresses = false;
    f.alignment = std::size_t(opened_.alignment);
    if (opened_.cache_bytes) f.cache_bytes = std::size_t(opened_.cache_bytes);
    f.word = word_;
    f.edge = &edge_;
    return f;
  }

  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override {
    if (memory == Memory::Pinned) return pinned(bytes);
    // Mapped memory has no window to this host: it is the device's own memory.
    auto r = reply(c_->request(wire::Alloc{0, id_, std::uint32_t(Memory::Device), bytes}));
    if (r.status == wire::kNone) return std::nullopt;
    if (r.status != wire::kOk) throw std::invalid_argument(fmt::format("{}: {}", name_, r.why));
    std::lock_guard g(regions_mutex_);
    regions_[r.a] = Region{r.b, r.d, nullptr};
    by_address_[r.b] = r.a;
    return edge::Region{std::uintptr_t(r.a)};
  }

  // rig frees a region once the values that use it are reached, and the Data of a value are
  // taken before the value is: none is in flight on the registration it drops.
  void free(edge::Region region) override {
    std::byte* owned = nullptr;
    std::size_t owned_bytes = 0;
    ucp_mem_h memh = nullptr;
    {
      std::lock_guard g(regions_mutex_);
      if (auto it = regions_.find(region.id); it != regions_.end()) {
        if (it->second.pinned) owned = it->second.host, owned_bytes = it->second.bytes;
        memh = it->second.memh;
        by_address_.erase(it->second.address);
        regions_.erase(it);
      }
    }
    c_->send(wire::Free{id_, region.id});
    c_->worker().unregister(memh);
    release_pinned(owned, owned_bytes);
  }

  edge::Location locate(edge::Region region) override {
    std::lock_guard g(regions_mutex_);
    const Region& r = regions_.at(region.id);
    std::optional<std::uintptr_t> host;
    if (r.pinned) host = reinterpret_cast<std::uintptr_t>(r.host);
    return edge::Location{r.address, host, std::intptr_t(region.id)};
  }

  // Registers the memory with UCX, so that its bytes are sent and taken without a copy, and
  // has the agent make a window for it.
  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes) override {
    auto m = mapped(reinterpret_cast<std::byte*>(host), bytes, false);
    if (!m) return edge::NoRoom{};
    if (*m == 0) return edge::Never{};
    return edge::Region{std::uintptr_t(*m)};
  }

  Result<edge::Code> image(std::span<const std::byte> binary) override {
    auto r = reply(c_->request(wire::Image{0, id_, {binary.begin(), binary.end()}}));
    if (r.status != wire::kOk) return std::unexpected(r.why);
    return edge::Code{edge::Loaded{edge::ImageId(r.a)}};
  }

  edge::EntryAnswer entry(edge::ImageId image, std::string_view name) override {
    auto r = reply(c_->request(wire::Entry{0, id_, image, std::string(name)}));
    if (r.status == wire::kNoMemory) return edge::NoMemory{std::size_t(r.a)};
    if (r.status != wire::kOk) return edge::Absent{};
    std::lock_guard g(regions_mutex_);
    entries_.push_back({r.a});
    edge::Entry e;
    e.code = r.b;
    e.launch = &entries_.back();
    if (r.c) e.params = std::size_t(r.c - 1);
    if (r.d) e.threads = std::size_t(r.d - 1);
    return e;
  }

  void unload(edge::ImageId image) override { c_->send(wire::Unload{id_, image}); }

  edge::GrowAnswer grow() override {
    auto r = reply(c_->request(wire::Grow{0, id_}));
    if (r.status == wire::kNone) return edge::Short{std::size_t(r.a)};
    return edge::Grown{};
  }

  // Spins briefly, progressing the connection itself so that the Reached that shows v needs
  // no hand-off from the progress thread, then sleeps until the progress thread wakes it.
  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override {
    {
      ucx::Worker::Polling polling(c_->worker());
      host::Spin spin(kSpinNs, kSpinNs, kSpinGiveWay);
      while (shown() < v && !lost_flag_.load(std::memory_order_acquire) && spin.spin()) c_->poll();
    }
    if (shown() >= v && !lost_flag_.load(std::memory_order_acquire)) return;
    c_->worker().resume();  // it brings the word from here on
    std::unique_lock g(c_->mutex());
    c_->cv().wait_for(g, most, [&] { return shown() >= v || !lost_.empty(); });
    if (!lost_.empty()) throw edge::Fault(lost_);
  }

  // Waits (at most kStopLimit) until the word shows what the agent's device reached by its
  // stop, since rig returns a lost device's memory only once the word shows its last value.
  void stop(std::string_view why) override {
    std::uint64_t last = 0;
    try {
      last = reply(c_->request(wire::Stop{0, id_, std::string(why)})).a;
    } catch (const edge::Fault&) {
      return;  // the connection is gone: the word moves no more
    }
    c_->worker().resume();
    std::unique_lock g(c_->mutex());
    c_->cv().wait_for(g, kStopLimit, [&] { return frontier_ >= last || !c_->lost().empty(); });
  }

  // --- the C functions ---

  int room(rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
    std::uint64_t hash = 1469598103934665603ull;
    auto mix = [&](std::uint64_t x) { hash = (hash ^ x) * 1099511628211ull; };
    for (std::uint32_t i = 0; i < count; ++i) {
      const rig_part& p = parts[i];
      if (p.kind == RIG_KIND_FILL && p.work.fill.fn == nullptr)
        return rig_never(why, "part %u: a fill without a function", i);
      mix(p.queue), mix(p.kind), mix(p.after_count);
      if (p.kind == RIG_KIND_WORDS) mix(p.work.words.count);
      if (p.kind == RIG_KIND_COPY) mix(p.work.copy.count), mix(std::uint64_t(p.work.copy.fill));
      if (p.kind == RIG_KIND_LAUNCH) {
        const auto& l = p.work.launch;
        for (int d = 0; d < 3; ++d) mix(l.groups[d]), mix(l.threads[d]);
        mix(l.shared), mix(l.param_bytes), mix(l.ref_count), mix(reinterpret_cast<std::uintptr_t>(l.launch));
      }
    }
    mix(waits);
    bool fitted = count > 0;
    for (std::uint32_t i = 0; i < count && fitted; ++i) {
      std::uint64_t tag, h;
      std::memcpy(&tag, parts[i].scratch, 8);
      std::memcpy(&h, parts[i].scratch + 8, 8);
      fitted = tag == kFittedTag && h == hash;
    }
    if (fitted) return RIG_FITS;
    wire::Room m{0, id_, waits, {}};
    m.parts.resize(count);
    for (std::uint32_t i = 0; i < count; ++i) to_wire(parts[i], m.parts[i], nullptr);
    wire::Reply r;
    try {
      r = reply(c_->request(std::move(m)));
    } catch (const edge::Fault&) {
      return RIG_FITS;  // lost: submit says so
    }
    if (r.a == RIG_NEVER) return rig_never(why, "%s", r.why.c_str());
    if (r.a != RIG_FITS) return int(r.a);
    for (std::uint32_t i = 0; i < count; ++i) {
      std::memcpy(parts[i].scratch, &kFittedTag, 8);
      std::memcpy(parts[i].scratch + 8, &hash, 8);
    }
    return RIG_FITS;
  }

  int submit(const rig_part* parts, std::uint32_t count, std::uint64_t v, std::uint64_t* times,
             const char** failure) {
    if (const char* why = refusal()) {
      *failure = why;
      return RIG_FAILED;
    }
    // The fills, in the order of their parts, before the value leaves: a fill that fails
    // fails the submit, and the value never reaches the agent.
    for (std::uint32_t i = 0; i < count; ++i) {
      if (parts[i].kind != RIG_KIND_FILL) continue;
      const rig_fill& f = parts[i].work.fill;
      if (const int code = f.fn(nullptr, f.arg, v); code != 0) {
        std::snprintf(fill_failure_, sizeof fill_failure_, "fill returned %d at value %llu", code,
                      static_cast<unsigned long long>(v));
        *failure = fill_failure_;
        return RIG_FAILED;
      }
    }
    submit_.device = id_;
    submit_.value = v;
    submit_.parts.resize(count);
    submit_.uploads.clear();
    submit_.downloads.clear();
    for (std::uint32_t i = 0; i < count; ++i) to_wire(parts[i], submit_.parts[i], &submit_);
    submit_.timed = times != nullptr;
    if (times) {
      std::lock_guard g(c_->mutex());
      timed_[v] = times;
    }
    // The bytes the parts read, each range a Data ahead of the value (the agent hands the
    // value over once all are in their windows).
    for (const auto& u : submit_.uploads) {
      const std::byte* from = nullptr;
      ucp_mem_h memh = nullptr;
      {
        std::lock_guard g(regions_mutex_);
        const Region& r = regions_.at(u.region);
        from = r.host + u.offset;
        memh = r.memh;
      }
      c_->send_data(wire::Data{id_, v, u.region, u.offset, u.length}, from, memh);
    }
    c_->send(submit_);
    return RIG_COMMITTED;
  }

  // Takes a Data of the agent's, the bytes a value wrote to mapped host memory, into that
  // memory (the progress thread's, or a polling waiter's): a range outside what this side
  // mapped loses the device, the bytes dropped.
  void take(const wire::Data& d, ucx::Payload& bytes) {
    std::byte* into = nullptr;
    ucp_mem_h memh = nullptr;
    {
      std::lock_guard g(regions_mutex_);
      auto it = regions_.find(d.region);
      if (it != regions_.end() && it->second.host && d.offset <= it->second.bytes &&
          d.length <= it->second.bytes - d.offset && bytes.length() == d.length) {
        into = it->second.host + d.offset;
        memh = it->second.memh;
      }
    }
    std::string why;
    if (!into) {
      c_->worker().drop(bytes);
      why = fmt::format("{}: the agent sent value {}'s bytes for memory outside what it mapped", name_, d.value);
    } else if (const ucs_status_t st = c_->worker().take(bytes, into, memh); st != UCS_OK) {
      why = fmt::format("{}: taking value {}'s bytes failed: {}", name_, d.value, ucx::status_text(st));
    }
    if (why.empty()) return;
    std::lock_guard g(c_->mutex());
    lose(std::move(why));
    c_->cv().notify_all();
  }

  int commit(const char** failure) {
    if (const char* why = refusal()) {
      *failure = why;
      return RIG_FAILED;
    }
    return RIG_OK;
  }

  // --- what the connection tells it, on the progress thread (the connection's mutex held) ---

  // Applies a Reached once the word shows its `from`, and those it held back after it.
  void reached(wire::Reached r) {
    if (r.from < frontier_ || r.to <= r.from) return;  // a repeat, or backwards: never applied
    if (r.from > frontier_) {
      held_back_.emplace(r.from, std::move(r));
      return;
    }
    apply(r);
    for (auto it = held_back_.find(frontier_); it != held_back_.end(); it = held_back_.find(frontier_)) {
      apply(it->second);
      held_back_.erase(it);
    }
    c_->cv().notify_all();
  }

  void lose(std::string why) {
    if (lost_.empty()) lost_ = std::move(why);
    lost_flag_.store(true, std::memory_order_release);
  }

 private:
  std::uint64_t shown() const { return __atomic_load_n(word_, __ATOMIC_ACQUIRE); }

  const char* refusal() const {
    return lost_flag_.load(std::memory_order_acquire) ? lost_.c_str() : nullptr;
  }

  // Writes the timed values' times, shifted to this process's clock, then raises the word.
  // A value's start never comes before the end of the value written before it.
  void apply(const wire::Reached& r) {
    for (const auto& t : r.times) {
      auto it = timed_.find(t.value);
      if (it == timed_.end()) continue;
      if (t.start != 0 && t.end != 0) {
        const std::uint64_t start = std::max(last_end_, std::uint64_t(std::int64_t(t.start) - c_->clock_offset()));
        const std::uint64_t end = std::max(start, std::uint64_t(std::int64_t(t.end) - c_->clock_offset()));
        it->second[0] = start;
        it->second[1] = end;
        last_end_ = end;
      }
      timed_.erase(it);
    }
    frontier_ = r.to;
    if (shown() < r.to) __atomic_store_n(word_, r.to, __ATOMIC_RELEASE);
  }

  wire::Reply reply(wire::Message m) {
    if (auto* r = std::get_if<wire::Reply>(&m)) return std::move(*r);
    throw edge::Fault(fmt::format("{} answered a request with a {} message", c_->address(), "different"));
  }

  // `bytes` of host memory from `host`, registered and mapped on the agent: the region's id;
  // nullopt where there is no room for it now, 0 where the agent refused it (`refused` set
  // to its reason, where given).
  std::optional<std::uint64_t> mapped(std::byte* host, std::size_t bytes, bool pinned, std::string* refused = nullptr) {
    auto registration = c_->worker().register_memory(host, bytes);
    if (!registration) return std::nullopt;
    wire::Reply r;
    try {
      r = reply(c_->request(wire::MapHost{0, id_, bytes, reinterpret_cast<std::uint64_t>(host)}));
    } catch (...) {
      c_->worker().unregister(*registration);
      throw;
    }
    if (r.status != wire::kOk) {
      c_->worker().unregister(*registration);
      if (r.status == wire::kNone) return std::nullopt;
      if (refused) *refused = r.why;
      return 0;
    }
    std::lock_guard g(regions_mutex_);
    regions_[r.a] = Region{r.b, bytes, host, pinned, *registration};
    by_address_[r.b] = r.a;
    return r.a;
  }

  // Pinned memory: host memory of this process, mapped on the agent as map_host maps it.
  // Pages of its own where it is large enough, as the host device allocates them (a
  // memfd's, shared): copies from the agent's device into anonymous heap pages ran at
  // two-thirds of the rate into those (2.0 against 3.2 GB/s for 256 MiB over loopback tcp,
  // Linux 6.18), into memfd pages as fast as into rig's host memory. Smaller ones from the
  // heap, on a page.
  std::optional<edge::Region> pinned(std::size_t bytes) {
    const std::size_t rounded = (bytes + 4095) & ~std::size_t(4095);
    std::byte* host = nullptr;
    if (rounded >= kPinnedPagesLeast) {
      if (auto r = pages_.alloc(Memory::Mapped, rounded)) host = reinterpret_cast<std::byte*>(r->id);
    } else {
      host = static_cast<std::byte*>(std::aligned_alloc(4096, rounded));
    }
    if (!host) return std::nullopt;
    std::optional<std::uint64_t> id;
    std::string why;
    try {
      id = mapped(host, rounded, true, &why);
    } catch (...) {
      release_pinned(host, rounded);
      throw;
    }
    if (!id || *id == 0) release_pinned(host, rounded);
    if (!id) return std::nullopt;
    if (*id == 0) throw std::invalid_argument(fmt::format("{}: {}", name_, why));
    return edge::Region{std::uintptr_t(*id)};
  }

  // The region that holds `address`, with its id and the address's offset into it; null,
  // with id 0, where none does (regions_mutex_ held).
  const Region* holding(std::uint64_t address, std::uint64_t* id, std::uint64_t* offset) const {
    *id = *offset = 0;
    auto it = by_address_.upper_bound(address);
    if (it == by_address_.begin()) return nullptr;
    --it;
    const Region& r = regions_.at(it->second);
    if (address - r.address > r.bytes) return nullptr;
    *id = it->second;
    *offset = address - r.address;
    return &r;
  }

  // The span of a window that boxes from `base` bytes into it cover: [first, end).
  static std::pair<std::uint64_t, std::uint64_t> extent(const rig_copy& c, std::uint64_t base, bool src) {
    std::uint64_t first = ~0ull, end = 0;
    for (std::uint32_t i = 0; i < c.count; ++i) {
      const rig_box& b = c.boxes[i];
      if (b.rows == 0 || b.width == 0) continue;
      const std::uint64_t at = base + (src ? b.src_offset : b.dst_offset);
      first = std::min(first, at);
      end = std::max(end, at + (b.rows - 1) * (src ? b.src_pitch : b.dst_pitch) + b.width);
    }
    return first < end ? std::pair{first, end} : std::pair{std::uint64_t(0), std::uint64_t(0)};
  }

  // A part as it travels; for a submit, the ranges of mapped host memory it reads (which the
  // agent gets before the parts run) and writes (which it puts back before the word shows
  // the value) go with it.
  void to_wire(const rig_part& p, wire::Part& w, wire::Submit* s) {
    w.queue = p.queue;
    w.kind = p.kind;
    w.after.assign(p.after, p.after + p.after_count);
    w.words.clear();
    w.boxes.clear();
    w.params.clear();
    w.refs.clear();
    w.fill = -1;
    if (p.kind == RIG_KIND_WORDS) {
      w.words.assign(p.work.words.words, p.work.words.words + p.work.words.count);
    } else if (p.kind == RIG_KIND_COPY) {
      const rig_copy& c = p.work.copy;
      w.src = c.src;
      w.dst = c.dst;
      w.fill = c.fill;
      for (std::uint32_t i = 0; i < c.count; ++i) {
        const rig_box& b = c.boxes[i];
        w.boxes.push_back({b.src_offset, b.dst_offset, b.width, b.rows, b.src_pitch, b.dst_pitch});
      }
      // The ends by the regions that hold their addresses (a window's handle is the host
      // memory's, not the region's), with their offsets into those regions.
      std::lock_guard g(regions_mutex_);
      const Region* src = c.fill < 0 ? holding(c.src, &w.src_region, &w.src_offset) : nullptr;
      const Region* dst = holding(c.dst, &w.dst_region, &w.dst_offset);
      if (c.fill >= 0) w.src_region = w.src_offset = 0;
      if (s && src && src->host) {
        auto [first, end] = extent(c, w.src_offset, true);
        if (end > first && end <= src->bytes) s->uploads.push_back({w.src_region, first, end - first});
      }
      if (s && dst && dst->host) {
        auto [first, end] = extent(c, w.dst_offset, false);
        if (end > first) s->downloads.push_back({w.dst_region, first, end - first});
      }
    } else if (p.kind == RIG_KIND_LAUNCH) {
      const rig_launch& l = p.work.launch;
      w.entry = l.launch ? static_cast<const EntryRecord*>(l.launch)->entry : 0;
      std::memcpy(w.groups, l.groups, sizeof w.groups);
      std::memcpy(w.threads, l.threads, sizeof w.threads);
      w.shared = l.shared;
      const auto* params = static_cast<const std::byte*>(l.params);
      if (params) w.params.assign(params, params + l.param_bytes);
      if (l.ref_offsets) w.refs.assign(l.ref_offsets, l.ref_offsets + l.ref_count);
    }
  }

  std::shared_ptr<Connection> c_;
  std::string name_;
  wire::Opened opened_;
  std::uint32_t id_;
  volatile std::uint64_t* word_;
  RemoteEdge edge_{};
  // Pinned memory of at least this many bytes (rounded to pages) comes from pages_:
  // page-aligned pages of its own there (HostMemory gives those from 64 KiB and 4 pages).
  static constexpr std::size_t kPinnedPagesLeast = 64 << 10;
  // Gives back Pinned memory of `bytes` (as pinned() rounded them) to where it came from.
  void release_pinned(std::byte* host, std::size_t bytes) {
    if (!host) return;
    if (bytes >= kPinnedPagesLeast)
      pages_.free(edge::Region{reinterpret_cast<std::uintptr_t>(host)});
    else
      std::free(host);
  }
  host::HostMemory pages_;
  std::mutex regions_mutex_;
  std::map<std::uint64_t, Region> regions_;
  std::map<std::uint64_t, std::uint64_t> by_address_;  // a region's address → its id
  std::deque<EntryRecord> entries_;
  wire::Submit submit_;  // reused, so that a warm submit allocates little
  char fill_failure_[96] = {};  // a failed fill's reason, which lives as long as the device
  // The connection's mutex guards these.
  std::uint64_t frontier_ = 0;
  std::map<std::uint64_t, wire::Reached> held_back_;
  std::map<std::uint64_t, std::uint64_t*> timed_;  // timed values' pairs, until Reached brings them
  std::uint64_t last_end_ = 0;
  std::string lost_;
  std::atomic<bool> lost_flag_{false};
};

RemoteDevice& device_of(void* edge) { return *static_cast<RemoteEdge*>(edge)->device; }

int remote_room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
  return device_of(edge).room(parts, count, waits, why);
}
int remote_submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait*, std::uint32_t,
                  std::uint64_t v, std::uint64_t* times, const char** failure) {
  return device_of(edge).submit(parts, count, v, times, failure);
}
int remote_commit(void* edge, std::uint64_t, const char** failure) { return device_of(edge).commit(failure); }

// Its queues wait for no producer; the agent times its values (their times come with the
// Reached that shows them, before the word, so no settle); it measures nothing.
constexpr rig_driver kRemoteTable{remote_room, remote_submit, remote_commit, nullptr, nullptr};

RemoteDevice::RemoteDevice(std::shared_ptr<Connection> c, std::string name, wire::Opened o,
                           volatile std::uint64_t* word)
    : c_(std::move(c)), name_(std::move(name)), opened_(std::move(o)), id_(opened_.device), word_(word) {
  edge_.table = &kRemoteTable;
  edge_.device = this;
  frontier_ = opened_.word;
  if (shown() < opened_.word) __atomic_store_n(word_, opened_.word, __ATOMIC_RELEASE);
  c_->attach(id_, this);
}

void Connection::on_message(std::span<const std::byte> bytes) {
  auto decoded = wire::decode(bytes);
  if (!decoded) return lose(fmt::format("{} sent a malformed message: {}", address_, decoded.error()));
  std::lock_guard g(mutex_);
  if (auto* w = std::get_if<wire::Welcome>(&*decoded)) {
    welcome_at_ = rig_now_ns();
    welcome_ = std::move(*w);
  } else if (auto* o = std::get_if<wire::Opened>(&*decoded)) {
    if (auto it = waiting_.find(o->request); it != waiting_.end()) it->second = std::move(*decoded);
  } else if (auto* r = std::get_if<wire::Reply>(&*decoded)) {
    if (auto it = waiting_.find(r->request); it != waiting_.end()) it->second = std::move(*decoded);
  } else if (auto* reached = std::get_if<wire::Reached>(&*decoded)) {
    if (auto it = devices_.find(reached->device); it != devices_.end()) it->second->reached(std::move(*reached));
    return;
  } else if (auto* lost = std::get_if<wire::Lost>(&*decoded)) {
    if (auto it = devices_.find(lost->device); it != devices_.end()) it->second->lose(lost->why);
  }
  cv_.notify_all();
}

void Connection::on_data(std::span<const std::byte> header, ucx::Payload& bytes) {
  auto decoded = wire::decode(header);
  auto* d = decoded ? std::get_if<wire::Data>(&*decoded) : nullptr;
  if (!d) {
    worker_->drop(bytes);
    return lose(fmt::format("{} sent a malformed data message: {}", address_,
                            decoded ? "its header is no Data" : decoded.error()));
  }
  RemoteDevice* device = nullptr;
  {
    std::lock_guard g(mutex_);
    if (auto it = devices_.find(d->device); it != devices_.end()) device = it->second;
  }
  // A device this side let go: its memory is no longer there to take the bytes.
  if (!device) return worker_->drop(bytes);
  device->take(*d, bytes);
}

void Connection::lose(std::string why) {
  std::lock_guard g(mutex_);
  if (lost_.empty()) lost_ = why;
  for (auto& [id, d] : devices_) d->lose(why);
  cv_.notify_all();
}

}  // namespace

edge::Opener<> opener(std::string address, std::string device, std::string name, std::string token) {
  if (name.empty()) {
    auto where = ucx::parse_address(address);
    name = fmt::format("{}@{}", device, where ? where->host : address);
  }
  return {name, [address, device, name, token](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
            auto c = connection(address, token);
            if (!c) return std::unexpected(c.error());
            wire::Message m;
            try {
              m = (*c)->request(wire::Open{0, device});
            } catch (const edge::Fault& e) {
              return std::unexpected(std::string(e.what()));
            }
            auto* o = std::get_if<wire::Opened>(&m);
            if (!o) return std::unexpected(fmt::format("{} answered an open with another message", address));
            if (!o->ok) return std::unexpected(o->why);
            return std::make_unique<RemoteDevice>(*c, name, std::move(*o), word);
          }};
}

Result<std::vector<std::string>> devices(std::string_view address, std::string token) {
  std::vector<std::string> names;
  auto c = connection(std::string(address), token, &names);
  if (!c) return std::unexpected(c.error());
  return names;
}

}  // namespace rig::remote
