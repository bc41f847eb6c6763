// topology.hpp — the GPUs the KFD topology lists in sysfs, read through the OS seam.
//
// /sys/devices/virtual/kfd/kfd/topology/nodes/N/ holds one node per processor: `gpu_id`
// (0 for a CPU node), `properties` ("key value" lines), `mem_banks/M/properties` and
// `caches/C/properties`. The AMD driver numbers the GPU nodes 0, 1, ... in node order.
#pragma once

#include <rig/os.hpp>

#include <cstdint>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rig::amd {

constexpr const char* kTopologyNodes = "/sys/devices/virtual/kfd/kfd/topology/nodes";

struct Gpu {
  int node = 0;               // the topology node
  std::uint32_t gpu_id = 0;   // KFD's id of the GPU, which ioctls name it by
  std::map<std::string, std::uint64_t> properties;
  std::uint64_t vram_bytes = 0;     // the sum of the public and private frame-buffer banks
  std::uint64_t cache_bytes = 0;    // the largest cache's size, 0 if none is listed
  std::string arch;                 // "gfx1100", from gfx_target_version

  // A property, or `otherwise` when the node does not list it.
  std::uint64_t get(const std::string& key, std::uint64_t otherwise = 0) const {
    auto it = properties.find(key);
    return it == properties.end() ? otherwise : it->second;
  }
  // The PCI bus address "dddd:bb:dd.f" from domain and location_id, if listed.
  std::optional<std::string> bus() const;
};

// The processor named by a gfx_target_version: 110000 is "gfx1100", 90010 "gfx90a".
std::string arch_of(std::uint64_t gfx_target_version);

// The GPU nodes of the topology, in node order. Error naming the file when the topology
// cannot be read (no KFD: "/sys/devices/virtual/kfd/kfd/topology/nodes/0/gpu_id: ENOENT ...").
std::expected<std::vector<Gpu>, std::string> read_topology(os::Seam& seam);

}  // namespace rig::amd
