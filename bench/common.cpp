#include <algorithm>
#include <chrono>

#include "bench.hpp"

namespace rig::bench {

Spread measure(int repeats, std::uint64_t n, const std::function<void(std::uint64_t)>& op) {
  std::vector<double> per_op;
  op(std::max<std::uint64_t>(n / 10, 1));  // warm up
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    op(n);
    auto t1 = std::chrono::steady_clock::now();
    per_op.push_back(double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) / double(n));
  }
  return spread_of(std::move(per_op));
}

Spread spread_of(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front(), samples.back()};
}

bool runs(const Device& device, Kind kind) {
  for (const auto& q : device.queues())
    if (std::find(q.runs.begin(), q.runs.end(), kind) != q.runs.end()) return true;
  return false;
}

Figure make_figure(std::string name, Spread rig, std::string unit, Spread floor, std::string floor_name,
                   std::string note) {
  Figure f;
  f.name = std::move(name);
  f.value = rig.median;
  f.min = rig.min;
  f.max = rig.max;
  f.unit = std::move(unit);
  f.floor = floor.median;
  f.floor_name = std::move(floor_name);
  f.ratio = floor.median > 0 ? rig.median / floor.median : 0;
  f.note = std::move(note);
  return f;
}

std::string on(std::string name, const Device& device) { return name + "@" + std::string(device.name()); }

}  // namespace rig::bench
