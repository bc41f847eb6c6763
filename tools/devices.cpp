// `rig devices`: the devices this machine can open, with their facts.
#include <rig/rig.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "machine.hpp"
#include "tool.hpp"


namespace rig::tool {
namespace {

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::Words: return "Words";
    case Kind::Fill: return "Fill";
    case Kind::Copy: return "Copy";
    case Kind::Launch: return "Launch";
  }
  return "?";
}

nlohmann::json describe(const Device& d) {
  const auto& f = d.facts();
  nlohmann::json queues = nlohmann::json::array();
  for (const auto& q : f.queues) {
    nlohmann::json runs = nlohmann::json::array();
    for (Kind k : q.runs) runs.push_back(kind_name(k));
    queues.push_back({{"name", q.name}, {"runs", runs}});
  }
  nlohmann::json counters = nlohmann::json::array();
  for (const auto& [name, n] : f.counters) counters.push_back({{"name", name}, {"values", n}});
  return {
      {"name", d.name()},
      {"arch", f.arch},
      {"budget", f.budget},
      {"queues", queues},
      {"copy_engine", f.copy_engine ? nlohmann::json(*f.copy_engine) : nlohmann::json()},
      {"completion", f.completion == edge::Completion::Store ? "Store" : "Host"},
      {"waits", {{"stores", f.waits.stores}, {"hosts", f.waits.hosts}}},
      {"may_block", f.may_block},
      {"hang_ms", f.hang_ms ? nlohmann::json(*f.hang_ms) : nlohmann::json()},
      {"maps_host", f.maps_host},
      {"host_addresses", f.host_addresses},
      {"alignment", f.alignment},
      {"cache_bytes", f.cache_bytes ? nlohmann::json(*f.cache_bytes) : nlohmann::json()},
      {"counters", counters},
      {"bus", f.bus ? nlohmann::json(*f.bus) : nlohmann::json()},
  };
}

}  // namespace

int devices(const DevicesOptions& options) {
  std::vector<Device> found = open_all([](const std::string& why) { fmt::print(stderr, "{}\n", why); });
  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& d : found) out.push_back(describe(d));
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  for (const auto& d : found) {
    const auto& f = d.facts();
    std::vector<std::string> queues;
    for (const auto& q : f.queues) {
      std::vector<std::string_view> runs;
      for (Kind k : q.runs) runs.push_back(kind_name(k));
      queues.push_back(fmt::format("{} ({})", q.name, fmt::join(runs, ", ")));
    }
    fmt::print("{}  arch {}  budget {:.1f} GiB  cache {}\n  queues: {}\n", d.name(), f.arch,
               double(f.budget) / double(1u << 30),
               f.cache_bytes ? fmt::format("{} KiB", *f.cache_bytes / 1024) : std::string("unknown"),
               fmt::join(queues, "; "));
  }
  return 0;
}

}  // namespace rig::tool
