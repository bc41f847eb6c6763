// code.cpp — the simulated GPU's kernels (code.hpp): cubins read by cubin.hpp, their PTX
// loaded by the interpreter, found by their SASS through an index of their first bytes.
#include "code.hpp"

#include "cubin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

namespace rig::sim::nv {
namespace {

// The index keys a kernel by a hash of its first kPrefix SASS bytes (two sm_70+ instructions
// of 16 bytes: enough to tell rig's kernels apart, so find compares one candidate in full).
constexpr std::size_t kPrefix = 32;
// sm_70 and later encode one instruction in 16 bytes: a relocation in .text patches a field
// of the instruction it points into, so the whole instruction is left out of the comparison.
constexpr std::uint64_t kInstructionBytes = 16;

std::uint64_t hash_bytes(std::span<const std::byte> bytes, std::span<const std::byte> mask) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    h ^= std::uint8_t(bytes[i] & mask[i]);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

struct Code::Impl {
  struct Module {
    std::optional<ptx::Module> ptx;
    std::string name;
    mutable std::mutex run_lock;  // place() then run() is one module's turn
  };
  struct Entry {
    Kernel kernel;
    std::vector<std::byte> text;
    std::vector<std::byte> mask;  // 0xff where the bytes must match, 0 where relocations fill
    Module* module = nullptr;
    std::size_t prefix_mask = 0;  // index in prefix_masks, when text.size() >= kPrefix
  };
  std::deque<Module> modules;
  std::deque<Entry> entries;
  std::vector<std::vector<std::byte>> prefix_masks;  // the distinct masks of first bytes
  std::unordered_multimap<std::uint64_t, const Entry*> index;  // hash(mask id, masked prefix)
  std::vector<const Entry*> short_entries;                    // under kPrefix bytes of SASS
  std::unordered_map<const Kernel*, const Entry*> by_kernel;

  static std::uint64_t key(std::size_t mask_id, std::uint64_t h) { return h ^ (mask_id * 0x9e3779b97f4a7c15ull); }

  bool matches(const Entry& e, std::uint64_t address, ptx::Memory& memory) const {
    const auto m = memory.map(address, e.text.size(), false);
    if (!m) return false;
    const std::byte* at = m->host + (address - m->base);
    for (std::size_t i = 0; i < e.text.size(); ++i)
      if (((at[i] ^ e.text[i]) & e.mask[i]) != std::byte{0}) return false;
    return true;
  }
};

Code::Code() : impl_(std::make_unique<Impl>()) {}
Code::~Code() = default;
Code::Code(Code&&) noexcept = default;
Code& Code::operator=(Code&&) noexcept = default;

std::expected<std::size_t, std::string> Code::add(std::span<const std::byte> cubin_bytes, std::string_view ptx_text,
                                                  std::string_view name) {
  auto cubin = cubin::read_cubin(cubin_bytes, name);
  if (!cubin) return std::unexpected(cubin.error());
  while (!ptx_text.empty() && ptx_text.back() == '\0') ptx_text.remove_suffix(1);
  auto module = ptx::Module::load(ptx_text, name);
  if (!module) return std::unexpected(fmt::format("{}: its PTX does not load: {}", name, module.error()));
  const auto ptx_kernels = module->kernels();
  for (const auto& k : cubin->kernels)
    if (std::find(ptx_kernels.begin(), ptx_kernels.end(), k.name) == ptx_kernels.end())
      return std::unexpected(fmt::format("{}: the cubin's kernel {} is not in its PTX", name, k.name));
  if (cubin->kernels.empty()) return std::unexpected(fmt::format("{}: the cubin has no kernel", name));

  // The module variables the PTX declares, where the cubin puts them.
  const auto declared = [&](const std::string& n) {
    const auto vars = module->variables();
    return std::any_of(vars.begin(), vars.end(), [&](const ptx::Variable& v) { return v.name == n; });
  };
  std::vector<Symbol> symbols;
  for (const auto& v : cubin->variables)
    if (!v.global && v.bank != 0 && declared(v.name))
      symbols.push_back({v.name, Symbol::Kind::in_bank, v.bank, std::uint32_t(v.offset)});
  for (const auto& r : cubin->bank_relocs) {
    const bool global = std::any_of(cubin->variables.begin(), cubin->variables.end(),
                                    [&](const cubin::Variable& v) { return v.global && v.name == r.symbol; });
    if (r.type == cubin::kRelocCuda64 && global && r.addend == 0 && declared(r.symbol))
      symbols.push_back({r.symbol, Symbol::Kind::address_in_bank, r.bank, std::uint32_t(r.offset)});
  }

  auto& mod = impl_->modules.emplace_back();
  mod.ptx = std::move(*module);
  mod.name = std::string(name);
  for (auto& k : cubin->kernels) {
    auto& e = impl_->entries.emplace_back();
    e.module = &mod;
    e.kernel = {k.name, cubin->sm, k.text.size(), k.param_offset, k.param_size, k.static_shared,
                k.registers, k.max_threads, k.local_bytes, symbols};
    e.text = std::move(k.text);
    e.mask.assign(e.text.size(), std::byte{0xff});
    for (const auto& r : k.text_relocs) {
      std::uint64_t begin = r.offset, width = kInstructionBytes;
      if (r.type == cubin::kRelocCuda32) width = 4;
      else if (r.type == cubin::kRelocCuda64) width = 8;
      else begin = r.offset / kInstructionBytes * kInstructionBytes;
      for (std::uint64_t i = begin; i < begin + width && i < e.mask.size(); ++i) e.mask[i] = std::byte{0};
    }
    impl_->by_kernel.emplace(&e.kernel, &e);
    if (e.text.size() < kPrefix) {
      impl_->short_entries.push_back(&e);
      continue;
    }
    const std::vector<std::byte> prefix(e.mask.begin(), e.mask.begin() + kPrefix);
    auto& masks = impl_->prefix_masks;
    auto it = std::find(masks.begin(), masks.end(), prefix);
    if (it == masks.end()) it = masks.insert(masks.end(), prefix);
    e.prefix_mask = std::size_t(it - masks.begin());
    impl_->index.emplace(Impl::key(e.prefix_mask, hash_bytes(std::span(e.text).first(kPrefix), prefix)), &e);
  }
  return cubin->kernels.size();
}

std::expected<std::size_t, std::string> Code::add_fatbin(std::span<const std::byte> fatbin, unsigned sm,
                                                         std::string_view name) {
  auto entries = cubin::read_fatbin(fatbin, name);
  if (!entries) return std::unexpected(entries.error());
  const cubin::Fatbin_entry* elf = nullptr;
  const cubin::Fatbin_entry* ptx = nullptr;
  std::string elf_sms;
  for (const auto& e : *entries) {
    if (e.kind == cubin::Entry_kind::elf) {
      elf_sms += fmt::format("{}sm_{}", elf_sms.empty() ? "" : ", ", e.sm);
      if (e.sm == sm && !elf) elf = &e;
    } else if (e.sm <= sm && (!ptx || e.sm > ptx->sm)) {
      ptx = &e;  // the newest PTX the GPU can take
    }
  }
  if (!elf)
    return std::unexpected(fmt::format("{}: no cubin for sm_{} (it has {})", name, sm, elf_sms.empty() ? "none" : elf_sms));
  if (!ptx) return std::unexpected(fmt::format("{}: no PTX for compute_{} or older beside its cubin", name, sm));
  const std::string_view text(reinterpret_cast<const char*>(ptx->payload.data()), ptx->payload.size());
  return add(elf->payload, text, name);
}

std::expected<const Kernel*, std::string> Code::find(std::uint64_t address, ptx::Memory& memory) const {
  const auto& impl = *impl_;
  if (const auto m = memory.map(address, kPrefix, false)) {
    const std::span<const std::byte> prefix(m->host + (address - m->base), kPrefix);
    for (std::size_t id = 0; id < impl.prefix_masks.size(); ++id) {
      const auto [begin, end] = impl.index.equal_range(Impl::key(id, hash_bytes(prefix, impl.prefix_masks[id])));
      for (auto it = begin; it != end; ++it)
        if (it->second->prefix_mask == id && impl.matches(*it->second, address, memory)) return &it->second->kernel;
    }
  } else if (!memory.map(address, 1, false)) {
    return std::unexpected(fmt::format("no kernel at {:#x}: nothing is mapped there", address));
  }
  for (const Impl::Entry* e : impl.short_entries)
    if (impl.matches(*e, address, memory)) return &e->kernel;
  return std::unexpected(fmt::format("no kernel at {:#x}: its bytes are no registered kernel's SASS", address));
}

std::expected<ptx::Stats, std::string> Code::run(const Kernel& kernel, const ptx::Launch& launch,
                                                 ptx::Memory& memory, std::span<const Placement> placements) const {
  const auto it = impl_->by_kernel.find(&kernel);
  if (it == impl_->by_kernel.end())
    return std::unexpected(fmt::format("kernel {} is not one of this GPU's registered kernels", kernel.name));
  auto& module = *it->second->module;
  const std::lock_guard turn(module.run_lock);
  for (const auto& p : placements) {
    try {
      module.ptx->place(p.name, p.address);
    } catch (const std::invalid_argument&) {
      return std::unexpected(fmt::format("kernel {} ({}): no module variable {} to place at {:#x}", kernel.name,
                                         module.name, p.name, p.address));
    }
  }
  return module.ptx->run(kernel.name, launch, memory);
}

}  // namespace rig::sim::nv
