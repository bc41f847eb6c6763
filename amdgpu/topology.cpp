// The KFD topology through the OS seam (topology.hpp).
#include "topology.hpp"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

namespace rig::amd {
namespace {

std::map<std::string, std::uint64_t> parse_properties(const std::string& text) {
  std::map<std::string, std::uint64_t> out;
  std::istringstream in(text);
  std::string key, value;
  while (in >> key >> value) {
    std::uint64_t v = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec == std::errc() && end == value.data() + value.size()) out[key] = v;
  }
  return out;
}

std::expected<std::string, std::string> read(os::Seam& seam, const std::string& path) {
  auto text = os::read_text(seam, path.c_str());
  if (!text) return std::unexpected(fmt::format("{}: {}", path, os::describe(text.error())));
  return *text;
}

}  // namespace

std::optional<std::string> Gpu::bus() const {
  auto it = properties.find("location_id");
  if (it == properties.end()) return std::nullopt;
  std::uint64_t loc = it->second;
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", get("domain"), (loc >> 8) & 0xff, (loc >> 3) & 0x1f, loc & 7);
}

std::string arch_of(std::uint64_t v) {
  return fmt::format("gfx{}{:x}{:x}", v / 10000, (v / 100) % 100, v % 100);
}

std::expected<std::vector<Gpu>, std::string> read_topology(os::Seam& seam) {
  std::vector<Gpu> gpus;
  for (int node = 0;; ++node) {
    std::string dir = fmt::format("{}/{}", kTopologyNodes, node);
    auto id = os::read_text(seam, (dir + "/gpu_id").c_str());
    if (!id) {
      if (id.error() == -ENOENT && node > 0) break;  // past the last node
      return std::unexpected(fmt::format("{}/gpu_id: {}", dir, os::describe(id.error())));
    }
    std::uint64_t gpu_id = 0;
    auto trimmed = id->substr(0, id->find_last_not_of(" \n") + 1);
    std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), gpu_id);
    if (gpu_id == 0) continue;  // a CPU node
    auto props = read(seam, dir + "/properties");
    if (!props) return std::unexpected(props.error());
    Gpu gpu;
    gpu.node = node;
    gpu.gpu_id = std::uint32_t(gpu_id);
    gpu.properties = parse_properties(*props);
    gpu.arch = arch_of(gpu.get("gfx_target_version"));
    for (std::uint64_t b = 0; b < gpu.get("mem_banks_count"); ++b) {
      auto bank = read(seam, fmt::format("{}/mem_banks/{}/properties", dir, b));
      if (!bank) return std::unexpected(bank.error());
      auto p = parse_properties(*bank);
      // heap_type 1: frame buffer (public), 2: frame buffer (private).
      if (p["heap_type"] == 1 || p["heap_type"] == 2) gpu.vram_bytes += p["size_in_bytes"];
    }
    for (std::uint64_t c = 0; c < gpu.get("caches_count"); ++c) {
      auto cache = read(seam, fmt::format("{}/caches/{}/properties", dir, c));
      if (!cache) return std::unexpected(cache.error());
      auto p = parse_properties(*cache);
      gpu.cache_bytes = std::max<std::uint64_t>(gpu.cache_bytes, p["size"] * 1024);  // size is in KiB
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

}  // namespace rig::amd
