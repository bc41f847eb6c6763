// Benchmarks: each measures rig's figure and a floor in the same run, and reports both with
// their ratio (rig / floor; below 1 is better than the floor for times).
#pragma once

#include <rig/rig.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace rig::bench {

struct Figure {
  std::string name;        // "submit", "roundtrip", "alloc@MEM" (on a device --device named), …
  double value = 0;        // rig's median
  double min = 0, max = 0; // over the repetitions
  std::string unit;        // "ns", "us", "allocs", "GB/s"
  double floor = 0;        // the floor's median, measured in the same run
  std::string floor_name;  // what the floor is
  double ratio = 0;        // value / floor
  std::string note;        // what was measured
};

struct Options {
  // The device to run on, where the bench allows a choice (rig bench --device); nullopt:
  // the bench's own. A bench runs on it only if its refusal (below) gave none.
  std::optional<Device> device;
  int repeats = 7;  // repetitions of each measurement; medians over them
};

// Per-operation time in ns of `op` run `n` times, as the median over `repeats` runs, with
// the min and max.
struct Spread {
  double median = 0, min = 0, max = 0;
};
Spread measure(int repeats, std::uint64_t n, const std::function<void(std::uint64_t)>& op);
// The median, min and max of `samples`; all 0 where there are none.
Spread spread_of(std::vector<double> samples);

Figure make_figure(std::string name, Spread rig, std::string unit, Spread floor, std::string floor_name,
                   std::string note);

// `name` marked with the device it ran on: "alloc@MEM".
std::string on(std::string name, const Device& device);

// The benches. Each returns its figures (several where it measures several things).
// submit: the core's cost of one submit on a null driver; with a device, that device's.
std::vector<Figure> submit(const Options&);
// roundtrip, grid, batch: launches of an empty kernel and their waits (the host device).
std::vector<Figure> roundtrip(const Options&);
std::vector<Figure> grid(const Options&);
std::vector<Figure> batch(const Options&);
// load: Image::load + resolve + unload of the demo's ELF object beside dlopen of it as a
// shared object (the host device).
std::vector<Figure> load(const Options&);
// copy: 256 MiB between host memory and devices' memory; alloc: 64 KiB buffers.
std::vector<Figure> copy(const Options&);
std::vector<Figure> alloc(const Options&);
// The DISK io device beside fio (built with the disk device). Takes no device; its size is
// 1 GiB, or RIG_BENCH_DISK_BYTES (disk_bytes).
std::vector<Figure> disk(const Options&);
// ptx: the PTX interpreter of NVIDIA's simulators on nvcc's block reduction, beside the same
// kernel written for the host. Takes no device.
std::vector<Figure> ptx(const Options&);

// Why a bench cannot run on `device`, or nullopt where it can. Each bench that takes a
// device has one; `rig bench` asks it before running anything.
// load, and submit's launch: the device must launch, and be the host device, whose kernel (the
// demo's ELF object) these benches carry.
std::optional<std::string> refuses_launch(const Device&);
// True iff one of `device`'s queues runs work of kind `kind`.
bool runs(const Device& device, Kind kind);
// roundtrip, grid, batch: the device must launch, and these benches must carry an empty kernel
// it loads: for the host device (the demo's ELF object), and for NVIDIA devices of sm_90 or
// sm_80 (`empty` of tests/cuda/kernels.cu, nvcc's fatbin).
std::optional<std::string> refuses_empty_kernel(const Device&);
// The fatbin of tests/cuda/kernels.cu for `arch` ("sm_90", "sm_80") the benches carry, empty
// for another arch; a simulated GPU registers it so that its engines know the kernels.
std::span<const std::byte> nvidia_kernels(std::string_view arch);
// The empty kernel of the launch benches, loaded on `device`. Raises invalid_argument with
// refuses_empty_kernel's reason where it gives one.
Function empty_kernel(const Device& device);
// submit: a launch as above, or else a copy part on a device that copies.
std::optional<std::string> refuses_submit(const Device&);
// copy, alloc: the device must make buffers (not an io device).
std::optional<std::string> refuses_memory(const Device&);

// The bytes the disk bench reads and writes: RIG_BENCH_DISK_BYTES where set (a count of
// bytes, or with a suffix K, M or G: "16M"), else 1 GiB. Raises invalid_argument naming the
// value if it is not a whole number of MiB of at least 1 MiB (fio's O_DIRECT 1 MiB blocks).
std::size_t disk_bytes();

}  // namespace rig::bench
