// `rig conform`: the conformance suite on every device present (tools/conform.hpp).
#include "conform.hpp"

#include <fmt/format.h>
#include <fnmatch.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "conformance.hpp"

namespace rig::tool {

namespace {

// Whether the law's name is one of the patterns or matches one (* and ?, as fnmatch reads them).
bool chosen_law(const std::string& name, const std::vector<std::string>& patterns) {
  for (const auto& p : patterns)
    if (p == name || fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace

int conform(const ConformOptions& options) {
  namespace c = rig::conformance;
  std::vector<c::Target> chosen;
  for (auto& t : c::targets())
    if (options.device.empty() || t.name == options.device) chosen.push_back(std::move(t));
  if (chosen.empty()) {
    fmt::print(stderr, "rig conform: no device is named {}; the devices are:\n", options.device);
    for (const auto& t : c::targets()) fmt::print(stderr, "  {:<28} {}\n", t.name, t.about);
    return 2;
  }
  // Each target's laws, as --law chooses them; a target none of whose laws is chosen is left out.
  std::vector<std::vector<std::string>> only;
  std::set<std::string> matched;
  for (auto it = chosen.begin(); it != chosen.end();) {
    std::vector<std::string> names;
    for (const auto& name : c::law_names(*it))
      if (options.laws.empty() || chosen_law(name, options.laws)) {
        names.push_back(name);
        for (const auto& p : options.laws)
          if (chosen_law(name, {p})) matched.insert(p);
      }
    if (names.empty()) {
      it = chosen.erase(it);
    } else {
      only.push_back(std::move(names));
      ++it;
    }
  }
  for (const auto& p : options.laws)
    if (!matched.contains(p)) {
      fmt::print(stderr, "rig conform: no law{} matches \"{}\" (rig conform --list names them)\n",
                 options.device.empty() ? "" : " of " + options.device, p);
      return 2;
    }
  if (options.list) {
    for (std::size_t i = 0; i < chosen.size(); ++i)
      for (const auto& name : only[i]) fmt::print("{}\t{}\n", chosen[i].name, name);
    return 0;
  }

  std::size_t width = 0;
  for (const auto& law : c::laws()) width = std::max(width, law.name.size());
  width = std::min<std::size_t>(width, 72);

  std::vector<c::Suite> suites;
  int passed = 0, failed = 0, skipped = 0;
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    const auto& target = chosen[i];
    fmt::print("{} — {}\n", target.name, target.about);
    std::fflush(stdout);
    c::RunOptions run;
    run.timeout = std::chrono::seconds(options.law_timeout);
    if (!options.laws.empty()) run.only = only[i];
    run.on_outcome = [&](const c::Outcome& o) {
      fmt::print("  {:<{}}  {}  {:6.2f}s{}\n", o.law.substr(0, width), width, c::status_name(o.status), o.seconds,
                 o.message.empty() ? "" : "  " + o.message);
      std::fflush(stdout);
    };
    auto outcomes = c::run(target, run);
    for (const auto& o : outcomes) {
      passed += o.status == c::Status::Passed;
      failed += o.status == c::Status::Failed;
      skipped += o.status == c::Status::Skipped;
    }
    suites.push_back({target.name, std::move(outcomes)});
  }
  fmt::print("{} devices: {} passed, {} failed, {} skipped\n", chosen.size(), passed, failed, skipped);

  int status = failed ? 1 : 0;
  if (!options.junit.empty()) {
    std::ofstream out(options.junit, std::ios::binary);
    out << c::junit(suites);
    out.close();
    if (!out) {
      fmt::print(stderr, "rig conform: cannot write {}\n", options.junit);
      status = 2;
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // A law that hung left its thread blocked in a driver: leave without waiting for it.
  if (c::hung()) std::_Exit(status ? status : 1);
  return status;
}

}  // namespace rig::tool
