// The NVIDIA driver's images (device.hpp): a fatbin's or cubin's kernels placed in video memory
// of the driver's own, their relocations applied, each kernel's launch facts kept; and the
// record compiled code reads of the device (rig/nv_abi.hpp).
#include "device.hpp"

#include <rig/nv_abi.hpp>

#include "cubin.hpp"

#include <algorithm>
#include <cstring>

namespace rig::nv::driver {

namespace {

constexpr std::uint32_t kElfMagic = 0x464c457f;  // "\x7f" "ELF", little-endian
// Where the image places what it holds: code on 256 bytes (the instruction cache's line, as
// NVK aligns shaders), constant banks on 64 (V04_00 stores a bank's address >> 6), in sizes of
// 16 (CONSTANT_BUFFER_SIZE_SHIFTED4), globals on 256.
constexpr std::uint64_t kCodeAlign = 256, kBankAlign = 64, kBankUnit = 16, kGlobalAlign = 256;
constexpr std::uint64_t kBankMost = 0x10000;  // a QMD's constant buffer holds at most 64 KiB

// NV2080_CTRL_CMD_GR_GET_INFO (ctrl2080gr.h): a list of {index, data}; the indices the SM
// count is the product of (LITTER_NUM_GPCS, LITTER_NUM_TPC_PER_GPC, LITTER_NUM_SM_PER_TPC).
constexpr std::uint32_t kCtrlGrGetInfo = 0x20801201;
constexpr std::uint32_t kGrInfoGpcs = 0x14, kGrInfoTpcPerGpc = 0x17, kGrInfoSmPerTpc = 0x20;
struct GrInfo {
  std::uint32_t index, data;
};
struct GrInfoParams {  // NV2080_CTRL_GR_GET_INFO_PARAMS
  std::uint32_t grInfoListSize, pad;
  std::uint64_t grInfoList;
  std::uint32_t routeFlags, pad1;  // NV2080_CTRL_GR_ROUTE_INFO
  std::uint64_t route;
};
static_assert(sizeof(GrInfoParams) == 32);

unsigned sm_of(const Generation* gen) { return gen == &kHopper ? 90 : 80; }

// A thread's local memory: the largest of the kernel's frame and stack sizes, in the QMD's
// units of 16 bytes.
std::uint32_t local_bytes_of(const Cubin_kernel& ck) {
  return std::uint32_t(round_up(std::max({ck.frame_size, ck.min_stack_size, ck.max_stack_size}), 16));
}

}  // namespace

const LaunchLimits& Device::limits() const { return gen_ == &kHopper ? kHopperLimits : kAmpereLimits; }

edge::Capability Device::abi_capability() {
  GrInfo list[3] = {{kGrInfoGpcs, 0}, {kGrInfoTpcPerGpc, 0}, {kGrInfoSmPerTpc, 0}};
  GrInfoParams p{3, 0, reinterpret_cast<std::uintptr_t>(list), 0, 0, 0};
  if (auto r = rm_.control(subdevice_, kCtrlGrGetInfo, &p, sizeof p, "GR_GET_INFO"); !r)
    throw edge::Fault(failed("reading the GPU's SM count", r.error()));
  sm_count_ = list[0].data * list[1].data * list[2].data;
  auto abi = std::make_shared<Abi>();
  abi->arch = gen_->arch;
  abi->sm_count = sm_count_;
  abi->shared_per_sm = limits().shared_per_sm;
  abi->shared_per_block = limits().shared_per_sm - kSharedReserved;
  abi->timeline_word = window_address(word_);
  return edge::declare(kAbi, std::shared_ptr<const Abi>(std::move(abi)));
}

Result<edge::Code> Device::image(std::span<const std::byte> binary) {
  const unsigned sm = sm_of(gen_);
  std::uint32_t magic = 0;
  if (binary.size() >= 4) std::memcpy(&magic, binary.data(), 4);
  std::expected<Cubin, std::string> read = std::unexpected(std::string());
  if (magic == fatbin::MAGIC)
    read = cubin_for_sm(binary, sm, "fatbin");
  else if (magic == kElfMagic)
    read = read_cubin(binary, "cubin");
  else
    return std::unexpected(std::string("the binary is neither a fatbin (magic 0xBA55ED50) nor a cubin (an ELF)"));
  if (!read) return std::unexpected(read.error());
  const Cubin& c = *read;
  if (c.sm != sm)
    return std::unexpected(fmt::format("the cubin is for sm_{}, and {} is sm_{} ({}): build it for sm_{}", c.sm, name_, sm,
                                       gen_->name, sm));

  for (const auto& [bank, index] : c.banks)
    if (c.sections[index].size > kBankMost)
      return std::unexpected(fmt::format("{}: constant bank {} of {} bytes, over the QMD's 64 KiB", c.sections[index].name, bank, c.sections[index].size));
  // Where each section goes, from the image's start.
  std::vector<std::uint64_t> at(c.sections.size(), 0);
  std::vector<std::uint32_t> placed;
  std::uint64_t size = 0;
  auto take = [&](std::uint32_t index, std::uint64_t bytes, std::uint64_t align) {
    size = round_up(size, align);
    at[index] = size;
    size += std::max<std::uint64_t>(bytes, 1);
    placed.push_back(index);
  };
  for (const Cubin_kernel& k : c.kernels) take(k.text_section, c.sections[k.text_section].size, kCodeAlign);
  for (const auto& [bank, index] : c.banks) take(index, round_up(c.sections[index].size, kBankUnit), kBankAlign);
  for (const Cubin_kernel& k : c.kernels)
    for (const auto& [bank, index] : k.banks)
      if (bank != 0) take(index, round_up(c.sections[index].size, kBankUnit), kBankAlign);
  for (auto g : {c.global, c.global_init})
    if (g) take(*g, c.sections[*g].size, kGlobalAlign);
  const std::uint64_t total = round_up(std::max<std::uint64_t>(size, 1), kPage);

  std::lock_guard lock(memory_lock_);
  if (!open_) return std::unexpected(std::string("the device is closed"));
  auto handle = make_memory(kVidmem, total);
  if (!handle)
    return std::unexpected(fmt::format("no video memory for the image's {}: {}", edge::bytes_figure(total).text, handle.error()));
  auto block = place(*handle, total, true);
  if (!block) {
    rm_.free(*handle);
    throw edge::Fault(fmt::format("{}: mapping an image's {}: {}", name_, edge::bytes_figure(total).text, block.error()));
  }
  for (std::uint32_t i : placed) at[i] += block->address;
  std::memset(block->host, 0, total);
  for (std::uint32_t i : placed) {
    const auto bytes = c.bytes(i);  // none for .nv.global, which stays zero
    if (bytes.empty()) continue;
    std::vector<std::byte> section(bytes.begin(), bytes.end());
    if (auto r = relocate(c, i, section, at); !r) {
      drop(*block);
      return std::unexpected(r.error());
    }
    std::memcpy(block->host + (at[i] - block->address), section.data(), section.size());
  }

  // The local memory its kernels' frames take, within what rig gives a thread (a kernel over
  // it is refused at room): a fresh, bigger backing store when the present one is short.
  std::uint32_t local = 0;
  for (const Cubin_kernel& ck : c.kernels)
    if (const auto l = local_bytes_of(ck); l <= kLocalPerThreadMost) local = std::max(local, l);
  if (local > local_per_thread_) {
    const std::uint64_t bytes = round_up(std::uint64_t{local} * kThreadsPerSm * sm_count_, kPage);
    auto store = make_memory(kVidmem, bytes);
    if (!store) {
      drop(*block);
      return std::unexpected(fmt::format("no video memory for the local memory of {} bytes a thread ({}): {}", local,
                                         edge::bytes_figure(bytes).text, store.error()));
    }
    auto placed_store = place(*store, bytes, false);
    if (!placed_store) {
      rm_.free(*store);
      drop(*block);
      throw edge::Fault(fmt::format("{}: mapping the local memory store's {}: {}", name_, edge::bytes_figure(bytes).text,
                                    placed_store.error()));
    }
    if (local_store_.memory) local_retired_.push_back(local_store_);
    local_store_ = *placed_store, local_per_thread_ = local;
    store_generation_.fetch_add(1, std::memory_order_release);  // set before the next launch room plans
  }

  LoadedImage image;
  image.memory = *block;
  for (const Cubin_kernel& ck : c.kernels) {
    auto k = std::make_unique<Kernel>();
    k->name = ck.name;
    k->program = at[ck.text_section];
    k->registers = ck.registers, k->barriers = ck.barriers;
    k->param_offset = ck.param_offset, k->param_bytes = ck.param_size;
    std::uint64_t bank0 = std::uint64_t(ck.param_offset) + ck.param_size;
    for (const auto& [bank, index] : ck.banks)
      if (bank == 0) bank0 = std::max<std::uint64_t>(bank0, c.sections[index].size);
    k->bank0_bytes = std::uint32_t(round_up(std::max<std::uint64_t>(bank0, bank0::kSmCount + 4), kBankAlign));
    k->static_shared = ck.static_shared;
    k->local_bytes = local_bytes_of(ck);
    auto product = [](const std::array<std::uint32_t, 3>& t) { return t[0] * std::max(t[1], 1u) * std::max(t[2], 1u); };
    k->max_threads = ck.max_threads[0] ? product(ck.max_threads) : ck.reqntid[0] ? product(ck.reqntid) : limits().block_threads;
    for (const auto& [bank, index] : c.banks)
      k->banks.push_back({bank, at[index], std::uint32_t(round_up(c.sections[index].size, kBankUnit))});
    for (const auto& [bank, index] : ck.banks)
      if (bank != 0) k->banks.push_back({bank, at[index], std::uint32_t(round_up(c.sections[index].size, kBankUnit))});
    image.kernels.emplace(k->name, std::move(k));
  }
  const edge::ImageId id = next_image_++;
  images_.emplace(id, std::move(image));
  return edge::Loaded{id};
}

bool Device::make_launch_ring() {
  auto handle = make_memory(kSysmem, kLaunchRingBytes);
  if (!handle) return false;
  auto block = place(*handle, kLaunchRingBytes, true);
  if (!block) {
    rm_.free(*handle);
    throw edge::Fault(fmt::format("{}: mapping the launch ring: {}", name_, block.error()));
  }
  launch_ring_ = *block;
  return true;
}

edge::EntryAnswer Device::entry(edge::ImageId id, std::string_view name) {
  std::lock_guard lock(memory_lock_);
  auto it = images_.find(id);
  if (it == images_.end()) throw edge::Fault(fmt::format("{}: entry of an image it did not load ({})", name_, id));
  auto k = it->second.kernels.find(name);
  if (k == it->second.kernels.end()) return edge::Absent{};
  if (!launch_ring_.memory && !make_launch_ring()) return edge::NoMemory{kLaunchRingBytes};
  const Kernel& kernel = *k->second;
  return edge::Entry{kernel.program, &kernel, kernel.param_bytes, kernel.max_threads};
}

void Device::unload(edge::ImageId id) {
  std::lock_guard lock(memory_lock_);
  auto it = images_.find(id);
  if (it == images_.end()) return;
  drop(it->second.memory);
  images_.erase(it);
}

void Device::drop_code() {
  for (auto& [id, image] : images_) drop(image.memory);
  images_.clear();
  for (Block& b : local_retired_) drop(b);
  local_retired_.clear();
  if (local_store_.memory) drop(local_store_), local_store_ = {};
  local_per_thread_ = 0;
  if (launch_ring_.memory) drop(launch_ring_), launch_ring_ = {};
}

}  // namespace rig::nv::driver
