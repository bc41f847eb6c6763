// Profiles: the records of values, launches, allocations, loads and copies while one is
// taken, their times from the drivers (submit's pair, settle, measures), and their export.
#include <rig/profile.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <ostream>

#include "profile_hooks.hpp"
#include "state.hpp"

namespace rig::profile {
namespace {

// A value submitted while the profile was taken: where its driver writes its times, and
// its launches.
struct Pending {
  std::shared_ptr<detail::DeviceState> device;
  std::uint64_t value = 0;
  std::uint64_t times[2] = {0, 0};
  std::vector<Record> launches;
};

struct Store {
  std::mutex mutex;
  std::size_t capacity = 0;
  std::deque<Pending> values;  // stable addresses for the drivers' times
  std::vector<Record> records;
  std::uint64_t dropped = 0;
  bool full() const { return values.size() + records.size() >= capacity; }
};

Store& store() {
  static Store* s = new Store;
  return *s;
}

std::string queue_name(const detail::DeviceState& d, std::uint32_t q) {
  return q < d.facts.queues.size() ? d.facts.queues[q].name : std::string("?");
}

// The names of a device's counter values: "name" for one value, "name[i]" for several.
std::vector<std::string> counter_names(const edge::Facts& f) {
  std::vector<std::string> out;
  for (const auto& [name, n] : f.counters)
    for (int i = 0; i < n; ++i) out.push_back(n == 1 ? name : fmt::format("{}[{}]", name, i));
  return out;
}

// Asks the driver for a value's times (settle) and its launches' measures, once the word
// shows the value.
void settle(Pending& p) {
  auto& d = *p.device;
  try {
    d.wait(p.value);
  } catch (const std::exception&) {
    return;  // a lost value has no times
  }
  d.turn.lock();
  if (d.is_lost.load()) {
    d.turn.unlock();
    return;
  }
  const char* failure = nullptr;
  if (d.c->settle && d.c->settle(d.edge, p.value, p.times, &failure) == RIG_FAILED) {
    d.lose(failure ? failure : "settle failed", true);
    return;
  }
  auto names = counter_names(d.facts);
  if (d.c->measures && !p.launches.empty()) {
    const std::size_t row = 3 + names.size();
    std::vector<std::uint64_t> out(row * p.launches.size(), 0);
    if (d.c->measures(d.edge, p.value, out.data(), &failure) == RIG_FAILED) {
      d.lose(failure ? failure : "measures failed", true);
      return;
    }
    d.c->measures(d.edge, p.value, nullptr, &failure);
    for (std::size_t i = 0; i < p.launches.size(); ++i) {
      const std::uint64_t* r = out.data() + i * row;
      auto& l = p.launches[i];
      if (r[0] != 1) continue;
      l.measured = true;
      l.start_ns = r[1];
      l.end_ns = r[2];
      for (std::size_t c = 0; c < names.size(); ++c) l.counters.emplace_back(names[c], r[3 + c]);
    }
  }
  d.turn.unlock();
}

std::atomic<bool> taking{false};

}  // namespace

std::uint64_t now_ns() { return rig_now_ns(); }

bool active() { return hooks::on.load(std::memory_order_relaxed); }

void start(std::size_t capacity) {
  if (taking.exchange(true)) throw std::invalid_argument("profile: one is already being taken");
  auto& s = store();
  std::lock_guard g(s.mutex);
  s.capacity = capacity;
  s.values.clear();
  s.records.clear();
  s.dropped = 0;
  hooks::on.store(true);
}

std::vector<Record> stop() {
  if (!taking.load()) throw std::invalid_argument("profile: none is being taken");
  hooks::on.store(false);
  auto& s = store();
  std::deque<Pending> values;
  std::vector<Record> records;
  std::uint64_t dropped;
  {
    std::lock_guard g(s.mutex);
    values.swap(s.values);
    records.swap(s.records);
    dropped = s.dropped;
  }
  std::vector<Record> out;
  for (auto& p : values) {
    settle(p);
    Record v;
    v.what = Record::What::Value;
    v.device = p.device->name;
    v.queue = p.device->facts.queues.empty() ? "" : p.device->facts.queues[0].name;
    v.value = p.value;
    v.start_ns = p.times[0];
    v.end_ns = p.times[1];
    out.push_back(v);
    for (auto& l : p.launches) {
      if (!l.measured) {  // the value's span stands for its launches
        l.start_ns = p.times[0];
        l.end_ns = p.times[1];
      }
      out.push_back(std::move(l));
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Record& a, const Record& b) {
    return a.device != b.device ? a.device < b.device : a.value < b.value;
  });
  out.insert(out.end(), records.begin(), records.end());
  if (dropped) {
    Record o;
    o.what = Record::What::Overwritten;
    o.dropped = dropped;
    o.start_ns = o.end_ns = rig_now_ns();
    out.push_back(o);
  }
  taking.store(false);
  return out;
}

namespace hooks {

std::atomic<bool> on{false};

std::uint64_t* value(detail::DeviceState& d, const detail::SubmissionState& s, const Run::Storage& run,
                     std::uint64_t v) {
  auto& st = store();
  std::lock_guard g(st.mutex);
  if (!on.load() || st.full()) {
    ++st.dropped;
    return nullptr;
  }
  auto& p = st.values.emplace_back();
  p.device = detail::shared_device_at(d.index);
  p.value = v;
  for (std::size_t i = 0; i < s.launches.size(); ++i) {
    const auto& lp = s.launches[i];
    Record l;
    l.what = Record::What::Launch;
    l.device = d.name;
    l.queue = queue_name(d, s.parts[std::size_t(lp.part)].queue);
    l.value = v;
    l.name = lp.function->name;
    l.part = std::uint32_t(lp.part);
    std::copy_n(run.geometry[i].groups, 3, l.groups);
    std::copy_n(run.geometry[i].threads, 3, l.threads);
    p.launches.push_back(std::move(l));
  }
  return p.times;
}

void record(Record r) {
  auto& st = store();
  std::lock_guard g(st.mutex);
  if (!on.load()) return;
  if (st.full()) {
    ++st.dropped;
    return;
  }
  st.records.push_back(std::move(r));
}

void event(Record::What what, const detail::DeviceState& d, std::uint64_t bytes, std::uint64_t start,
           std::string name) {
  Record r;
  r.what = what;
  r.device = d.name;
  r.bytes = bytes;
  r.start_ns = start;
  r.end_ns = rig_now_ns();
  r.name = std::move(name);
  record(std::move(r));
}

}  // namespace hooks

// --- export -------------------------------------------------------------------------------

namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

std::string_view what_name(Record::What w) {
  switch (w) {
    case Record::What::Value: return "value";
    case Record::What::Launch: return "launch";
    case Record::What::Allocation: return "allocation";
    case Record::What::Load: return "load";
    case Record::What::Copy: return "copy";
    case Record::What::Overwritten: return "overwritten";
  }
  return "?";
}

// Microseconds on the trace's clock, with nanosecond digits.
std::string us(std::uint64_t ns, std::uint64_t origin) { return fmt::format("{:.3f}", double(ns - origin) / 1000.0); }

}  // namespace

void write_chrome_trace(std::span<const Record> records, std::ostream& out) {
  std::uint64_t origin = UINT64_MAX;
  for (const auto& r : records)
    if (r.start_ns) origin = std::min(origin, r.start_ns);
  if (origin == UINT64_MAX) origin = 0;
  // One process per device, one thread (track) per queue; value slices on the queue's track
  // and launch slices on a track of their own beneath it, so that slices nest.
  std::map<std::string, int> pids;
  std::map<std::pair<std::string, std::string>, int> tids;
  auto pid = [&](const std::string& d) { return pids.emplace(d, int(pids.size()) + 1).first->second; };
  auto tid = [&](const std::string& d, const std::string& track) {
    auto key = std::pair(d, track);
    auto it = tids.find(key);
    if (it != tids.end()) return it->second;
    return tids.emplace(key, int(tids.size()) + 1).first->second;
  };
  std::vector<std::string> events;
  for (const auto& r : records) {
    std::string device = r.device.empty() ? "rig" : r.device;
    int p = pid(device);
    switch (r.what) {
      case Record::What::Value: {
        if (!r.start_ns) break;
        int t = tid(device, r.queue);
        events.push_back(fmt::format(
            R"({{"name":{},"cat":"value","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{{"value":{}}}}})",
            json_string(fmt::format("value {}", r.value)), us(r.start_ns, origin), us(r.end_ns, r.start_ns), p, t,
            r.value));
        break;
      }
      case Record::What::Launch: {
        if (!r.start_ns) break;
        int t = tid(device, r.queue + " launches");
        std::string args = fmt::format(R"("value":{},"part":{},"groups":[{},{},{}],"threads":[{},{},{}],"measured":{})",
                                       r.value, r.part, r.groups[0], r.groups[1], r.groups[2], r.threads[0],
                                       r.threads[1], r.threads[2], r.measured ? "true" : "false");
        for (const auto& [name, v] : r.counters) args += fmt::format(",{}:{}", json_string(name), v);
        events.push_back(fmt::format(R"({{"name":{},"cat":"launch","ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{{{}}}}})",
                                     json_string(r.name), us(r.start_ns, origin), us(r.end_ns, r.start_ns), p, t, args));
        break;
      }
      case Record::What::Allocation:
      case Record::What::Load:
      case Record::What::Copy:
      case Record::What::Overwritten: {
        int t = tid(device, "host");
        events.push_back(fmt::format(
            R"({{"name":{},"cat":{},"ph":"X","ts":{},"dur":{},"pid":{},"tid":{},"args":{{"bytes":{},"dropped":{}}}}})",
            json_string(r.name.empty() ? std::string(what_name(r.what)) : r.name), json_string(what_name(r.what)),
            us(r.start_ns ? r.start_ns : origin, origin), us(r.end_ns, r.start_ns ? r.start_ns : r.end_ns), p, t,
            r.bytes, r.dropped));
        break;
      }
    }
  }
  for (const auto& [device, p] : pids)
    events.push_back(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":{}}}}})", p,
                                 json_string(device)));
  for (const auto& [key, t] : tids)
    events.push_back(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":{}}}}})",
                                 pids[key.first], t, json_string(key.second)));
  out << "{\"traceEvents\":[\n";
  for (std::size_t i = 0; i < events.size(); ++i) out << events[i] << (i + 1 < events.size() ? ",\n" : "\n");
  out << "],\"displayTimeUnit\":\"ns\"}\n";
}

void write_csv(std::span<const Record> records, std::ostream& out) {
  std::vector<std::string> counters;
  for (const auto& r : records)
    for (const auto& [name, v] : r.counters)
      if (std::find(counters.begin(), counters.end(), name) == counters.end()) counters.push_back(name);
  out << "device,queue,value,function,groups_x,groups_y,groups_z,threads_x,threads_y,threads_z,start_ns,end_ns,"
         "duration_ns,measured";
  for (const auto& c : counters) out << "," << c;
  out << "\n";
  auto field = [](std::string_view s) {
    if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  for (const auto& r : records) {
    if (r.what != Record::What::Launch) continue;
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}", field(r.device), field(r.queue), r.value,
                       field(r.name), r.groups[0], r.groups[1], r.groups[2], r.threads[0], r.threads[1], r.threads[2],
                       r.start_ns, r.end_ns, r.end_ns >= r.start_ns ? r.end_ns - r.start_ns : 0, r.measured ? 1 : 0);
    for (const auto& c : counters) {
      auto it = std::find_if(r.counters.begin(), r.counters.end(), [&](auto& kv) { return kv.first == c; });
      out << ",";
      if (it != r.counters.end()) out << it->second;
    }
    out << "\n";
  }
}

// RIG_PROFILE=path.json: a program that uses rig writes the trace of its whole run at exit;
// RIG_PROFILE_CSV=path.csv: it writes its launches as CSV at exit. Either may be set alone.
namespace {
struct FromEnvironment {
  FromEnvironment() {
    if (const char* path = std::getenv("RIG_PROFILE")) file = path;
    if (const char* path = std::getenv("RIG_PROFILE_CSV")) csv = path;
    if (file.empty() && csv.empty()) return;
    start();
    std::atexit([] {
      auto& self = instance();
      if ((self.file.empty() && self.csv.empty()) || !taking.load()) return;
      auto records = stop();
      if (!self.file.empty()) {
        std::ofstream out(self.file);
        write_chrome_trace(records, out);
        if (!out) fmt::print(stderr, "rig: could not write the profile to {}\n", self.file);
      }
      if (!self.csv.empty()) {
        std::ofstream out(self.csv);
        write_csv(records, out);
        if (!out) fmt::print(stderr, "rig: could not write the profile's CSV to {}\n", self.csv);
      }
    });
  }
  static FromEnvironment& instance();
  std::string file, csv;
};
// Never destroyed: the exit handler its constructor registers runs after the destructors
// of the statics constructed later, this one's included, and reads its file names.
FromEnvironment& FromEnvironment::instance() {
  static auto* f = new FromEnvironment;
  return *f;
}
[[maybe_unused]] const bool from_environment = (FromEnvironment::instance(), true);
}  // namespace

}  // namespace rig::profile
