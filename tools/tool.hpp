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

struct ServeOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0: one the system picks
  std::vector<std::string> devices;    // empty: every device the agent serves
  std::string token_file;              // empty: RIG_TOKEN or RIG_TOKEN_FILE
};
int serve(const ServeOptions&);

}  // namespace rig::tool
