// The AMD driver's code (device.hpp): code objects placed in device memory, their kernels
// and what the processor's code may use.
#include "device.hpp"

namespace rig::amd::driver {

CodeLimits code_limits(const Gpu& gpu) {
  // The processor's own (code_object.hpp); generation_of took only processors it knows.
  const ProcessorLimits processor = limits_of(gpu.arch).value_or(ProcessorLimits{});
  CodeLimits limits;
  limits.wave_size = processor.wave_size;
  limits.lds_bytes = std::uint32_t(std::min<std::uint64_t>(gpu.get("lds_size_in_kb", 64) * 1024, processor.lds_bytes));
  return limits;
}

Result<edge::Code> Device::image(std::span<const std::byte> binary) {
  auto object = read_code_object(binary);
  if (!object) return std::unexpected(object.error());
  // Its processor, and its kernels' waves and memory against the processor's limits.
  if (auto runs = check_for(*object, gpu_.arch); !runs) return std::unexpected(runs.error());
  if (auto dry = place(*object, binary, 0); !dry) return std::unexpected(dry.error());
  auto copy = std::make_shared<std::vector<std::byte>>(binary.begin(), binary.end());
  auto shared = std::make_shared<CodeObject>(std::move(*object));
  std::size_t bytes = std::max<std::uint64_t>(shared->image_bytes, 1);
  return edge::Code{edge::Place{bytes, [this, copy, shared](edge::Region region) {
    std::uint64_t base;
    {
      std::lock_guard g(mutex_);
      base = regions_.at(region.id).address;
    }
    auto placed = place(*shared, *copy, base);
    auto image = std::make_unique<Image>();
    image->base = base;
    image->object = *shared;
    std::lock_guard g(mutex_);
    auto id = next_image_++;
    images_[id] = std::move(image);
    return std::pair<edge::ImageId, std::string>{id, placed ? std::move(*placed) : std::string()};
  }}};
}

namespace {

Hidden hidden_kind(std::string_view k) {
  if (k == "hidden_block_count_x") return Hidden::BlockCountX;
  if (k == "hidden_block_count_y") return Hidden::BlockCountY;
  if (k == "hidden_block_count_z") return Hidden::BlockCountZ;
  if (k == "hidden_group_size_x") return Hidden::GroupSizeX;
  if (k == "hidden_group_size_y") return Hidden::GroupSizeY;
  if (k == "hidden_group_size_z") return Hidden::GroupSizeZ;
  if (k == "hidden_grid_dims") return Hidden::GridDims;
  if (k == "hidden_dynamic_lds_size") return Hidden::DynamicLds;
  return Hidden::Zero;  // offsets, remainders (whole groups only), queue/heap/printf pointers
}

}  // namespace

edge::EntryAnswer Device::entry(edge::ImageId id, std::string_view name) {
  std::lock_guard g(mutex_);
  auto it = images_.find(id);
  if (it == images_.end()) throw edge::Fault(fmt::format("entry of unknown image {}", id));
  auto& image = *it->second;
  if (auto e = image.entries.find(name); e != image.entries.end())
    return edge::Entry{e->second->descriptor, e->second.get(), e->second->explicit_bytes, e->second->max_threads};
  const Kernel* k = image.object.find(name);
  if (!k) return edge::Absent{};
  auto t = std::make_unique<LaunchTemplate>();
  const auto& kd = k->descriptor;
  t->descriptor = image.base + k->descriptor_address;
  t->code = image.base + k->code_address();
  t->rsrc1 = kd.compute_pgm_rsrc1, t->rsrc2 = kd.compute_pgm_rsrc2, t->rsrc3 = kd.compute_pgm_rsrc3;
  t->properties = kd.kernel_code_properties;
  t->user_sgprs = kd.user_sgpr_count();
  t->kernarg_bytes = std::max(k->kernarg_segment_size, kd.kernarg_size);
  t->group_segment = k->group_segment_fixed_size;
  t->private_segment = k->private_segment_fixed_size;
  t->max_threads = k->max_flat_workgroup_size ? k->max_flat_workgroup_size : 1024;
  t->wave32 = kd.wave32();  // the processor's, as image() checked
  if (t->user_sgprs > pm4::reg::kUserDataCount)
    throw edge::Fault(fmt::format("kernel {} wants {} user SGPRs, more than 16", name, t->user_sgprs));
  using KD = KernelDescriptor;
  if (xccs_ > 1 && (t->private_segment || (t->properties & KD::kUsesDynamicStack)) &&
      (t->properties & (KD::kPrivateSegmentBuffer | KD::kFlatScratchInit)))
    throw edge::Fault(fmt::format(
        "kernel {} takes its scratch's address in user SGPRs (a private segment buffer or flat scratch init), which "
        "one queue's packets give every XCC alike: on the {} XCCs of {} each XCC's waves need scratch of their own, "
        "which architected flat scratch gives (as clang-19 builds gfx942 code)", name, xccs_, gpu_.arch));
  for (auto& a : k->args) {
    if (a.value_kind.starts_with("hidden_")) {
      // The launch writes the ones it knows; the rest stay as the zeroed arguments have them.
      if (Hidden kind = hidden_kind(a.value_kind); kind != Hidden::Zero) t->hidden.push_back({a.offset, a.size, kind});
    } else {
      t->explicit_bytes = std::max(t->explicit_bytes, a.offset + a.size);
    }
  }
  t->name = names_.emplace(name).first->c_str();
  // Scratch for all the waves the GPU may run at once, if the kernel has private memory.
  if (t->private_segment || (kd.kernel_code_properties & KernelDescriptor::kUsesDynamicStack)) {
    std::uint64_t per_wave = scratch_per_wave(*t);
    std::uint64_t waves = std::max<std::uint64_t>(gpu_.get("simd_count"), 1) *
                          std::max<std::uint64_t>(gpu_.get("max_waves_per_simd", 16), 1);
    // On several XCCs, each XCC's waves get a slice of it, and its end the slices' bases.
    std::uint64_t need = per_wave * waves + (xccs_ > 1 ? kScratchBasesBytes : 0);
    if (scratch_.bytes < need) {
      auto block = make_block(need, kVramFlags);
      if (!block) {
        if (block.error().error == -ENOMEM) return edge::NoMemory{need};
        throw edge::Fault(fmt::format("scratch for {}: {}", name, block.error().what));
      }
      // The old scratch may serve launches in flight: it goes with the device.
      if (scratch_.bytes) scratch_retired_.push_back(scratch_);
      scratch_ = *block;
      place_scratch();
    }
  }
  auto* raw = t.get();
  image.entries.emplace(std::string(name), std::move(t));
  return edge::Entry{raw->descriptor, raw, raw->explicit_bytes, raw->max_threads};
}

void Device::unload(edge::ImageId id) {
  std::lock_guard g(mutex_);
  images_.erase(id);
}


}  // namespace rig::amd::driver
