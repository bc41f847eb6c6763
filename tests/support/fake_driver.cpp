// fake_driver.cpp — a complete driver over host memory (fake_driver.hpp).
//
// Read it as the skeleton of a driver, in the contract's order: facts, memory, code, the
// five C functions, then "the device", which runs the queue in Control::step. Each
// obligation of spec/Rig_edge.txt is kept where a comment quotes it. Values run one after
// another, each once the previous one has completed (device order), and each value's parts
// run in the order they were handed (prefix order).
#include "fake_driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

namespace rig::fake {

constexpr std::size_t kAlignment = 256;         // the facts' alignment
constexpr std::uint32_t kSharedMax = 64 << 10;  // group-shared bytes a launch may use
constexpr std::string_view kMagic = "fake-image\n";

// The word is read with acquire and raised with release order: whoever sees v in it, rig
// or another device's queue, also sees the work of v.
static std::uint64_t load(const volatile std::uint64_t* w) {
  return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}
static void raise(volatile std::uint64_t* w, std::uint64_t v) {
  __atomic_store_n(w, v, __ATOMIC_RELEASE);
}

// A function of a fake image, from its line "NAME PARAMS THREADS" ("-": unknown).
struct Function {
  std::string name;
  std::optional<std::size_t> params, threads;
};

// Injected answers for one kind of call: the n-th call, or each with probability p.
struct Plan {
  std::uint64_t nth = 0;
  double p = 0;
  std::mt19937_64 rng;
  std::string why;
  bool hits(std::uint64_t n) {
    return n == nth || (p > 0 && std::uniform_real_distribution<>(0, 1)(rng) < p);
  }
};
enum class Answer { Go, NoRoom, Fail };

// What the devices of one opener share with the test: memory, images, kernels, plans, logs.
struct Control::State {
  mutable std::recursive_mutex m;
  std::condition_variable_any moved;  // notified when the queue ran, faulted or stopped
  Driver* current = nullptr;          // the device make opened last, while it lives
  std::optional<std::string> stopped;
  struct Block {
    std::uintptr_t host;
    std::size_t bytes;
    bool owned;  // allocated, not mapped
    bool pinned = false;  // Pinned memory: the host addresses it even where it addresses no other
  };
  std::map<std::uintptr_t, Block> regions;  // an allocation's id is its host address
  std::uintptr_t next_mapping = 1;          // a mapping's id is a count, below any address
  std::size_t memory = 0, live_bytes = 0;
  std::map<edge::ImageId, std::vector<Function>> images;
  edge::ImageId next_image = 1;
  std::map<std::string, Kernel, std::less<>> kernels;
  std::array<Plan, 10> fail, no_room;
  std::array<std::uint64_t, 10> calls{};
  std::vector<Ran> log;
  std::vector<std::string> violations;
  std::deque<std::string> messages;  // failures handed to rig: they outlive the device

  ~State() {  // frees what rig left, once live_regions could report it
    for (auto& [id, b] : regions)
      if (b.owned) std::free(reinterpret_cast<void*>(b.host));
  }
  Answer ask(Call c, std::string& why) {
    auto n = ++calls[int(c)];
    if (fail[int(c)].hits(n)) return why = fail[int(c)].why, Answer::Fail;
    return no_room[int(c)].hits(n) ? Answer::NoRoom : Answer::Go;
  }
  void violate(std::string what) {
    fmt::print(stderr, "fake driver: rig broke the contract: {}\n", what);
    violations.push_back(std::move(what));
  }
  std::uintptr_t take(std::size_t bytes) {  // host memory for a new region, or 0
    std::size_t size = std::max<std::size_t>((bytes + kAlignment - 1) / kAlignment, 1) * kAlignment;
    if (live_bytes + size > memory) return 0;
    auto host = reinterpret_cast<std::uintptr_t>(std::aligned_alloc(kAlignment, size));
    if (host) regions[host] = {host, size, true}, live_bytes += size;
    return host;
  }
  std::byte* reach(std::uint64_t address, std::uint64_t n) {  // if one region holds the bytes
    for (auto& [id, b] : regions)
      if (address >= b.host && address + n <= b.host + b.bytes)
        return reinterpret_cast<std::byte*>(address);
    return nullptr;
  }
};

class Driver final : public edge::Driver {
  using State = Control::State;
  // Every call but signaled and sleep holds a Turn, which takes the lock and checks what rig
  // promises: it calls the driver "at most one at a time per device, and never while a C
  // function of the same device runs", and after stop "none follows but free and unload".
  // rig calls the C functions one at a time, and the C++ functions one at a time; a C++
  // function may run beside a C function (edge.hpp).
  static bool is_c_function(std::string_view what) {
    return what == "room" || what == "submit" || what == "commit" || what == "settle" || what == "measures";
  }
  struct Turn {
    Driver& d;
    std::atomic<bool>& busy;
    bool overlap;
    std::lock_guard<std::recursive_mutex> lock;
    Turn(Driver& d, std::string_view what, bool after_stop = false)
        : d(d), busy(is_c_function(what) ? d.busy_c_ : d.busy_), overlap(busy.exchange(true)), lock(d.s_.m) {
      if (overlap) d.s_.violate(fmt::format("{} called while another call is in flight", what));
      if (d.stopped_ && !after_stop) d.s_.violate(fmt::format("{} called after stop", what));
    }
    ~Turn() { busy = overlap; }
  };
  // A part as the queue keeps it: a copy, since "a copy part's fields may differ from one
  // call to the next" and a launch's parameters live only during submit.
  struct Queued {
    rig_part part;
    std::vector<std::uint32_t> words, refs;
    std::vector<rig_box> boxes;
    std::vector<std::byte> params;
  };
  struct Value {
    std::uint64_t v;
    std::vector<rig_wait> waits;
    std::vector<Queued> parts;
    std::uint32_t entries;  // queue entries it holds: one per part, one per wait
    std::uint64_t* times;   // where submit was asked to write its start and end, or null
  };
  // The facts' edge: "the state's first member must point to the driver's struct rig_driver".
  struct Edge {
    const rig_driver* table;
    Driver* self;
  };

  std::shared_ptr<Control> control_;
  State& s_;
  Options o_;
  std::vector<Queue> queues_;
  Edge edge_;
  volatile std::uint64_t* word_;
  std::uint32_t capacity_, used_ = 0;
  std::deque<Value> queue_;  // values submitted, not yet run
  std::uint64_t base_, submitted_, committed_;
  std::optional<std::string> fault_;
  bool stopped_ = false, running_ = false;
  std::atomic<bool> busy_{false};
  std::atomic<bool> busy_c_{false};  // a C function is in flight
  std::map<std::uint64_t, std::vector<std::uint64_t>> rows_;  // measures of timed launches

 public:
  Driver(std::shared_ptr<Control> control, Options o, volatile std::uint64_t* word)
      : control_(std::move(control)), s_(*control_->s_), o_(std::move(o)), capacity_(o_.capacity) {
    queues_.push_back({"COMPUTE:0", {Kind::Words, Kind::Fill, Kind::Copy, Kind::Launch}});
    if (o_.copy_queue) queues_.push_back({"COPY:0", {Kind::Words, Kind::Copy, Kind::Fill}});
    edge_ = {o_.counters.empty() ? &kTable : &kMeasuring, this};
    // "the device's values start after the value the word holds"
    base_ = submitted_ = committed_ = load(word);
    word_ = word;
    std::lock_guard l(s_.m);
    if (o_.own_word) {  // a region, which "rig frees (Driver.free) only after Driver.stop"
      word_ = reinterpret_cast<std::uint64_t*>(s_.take(8));
      if (!word_) throw std::runtime_error("no memory for the device's own word");
      raise(word_, base_);
    }
    s_.current = this, s_.stopped.reset();
  }

  ~Driver() override {
    std::lock_guard l(s_.m);
    if (!stopped_) s_.violate("the driver was dropped without stop");
    if (s_.current == this) s_.current = nullptr;
  }

  edge::Facts facts() override {
    Turn t(*this, "facts");
    edge::Facts f;
    f.arch = o_.arch, f.budget = o_.budget, f.queues = queues_;
    f.copy_engine = o_.copy_queue ? 1 : 0;  // "COPY:0", or the first queue, which runs Copy too
    f.completion = o_.completion;           // Store or Host: either way, step writes the word
    f.waits = o_.waits, f.may_block = o_.may_block, f.hang_ms = o_.hang_ms;
    f.maps_host = o_.maps_host;
    f.maps_host_cheaply = o_.maps_host_cheaply;
    f.host_addresses = o_.host_addresses;
    f.alignment = kAlignment, f.counters = o_.counters;
    f.word = word_, f.edge = &edge_;
    return f;
  }

  // ---- Memory: host memory, whose device address is its host address.

  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override {
    Turn t(*this, "alloc");
    if (no_room(Call::Alloc)) return std::nullopt;
    if (memory == Memory::Pinned && o_.host_addresses)  // "rig asks for none on a device that declares host_addresses"
      s_.violate("alloc of Pinned memory on a device that declares host_addresses");
    // Over Options::memory: no room, and "rig reclaims memory and asks again".
    auto host = s_.take(bytes);
    if (host && memory == Memory::Pinned) s_.regions[host].pinned = true;
    return host ? std::optional(edge::Region{host}) : std::nullopt;
  }

  // free "returns a region that alloc, map_host or map_peer made", also after stop.
  void free(edge::Region r) override {
    Turn t(*this, "free", true);
    auto b = block(r);
    s_.regions.erase(r.id);
    if (b.owned) std::free(reinterpret_cast<void*>(b.host)), s_.live_bytes -= b.bytes;
  }

  edge::Location locate(edge::Region r) override {
    Turn t(*this, "locate");
    auto b = block(r);  // host_addresses: "with a host address in each one's location"
    auto host = b.host;
    if (!o_.host_addresses && !b.pinned) return {host, std::nullopt, std::intptr_t(host)};
    return {host, host, std::intptr_t(host)};
  }

  // maps_host: the device maps host memory "that starts on a page", as it is.
  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes) override {
    Turn t(*this, "map_host");
    if (!o_.maps_host) {
      s_.violate("map_host on a device whose facts say it maps no host memory");
      return edge::Never{};
    }
    if (no_room(Call::Map)) return edge::NoRoom{};
    s_.regions[s_.next_mapping] = {host, bytes, false};
    return edge::Region{s_.next_mapping++};
  }

  // ---- Code: a fake image is the text "fake-image\n", then "NAME PARAMS THREADS" lines.

  Result<edge::Code> image(std::span<const std::byte> binary) override {
    Turn t(*this, "image");
    std::string why;
    if (ask(Call::Image, why) == Answer::Fail) return std::unexpected(why);
    std::string text(reinterpret_cast<const char*>(binary.data()), binary.size());
    if (!text.starts_with(kMagic)) return std::unexpected("not a fake image: no \"fake-image\"");
    std::vector<Function> functions;
    std::istringstream lines(text.substr(kMagic.size()));
    for (std::string line, params, threads, rest; std::getline(lines, line);) {
      std::istringstream in(line);
      Function f;
      if (!(in >> f.name)) continue;  // a blank line
      bool ok = bool(in >> params >> threads) && !(in >> rest);
      f.params = number(params, ok), f.threads = number(threads, ok);
      if (!ok) return std::unexpected(fmt::format("bad line \"{}\" in a fake image", line));
      functions.push_back(std::move(f));
    }
    auto id = s_.next_image++;
    if (!o_.place_images) {
      s_.images[id] = std::move(functions);
      return edge::Loaded{id};
    }
    // Place: "The driver must make nothing on the device before the function is called".
    return edge::Place{text.size(), [this, id, functions, text](edge::Region) {
                         std::lock_guard l(s_.m);
                         s_.images[id] = functions;
                         return std::pair{id, text};
                       }};
  }

  edge::EntryAnswer entry(edge::ImageId image, std::string_view name) override {
    Turn t(*this, "entry");
    if (no_room(Call::Entry)) return edge::NoMemory{kAlignment};
    auto it = s_.images.find(image);
    if (it == s_.images.end()) {
      s_.violate(fmt::format("entry of image {}, which is not loaded", image));
      throw edge::Fault(fmt::format("unknown image {}", image));
    }
    for (auto& f : it->second)  // launch: "what the driver's submit reads to launch the function"
      if (f.name == name) return edge::Entry{std::uintptr_t(&f), &f, f.params, f.threads};
    return edge::Absent{};
  }

  void unload(edge::ImageId image) override {
    Turn t(*this, "unload", true);
    if (!s_.images.erase(image)) s_.violate(fmt::format("unload of image {}, not loaded", image));
  }

  // grow doubles the queues' entries up to grow_to: "the next room puts it into the queues".
  edge::GrowAnswer grow() override {
    Turn t(*this, "grow");
    if (no_room(Call::Grow)) return edge::Short{std::size_t(o_.grow_to) * 64};
    capacity_ = std::min(std::max(capacity_ * 2, 1u), o_.grow_to);
    return edge::Grown{};
  }

  // ---- The C functions. "rig calls the five one at a time for each device, with room before
  // each submit." "A submit, commit, settle or measures that returns RIG_FAILED sets *failure
  // to the driver's message, which must live as long as the device."

  // room: RIG_NEVER "for parts that name work it does not run or have kind 0, and for a
  // launch whose grid or group is empty or exceeds the device's or the function's limits";
  // else by entries: FITS, LATER (full now), GROW (fits once grown), NEVER (beyond grow_to).
  // A NEVER writes its reason into why, "which part, which limit, the value asked and the
  // limit"; an injected failure writes its own.
  static int room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t waits, char* why) {
    auto& d = self(edge);
    Turn t(d, "room");
    std::string injected;
    if (auto a = d.ask(Call::Room, injected); a != Answer::Go)
      return a == Answer::Fail ? rig_never(why, "%s", injected.c_str()) : RIG_LATER;
    for (std::uint32_t i = 0; i < count; ++i)
      if (d.runs(parts[i], i, why) == RIG_NEVER) return RIG_NEVER;
    std::uint32_t need = count + waits;
    if (need > d.o_.grow_to)
      return rig_never(why, "%u parts and %u waits take %u queue entries, over the %u its queues grow to", count,
                       waits, need, d.o_.grow_to);
    if (need > d.capacity_) return RIG_GROW;
    return d.used_ + need > d.capacity_ ? RIG_LATER : RIG_FITS;
  }

  // submit "encodes the parts on the device's queues as the work of the value it is given,
  // after the waits it is given and the device's earlier work".
  static int submit(void* edge, rig_part* parts, std::uint32_t count, const rig_wait* waits,
                    std::uint32_t wait_count, std::uint64_t v, std::uint64_t* times,
                    const char** failure) {
    auto& d = self(edge);
    Turn t(d, "submit");
    if (v != d.submitted_ + 1)  // "Its calls are given the values b + 1, b + 2, … in order"
      d.s_.violate(fmt::format("submit of value {} after value {}", v, d.submitted_));
    d.submitted_ = v;  // "the last value rig gave the driver's submit", even if it fails
    std::string why;
    if (d.ask(Call::Submit, why) == Answer::Fail || d.fault_)
      return d.failed(failure, d.fault_.value_or(why));
    Value value{v, {waits, waits + wait_count}, {}, count + wait_count, times};
    for (auto& w : value.waits)  // rig waits on the host for the producers its queues do not
      if (!(w.store ? d.o_.waits.stores : d.o_.waits.hosts))
        d.s_.violate(fmt::format("value {} waits for a producer its queues do not wait for", v));
    for (std::uint32_t i = 0; i < count; ++i) {
      auto& p = parts[i];
      auto& w = p.work;
      Queued q{p, {}, {}, {}, {}};
      if (p.kind == RIG_KIND_WORDS) q.words.assign(w.words.words, w.words.words + w.words.count);
      if (p.kind == RIG_KIND_COPY) q.boxes.assign(w.copy.boxes, w.copy.boxes + w.copy.count);
      if (p.kind == RIG_KIND_LAUNCH) {
        auto* params = static_cast<const std::byte*>(w.launch.params);
        q.params.assign(params, params + w.launch.param_bytes);
        q.refs.assign(w.launch.ref_offsets, w.launch.ref_offsets + w.launch.ref_count);
      }
      // rig_fill: "a C function of compiled code that submit calls with the queue's context
      // ... It returns 0, or a driver-defined error code, which fails the submit."
      if (p.kind == RIG_KIND_FILL) {
        FillQueue ring{p.queue, {}};
        if (int code = w.fill.fn(&ring, w.fill.arg, v))
          return d.failed(failure, fmt::format("the fill of value {} returned {}", v, code));
        q.words = std::move(ring.words);
      }
      value.parts.push_back(std::move(q));
    }
    d.used_ += value.entries;
    d.queue_.push_back(std::move(value));
    // "Every other driver must commit on its own at least once every k values it receives"
    if ((v - d.base_) % d.o_.commit_every != 0) return RIG_OK;
    d.committed_ = v;
    return RIG_COMMITTED;  // "if every value up to its own is committed"
  }

  // commit "lets the work up to v run ... Committing a committed value must do nothing."
  static int commit(void* edge, std::uint64_t v, const char** failure) {
    auto& d = self(edge);
    Turn t(d, "commit");
    std::string why;
    if (d.ask(Call::Commit, why) == Answer::Fail || d.fault_)
      return d.failed(failure, d.fault_.value_or(why));
    if (v > d.submitted_)
      d.s_.violate(fmt::format("commit of value {} beyond the last submitted", v));
    d.committed_ = std::max(d.committed_, std::min(v, d.submitted_));
    return RIG_OK;
  }

  // The fake writes a timed value's times before the word shows it, as "a driver that writes
  // the times itself" does, so settle finds them: "a later call finds the times written and
  // leaves them". (A GPU's work stamps its own memory instead, and settle converts.)
  static int settle(void* edge, std::uint64_t v, std::uint64_t* times, const char** failure) {
    auto& d = self(edge);
    Turn t(d, "settle");
    std::string why;
    if (d.ask(Call::Settle, why) == Answer::Fail) return d.failed(failure, why);
    if (v > load(d.word_)) d.s_.violate(fmt::format("settle of value {} before the word", v));
    if (times[0] || times[1]) return RIG_OK;
    return d.failed(failure, fmt::format("value {} has no times: it was not timed", v));
  }

  // measures "writes the measures of v's launches, in the order of its parts, one row of 3 + n
  // words each ... Given NULL, it frees what it kept of v, ... and later calls do not name v".
  // The table of a device whose facts list no counters holds NULL instead.
  static int measures(void* edge, std::uint64_t v, std::uint64_t* out, const char**) {
    auto& d = self(edge);
    Turn t(d, "measures");
    auto it = d.rows_.find(v);
    if (it == d.rows_.end())
      d.s_.violate(fmt::format("measures of value {}, which has no timed launch, or freed", v));
    else if (out)
      std::copy(it->second.begin(), it->second.end(), out);
    else
      d.rows_.erase(it);
    return RIG_OK;
  }

  // ---- The device: runs committed values in order, then raises the word (Control::step).

  std::size_t run(std::size_t n) {
    auto ready = [](const Value& value) {  // a wait whose word is below its value blocks
      auto met = [](auto& w) { return load(w.word) >= w.value; };
      return std::all_of(value.waits.begin(), value.waits.end(), met);
    };
    std::size_t ran = 0;
    if (running_) return 0;  // a kernel that steps its own queue
    running_ = true;
    while (ran < n && !fault_ && !stopped_ && !queue_.empty() &&
           queue_.front().v <= committed_ && ready(queue_.front())) {
      execute(queue_.front());
      if (fault_) break;
      used_ -= queue_.front().entries;
      // The word "holds the last committed value v such that the work of every value up to v
      // has completed", and "never moves backwards".
      raise(word_, queue_.front().v);
      queue_.pop_front(), ++ran;
    }
    running_ = false;
    s_.moved.notify_all();
    return ran;
  }

  std::uint64_t pending() const { return queue_.size(); }
  void fault(std::string why) { fault_ = std::move(why), s_.moved.notify_all(); }

  std::uint64_t signaled() override {  // "The value the device's own word shows"
    std::lock_guard l(s_.m);
    std::string why;
    if (stopped_) s_.violate("signaled called after stop");
    if (!o_.own_word) s_.violate("signaled called on a device whose word is rig's");
    if (ask(Call::Signaled, why) == Answer::Fail) throw edge::Fault(why);
    return load(word_);
  }

  // sleep "blocks until the word shows v or most has passed ... may return early". A fault
  // shows here: "the host learns, through the word, ... or learns that the device faulted".
  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override {
    std::unique_lock l(s_.m);
    if (stopped_) s_.violate("sleep called after stop");
    if (fault_) throw edge::Fault(*fault_);
    if (o_.runs_when_asleep) run(SIZE_MAX);
    else s_.moved.wait_for(l, most, [&] { return load(word_) >= v || fault_ || stopped_; });
  }

  // stop drops the queue: its work never runs. "After a loss the word may go on to show
  // dropped values": it shows the last submitted value, which rig waits for before it frees
  // the device's memory.
  void stop(std::string_view why) override {
    Turn t(*this, "stop");
    stopped_ = true;
    queue_.clear(), rows_.clear(), used_ = 0;
    if (submitted_ > load(word_)) raise(word_, submitted_);
    if (s_.current == this) s_.stopped = std::string(why);
    s_.moved.notify_all();
  }

 private:
  static const rig_driver kTable, kMeasuring;
  static Driver& self(void* edge) { return *static_cast<Edge*>(edge)->self; }

  // Counts a call and gives its injected answer; every call of a stopped device fails.
  Answer ask(Call c, std::string& why) {
    if (stopped_) return why = "fake: called after stop", Answer::Fail;
    return s_.ask(c, why);
  }
  bool no_room(Call c) {  // for the C++ functions: an injected failure throws edge::Fault
    std::string why;
    auto a = ask(c, why);
    if (a == Answer::Fail) throw edge::Fault(why);
    return a == Answer::NoRoom;
  }
  int failed(const char** failure, std::string why) {
    *failure = s_.messages.emplace_back(std::move(why)).c_str();
    return RIG_FAILED;
  }

  State::Block& block(edge::Region r) {
    auto it = s_.regions.find(r.id);
    if (it != s_.regions.end()) return it->second;
    s_.violate(fmt::format("region {:#x} is not one the driver made, or was freed", r.id));
    throw edge::Fault(fmt::format("unknown region {:#x}", r.id));
  }

  static std::optional<std::size_t> number(const std::string& s, bool& ok) {
    std::size_t n = 0;
    if (s == "-") return std::nullopt;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    ok = ok && ec == std::errc() && end == s.data() + s.size();
    return n;
  }

  // RIG_FITS for a part the device runs, else RIG_NEVER with the reason in why.
  int runs(const rig_part& p, std::uint32_t i, char* why) const {
    if (p.queue >= queues_.size())
      return rig_never(why, "part %u: queue %u, but the device has %zu queues", i, p.queue, queues_.size());
    auto& queue = queues_[p.queue];
    if (p.kind < RIG_KIND_WORDS || p.kind > RIG_KIND_LAUNCH)
      return rig_never(why, "part %u: kind %u, no kind of work", i, p.kind);
    if (std::find(queue.runs.begin(), queue.runs.end(), Kind(p.kind)) == queue.runs.end())
      return rig_never(why, "part %u: queue %s does not run %s", i, queue.name.c_str(),
                       std::array{"", "Words", "Fill", "Copy", "Launch"}[p.kind]);
    if (p.kind != RIG_KIND_LAUNCH) return RIG_FITS;
    auto& l = p.work.launch;
    auto* f = static_cast<const Function*>(l.launch);
    if (!f) return rig_never(why, "part %u: a launch of no function", i);
    for (int k = 0; k < 3; ++k)
      if (l.groups[k] == 0 || l.threads[k] == 0)
        return rig_never(why, "part %u: a launch of %ux%ux%u groups of %ux%ux%u threads has an empty dimension", i,
                         l.groups[0], l.groups[1], l.groups[2], l.threads[0], l.threads[1], l.threads[2]);
    std::uint64_t threads = std::uint64_t(l.threads[0]) * l.threads[1] * l.threads[2];
    if (f->threads && threads > *f->threads)
      return rig_never(why, "part %u: %s threads per group, over %s's limit of %s", i,
                       edge::count_figure(threads).text, f->name.c_str(), edge::count_figure(*f->threads).text);
    if (l.shared > kSharedMax)
      return rig_never(why, "part %u: %s of shared memory, over the limit of %s", i, edge::bytes_figure(l.shared).text,
                       edge::bytes_figure(kSharedMax).text);
    return RIG_FITS;
  }

  void execute(Value& value) {
    std::uint64_t start = rig_now_ns();
    std::vector<std::uint64_t> rows;
    for (auto& q : value.parts) {
      s_.log.push_back({value.v, q.part.queue, Kind(q.part.kind), q.words});  // Words, Fill
      if (q.part.kind == RIG_KIND_COPY) copy(value.v, q.part.work.copy, q.boxes);
      if (q.part.kind != RIG_KIND_LAUNCH || fault_) continue;
      rig_launch l = q.part.work.launch;
      l.params = q.params.data(), l.ref_offsets = q.refs.data();
      auto& name = static_cast<const Function*>(l.launch)->name;
      auto kernel = s_.kernels.find(name);
      if (kernel == s_.kernels.end()) return fault(fmt::format("no kernel defined for {}", name));
      std::uint64_t begin = rig_now_ns();
      try {
        kernel->second(q.params, l);
      } catch (const std::exception& e) {
        return fault(fmt::format("kernel {} of value {} failed: {}", name, value.v, e.what()));
      }
      if (!value.times || o_.counters.empty()) continue;
      rows.insert(rows.end(), {1, begin, rig_now_ns()});  // status 1: measured
      std::uint64_t k = 0;
      for (auto& [counter, values] : o_.counters)
        for (int i = 0; i < values; ++i) rows.push_back(++k);
    }
    // "It writes them before the word shows the value if settle is NULL, and before settle of
    // the value returns otherwise": here, before the word shows it.
    if (value.times) value.times[0] = start, value.times[1] = rig_now_ns();
    if (!rows.empty()) rows_[value.v] = std::move(rows);  // "rig names no value without a launch"
  }

  // A copy of boxes, or a fill of dst with a byte. An end is its address, or for memory named
  // by handle only its handle plus offset. A box outside the device's regions faults it.
  void copy(std::uint64_t v, const rig_copy& c, std::span<const rig_box> boxes) {
    std::uint64_t src = c.src ? c.src : c.src_handle + c.src_offset;
    std::uint64_t dst = c.dst ? c.dst : c.dst_handle + c.dst_offset;
    for (auto& b : boxes) {
      if (b.rows == 0 || b.width == 0) continue;
      auto* to = s_.reach(dst + b.dst_offset, (b.rows - 1) * b.dst_pitch + b.width);
      auto* from = s_.reach(src + b.src_offset, (b.rows - 1) * b.src_pitch + b.width);
      if (c.fill >= 0) from = to;  // a fill reads no source
      if (!to || !from) {
        s_.violate(fmt::format("a copy of value {} reaches outside the device's regions", v));
        return fault(fmt::format("a copy of value {} reaches outside its regions", v));
      }
      for (std::uint64_t r = 0; r < b.rows; ++r)
        if (c.fill >= 0) std::memset(to + r * b.dst_pitch, c.fill, b.width);
        else std::memmove(to + r * b.dst_pitch, from + r * b.src_pitch, b.width);
    }
  }
};

const rig_driver Driver::kTable{room, submit, commit, settle, nullptr};
const rig_driver Driver::kMeasuring{room, submit, commit, settle, measures};

// ---- Control and the opener.

Control::Control() : s_(std::make_unique<State>()) {}
Control::~Control() = default;

std::unique_lock<std::recursive_mutex> Control::lock() const {
  return std::unique_lock(s_->m);
}

std::size_t Control::step(std::size_t n) {
  auto l = lock();
  return s_->current ? s_->current->run(n) : 0;
}
std::uint64_t Control::pending() const {
  auto l = lock();
  return s_->current ? s_->current->pending() : 0;
}
void Control::fault(std::string why) {
  auto l = lock();
  if (s_->current) s_->current->fault(std::move(why));
}
void Control::fail_nth(Call c, std::uint64_t n, std::string why) {
  auto l = lock();
  s_->fail[int(c)] = {n, 0, {}, std::move(why)};
}
void Control::fail_with_probability(Call c, double p, std::uint64_t seed, std::string why) {
  auto l = lock();
  s_->fail[int(c)] = {0, p, std::mt19937_64(seed), std::move(why)};
}
void Control::no_room_nth(Call c, std::uint64_t n) {
  if (c != Call::Room && c != Call::Alloc && c != Call::Map && c != Call::Entry && c != Call::Grow)
    throw std::invalid_argument("fake: only room, alloc, map, entry and grow answer no room");
  auto l = lock();
  s_->no_room[int(c)] = {n, 0, {}, {}};
}
std::uint64_t Control::calls(Call c) const { auto l = lock(); return s_->calls[int(c)]; }
std::size_t Control::live_regions() const { auto l = lock(); return s_->regions.size(); }
std::size_t Control::live_bytes() const { auto l = lock(); return s_->live_bytes; }
std::size_t Control::live_images() const { auto l = lock(); return s_->images.size(); }
std::vector<std::pair<std::uintptr_t, std::size_t>> Control::mappings() const {
  auto l = lock();
  std::vector<std::pair<std::uintptr_t, std::size_t>> out;
  for (const auto& [id, b] : s_->regions)
    if (!b.owned) out.emplace_back(b.host, b.bytes);
  return out;
}
void Control::set_memory(std::size_t bytes) { auto l = lock(); s_->memory = bytes; }
bool Control::stopped() const { auto l = lock(); return s_->stopped.has_value(); }
std::string Control::stop_reason() const { auto l = lock(); return s_->stopped.value_or(""); }
void Control::define(std::string name, Kernel k) {
  auto l = lock();
  s_->kernels[std::move(name)] = std::move(k);
}
std::vector<Ran> Control::log() const { auto l = lock(); return s_->log; }
std::vector<std::string> Control::violations() const {
  auto l = lock();
  return s_->violations;
}

std::pair<edge::Opener<>, std::shared_ptr<Control>> opener(std::string name, Options options) {
  if (options.commit_every == 0 || options.grow_to < options.capacity)
    throw std::invalid_argument(fmt::format(
        "fake device {}: commit_every must be at least 1, grow_to at least capacity", name));
  auto control = std::make_shared<Control>();
  control->set_memory(options.memory.value_or(options.budget));
  auto make = [control, options, name](volatile std::uint64_t* word)
      -> Result<std::unique_ptr<edge::Driver>> {
    try {
      return std::make_unique<Driver>(control, options, word);
    } catch (const std::runtime_error& e) {  // "an Error leaves no work that writes the word"
      return std::unexpected(fmt::format("fake device {} cannot open: {}", name, e.what()));
    }
  };
  return {edge::Opener<>{std::move(name), make}, control};
}

}  // namespace rig::fake
