// cubin.cpp — the cubin and fatbin reader (cubin.hpp).
#include "cubin.hpp"

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

namespace rig::nv {

namespace {

// ELF64 layout (the System V gABI): header fields and table entry sizes.
constexpr std::size_t EHDR_SIZE = 64, SHDR_SIZE = 64, SYM_SIZE = 24, REL_SIZE = 16, RELA_SIZE = 24;
constexpr std::uint32_t SHT_SYMTAB = 2, SHT_RELA = 4, SHT_NOBITS = 8, SHT_REL = 9;
constexpr unsigned char ELFCLASS64 = 2, ELFDATA2LSB = 1;

using Error = std::unexpected<std::string>;

template <class T>
T load(std::span<const std::byte> b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

bool fits(std::uint64_t offset, std::uint64_t size, std::uint64_t total) { return offset <= total && size <= total - offset; }

// A NUL-terminated string at `at` of the string table `table`, or nullopt.
std::optional<std::string> string_at(std::span<const std::byte> table, std::uint64_t at) {
  if (at >= table.size()) return std::nullopt;
  const auto* p = reinterpret_cast<const char*>(table.data() + at);
  const auto* end = static_cast<const char*>(std::memchr(p, 0, table.size() - at));
  if (!end) return std::nullopt;
  return std::string(p, end);
}

struct Reader {
  Cubin& c;
  Error fail(const std::string& why) const { return Error(fmt::format("cubin {}: {}", c.name, why)); }

  std::expected<void, std::string> sections() {
    std::span<const std::byte> b(c.image);
    if (b.size() < EHDR_SIZE) return fail(fmt::format("{} bytes is shorter than an ELF header", b.size()));
    if (std::memcmp(b.data(), "\x7f" "ELF", 4) != 0) return fail("not an ELF file");
    if (static_cast<unsigned char>(b[4]) != ELFCLASS64 || static_cast<unsigned char>(b[5]) != ELFDATA2LSB)
      return fail("not a 64-bit little-endian ELF");
    const auto machine = load<std::uint16_t>(b, 18);
    if (machine != EM_CUDA) return fail(fmt::format("e_machine {} is not EM_CUDA ({})", machine, EM_CUDA));
    c.sm = (load<std::uint32_t>(b, 48) >> E_FLAGS_SM_SHIFT) & 0xff;
    const auto shoff = load<std::uint64_t>(b, 40);
    const auto shentsize = load<std::uint16_t>(b, 58);
    const auto shnum = load<std::uint16_t>(b, 60);
    const auto shstrndx = load<std::uint16_t>(b, 62);
    if (shnum == 0) return fail("no section table");
    if (shentsize != SHDR_SIZE) return fail(fmt::format("section header size {} (ELF64 is {})", shentsize, SHDR_SIZE));
    if (!fits(shoff, std::uint64_t{shnum} * SHDR_SIZE, b.size()))
      return fail(fmt::format("the section table ({} entries at {:#x}) runs past the image's {} bytes", shnum, shoff, b.size()));
    if (shstrndx >= shnum) return fail(fmt::format("section name table index {} of {} sections", shstrndx, shnum));
    std::vector<std::uint32_t> name_at(shnum);
    for (unsigned i = 0; i < shnum; ++i) {
      const std::size_t h = shoff + i * SHDR_SIZE;
      Cubin_section s;
      name_at[i] = load<std::uint32_t>(b, h);
      s.type = load<std::uint32_t>(b, h + 4);
      s.flags = load<std::uint64_t>(b, h + 8);
      s.offset = load<std::uint64_t>(b, h + 24);
      s.size = load<std::uint64_t>(b, h + 32);
      s.link = load<std::uint32_t>(b, h + 40);
      s.info = load<std::uint32_t>(b, h + 44);
      if (i != 0 && s.type != SHT_NOBITS && !fits(s.offset, s.size, b.size()))
        return fail(fmt::format("section {} ({:#x} bytes at {:#x}) runs past the image's {} bytes", i, s.size, s.offset,
                                b.size()));
      c.sections.push_back(std::move(s));
    }
    const auto names = c.bytes(shstrndx);
    for (unsigned i = 1; i < shnum; ++i) {
      auto n = string_at(names, name_at[i]);
      if (!n) return fail(fmt::format("section {}'s name at {:#x} is not in the name table", i, name_at[i]));
      c.sections[i].name = std::move(*n);
    }
    return {};
  }

  std::expected<void, std::string> symbols() {
    for (std::uint32_t i = 0; i < c.sections.size(); ++i) {
      const auto& s = c.sections[i];
      if (s.type != SHT_SYMTAB) continue;
      if (!c.symbols.empty()) return fail("more than one symbol table");
      if (s.size % SYM_SIZE != 0) return fail(fmt::format("{} of {} bytes is not a whole number of symbols", s.name, s.size));
      if (s.link >= c.sections.size()) return fail(fmt::format("{} links to section {}, which does not exist", s.name, s.link));
      const auto b = c.bytes(i);
      const auto strings = c.bytes(s.link);
      for (std::size_t at = 0; at < b.size(); at += SYM_SIZE) {
        Cubin_symbol y;
        const auto name = load<std::uint32_t>(b, at);
        y.info = static_cast<std::uint8_t>(b[at + 4]);
        y.other = static_cast<std::uint8_t>(b[at + 5]);
        y.section = load<std::uint16_t>(b, at + 6);
        y.value = load<std::uint64_t>(b, at + 8);
        y.size = load<std::uint64_t>(b, at + 16);
        auto n = string_at(strings, name);
        if (!n) return fail(fmt::format("symbol {}'s name at {:#x} is not in its string table", at / SYM_SIZE, name));
        y.name = std::move(*n);
        c.symbols.push_back(std::move(y));
      }
    }
    return {};
  }

  std::expected<void, std::string> relocations() {
    for (std::uint32_t i = 0; i < c.sections.size(); ++i) {
      const auto& s = c.sections[i];
      if (s.type != SHT_REL && s.type != SHT_RELA) continue;
      const bool rela = s.type == SHT_RELA;
      const std::size_t entry = rela ? RELA_SIZE : REL_SIZE;
      if (s.size % entry != 0) return fail(fmt::format("{} of {} bytes is not a whole number of entries", s.name, s.size));
      if (s.info == 0 || s.info >= c.sections.size())
        return fail(fmt::format("{} patches section {}, which does not exist", s.name, s.info));
      const auto b = c.bytes(i);
      for (std::size_t at = 0; at < b.size(); at += entry) {
        Cubin_relocation r;
        r.section = s.info;
        r.table = i;
        r.rela = rela;
        r.offset = load<std::uint64_t>(b, at);
        const auto info = load<std::uint64_t>(b, at + 8);
        r.type = static_cast<std::uint32_t>(info);
        r.symbol = static_cast<std::uint32_t>(info >> 32);
        if (rela) r.addend = load<std::int64_t>(b, at + 16);
        if (r.symbol >= c.symbols.size())
          return fail(fmt::format("{} entry {} names symbol {} of {}", s.name, at / entry, r.symbol, c.symbols.size()));
        c.relocations.push_back(r);
      }
    }
    return {};
  }

  Cubin_kernel* kernel_of_symbol(std::uint32_t sym) {
    if (sym >= c.symbols.size()) return nullptr;
    for (auto& k : c.kernels)
      if (k.name == c.symbols[sym].name) return &k;
    return nullptr;
  }

  // One .nv.info section's records; `kernel` is the kernel of a .nv.info.<fn>, else nullptr.
  std::expected<void, std::string> info(std::uint32_t index, Cubin_kernel* kernel) {
    const auto& s = c.sections[index];
    const auto b = c.bytes(index);
    std::size_t at = 0;
    while (at < b.size()) {
      if (b.size() - at < 4) return fail(fmt::format("{}: a record at {:#x} is cut short", s.name, at));
      const auto format = static_cast<std::uint8_t>(b[at]);
      const auto attribute = static_cast<std::uint8_t>(b[at + 1]);
      const auto value = load<std::uint16_t>(b, at + 2);
      std::span<const std::byte> payload;
      if (format == eifmt::SVAL) {
        if (b.size() - at - 4 < value)
          return fail(fmt::format("{}: attribute {:#04x} at {:#x} claims {} bytes past the section's end", s.name, attribute, at,
                                  value));
        payload = b.subspan(at + 4, value);
        at += 4 + value;
      } else if (format == eifmt::NVAL || format == eifmt::BVAL || format == eifmt::HVAL) {
        at += 4;
      } else {
        return fail(fmt::format("{}: record at {:#x} has format {}, not one of 1..4", s.name, at, format));
      }
      auto bad_size = [&](std::size_t want) {
        return fail(fmt::format("{}: attribute {:#04x} has {} bytes where {} are due", s.name, attribute, payload.size(), want));
      };
      auto need_sval = [&](std::size_t want, bool multiple = false) {
        if (format != eifmt::SVAL) return false;
        return multiple ? payload.size() % want == 0 : payload.size() == want;
      };
      // Module-wide records (.nv.info) name the kernel by its symbol.
      auto per_symbol = [&](std::uint32_t Cubin_kernel::* field) -> std::expected<void, std::string> {
        if (!need_sval(8)) return bad_size(8);
        const auto sym = load<std::uint32_t>(payload, 0);
        Cubin_kernel* k = kernel ? kernel : kernel_of_symbol(sym);
        if (k) k->*field = load<std::uint32_t>(payload, 4);
        else if (sym >= c.symbols.size()) return fail(fmt::format("{}: attribute {:#04x} names symbol {} of {}", s.name, attribute, sym, c.symbols.size()));
        return {};
      };
      std::expected<void, std::string> ok;
      switch (attribute) {
        case eiattr::REGCOUNT: ok = per_symbol(&Cubin_kernel::registers); break;
        case eiattr::FRAME_SIZE: ok = per_symbol(&Cubin_kernel::frame_size); break;
        case eiattr::MIN_STACK_SIZE: ok = per_symbol(&Cubin_kernel::min_stack_size); break;
        case eiattr::MAX_STACK_SIZE: ok = per_symbol(&Cubin_kernel::max_stack_size); break;
        default:
          if (!kernel) break;  // other module-wide records carry nothing a launch needs
          switch (attribute) {
            case eiattr::PARAM_CBANK:
              if (!need_sval(8)) return bad_size(8);
              kernel->param_offset = load<std::uint16_t>(payload, 4);
              kernel->param_size = load<std::uint16_t>(payload, 6);
              break;
            case eiattr::CBANK_PARAM_SIZE:
              if (format != eifmt::HVAL) return fail(fmt::format("{}: CBANK_PARAM_SIZE is not a u16 value", s.name));
              kernel->cbank_param_size = value;
              break;
            case eiattr::KPARAM_INFO: {
              if (!need_sval(12)) return bad_size(12);
              Cubin_param p;
              p.ordinal = load<std::uint16_t>(payload, 4);
              p.offset = load<std::uint16_t>(payload, 6);
              p.size = load<std::uint32_t>(payload, 8) >> eiattr::KPARAM_INFO_SIZE_SHIFT;
              kernel->params.push_back(p);
              break;
            }
            case eiattr::MAX_THREADS:
            case eiattr::REQNTID: {
              if (!need_sval(12)) return bad_size(12);
              auto& dims = attribute == eiattr::MAX_THREADS ? kernel->max_threads : kernel->reqntid;
              for (unsigned d = 0; d < 3; ++d) dims[d] = load<std::uint32_t>(payload, 4 * d);
              break;
            }
            case eiattr::EXIT_INSTR_OFFSETS:
              if (!need_sval(4, true)) return bad_size(4);
              for (std::size_t o = 0; o < payload.size(); o += 4) kernel->exit_offsets.push_back(load<std::uint32_t>(payload, o));
              break;
            case eiattr::NUM_BARRIERS:
              if (format == eifmt::SVAL) return fail(fmt::format("{}: NUM_BARRIERS is not a value", s.name));
              kernel->barriers = value;
              break;
            default: break;
          }
      }
      if (!ok) return ok;
    }
    return {};
  }

  std::expected<void, std::string> kernels() {
    constexpr std::string_view text = ".text.", nv_info = ".nv.info.", shared = ".nv.shared.", constant = ".nv.constant";
    for (std::uint32_t i = 0; i < c.sections.size(); ++i) {
      const auto& s = c.sections[i];
      if (!s.name.starts_with(text)) continue;
      const std::string fn = s.name.substr(text.size());
      const bool entry = std::any_of(c.symbols.begin(), c.symbols.end(), [&](const Cubin_symbol& y) {
        return y.name == fn && y.section == i && (y.other & STO_CUDA_ENTRY);
      });
      if (!entry) continue;
      Cubin_kernel k;
      k.name = fn;
      k.text_section = i;
      k.registers = s.info >> TEXT_INFO_REGISTERS_SHIFT;
      k.barriers = static_cast<std::uint32_t>((s.flags >> TEXT_FLAGS_BARRIERS_SHIFT) & TEXT_FLAGS_BARRIERS_MASK);
      c.kernels.push_back(std::move(k));
    }
    for (std::uint32_t i = 0; i < c.sections.size(); ++i) {
      const auto& s = c.sections[i];
      if (s.name == ".nv.global") c.global = i;
      if (s.name == ".nv.global.init") c.global_init = i;
      if (s.name.starts_with(shared)) {
        for (auto& k : c.kernels)
          if (s.name.substr(shared.size()) == k.name) k.static_shared = static_cast<std::uint32_t>(s.size);
      }
      if (s.name.starts_with(constant) && s.name.size() > constant.size()) {
        const std::string_view rest = std::string_view(s.name).substr(constant.size());
        const std::size_t dot = rest.find('.');
        const std::string_view digits = rest.substr(0, dot);
        if (digits.empty() || digits.size() > 2 || !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
          return fail(fmt::format("{} does not name a constant bank", s.name));
        const auto bank = static_cast<std::uint32_t>(std::stoul(std::string(digits)));
        if (dot == std::string_view::npos) {
          c.banks.emplace_back(bank, i);
        } else {
          Cubin_kernel* owner = nullptr;
          for (auto& k : c.kernels)
            if (rest.substr(dot + 1) == k.name) owner = &k;
          if (owner) owner->banks.emplace_back(bank, i);
        }
      }
    }
    for (std::uint32_t i = 0; i < c.sections.size(); ++i) {
      const auto& s = c.sections[i];
      if (s.type != SHT_CUDA_INFO) continue;
      Cubin_kernel* k = nullptr;
      if (s.name.starts_with(nv_info)) {
        for (auto& kk : c.kernels)
          if (s.name.substr(nv_info.size()) == kk.name) k = &kk;
        if (!k) continue;  // the .nv.info of a function that is not a kernel
      } else if (s.name != ".nv.info") {
        continue;
      }
      if (auto r = info(i, k); !r) return r;
    }
    for (auto& k : c.kernels) {
      std::sort(k.params.begin(), k.params.end(), [](const Cubin_param& a, const Cubin_param& b) { return a.ordinal < b.ordinal; });
      for (const auto& p : k.params)
        if (std::uint64_t{p.offset} + p.size > k.param_size)
          return fail(fmt::format("kernel {}: parameter {} ({} bytes at {}) lies past its {} parameter bytes", k.name, p.ordinal,
                                  p.size, p.offset, k.param_size));
      for (auto o : k.exit_offsets)
        if (o >= c.sections[k.text_section].size)
          return fail(fmt::format("kernel {}: exit at {:#x} lies past its {:#x} bytes of SASS", k.name, o,
                                  c.sections[k.text_section].size));
    }
    return {};
  }
};

}  // namespace

std::span<const std::byte> Cubin::bytes(std::uint32_t index) const {
  if (index == 0 || index >= sections.size() || sections[index].type == SHT_NOBITS) return {};
  return std::span(image).subspan(sections[index].offset, sections[index].size);
}

std::optional<std::uint32_t> Cubin::section_index(std::string_view n) const {
  for (std::uint32_t i = 1; i < sections.size(); ++i)
    if (sections[i].name == n) return i;
  return std::nullopt;
}

const Cubin_section* Cubin::section(std::string_view n) const {
  auto i = section_index(n);
  return i ? &sections[*i] : nullptr;
}

const Cubin_kernel* Cubin::kernel(std::string_view n) const {
  for (const auto& k : kernels)
    if (k.name == n) return &k;
  return nullptr;
}

std::expected<Cubin, std::string> read_cubin(std::span<const std::byte> bytes, std::string_view name) {
  Cubin c;
  c.name = std::string(name);
  c.image.assign(bytes.begin(), bytes.end());
  Reader r{c};
  if (auto ok = r.sections(); !ok) return std::unexpected(ok.error());
  if (auto ok = r.symbols(); !ok) return std::unexpected(ok.error());
  if (auto ok = r.relocations(); !ok) return std::unexpected(ok.error());
  if (auto ok = r.kernels(); !ok) return std::unexpected(ok.error());
  return c;
}

namespace {

struct Field_spec {
  unsigned position, width;
  bool high;  // the value's bits 63:32
};

std::optional<Field_spec> field_of(std::uint32_t type) {
  switch (type) {
    case r_cuda::R_CUDA_64: return Field_spec{0, 64, false};
    case r_cuda::R_CUDA_ABS32_LO_32: return Field_spec{32, 32, false};
    case r_cuda::R_CUDA_ABS32_HI_32: return Field_spec{32, 32, true};
    case r_cuda::R_CUDA_ABS47_34: return Field_spec{34, 47, false};
    default: return std::nullopt;
  }
}

std::uint64_t read_bits(std::span<const std::byte> b, std::size_t at, unsigned position, unsigned width) {
  std::uint64_t v = 0;
  for (unsigned i = width; i-- > 0;) {
    const std::size_t bit = position + i;
    v = (v << 1) | ((static_cast<unsigned>(b[at + bit / 8]) >> (bit % 8)) & 1u);
  }
  return v;
}

void write_bits(std::span<std::byte> b, std::size_t at, unsigned position, unsigned width, std::uint64_t v) {
  for (unsigned i = 0; i < width; ++i) {
    const std::size_t bit = position + i;
    auto& byte = b[at + bit / 8];
    const auto mask = static_cast<std::byte>(1u << (bit % 8));
    byte = ((v >> i) & 1) ? (byte | mask) : (byte & ~mask);
  }
}

}  // namespace

std::expected<void, std::string> relocate(const Cubin& c, std::uint32_t target, std::span<std::byte> image,
                                          std::span<const std::uint64_t> section_address) {
  if (target == 0 || target >= c.sections.size())
    return std::unexpected(fmt::format("cubin {}: no section {} to relocate", c.name, target));
  const auto& t = c.sections[target];
  if (image.size() != t.size)
    return std::unexpected(fmt::format("cubin {}: an image of {} bytes for {} of {}", c.name, image.size(), t.name, t.size));
  for (const auto& r : c.relocations) {
    if (r.section != target) continue;
    const auto where = fmt::format("cubin {}: relocation at {}+{:#x}", c.name, t.name, r.offset);
    const auto spec = field_of(r.type);
    if (!spec) return std::unexpected(fmt::format("{}: unsupported relocation type {:#x}", where, r.type));
    const std::size_t bytes = (spec->position + spec->width + 7) / 8;
    if (!fits(r.offset, bytes, image.size()))
      return std::unexpected(fmt::format("{}: its {}-byte field runs past the section's {} bytes", where, bytes, image.size()));
    const auto& sym = c.symbols[r.symbol];
    std::uint64_t s = 0;
    if (r.symbol != 0) {
      if (sym.section == 0 || sym.section >= section_address.size() || section_address[sym.section] == 0)
        return std::unexpected(fmt::format("{}: symbol {} lies in a section with no GPU address", where, sym.name));
      s = section_address[sym.section] + sym.value;
    }
    const std::uint64_t a =
        r.rela ? static_cast<std::uint64_t>(r.addend) : read_bits(image, r.offset, spec->position, spec->width);
    std::uint64_t v = s + a;
    if (spec->high) v >>= 32;
    if (spec->width < 64) v &= (std::uint64_t{1} << spec->width) - 1;
    write_bits(image, r.offset, spec->position, spec->width, v);
  }
  return {};
}

std::expected<std::vector<Fatbin_entry>, std::string> read_fatbin(std::span<const std::byte> b, std::string_view name) {
  auto fail = [&](const std::string& why) { return std::unexpected(fmt::format("fatbin {}: {}", name, why)); };
  std::vector<Fatbin_entry> out;
  std::size_t at = 0;
  while (at < b.size()) {
    if (b.size() - at < fatbin::HEADER_SIZE) return fail(fmt::format("a header at {:#x} is cut short", at));
    if (load<std::uint32_t>(b, at) != fatbin::MAGIC)
      return fail(fmt::format("magic {:#010x} at {:#x} (a fatbin starts with {:#010x})", load<std::uint32_t>(b, at), at,
                              fatbin::MAGIC));
    const auto header = load<std::uint16_t>(b, at + 6);
    const auto size = load<std::uint64_t>(b, at + 8);
    if (header < fatbin::HEADER_SIZE || !fits(at + header, size, b.size()))
      return fail(fmt::format("the header at {:#x} claims {:#x} bytes of entries past the file's {}", at, size, b.size()));
    std::size_t e = at + header;
    const std::size_t end = at + header + size;
    while (e < end) {
      if (end - e < fatbin::ENTRY_HEADER_MIN) return fail(fmt::format("an entry header at {:#x} is cut short", e));
      const auto kind = load<std::uint16_t>(b, e);
      const auto eh = load<std::uint32_t>(b, e + 4);
      const auto payload = load<std::uint64_t>(b, e + 8);
      const auto compressed = load<std::uint32_t>(b, e + 16);
      const auto sm = load<std::uint32_t>(b, e + 28);
      const auto flags = load<std::uint64_t>(b, e + 40);
      const auto plain = load<std::uint64_t>(b, e + 56);
      if (eh < fatbin::ENTRY_HEADER_MIN || !fits(e + eh, payload, end))
        return fail(fmt::format("the entry at {:#x} ({} header bytes, {:#x} payload bytes) runs past the fatbin", e, eh, payload));
      if (kind != fatbin::KIND_PTX && kind != fatbin::KIND_ELF)
        return fail(fmt::format("the entry at {:#x} has kind {} (1 PTX, 2 ELF)", e, kind));
      if (flags & fatbin::FLAG_COMPRESSED_LZ4)
        return fail(fmt::format("the entry at {:#x} is LZ4-compressed, which rig does not read", e));
      Fatbin_entry f;
      f.ptx = kind == fatbin::KIND_PTX;
      f.sm = sm;
      const auto bytes = b.subspan(e + eh, payload);
      if (flags & fatbin::FLAG_COMPRESSED_ZSTD) {
        if (compressed > payload)
          return fail(fmt::format("the entry at {:#x} claims {} compressed bytes in a {}-byte payload", e, compressed, payload));
        // The zstd frame states its own size: it must be the entry's, checked before any allocation.
        const auto frame = ZSTD_getFrameContentSize(bytes.data(), compressed);
        if (frame != plain || plain > fatbin::MAX_UNCOMPRESSED)
          return fail(fmt::format("the entry at {:#x} claims {:#x} bytes uncompressed, its zstd frame {}", e, plain,
                                  frame == ZSTD_CONTENTSIZE_ERROR     ? std::string("is not a zstd frame")
                                  : frame == ZSTD_CONTENTSIZE_UNKNOWN ? std::string("does not say")
                                                                      : fmt::format("{:#x}", frame)));
        f.was_compressed = true;
        f.payload.resize(plain);
        const std::size_t got = ZSTD_decompress(f.payload.data(), f.payload.size(), bytes.data(), compressed);
        if (ZSTD_isError(got) || got != plain)
          return fail(fmt::format("the entry at {:#x} does not decompress to its {} bytes ({})", e, plain,
                                  ZSTD_isError(got) ? ZSTD_getErrorName(got) : fmt::format("{} bytes", got)));
      } else {
        f.payload.assign(bytes.begin(), bytes.end());
      }
      out.push_back(std::move(f));
      e += eh + payload;
    }
    at = end;
  }
  return out;
}

std::expected<Cubin, std::string> cubin_for_sm(std::span<const std::byte> bytes, unsigned sm, std::string_view name) {
  auto entries = read_fatbin(bytes, name);
  if (!entries) return std::unexpected(entries.error());
  std::string held;
  for (const auto& e : *entries) {
    if (!e.ptx && e.sm == sm) return read_cubin(e.payload, fmt::format("{} (sm_{})", name, sm));
    held += fmt::format("{}{}_{}{}", held.empty() ? "" : ", ", e.ptx ? "compute" : "sm", e.sm, e.ptx ? " PTX" : "");
  }
  return std::unexpected(fmt::format("fatbin {}: no SASS for sm_{} in the fatbin (it holds {}); rig does not JIT PTX without libcuda",
                                     name, sm, held.empty() ? "nothing" : held));
}

}  // namespace rig::nv
