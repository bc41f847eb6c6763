// The `rig` command-line tool's commands.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rig::tool {

struct DemoOptions {
  std::uint64_t elements = std::uint64_t(16) << 20;  // 16 Mi floats
  std::uint32_t groups = 64;
};
int demo(const DemoOptions&);

struct DevicesOptions {
  bool json = false;
  bool pci = false;  // with json: an object of the opened devices and the GPUs on the PCI bus
};
int devices(const DevicesOptions&);

struct BenchOptions {
  std::vector<std::string> names;  // empty or "all": every bench
  bool json = false;
  std::string device;
  int repeats = 7;
  std::string compare;  // a baseline (rig bench --json) to compare with; empty: none
};
int bench(const BenchOptions&);

}  // namespace rig::tool
