// `rig bench NAME [--json]`: runs a bench and prints rig's figures beside their floors.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <map>

#include "../bench/bench.hpp"
#include "tool.hpp"

namespace rig::tool {

int bench(const BenchOptions& options) {
  const std::map<std::string, std::function<std::vector<bench::Figure>(const bench::Options&)>> benches{
      {"submit", bench::submit},
      {"roundtrip", bench::roundtrip},
      {"grid", bench::grid},
      {"copy", bench::copy},
      {"alloc", bench::alloc},
  };
  std::vector<std::string> names = options.names;
  if (names.empty() || names == std::vector<std::string>{"all"}) {
    names.clear();
    for (const auto& [name, run] : benches) names.push_back(name);
  }
  bench::Options o{options.device, options.repeats};
  std::vector<bench::Figure> figures;
  for (const auto& name : names) {
    auto it = benches.find(name);
    if (it == benches.end()) {
      fmt::print(stderr, "rig bench: no bench named {} (there are submit, roundtrip, grid, copy, alloc)\n", name);
      return 2;
    }
    auto got = it->second(o);
    figures.insert(figures.end(), got.begin(), got.end());
  }
  if (options.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& f : figures)
      out.push_back({{"name", f.name}, {"value", f.value}, {"min", f.min}, {"max", f.max}, {"unit", f.unit},
                     {"floor", f.floor}, {"floor_name", f.floor_name}, {"ratio", f.ratio}, {"note", f.note}});
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("{:<22} {:>12} {:>12} {:>12} {:>8}  {}\n", "bench", "rig (median)", "min..max", "floor", "ratio",
             "floor is");
  for (const auto& f : figures)
    fmt::print("{:<22} {:>9.2f} {:<2} {:>5.0f}..{:<6.0f} {:>9.2f} {:<2} {:>8.2f}  {}\n", f.name, f.value, f.unit,
               f.min, f.max, f.floor, f.unit, f.ratio, f.floor_name);
  return 0;
}

}  // namespace rig::tool
