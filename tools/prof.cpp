// `rig prof -o trace.json [--csv FILE] -- PROGRAM ARGS…`: runs PROGRAM with RIG_PROFILE set,
// so that its rig writes a Chrome trace when it exits, then reads the trace back and prints
// the launches that took the most time (tools/prof.hpp).
#include "prof.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <stdexcept>
#include <string_view>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

namespace rig::tool {
namespace {

// The launches of one function on one device.
struct Launches {
  std::vector<double> us;  // each launch's duration
  std::size_t measured = 0;
  std::map<std::string, double> counters;  // each counter's sum over the measured launches
};

// The keys of a launch slice's args that are not counters (core/profile.cpp).
bool is_counter(std::string_view key) {
  return key != "value" && key != "part" && key != "groups" && key != "threads" && key != "measured";
}

// A duration given in microseconds, in the unit that reads best.
std::string duration(double us) {
  if (us < 1) return fmt::format("{:.0f} ns", us * 1000);
  if (us < 1000) return fmt::format("{:.2f} us", us);
  if (us < 1e6) return fmt::format("{:.2f} ms", us / 1000);
  return fmt::format("{:.2f} s", us / 1e6);
}

// A count with an SI suffix: 1.23M.
std::string count(double n) {
  if (n < 1e3) return fmt::format("{:.0f}", n);
  if (n < 1e6) return fmt::format("{:.2f}k", n / 1e3);
  if (n < 1e9) return fmt::format("{:.2f}M", n / 1e6);
  return fmt::format("{:.2f}G", n / 1e9);
}

// The q-th quantile of sorted values, by nearest rank.
double quantile(const std::vector<double>& sorted, double q) {
  const auto n = sorted.size();
  const auto rank = std::size_t(std::ceil(q * double(n)));
  return sorted[std::clamp<std::size_t>(rank, 1, n) - 1];
}

// The environment of the program: this one's, with RIG_PROFILE and RIG_PROFILE_CSV set.
std::vector<std::string> program_environment(const ProfOptions& options) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view kv(*e);
    if (kv.starts_with("RIG_PROFILE=") || kv.starts_with("RIG_PROFILE_CSV=")) continue;
    env.emplace_back(kv);
  }
  env.push_back("RIG_PROFILE=" + options.trace);
  if (!options.csv.empty()) env.push_back("RIG_PROFILE_CSV=" + options.csv);
  return env;
}

// Runs the command and waits for it; its exit status (128 + signal), or -1 with the reason
// in `why` if it could not start.
int run_program(const ProfOptions& options, std::string& why) {
  std::vector<std::string> env = program_environment(options);
  std::vector<char*> argv, envp;
  for (const auto& a : options.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  // As system(3) does: while the program runs, an interrupt from the terminal is its
  // business, and rig prof still sums up what it wrote.
  struct sigaction ignore {}, old_int {}, old_quit {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGQUIT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);

  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  int status = -1;
  if (spawned != 0) {
    why = fmt::format("cannot run {}: {}", options.command[0], std::strerror(spawned));
  } else {
    int raw = 0;
    while (waitpid(pid, &raw, 0) < 0 && errno == EINTR) {
    }
    status = WIFEXITED(raw) ? WEXITSTATUS(raw) : WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : 1;
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  return status;
}

}  // namespace

void summarize_trace(const nlohmann::json& trace, std::size_t top, std::ostream& out) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    throw std::invalid_argument("it is not a Chrome trace: no traceEvents array");
  std::map<int, std::string> devices;  // pid -> process name
  std::map<std::pair<std::string, std::string>, Launches> launches;
  std::map<int, std::vector<double>> values;  // each value's duration, per pid
  std::uint64_t dropped = 0;
  // Process names come last in rig's traces: gather the slices by pid first.
  std::vector<const nlohmann::json*> slices;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    const std::string cat = e.value("cat", "");
    if (ph == "M" && e.value("name", "") == "process_name" && e.contains("args"))
      devices[e.value("pid", 0)] = e["args"].value("name", "");
    else if (ph == "X" && cat == "launch")
      slices.push_back(&e);
    else if (ph == "X" && cat == "value")
      values[e.value("pid", 0)].push_back(e.value("dur", 0.0));
    else if (cat == "overwritten" && e.contains("args"))
      dropped += e["args"].value("dropped", std::uint64_t(0));
  }
  for (const auto* e : slices) {
    const int pid = e->value("pid", 0);
    auto found = devices.find(pid);
    std::string device = found != devices.end() ? found->second : fmt::format("pid {}", pid);
    auto& l = launches[{device, e->value("name", "?")}];
    l.us.push_back(e->value("dur", 0.0));
    if (e->contains("args") && (*e)["args"].value("measured", false)) {
      ++l.measured;
      for (const auto& [key, v] : (*e)["args"].items())
        if (is_counter(key) && v.is_number()) l.counters[key] += v.get<double>();
    }
  }

  std::size_t total_launches = 0, total_values = 0;
  for (const auto& [key, l] : launches) total_launches += l.us.size();
  for (const auto& [pid, v] : values) total_values += v.size();
  auto many = [](std::size_t n, std::string_view one, std::string_view more) {
    return fmt::format("{} {}", n, n == 1 ? one : more);
  };
  out << fmt::format("{} of {} and {}, on {}\n", many(total_launches, "launch", "launches"),
                     many(launches.size(), "function", "functions"), many(total_values, "value", "values"),
                     many(devices.size(), "device", "devices"));
  if (dropped != 0)
    out << fmt::format("warning: the profile's store filled and {} records were dropped; "
                       "the figures below miss them\n", dropped);
  // Each device's values: the time its work took, as the device measured it (0 where it
  // gives no times).
  if (!values.empty()) {
    std::size_t width = 6;
    for (const auto& [pid, v] : values) width = std::max(width, devices.count(pid) ? devices[pid].size() : 8);
    out << fmt::format("{:<{}}  {:>8}  {:>10}  {:>10}  {:>10}  {:>10}\n", "device", width, "values", "busy", "mean",
                       "p50", "p99");
    for (auto& [pid, v] : values) {
      std::sort(v.begin(), v.end());
      double busy = 0;
      for (double d : v) busy += d;
      const auto found = devices.find(pid);
      out << fmt::format("{:<{}}  {:>8}  {:>10}  {:>10}  {:>10}  {:>10}\n",
                         found != devices.end() ? found->second : fmt::format("pid {}", pid), width, v.size(),
                         duration(busy), duration(busy / double(v.size())), duration(quantile(v, 0.5)),
                         duration(quantile(v, 0.99)));
    }
  }
  if (launches.empty()) return;

  struct Row {
    std::string device, function;
    std::size_t n, measured;
    double total, mean, p50, p99;
    std::string counters;
  };
  std::vector<Row> rows;
  double all = 0;
  for (auto& [key, l] : launches) {
    std::sort(l.us.begin(), l.us.end());
    double total = 0;
    for (double d : l.us) total += d;
    all += total;
    std::string counters;
    for (const auto& [name, sum] : l.counters)
      counters += fmt::format("{}{} {}", counters.empty() ? "" : ", ", name, count(sum / double(l.measured)));
    rows.push_back({key.first, key.second, l.us.size(), l.measured, total, total / double(l.us.size()),
                    quantile(l.us, 0.5), quantile(l.us, 0.99), counters});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total > b.total; });
  std::size_t device_width = 6, function_width = 8;
  for (const auto& r : rows) {
    device_width = std::max(device_width, r.device.size());
    function_width = std::max(function_width, r.function.size());
  }
  out << fmt::format("{:<{}}  {:<{}}  {:>8}  {:>10}  {:>6}  {:>10}  {:>10}  {:>10}  {:>8}  {}\n", "device",
                     device_width, "function", function_width, "launches", "total", "share", "mean", "p50", "p99",
                     "measured", "counters (mean per measured launch)");
  for (std::size_t i = 0; i < rows.size() && i < top; ++i) {
    const Row& r = rows[i];
    out << fmt::format("{:<{}}  {:<{}}  {:>8}  {:>10}  {:>5.1f}%  {:>10}  {:>10}  {:>10}  {:>8}  {}\n", r.device,
                       device_width, r.function, function_width, r.n, duration(r.total),
                       all > 0 ? 100 * r.total / all : 0.0, duration(r.mean), duration(r.p50), duration(r.p99),
                       fmt::format("{}/{}", r.measured, r.n), r.counters.empty() ? "-" : r.counters);
  }
  if (rows.size() > top) out << fmt::format("... and {} more functions (--top)\n", rows.size() - top);
  if (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.measured < r.n; }))
    out << "A launch its device did not measure spans its value's time (measured: launches the device timed).\n";
}

int prof(const ProfOptions& options) {
  if (options.command.empty()) {
    fmt::print(stderr, "rig prof: no program to run: rig prof -o trace.json -- PROGRAM ARGS…\n");
    return 2;
  }
  // A trace left from an earlier run must not pass for this one's.
  std::error_code ignored;
  std::filesystem::remove(options.trace, ignored);
  if (!options.csv.empty()) std::filesystem::remove(options.csv, ignored);

  std::string why;
  const int status = run_program(options, why);
  if (status < 0) {
    fmt::print(stderr, "rig prof: {}\n", why);
    return 1;
  }
  std::ifstream in(options.trace, std::ios::binary);
  if (!in) {
    fmt::print(stderr,
               "rig prof: {} wrote no trace to {} (exit status {}): it must link rig and end through exit "
               "or a return from main, so that rig writes the trace\n",
               options.command[0], options.trace, status);
    return 1;
  }
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(in);
    fmt::print("rig prof: {} exited with status {}; trace in {} (open it in ui.perfetto.dev or chrome://tracing)\n",
               options.command[0], status, options.trace);
    std::ostringstream summary;
    summarize_trace(trace, options.top, summary);
    fmt::print("{}", summary.str());
  } catch (const std::exception& e) {
    fmt::print(stderr, "rig prof: cannot read the trace {}: {}\n", options.trace, e.what());
    return 1;
  }
  if (!options.csv.empty()) {
    if (!std::filesystem::exists(options.csv)) {
      fmt::print(stderr, "rig prof: {} wrote no CSV to {}: its rig does not read RIG_PROFILE_CSV\n",
                 options.command[0], options.csv);
      return 1;
    }
    fmt::print("launches as CSV in {}\n", options.csv);
  }
  return status;
}

}  // namespace rig::tool
