// cubin.cpp — fatbin and cubin reading (cubin.hpp). Every read goes through Bytes, which
// checks the range against the input first and throws Bad with the reason; the public
// functions turn Bad into an error naming the file.
#include "cubin.hpp"

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

namespace rig::sim::nv::cubin {
namespace {

struct Bad {
  std::string why;
};

[[noreturn]] void bad(std::string why) { throw Bad{std::move(why)}; }

// A bounds-checked little-endian view of part of the input.
struct Bytes {
  std::span<const std::byte> all;

  bool holds(std::uint64_t offset, std::uint64_t size) const {
    return offset <= all.size() && size <= all.size() - offset;
  }
  std::span<const std::byte> slice(std::uint64_t offset, std::uint64_t size, std::string_view what) const {
    if (!holds(offset, size))
      bad(fmt::format("{} at offset {:#x}, {} bytes, runs past the end ({} bytes)", what, offset, size, all.size()));
    return all.subspan(offset, size);
  }
  template <class T>
  T get(std::uint64_t offset, std::string_view what) const {
    T v;
    std::memcpy(&v, slice(offset, sizeof(T), what).data(), sizeof(T));
    return v;  // the hosts rig builds for are little-endian, as the files are
  }
  std::uint8_t u8(std::uint64_t o, std::string_view w) const { return get<std::uint8_t>(o, w); }
  std::uint16_t u16(std::uint64_t o, std::string_view w) const { return get<std::uint16_t>(o, w); }
  std::uint32_t u32(std::uint64_t o, std::string_view w) const { return get<std::uint32_t>(o, w); }
  std::uint64_t u64(std::uint64_t o, std::string_view w) const { return get<std::uint64_t>(o, w); }
};

// ---- Fatbin entry header fields (offsets in the entry header).
constexpr std::size_t kEntryKind = 0;            // u16
constexpr std::size_t kEntryHeaderSize = 4;      // u32
constexpr std::size_t kEntryPayloadSize = 8;     // u64: bytes after the header (padded)
constexpr std::size_t kEntryCompressedSize = 16; // u32: bytes of zstd data, when compressed
constexpr std::size_t kEntrySm = 28;             // u32
constexpr std::size_t kEntryFlags = 40;          // u64
constexpr std::size_t kEntryDecompressedSize = 56;  // u64, when compressed

std::vector<std::byte> decompress(std::span<const std::byte> in, std::uint64_t declared, std::size_t entry) {
  if (declared > kMaxPayload)
    bad(fmt::format("entry {} declares {} bytes decompressed, more than the {} accepted", entry, declared, kMaxPayload));
  std::vector<std::byte> out(declared);
  const std::size_t got = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(got))
    bad(fmt::format("entry {} does not decompress: {} (zstd)", entry, ZSTD_getErrorName(got)));
  if (got != declared)
    bad(fmt::format("entry {} decompresses to {} bytes, its header declares {}", entry, got, declared));
  return out;
}

std::vector<Fatbin_entry> fatbin(std::span<const std::byte> input) {
  const Bytes b{input};
  std::vector<Fatbin_entry> entries;
  std::uint64_t at = 0;
  if (input.size() < kFatbinHeaderSize) bad(fmt::format("{} bytes, too short for a fatbin header", input.size()));
  while (at < input.size()) {
    if (b.u32(at, "the fatbin magic") != kFatbinMagic)
      bad(fmt::format("no fatbin magic {:#x} at offset {:#x}", kFatbinMagic, at));
    const std::uint16_t header = b.u16(at + 6, "the fatbin header size");
    const std::uint64_t size = b.u64(at + 8, "the fatbin size");
    if (header < kFatbinHeaderSize) bad(fmt::format("fatbin header at {:#x} claims {} bytes, under 16", at, header));
    const std::uint64_t begin = at + header;
    if (!b.holds(begin, size))
      bad(fmt::format("fatbin at {:#x} claims {} bytes of entries, past the end ({} bytes)", at, size, input.size()));
    const std::uint64_t end = begin + size;
    for (std::uint64_t e = begin; e < end;) {
      const std::size_t index = entries.size();
      const Bytes entry{b.slice(e, end - e, "an entry")};
      const std::uint32_t entry_header = entry.u32(kEntryHeaderSize, "an entry's header size");
      const std::uint64_t payload_size = entry.u64(kEntryPayloadSize, "an entry's payload size");
      if (entry_header < kFatbinEntryHeaderMin)
        bad(fmt::format("entry {} at {:#x} has a {}-byte header, under {}", index, e, entry_header, kFatbinEntryHeaderMin));
      if (payload_size > kMaxPayload)
        bad(fmt::format("entry {} claims {} bytes, more than the {} accepted", index, payload_size, kMaxPayload));
      const auto payload = entry.slice(entry_header, payload_size, fmt::format("entry {}'s payload", index));
      Fatbin_entry out;
      const std::uint16_t kind = entry.u16(kEntryKind, "an entry's kind");
      if (kind != std::uint16_t(Entry_kind::ptx) && kind != std::uint16_t(Entry_kind::elf))
        bad(fmt::format("entry {} has kind {}, neither PTX (1) nor ELF (2)", index, kind));
      out.kind = Entry_kind(kind);
      out.sm = entry.u32(kEntrySm, "an entry's SM");
      out.flags = entry.u64(kEntryFlags, "an entry's flags");
      out.compressed = (out.flags & kFatbinFlagCompressed) != 0;
      if (out.compressed) {
        const std::uint32_t compressed = entry.u32(kEntryCompressedSize, "an entry's compressed size");
        if (compressed > payload.size())
          bad(fmt::format("entry {} claims {} compressed bytes in a {}-byte payload", index, compressed, payload.size()));
        out.payload = decompress(payload.first(compressed), entry.u64(kEntryDecompressedSize, "an entry's size"), index);
      } else {
        out.payload.assign(payload.begin(), payload.end());
      }
      entries.push_back(std::move(out));
      e += entry_header + payload_size;  // both bounded by the slice above: no overflow
    }
    at = end;
  }
  return entries;
}

// ---- ELF64 layout (the System V ABI).
constexpr std::size_t kElfHeaderSize = 64, kShdrSize = 64, kSymSize = 24, kRelSize = 16, kRelaSize = 24;
constexpr std::uint32_t kShtSymtab = 2, kShtRela = 4, kShtNobits = 8, kShtRel = 9;
constexpr std::uint8_t kSttObject = 1, kSttFunc = 2;

struct Section {
  std::string name;
  std::uint32_t type = 0, link = 0, info = 0;
  std::uint64_t flags = 0, offset = 0, size = 0, entsize = 0;
};

std::string c_string(const Bytes& b, const Section& strtab, std::uint32_t at, std::string_view what) {
  if (strtab.type == kShtNobits || at >= strtab.size) bad(fmt::format("{} name at {} is outside its string table", what, at));
  const auto s = b.slice(strtab.offset, strtab.size, "a string table");
  const auto begin = reinterpret_cast<const char*>(s.data()) + at;
  const auto n = ::strnlen(begin, s.size() - at);
  if (n == s.size() - at) bad(fmt::format("{} name at {} is not terminated in its string table", what, at));
  return std::string(begin, n);
}

std::span<const std::byte> contents(const Bytes& b, const Section& s) {
  if (s.type == kShtNobits) return {};
  return b.slice(s.offset, s.size, fmt::format("section {}", s.name));
}

// The records of one .nv.info section: (attribute, value bytes). Non-SVAL formats carry
// their u16 value in the two bytes after the attribute.
constexpr std::uint8_t kFormatSval = 4;
struct Record {
  std::uint8_t attr;
  std::span<const std::byte> value;
};
std::vector<Record> records(std::span<const std::byte> info, std::string_view section) {
  const Bytes r{info};
  std::vector<Record> out;
  for (std::uint64_t at = 0; at < info.size();) {
    const std::uint8_t format = r.u8(at, "a .nv.info record");
    const std::uint8_t attr = r.u8(at + 1, "a .nv.info record");
    if (format == kFormatSval) {
      const std::uint16_t size = r.u16(at + 2, "a .nv.info record's size");
      out.push_back({attr, r.slice(at + 4, size, fmt::format("a record of {} (attribute {:#x})", section, attr))});
      at += 4 + size;
    } else if (format >= 1 && format <= 3) {
      out.push_back({attr, r.slice(at + 2, 2, fmt::format("a record of {}", section))});
      at += 4;
    } else {
      bad(fmt::format("{} has a record of unknown format {} at {}", section, format, at));
    }
  }
  return out;
}

std::uint32_t value_u32(const Record& r, std::size_t at, std::string_view what) {
  return Bytes{r.value}.u32(at, what);
}

Cubin cubin(std::span<const std::byte> input) {
  const Bytes b{input};
  if (input.size() < kElfHeaderSize) bad(fmt::format("{} bytes, too short for an ELF header", input.size()));
  if (std::memcmp(input.data(), "\x7f" "ELF", 4) != 0) bad("not an ELF file (no \\x7fELF magic)");
  if (b.u8(4, "EI_CLASS") != 2 || b.u8(5, "EI_DATA") != 1) bad("not a 64-bit little-endian ELF");
  if (const auto m = b.u16(18, "e_machine"); m != kEmCuda)
    bad(fmt::format("e_machine is {}, not EM_CUDA ({})", m, kEmCuda));
  Cubin out;
  // SM in e_flags: bits 15:8 from CUDA ELF ABI version 7 on, bits 7:0 before (read here
  // as nvcc 13 writes ABI 8: 0x06005a04 for sm_90).
  const std::uint32_t e_flags = b.u32(48, "e_flags");
  out.sm = b.u8(8, "EI_ABIVERSION") >= 7 ? (e_flags >> 8) & 0xff : e_flags & 0xff;
  const std::uint64_t shoff = b.u64(40, "e_shoff");
  const std::uint16_t shentsize = b.u16(58, "e_shentsize"), shnum = b.u16(60, "e_shnum"),
                      shstrndx = b.u16(62, "e_shstrndx");
  if (shnum && shentsize < kShdrSize) bad(fmt::format("e_shentsize {} is under {}", shentsize, kShdrSize));
  std::vector<Section> sections(shnum);
  for (std::size_t i = 0; i < shnum; ++i) {
    const Bytes h{b.slice(shoff + i * std::uint64_t(shentsize), kShdrSize, fmt::format("section header {}", i))};
    auto& s = sections[i];
    s.type = h.u32(4, "sh_type");
    s.flags = h.u64(8, "sh_flags");
    s.offset = h.u64(24, "sh_offset");
    s.size = h.u64(32, "sh_size");
    s.link = h.u32(40, "sh_link");
    s.info = h.u32(44, "sh_info");
    s.entsize = h.u64(56, "sh_entsize");
  }
  if (shstrndx >= shnum) bad(fmt::format("e_shstrndx {} names no section (there are {})", shstrndx, shnum));
  for (std::size_t i = 0; i < shnum; ++i) {
    const Bytes h{b.slice(shoff + i * std::uint64_t(shentsize), kShdrSize, "a section header")};
    sections[i].name = c_string(b, sections[shstrndx], h.u32(0, "sh_name"), fmt::format("section {}'s", i));
  }
  std::map<std::string, std::size_t, std::less<>> by_name;
  for (std::size_t i = 0; i < shnum; ++i) by_name.emplace(sections[i].name, i);
  const auto section = [&](std::string_view n) -> const Section* {
    const auto it = by_name.find(n);
    return it == by_name.end() ? nullptr : &sections[it->second];
  };

  // Symbols.
  const Section* symtab = nullptr;
  for (const auto& s : sections)
    if (s.type == kShtSymtab) symtab = &s;
  if (symtab) {
    if (symtab->link >= shnum) bad(fmt::format("the symbol table's string table {} does not exist", symtab->link));
    const Bytes syms{contents(b, *symtab)};
    for (std::uint64_t at = 0; at + kSymSize <= syms.all.size(); at += kSymSize) {
      Elf_symbol sym;
      sym.name = c_string(b, sections[symtab->link], syms.u32(at, "st_name"), fmt::format("symbol {}'s", at / kSymSize));
      sym.info = syms.u8(at + 4, "st_info");
      sym.other = syms.u8(at + 5, "st_other");
      sym.section = syms.u16(at + 6, "st_shndx");
      sym.value = syms.u64(at + 8, "st_value");
      sym.size = syms.u64(at + 16, "st_size");
      out.symbols.push_back(std::move(sym));
    }
  }

  // Relocations of a section named `target`, from .rel<target> and .rela<target>.
  const auto relocs = [&](std::string_view target) {
    std::vector<Reloc> rs;
    for (const bool rela : {false, true}) {
      const Section* s = section(fmt::format("{}{}", rela ? ".rela" : ".rel", target));
      if (!s) continue;
      if (s->type != (rela ? kShtRela : kShtRel)) bad(fmt::format("section {} is not of type {}", s->name, rela ? "RELA" : "REL"));
      const std::size_t size = rela ? kRelaSize : kRelSize;
      const Bytes r{contents(b, *s)};
      for (std::uint64_t at = 0; at + size <= r.all.size(); at += size) {
        Reloc rel;
        rel.offset = r.u64(at, "r_offset");
        const std::uint64_t info = r.u64(at + 8, "r_info");
        rel.type = std::uint32_t(info);
        rel.symbol = std::uint32_t(info >> 32);
        if (rela) rel.addend = r.get<std::int64_t>(at + 16, "r_addend");
        if (rel.symbol >= out.symbols.size())
          bad(fmt::format("a relocation in {} names symbol {}, of {}", s->name, rel.symbol, out.symbols.size()));
        rs.push_back(rel);
      }
    }
    return rs;
  };

  // The module-wide .nv.info: registers and local memory by kernel symbol.
  std::map<std::uint32_t, std::uint32_t> regcount, local;
  if (const Section* info = section(".nv.info"))
    for (const auto& r : records(contents(b, *info), ".nv.info")) {
      if (r.attr == kAttrRegcount) {
        regcount[value_u32(r, 0, "REGCOUNT's symbol")] = value_u32(r, 4, "REGCOUNT's count");
      } else if (r.attr == kAttrFrameSize || r.attr == kAttrMinStackSize || r.attr == kAttrMaxStackSize) {
        auto& bytes = local[value_u32(r, 0, "a frame or stack size's symbol")];
        bytes = std::max(bytes, value_u32(r, 4, "a frame or stack size"));
      }
    }

  // Kernels.
  for (std::uint32_t i = 0; i < out.symbols.size(); ++i) {
    const auto& sym = out.symbols[i];
    if ((sym.info & 0xf) != kSttFunc || (sym.other & kStoCudaEntry) == 0) continue;
    Kernel_info k;
    k.name = sym.name;
    const std::string text_name = ".text." + sym.name;
    const Section* text = section(text_name);
    if (!text) bad(fmt::format("kernel {} has no section {}", sym.name, text_name));
    const auto bytes = contents(b, *text);
    k.text.assign(bytes.begin(), bytes.end());
    k.text_relocs = relocs(text_name);
    for (const auto& r : k.text_relocs)
      if (r.offset >= k.text.size())
        bad(fmt::format("a relocation of {} at {:#x} lies past its {} bytes", text_name, r.offset, k.text.size()));
    k.registers = text->info >> 24;
    if (const auto it = regcount.find(i); it != regcount.end()) k.registers = it->second;
    if (const auto it = local.find(i); it != local.end()) k.local_bytes = it->second;
    if (const Section* shared = section(".nv.shared." + sym.name)) {
      if (shared->size > 0xffffffffu) bad(fmt::format("{} has {} bytes", shared->name, shared->size));
      k.static_shared = std::uint32_t(shared->size);
    }
    const std::string info_name = ".nv.info." + sym.name;
    if (const Section* info = section(info_name)) {
      std::optional<std::uint32_t> cbank_size;
      for (const auto& r : records(contents(b, *info), info_name)) {
        const Bytes v{r.value};
        switch (r.attr) {
          case kAttrParamCbank:
            k.param_offset = v.u16(4, "PARAM_CBANK's offset");
            k.param_size = v.u16(6, "PARAM_CBANK's size");
            break;
          case kAttrCbankParamSize:
            cbank_size = v.u16(0, "CBANK_PARAM_SIZE");
            break;
          case kAttrKparamInfo: {
            const std::uint32_t flags = v.u32(8, "KPARAM_INFO's flags");
            k.params.push_back({v.u16(4, "KPARAM_INFO's ordinal"), v.u16(6, "KPARAM_INFO's offset"), flags >> 18});
            break;
          }
          case kAttrMaxThreads: {
            std::uint64_t product = 1;
            for (std::size_t at = 0; at + 4 <= r.value.size(); at += 4) product *= v.u32(at, "MAX_THREADS");
            k.max_threads = product > 0xffffffffu ? 0xffffffffu : std::uint32_t(product);
            break;
          }
          default:
            break;
        }
      }
      if (k.param_size == 0 && cbank_size) k.param_size = *cbank_size;
      std::sort(k.params.begin(), k.params.end(), [](const Kparam& a, const Kparam& c) { return a.ordinal < c.ordinal; });
    }
    out.kernels.push_back(std::move(k));
  }

  // Module variables and module constant banks.
  for (const auto& sym : out.symbols) {
    if ((sym.info & 0xf) != kSttObject || sym.section == 0 || sym.section >= shnum) continue;
    const auto& s = sections[sym.section];
    Variable v{sym.name, false, 0, sym.value, sym.size};
    if (s.name == ".nv.global" || s.name == ".nv.global.init") {
      v.global = true;
    } else if (s.name.starts_with(".nv.constant") && s.name.find('.', 12) == std::string::npos) {
      v.bank = std::uint32_t(std::strtoul(s.name.c_str() + 12, nullptr, 10));
    } else {
      continue;
    }
    if (sym.value > s.size || sym.size > s.size - sym.value)
      bad(fmt::format("variable {} at {:#x}, {} bytes, lies outside {} ({} bytes)", sym.name, sym.value, sym.size, s.name, s.size));
    out.variables.push_back(std::move(v));
  }
  for (std::uint32_t bank = 1; bank < std::size(out.constant_data); ++bank) {
    const std::string n = fmt::format(".nv.constant{}", bank);
    const Section* s = section(n);
    if (!s) continue;
    const auto bytes = contents(b, *s);
    out.constant_data[bank].assign(bytes.begin(), bytes.end());
    for (const auto& r : relocs(n)) {
      const std::uint64_t width = r.type == kRelocCuda64 ? 8 : 4;
      if (r.offset > s->size || width > s->size - r.offset)
        bad(fmt::format("a relocation of {} at {:#x} lies outside its {} bytes", n, r.offset, s->size));
      out.bank_relocs.push_back({bank, r.offset, r.type, out.symbols[r.symbol].name, r.addend});
    }
  }
  return out;
}

}  // namespace

std::expected<std::vector<Fatbin_entry>, std::string> read_fatbin(std::span<const std::byte> bytes, std::string_view name) {
  try {
    return fatbin(bytes);
  } catch (const Bad& e) {
    return std::unexpected(fmt::format("{}: not a fatbin rig reads: {}", name, e.why));
  }
}

std::expected<Cubin, std::string> read_cubin(std::span<const std::byte> bytes, std::string_view name) {
  try {
    return cubin(bytes);
  } catch (const Bad& e) {
    return std::unexpected(fmt::format("{}: not a cubin rig reads: {}", name, e.why));
  }
}

}  // namespace rig::sim::nv::cubin
