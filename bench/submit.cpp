// `rig bench submit`: the core's own cost for one submit — one launch part, two buffer refs,
// no waits — on a null driver whose values complete inside its submit, so nothing but rig
// is measured. The floor is the same driver's room and submit called directly. It also
// counts the heap allocations per submit, which must be 0.
//
// On a device (--device), the same submit on that device's driver: a launch of an empty
// kernel where the bench has one for the device (the host device; AMD GPUs where the tool
// carries amd_submit.cpp), else a 64-byte copy part. Only the time in submit counts: the
// work is waited for, untimed, after each burst of 64 submits. The floor is the same
// submission on the null driver timed the same way — the core alone — so the ratio is what
// the device's driver adds. On an AMD GPU it also times the driver's own part of a launch
// submission beside memcpy of the ring dwords it writes (amd_submit.cpp), and on an NVIDIA GPU
// of rig's driver beside memcpy of its push-buffer words, bank 0 and QMD (nv_submit.cpp).
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>

#include "bench.hpp"
#include "gpu_submit.hpp"
#include "heap_count.hpp"

namespace rig::bench {

namespace {
std::vector<std::pair<std::string, const GpuLaunches*>>& registered() {
  static auto* launches = new std::vector<std::pair<std::string, const GpuLaunches*>>;  // kept until exit
  return *launches;
}
}  // namespace

const GpuLaunches* gpu_launches(std::string_view prefix) {
  for (const auto& [p, launches] : registered())
    if (p == prefix) return launches;
  return nullptr;
}

GpuRegistration::GpuRegistration(std::string prefix, GpuLaunches launches) {
  registered().emplace_back(std::move(prefix), new GpuLaunches(std::move(launches)));
}

namespace {

// A driver that runs nothing: every value it is given completes at once. Memory is host
// memory; its one image has one function, "kernel", with 16 parameter bytes.
class Null final : public edge::Driver {
 public:
  explicit Null(volatile std::uint64_t* word) { state_.word = word; }
  edge::Facts facts() override {
    edge::Facts f;
    f.arch = "null";
    f.budget = std::size_t(1) << 30;
    f.queues = {{"COMPUTE:0", {Kind::Launch, Kind::Copy}}};
    f.copy_engine = 0;
    f.completion = edge::Completion::Store;
    f.host_addresses = true;
    f.alignment = 64;
    f.word = state_.word;
    f.edge = &state_;
    return f;
  }
  std::optional<edge::Region> alloc(Memory, std::size_t n) override {
    void* p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) return std::nullopt;
    return edge::Region{reinterpret_cast<std::uintptr_t>(p)};
  }
  void free(edge::Region r) override { std::free(reinterpret_cast<void*>(r.id)); }
  edge::Location locate(edge::Region r) override { return {r.id, r.id, std::intptr_t(r.id)}; }
  Result<edge::Code> image(std::span<const std::byte>) override { return edge::Loaded{1}; }
  edge::EntryAnswer entry(edge::ImageId, std::string_view name) override {
    if (name != "kernel") return edge::Absent{};
    return edge::Entry{0x1000, nullptr, 16, 1024};
  }
  void unload(edge::ImageId) override {}
  void stop(std::string_view) override {}

  struct State {
    const rig_driver* table = &kTable;
    volatile std::uint64_t* word = nullptr;
  };
  static int room(void*, rig_part*, std::uint32_t, std::uint32_t, char*) { return RIG_FITS; }
  static int submit(void* edge, rig_part*, std::uint32_t, const rig_wait*, std::uint32_t, std::uint64_t v,
                    std::uint64_t*, const char**) {
    __atomic_store_n(static_cast<State*>(edge)->word, v, __ATOMIC_RELEASE);
    return RIG_COMMITTED;
  }
  static int commit(void*, std::uint64_t, const char**) { return RIG_OK; }
  static constexpr rig_driver kTable{room, submit, commit, nullptr, nullptr};
  State state_;
};

Device open_null() {
  edge::Opener<> opener{"NULL", [](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
                          return std::make_unique<Null>(word);
                        }};
  return *open(opener);
}

using Ref = Submission::Ref;

// The part the submit bench gives `d`: a launch of `f` with 16 parameter bytes, two buffer
// refs (slots 0 and 1), or, without f, a 64-byte copy from slot 0 to slot 1.
Submission::Part bench_part(const std::optional<Function>& f) {
  if (f) return {"", {}, Submission::Launch{*f, 16, {{0, Ref::What::Buffer, 0, {}}, {8, Ref::What::Buffer, 1, {}}}}};
  return {"", {}, Submission::Copy{{{}, 0}, {{}, 1}, {Box::row(64)}, {}}};
}

// Submits in a burst, between untimed waits for the device's work.
constexpr std::uint64_t kBurst = 64;

// The time in submit alone, per submit, of `n` submits of `part` on `d` (one buffer read,
// one written): the median over `repeats` repetitions, with the min and max; the heap
// allocations per submit in `allocs`, counted on the submitting thread (the device's own
// threads, such as a simulator's engines, allocate as they run the work).
Spread time_submits(Device d, const Submission::Part& part, int repeats, std::uint64_t n, double& allocs) {
  auto s = Submission::make(d, std::span(&part, 1), 1, 1);
  Buffer a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
  Buffer reads[] = {a}, writes[] = {b};
  Run run;
  if (std::holds_alternative<Submission::Launch>(part.work)) run.groups(s.block(0), 1);
  std::uint64_t allocated = 0, submits = 0;
  auto burst = [&] {
    const std::uint64_t before = heap_count::this_thread();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) rig::submit(s, run, reads, writes);
    const auto t1 = std::chrono::steady_clock::now();
    allocated += heap_count::this_thread() - before;
    submits += kBurst;
    d.wait(d.submitted());
    return double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
  };
  const std::uint64_t bursts = std::max<std::uint64_t>(n / kBurst, 1);
  for (std::uint64_t i = 0; i < std::max<std::uint64_t>(bursts / 10, 1); ++i) burst();  // warm up
  allocated = submits = 0;
  std::vector<double> per_submit;
  for (int r = 0; r < repeats; ++r) {
    double ns = 0;
    for (std::uint64_t i = 0; i < bursts; ++i) ns += burst();
    per_submit.push_back(ns / double(bursts * kBurst));
  }
  allocs = double(allocated) / double(submits);
  return spread_of(std::move(per_submit));
}

Figure allocations_figure(std::string name, double allocs, std::string note) {
  Figure f;
  f.name = std::move(name);
  f.value = f.min = f.max = allocs;
  f.unit = "allocs";
  f.floor = 0;
  f.floor_name = "none allowed";
  f.ratio = allocs;
  f.note = std::move(note);
  return f;
}

// The empty kernel the bench launches on `device`, or why it has none (in `why`).
std::optional<Function> bench_kernel(const Device& device, std::string& why) {
  const bool amd = device.arch().starts_with("gfx"), nv = device.name().starts_with("NV:");
  if (amd || nv) {
    const GpuLaunches* launches = gpu_launches(amd ? "AMD:" : "NV:");
    if (!launches) {
      why = fmt::format("this rig carries no kernel for {} ({}): {}", device.name(), device.arch(),
                        amd ? "its build compiles one with clang-19 and ld.lld-19, and found none"
                            : "it is built without rig's NVIDIA driver");
      return std::nullopt;
    }
    if (auto r = launches->refuses(device)) {
      why = *r;
      return std::nullopt;
    }
    return launches->kernel(device);
  }
  if (auto r = refuses_launch(device)) {
    why = *r;
    return std::nullopt;
  }
  return empty_kernel(device);
}

// The submit bench on `device`, beside the same submission on the null driver; on an AMD GPU,
// the driver's own part of it too.
std::vector<Figure> submit_on(const Device& device, int repeats) {
  const std::uint64_t n = 200'000;
  std::string why;
  const std::optional<Function> kernel = bench_kernel(device, why);
  if (!kernel && runs(device, Kind::Launch))
    fmt::print(stderr, "rig bench: submit on {} times a copy part, not a launch: {}\n", device.name(), why);
  Device null = open_null();
  double allocs = 0, null_allocs = 0;
  Spread rig = time_submits(device, bench_part(kernel), repeats, n, allocs);
  Spread floor = time_submits(
      null, bench_part(kernel ? Image::load(null, {})->resolve("kernel") : std::nullopt), repeats, n, null_allocs);
  null.close();
  const std::string what = kernel ? "one launch part (the empty kernel), two buffer refs, no waits"
                                  : fmt::format("one copy part of 64 bytes between two buffers, no waits ({})", why);
  std::vector<Figure> out;
  out.push_back(make_figure(on("submit", device), rig, "ns", floor, "the same submit on a null driver (rig's core alone)",
                            fmt::format("{} on {}; the time in submit alone, the work waited for between bursts of {}",
                                        what, device.name(), kBurst)));
  out.push_back(allocations_figure(on("submit-allocations", device), allocs,
                                   fmt::format("heap allocations per submit on {}, on the submitting thread",
                                               device.name())));
  for (const char* prefix : {"AMD:", "NV:"})
    if (const GpuLaunches* launches = gpu_launches(prefix); kernel && launches && !launches->refuses(device))
      out.push_back(launches->driver_part(device, repeats));
  return out;
}

}  // namespace

std::optional<std::string> refuses_submit(const Device& d) {
  auto why = refuses_launch(d);
  if (!why || d.queues().empty()) return why;
  if (runs(d, Kind::Copy)) return std::nullopt;
  return fmt::format("{}, and none of its queues copies", *why);
}

std::vector<Figure> submit(const Options& o) {
  if (o.device) return submit_on(*o.device, o.repeats);
  Device d = open_null();
  Function f = *Image::load(d, {})->resolve("kernel");
  Submission::Part part = bench_part(f);
  auto s = Submission::make(d, std::span(&part, 1), 1, 1);
  Buffer a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
  Buffer reads[] = {a}, writes[] = {b};
  Run run;
  run.groups(s.block(0), 1);
  submit(s, run, reads, writes);  // the run grows to fit once

  const std::uint64_t n = 1'000'000;
  std::uint64_t submits = 0, allocated = 0;
  Spread rig = measure(o.repeats, n, [&](std::uint64_t k) {
    std::uint64_t before = heap_count::process();
    for (std::uint64_t i = 0; i < k; ++i) rig::submit(s, run, reads, writes);
    allocated += heap_count::process() - before;
    submits += k;
  });
  double allocs = double(allocated) / double(submits);

  // The floor: the driver's own room + submit, called directly on a prepared part.
  volatile std::uint64_t floor_word = 0;
  Null::State floor_state;
  floor_state.word = &floor_word;
  auto* state = &floor_state;
  rig_part raw{};
  raw.kind = RIG_KIND_LAUNCH;
  std::uint64_t v = 0;
  Spread floor = measure(o.repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      char why[RIG_WHY];
      why[0] = 0;
      if (state->table->room(state, &raw, 1, 0, why) == RIG_FITS) {
        const char* failure = nullptr;
        state->table->submit(state, &raw, 1, nullptr, 0, ++v, nullptr, &failure);
      }
    }
  });
  d.wait(d.submitted());
  std::vector<Figure> out;
  out.push_back(make_figure("submit", rig, "ns", floor, "the driver's room + submit alone",
                            "one launch part, two buffer refs, no waits"));
  out.push_back(allocations_figure("submit-allocations", allocs,
                                   fmt::format("heap allocations per submit over {} submits", submits)));
  d.close();
  return out;
}

}  // namespace rig::bench
