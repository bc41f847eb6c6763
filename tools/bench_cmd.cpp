// `rig bench [NAMES] [--json] [--device NAME] [--compare BASELINE.json]`: runs benches and
// prints rig's figures beside their floors; with a baseline, marks each figure more than
// 10 % worse than the baseline's and fails.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <optional>

#include "../bench/bench.hpp"
#include "tool.hpp"

namespace rig::tool {
namespace {

// A figure more than this much worse than its baseline is a regression.
constexpr double kWorseBy = 0.10;

struct Bench {
  std::function<std::vector<bench::Figure>(const bench::Options&)> run;
  bool takes_device;  // it runs on the device --device names
};

// Which way a unit gets worse: times and counts when higher, rates when lower; nullopt for
// a unit this tool does not know, whose figures are not compared.
std::optional<bool> worse_when_higher(const std::string& unit) {
  if (unit == "ns" || unit == "us" || unit == "ms" || unit == "s" || unit == "allocs") return true;
  if (unit.ends_with("/s")) return false;  // GB/s, MB/s, launches/s
  return std::nullopt;
}

// A figure beside its baseline.
struct Comparison {
  std::optional<double> baseline;  // none: the baseline has no figure of that name and unit
  double worse_by = 0;             // the fraction it is worse by (negative: better)
  bool regression = false;
};

Comparison compare(const bench::Figure& f, const std::map<std::string, nlohmann::json>& baseline) {
  Comparison c;
  auto it = baseline.find(f.name);
  if (it == baseline.end() || !it->second.contains("value") || !it->second["value"].is_number()) return c;
  if (it->second.value("unit", f.unit) != f.unit) return c;  // another unit: not comparable
  const auto higher_is_worse = worse_when_higher(f.unit);
  if (!higher_is_worse) return c;
  const double base = it->second["value"].get<double>();
  c.baseline = base;
  if (base == 0) {
    // Nothing to scale by: any count above a baseline of 0 (allocations) is worse.
    c.worse_by = *higher_is_worse && f.value > 0 ? INFINITY : 0;
  } else {
    c.worse_by = (*higher_is_worse ? f.value - base : base - f.value) / std::abs(base);
  }
  c.regression = c.worse_by > kWorseBy;
  return c;
}

// The baseline's figures by name: a JSON array of figures as --json prints them, or an
// object whose "figures" holds one (a hardware runner's report). Throws with the reason.
std::map<std::string, nlohmann::json> read_baseline(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read the baseline {}", path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("the baseline {} is not JSON: {}", path, e.what()));
  }
  if (j.is_object() && j.contains("figures")) j = j["figures"];
  if (!j.is_array())
    throw std::runtime_error(fmt::format("the baseline {} holds no array of figures (rig bench --json)", path));
  std::map<std::string, nlohmann::json> out;
  for (const auto& f : j)
    if (f.is_object() && f.contains("name") && f["name"].is_string()) out[f["name"].get<std::string>()] = f;
  return out;
}

// How a figure compares with its baseline, in words: "12.5% worse", "3.0% better", "same".
std::string change(double worse_by) {
  if (std::isinf(worse_by)) return "worse";
  if (std::abs(worse_by) < 0.0005) return "same";
  return fmt::format("{:.1f}% {}", 100 * std::abs(worse_by), worse_by > 0 ? "worse" : "better");
}

}  // namespace

int bench(const BenchOptions& options) {
  const std::map<std::string, Bench> benches{
      {"submit", {bench::submit, false}},   // a null driver of its own
      {"roundtrip", {bench::roundtrip, false}},  // the host device
      {"grid", {bench::grid, false}},       // the host device
      {"copy", {bench::copy, false}},       // host, a memory device and a fake device
      {"alloc", {bench::alloc, false}},     // the host device
  };
  std::vector<std::string> names = options.names;
  if (names.empty() || names == std::vector<std::string>{"all"}) {
    names.clear();
    for (const auto& [name, b] : benches) names.push_back(name);
  }
  for (const auto& name : names) {
    if (!benches.contains(name)) {
      fmt::print(stderr, "rig bench: no bench named {} (there are submit, roundtrip, grid, copy, alloc)\n", name);
      return 2;
    }
  }
  if (!options.device.empty()) {
    std::vector<std::string> own;
    for (const auto& name : names)
      if (!benches.at(name).takes_device) own.push_back(name);
    if (!own.empty())
      fmt::print(stderr, "rig bench: --device {} is not used by {}, which run on devices of their own\n",
                 options.device, fmt::join(own, ", "));
  }
  std::map<std::string, nlohmann::json> baseline;
  if (!options.compare.empty()) {
    try {
      baseline = read_baseline(options.compare);
    } catch (const std::exception& e) {
      fmt::print(stderr, "rig bench: {}\n", e.what());
      return 2;
    }
  }

  std::vector<bench::Figure> figures;
  for (const auto& name : names) {
    const Bench& b = benches.at(name);
    bench::Options o{b.takes_device ? options.device : std::string(), options.repeats};
    auto got = b.run(o);
    figures.insert(figures.end(), got.begin(), got.end());
  }
  std::vector<Comparison> compared;
  std::size_t regressions = 0;
  for (const auto& f : figures) {
    compared.push_back(options.compare.empty() ? Comparison{} : compare(f, baseline));
    regressions += compared.back().regression;
  }

  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < figures.size(); ++i) {
      const auto& f = figures[i];
      nlohmann::json j{{"name", f.name}, {"value", f.value}, {"min", f.min}, {"max", f.max}, {"unit", f.unit},
                       {"floor", f.floor}, {"floor_name", f.floor_name}, {"ratio", f.ratio}, {"note", f.note}};
      if (!options.compare.empty()) {
        // With a baseline: its value, how much worse this one is (a fraction; null when not
        // compared or infinitely worse), and the verdict.
        const auto& c = compared[i];
        j["baseline"] = c.baseline ? nlohmann::json(*c.baseline) : nlohmann::json();
        j["worse_by"] = c.baseline && std::isfinite(c.worse_by) ? nlohmann::json(c.worse_by) : nlohmann::json();
        j["regression"] = c.regression;
      }
      out.push_back(j);
    }
    fmt::print("{}\n", out.dump(2));
  } else {
    const bool with_baseline = !options.compare.empty();
    fmt::print("{:<22} {:>12} {:>12} {:>12} {:>8}  {}\n", "bench", "rig (median)", "min..max", "floor", "ratio",
               with_baseline ? "baseline  against it" : "floor is");
    for (std::size_t i = 0; i < figures.size(); ++i) {
      const auto& f = figures[i];
      std::string tail = f.floor_name;
      if (with_baseline) {
        const auto& c = compared[i];
        tail = c.baseline ? fmt::format("{:>8.2f}  {:<13}{}", *c.baseline, change(c.worse_by),
                                        c.regression ? "  REGRESSION" : "")
                          : fmt::format("{:>8}  {:<13}", "-", "not compared");
      }
      fmt::print("{:<22} {:>9.2f} {:<2} {:>5.0f}..{:<6.0f} {:>9.2f} {:<2} {:>8.2f}  {}\n", f.name, f.value, f.unit,
                 f.min, f.max, f.floor, f.unit, f.ratio, tail);
    }
  }
  if (!options.compare.empty()) {
    for (std::size_t i = 0; i < figures.size(); ++i)
      if (compared[i].regression)
        fmt::print(stderr, "rig bench: {} regressed: {:.2f} {} against {:.2f} in {} ({} worse; more than {:.0f}% is a regression)\n",
                   figures[i].name, figures[i].value, figures[i].unit, *compared[i].baseline, options.compare,
                   std::isinf(compared[i].worse_by) ? std::string("infinitely")
                                                    : fmt::format("{:.1f}%", 100 * compared[i].worse_by),
                   100 * kWorseBy);
    fmt::print(stderr, "rig bench: {} of {} figures more than {:.0f}% worse than {}\n", regressions, figures.size(),
               100 * kWorseBy, options.compare);
  }
  return regressions != 0 ? 1 : 0;
}

}  // namespace rig::tool
