// topology.hpp — the GPUs the KFD topology lists in sysfs, read through the OS seam.
//
// /sys/devices/virtual/kfd/kfd/topology/nodes/N/ holds one node per processor: `gpu_id`
// (0 for a CPU node), `properties` ("key value" lines), `mem_banks/M/properties` and
// `caches/C/properties`. The AMD driver numbers the GPU nodes 0, 1, ... in node order.
#pragma once

#include <rig/os.hpp>

#include <algorithm>
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

  // The compute units: simd_count / simd_per_cu, as kfd_topology.c derives simd_count from
  // the CU count (kfd_crat.c: num_simd_cores = simd_per_cu * CUs); 0 if either is missing.
  std::uint64_t compute_units() const {
    const std::uint64_t per_cu = get("simd_per_cu");
    return per_cu ? get("simd_count") / per_cu : 0;
  }
  // The compute dies (XCCs) whose command processors read the device's queues: num_xcc
  // (kfd_topology.c: NUM_XCC of the node's xcc_mask), 1 where the node does not list it.
  std::uint32_t xccs() const { return std::uint32_t(std::max<std::uint64_t>(get("num_xcc", 1), 1)); }
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
