// AMDGPU code objects through LLVM's libObject and msgpack reader (code_object.hpp).
#include "code_object.hpp"

#include <fmt/format.h>

#include <llvm/BinaryFormat/ELF.h>
#include <llvm/BinaryFormat/MsgPackDocument.h>
#include <llvm/BinaryFormat/MsgPackReader.h>
#include <llvm/Object/ELF.h>
#include <llvm/Object/ELFTypes.h>
#include <llvm/Support/Error.h>

#include <algorithm>
#include <cstring>

namespace rig::amd {

static_assert(kRelocAbs32Lo == llvm::ELF::R_AMDGPU_ABS32_LO);
static_assert(kRelocAbs32Hi == llvm::ELF::R_AMDGPU_ABS32_HI);
static_assert(kRelocAbs64 == llvm::ELF::R_AMDGPU_ABS64);
static_assert(kRelocRelative64 == llvm::ELF::R_AMDGPU_RELATIVE64);

namespace {

using Elf = llvm::object::ELF64LEFile;
using Fail = std::unexpected<std::string>;

// The most bytes an image may span: larger images are refused rather than allocated.
constexpr std::uint64_t kMaxImageBytes = std::uint64_t(1) << 32;

std::string text(llvm::Error e) { return llvm::toString(std::move(e)); }

template <class T>
std::uint64_t le(std::span<const std::byte> b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return std::uint64_t(v);
}

// A node's kind; Empty for a node that is not there (whose getKind may not be asked).
llvm::msgpack::Type kind(const llvm::msgpack::DocNode& n) {
  return n.isEmpty() ? llvm::msgpack::Type::Empty : n.getKind();
}

// A metadata node's value as an unsigned integer, if it is one.
std::optional<std::uint64_t> number(const llvm::msgpack::DocNode& n) {
  if (kind(n) == llvm::msgpack::Type::UInt) return n.getUInt();
  if (kind(n) == llvm::msgpack::Type::Int && n.getInt() >= 0) return std::uint64_t(n.getInt());
  return std::nullopt;
}

// The map's value under `key`, or an empty node.
llvm::msgpack::DocNode at(llvm::msgpack::MapDocNode& map, llvm::StringRef key) {
  auto it = map.find(key);
  return it == map.end() ? llvm::msgpack::DocNode() : it->second;
}

bool is(const llvm::msgpack::DocNode& n, llvm::msgpack::Type t) { return kind(n) == t; }

std::expected<std::uint32_t, std::string> u32(llvm::msgpack::MapDocNode& map, llvm::StringRef key,
                                              std::string_view where, bool required = true) {
  auto n = at(map, key);
  if (n.isEmpty()) {
    if (!required) return 0u;
    return Fail(fmt::format("{}: no {}", where, std::string_view(key)));
  }
  auto v = number(n);
  if (!v || *v > 0xffffffffu)
    return Fail(fmt::format("{}: {} is not a 32-bit unsigned number", where, std::string_view(key)));
  return std::uint32_t(*v);
}

std::string str(llvm::msgpack::MapDocNode& map, llvm::StringRef key) {
  auto n = at(map, key);
  return is(n, llvm::msgpack::Type::String) ? n.getString().str() : std::string();
}

// Whether `blob` is one MessagePack object that llvm::msgpack::Document reads safely: well
// formed, with only scalar map keys (the Document's key ordering traps on a map or array
// key), nested at most 64 deep. The metadata note is untrusted input.
bool safe_msgpack(llvm::StringRef blob) {
  llvm::msgpack::Reader reader(blob);
  struct Level {
    std::uint64_t left;
    bool map;
    std::uint64_t index = 0;
  };
  std::vector<Level> stack{{1, false}};
  while (!stack.empty()) {
    if (stack.back().left == 0) {
      stack.pop_back();
      continue;
    }
    auto& top = stack.back();
    bool key = top.map && top.index % 2 == 0;
    --top.left, ++top.index;
    llvm::msgpack::Object o;
    auto got = reader.read(o);
    if (!got) return llvm::consumeError(got.takeError()), false;
    if (!*got) return false;  // the input ended inside an object
    using T = llvm::msgpack::Type;
    if (key && (o.Kind == T::Map || o.Kind == T::Array || o.Kind == T::Extension || o.Kind == T::Empty))
      return false;
    if (o.Kind == T::Map || o.Kind == T::Array) {
      if (stack.size() >= 64 || o.Length > blob.size()) return false;
      stack.push_back({o.Kind == T::Map ? 2 * std::uint64_t(o.Length) : o.Length, o.Kind == T::Map});
    }
  }
  return true;
}

std::expected<std::vector<Kernel>, std::string> kernels_of(llvm::msgpack::Document& doc,
                                                           CodeObject& out) {
  auto root = doc.getRoot();
  if (!is(root, llvm::msgpack::Type::Map)) return Fail("the AMDGPU metadata is not a map");
  auto& map = root.getMap();
  out.target = str(map, "amdhsa.target");
  if (auto v = at(map, "amdhsa.version"); is(v, llvm::msgpack::Type::Array))
    for (auto& e : v.getArray())
      if (auto n = number(e)) out.version.push_back(std::uint32_t(*n));
  auto ks = at(map, "amdhsa.kernels");
  if (!is(ks, llvm::msgpack::Type::Array)) return Fail("the AMDGPU metadata has no amdhsa.kernels list");
  std::vector<Kernel> kernels;
  for (auto& node : ks.getArray()) {
    if (!is(node, llvm::msgpack::Type::Map)) return Fail("an entry of amdhsa.kernels is not a map");
    auto& k = node.getMap();
    Kernel kernel;
    kernel.name = str(k, ".name");
    kernel.symbol = str(k, ".symbol");
    if (kernel.name.empty() || kernel.symbol.empty())
      return Fail("a kernel of amdhsa.kernels has no .name or .symbol");
    std::string where = fmt::format("kernel {}", kernel.name);
    auto get = [&](llvm::StringRef key, std::uint32_t& into, bool required = true) -> std::optional<std::string> {
      auto v = u32(k, key, where, required);
      if (!v) return v.error();
      into = *v;
      return std::nullopt;
    };
    for (auto [key, into, required] :
         {std::tuple{".kernarg_segment_size", &kernel.kernarg_segment_size, true},
          std::tuple{".kernarg_segment_align", &kernel.kernarg_segment_align, true},
          std::tuple{".group_segment_fixed_size", &kernel.group_segment_fixed_size, true},
          std::tuple{".private_segment_fixed_size", &kernel.private_segment_fixed_size, true},
          std::tuple{".wavefront_size", &kernel.wavefront_size, true},
          std::tuple{".max_flat_workgroup_size", &kernel.max_flat_workgroup_size, false},
          std::tuple{".sgpr_count", &kernel.sgpr_count, false},
          std::tuple{".vgpr_count", &kernel.vgpr_count, false}})
      if (auto e = get(key, *into, required)) return Fail(*e);
    if (auto d = at(k, ".uses_dynamic_stack"); is(d, llvm::msgpack::Type::Boolean))
      kernel.uses_dynamic_stack = d.getBool();
    if (auto args = at(k, ".args"); !args.isEmpty()) {
      if (!is(args, llvm::msgpack::Type::Array)) return Fail(fmt::format("{}: .args is not a list", where));
      for (auto& a : args.getArray()) {
        if (!is(a, llvm::msgpack::Type::Map)) return Fail(fmt::format("{}: an argument is not a map", where));
        auto& am = a.getMap();
        KernelArgument arg;
        arg.name = str(am, ".name");
        arg.value_kind = str(am, ".value_kind");
        arg.address_space = str(am, ".address_space");
        auto offset = u32(am, ".offset", where), size = u32(am, ".size", where);
        if (!offset) return Fail(offset.error());
        if (!size) return Fail(size.error());
        arg.offset = *offset, arg.size = *size;
        if (arg.value_kind.empty()) return Fail(fmt::format("{}: an argument has no .value_kind", where));
        kernel.args.push_back(std::move(arg));
      }
    }
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

}  // namespace

std::expected<KernelDescriptor, std::string> KernelDescriptor::decode(std::span<const std::byte> b) {
  if (b.size() < kBytes) return Fail(fmt::format("a kernel descriptor of {} bytes, not 64", b.size()));
  KernelDescriptor d;
  d.group_segment_fixed_size = std::uint32_t(le<std::uint32_t>(b, 0));
  d.private_segment_fixed_size = std::uint32_t(le<std::uint32_t>(b, 4));
  d.kernarg_size = std::uint32_t(le<std::uint32_t>(b, 8));
  d.kernel_code_entry_byte_offset = std::int64_t(le<std::uint64_t>(b, 16));
  d.compute_pgm_rsrc3 = std::uint32_t(le<std::uint32_t>(b, 44));
  d.compute_pgm_rsrc1 = std::uint32_t(le<std::uint32_t>(b, 48));
  d.compute_pgm_rsrc2 = std::uint32_t(le<std::uint32_t>(b, 52));
  d.kernel_code_properties = std::uint16_t(le<std::uint16_t>(b, 56));
  d.kernarg_preload = std::uint16_t(le<std::uint16_t>(b, 58));
  return d;
}

const Kernel* CodeObject::find(std::string_view name) const {
  for (auto& k : kernels)
    if (k.name == name) return &k;
  return nullptr;
}

std::string processor_of(std::string_view target) {
  // arch-vendor-os-environment-processor[:feature...]; the environment is usually empty.
  std::string_view p = target.substr(0, target.find(':'));
  auto dash = p.rfind('-');
  return std::string(dash == std::string_view::npos ? p : p.substr(dash + 1));
}

std::string_view processor_of_mach(std::uint32_t mach) {
  switch (mach) {
    case kMachGfx90a: return "gfx90a";
    case kMachGfx942: return "gfx942";
    case kMachGfx1100: return "gfx1100";
    case kMachGfx1201: return "gfx1201";
  }
  return {};
}

std::optional<ProcessorLimits> limits_of(std::string_view p) {
  if (p == "gfx90a" || p == "gfx942") return ProcessorLimits{64, 64 << 10, 8191 * 1024 / 64};
  if (p.starts_with("gfx11") || p.starts_with("gfx12")) return ProcessorLimits{32, 64 << 10, 32767 * 256 / 32};
  return std::nullopt;
}

std::expected<void, std::string> check_for(const CodeObject& object, std::string_view processor) {
  if (object.arch != processor)
    return Fail(fmt::format("a code object for {}, not {}", object.arch.empty() ? object.target : object.arch, processor));
  const auto limits = limits_of(processor);
  if (!limits) return Fail(fmt::format("no kernel limits are known for {}", processor));
  const bool gfx9 = limits->wave_size == 64;
  for (const auto& k : object.kernels) {
    if (k.descriptor.wave32() != !gfx9)
      return Fail(fmt::format("kernel {} is wave{}, and {} runs wave{} kernels only", k.name, k.descriptor.wave32() ? 32 : 64,
                              processor, limits->wave_size));
    if (k.group_segment_fixed_size > limits->lds_bytes)
      return Fail(fmt::format("kernel {} uses {} bytes of group-shared memory, over {}'s {} per group", k.name,
                              k.group_segment_fixed_size, processor, limits->lds_bytes));
    if (k.private_segment_fixed_size > limits->private_bytes)
      return Fail(fmt::format("kernel {} uses {} bytes of private memory per lane, over {}'s {}", k.name,
                              k.private_segment_fixed_size, processor, limits->private_bytes));
  }
  return {};
}

std::expected<CodeObject, std::string> read_code_object(std::span<const std::byte> bytes) {
  llvm::StringRef data(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  auto created = Elf::create(data);
  if (!created) return Fail("not an ELF64 little-endian object: " + text(created.takeError()));
  const Elf& elf = *created;
  const auto& eh = elf.getHeader();
  if (eh.e_machine != llvm::ELF::EM_AMDGPU)
    return Fail(fmt::format("not an AMDGPU object (e_machine {})", unsigned(eh.e_machine)));
  if (eh.e_type != llvm::ELF::ET_DYN)
    return Fail(fmt::format("not a shared object (e_type {}): link it with ld.lld -shared", unsigned(eh.e_type)));

  CodeObject out;
  out.mach = eh.e_flags & kMachMask;
  out.xnack = Feature((eh.e_flags >> kXnackShift) & 3);
  out.sramecc = Feature((eh.e_flags >> kSrameccShift) & 3);
  auto phdrs = elf.program_headers();
  if (!phdrs) return Fail("bad program headers: " + text(phdrs.takeError()));
  for (auto& ph : *phdrs) {
    if (ph.p_type != llvm::ELF::PT_LOAD) continue;
    if (ph.p_filesz > ph.p_memsz || ph.p_offset > bytes.size() || ph.p_filesz > bytes.size() - ph.p_offset ||
        ph.p_vaddr > kMaxImageBytes || ph.p_memsz > kMaxImageBytes - ph.p_vaddr)
      return Fail(fmt::format("a PT_LOAD segment at {:#x} lies outside the file or the image", uint64_t(ph.p_vaddr)));
    out.segments.push_back({ph.p_vaddr, ph.p_offset, ph.p_filesz, ph.p_memsz});
    out.image_bytes = std::max<std::uint64_t>(out.image_bytes, ph.p_vaddr + ph.p_memsz);
  }
  if (out.segments.empty()) return Fail("no PT_LOAD segment");

  auto sections = elf.sections();
  if (!sections) return Fail("bad section headers: " + text(sections.takeError()));

  // The metadata note: in any SHT_NOTE section, owner "AMDGPU", type NT_AMDGPU_METADATA.
  std::optional<std::string> blob;
  for (auto& sh : *sections) {
    if (sh.sh_type != llvm::ELF::SHT_NOTE) continue;
    // LLVM's own bound check adds offset and size, which can wrap: check without a sum.
    if (sh.sh_offset > bytes.size() || sh.sh_size > bytes.size() - sh.sh_offset)
      return Fail(fmt::format("a note section at {:#x} of {:#x} bytes lies outside the file",
                              std::uint64_t(sh.sh_offset), std::uint64_t(sh.sh_size)));
    if (sh.sh_addralign > 1 && sh.sh_addralign != 4 && sh.sh_addralign != 8)
      return Fail(fmt::format("a note section aligned to {}, not 4 or 8", std::uint64_t(sh.sh_addralign)));
    const std::uint64_t align = sh.sh_addralign == 8 ? 8 : 4;
    llvm::Error err = llvm::Error::success();
    for (auto note : elf.notes(sh, err))
      if (note.getName() == "AMDGPU" && note.getType() == llvm::ELF::NT_AMDGPU_METADATA) {
        auto desc = note.getDesc(align);
        blob = std::string(reinterpret_cast<const char*>(desc.data()), desc.size());
      }
    if (err) return Fail("bad note section: " + text(std::move(err)));
  }
  if (!blob) return Fail("no NT_AMDGPU_METADATA note (code object v2 is not read)");
  llvm::msgpack::Document doc;
  if (!safe_msgpack(*blob) || !doc.readFromBlob(*blob, false))
    return Fail("the NT_AMDGPU_METADATA note is not valid MessagePack (or has non-scalar map keys)");
  auto kernels = kernels_of(doc, out);
  if (!kernels) return Fail(kernels.error());
  out.kernels = std::move(*kernels);
  out.arch = processor_of(out.target);
  if (auto named = processor_of_mach(out.mach); !named.empty() && named != out.arch)
    return Fail(fmt::format("the ELF header names {} (EF_AMDGPU_MACH {:#x}) but the metadata's target is {}", named,
                            out.mach, out.target));

  // Symbols: the descriptors (NAME.kd) from .symtab, else .dynsym.
  const Elf::Elf_Shdr* symtab = nullptr;
  for (auto& sh : *sections)
    if (sh.sh_type == llvm::ELF::SHT_SYMTAB || (!symtab && sh.sh_type == llvm::ELF::SHT_DYNSYM)) symtab = &sh;
  if (!symtab && !out.kernels.empty()) return Fail("no symbol table");
  std::vector<std::pair<std::string, const Elf::Elf_Sym*>> named;
  if (symtab) {
    auto syms = elf.symbols(symtab);
    if (!syms) return Fail("bad symbol table: " + text(syms.takeError()));
    auto strtab = elf.getStringTableForSymtab(*symtab);
    if (!strtab) return Fail("bad symbol string table: " + text(strtab.takeError()));
    for (auto& s : *syms) {
      auto name = s.getName(*strtab);
      if (!name) return Fail("bad symbol name: " + text(name.takeError()));
      named.emplace_back(name->str(), &s);
    }
  }
  for (auto& k : out.kernels) {
    auto it = std::find_if(named.begin(), named.end(), [&](auto& n) { return n.first == k.symbol; });
    if (it == named.end()) return Fail(fmt::format("kernel {}: no symbol {}", k.name, k.symbol));
    const auto& s = *it->second;
    auto sec = elf.getSection(s.st_shndx);
    if (!sec) return Fail(fmt::format("kernel {}: {} names no section", k.name, k.symbol));
    const auto& sh = **sec;
    if (sh.sh_type == llvm::ELF::SHT_NOBITS || s.st_value < sh.sh_addr ||
        s.st_value - sh.sh_addr > sh.sh_size || sh.sh_size - (s.st_value - sh.sh_addr) < KernelDescriptor::kBytes ||
        sh.sh_offset > bytes.size() || sh.sh_size > bytes.size() - sh.sh_offset)
      return Fail(fmt::format("kernel {}: its descriptor lies outside its section", k.name));
    auto d = KernelDescriptor::decode(bytes.subspan(sh.sh_offset + (s.st_value - sh.sh_addr), 64));
    if (!d) return Fail(d.error());
    k.descriptor = *d;
    k.descriptor_address = s.st_value;
  }

  // Dynamic relocations.
  for (auto& sh : *sections) {
    if (sh.sh_type != llvm::ELF::SHT_RELA && sh.sh_type != llvm::ELF::SHT_REL) continue;
    if (!(sh.sh_flags & llvm::ELF::SHF_ALLOC)) continue;  // only what the loader applies
    const Elf::Elf_Shdr* link = nullptr;
    if (sh.sh_link) {
      auto l = elf.getSection(sh.sh_link);
      if (!l) return Fail("a relocation section links no symbol table");
      link = *l;
    }
    auto symbol = [&](std::uint32_t index, Relocation& r) -> bool {
      if (index == 0) return true;
      if (!link) return false;
      auto s = elf.getSymbol(link, index);
      if (!s) return llvm::consumeError(s.takeError()), false;
      r.symbol_value = (*s)->st_value;
      r.symbol_defined = (*s)->st_shndx != llvm::ELF::SHN_UNDEF;
      return true;
    };
    auto add = [&](std::uint64_t offset, std::uint32_t type, std::uint32_t sym, std::int64_t addend)
        -> std::optional<std::string> {
      if (type == llvm::ELF::R_AMDGPU_NONE) return std::nullopt;
      if (type != kRelocAbs32Lo && type != kRelocAbs32Hi && type != kRelocAbs64 && type != kRelocRelative64)
        return fmt::format("a dynamic relocation of type {} at {:#x}, which the loader does not apply", type, offset);
      Relocation r{offset, type, 0, true, addend};
      if (!symbol(sym, r)) return fmt::format("a relocation at {:#x} names a bad symbol", offset);
      out.relocations.push_back(r);
      return std::nullopt;
    };
    if (sh.sh_type == llvm::ELF::SHT_RELA) {
      auto relas = elf.relas(sh);
      if (!relas) return Fail("bad relocations: " + text(relas.takeError()));
      for (auto& r : *relas)
        if (auto e = add(r.r_offset, r.getType(false), r.getSymbol(false), r.r_addend)) return Fail(*e);
    } else {
      auto rels = elf.rels(sh);
      if (!rels) return Fail("bad relocations: " + text(rels.takeError()));
      for (auto& r : *rels)
        if (auto e = add(r.r_offset, r.getType(false), r.getSymbol(false), 0)) return Fail(*e);
    }
  }
  return out;
}

std::expected<std::string, std::string> place(const CodeObject& object, std::span<const std::byte> elf,
                                              std::uint64_t base) {
  if (object.image_bytes > kMaxImageBytes) return Fail("the image is too large to place");
  std::string image(object.image_bytes, '\0');
  for (auto& s : object.segments) {
    if (s.file_offset > elf.size() || s.file_bytes > elf.size() - s.file_offset ||
        s.address + s.file_bytes > image.size())
      return Fail(fmt::format("the segment at {:#x} lies outside the file", s.address));
    std::memcpy(image.data() + s.address, elf.data() + s.file_offset, s.file_bytes);
  }
  for (auto& r : object.relocations) {
    if (!r.symbol_defined) return Fail(fmt::format("the relocation at {:#x} names an undefined symbol", r.offset));
    std::uint64_t s = r.symbol_value ? base + r.symbol_value : 0;
    std::uint64_t value = 0;
    std::size_t width = 8;
    switch (r.type) {
      case kRelocRelative64: value = base + std::uint64_t(r.addend); break;
      case kRelocAbs64: value = s + std::uint64_t(r.addend); break;
      case kRelocAbs32Lo: value = (s + std::uint64_t(r.addend)) & 0xffffffffu, width = 4; break;
      case kRelocAbs32Hi: value = (s + std::uint64_t(r.addend)) >> 32, width = 4; break;
    }
    if (r.offset > image.size() || width > image.size() - r.offset)
      return Fail(fmt::format("the relocation at {:#x} lies outside the image", r.offset));
    std::memcpy(image.data() + r.offset, &value, width);
  }
  return image;
}

}  // namespace rig::amd
