// agent.cpp — the agent `rig serve` runs: it opens this machine's devices for the clients
// that prove its token and runs their work, checking everything a message names against
// what that client holds (docs/remote.md, "Security").
//
// Threads: whichever thread holds the worker's turn handles every message itself, in the
// order UCX delivered them, and makes every driver call but sleep: the worker's progress
// thread, or a served host device's dispatcher, which serves the worker while it waits for
// work (idling()), the progress thread standing aside meanwhile. In their idle rounds they
// also send Reached for each served device whose word moved, so that a launch on a host
// device is received, run and reported on that device's one thread. Each served device has a
// watcher thread that sleeps in its driver and sends Reached when its word moves while the
// progress thread sleeps (while that thread spins, the watcher waits apart from the driver,
// whose store of the word then wakes no one). A reaper thread waits for the work of devices
// whose client went or let them go, stops them and frees what the client held, while the
// others are served. A
// value for which its device has no room yet is parked, not waited for: the progress thread
// asks room again from its idle rounds (the watcher wakes it when the word moves) and serves
// the others meanwhile. Nor does it wait for bytes on their way to or from a client: their
// UCX requests are looked at from its idle rounds, the value (or the Reached) they hold up
// going on once they are done.
#include <rig/remote.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "../host/futex.hpp"
#include "../host/host_driver.hpp"
#include "ucx.hpp"
#include "wire.hpp"

namespace rig::remote {
namespace {

// The devices an agent can serve, by name.
const std::vector<std::string>& known_devices() {
  static const std::vector<std::string> names{"CPU", "MEM"};
  return names;
}

// How long a device's submitted work may take, once its client stopped it or went, before
// the agent stops it anyway.
constexpr auto kDrainLimit = std::chrono::seconds(10);
// The watcher's longest sleep in the driver before it looks at its stop flag.
constexpr auto kWatchSlice = std::chrono::milliseconds(20);
// While the progress thread (or a host device's dispatcher serving the worker) has called the
// idle rounds within this, they report: the watcher waits until the progress thread sleeps
// on the event fd, or kWatchSlice. Each look of the watcher is a wake-up that takes a CPU from
// the threads on a value's path (a look each millisecond was a thousand a second); should
// the rounds stop unseen (a dispatcher running a long value), the progress thread, which
// looks once a millisecond while threads poll, takes them over.
constexpr auto kSpinningLook = std::chrono::milliseconds(1);
// The most values a submit may come ahead of the next one.
constexpr std::uint64_t kAheadMost = 1 << 16;
// The most Data messages one value may bring: far above the ranges rig's copies read.
constexpr std::size_t kDataMost = 1 << 16;
// How long a value may wait for room on its device while the device's word stands still
// before it is found never to fit: the thousand sleeps of kWatchSlice it once had.
constexpr auto kRoomWaitLimit = 1000 * kWatchSlice;
// The most times one value's room asks to grow the device's queues before it is found never
// to fit.
constexpr int kGrowsMost = 1000;

// True iff a and b are equal, in time that depends on their lengths only.
bool same_token(std::string_view a, std::string_view b) {
  const std::size_t n = std::max(a.size(), b.size());
  unsigned diff = unsigned(a.size() != b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= unsigned(x ^ y);
  }
  return diff == 0;
}

// A region a client holds: memory of the device, or a window of host memory the agent keeps
// for the client's mapped host memory, into which the client sends the bytes a value reads
// before the value and from which the agent sends back what a value wrote before it reports
// it (Data).
struct Held {
  edge::Region region;
  std::uint64_t address = 0;
  std::intptr_t handle = 0;
  std::uint64_t bytes = 0;
  std::byte* window = nullptr;  // the window's memory, or null for device memory
  ucp_mem_h window_memh = nullptr;  // the window's registration
};

// A function of an image, as a launch names it.
struct EntryRecord {
  std::uint64_t image = 0;
  std::uint64_t code = 0;
  const void* launch = nullptr;
};

// A device the agent opened for one client.
struct Served {
  std::string name;
  std::uint32_t id = 0;
  ucp_ep_h ep = nullptr;
  ucx::Worker* worker = nullptr;
  std::unique_ptr<edge::Driver> driver;
  edge::Facts facts;
  const rig_driver* c = nullptr;
  alignas(64) volatile std::uint64_t word = 0;
  std::uint64_t submitted = 0;
  std::uint64_t next_id = 1;
  bool stopped = false;
  std::map<std::uint64_t, Held> regions;          // by id
  std::map<std::uint64_t, std::uint64_t> by_address;  // device memory: address → id
  std::map<std::uint64_t, edge::ImageId> images;  // by id
  std::map<std::uint64_t, Held> code;              // the device memory an image's code was placed in, by image
  std::vector<EntryRecord> entries;               // a launch's entry is its index + 1

  // Shared with the watcher.
  std::mutex report_mutex;  // one report at a time: the progress thread's or the watcher's
  std::mutex mutex;
  std::map<std::uint64_t, std::vector<wire::Range>> downloads;  // by value
  std::map<std::uint64_t, std::array<std::uint64_t, 2>> times;   // timed values' start and end
  std::uint64_t sent = 0;  // the word as the last Reached gave it
  std::condition_variable reported;  // sent moved
  std::atomic<bool> lost{false};
  std::atomic<bool> stopping{false};
  // A Stop the client asked for while work was in flight: answered once that work is done or
  // kDrainLimit has passed, from the progress thread's idle rounds.
  struct StopAsked {
    std::uint64_t request = 0;
    std::string why;
    std::chrono::steady_clock::time_point until;
  };
  std::optional<StopAsked> stop_asked;  // the progress thread's
  std::atomic<bool> draining{false};    // stop_asked is set: the watcher wakes the progress thread
  // The value that found no room on the device (RIG_LATER), its uploads already got into
  // their windows: it is handed over once room frees, retried from the progress thread's idle
  // rounds each time the word moved, else at most every kWatchSlice. The values after it wait
  // in `ahead` meanwhile (submitted has not moved).
  struct Parked {
    wire::Submit submit;
    std::uint64_t word = 0;  // the word at the last try
    std::chrono::steady_clock::time_point next_try;
    std::chrono::steady_clock::time_point until;  // kRoomWaitLimit after the word last moved
  };
  std::optional<Parked> parked;        // the progress thread's
  // The value whose Submit came before all its Data: handed over once the last came (the
  // values after it wait in `ahead`). The Data each value brought so far, by value, their
  // bytes still in UCX: taken into the windows, or into the device's memory, at the hand-over.
  std::optional<wire::Submit> awaiting;
  struct Arrived {
    wire::Range range;
    ucx::Payload bytes;
  };
  std::map<std::uint64_t, std::vector<Arrived>> arrived;
  // A value that only copies between the client's memory and the device's, which the host
  // addresses: its bytes go straight between the two, without the window, once the device
  // reached the value before it (retried from the idle rounds; the values after it wait in
  // `ahead`).
  struct Direct {
    wire::Submit submit;
    std::vector<Arrived> bytes;
  };
  std::optional<Direct> direct;
  std::atomic<bool> room_wanted{false};  // parked or direct is set: the watcher wakes the progress thread
  // Bytes on their way between the client's memory and the agent's are never waited for on
  // the progress thread (a client that stops taking them would hold every client's
  // messages): their requests are checked from its idle rounds. A value whose bytes move
  // (its uploads taken into their windows or into the device's memory, or a direct value's
  // downloads sent) is handed to the device once they are there, the values after it
  // waiting in `ahead`.
  struct Moving {
    wire::Submit submit;  // what is handed over then, kept only while it waits
    std::vector<ucs_status_ptr_t> requests;
    bool sending = false;               // they send the device's bytes, not take the client's
    std::optional<std::string> failed;  // UCX's reason for the first that failed
  };
  std::optional<Moving> moving;  // the progress thread's
  // A report whose Data are on their way into the client's memory: its Reached goes once
  // they are there (report_mutex).
  struct Putting {
    wire::Reached reached;
    std::vector<ucs_status_ptr_t> sends;
    std::optional<std::string> failed;
  };
  std::optional<Putting> putting;
  std::atomic<bool> putting_now{false};  // putting is set: the watcher leaves it to the progress thread
  bool closing = false;  // its client let it go while bytes moved: the reaper's once they are done
  std::thread watcher;

  // Frees and unloads waiting for the values submitted before them: (value, region or image).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> frees, unloads;

  // The parts of the submission being handed over, as rig_edge.h has them.
  std::vector<rig_part> parts;
  std::deque<std::vector<rig_box>> boxes;          // by the wire's part
  std::deque<std::vector<std::uint32_t>> afters;   // by the wire's part: what it follows here
  std::vector<std::int64_t> placed;                // the wire's part → its index in parts, or -1

  std::vector<std::byte> reached_bytes;
  std::vector<std::byte> data_header;
  std::map<std::uint64_t, wire::Submit> ahead;  // values that came before the one after submitted
};

struct Client {
  ucp_ep_h ep = nullptr;
  bool admitted = false;
  std::vector<std::unique_ptr<Served>> devices;
};

// Devices to stop and free, and the endpoint to close once they are, for the reaper.
struct Reaping {
  std::vector<std::unique_ptr<Served>> devices;
  ucp_ep_h ep = nullptr;  // null: the client stays
};

class AgentImpl final : public Agent {
 public:
  AgentImpl(ServeOptions options, std::string token)
      : options_(std::move(options)), token_(std::move(token)) {}

  ~AgentImpl() override {
    if (worker_) worker_->mute();  // no handler runs from here on
    for (auto& [ep, c] : clients_) leave(c);
    clients_.clear();
    {
      std::lock_guard g(reap_mutex_);
      quit_ = true;
    }
    reap_cv_.notify_all();
    if (reaper_.joinable()) reaper_.join();
    worker_.reset();
  }

  Result<std::string> begin() {
    auto where = ucx::parse_address(options_.listen);
    if (!where) return std::unexpected(where.error());
    try {
      worker_ = std::make_unique<ucx::Worker>(ucx::Handlers{
          [this](ucp_ep_h from, std::span<const std::byte> m) { on_message(from, m); },
          [this](ucp_ep_h ep, ucs_status_t) { gone(ep); },
          [this](ucp_ep_h ep) {
            clients_[ep].ep = ep;
            client_count_.store(clients_.size());
          },
          [this] { return report_all(); },
          [this](ucp_ep_h from, std::span<const std::byte> header, ucx::Payload& bytes) {
            on_data(from, header, bytes);
          }});
    } catch (const std::exception& e) {
      return std::unexpected(std::string(e.what()));
    }
    reaper_ = std::thread([this] { reap(); });
    auto listening = worker_->listen(*where);
    if (!listening) return std::unexpected(listening.error());
    address_ = fmt::format("{}:{}", listening->host, listening->port);
    return address_;
  }

  std::string address() const override { return address_; }
  std::size_t clients() const override { return client_count_.load(); }
  std::uint64_t dropped() const override { return dropped_.load(); }
  std::uint64_t held_bytes() const override { return held_.load(); }

 private:
  // A message from the client at `from` (the progress thread's).
  void on_message(ucp_ep_h from, std::span<const std::byte> bytes) {
    auto it = clients_.find(from);
    if (it == clients_.end()) {
      ++dropped_;
      return;
    }
    handle(it->second, bytes);
  }

  // What a served host device's dispatcher does while it waits for work: it serves the
  // worker as the progress thread would, which stands aside meanwhile, so that a launch's
  // Submit, its run and its Reached happen on that one thread. Before it parks, it hands the
  // worker back to the progress thread at once (no linger: nobody polls on).
  cpu::DispatcherIdle idling() {
    cpu::DispatcherIdle idle;
    idle.context = worker_.get();
    idle.begin = [](void* w) { static_cast<ucx::Worker*>(w)->begin_polling(); };
    idle.round = [](void* w) { return static_cast<ucx::Worker*>(w)->serve_round(); };
    idle.end = [](void* w, bool parking) {
      auto* worker = static_cast<ucx::Worker*>(w);
      worker->end_polling();
      if (parking) worker->resume();
    };
    return idle;
  }

  // The client at `ep` went: the reaper stops its devices and frees what it held.
  void gone(ucp_ep_h ep) {
    auto it = clients_.find(ep);
    if (it == clients_.end()) return;
    Reaping r{std::move(it->second.devices), ep};
    clients_.erase(it);
    client_count_.store(clients_.size());
    hand_to_reaper(std::move(r));
  }

  // Hands one device its client let go to the reaper (its slot left empty).
  void reap_device(std::unique_ptr<Served>& s) {
    Reaping r;
    r.devices.push_back(std::move(s));
    hand_to_reaper(std::move(r));
  }

  // Whether bytes are on their way to or from s's memory (its value's, or its report's).
  static bool bytes_moving(const Served& s) { return s.moving || s.putting_now.load(); }

  void hand_to_reaper(Reaping r) {
    {
      std::lock_guard g(reap_mutex_);
      reaping_.push_back(std::move(r));
    }
    reap_cv_.notify_one();
  }

  // The reaper: releases the devices handed to it, then closes their client's endpoint.
  void reap() {
    std::unique_lock g(reap_mutex_);
    while (true) {
      reap_cv_.wait(g, [&] { return quit_ || !reaping_.empty(); });
      if (reaping_.empty()) return;
      Reaping r = std::move(reaping_.front());
      reaping_.pop_front();
      g.unlock();
      for (auto& s : r.devices)
        if (s) release(*s);
      r.devices.clear();
      if (r.ep) worker_->close(r.ep);
      g.lock();
    }
  }

  // Sends Reached for each served device whose word moved, and runs the frees and unloads
  // the values it reported allow (the progress thread's idle rounds). True if it sent one.
  bool report_all() {
    bool sent = false;
    for (auto& [ep, c] : clients_)
      for (auto& s : c.devices) {
        if (!s) continue;
        // Bytes on their way, whose requests are looked at here (a stopped device's too,
        // whose memory is freed only once they are done).
        if (s->moving && retry_moving(c, *s)) sent = true;
        if (s->stopped) {
          if (s->putting_now.load()) {
            std::lock_guard r(s->report_mutex);
            if (put(*s)) sent = true;
          }
          if (!s->frees.empty() || !s->unloads.empty()) settle(*s);
        }
        if (s->closing && !bytes_moving(*s)) {
          reap_device(s);
          continue;
        }
        if (s->stopped) continue;
        std::unique_lock r(s->report_mutex, std::try_to_lock);
        if (!r.owns_lock()) continue;
        if (report(*s)) sent = true;
        r.unlock();
        if (!s->frees.empty() || !s->unloads.empty()) settle(*s);
        if (s->stop_asked && (drained(*s) || std::chrono::steady_clock::now() >= s->stop_asked->until)) {
          const auto asked = std::move(*s->stop_asked);
          s->stop_asked.reset();
          s->draining = false;
          stop_now(*s, asked.why);
          answer_stop(c, *s, asked.request);
          sent = true;
        }
        if (s->parked && retry(c, *s)) sent = true;
        if (s->direct && retry_direct(c, *s)) sent = true;
      }
    return sent;
  }

  // Whether s has no submitted work left to wait for.
  static bool drained(const Served& s) {
    return s.stopped || s.lost || __atomic_load_n(&s.word, __ATOMIC_ACQUIRE) >= s.submitted;
  }

  template <class T>
  void send(Client& c, const T& m) {
    wire::encode(m, out_);
    worker_->send(c.ep, out_);
  }

  void drop(std::string_view why) {
    ++dropped_;
    if (std::getenv("RIG_SERVE_VERBOSE")) fmt::print(stderr, "rig serve: dropped {}\n", why);
  }

  void handle(Client& c, std::span<const std::byte> bytes) {
    auto decoded = wire::decode(bytes);
    if (!decoded) return drop(decoded.error());
    wire::Message& m = *decoded;
    if (!c.admitted) {
      auto* hello = std::get_if<wire::Hello>(&m);
      if (!hello) return drop("a message before the token");
      if (hello->version != wire::kVersion)
        return send(c, wire::Welcome{false, fmt::format("the agent speaks protocol version {}, not {}",
                                                        wire::kVersion, hello->version), {}});
      if (!same_token(hello->token, token_)) {
        ++dropped_;
        return send(c, wire::Welcome{false, "wrong token", {}});
      }
      c.admitted = true;
      if (std::getenv("RIG_SERVE_VERBOSE"))
        fmt::print(stderr, "rig serve: a client admitted, over {}\n", worker_->transports(c.ep));
      return send(c, wire::Welcome{true, "", served_names(), rig_now_ns()});
    }
    std::visit([&](auto& x) { on(c, x); }, m);
  }

  std::vector<std::string> served_names() const {
    return options_.devices.empty() ? known_devices() : options_.devices;
  }

  // The client's device a message names, or null (the message is dropped).
  Served* device(Client& c, std::uint32_t id) {
    if (id >= c.devices.size() || !c.devices[id]) {
      drop(fmt::format("a message naming device {}, which the client has not opened", id));
      return nullptr;
    }
    if (c.devices[id]->closing) {
      drop(fmt::format("a message naming device {}, which the client let go", id));
      return nullptr;
    }
    return c.devices[id].get();
  }

  void reply(Client& c, std::uint64_t request, std::uint32_t status, std::string why = {}, std::uint64_t a = 0,
             std::uint64_t b = 0, std::uint64_t cc = 0, std::uint64_t d = 0) {
    send(c, wire::Reply{request, status, a, b, cc, d, std::move(why)});
  }

  // Loses a served device with `why`, on the client's side too.
  void lose(Client& c, Served& s, std::string why) {
    if (s.lost.exchange(true)) return;
    send(c, wire::Lost{s.id, std::move(why)});
  }

  template <class T>
  void on(Client&, const T&) {
    drop("a message only an agent sends");
  }

  void on(Client&, const wire::Hello&) { drop("a second hello"); }
  void on(Client&, const wire::Data&) { drop("a data message sent as a plain one, without its bytes"); }

  void on(Client& c, const wire::Clock& m) { reply(c, m.request, wire::kOk, {}, rig_now_ns()); }

  void on(Client& c, const wire::Open& m) {
    wire::Opened o;
    o.request = m.request;
    const auto names = served_names();
    if (std::find(names.begin(), names.end(), m.device) == names.end()) {
      o.why = fmt::format("{} serves no device {}; it serves {}", address_, m.device, fmt::join(names, ", "));
      return send(c, o);
    }
    auto s = std::make_unique<Served>();
    s->name = m.device;
    s->id = std::uint32_t(c.devices.size());
    s->ep = c.ep;
    s->worker = worker_.get();
    try {
      auto extra = std::find_if(options_.openers.begin(), options_.openers.end(),
                                [&](const edge::Opener<>& o) { return o.name == m.device; });
      if (extra != options_.openers.end()) {
        auto made = extra->make(&s->word);
        if (!made) {
          o.why = fmt::format("{} could not open {}: {}", address_, m.device, made.error());
          return send(c, o);
        }
        s->driver = std::move(*made);
      } else {
        s->driver = m.device == "CPU" ? cpu::make_host_driver_idling(&s->word, idling())
                                      : cpu::make_memory_driver(&s->word);
      }
      s->facts = s->driver->facts();
    } catch (const std::exception& e) {
      o.why = fmt::format("{} could not open {}: {}", address_, m.device, e.what());
      return send(c, o);
    }
    s->c = *static_cast<const rig_driver* const*>(s->facts.edge);
    const edge::Facts& f = s->facts;
    o.ok = true;
    o.device = s->id;
    o.arch = f.arch;
    o.budget = f.budget;
    for (const auto& q : f.queues) {
      wire::Queue wq{q.name, {}};
      for (Kind k : q.runs) wq.runs.push_back(std::uint32_t(k));
      o.queues.push_back(std::move(wq));
    }
    o.copy_engine = f.copy_engine.value_or(-1);
    o.hang_ms = f.hang_ms.value_or(-1);
    o.alignment = f.alignment;
    o.cache_bytes = f.cache_bytes.value_or(0);
    o.word = 0;
    Served* raw = s.get();
    s->watcher = std::thread([this, raw] { watch(*raw); });
    c.devices.push_back(std::move(s));
    send(c, o);
  }

  void on(Client& c, const wire::Alloc& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    if (m.memory != std::uint32_t(Memory::Device))
      return reply(c, m.request, wire::kError, "a remote device allocates Device memory only");
    if (m.bytes == 0 || m.bytes > s->facts.budget)
      return reply(c, m.request, wire::kError,
                   fmt::format("{} bytes, over the device's budget of {}", m.bytes, s->facts.budget));
    std::optional<edge::Region> r;
    edge::Location where;
    try {
      r = s->driver->alloc(Memory::Device, m.bytes);
      if (r) where = s->driver->locate(*r);
    } catch (const std::exception& e) {
      lose(c, *s, fmt::format("fault while allocating {} bytes: {}", m.bytes, e.what()));
      return reply(c, m.request, wire::kError, e.what());
    }
    if (!r) return reply(c, m.request, wire::kNone);
    const std::uint64_t id = s->next_id++;
    {
      std::lock_guard g(s->mutex);
      s->regions[id] = Held{*r, where.address.value_or(0), where.handle, m.bytes, nullptr};
    }
    if (where.address) s->by_address[*where.address] = id;
    held_ += m.bytes;
    reply(c, m.request, wire::kOk, {}, id, where.address.value_or(0), 0, m.bytes);
  }

  void on(Client& c, const wire::MapHost& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    if (m.bytes == 0 || m.bytes % 4096 != 0 || m.bytes > s->facts.budget)
      return reply(c, m.request, wire::kError, fmt::format("a window of {} bytes, not a multiple of 4096 bytes "
                                                           "within the device's budget", m.bytes));
    if (m.address == 0 || m.address + m.bytes < m.address)
      return reply(c, m.request, wire::kError, fmt::format("{} bytes from address {:#x}, which wrap", m.bytes,
                                                           m.address));
    auto* window = static_cast<std::byte*>(std::aligned_alloc(4096, m.bytes));
    if (!window) return reply(c, m.request, wire::kNone);
    auto registration = worker_->register_memory(window, m.bytes);
    if (!registration) {
      std::free(window);
      return reply(c, m.request, wire::kError, registration.error());
    }
    // Frees what was made for the window, where it goes no further.
    auto undo = [&] {
      worker_->unregister(*registration);
      std::free(window);
    };
    edge::Mapping answer;
    edge::Location where;
    try {
      answer = s->driver->map_host(reinterpret_cast<std::uintptr_t>(window), m.bytes);
      if (auto* r = std::get_if<edge::Region>(&answer)) where = s->driver->locate(*r);
    } catch (const std::exception& e) {
      undo();
      lose(c, *s, fmt::format("fault while mapping {} bytes of host memory: {}", m.bytes, e.what()));
      return reply(c, m.request, wire::kError, e.what());
    }
    auto* r = std::get_if<edge::Region>(&answer);
    if (!r) {
      undo();
      if (std::holds_alternative<edge::NoRoom>(answer)) return reply(c, m.request, wire::kNone);
      return reply(c, m.request, wire::kError, "the device maps no host memory");
    }
    const std::uint64_t id = s->next_id++;
    {
      std::lock_guard g(s->mutex);
      s->regions[id] = Held{*r, where.address.value_or(0), where.handle, m.bytes, window, *registration};
    }
    reply(c, m.request, wire::kOk, {}, id, where.address.value_or(0), 0, m.bytes);
  }

  void on(Client& c, const wire::Free& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    if (!s->regions.contains(m.region)) return drop(fmt::format("a free of region {}, which is not held", m.region));
    s->frees.emplace_back(last_received(*s), m.region);
    settle(*s);
  }

  void on(Client& c, const wire::Image& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    Result<edge::Code> code;
    try {
      code = s->driver->image(m.binary);
    } catch (const std::exception& e) {
      lose(c, *s, fmt::format("fault while loading an image: {}", e.what()));
      return reply(c, m.request, wire::kError, e.what());
    }
    if (!code) return reply(c, m.request, wire::kError, code.error());
    const std::uint64_t id = s->next_id++;
    if (auto* loaded = std::get_if<edge::Loaded>(&*code)) {
      s->images[id] = loaded->image;
      return reply(c, m.request, wire::kOk, {}, id);
    }
    std::string why;
    try {
      why = place(*s, id, std::get<edge::Place>(*code));
    } catch (const std::exception& e) {
      lose(c, *s, fmt::format("fault while placing an image's code: {}", e.what()));
      return reply(c, m.request, wire::kError, e.what());
    }
    if (!why.empty()) return reply(c, m.request, wire::kError, why);
    reply(c, m.request, wire::kOk, {}, id);
  }

  // Places the code of image `id` in memory of s's device, as the driver's Place asks: the
  // agent writes its bytes through its host's address of that memory (a GPU's memory that
  // the host addresses). "" once done, else the reason (nothing is left held).
  std::string place(Served& s, std::uint64_t id, const edge::Place& place) {
    std::optional<edge::Region> r = s.driver->alloc(Memory::Device, place.bytes);
    if (!r) return fmt::format("no memory for the image's {} bytes of code", place.bytes);
    const edge::Location where = s.driver->locate(*r);
    if (!where.host) {
      s.driver->free(*r);
      return "its driver places code in memory the agent's host does not address, which a remote device does not "
             "do yet";
    }
    auto [image, bytes] = place.place(*r);
    if (bytes.size() > place.bytes) {
      s.driver->unload(image);
      s.driver->free(*r);
      return fmt::format("its driver placed {} bytes of code in {}", bytes.size(), place.bytes);
    }
    void* at = reinterpret_cast<void*>(*where.host);
    std::memcpy(at, bytes.data(), bytes.size());
    rig_code_sync(at, bytes.size());
    s.images[id] = image;
    s.code[id] = Held{*r, where.address.value_or(0), where.handle, place.bytes};
    held_ += place.bytes;
    return "";
  }

  // Unloads image `id` of s and frees the memory its code was placed in.
  void unload(Served& s, std::uint64_t id) {
    auto it = s.images.find(id);
    if (it == s.images.end()) return;
    s.driver->unload(it->second);
    s.images.erase(it);
    if (auto placed = s.code.find(id); placed != s.code.end()) {
      s.driver->free(placed->second.region);
      held_ -= placed->second.bytes;
      s.code.erase(placed);
    }
  }

  void on(Client& c, const wire::Entry& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    auto it = s->images.find(m.image);
    if (it == s->images.end()) return reply(c, m.request, wire::kError, fmt::format("no image {}", m.image));
    edge::EntryAnswer answer;
    try {
      answer = s->driver->entry(it->second, m.name);
    } catch (const std::exception& e) {
      lose(c, *s, fmt::format("fault while finding function {}: {}", m.name, e.what()));
      return reply(c, m.request, wire::kError, e.what());
    }
    if (auto* no = std::get_if<edge::NoMemory>(&answer)) return reply(c, m.request, wire::kNoMemory, {}, no->bytes);
    auto* e = std::get_if<edge::Entry>(&answer);
    if (!e) return reply(c, m.request, wire::kNone);
    s->entries.push_back({m.image, e->code, e->launch});
    reply(c, m.request, wire::kOk, {}, s->entries.size(), e->code, e->params ? *e->params + 1 : 0,
          e->threads ? *e->threads + 1 : 0);
  }

  void on(Client& c, const wire::Unload& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    if (!s->images.contains(m.image)) return drop(fmt::format("an unload of image {}, which is not loaded", m.image));
    s->unloads.emplace_back(last_received(*s), m.image);
    settle(*s);
  }

  void on(Client& c, const wire::Room& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    char why[RIG_WHY] = {};
    if (!translate(*s, m.parts, why)) return reply(c, m.request, wire::kOk, why, RIG_NEVER);
    int answer = s->c->room(s->facts.edge, s->parts.data(), std::uint32_t(s->parts.size()), 0, why);
    why[RIG_WHY - 1] = 0;
    if (answer == RIG_LATER || answer == RIG_GROW) answer = RIG_FITS;  // the agent makes room at submit
    reply(c, m.request, wire::kOk, answer == RIG_NEVER ? why : "", std::uint64_t(answer));
  }

  // The last value of s that came in order: the one held up (waiting for room, its Data or
  // the value before it), or else the last handed over. A free or unload waits for it: a
  // held-up value's parts name what it holds.
  static std::uint64_t last_received(const Served& s) {
    if (s.parked) return s.parked->submit.value;
    if (s.awaiting) return s.awaiting->value;
    if (s.moving) return s.moving->submit.value;
    return s.direct ? s.direct->submit.value : s.submitted;
  }
  // Whether a value holds up the ones after it: waiting for room, for its Data, for the
  // device to reach the value before it, or for its bytes to move.
  static bool held_up(const Served& s) { return s.parked || s.awaiting || s.direct || s.moving; }

  void on(Client& c, const wire::Submit& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    if (s->lost || s->stopped || s->stop_asked) return;
    // Active messages arrive in any order (a large one by rendezvous after smaller ones
    // sent later): a value waits for those before it, and for one parked waiting for room.
    if (m.value <= last_received(*s) || m.value > s->submitted + kAheadMost)
      return lose(c, *s, fmt::format("value {} submitted after value {}", m.value, last_received(*s)));
    if (m.value != s->submitted + 1 || held_up(*s)) {
      s->ahead.emplace(m.value, m);
      return;
    }
    hand_over(c, *s, m);
    hand_over_ahead(c, *s);
  }

  // Hands over the values that came ahead, in order, until one is missing or parks.
  void hand_over_ahead(Client& c, Served& s) {
    for (auto it = s.ahead.find(s.submitted + 1); it != s.ahead.end() && !s.lost && !held_up(s);
         it = s.ahead.find(s.submitted + 1)) {
      wire::Submit next = std::move(it->second);
      s.ahead.erase(it);
      hand_over(c, s, next);
    }
  }

  // Translates m's parts into s.parts and checks its ranges of mapped host memory; false, the
  // device lost with the reason, where one is wrong.
  bool admit(Client& c, Served& s, const wire::Submit& m) {
    char why[RIG_WHY] = {};
    if (!translate(s, m.parts, why)) return lose(c, s, fmt::format("value {}: {}", m.value, why)), false;
    for (const auto& u : m.uploads)
      if (!window(s, u.region, u.offset, u.length))
        return lose(c, s, fmt::format("value {}: a read of mapped host memory outside what the client mapped",
                                      m.value)), false;
    for (const auto& d : m.downloads)
      if (!window(s, d.region, d.offset, d.length))
        return lose(c, s, fmt::format("value {}: a write of mapped host memory outside what the client mapped",
                                      m.value)), false;
    return true;
  }

  // Hands value m.value, the one after s's last, to the device: once its parts are checked and
  // the bytes they read are in their windows (else it waits in s.awaiting for their Data), at
  // once if room fits, else once room frees (s.parked, retried from the idle rounds).
  void hand_over(Client& c, Served& s, const wire::Submit& m) {
    if (!admit(c, s, m)) return;
    std::vector<Served::Arrived> bytes;
    switch (landed(c, s, m, bytes)) {
      case Landed::Waiting:
        s.awaiting = m;
        return;
      case Landed::Lost:
        return;
      case Landed::All:
        break;
    }
    if (direct(s, m)) return take_direct(c, s, m, std::move(bytes));
    Served::Moving moving;
    for (auto& a : bytes) {
      const Held& w = s.regions.at(a.range.region);  // checked by admit
      started(moving, worker_->take_later(a.bytes, w.window + a.range.offset, w.window_memh));
    }
    move_then_run(c, s, m, std::move(moving), true);
  }

  // Keeps a started transfer of `moving`: its request while it runs, else its failure.
  static void started(Served::Moving& moving, ucs_status_ptr_t r) {
    if (UCS_PTR_IS_PTR(r))
      moving.requests.push_back(r);
    else if (UCS_PTR_STATUS(r) != UCS_OK && !moving.failed)
      moving.failed = ucx::status_text(UCS_PTR_STATUS(r));
  }

  // Checks requests without waiting for them, freeing each that is done: true once all are,
  // the first failure's reason in `failed`.
  static bool completed(ucx::Worker& w, std::vector<ucs_status_ptr_t>& requests, std::optional<std::string>& failed) {
    for (auto& r : requests) {
      if (!r) continue;
      const std::optional<ucs_status_t> st = w.done(r);
      if (!st) return false;
      r = nullptr;
      if (*st != UCS_OK && !failed) failed = ucx::status_text(*st);
    }
    requests.clear();
    return true;
  }

  // Hands m over once the bytes `moving` moves for it are there: at once if they are
  // (`translated`: s.parts holds its parts already), else from the idle rounds (s.moving,
  // which keeps a copy of m only then).
  void move_then_run(Client& c, Served& s, const wire::Submit& m, Served::Moving moving, bool translated) {
    if (!completed(*worker_, moving.requests, moving.failed)) {
      moving.submit = m;
      s.moving = std::move(moving);
      return;
    }
    moved(c, s, m, moving, translated);
  }

  // Hands over m, whose bytes moved, or loses its device where they did not.
  void moved(Client& c, Served& s, const wire::Submit& m, const Served::Moving& moving, bool translated) {
    if (s.lost || s.stopped) return;
    if (moving.failed && moving.sending)
      return lose(c, s, fmt::format("sending value {}'s bytes into the client's memory failed: {}", m.value,
                                    *moving.failed));
    if (moving.failed)
      return lose(c, s, fmt::format("value {}: taking the client's bytes failed: {}", m.value, *moving.failed));
    if (translated || admit(c, s, m)) run(c, s, m);
  }

  // Hands over s's moving value once its bytes are there, and the values that came after
  // it. True if it did.
  bool retry_moving(Client& c, Served& s) {
    if (!completed(*worker_, s.moving->requests, s.moving->failed)) return false;
    Served::Moving moving = std::move(*s.moving);
    s.moving.reset();
    moved(c, s, moving.submit, moving, false);
    hand_over_ahead(c, s);
    return true;
  }

  // Sends range d of mapped host memory, written by value v, from `from` (memh registering
  // it, or null) as a Data of s, its header encoded into `header`: started, not finished.
  static ucs_status_ptr_t send_range(Served& s, std::uint64_t v, const wire::Range& d, const std::byte* from,
                                     ucp_mem_h memh, std::vector<std::byte>& header) {
    wire::encode(wire::Data{s.id, v, d.region, d.offset, d.length}, header);
    return s.worker->send_data(s.ep, header, from, d.length, memh);
  }

  // Whether s's device reached the value before v.
  static bool reached_before(const Served& s, std::uint64_t v) {
    return __atomic_load_n(&s.word, __ATOMIC_ACQUIRE) + 1 >= v;
  }

  // Whether value m only copies the client's bytes into device memory that the host
  // addresses, or only such memory into the client's, a part a range it reads or writes
  // (one box, contiguous, between a window and device memory, untimed): such bytes can go
  // straight between the device's memory and the client's.
  static bool direct(const Served& s, const wire::Submit& m) {
    const bool in = m.downloads.empty(), out = m.uploads.empty();
    if (!s.facts.host_addresses || m.timed || in == out) return false;
    const auto& ranges = in ? m.uploads : m.downloads;
    if (ranges.size() != m.parts.size()) return false;
    for (std::size_t i = 0; i < m.parts.size(); ++i) {
      const wire::Part& p = m.parts[i];
      if (p.kind != RIG_KIND_COPY || p.fill >= 0 || p.boxes.size() != 1) return false;
      const wire::Box& b = p.boxes[0];
      if (b.rows != 1 && (b.src_pitch != b.width || b.dst_pitch != b.width)) return false;
      auto window = s.regions.find(in ? p.src_region : p.dst_region);
      auto memory = s.regions.find(in ? p.dst_region : p.src_region);
      if (window == s.regions.end() || !window->second.window || memory == s.regions.end() ||
          memory->second.window || memory->second.address == 0)
        return false;
      const wire::Range range = in ? wire::Range{p.src_region, p.src_offset + b.src_offset, b.width * b.rows}
                                   : wire::Range{p.dst_region, p.dst_offset + b.dst_offset, b.width * b.rows};
      if (ranges[i] != range) return false;
    }
    return true;
  }

  // Moves a direct value's bytes once the device reached the value before it (else it waits
  // in s.direct): the client's Data taken into the device's memory, or the device's memory
  // sent to the client as Data and taken there; then hands the device the value with its
  // copies emptied, so that its word moves in its turn (and its Reached follows the Data).
  void take_direct(Client& c, Served& s, const wire::Submit& m, std::vector<Served::Arrived> bytes) {
    if (!reached_before(s, m.value)) {
      s.direct = Served::Direct{m, std::move(bytes)};
      s.room_wanted = true;  // the watcher wakes the progress thread when the word moves
      return;
    }
    Served::Moving moving;
    moving.sending = !m.downloads.empty();
    wire::Submit emptied = m;
    for (std::size_t i = 0; i < m.parts.size(); ++i) {
      const wire::Part& p = m.parts[i];
      const wire::Box& b = p.boxes[0];
      emptied.parts[i].boxes.clear();
      // The regions' own addresses (the host's, as the device's facts say), not the part's:
      // inside them, as admit checked.
      if (m.downloads.empty()) {
        // A Data of upload i's range, which direct() matched to part i (each taken once: two
        // parts may read one range, each with a Data of its own).
        auto a = std::find_if(bytes.begin(), bytes.end(), [&](const Served::Arrived& x) { return x.range == m.uploads[i]; });
        auto* into = reinterpret_cast<std::byte*>(s.regions.at(p.dst_region).address + p.dst_offset + b.dst_offset);
        started(moving, worker_->take_later(a->bytes, into, nullptr));
        bytes.erase(a);
      } else {
        const auto* from = reinterpret_cast<const std::byte*>(s.regions.at(p.src_region).address + p.src_offset + b.src_offset);
        std::vector<std::byte> header;  // not s.data_header, which the watcher's reports use
        started(moving, send_range(s, m.value, m.downloads[i], from, nullptr, header));
      }
    }
    // A send by rendezvous is done once the client took the bytes: the device's memory may
    // change only after, so the value waits for them.
    emptied.uploads.clear();
    emptied.downloads.clear();
    move_then_run(c, s, emptied, std::move(moving), false);
  }

  // Hands a value s took direct bytes for over once the device reached the value before it.
  bool retry_direct(Client& c, Served& s) {
    const bool gone = s.lost || s.stopped;
    if (!gone && !reached_before(s, s.direct->submit.value)) return false;
    Served::Direct d = std::move(*s.direct);
    s.direct.reset();
    s.room_wanted = s.parked.has_value();
    if (gone) {
      drop_all(d.bytes);
      return false;
    }
    take_direct(c, s, d.submit, std::move(d.bytes));
    hand_over_ahead(c, s);
    return true;
  }

  void drop_all(std::vector<Served::Arrived>& bytes) {
    for (auto& a : bytes) worker_->drop(a.bytes);
    bytes.clear();
  }

  // Hands value m, its bytes in place, to the device: at once if room fits, else once room
  // frees (s.parked).
  void run(Client& c, Served& s, const wire::Submit& m) {
    switch (make_room(c, s, m.value)) {
      case Room::Fits:
        return give(c, s, m);
      case Room::Later: {
        const auto now = std::chrono::steady_clock::now();
        s.parked = Served::Parked{m, __atomic_load_n(&s.word, __ATOMIC_ACQUIRE), now + kWatchSlice,
                                  now + kRoomWaitLimit};
        s.room_wanted = true;
        return;
      }
      case Room::Lost:
        return;
    }
  }

  enum class Landed { All, Waiting, Lost };

  // Whether the Data of m's uploads all came: All (handed to `bytes`), Waiting while some
  // have not, Lost (the device lost, their bytes dropped) where those that came are not m's
  // uploads.
  Landed landed(Client& c, Served& s, const wire::Submit& m, std::vector<Served::Arrived>& bytes) {
    auto it = s.arrived.find(m.value);
    const std::size_t came = it == s.arrived.end() ? 0 : it->second.size();
    if (came < m.uploads.size()) return Landed::Waiting;
    if (it != s.arrived.end()) {
      bytes = std::move(it->second);
      s.arrived.erase(it);
    }
    auto order = [](const wire::Range& a, const wire::Range& b) {
      return std::tie(a.region, a.offset, a.length) < std::tie(b.region, b.offset, b.length);
    };
    std::vector<wire::Range> got, wanted = m.uploads;
    for (const auto& a : bytes) got.push_back(a.range);
    std::sort(got.begin(), got.end(), order);
    std::sort(wanted.begin(), wanted.end(), order);
    if (got != wanted) {
      drop_all(bytes);
      lose(c, s, fmt::format("value {}: its Data are not the ranges of mapped host memory its parts read", m.value));
      return Landed::Lost;
    }
    return Landed::All;
  }

  // A Data message from the client at `from`: bytes of a window for a value not yet handed
  // over, taken straight into the window; the value waiting for them is handed over once the
  // last one is in. Anything else loses the device (or, before the token, is dropped).
  void on_data(ucp_ep_h from, std::span<const std::byte> header, ucx::Payload& bytes) {
    auto it = clients_.find(from);
    if (it == clients_.end() || !it->second.admitted) return worker_->drop(bytes), drop("data before the token");
    Client& c = it->second;
    auto decoded = wire::decode(header);
    auto* d = decoded ? std::get_if<wire::Data>(&*decoded) : nullptr;
    if (!d) return worker_->drop(bytes), drop(decoded ? "a data message whose header is no Data" : decoded.error());
    Served* s = device(c, d->device);
    if (!s || s->lost || s->stopped) return worker_->drop(bytes);
    const Held* w = window(*s, d->region, d->offset, d->length);
    if (!w || bytes.length() != d->length) {
      worker_->drop(bytes);
      return lose(c, *s, fmt::format("value {}: Data outside what the client mapped", d->value));
    }
    if (d->value <= last_received(*s) && !(s->awaiting && s->awaiting->value == d->value)) {
      worker_->drop(bytes);
      return lose(c, *s, fmt::format("value {}: Data after the value was handed over", d->value));
    }
    auto& records = s->arrived[d->value];
    if (d->value > s->submitted + kAheadMost || records.size() >= kDataMost) {
      worker_->drop(bytes);
      return lose(c, *s, fmt::format("value {}: Data too far ahead, or too many", d->value));
    }
    records.push_back({{d->region, d->offset, d->length}, worker_->keep(bytes)});
    if (s->awaiting && s->awaiting->value == d->value) {
      wire::Submit m = std::move(*s->awaiting);
      s->awaiting.reset();
      hand_over(c, *s, m);
      hand_over_ahead(c, *s);
    }
  }

  enum class Room { Fits, Later, Lost };

  // Asks room for s.parts, growing the device's queues while it answers RIG_GROW. Later (once
  // what is submitted is committed, so that the device frees room) when it answers RIG_LATER;
  // Lost, the device lost naming value v, when it never fits or growing fails.
  Room make_room(Client& c, Served& s, std::uint64_t v) {
    char why[RIG_WHY];
    const auto count = std::uint32_t(s.parts.size());
    for (int grows = 0;; ++grows) {
      why[0] = 0;
      const int room = s.c->room(s.facts.edge, s.parts.data(), count, 0, why);
      if (room == RIG_FITS) return Room::Fits;
      if (room == RIG_NEVER || grows >= kGrowsMost) {
        why[RIG_WHY - 1] = 0;
        lose(c, s, fmt::format("value {} never fits: {}", v, why));
        return Room::Lost;
      }
      if (room != RIG_GROW) break;
      try {
        if (std::holds_alternative<edge::Short>(s.driver->grow())) {
          lose(c, s, fmt::format("value {}: no memory to grow its queues", v));
          return Room::Lost;
        }
      } catch (const std::exception& e) {
        lose(c, s, fmt::format("fault while growing its queues: {}", e.what()));
        return Room::Lost;
      }
    }
    // LATER: room frees once the device reaches a value.
    const char* failure = nullptr;
    if (s.c->commit(s.facts.edge, s.submitted, &failure) == RIG_FAILED) {
      lose(c, s, failure ? failure : "commit failed");
      return Room::Lost;
    }
    return Room::Later;
  }

  // Tries s's parked value again if the word moved or kWatchSlice passed since its last try:
  // hands it over if room fits now, and the values that came after it. True if it did. Drops
  // it if its device was lost or stopped; loses the device, naming the value, once the word
  // stood still for kRoomWaitLimit.
  bool retry(Client& c, Served& s) {
    Served::Parked& p = *s.parked;
    if (s.lost || s.stopped) return drop_parked(s), false;
    const auto now = std::chrono::steady_clock::now();
    const std::uint64_t word = __atomic_load_n(&s.word, __ATOMIC_ACQUIRE);
    if (word != p.word) {
      p.word = word;
      p.until = now + kRoomWaitLimit;
    } else if (now < p.next_try) {
      return false;
    }
    p.next_try = now + kWatchSlice;
    if (!admit(c, s, p.submit)) return drop_parked(s), false;
    switch (make_room(c, s, p.submit.value)) {
      case Room::Fits:
        give(c, s, p.submit);
        drop_parked(s);
        hand_over_ahead(c, s);
        return true;
      case Room::Later:
        if (now < p.until) return false;
        lose(c, s, fmt::format("value {} never fits: its device's queues had no room for it and its word stood "
                               "at {} for {} ms", p.submit.value, word,
                               std::chrono::duration_cast<std::chrono::milliseconds>(kRoomWaitLimit).count()));
        return drop_parked(s), true;
      case Room::Lost:
        return drop_parked(s), true;
    }
    return false;
  }

  static void drop_parked(Served& s) {
    s.parked.reset();
    s.room_wanted = false;
  }

  // Submits m, whose parts s.parts holds and for which room fits, and commits it where its
  // driver did not.
  void give(Client& c, Served& s, const wire::Submit& m) {
    if (!m.downloads.empty()) {
      std::lock_guard g(s.mutex);
      s.downloads[m.value] = m.downloads;
    }
    // A timed value's times, where its driver writes them before its word shows it (no
    // settle, which would be a second caller of its C functions beside the service's).
    std::uint64_t* times = nullptr;
    if (m.timed && s.c->settle == nullptr) {
      std::lock_guard g(s.mutex);
      times = s.times[m.value].data();
      times[0] = times[1] = 0;
    }
    const auto count = std::uint32_t(s.parts.size());
    const char* failure = "the driver gave no reason";
    const int rc = s.c->submit(s.facts.edge, s.parts.data(), count, nullptr, 0, m.value, times, &failure);
    if (rc == RIG_FAILED) return lose(c, s, failure ? failure : "submit failed");
    s.submitted = m.value;
    if (rc == RIG_OK && s.c->commit(s.facts.edge, m.value, &failure) == RIG_FAILED)
      return lose(c, s, failure ? failure : "commit failed");
  }

  void on(Client& c, const wire::Commit& m) { device(c, m.device); }

  void on(Client& c, const wire::Grow& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    try {
      auto grown = s->driver->grow();
      if (auto* short_of = std::get_if<edge::Short>(&grown)) return reply(c, m.request, wire::kNone, {}, short_of->bytes);
    } catch (const std::exception& e) {
      lose(c, *s, fmt::format("fault while growing its queues: {}", e.what()));
      return reply(c, m.request, wire::kError, e.what());
    }
    reply(c, m.request, wire::kOk);
  }

  // A Stop whose device still has work in flight is answered once that work is done (at most
  // kDrainLimit), from the idle rounds: meanwhile the progress thread serves the others.
  void on(Client& c, const wire::Stop& m) {
    Served* s = device(c, m.device);
    if (!s || s->stop_asked) return;
    // What the device has not been given is dropped, as its stop drops its queued work.
    drop_parked(*s);
    s->ahead.clear();
    if (!drained(*s)) {
      s->stop_asked = Served::StopAsked{m.request, m.why, std::chrono::steady_clock::now() + kDrainLimit};
      s->draining = true;
      return;
    }
    if (!s->stopped) stop_now(*s, m.why);
    answer_stop(c, *s, m.request);
  }

  // Tells the client how far s's word got by its stop.
  void answer_stop(Client& c, Served& s, std::uint64_t request) {
    std::uint64_t sent;
    {
      std::lock_guard g(s.mutex);
      sent = s.sent;
    }
    reply(c, request, wire::kOk, {}, sent);
  }

  // Finishes the requests w started: UCX's reason for the first that failed, or nullopt.
  static std::optional<std::string> finish_all(ucx::Worker& w, std::vector<ucs_status_ptr_t>& requests) {
    std::optional<std::string> failed;
    for (auto r : requests)
      if (const ucs_status_t st = w.finish(r); st != UCS_OK && !failed) failed = ucx::status_text(st);
    requests.clear();
    return failed;
  }

  // The window `region` of s if [offset, offset + n) lies in it, else null.
  static const Held* window(const Served& s, std::uint64_t region, std::uint64_t offset, std::uint64_t n) {
    auto it = s.regions.find(region);
    if (it == s.regions.end() || !it->second.window) return nullptr;
    if (offset > it->second.bytes || n > it->second.bytes - offset) return nullptr;
    return &it->second;
  }

  // Whether the boxes, from `base` bytes into region r, stay inside it.
  static bool inside(const Held& r, std::uint64_t base, const std::vector<wire::Box>& boxes, bool src) {
    for (const auto& b : boxes) {
      if (b.rows == 0 || b.width == 0) continue;
      const std::uint64_t offset = src ? b.src_offset : b.dst_offset, pitch = src ? b.src_pitch : b.dst_pitch;
      unsigned __int128 end = (unsigned __int128)base + offset + (unsigned __int128)(b.rows - 1) * pitch + b.width;
      if (end > r.bytes) return false;
    }
    return true;
  }

  // Whether `address` lies in memory s's client holds.
  static bool held_address(const Served& s, std::uint64_t address) {
    auto it = s.by_address.upper_bound(address);
    if (it == s.by_address.begin()) return false;
    --it;
    const Held& h = s.regions.at(it->second);
    return address - h.address <= h.bytes;  // one past the end is a buffer's end
  }

  // Turns the wire's parts into s->parts, checking every queue, kind, region, box, entry and
  // reference against what the client holds; false with the reason in why where one is wrong.
  // A fill is a function of the client's process, which the client called at its hand-over:
  // it is left out here, and the parts after it follow what it followed.
  bool translate(Served& s, const std::vector<wire::Part>& in, char* why) {
    s.parts.clear();
    s.placed.assign(in.size(), -1);
    s.boxes.resize(std::max(s.boxes.size(), in.size()));
    s.afters.resize(std::max(s.afters.size(), in.size()));
    for (std::uint32_t i = 0; i < in.size(); ++i) {
      const wire::Part& w = in[i];
      if (w.queue >= s.facts.queues.size())
        return rig_never(why, "part %u: queue %u, but the device has %zu", i, w.queue, s.facts.queues.size()), false;
      for (auto a : w.after)
        if (a >= i) return rig_never(why, "part %u follows part %u, which is not before it", i, a), false;
      if (w.kind == RIG_KIND_FILL) continue;
      auto& after = s.afters[i];
      after.clear();
      for (auto a : w.after)
        if (s.placed[a] >= 0) after.push_back(std::uint32_t(s.placed[a]));
      s.placed[i] = std::int64_t(s.parts.size());
      rig_part& p = s.parts.emplace_back();
      p.queue = w.queue;
      p.kind = w.kind;
      p.after = after.data();
      p.after_count = std::uint32_t(after.size());
      if (w.kind == RIG_KIND_WORDS) {
        p.work.words = {w.words.data(), w.words.size()};
      } else if (w.kind == RIG_KIND_COPY) {
        if (w.fill < -1 || w.fill > 255) return rig_never(why, "part %u: a fill with %d, not a byte", i, w.fill), false;
        auto dst = s.regions.find(w.dst_region);
        auto src = s.regions.find(w.src_region);
        if (dst == s.regions.end() || (w.fill < 0 && src == s.regions.end()))
          return rig_never(why, "part %u: a copy between regions the client does not hold", i), false;
        if (!inside(dst->second, w.dst_offset, w.boxes, false) ||
            (w.fill < 0 && !inside(src->second, w.src_offset, w.boxes, true)))
          return rig_never(why, "part %u: a copy's boxes run outside their regions", i), false;
        auto& boxes = s.boxes[i];
        boxes.clear();
        for (const auto& b : w.boxes)
          boxes.push_back({b.src_offset, b.dst_offset, b.width, b.rows, b.src_pitch, b.dst_pitch});
        auto& c = p.work.copy;
        c.dst = dst->second.address ? dst->second.address + w.dst_offset : 0;
        c.dst_handle = dst->second.handle;
        c.dst_offset = w.dst_offset;
        if (w.fill < 0) {
          c.src = src->second.address ? src->second.address + w.src_offset : 0;
          c.src_handle = src->second.handle;
          c.src_offset = w.src_offset;
        }
        c.boxes = boxes.data();
        c.count = std::uint32_t(boxes.size());
        c.fill = w.fill;
      } else if (w.kind == RIG_KIND_LAUNCH) {
        if (w.entry == 0 || w.entry > s.entries.size())
          return rig_never(why, "part %u: a launch of entry %llu, which the client was not given", i,
                           (unsigned long long)w.entry), false;
        const EntryRecord& e = s.entries[w.entry - 1];
        if (!s.images.contains(e.image))
          return rig_never(why, "part %u: a launch of a function of an unloaded image", i), false;
        for (auto r : w.refs) {
          if (std::uint64_t(r) + 8 > w.params.size())
            return rig_never(why, "part %u: a reference at byte %u of %zu parameter bytes", i, r, w.params.size()), false;
          std::uint64_t address;
          std::memcpy(&address, w.params.data() + r, 8);
          if (!held_address(s, address))
            return rig_never(why, "part %u: a reference at byte %u to memory the client does not hold", i, r), false;
        }
        auto& l = p.work.launch;
        l.code = e.code;
        l.launch = e.launch;
        std::memcpy(l.groups, w.groups, sizeof l.groups);
        std::memcpy(l.threads, w.threads, sizeof l.threads);
        l.shared = w.shared;
        l.param_bytes = std::uint32_t(w.params.size());
        l.params = w.params.data();
        l.ref_offsets = w.refs.data();
        l.ref_count = std::uint32_t(w.refs.size());
      } else {
        return rig_never(why, "part %u: kind %u, which a remote device does not run", i, w.kind), false;
      }
    }
    return true;
  }

  // Runs the frees and unloads whose values the client has been told of.
  void settle(Served& s) {
    std::uint64_t sent;
    {
      std::lock_guard g(s.mutex);
      sent = s.sent;
    }
    // All of them once the device stopped or was lost, unless bytes still move in or out of
    // its memory.
    const bool all = (s.stopped || s.lost) && !bytes_moving(s);
    std::erase_if(s.frees, [&](const auto& f) {
      if (f.first > sent && !all) return false;
      free_region(s, f.second);
      return true;
    });
    std::erase_if(s.unloads, [&](const auto& u) {
      if (u.first > sent && !all) return false;
      unload(s, u.second);
      return true;
    });
  }

  void free_region(Served& s, std::uint64_t id) {
    auto it = s.regions.find(id);
    if (it == s.regions.end()) return;
    s.driver->free(it->second.region);
    if (it->second.window) {
      worker_->unregister(it->second.window_memh);
      std::free(it->second.window);
    } else {
      held_ -= it->second.bytes;
      if (it->second.address) s.by_address.erase(it->second.address);
    }
    std::lock_guard g(s.mutex);
    s.regions.erase(it);
  }

  // Waits for s's submitted work, at most kDrainLimit.
  void drain(Served& s) {
    const auto until = std::chrono::steady_clock::now() + kDrainLimit;
    while (!s.stopped && !s.lost && __atomic_load_n(&s.word, __ATOMIC_ACQUIRE) < s.submitted &&
           std::chrono::steady_clock::now() < until) {
      try {
        s.driver->sleep(s.submitted, kWatchSlice);
      } catch (const std::exception&) {
        return;
      }
    }
  }

  // Stops s's driver once its submitted work is done (at most kDrainLimit) and the watcher
  // has ended (nothing runs beside stop), telling the client first how far its word got.
  void stop(Served& s, std::string_view why) {
    drain(s);
    stop_now(s, why);
  }
  // Stops s's driver at once, once the watcher has ended.
  void stop_now(Served& s, std::string_view why) {
    s.stopped = true;
    s.stopping = true;
    if (s.watcher.joinable()) s.watcher.join();
    report_now(s);
    s.driver->stop(why);
    report_now(s);
  }

  // Sends Reached if s's word moved since the last one, once what its work wrote to windows
  // is put back into the client's memory: at once if it needs none, else once the client
  // took those bytes (s.putting, looked at again from the progress thread's idle rounds).
  // True if it sent one (s's report_mutex held).
  bool report(Served& s) {
    if (s.putting) return put(s);
    const std::uint64_t w = __atomic_load_n(&s.word, __ATOMIC_ACQUIRE);
    std::uint64_t from;
    {
      std::lock_guard g(s.mutex);
      from = s.sent;
    }
    if (w <= from) return false;
    wire::Reached r{s.id, from, w, {}};
    std::vector<ucs_status_ptr_t> sends;
    {
      std::lock_guard g(s.mutex);
      for (auto it = s.times.begin(); it != s.times.end() && it->first <= w; it = s.times.erase(it))
        r.times.push_back({it->first, it->second[0], it->second[1]});
      for (auto it = s.downloads.begin(); it != s.downloads.end() && it->first <= w;) {
        for (const auto& d : it->second) {
          const Held& h = s.regions.at(d.region);  // checked at submit; freed only once sent
          if (s.ep) sends.push_back(send_range(s, it->first, d, h.window + d.offset, h.window_memh, s.data_header));
        }
        it = s.downloads.erase(it);
      }
    }
    if (!sends.empty()) {
      // By rendezvous a send is done once the client took its bytes: the Reached after them
      // finds them in its memory.
      s.putting = Served::Putting{std::move(r), std::move(sends), {}};
      s.putting_now = true;
      return put(s);
    }
    reached(s, r);
    return true;
  }

  // Sends s.putting's Reached once its Data are in the client's memory, or loses the device
  // where one failed: true once it did (s's report_mutex held).
  bool put(Served& s) {
    Served::Putting& p = *s.putting;
    if (!completed(*s.worker, p.sends, p.failed)) return false;
    if (p.failed) {
      // The client cannot see those bytes: its device is lost, not its word raised.
      if (!s.lost.exchange(true) && s.ep) {
        wire::encode(wire::Lost{s.id, fmt::format("sending value {}'s bytes into the client's memory failed: {}",
                                                  p.reached.to, *p.failed)},
                     s.reached_bytes);
        s.worker->send(s.ep, s.reached_bytes);
      }
      std::lock_guard g(s.mutex);
      s.sent = p.reached.to;
      s.reported.notify_all();
    } else {
      reached(s, p.reached);
    }
    s.putting.reset();
    s.putting_now = false;
    return true;
  }

  // Sends r, and records the word it gives (s's report_mutex held).
  static void reached(Served& s, const wire::Reached& r) {
    if (s.ep) {
      wire::encode(r, s.reached_bytes);
      s.worker->send(s.ep, s.reached_bytes);
    }
    std::lock_guard g(s.mutex);
    s.sent = r.to;
    s.reported.notify_all();
  }

  // Whether the next report of s puts bytes back into the client's memory.
  static bool puts_due(Served& s) {
    const std::uint64_t w = __atomic_load_n(&s.word, __ATOMIC_ACQUIRE);
    std::lock_guard g(s.mutex);
    return w > s.sent && !s.downloads.empty() && s.downloads.begin()->first <= w;
  }
  bool report_now(Served& s) {
    std::lock_guard r(s.report_mutex);
    return report(s);
  }

  // Sends Reached each time s's word moves. A report that puts bytes back into the client's
  // memory is the progress thread's, which the watcher wakes for it: one thread then
  // progresses the worker through the transfer, where two would fight over UCX's spin lock
  // (a fifth of the agent's time in a 256 MiB copy from the device, measured).
  void watch(Served& s) {
    while (!s.stopping.load()) {
      if (puts_due(s) || s.putting_now.load()) {
        std::unique_lock g(s.mutex);
        const std::uint64_t sent = s.sent;
        s.worker->wake();
        s.reported.wait_for(g, kWatchSlice, [&] { return s.sent != sent || s.stopping.load(); });
        continue;
      }
      if (report_now(s)) {
        if (s.draining.load() || s.room_wanted.load()) s.worker->wake();  // a Stop or a parked value waits
        continue;
      }
      // Not asleep in the driver while the progress thread reports: the device's store of
      // its word would then wake this thread for nothing, a system call and a thread that
      // takes a CPU from those on the value's path.
      if (s.worker->spinning(kSpinningLook)) {
        s.worker->await_sleep(kWatchSlice);
        continue;
      }
      std::uint64_t from;
      {
        std::lock_guard g(s.mutex);
        from = s.sent;
      }
      try {
        s.driver->sleep(from + 1, kWatchSlice);
      } catch (const std::exception& e) {
        if (!s.lost.exchange(true)) {
          wire::encode(wire::Lost{s.id, e.what()}, s.reached_bytes);
          s.worker->send(s.ep, s.reached_bytes);
        }
        std::this_thread::sleep_for(kWatchSlice);
      }
    }
  }

  // A client went: its submitted work runs out (at most kDrainLimit), then everything it
  // held is freed.
  void on(Client& c, const wire::Close& m) {
    Served* s = device(c, m.device);
    if (!s) return;
    if (bytes_moving(*s)) {
      // Handed over from the idle rounds once they are there: the reaper waits for no client.
      s->closing = true;
      return;
    }
    reap_device(c.devices[m.device]);
  }

  // The agent goes: the client's endpoint is closed first, once no watcher sends on it, so
  // that the bytes still on their way to or from it are cancelled rather than waited for (a
  // client that stopped taking them would hold the agent's end); then its devices go.
  void leave(Client& c) {
    for (auto& s : c.devices) {
      if (!s) continue;
      s->stopping = true;
      if (s->watcher.joinable()) s->watcher.join();
      s->ep = nullptr;  // nothing is sent to it from here on
    }
    if (worker_) worker_->close(c.ep);
    for (auto& s : c.devices)
      if (s) release(*s);
    c.devices.clear();
  }

  // Stops s's driver (stop) and frees what its client held on it.
  void release(Served& s) {
    drop_parked(s);
    if (s.direct) drop_all(s.direct->bytes);
    s.direct.reset();
    for (auto& [v, bytes] : s.arrived) drop_all(bytes);
    s.arrived.clear();
    if (!s.stopped) stop(s, "its client let it go");
    // Bytes still on their way (the client went, or its endpoint was closed: they end at
    // once), before the memory they move goes.
    if (s.moving) finish_all(*worker_, s.moving->requests);
    s.moving.reset();
    if (s.putting) finish_all(*worker_, s.putting->sends);
    s.putting.reset();
    s.putting_now = false;
    settle(s);
    while (!s.regions.empty()) free_region(s, s.regions.begin()->first);
    while (!s.images.empty()) unload(s, s.images.begin()->first);
    s.driver.reset();
  }

  ServeOptions options_;
  std::string token_;
  std::string address_;
  std::unique_ptr<ucx::Worker> worker_;
  std::map<ucp_ep_h, Client> clients_;  // the progress thread's
  std::vector<std::byte> out_;
  std::mutex reap_mutex_;
  std::condition_variable reap_cv_;
  std::deque<Reaping> reaping_;
  bool quit_ = false;
  std::thread reaper_;
  std::atomic<std::size_t> client_count_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> held_{0};
};

}  // namespace

Result<std::unique_ptr<Agent>> Agent::start(ServeOptions options) {
  auto t = token(options.token);
  if (!t) return std::unexpected(t.error());
  std::vector<std::string> can = known_devices();
  for (const auto& o : options.openers) can.push_back(o.name);
  for (const auto& d : options.devices)
    if (std::find(can.begin(), can.end(), d) == can.end())
      return std::unexpected(fmt::format("rig serve: no device {} here; it serves {}", d, fmt::join(can, ", ")));
  auto agent = std::make_unique<AgentImpl>(std::move(options), std::move(*t));
  auto begun = agent->begin();
  if (!begun) return std::unexpected(begun.error());
  return agent;
}

}  // namespace rig::remote
