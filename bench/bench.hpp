// Benchmarks: each measures rig's figure and a floor in the same run, and reports both with
// their ratio (rig / floor; below 1 is better than the floor for times).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rig::bench {

struct Figure {
  std::string name;        // "submit", "roundtrip", …
  double value = 0;        // rig's median
  double min = 0, max = 0; // over the repetitions
  std::string unit;        // "ns", "us", "allocs"
  double floor = 0;        // the floor's median, measured in the same run
  std::string floor_name;  // what the floor is
  double ratio = 0;        // value / floor
  std::string note;        // what was measured
};

struct Options {
  std::string device;  // a device to run on, where the bench allows a choice
  int repeats = 7;     // repetitions of each measurement; medians over them
};

// Per-operation time in ns of `op` run `n` times, as the median over `repeats` runs, with
// the min and max.
struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread measure(int repeats, std::uint64_t n, const std::function<void(std::uint64_t)>& op);

Figure make_figure(std::string name, Spread rig, std::string unit, Spread floor, std::string floor_name,
                   std::string note);

// The benches. Each returns its figures (several where it measures several things).
std::vector<Figure> submit(const Options&);
std::vector<Figure> roundtrip(const Options&);
std::vector<Figure> grid(const Options&);
std::vector<Figure> copy(const Options&);
std::vector<Figure> alloc(const Options&);
// The DISK io device beside fio (built with the disk device).
std::vector<Figure> disk(const Options&);

// Heap allocations made by this process so far (counted by the replaced operator new).
std::uint64_t heap_allocations();

}  // namespace rig::bench
