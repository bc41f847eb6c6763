// The submit bench's launches on AMD GPUs (amd_submit.hpp): the empty kernel of
// bench/amd_kernels.c, built for gfx1100, gfx942 and gfx90a and embedded here, and the driver's own part of a
// launch submission, timed on a driver of the same GPU opened for it outside rig.
#include "amd_submit.hpp"
#include "driver_floor.hpp"

#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sched.h>

#include "../tools/machine.hpp"
#include <rig/amd.hpp>

extern const unsigned char rig_amd_bench_kernels[], rig_amd_bench_kernels_gfx942[], rig_amd_bench_kernels_gfx90a[];
extern const std::size_t rig_amd_bench_kernels_size, rig_amd_bench_kernels_gfx942_size, rig_amd_bench_kernels_gfx90a_size;

namespace rig::bench {
namespace {

constexpr const char* kKernel = "bench_empty";
// Submissions in a burst, between untimed waits for the device's work (as submit.cpp).
constexpr std::uint64_t kBurst = 64;

// The empty kernel's code object for processor `arch`, empty for one it is not built for.
std::span<const std::byte> kernel_bytes(std::string_view arch) {
  auto bytes = [](const unsigned char* p, std::size_t n) { return std::span(reinterpret_cast<const std::byte*>(p), n); };
  if (arch == "gfx1100") return bytes(rig_amd_bench_kernels, rig_amd_bench_kernels_size);
  if (arch == "gfx942") return bytes(rig_amd_bench_kernels_gfx942, rig_amd_bench_kernels_gfx942_size);
  if (arch == "gfx90a") return bytes(rig_amd_bench_kernels_gfx90a, rig_amd_bench_kernels_gfx90a_size);
  return {};
}

// The machine's GPU named as `device` is, if it is one.
std::optional<tool::Gpu> gpu_of(const Device& device) {
  for (auto& gpu : tool::gpu_openers([](const std::string&) {}))
    if (gpu.name == device.name()) return gpu;
  return std::nullopt;
}

std::optional<std::string> refuses(const Device& device) {
  if (!device.name().starts_with("AMD:") || !gpu_of(device))
    return fmt::format("{} is not one of this machine's AMD GPUs", device.name());
  if (kernel_bytes(device.arch()).empty())
    return fmt::format("the bench's AMD kernel is built for gfx1100, gfx942 and gfx90a only, and {} is {}",
                       device.name(), device.arch());
  return std::nullopt;
}

Function kernel(const Device& device) {
  auto image = Image::load(device, kernel_bytes(device.arch()));
  if (!image)
    throw std::runtime_error(fmt::format("loading the bench's kernel on {}: {}", device.name(), image.error()));
  auto f = image->resolve(kKernel);
  if (!f) throw std::runtime_error(fmt::format("the bench's image on {} has no {}", device.name(), kKernel));
  return *f;
}

// The driver of a GPU opened outside rig, its word a page of its own, with two buffers and
// the kernel placed in its memory: a launch value is handed to its room and submit as rig
// hands one, with a launch part whose parameters are the buffers' addresses.
class OwnDriver {
 public:
  // `arch`: the GPU's processor, whose build of the kernel it places.
  OwnDriver(const tool::Gpu& gpu, std::string arch) : name_(gpu.name), arch_(std::move(arch)) {
    auto made = gpu.make().make(&word_page_[0]);
    if (!made) throw std::runtime_error(fmt::format("opening a second driver of {}: {}", name_, made.error()));
    driver_ = std::move(*made);
    const edge::Facts facts = driver_->facts();
    edge_ = facts.edge;
    hang_ms_ = facts.hang_ms;
    table_ = *static_cast<const rig_driver* const*>(edge_);
    submitted_ = load();
    for (auto& param : params_) {  // the launch's two buffers
      auto region = driver_->alloc(Memory::Device, 4096);
      if (!region) throw std::runtime_error(fmt::format("{} has no memory for the bench's buffers", name_));
      regions_.push_back(*region);
      param = *driver_->locate(*region).address;
    }
    place_kernel();
    part_.queue = 0;  // COMPUTE:0
    part_.kind = RIG_KIND_LAUNCH;
    auto& l = part_.work.launch;
    l.code = entry_.code;
    l.launch = entry_.launch;
    for (int k = 0; k < 3; ++k) l.groups[k] = l.threads[k] = 1;
    l.param_bytes = sizeof params_;
    l.params = params_;
    l.ref_offsets = kRefOffsets;
    l.ref_count = 2;
  }
  OwnDriver(const OwnDriver&) = delete;
  OwnDriver& operator=(const OwnDriver&) = delete;

  ~OwnDriver() {
    try {
      wait(submitted_);
    } catch (const std::exception&) {
    }
    driver_->stop("the bench is done");
    if (image_) driver_->unload(*image_);
    for (auto& r : regions_) driver_->free(r);
  }

  // `bytes` of the GPU's memory that the host writes, as it writes the driver's rings.
  std::span<std::byte> host_memory(std::size_t bytes) {
    auto region = driver_->alloc(Memory::Pinned, bytes);
    if (!region) throw std::runtime_error(fmt::format("{} has no memory for the bench's floor", name_));
    regions_.push_back(*region);
    auto* host = reinterpret_cast<std::byte*>(*driver_->locate(*region).host);
    std::memset(host, 0, bytes);  // its pages are there before the timing
    return {host, bytes};
  }

  // room + submit of the next value, as rig calls them; throws with the driver's reason.
  void submit() {
    char why[RIG_WHY] = "";
    if (int room = table_->room(edge_, &part_, 1, 0, why); room != RIG_FITS)
      throw std::runtime_error(fmt::format("{}'s room answered {} for one launch{}{}", name_, room, *why ? ": " : "",
                                           why));
    const char* failure = nullptr;
    if (table_->submit(edge_, &part_, 1, nullptr, 0, ++submitted_, nullptr, &failure) != RIG_COMMITTED)
      throw std::runtime_error(fmt::format("{}'s submit failed: {}", name_, failure ? failure : "no reason"));
  }
  // Blocks until the word shows the last value submitted.
  void wait() { wait(submitted_); }
  amd::RingView ring() {
    auto r = amd::ring_of(*driver_, 0);
    if (!r) throw std::runtime_error(r.error());
    return *r;
  }

 private:
  static constexpr std::uint32_t kRefOffsets[2] = {0, 8};

  std::uint64_t load() const { return __atomic_load_n(&word_page_[0], __ATOMIC_ACQUIRE); }
  // Throws if the GPU does not reach v within the hang time rig would give it.
  void wait(std::uint64_t v) {
    const auto most = std::chrono::milliseconds(hang_ms_.value_or(10'000));
    const auto deadline = std::chrono::steady_clock::now() + most;
    while (load() < v) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error(fmt::format("{} did not complete value {} within {} ms", name_, v, most.count()));
      driver_->sleep(v, std::chrono::milliseconds(100));
    }
  }
  void place_kernel() {
    auto code = driver_->image(kernel_bytes(arch_));
    if (!code) throw std::runtime_error(fmt::format("{} refuses the bench's kernel: {}", name_, code.error()));
    if (auto* loaded = std::get_if<edge::Loaded>(&*code)) {
      image_ = loaded->image;
    } else {
      auto& place = std::get<edge::Place>(*code);
      auto region = driver_->alloc(Memory::Device, place.bytes);
      if (!region) throw std::runtime_error(fmt::format("{} has no memory for the bench's kernel", name_));
      regions_.push_back(*region);
      auto [id, bytes] = place.place(*region);
      image_ = id;
      std::memcpy(reinterpret_cast<void*>(*driver_->locate(*region).host), bytes.data(), bytes.size());
    }
    auto entry = driver_->entry(*image_, kKernel);
    if (!std::holds_alternative<edge::Entry>(entry))
      throw std::runtime_error(fmt::format("{} gives no {} of the bench's kernel", name_, kKernel));
    entry_ = std::get<edge::Entry>(entry);
  }

  // The word's page: the driver maps it for the GPU, as it does a word outside rig_words.
  alignas(4096) static inline volatile std::uint64_t word_page_[512] = {};
  std::string name_, arch_;
  std::unique_ptr<edge::Driver> driver_;
  void* edge_ = nullptr;
  std::optional<int> hang_ms_;
  const rig_driver* table_ = nullptr;
  std::uint64_t submitted_ = 0;
  std::vector<edge::Region> regions_;  // the buffers' and the kernel's
  std::optional<edge::ImageId> image_;
  edge::Entry entry_;
  std::uint64_t params_[2] = {};
  rig_part part_{};
};

Figure driver_part(const Device& device, int repeats) {
  if (auto why = refuses(device)) throw std::invalid_argument(*why);
  const tool::Gpu gpu = *gpu_of(device);
  OwnDriver own(gpu, std::string(device.arch()));
  // What one launch value writes: its dwords in COMPUTE:0's ring and its kernel arguments
  // (the launch's parameters, the hidden arguments, the dispatch packet). The floor copies
  // exactly these.
  own.submit();
  own.wait();
  const amd::RingView before = own.ring();
  own.submit();
  const amd::RingView after = own.ring();
  own.wait();
  const std::uint64_t n = after.written - before.written, dwords = after.dwords;
  std::vector<std::uint32_t> words(n);
  for (std::uint64_t i = 0; i < n; ++i) words[i] = after.words[(before.written + i) % dwords];
  const std::uint64_t k = after.kernargs_taken - before.kernargs_taken;
  if (k > after.kernarg_bytes || before.kernargs_taken % after.kernarg_bytes + k > after.kernarg_bytes)
    throw std::runtime_error(fmt::format("{}: one launch took {} bytes of kernel arguments, which wrapped", device.name(), k));
  std::vector<std::byte> arguments(after.kernargs + before.kernargs_taken % after.kernarg_bytes,
                                   after.kernargs + before.kernargs_taken % after.kernarg_bytes + k);
  // The floor's ring and argument area, of the driver's sizes and in the GPU's memory, as
  // the driver's are, and a reader on another thread that reads what each burst wrote, as
  // the command processor reads the driver's.
  const std::span<std::byte> ring_bytes = own.host_memory(dwords * 4);
  const std::span<std::uint32_t> ring(reinterpret_cast<std::uint32_t*>(ring_bytes.data()), dwords);
  const std::span<std::byte> area = own.host_memory(after.kernarg_bytes);
  std::uint64_t at = 0, taken = 0;
  Reader reader;

  // One burst of the driver's room + submit, timed; its work waited for after, untimed.
  // A simulated GPU's engines are held while the burst is timed: on hardware the command
  // processor reading the ring is not a thread on the host's cores, as the simulator's is.
  auto driver_burst = [&] {
    const std::uint64_t written = own.ring().written;
    if (gpu.hold_engines) gpu.hold_engines(true);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) own.submit();
    const double ns = ns_since(t0);
    if (gpu.hold_engines) gpu.hold_engines(false);
    if (own.ring().written - written != kBurst * n)
      throw std::runtime_error(fmt::format("{}: {} launch values wrote {} ring dwords, not {} each", device.name(),
                                           kBurst, own.ring().written - written, n));
    own.wait();
    return ns;
  };
  // The same bytes copied into the floor's ring and argument area, wrapping as the driver
  // wraps; then, untimed, the reader reads them.
  auto memcpy_burst = [&] {
    const std::uint64_t first_dword = at, first_byte = taken;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) {
      const std::uint64_t offset = at % dwords, first = std::min(n, dwords - offset);
      std::memcpy(ring.data() + offset, words.data(), first * 4);
      if (first < n) std::memcpy(ring.data(), words.data() + first, (n - first) * 4);
      at += n;
      if (taken % area.size() + k > area.size()) taken += area.size() - taken % area.size();
      std::memcpy(area.data() + taken % area.size(), arguments.data(), k);
      taken += k;
      asm volatile("" : : "r"(ring.data()), "r"(area.data()) : "memory");  // the copies are kept
    }
    const double ns = ns_since(t0);
    reader.read(ring_bytes, first_dword * 4, at * 4);
    reader.read(area, first_byte, taken);
    return ns;
  };
  // Every thread on one CPU, the simulator's and the reader's included: where the command
  // processor is a thread on another CPU of the host, the driver's figure carries that CPU's
  // cache traffic over the ring, which varies with where the two CPUs and the driver's
  // memory happen to lie (docs/bench.md), and which hardware's command processor does not
  // cause. Both figures are taken so.
  const OneCpu one_cpu;
  const std::uint64_t bursts = 50'000 / kBurst;
  // Warm up over a lap of both areas at least, so that no page is touched first when timed.
  const std::uint64_t lap = std::max(dwords / n, after.kernarg_bytes / std::max<std::uint64_t>(k, 1)) / kBurst + 1;
  for (std::uint64_t i = 0; i < std::max(bursts / 10, lap); ++i) driver_burst(), memcpy_burst();
  std::vector<double> driver_ns, memcpy_ns;
  for (int r = 0; r < repeats; ++r) {
    double d = 0, m = 0;
    for (std::uint64_t i = 0; i < bursts; ++i) d += driver_burst(), m += memcpy_burst();  // taking turns
    driver_ns.push_back(d / double(bursts * kBurst));
    memcpy_ns.push_back(m / double(bursts * kBurst));
  }
  return make_figure(
      on("submit-driver", device), spread_of(driver_ns), "ns", spread_of(memcpy_ns),
      fmt::format("memcpy of the same {} ring dwords and {} bytes of kernel arguments into areas of the driver's "
                  "sizes, which another thread reads after each burst",
                  n, k),
      fmt::format("the AMD driver's room + submit of one launch value of the empty kernel (PM4 encode into "
                  "COMPUTE:0's ring, its kernel arguments, the doorbell), called directly as rig calls them on a "
                  "second driver of {}'s GPU; the work waited for between bursts of {}",
                  device.name(), kBurst));
}

AmdRegistration registration{{refuses, kernel, driver_part}};

}  // namespace
}  // namespace rig::bench
