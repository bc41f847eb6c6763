// The NVIDIA driver's launches (launch.hpp): room's checks of a launch, bank 0 and the QMD of
// each launch in the launch ring, the compute channel's methods, and the lone repeated launch,
// which copies the words built for its kernel and geometry and patches what changes.
#include "device.hpp"

#include "push.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace rig::nv::driver {

namespace {

constexpr char kAxes[] = "xyz";

void put32(std::vector<std::byte>& bank, std::uint32_t at, std::uint32_t v) {
  if (at + 4 <= bank.size()) std::memcpy(bank.data() + at, &v, 4);
}
void put64(std::vector<std::byte>& bank, std::uint32_t at, std::uint64_t v) {
  if (at + 8 <= bank.size()) std::memcpy(bank.data() + at, &v, 8);
}

// The smallest of the SM's shared-memory carveouts that holds `bytes`, in bytes (at least 8 KiB,
// as NVIDIA's drivers never configure less for a launch).
std::uint32_t carveout(const LaunchLimits& limits, std::uint32_t bytes) {
  for (std::uint32_t kib : limits.configs)
    if (kib * 1024 >= std::max<std::uint32_t>(bytes, 8 * 1024)) return kib * 1024;
  return limits.shared_per_sm;
}

// The words of a host semaphore release before its payload (push.cpp's semaphore(): one
// increasing method from SEM_ADDR_LO: the header, the address's two words, then the payload).
constexpr std::uint32_t kReleasePayloadAt = 3;
// SEND_PCAS_A's data word follows its header (push.cpp's launch()).
constexpr std::uint32_t kPcasAddressAt = 1;

// Bank 0's address fields, each inside one word of the QMD (qmd.hpp), and the shift the
// version stores the address with: V04_00 keeps it >> 6, V03_00 as it is.
struct BankAddress {
  Qmd_field lower, upper;
  unsigned shift;
};
constexpr bool one_word(const Qmd_field& f) { return f.lo / 32 == f.hi / 32; }
static_assert(one_word(qmd_v04::CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0)) &&
              one_word(qmd_v04::CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0)) &&
              one_word(qmd_v03::CONSTANT_BUFFER_ADDR_LOWER(0)) && one_word(qmd_v03::CONSTANT_BUFFER_ADDR_UPPER(0)));
BankAddress bank0_address(bool v04) {
  if (v04) return {qmd_v04::CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0), qmd_v04::CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(0), 6};
  return {qmd_v03::CONSTANT_BUFFER_ADDR_LOWER(0), qmd_v03::CONSTANT_BUFFER_ADDR_UPPER(0), 0};
}
// Word `from[i]` with field f (inside that word) set to `value`, f's word index i.
std::uint32_t with_field(const std::vector<std::uint32_t>& from, const Qmd_field& f, std::uint64_t value) {
  const unsigned shift = f.lo % 32, width = f.hi - f.lo + 1;
  const std::uint32_t mask = (width >= 32 ? ~0u : (1u << width) - 1) << shift;
  return (from[f.lo / 32] & ~mask) | (std::uint32_t(value << shift) & mask);
}

}  // namespace

std::uint64_t Device::slot_bytes(const Kernel& k) const {
  const std::uint64_t qmd_bytes = (gen_ == &kHopper ? qmd_v04::WORDS : qmd_v03::WORDS) * 4;
  return round_up(k.bank0_bytes, kLaunchAlign) + round_up(qmd_bytes, kLaunchAlign);
}

std::uint64_t Device::launch_cost(std::uint64_t head, std::uint64_t bytes) const {
  const std::uint64_t left = kLaunchRingBytes - head % kLaunchRingBytes;
  return bytes <= left ? bytes : left + bytes;
}

int Device::check_launch(const rig_part& p, std::uint32_t i, char* why) const {
  const rig_launch& l = p.work.launch;
  const auto* k = static_cast<const Kernel*>(l.launch);
  if (!k) return rig_never(why, "part %u: a launch of no kernel", i);
  const LaunchLimits& lim = limits();
  std::uint64_t threads = 1;
  for (int a = 0; a < 3; ++a) {
    if (!l.groups[a] || !l.threads[a])
      return rig_never(why, "part %u: a launch of %ux%ux%u groups of %ux%ux%u threads has an empty dimension", i,
                       l.groups[0], l.groups[1], l.groups[2], l.threads[0], l.threads[1], l.threads[2]);
    const std::uint32_t most_threads = a < 2 ? lim.block_xy : lim.block_z;
    if (l.threads[a] > most_threads)
      return rig_never(why, "part %u: %u threads in %c, over the GPU's limit of %u per block", i, l.threads[a], kAxes[a],
                       most_threads);
    const std::uint64_t most_groups = a == 0 ? lim.grid_x : lim.grid_yz;
    if (l.groups[a] > most_groups)
      return rig_never(why, "part %u: %u groups in %c, over the GPU's limit of %llu", i, l.groups[a], kAxes[a],
                       (unsigned long long)most_groups);
    threads *= l.threads[a];
  }
  if (threads > lim.block_threads)
    return rig_never(why, "part %u: %llu threads per block, over the GPU's limit of %u", i, (unsigned long long)threads,
                     lim.block_threads);
  if (threads > k->max_threads)
    return rig_never(why, "part %u: %llu threads per block, over %s's limit of %u", i, (unsigned long long)threads,
                     k->name.c_str(), k->max_threads);
  if (k->local_bytes > kLocalPerThreadMost)
    return rig_never(why, "part %u: %s takes %u bytes of local memory a thread, over the %u NV:%d gives a thread", i,
                     k->name.c_str(), k->local_bytes, kLocalPerThreadMost, index_);
  const std::uint64_t shared = std::uint64_t(k->static_shared) + l.shared;
  if (shared > lim.shared_per_sm)
    return rig_never(why, "part %u: %s of shared memory (%s asked, %s of %s's own), over the SM's %s", i,
                     edge::bytes_figure(shared).text, edge::bytes_figure(l.shared).text,
                     edge::bytes_figure(k->static_shared).text, k->name.c_str(),
                     edge::bytes_figure(lim.shared_per_sm).text);
  return RIG_FITS;
}

void Device::build_launch(const Kernel& k, const rig_launch& l) {
  BuiltLaunch& b = k.built;
  b.valid = false;
  b.bank0.assign(k.bank0_bytes, std::byte{0});
  for (int a = 0; a < 3; ++a) {
    put32(b.bank0, bank0::kBlockDim + 4 * a, l.threads[a]);
    put32(b.bank0, bank0::kGridDim + 4 * a, l.groups[a]);
  }
  put64(b.bank0, bank0::kSharedWindow, kSharedWindow);
  put64(b.bank0, bank0::kLocalWindow, kLocalWindow);
  put32(b.bank0, bank0::kStackBase, bank0::kStackTop);
  put32(b.bank0, bank0::kDynamicShared, l.shared);
  put32(b.bank0, bank0::kSmCount, sm_count_);
  const bool hopper = gen_ == &kHopper;
  Qmd q = hopper ? Qmd::v04() : Qmd::v03();
  const std::uint32_t shared = k.static_shared + l.shared;
  const std::uint32_t config = carveout(limits(), shared);
  q.grid(l.groups[0], l.groups[1], l.groups[2]).block(l.threads[0], l.threads[1], l.threads[2]);
  q.register_count(k.registers).barrier_count(k.barriers);
  q.shared_memory(shared, config, limits().shared_per_sm, config).program_address(k.program);
  q.constant_buffer(0, 0, k.bank0_bytes);  // its address is each launch's
  for (const PlacedBank& bank : k.banks) q.constant_buffer(bank.bank, bank.address, bank.bytes);
  q.local_memory(k.local_bytes, 0).invalidate_caches().sass_version(hopper ? 0x90 : 0x80);
  b.qmd.assign(q.words().begin(), q.words().end());
  b.qmd_at = round_up(k.bank0_bytes, kLaunchAlign);
  b.slot_bytes = slot_bytes(k);
  // The lone value: the launch, then the value's end as submit writes it with no parts before.
  std::uint32_t storage[32];
  Push p(storage);
  launch(p, compute_.subchannel, kLaunchAlign,
         hopper ? compute::PCAS_ACTION_PREFETCH_SCHEDULE : compute::PCAS_ACTION_INVALIDATE_COPY_SCHEDULE);
  wait_for_idle(p);
  const std::uint32_t release_at = std::uint32_t(p.size());
  semaphore_release(p, window_address(word_), 0);
  non_stall_interrupt(p);
  b.lone.assign(p.words().begin(), p.words().end());
  b.lone_qmd_at = kPcasAddressAt, b.lone_value_at = release_at + kReleasePayloadAt;
  b.groups[0] = l.groups[0], b.groups[1] = l.groups[1], b.groups[2] = l.groups[2];
  b.threads[0] = l.threads[0], b.threads[1] = l.threads[1], b.threads[2] = l.threads[2];
  b.shared = l.shared;
  b.valid = true;
}

std::uint64_t Device::place_launch(const Kernel& k, const rig_launch& l) {
  const BuiltLaunch& b = k.built;
  launch_head_ += launch_cost(launch_head_, b.slot_bytes) - b.slot_bytes;  // to the start where it would straddle the end
  const std::uint64_t at = launch_head_ % kLaunchRingBytes;
  std::byte* slot = launch_ring_.host + at;
  std::memcpy(slot, b.bank0.data(), b.bank0.size());
  std::memcpy(slot + k.param_offset, l.params, std::min(l.param_bytes, k.param_bytes));  // refs patched by rig
  // The QMD as built, its bank 0 address patched: the words written once, none read back.
  const BankAddress field = bank0_address(gen_ == &kHopper);
  const std::uint64_t bank = (launch_ring_.address + at) >> field.shift;
  auto* qmd = reinterpret_cast<std::uint32_t*>(slot + b.qmd_at);
  std::memcpy(qmd, b.qmd.data(), b.qmd.size() * 4);
  qmd[field.lower.lo / 32] = with_field(b.qmd, field.lower, bank & 0xffffffffu);
  qmd[field.upper.lo / 32] = with_field(b.qmd, field.upper, bank >> 32);
  launch_head_ += b.slot_bytes;
  return launch_ring_.address + at + b.qmd_at;
}

void Device::encode_launch(Channel& c, const rig_launch& l) {
  const auto& k = *static_cast<const Kernel*>(l.launch);
  if (!k.built.same(l.groups, l.threads, l.shared)) build_launch(k, l);
  const std::uint64_t qmd = place_launch(k, l);
  std::uint32_t storage[32];
  Push p(storage);
  if (windows_due()) {
    set_memory_windows(p, c.subchannel, kSharedWindow, kLocalWindow);
    Block store;
    {
      // The newest store (of room's generation or a later one): big enough for every kernel
      // loaded by the time room planned this value.
      std::lock_guard lock(memory_lock_);
      store = local_store_;
    }
    if (store.memory) set_local_memory(p, c.subchannel, store.address, store.bytes, sm_count_);
    windows_set_ = true, windows_generation_ = planned_generation_;
  }
  launch(p, c.subchannel, qmd,
         gen_ == &kHopper ? compute::PCAS_ACTION_PREFETCH_SCHEDULE : compute::PCAS_ACTION_INVALIDATE_COPY_SCHEDULE);
  wait_for_idle(p);  // the next part starts after the grid
  put(c, p.words());
}

const Kernel* Device::lone_launch(const rig_part* parts, std::uint32_t count, std::uint32_t waits) const {
  if (count != 1 || waits || parts[0].kind != RIG_KIND_LAUNCH || parts[0].queue != 1) return nullptr;
  if (!compute_.bound || windows_due()) return nullptr;
  const rig_launch& l = parts[0].work.launch;
  const auto* k = static_cast<const Kernel*>(l.launch);
  // Built for this geometry: room took it when it was built, and what it checks does not change.
  return k && k->built.same(l.groups, l.threads, l.shared) ? k : nullptr;
}

bool Device::lone_fits(const Kernel& k) const {
  const Channel& c = compute_;
  return c.push_head - c.push_tail + push_cost(c, k.built.lone.size() * 4) <= kPushBytes &&
         c.gp_put - c.gp_tail + 1 < kGpEntries &&
         launch_head_ - launch_tail_ + launch_cost(launch_head_, k.built.slot_bytes) <= kLaunchRingBytes;
}

void Device::submit_lone(const Kernel& k, const rig_launch& l, std::uint64_t v) {
  const BuiltLaunch& b = k.built;
  const std::uint64_t qmd = place_launch(k, l);
  Channel& c = compute_;
  const std::uint64_t bytes = b.lone.size() * 4;
  c.push_head += push_cost(c, bytes) - bytes;
  const std::uint64_t at = c.push_head % kPushBytes;
  auto* w = reinterpret_cast<std::uint32_t*>(c.push.host + at);
  std::memcpy(w, b.lone.data(), bytes);
  w[b.lone_qmd_at] = std::uint32_t(qmd >> 8);
  w[b.lone_value_at] = std::uint32_t(v), w[b.lone_value_at + 1] = std::uint32_t(v >> 32);
  c.push_head += bytes;
  entry_tags_[0][c.gp_put % kGpEntries].store(v, std::memory_order_relaxed);  // value v, part 0
  entry_kernels_[c.gp_put % kGpEntries].store(&k, std::memory_order_relaxed);
  ring(c, c.push.address + at, std::uint32_t(b.lone.size()));
  flights_.push_back({v, {c.push_head, copy_.push_head}, {c.gp_put, copy_.gp_put}, launch_head_});
  submitted_ = v;
}

}  // namespace rig::nv::driver

namespace rig::nv {

Result<ComputeRings> compute_rings_of(edge::Driver& driver) {
  auto device = driver::open_device(driver);
  if (!device) return std::unexpected(device.error());
  return (*device)->compute_rings();
}

}  // namespace rig::nv
