// `rig devices`: the devices this machine can open, with their facts, and the GPUs on its PCI
// bus, with why rig can or cannot open each.
#include <rig/amd_abi.hpp>
#include <rig/nv_abi.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "machine.hpp"
#include "pci.hpp"
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

// An AMD device's compute: its compute units, XCCs and wave size (rig/amd_abi.hpp); null for
// other devices.
nlohmann::json amd_compute(const Device& d) {
  const auto* abi = d.capability(amd::kAbi);
  if (!abi) return nullptr;
  return {{"compute_units", abi->compute_units}, {"xccs", abi->xccs}, {"wave_size", abi->wave_size}};
}

// A device of rig's NVIDIA driver ("NV:n"): the kernel driver's version and its compute
// (rig/nv_abi.hpp) beside its facts; null for other devices.
bool is_nv(const Device& d) { return d.name().starts_with("NV:"); }
nlohmann::json nv_facts(const Device& d) {
  if (!is_nv(d)) return nullptr;
  auto version = nv_driver_version();
  nlohmann::json facts{{"driver_version", version ? nlohmann::json(*version) : nlohmann::json()},
                       {"video_memory", d.facts().budget}};
  if (const auto* abi = d.capability(nv::kAbi))
    facts["sms"] = abi->sm_count, facts["shared_per_sm"] = abi->shared_per_sm,
    facts["shared_per_block"] = abi->shared_per_block;
  return facts;
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
      {"amd", amd_compute(d)},
      {"nv", nv_facts(d)},
  };
}

nlohmann::json optional_text(const std::optional<std::string>& text) {
  return text ? nlohmann::json(*text) : nlohmann::json();
}

nlohmann::json describe(const PciGpu& gpu, const Reach& reach) {
  return {
      {"address", gpu.address},
      {"vendor_id", fmt::format("{:04x}", gpu.vendor_id)},
      {"device_id", fmt::format("{:04x}", gpu.device_id)},
      {"class_id", fmt::format("{:04x}", gpu.class_id)},
      {"vendor", gpu.vendor},
      {"device", gpu.device},
      {"class", gpu.kind},
      {"driver", optional_text(gpu.driver)},
      {"render_node", optional_text(gpu.render_node)},
      {"opened_as", opened_as(gpu, reach)},
      {"why", why(gpu, reach)},
  };
}

// What rig reached: the devices `found` with their facts' addresses, the GPUs that failed to
// open by address, and the ways this build has to GPUs.
Reach reach_of(const std::vector<Device>& found, std::map<std::string, std::string> failed) {
  Reach reach;
  for (const auto& d : found) reach.opened.emplace_back(d.name(), d.facts().bus);
  reach.failed = std::move(failed);
  GpuPaths paths = gpu_paths();
  reach.amd_driver = paths.amd;
  reach.kfd = paths.kfd;
  reach.amd_none = paths.amd_none;
  reach.cuda_driver = paths.cuda;
  reach.cuda_none = paths.cuda_none;
  return reach;
}

void print_pci(const PciScan& scan, const Reach& reach) {
  if (!scan.gpus.empty()) {
    fmt::print("\nGPUs on the PCI bus ({}):\n", scan.sysfs_pci);
  } else if (scan.notes.empty()) {
    fmt::print("\nno GPU on the PCI bus ({})\n", scan.sysfs_pci);
  } else {
    fmt::print("\n");
  }
  for (const auto& gpu : scan.gpus) {
    fmt::print("{}  {} {} ({})\n  driver {}  render node {}\n  {}\n", gpu.address, gpu.vendor, gpu.device, gpu.kind,
               gpu.driver.value_or("none"), gpu.render_node.value_or("none"), why(gpu, reach));
  }
  for (const auto& note : scan.notes) fmt::print("{}\n", note);
}

}  // namespace

int devices(const DevicesOptions& options) {
  std::map<std::string, std::string> failed;
  std::vector<Device> found = open_all([](const std::string& why) { fmt::print(stderr, "{}\n", why); }, &failed);
  Reach reach = reach_of(found, std::move(failed));
  std::string root = sysfs_pci_root();
  PciScan scan = scan_gpus(root, render_nodes_for(root));
  if (options.json) {
    nlohmann::json opened = nlohmann::json::array();
    for (const auto& d : found) {
      nlohmann::json device = describe(d);
      device["pci"] = nullptr;
      for (const auto& gpu : scan.gpus)
        if (auto names = opened_as(gpu, reach); std::find(names.begin(), names.end(), d.name()) != names.end())
          device["pci"] = describe(gpu, reach);
      opened.push_back(std::move(device));
    }
    if (!options.pci) {
      fmt::print("{}\n", opened.dump(2));
      return 0;
    }
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& gpu : scan.gpus) gpus.push_back(describe(gpu, reach));
    nlohmann::json out = {{"devices", std::move(opened)},
                          {"pci", {{"sysfs", scan.sysfs_pci}, {"gpus", std::move(gpus)}, {"notes", scan.notes}}}};
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
    if (const auto* abi = d.capability(amd::kAbi))
      fmt::print("  compute: {} compute units on {} XCC{}, wave{}\n", abi->compute_units, abi->xccs,
                 abi->xccs == 1 ? "" : "s", abi->wave_size);
    if (is_nv(d)) {
      auto version = nv_driver_version();
      fmt::print("  NVIDIA: {} video memory, kernel driver {}, bus {}\n",
                 fmt::format("{:.1f} GiB", double(f.budget) / double(1u << 30)),
                 version ? *version : "unknown (" + version.error() + ")", f.bus.value_or("unknown"));
      if (const auto* abi = d.capability(nv::kAbi))
        fmt::print("  compute: {} SMs, {} KiB shared memory an SM, {} KiB a block\n", abi->sm_count,
                   abi->shared_per_sm / 1024, abi->shared_per_block / 1024);
    }
  }
  print_pci(scan, reach);
  return 0;
}

}  // namespace rig::tool
