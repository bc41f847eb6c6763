// chrome_trace.hpp — reads a trace back and lists where it breaks the Chrome Trace Event
// Format (the JSON Object Format that chrome://tracing and ui.perfetto.dev open), or how its
// slices and values are out of order.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace rig::test {

// A complete slice ("ph":"X") in integer nanoseconds (the trace's microseconds have three
// decimals).
struct Slice {
  std::string name, cat;
  int pid = 0, tid = 0;
  std::int64_t start = 0, end = 0;
  const nlohmann::json* event = nullptr;
};

inline std::int64_t trace_ns(const nlohmann::json& us) { return std::llround(us.get<double>() * 1000.0); }

// The trace's complete slices, in the order of the file.
inline std::vector<Slice> slices_of(const nlohmann::json& trace) {
  std::vector<Slice> out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X") continue;
    Slice s;
    s.name = e.value("name", "");
    s.cat = e.value("cat", "");
    s.pid = e.value("pid", 0);
    s.tid = e.value("tid", 0);
    s.start = trace_ns(e.at("ts"));
    s.end = s.start + trace_ns(e.at("dur"));
    s.event = &e;
    out.push_back(s);
  }
  return out;
}

// The names metadata events give processes (pid) and threads (pid, tid).
inline std::map<int, std::string> process_names(const nlohmann::json& trace) {
  std::map<int, std::string> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") out[e.value("pid", 0)] = e["args"].value("name", "");
  return out;
}
inline std::map<std::pair<int, int>, std::string> thread_names(const nlohmann::json& trace) {
  std::map<std::pair<int, int>, std::string> out;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name")
      out[{e.value("pid", 0), e.value("tid", 0)}] = e["args"].value("name", "");
  return out;
}

// Every breach of the format and of the order rig promises, one line each; empty for a good
// trace:
// - the file is an object whose traceEvents is an array (displayTimeUnit "ms" or "ns" if any);
// - each event is an object with a string name, a known ph, integer pid and tid, an args
//   object if it has args, a string cat if it has one; a complete slice (X) has a ts and a
//   dur that are numbers at least 0; an instant (i) a ts; a metadata event (M) names a
//   process or thread with a string args.name;
// - each process and track a slice lies on is named by metadata;
// - the slices of one track (pid, tid) nest: two either do not overlap or one holds the
//   other, so no slice ends inside another and starts before it;
// - per process, the value slices (cat "value"), taken in the order of args.value, start no
//   earlier than the previous one ends, and appear in the file in that order.
inline std::vector<std::string> trace_problems(const nlohmann::json& trace) {
  std::vector<std::string> problems;
  auto bad = [&](std::string what) { problems.push_back(std::move(what)); };
  if (!trace.is_object()) return {"the trace is not a JSON object"};
  if (!trace.contains("traceEvents") || !trace["traceEvents"].is_array()) return {"no traceEvents array"};
  if (trace.contains("displayTimeUnit") && trace["displayTimeUnit"] != "ms" && trace["displayTimeUnit"] != "ns")
    bad("displayTimeUnit is neither \"ms\" nor \"ns\"");
  static const std::set<std::string> phases{"B", "E", "X", "i", "I", "C", "b", "n", "e", "s", "t", "f",
                                            "P", "N", "O", "D", "M", "V", "v", "R", "c", "(", ")"};
  std::size_t index = 0;
  bool events_ok = true;
  for (const auto& e : trace["traceEvents"]) {
    const std::string at = "event " + std::to_string(index++);
    if (!e.is_object()) {
      bad(at + " is not an object");
      events_ok = false;
      continue;
    }
    if (!e.contains("ph") || !e["ph"].is_string() || !phases.contains(e["ph"].get<std::string>())) {
      bad(at + " has no known ph");
      events_ok = false;
      continue;
    }
    const std::string ph = e["ph"];
    if (!e.contains("name") || !e["name"].is_string()) bad(at + " has no string name");
    if (!e.contains("pid") || !e["pid"].is_number_integer()) bad(at + " has no integer pid");
    if (!e.contains("tid") || !e["tid"].is_number_integer()) bad(at + " has no integer tid");
    if (e.contains("args") && !e["args"].is_object()) bad(at + "'s args is not an object");
    if (e.contains("cat") && !e["cat"].is_string()) bad(at + "'s cat is not a string");
    if (ph == "X" || ph == "i" || ph == "I" || ph == "B" || ph == "E") {
      if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0) {
        bad(at + " has no ts, a number at least 0");
        events_ok = false;
      }
    }
    if (ph == "X" && (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0)) {
      bad(at + " is a complete slice without a dur, a number at least 0");
      events_ok = false;
    }
    if (ph == "M") {
      const std::string name = e.value("name", "");
      if (name == "process_name" || name == "thread_name") {
        if (!e.contains("args") || !e["args"].is_object() || !e["args"].contains("name") ||
            !e["args"]["name"].is_string())
          bad(at + " names a process or thread without a string args.name");
      }
    }
  }
  if (!events_ok || !problems.empty()) return problems;

  const auto processes = process_names(trace);
  const auto threads = thread_names(trace);
  std::map<std::pair<int, int>, std::vector<Slice>> tracks;
  for (const auto& s : slices_of(trace)) {
    if (!processes.contains(s.pid)) bad("slice " + s.name + " lies on process " + std::to_string(s.pid) + ", which has no name");
    if (!threads.contains({s.pid, s.tid}))
      bad("slice " + s.name + " lies on track " + std::to_string(s.pid) + "/" + std::to_string(s.tid) + ", which has no name");
    tracks[{s.pid, s.tid}].push_back(s);
  }
  for (auto& [track, list] : tracks) {
    std::stable_sort(list.begin(), list.end(), [](const Slice& a, const Slice& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<const Slice*> open;
    for (const auto& s : list) {
      while (!open.empty() && open.back()->end <= s.start) open.pop_back();
      if (!open.empty() && s.end > open.back()->end)
        bad("on track " + threads.at(track) + " of " + processes.at(track.first) + ", slice " + s.name + " [" +
            std::to_string(s.start) + ", " + std::to_string(s.end) + "] overlaps " + open.back()->name + " [" +
            std::to_string(open.back()->start) + ", " + std::to_string(open.back()->end) + "] without nesting");
      open.push_back(&s);
    }
  }
  std::map<int, std::vector<std::pair<std::uint64_t, Slice>>> values;  // per pid, in file order
  for (const auto& s : slices_of(trace))
    if (s.cat == "value") values[s.pid].push_back({(*s.event)["args"].value("value", std::uint64_t(0)), s});
  for (const auto& [pid, list] : values) {
    for (std::size_t i = 1; i < list.size(); ++i) {
      const auto& [v0, a] = list[i - 1];
      const auto& [v1, b] = list[i];
      if (v1 <= v0)
        bad("on " + processes.at(pid) + ", value " + std::to_string(v1) + " comes after value " + std::to_string(v0));
      else if (b.start < a.end)
        bad("on " + processes.at(pid) + ", value " + std::to_string(v1) + " starts before value " +
            std::to_string(v0) + " ends");
    }
  }
  return problems;
}

}  // namespace rig::test
