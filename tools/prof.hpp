// `rig prof`: runs a program with a profile taken over its whole run, then sums up the
// trace it wrote.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rig::tool {

struct ProfOptions {
  std::string trace = "trace.json";  // where the program writes its Chrome trace (RIG_PROFILE)
  std::string csv;                   // where it writes one CSV row per launch (RIG_PROFILE_CSV); empty: none
  std::size_t top = 20;              // rows of the summary
  std::vector<std::string> command;  // the program and its arguments
};

// Runs options.command (found on PATH as a shell would) with RIG_PROFILE set to
// options.trace, and RIG_PROFILE_CSV to options.csv when one is asked for: every program
// that links rig writes its trace (and CSV) when it exits (core/profile.cpp). It then reads
// the trace back and prints each device's values' times, and the launches that took the most time in all, by device and
// function, with their count, total, mean, median (p50) and 99th percentile, sorted by total.
// Returns the program's exit status (128 + the signal's number if a signal ended it) when
// the trace was read, and otherwise 1 with the reason on stderr: the program could not be
// started, or wrote no trace (it does not link rig, or ended without running its exit
// handlers), or the trace is not a Chrome trace, or a CSV was asked for and not written.
// 2 if the command is empty.
int prof(const ProfOptions& options);

// The summary prof prints, of a Chrome trace as rig writes it (profile::write_chrome_trace),
// printed to `out`: one row per device of its values (their count, the time they took in all,
// mean, p50 and p99, as the device timed them), then one row per (device, function) of launch
// slices, the `top` with the most time in all. Throws std::invalid_argument if `trace` holds no traceEvents array.
void summarize_trace(const nlohmann::json& trace, std::size_t top, std::ostream& out);

}  // namespace rig::tool
