// Tests of profiles (rig/profile.hpp): what a profile of launches on the host device, a
// memory device's copies and the fake driver records, and its export as a Chrome trace and as
// CSV, each read back. Each test is named after the promise it checks.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN

#include <doctest/doctest.h>
#include <rig/profile.hpp>
#include <rig/rig.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "chrome_trace.hpp"
#include "fake_driver.hpp"
#include "work.hpp"

using namespace rig;
using What = profile::Record::What;

namespace {

std::string trace_text(const std::vector<profile::Record>& records) {
  std::ostringstream out;
  profile::write_chrome_trace(records, out);
  return out.str();
}

nlohmann::json trace_of(const std::vector<profile::Record>& records) {
  return nlohmann::json::parse(trace_text(records));
}

std::string problems_of(const nlohmann::json& trace) {
  std::string out;
  for (const auto& p : test::trace_problems(trace)) out += p + "\n";
  return out;
}

// One CSV line split into fields, quotes undone (RFC 4180).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else out.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// The CSV's rows as maps from its header's columns.
std::vector<std::map<std::string, std::string>> csv_rows(const std::vector<profile::Record>& records,
                                                         std::vector<std::string>* header = nullptr) {
  std::ostringstream out;
  profile::write_csv(records, out);
  std::istringstream in(out.str());
  std::string line;
  std::getline(in, line);
  const auto columns = csv_fields(line);
  if (header) *header = columns;
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const auto fields = csv_fields(line);
    REQUIRE(fields.size() == columns.size());
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < columns.size(); ++i) row[columns[i]] = fields[i];
    rows.push_back(row);
  }
  return rows;
}

// A fake device whose launches are measured with counters "busy" (1 value) and "lanes" (2),
// whose image has one function "fake_kernel"; it runs its queue whenever rig sleeps in it.
struct Fake {
  Device device;
  std::shared_ptr<fake::Control> control;
  Function kernel;
  Submission submission;
  Run run;
  int ran = 0;

  static std::pair<edge::Opener<>, std::shared_ptr<fake::Control>> open() {
    fake::Options o;
    o.counters = {{"busy", 1}, {"lanes", 2}};
    return fake::opener("PROF-FAKE", o);
  }
  Fake() : Fake(open()) {}
  explicit Fake(std::pair<edge::Opener<>, std::shared_ptr<fake::Control>> made)
      : device(*rig::open(made.first)), control(made.second), kernel(load(device)),
        submission(make(device, kernel)) {
    control->define("fake_kernel", [this](std::span<const std::byte>, const rig_launch&) { ++ran; });
  }
  ~Fake() {
    device.close();
    CHECK(control->violations().empty());
  }
  static Function load(const Device& d) {
    const std::string text = "fake-image\nfake_kernel 0 64\n";
    auto image = Image::load(d, std::as_bytes(std::span(text)));
    REQUIRE(image.has_value());
    return *image->resolve("fake_kernel");
  }
  static Submission make(const Device& d, const Function& f) {
    std::vector<Submission::Part> parts{{"", {}, Submission::Launch{f, 0, {}}},
                                        {"", {}, Submission::Launch{f, 0, {}}}};
    return Submission::make(d, parts, 0, 0);
  }
  // One value of two launches.
  Point launch() {
    run.groups(submission.block(0), 3);
    run.groups(submission.block(1), 5);
    return submit(submission, run, {}, {});
  }
};

// The demo-like work: launches on the host device, a memory device's copies and fills, and
// two-launch values on the fake driver. Returns the records and the launches made per device.
struct Work {
  std::vector<profile::Record> records;
  int host_launches = 0, fake_launches = 0;
  bool host_counts = false;
};

Work profile_work() {
  Work w;
  test::Spinner small("prof_short"), large("prof_long");
  Fake fake;
  Device memory = memory_device("PROF-MEM");
  w.host_counts = !host().facts().counters.empty();
  w.records = profile::take([&] {
    Buffer a = Buffer::create(memory, 1 << 16), b = Buffer::create(memory, 1 << 16);
    a.fill(std::byte{3});
    // The memory device's own work: a fill of a, then a copy of a into b, on its queue.
    Submission::Copy fill{{a, 0}, {a, 0}, {Box::row(1 << 16)}, std::byte{5}};
    Submission::Copy copy{{a, 0}, {b, 0}, {Box::row(1 << 16)}, std::nullopt};
    std::vector<Submission::Part> parts{{"", {}, fill}, {"", {}, copy}};
    Submission on_memory = Submission::make(memory, parts, 0, 0, std::vector<std::pair<Buffer, Access>>{
                                                                      {a, Access::ReadWrite}, {b, Access::ReadWrite}});
    Run run;
    for (int i = 0; i < 4; ++i) {
      small.launch(20'000, 2);
      large.launch(200'000, 2);
      w.host_launches += 2;
      fake.launch();
      w.fake_launches += 2;
      submit(on_memory, run, {}, {});
      Buffer::copy(a, b);  // the host copies: a copy record
    }
  });
  memory.close();
  return w;
}

std::vector<const profile::Record*> of(const std::vector<profile::Record>& records, What what,
                                       const std::string& device = {}) {
  std::vector<const profile::Record*> out;
  for (const auto& r : records)
    if (r.what == what && (device.empty() || r.device == device)) out.push_back(&r);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// The checker itself: it must see what it is meant to see.

TEST_CASE("the trace checker finds a missing field, an unnamed track, overlapping slices and values out of order") {
  auto trace = [](std::string events) {
    if (!events.empty() && events.back() == ',') events.pop_back();
    return nlohmann::json::parse("{\"traceEvents\":[" + events + "]}");
  };
  const std::string names =
      R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"D"}},)"
      R"({"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"Q"}})";
  auto slice = [](int ts, int dur, int value = 0) {
    return "{\"name\":\"s\",\"cat\":\"value\",\"ph\":\"X\",\"ts\":" + std::to_string(ts) + ",\"dur\":" +
           std::to_string(dur) + ",\"pid\":1,\"tid\":1,\"args\":{\"value\":" + std::to_string(value) + "}},";
  };
  CHECK(test::trace_problems(trace(slice(0, 10, 1) + slice(10, 5, 2) + names)).empty());
  CHECK(test::trace_problems(trace(R"({"name":"s","ph":"X","ts":1,"pid":1,"tid":1},)" + names)).size() == 1);  // no dur
  CHECK(test::trace_problems(trace(slice(0, 10, 1))).size() == 2);  // an unnamed process and track
  CHECK(test::trace_problems(trace(slice(0, 10, 1) + names.substr(0, names.find("},") + 1))).size() == 1);
  CHECK(test::trace_problems(trace(slice(0, 10, 1) + slice(5, 10, 2) + names)).size() >= 1);  // overlap
  CHECK(test::trace_problems(trace(slice(0, 10, 2) + slice(20, 5, 1) + names)).size() == 1);  // order
  CHECK(test::trace_problems(nlohmann::json::parse("[]")).size() == 1);
}

// ---------------------------------------------------------------------------------------
// What a profile holds, and its trace.

TEST_CASE("a profile of host launches, memory copies and fake launches exports a Chrome trace that reads back") {
  Work w = profile_work();
  const auto trace = trace_of(w.records);
  INFO(problems_of(trace));
  CHECK(test::trace_problems(trace).empty());

  // One process per device, one track per queue, and a track of launches beneath it.
  std::set<std::string> processes;
  for (const auto& [pid, name] : test::process_names(trace)) processes.insert(name);
  CHECK(processes.contains("CPU"));
  CHECK(processes.contains("PROF-MEM"));
  CHECK(processes.contains("PROF-FAKE"));
  std::set<std::string> tracks;
  for (const auto& [key, name] : test::thread_names(trace)) tracks.insert(name);
  CHECK(tracks.contains("COMPUTE:0"));
  CHECK(tracks.contains("COMPUTE:0 launches"));
  CHECK(tracks.contains("COPY:0"));

  // A launch slice per launch, named after its function, with its geometry.
  std::map<std::string, int> launches;
  for (const auto& s : test::slices_of(trace)) {
    if (s.cat != "launch") continue;
    ++launches[s.name];
    const auto& args = (*s.event)["args"];
    CHECK(args.contains("value"));
    CHECK(args["groups"].is_array());
    CHECK(args["threads"].is_array());
    if (s.name == "fake_kernel") {
      CHECK(args["measured"] == true);
      CHECK(args["busy"] == 1);
      CHECK(args["lanes[0]"] == 2);
      CHECK(args["lanes[1]"] == 3);
    }
    if (s.name == "prof_long") CHECK(args["groups"][0] == 2);
  }
  CHECK(launches["prof_short"] == 4);
  CHECK(launches["prof_long"] == 4);
  CHECK(launches["fake_kernel"] == w.fake_launches);

  // Allocations and copies as slices of their own.
  std::set<std::string> categories;
  for (const auto& s : test::slices_of(trace)) categories.insert(s.cat);
  CHECK(categories.contains("allocation"));
  CHECK(categories.contains("copy"));
  CHECK(categories.contains("value"));
}

TEST_CASE("each value has its device's times in timeline order, and its launches lie inside it") {
  Work w = profile_work();
  for (const std::string device : {"CPU", "PROF-MEM", "PROF-FAKE"}) {
    CAPTURE(device);
    const auto values = of(w.records, What::Value, device);
    REQUIRE(!values.empty());
    for (std::size_t i = 0; i < values.size(); ++i) {
      CHECK(values[i]->start_ns != 0);
      CHECK(values[i]->start_ns <= values[i]->end_ns);
      if (i) {
        CHECK(values[i]->value > values[i - 1]->value);
        CHECK(values[i]->start_ns >= values[i - 1]->end_ns);
      }
    }
    for (const auto* l : of(w.records, What::Launch, device)) {
      auto v = std::find_if(values.begin(), values.end(), [&](auto* r) { return r->value == l->value; });
      REQUIRE(v != values.end());
      CHECK(l->start_ns >= (*v)->start_ns);
      CHECK(l->end_ns <= (*v)->end_ns);
    }
  }
  CHECK(of(w.records, What::Launch, "CPU").size() == std::size_t(w.host_launches));
  CHECK(of(w.records, What::Launch, "PROF-FAKE").size() == std::size_t(w.fake_launches));
  CHECK(of(w.records, What::Launch, "PROF-MEM").empty());  // copies and fills only
  CHECK(of(w.records, What::Overwritten).empty());
}

TEST_CASE("the CSV has a row per launch, and counter columns for the devices that measure them") {
  Work w = profile_work();
  std::vector<std::string> header;
  const auto rows = csv_rows(w.records, &header);
  const std::vector<std::string> fixed{"device", "queue", "value", "function", "groups_x", "groups_y",
                                       "groups_z", "threads_x", "threads_y", "threads_z", "start_ns",
                                       "end_ns", "duration_ns", "measured"};
  REQUIRE(header.size() >= fixed.size());
  CHECK(std::equal(fixed.begin(), fixed.end(), header.begin()));
  CHECK(std::find(header.begin(), header.end(), "busy") != header.end());
  CHECK(std::find(header.begin(), header.end(), "lanes[0]") != header.end());
  CHECK(std::find(header.begin(), header.end(), "lanes[1]") != header.end());
  const bool host_columns = std::find(header.begin(), header.end(), "instructions") != header.end();
  CHECK(host_columns == w.host_counts);
  CHECK(rows.size() == std::size_t(w.host_launches + w.fake_launches));
  int fake = 0, host = 0;
  for (const auto& row : rows) {
    CAPTURE(row.at("function"));
    CHECK(std::stoull(row.at("end_ns")) >= std::stoull(row.at("start_ns")));
    CHECK(std::stoull(row.at("duration_ns")) == std::stoull(row.at("end_ns")) - std::stoull(row.at("start_ns")));
    if (row.at("device") == "PROF-FAKE") {
      ++fake;
      CHECK(row.at("function") == "fake_kernel");
      CHECK(row.at("measured") == "1");
      CHECK(row.at("busy") == "1");
      CHECK(row.at("lanes[0]") == "2");
      CHECK(row.at("lanes[1]") == "3");
      CHECK((row.at("groups_x") == "3" || row.at("groups_x") == "5"));
    } else {
      ++host;
      CHECK(row.at("device") == "CPU");
      CHECK(row.at("queue") == "COMPUTE:0");
      CHECK(row.at("groups_x") == "2");
      CHECK(row.at("busy").empty());  // the host has no such counter
      if (w.host_counts) {
        CHECK(row.at("measured") == "1");
        CHECK(std::stoull(row.at("instructions")) > 0);
      } else {
        CHECK(row.at("measured") == "0");
      }
    }
  }
  CHECK(fake == w.fake_launches);
  CHECK(host == w.host_launches);
}

TEST_CASE("device and function names with quotes, commas and newlines are escaped in the trace and the CSV") {
  Device odd = memory_device("MEM \"odd\",\nname");
  auto records = profile::take([&] {
    Buffer a = Buffer::create(odd, 4096), b = Buffer::create(odd, 4096);
    Buffer::copy(a, b);
  });
  odd.close();
  const auto trace = trace_of(records);
  CHECK(test::trace_problems(trace).empty());
  std::set<std::string> processes;
  for (const auto& [pid, name] : test::process_names(trace)) processes.insert(name);
  CHECK(processes.contains("MEM \"odd\",\nname"));
}

// ---------------------------------------------------------------------------------------
// The store, and taking profiles.

TEST_CASE("once the store fills, later records are dropped and one Overwritten record says how many") {
  test::Spinner small("prof_short");
  profile::start(8);
  for (int i = 0; i < 20; ++i) small.launch(1'000, 1);
  auto records = profile::stop();
  REQUIRE(!records.empty());
  CHECK(records.back().what == What::Overwritten);
  CHECK(records.back().dropped >= 12);
  CHECK(of(records, What::Value).size() <= 8);
  CHECK(of(records, What::Overwritten).size() == 1);
  const auto trace = trace_of(records);
  CHECK(test::trace_problems(trace).empty());
  std::uint64_t dropped = 0;
  for (const auto& s : test::slices_of(trace))
    if (s.cat == "overwritten") dropped += (*s.event)["args"]["dropped"].get<std::uint64_t>();
  CHECK(dropped == records.back().dropped);
  CHECK(small.ran() == 20);  // the work itself is not dropped
}

TEST_CASE("a store that does not fill has no Overwritten record") {
  test::Spinner small("prof_short");
  profile::start(1000);
  for (int i = 0; i < 20; ++i) small.launch(1'000, 1);
  auto records = profile::stop();
  CHECK(of(records, What::Overwritten).empty());
  CHECK(of(records, What::Value, "CPU").size() == 20);
}

TEST_CASE("profiles do not nest: starting one while one is taken raises invalid_argument") {
  profile::start();
  CHECK(profile::active());
  CHECK_THROWS_AS(profile::start(), std::invalid_argument);
  CHECK_THROWS_AS(profile::take([] {}), std::invalid_argument);
  CHECK(profile::active());  // the refusals leave the profile taken
  profile::stop();
  CHECK_FALSE(profile::active());
  CHECK_THROWS_AS(profile::stop(), std::invalid_argument);  // none is taken
  CHECK_NOTHROW(profile::take([] {}));                      // and one can be taken again
}

TEST_CASE("a profile whose work throws is stopped, and the exception goes on") {
  CHECK_THROWS_WITH(profile::take([] { throw std::runtime_error("work failed"); }), "work failed");
  CHECK_FALSE(profile::active());
  CHECK_NOTHROW(profile::take([] {}));
}

TEST_CASE("work done while no profile is taken is not recorded") {
  test::Spinner small("prof_short");
  small.launch(1'000, 1).wait();
  auto records = profile::take([] {});
  CHECK(of(records, What::Launch).empty());
  CHECK(of(records, What::Value).empty());
  CHECK(trace_of(records)["traceEvents"].is_array());
  CHECK(test::trace_problems(trace_of(records)).empty());
}
