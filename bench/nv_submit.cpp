// The submit bench's launches on NVIDIA GPUs of rig's own driver (nv_submit.hpp): the empty
// kernel of bench/nv_kernels.cu, embedded here, and the driver's own part of a launch value,
// timed on a second driver of the same GPU opened for it outside rig.
#include "nv_submit.hpp"

#include <rig/rig.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "../tools/machine.hpp"
#include "driver_floor.hpp"
#include <rig/nv.hpp>

extern const unsigned char rig_nv_bench_kernels_sm_90[], rig_nv_bench_kernels_sm_80[];
extern const std::size_t rig_nv_bench_kernels_sm_90_size, rig_nv_bench_kernels_sm_80_size;

namespace rig::bench {
namespace {

constexpr const char* kKernel = "bench_empty";
// Submissions in a burst, between untimed waits for the device's work (as submit.cpp).
constexpr std::uint64_t kBurst = 64;

// The kernel's fatbin for `arch`, empty for one it is not built for.
std::span<const std::byte> kernel_bytes(std::string_view arch) {
  auto bytes = [](const unsigned char* p, std::size_t n) { return std::span(reinterpret_cast<const std::byte*>(p), n); };
  if (arch == "sm_90") return bytes(rig_nv_bench_kernels_sm_90, rig_nv_bench_kernels_sm_90_size);
  if (arch == "sm_80") return bytes(rig_nv_bench_kernels_sm_80, rig_nv_bench_kernels_sm_80_size);
  return {};
}

std::optional<tool::Gpu> gpu_of(const Device& device) {
  for (auto& gpu : tool::gpu_openers([](const std::string&) {}))
    if (gpu.name == device.name()) return gpu;
  return std::nullopt;
}

std::optional<std::string> refuses(const Device& device) {
  if (!device.name().starts_with("NV:") || !gpu_of(device))
    return fmt::format("{} is not one of this machine's GPUs of rig's NVIDIA driver", device.name());
  if (kernel_bytes(device.arch()).empty())
    return fmt::format("the bench's NVIDIA kernel is built for sm_90 and sm_80 only, and {} is {}", device.name(),
                       device.arch());
  return std::nullopt;
}

Function kernel(const Device& device) {
  auto image = Image::load(device, kernel_bytes(device.arch()));
  if (!image) throw std::runtime_error(fmt::format("loading the bench's kernel on {}: {}", device.name(), image.error()));
  auto f = image->resolve(kKernel);
  if (!f) throw std::runtime_error(fmt::format("the bench's image on {} has no {}", device.name(), kKernel));
  return *f;
}

// The driver of a GPU opened outside rig, its word on a page of its own, with two buffers and
// the kernel loaded: a launch value is handed to its room and submit as rig hands one.
class OwnDriver {
 public:
  OwnDriver(const tool::Gpu& gpu, std::string_view arch) : name_(gpu.name) {
    auto made = gpu.make().make(&word_page_[0]);
    if (!made) throw std::runtime_error(fmt::format("opening a second driver of {}: {}", name_, made.error()));
    driver_ = std::move(*made);
    const edge::Facts facts = driver_->facts();
    edge_ = facts.edge;
    hang_ms_ = facts.hang_ms;
    table_ = *static_cast<const rig_driver* const*>(edge_);
    submitted_ = load();
    for (auto& param : params_) {
      auto region = driver_->alloc(Memory::Device, 4096);
      if (!region) throw std::runtime_error(fmt::format("{} has no memory for the bench's buffers", name_));
      regions_.push_back(*region);
      param = *driver_->locate(*region).address;
    }
    auto code = driver_->image(kernel_bytes(arch));
    if (!code) throw std::runtime_error(fmt::format("{} refuses the bench's kernel: {}", name_, code.error()));
    image_ = std::get<edge::Loaded>(*code).image;
    auto entry = driver_->entry(*image_, kKernel);
    if (!std::holds_alternative<edge::Entry>(entry))
      throw std::runtime_error(fmt::format("{} gives no {} of the bench's kernel", name_, kKernel));
    part_.queue = 1;  // COMPUTE:0
    part_.kind = RIG_KIND_LAUNCH;
    auto& l = part_.work.launch;
    l.code = std::get<edge::Entry>(entry).code;
    l.launch = std::get<edge::Entry>(entry).launch;
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
      wait();
    } catch (const std::exception&) {
    }
    driver_->stop("the bench is done");
    if (image_) driver_->unload(*image_);
    for (auto& r : regions_) driver_->free(r);
  }

  // `bytes` of system memory the GPU reads and the host writes, as the driver's push buffer
  // and launch ring are.
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
      throw std::runtime_error(fmt::format("{}'s room answered {} for one launch{}{}", name_, room, *why ? ": " : "", why));
    const char* failure = nullptr;
    if (table_->submit(edge_, &part_, 1, nullptr, 0, ++submitted_, nullptr, &failure) != RIG_COMMITTED)
      throw std::runtime_error(fmt::format("{}'s submit failed: {}", name_, failure ? failure : "no reason"));
  }
  // Blocks until the word shows the last value submitted; throws past the hang time.
  void wait() {
    const auto most = std::chrono::milliseconds(hang_ms_.value_or(10'000));
    const auto deadline = std::chrono::steady_clock::now() + most;
    while (load() < submitted_) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error(fmt::format("{} did not complete value {} within {} ms", name_, submitted_, most.count()));
      driver_->sleep(submitted_, std::chrono::milliseconds(100));
    }
  }
  nv::ComputeRings rings() {
    auto r = nv::compute_rings_of(*driver_);
    if (!r) throw std::runtime_error(r.error());
    return *r;
  }

 private:
  static constexpr std::uint32_t kRefOffsets[2] = {0, 8};
  std::uint64_t load() const { return __atomic_load_n(&word_page_[0], __ATOMIC_ACQUIRE); }

  alignas(4096) static inline volatile std::uint64_t word_page_[512] = {};
  std::string name_;
  std::unique_ptr<edge::Driver> driver_;
  void* edge_ = nullptr;
  std::optional<int> hang_ms_;
  const rig_driver* table_ = nullptr;
  std::uint64_t submitted_ = 0;
  std::vector<edge::Region> regions_;
  std::optional<edge::ImageId> image_;
  std::uint64_t params_[2] = {};
  rig_part part_{};
};

// Bytes [from, from + n) of a circular area, copied out.
std::vector<std::byte> bytes_at(const std::byte* area, std::uint64_t size, std::uint64_t from, std::uint64_t n) {
  std::vector<std::byte> out(n);
  for (std::uint64_t i = 0; i < n; ++i) out[i] = area[(from + i) % size];
  return out;
}

Figure driver_part(const Device& device, int repeats) {
  if (auto why = refuses(device)) throw std::invalid_argument(*why);
  const tool::Gpu gpu = *gpu_of(device);
  OwnDriver own(gpu, device.arch());
  // The first value builds the launch and binds the channel; from the second on each is the
  // lone repeated launch. What one writes: its push-buffer words and its launch-ring slot
  // (bank 0 and the QMD). The floor copies exactly these.
  own.submit();
  own.submit();
  own.wait();
  nv::ComputeRings before = own.rings();
  own.submit();
  const nv::ComputeRings after = own.rings();
  own.wait();
  const std::uint64_t words = after.push_taken - before.push_taken, slot = after.launch_taken - before.launch_taken;
  if (before.push_taken % before.push_bytes + words > before.push_bytes ||
      before.launch_taken % before.launch_bytes + slot > before.launch_bytes)
    throw std::runtime_error(fmt::format("{}: the measured launch value wrapped a ring", device.name()));
  const std::vector<std::byte> push = bytes_at(after.push, after.push_bytes, before.push_taken, words);
  const std::vector<std::byte> bank = bytes_at(after.launches, after.launch_bytes, before.launch_taken, slot);
  const std::span<std::byte> push_area = own.host_memory(after.push_bytes), slot_area = own.host_memory(after.launch_bytes);
  std::uint64_t push_at = 0, slot_at = 0;
  Reader reader;

  // One burst of the driver's room + submit, timed, the simulated GPU's engines held (on
  // hardware they are not threads on the host's CPUs); its work waited for after, untimed.
  auto driver_burst = [&] {
    const nv::ComputeRings start = own.rings();
    if (gpu.hold_engines) gpu.hold_engines(true);
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) own.submit();
    const double ns = ns_since(t0);
    if (gpu.hold_engines) gpu.hold_engines(false);
    const nv::ComputeRings end = own.rings();
    if (end.launch_taken - start.launch_taken < kBurst * slot || end.launch_taken - start.launch_taken >= (kBurst + 1) * slot)
      throw std::runtime_error(fmt::format("{}: {} launch values took {} bytes of the launch ring, not {} each",
                                           device.name(), kBurst, end.launch_taken - start.launch_taken, slot));
    own.wait();
    return ns;
  };
  // The same bytes copied into areas of the driver's sizes, skipping to the start where they
  // would straddle the end as the driver does; then, untimed, the reader reads them.
  auto memcpy_burst = [&] {
    const std::uint64_t first_push = push_at, first_slot = slot_at;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint64_t i = 0; i < kBurst; ++i) {
      if (push_at % push_area.size() + words > push_area.size()) push_at += push_area.size() - push_at % push_area.size();
      std::memcpy(push_area.data() + push_at % push_area.size(), push.data(), words);
      push_at += words;
      if (slot_at % slot_area.size() + slot > slot_area.size()) slot_at += slot_area.size() - slot_at % slot_area.size();
      std::memcpy(slot_area.data() + slot_at % slot_area.size(), bank.data(), slot);
      slot_at += slot;
      asm volatile("" : : "r"(push_area.data()), "r"(slot_area.data()) : "memory");  // the copies are kept
    }
    const double ns = ns_since(t0);
    reader.read(push_area, first_push, push_at);
    reader.read(slot_area, first_slot, slot_at);
    return ns;
  };
  // Every thread on one CPU, as amd_submit.cpp times its driver (docs/bench.md).
  const OneCpu one_cpu;
  const std::uint64_t bursts = 50'000 / kBurst;
  const std::uint64_t lap = after.launch_bytes / std::max<std::uint64_t>(slot, 1) / kBurst + 1;
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
      fmt::format("memcpy of the same {} push-buffer bytes and {} bytes of bank 0 and QMD into areas of the driver's "
                  "sizes, which another thread reads after each burst",
                  words, slot),
      fmt::format("rig's NVIDIA driver's room + submit of one launch value of the empty kernel (the lone repeated "
                  "launch: its words, bank 0 and the QMD in the launch ring, the doorbell), called directly as rig "
                  "calls them on a second driver of {}'s GPU; the work waited for between bursts of {}",
                  device.name(), kBurst));
}

NvRegistration registration{{refuses, kernel, driver_part}};

}  // namespace
}  // namespace rig::bench
