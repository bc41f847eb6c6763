#include "elf_loader.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace rig::host {
namespace {

template <class T>
using Result = std::expected<T, std::string>;

template <class... Args>
std::unexpected<std::string> fail(fmt::format_string<Args...> format, Args&&... args) {
  return std::unexpected(fmt::format(format, std::forward<Args>(args)...));
}

// What an object may ask for, at most.
constexpr std::uint64_t kMaxImageBytes = std::uint64_t{1} << 30;
constexpr std::uint32_t kMaxSections = SHN_LORESERVE;
constexpr std::uint64_t kStubAlign = 16;
constexpr std::uint64_t kSlotBytes = 8;

std::uint64_t page_size() {
  static const std::uint64_t size = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  return size;
}

// Whether [offset, offset + size) lies inside [0, total).
bool fits(std::uint64_t offset, std::uint64_t size, std::uint64_t total) {
  return offset <= total && size <= total - offset;
}

// `value` rounded up to `align`, a power of two; both are far below 2^63 here.
std::uint64_t align_up(std::uint64_t value, std::uint64_t align) {
  return (value + align - 1) & ~(align - 1);
}

template <class T>
std::optional<T> read_at(std::span<const std::byte> bytes, std::uint64_t offset) {
  if (!fits(offset, sizeof(T), bytes.size())) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <class T>
T load_from(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

template <class T>
void store_to(std::byte* at, T value) {
  std::memcpy(at, &value, sizeof(T));
}

// The NUL-terminated string at `offset` of a string table, if it lies wholly inside it.
std::optional<std::string_view> string_at(std::span<const std::byte> table, std::uint64_t offset) {
  if (offset >= table.size()) return std::nullopt;
  const char* begin = reinterpret_cast<const char*>(table.data()) + offset;
  const void* end = std::memchr(begin, 0, table.size() - offset);
  if (end == nullptr) return std::nullopt;
  return std::string_view(begin, static_cast<const char*>(end) - begin);
}

std::string machine_name(std::uint16_t machine) {
  switch (machine) {
    case EM_X86_64: return "x86_64";
    case EM_AARCH64: return "aarch64";
    case EM_386: return "i386";
    case EM_ARM: return "arm";
    case EM_RISCV: return "riscv";
    case EM_PPC: return "ppc";
    case EM_PPC64: return "ppc64";
    case EM_S390: return "s390";
    case EM_MIPS: return "mips";
    case EM_SPARCV9: return "sparc64";
    case EM_NONE: return "no machine";
    default: return fmt::format("machine {}", machine);
  }
}

std::string file_type_name(std::uint16_t type) {
  switch (type) {
    case ET_NONE: return "ET_NONE";
    case ET_EXEC: return "ET_EXEC";
    case ET_DYN: return "ET_DYN";
    case ET_CORE: return "ET_CORE";
    default: return fmt::format("type 0x{:x}", type);
  }
}

struct NamedType {
  std::uint32_t type;
  std::string_view name;
};

template <std::size_t N>
std::string_view name_in(const std::array<NamedType, N>& table, std::uint32_t type) {
  for (const auto& entry : table) {
    if (entry.type == type) return entry.name;
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// Architecture-specific relocation processing. Only the host's architecture is compiled.

// What a relocation needs besides its symbol: a GOT slot, or a stub (a jump through a GOT
// slot) when its symbol lies outside the image.
enum class Need : std::uint8_t { nothing, got_slot, stub_if_external };

struct RelocKind {
  std::uint8_t width;  // bytes it patches
  Need need;
};

enum class Refusal : std::uint8_t { unsupported, thread_local_storage };

// Where a relocation applies, as the file holds it, before layout.
struct Site {
  std::span<const std::byte> section;  // the file's bytes of the section (empty for NOBITS)
  std::uint64_t offset;
  bool executable;
};

// One relocation with its values resolved, named as the ELF ABIs name them.
struct Fixup {
  std::uint32_t type;
  std::byte* where;
  std::uint64_t S;    // symbol (or its stub)
  std::uint64_t A;    // addend, two's complement
  std::uint64_t P;    // place
  std::uint64_t G;    // the symbol's GOT slot
  std::uint64_t GOT;  // the GOT
  std::uint64_t Z;    // symbol size
};

struct Arch {
  std::uint16_t machine;
  std::uint16_t large_common;  // a section index meaning COMMON too, or SHN_UNDEF
  std::uint64_t stub_bytes;
  bool slot_holds_addend;  // a GOT slot holds S + A (aarch64) rather than S (x86-64)
  std::expected<RelocKind, Refusal> (*classify)(std::uint32_t type, const Site& site);
  std::string_view (*relocation_name)(std::uint32_t type);
  // Whether the image must lie in the low 2 GiB for this relocation to reach into it.
  bool (*needs_low_image)(std::uint32_t type);
  // How far (bytes, either way) this relocation reaches from its place to its target when
  // the target is outside the image; 0 if the image's placement cannot help it.
  std::uint64_t (*reach)(std::uint32_t type);
  // Patches the place; error: why the value does not fit.
  Result<void> (*apply)(const Fixup& fixup);
  void (*write_stub)(std::byte* at, std::uint64_t stub_address, std::uint64_t slot_address);
};

Result<void> out_of_range(std::uint64_t value, std::string_view field) {
  return fail("value 0x{:x} does not fit in {}", value, field);
}

// A field that may hold a signed or an unsigned value of `bits` bits.
template <class T>
Result<void> put_either(std::byte* at, std::uint64_t value) {
  constexpr int bits = 8 * sizeof(T);
  const auto as_signed = static_cast<std::int64_t>(value);
  if (as_signed < -(std::int64_t{1} << (bits - 1)) || as_signed >= (std::int64_t{1} << bits)) {
    return out_of_range(value, fmt::format("a {}-bit field", bits));
  }
  store_to(at, static_cast<T>(value));
  return {};
}

template <class T>
Result<void> put_signed(std::byte* at, std::uint64_t value) {
  constexpr int bits = 8 * sizeof(T);
  const auto as_signed = static_cast<std::int64_t>(value);
  if (as_signed < -(std::int64_t{1} << (bits - 1)) || as_signed >= (std::int64_t{1} << (bits - 1))) {
    return out_of_range(value, fmt::format("a signed {}-bit field", bits));
  }
  store_to(at, static_cast<T>(value));
  return {};
}

Result<void> put64(std::byte* at, std::uint64_t value) {
  store_to(at, value);
  return {};
}

#if defined(__x86_64__)

Result<void> put_signed32(std::byte* at, std::uint64_t value) {
  const auto as_signed = static_cast<std::int64_t>(value);
  if (as_signed < std::numeric_limits<std::int32_t>::min() ||
      as_signed > std::numeric_limits<std::int32_t>::max()) {
    return out_of_range(value, "a signed 32-bit field (more than 2 GiB away)");
  }
  store_to(at, static_cast<std::uint32_t>(value));
  return {};
}

Result<void> put_unsigned32(std::byte* at, std::uint64_t value) {
  if (value > std::numeric_limits<std::uint32_t>::max()) {
    return out_of_range(value, "an unsigned 32-bit field");
  }
  store_to(at, static_cast<std::uint32_t>(value));
  return {};
}

constexpr std::array<NamedType, 41> kX86_64Relocations{{
    {R_X86_64_NONE, "R_X86_64_NONE"},
    {R_X86_64_64, "R_X86_64_64"},
    {R_X86_64_PC32, "R_X86_64_PC32"},
    {R_X86_64_GOT32, "R_X86_64_GOT32"},
    {R_X86_64_PLT32, "R_X86_64_PLT32"},
    {R_X86_64_COPY, "R_X86_64_COPY"},
    {R_X86_64_GLOB_DAT, "R_X86_64_GLOB_DAT"},
    {R_X86_64_JUMP_SLOT, "R_X86_64_JUMP_SLOT"},
    {R_X86_64_RELATIVE, "R_X86_64_RELATIVE"},
    {R_X86_64_GOTPCREL, "R_X86_64_GOTPCREL"},
    {R_X86_64_32, "R_X86_64_32"},
    {R_X86_64_32S, "R_X86_64_32S"},
    {R_X86_64_16, "R_X86_64_16"},
    {R_X86_64_PC16, "R_X86_64_PC16"},
    {R_X86_64_8, "R_X86_64_8"},
    {R_X86_64_PC8, "R_X86_64_PC8"},
    {R_X86_64_DTPMOD64, "R_X86_64_DTPMOD64"},
    {R_X86_64_DTPOFF64, "R_X86_64_DTPOFF64"},
    {R_X86_64_TPOFF64, "R_X86_64_TPOFF64"},
    {R_X86_64_TLSGD, "R_X86_64_TLSGD"},
    {R_X86_64_TLSLD, "R_X86_64_TLSLD"},
    {R_X86_64_DTPOFF32, "R_X86_64_DTPOFF32"},
    {R_X86_64_GOTTPOFF, "R_X86_64_GOTTPOFF"},
    {R_X86_64_TPOFF32, "R_X86_64_TPOFF32"},
    {R_X86_64_PC64, "R_X86_64_PC64"},
    {R_X86_64_GOTOFF64, "R_X86_64_GOTOFF64"},
    {R_X86_64_GOTPC32, "R_X86_64_GOTPC32"},
    {R_X86_64_GOT64, "R_X86_64_GOT64"},
    {R_X86_64_GOTPCREL64, "R_X86_64_GOTPCREL64"},
    {R_X86_64_GOTPC64, "R_X86_64_GOTPC64"},
    {R_X86_64_GOTPLT64, "R_X86_64_GOTPLT64"},
    {R_X86_64_PLTOFF64, "R_X86_64_PLTOFF64"},
    {R_X86_64_SIZE32, "R_X86_64_SIZE32"},
    {R_X86_64_SIZE64, "R_X86_64_SIZE64"},
    {R_X86_64_GOTPC32_TLSDESC, "R_X86_64_GOTPC32_TLSDESC"},
    {R_X86_64_TLSDESC_CALL, "R_X86_64_TLSDESC_CALL"},
    {R_X86_64_TLSDESC, "R_X86_64_TLSDESC"},
    {R_X86_64_IRELATIVE, "R_X86_64_IRELATIVE"},
    {R_X86_64_RELATIVE64, "R_X86_64_RELATIVE64"},
    {R_X86_64_GOTPCRELX, "R_X86_64_GOTPCRELX"},
    {R_X86_64_REX_GOTPCRELX, "R_X86_64_REX_GOTPCRELX"},
}};

std::string_view x86_64_relocation_name(std::uint32_t type) {
  return name_in(kX86_64Relocations, type);
}

// Whether the 32-bit field at the site is the displacement of a call, jmp or jcc.
bool x86_64_is_branch(const Site& site) {
  if (!site.executable || site.offset == 0 || site.offset > site.section.size()) return false;
  const auto opcode = static_cast<std::uint8_t>(site.section[site.offset - 1]);
  if (opcode == 0xe8 || opcode == 0xe9) return true;  // call rel32, jmp rel32
  if (site.offset < 2) return false;
  const auto escape = static_cast<std::uint8_t>(site.section[site.offset - 2]);
  return escape == 0x0f && opcode >= 0x80 && opcode <= 0x8f;  // jcc rel32
}

std::expected<RelocKind, Refusal> x86_64_classify(std::uint32_t type, const Site& site) {
  switch (type) {
    case R_X86_64_NONE:
      return RelocKind{0, Need::nothing};
    case R_X86_64_64:
    case R_X86_64_PC64:
    case R_X86_64_GOTOFF64:
    case R_X86_64_GOTPC64:
    case R_X86_64_SIZE64:
      return RelocKind{8, Need::nothing};
    case R_X86_64_GOT64:
    case R_X86_64_GOTPLT64:
    case R_X86_64_GOTPCREL64:
      return RelocKind{8, Need::got_slot};
    case R_X86_64_PLTOFF64:
      return RelocKind{8, Need::stub_if_external};
    case R_X86_64_32:
    case R_X86_64_32S:
    case R_X86_64_GOTPC32:
    case R_X86_64_SIZE32:
      return RelocKind{4, Need::nothing};
    case R_X86_64_PLT32:
      return RelocKind{4, Need::stub_if_external};
    case R_X86_64_PC32:
      return RelocKind{4, x86_64_is_branch(site) ? Need::stub_if_external : Need::nothing};
    case R_X86_64_GOT32:
    case R_X86_64_GOTPCREL:
    case R_X86_64_GOTPCRELX:
    case R_X86_64_REX_GOTPCRELX:
      return RelocKind{4, Need::got_slot};
    case R_X86_64_16:
    case R_X86_64_PC16:
      return RelocKind{2, Need::nothing};
    case R_X86_64_8:
    case R_X86_64_PC8:
      return RelocKind{1, Need::nothing};
    case R_X86_64_DTPMOD64:
    case R_X86_64_DTPOFF64:
    case R_X86_64_TPOFF64:
    case R_X86_64_TLSGD:
    case R_X86_64_TLSLD:
    case R_X86_64_DTPOFF32:
    case R_X86_64_GOTTPOFF:
    case R_X86_64_TPOFF32:
    case R_X86_64_GOTPC32_TLSDESC:
    case R_X86_64_TLSDESC_CALL:
    case R_X86_64_TLSDESC:
      return std::unexpected(Refusal::thread_local_storage);
    default:
      return std::unexpected(Refusal::unsupported);
  }
}

Result<void> x86_64_apply(const Fixup& f) {
  switch (f.type) {
    case R_X86_64_NONE: return {};
    case R_X86_64_64: return put64(f.where, f.S + f.A);
    case R_X86_64_PC64: return put64(f.where, f.S + f.A - f.P);
    case R_X86_64_32: return put_unsigned32(f.where, f.S + f.A);
    case R_X86_64_32S: return put_signed32(f.where, f.S + f.A);
    case R_X86_64_PC32:
    case R_X86_64_PLT32: return put_signed32(f.where, f.S + f.A - f.P);
    case R_X86_64_16: return put_either<std::uint16_t>(f.where, f.S + f.A);
    case R_X86_64_PC16: return put_signed<std::uint16_t>(f.where, f.S + f.A - f.P);
    case R_X86_64_8: return put_either<std::uint8_t>(f.where, f.S + f.A);
    case R_X86_64_PC8: return put_signed<std::uint8_t>(f.where, f.S + f.A - f.P);
    case R_X86_64_GOTPCREL:
    case R_X86_64_GOTPCRELX:
    case R_X86_64_REX_GOTPCRELX: return put_signed32(f.where, f.G + f.A - f.P);
    case R_X86_64_GOTPCREL64: return put64(f.where, f.G + f.A - f.P);
    case R_X86_64_GOT32: return put_signed32(f.where, f.G - f.GOT + f.A);
    case R_X86_64_GOT64:
    case R_X86_64_GOTPLT64: return put64(f.where, f.G - f.GOT + f.A);
    case R_X86_64_GOTOFF64:
    case R_X86_64_PLTOFF64: return put64(f.where, f.S + f.A - f.GOT);
    case R_X86_64_GOTPC32: return put_signed32(f.where, f.GOT + f.A - f.P);
    case R_X86_64_GOTPC64: return put64(f.where, f.GOT + f.A - f.P);
    case R_X86_64_SIZE32: return put_unsigned32(f.where, f.Z + f.A);
    case R_X86_64_SIZE64: return put64(f.where, f.Z + f.A);
    default: return fail("relocation type {} cannot be applied", f.type);
  }
}

bool x86_64_needs_low_image(std::uint32_t type) {
  return type == R_X86_64_32 || type == R_X86_64_32S;
}

std::uint64_t x86_64_reach(std::uint32_t type) {
  return type == R_X86_64_PC32 ? std::uint64_t{1} << 31 : 0;
}

// jmp *slot(%rip), then int3 padding.
void x86_64_write_stub(std::byte* at, std::uint64_t stub_address, std::uint64_t slot_address) {
  constexpr std::size_t kJumpBytes = 6;
  std::memset(at, 0xcc, kStubAlign);
  at[0] = std::byte{0xff};
  at[1] = std::byte{0x25};
  store_to(at + 2, static_cast<std::uint32_t>(slot_address - (stub_address + kJumpBytes)));
}

constexpr Arch kHostArch{
    .machine = EM_X86_64,
    .large_common = 0xff02,  // SHN_X86_64_LCOMMON in the x86-64 psABI
    .stub_bytes = kStubAlign,
    .slot_holds_addend = false,
    .classify = x86_64_classify,
    .relocation_name = x86_64_relocation_name,
    .needs_low_image = x86_64_needs_low_image,
    .reach = x86_64_reach,
    .apply = x86_64_apply,
    .write_stub = x86_64_write_stub,
};
#define RIG_ELF_HOST_ARCH_KNOWN 1

#elif defined(__aarch64__)

constexpr std::array<NamedType, 52> kAarch64Relocations{{
    {R_AARCH64_NONE, "R_AARCH64_NONE"},
    {256, "R_AARCH64_NONE"},
    {R_AARCH64_ABS64, "R_AARCH64_ABS64"},
    {R_AARCH64_ABS32, "R_AARCH64_ABS32"},
    {R_AARCH64_ABS16, "R_AARCH64_ABS16"},
    {R_AARCH64_PREL64, "R_AARCH64_PREL64"},
    {R_AARCH64_PREL32, "R_AARCH64_PREL32"},
    {R_AARCH64_PREL16, "R_AARCH64_PREL16"},
    {R_AARCH64_MOVW_UABS_G0, "R_AARCH64_MOVW_UABS_G0"},
    {R_AARCH64_MOVW_UABS_G0_NC, "R_AARCH64_MOVW_UABS_G0_NC"},
    {R_AARCH64_MOVW_UABS_G1, "R_AARCH64_MOVW_UABS_G1"},
    {R_AARCH64_MOVW_UABS_G1_NC, "R_AARCH64_MOVW_UABS_G1_NC"},
    {R_AARCH64_MOVW_UABS_G2, "R_AARCH64_MOVW_UABS_G2"},
    {R_AARCH64_MOVW_UABS_G2_NC, "R_AARCH64_MOVW_UABS_G2_NC"},
    {R_AARCH64_MOVW_UABS_G3, "R_AARCH64_MOVW_UABS_G3"},
    {R_AARCH64_MOVW_SABS_G0, "R_AARCH64_MOVW_SABS_G0"},
    {R_AARCH64_MOVW_SABS_G1, "R_AARCH64_MOVW_SABS_G1"},
    {R_AARCH64_MOVW_SABS_G2, "R_AARCH64_MOVW_SABS_G2"},
    {R_AARCH64_LD_PREL_LO19, "R_AARCH64_LD_PREL_LO19"},
    {R_AARCH64_ADR_PREL_LO21, "R_AARCH64_ADR_PREL_LO21"},
    {R_AARCH64_ADR_PREL_PG_HI21, "R_AARCH64_ADR_PREL_PG_HI21"},
    {R_AARCH64_ADR_PREL_PG_HI21_NC, "R_AARCH64_ADR_PREL_PG_HI21_NC"},
    {R_AARCH64_ADD_ABS_LO12_NC, "R_AARCH64_ADD_ABS_LO12_NC"},
    {R_AARCH64_LDST8_ABS_LO12_NC, "R_AARCH64_LDST8_ABS_LO12_NC"},
    {R_AARCH64_TSTBR14, "R_AARCH64_TSTBR14"},
    {R_AARCH64_CONDBR19, "R_AARCH64_CONDBR19"},
    {R_AARCH64_JUMP26, "R_AARCH64_JUMP26"},
    {R_AARCH64_CALL26, "R_AARCH64_CALL26"},
    {R_AARCH64_LDST16_ABS_LO12_NC, "R_AARCH64_LDST16_ABS_LO12_NC"},
    {R_AARCH64_LDST32_ABS_LO12_NC, "R_AARCH64_LDST32_ABS_LO12_NC"},
    {R_AARCH64_LDST64_ABS_LO12_NC, "R_AARCH64_LDST64_ABS_LO12_NC"},
    {R_AARCH64_LDST128_ABS_LO12_NC, "R_AARCH64_LDST128_ABS_LO12_NC"},
    {R_AARCH64_MOVW_PREL_G0, "R_AARCH64_MOVW_PREL_G0"},
    {R_AARCH64_MOVW_PREL_G1, "R_AARCH64_MOVW_PREL_G1"},
    {R_AARCH64_GOTREL64, "R_AARCH64_GOTREL64"},
    {R_AARCH64_GOTREL32, "R_AARCH64_GOTREL32"},
    {R_AARCH64_GOT_LD_PREL19, "R_AARCH64_GOT_LD_PREL19"},
    {R_AARCH64_LD64_GOTOFF_LO15, "R_AARCH64_LD64_GOTOFF_LO15"},
    {R_AARCH64_ADR_GOT_PAGE, "R_AARCH64_ADR_GOT_PAGE"},
    {R_AARCH64_LD64_GOT_LO12_NC, "R_AARCH64_LD64_GOT_LO12_NC"},
    {R_AARCH64_LD64_GOTPAGE_LO15, "R_AARCH64_LD64_GOTPAGE_LO15"},
    {R_AARCH64_TLSGD_ADR_PAGE21, "R_AARCH64_TLSGD_ADR_PAGE21"},
    {R_AARCH64_TLSIE_ADR_GOTTPREL_PAGE21, "R_AARCH64_TLSIE_ADR_GOTTPREL_PAGE21"},
    {R_AARCH64_TLSIE_LD64_GOTTPREL_LO12_NC, "R_AARCH64_TLSIE_LD64_GOTTPREL_LO12_NC"},
    {R_AARCH64_TLSLE_ADD_TPREL_HI12, "R_AARCH64_TLSLE_ADD_TPREL_HI12"},
    {R_AARCH64_TLSLE_ADD_TPREL_LO12_NC, "R_AARCH64_TLSLE_ADD_TPREL_LO12_NC"},
    {R_AARCH64_TLSDESC_ADR_PAGE21, "R_AARCH64_TLSDESC_ADR_PAGE21"},
    {R_AARCH64_TLSDESC_CALL, "R_AARCH64_TLSDESC_CALL"},
    {R_AARCH64_COPY, "R_AARCH64_COPY"},
    {R_AARCH64_GLOB_DAT, "R_AARCH64_GLOB_DAT"},
    {R_AARCH64_JUMP_SLOT, "R_AARCH64_JUMP_SLOT"},
    {R_AARCH64_RELATIVE, "R_AARCH64_RELATIVE"},
}};

std::string_view aarch64_relocation_name(std::uint32_t type) {
  return name_in(kAarch64Relocations, type);
}

std::expected<RelocKind, Refusal> aarch64_classify(std::uint32_t type, const Site&) {
  switch (type) {
    case R_AARCH64_NONE:
    case 256:  // R_AARCH64_NONE as the LP64 ABI numbers it
      return RelocKind{0, Need::nothing};
    case R_AARCH64_ABS64:
    case R_AARCH64_PREL64:
      return RelocKind{8, Need::nothing};
    case R_AARCH64_ABS32:
    case R_AARCH64_PREL32:
    case R_AARCH64_MOVW_UABS_G0:
    case R_AARCH64_MOVW_UABS_G0_NC:
    case R_AARCH64_MOVW_UABS_G1:
    case R_AARCH64_MOVW_UABS_G1_NC:
    case R_AARCH64_MOVW_UABS_G2:
    case R_AARCH64_MOVW_UABS_G2_NC:
    case R_AARCH64_MOVW_UABS_G3:
    case R_AARCH64_LD_PREL_LO19:
    case R_AARCH64_ADR_PREL_LO21:
    case R_AARCH64_ADR_PREL_PG_HI21:
    case R_AARCH64_ADR_PREL_PG_HI21_NC:
    case R_AARCH64_ADD_ABS_LO12_NC:
    case R_AARCH64_LDST8_ABS_LO12_NC:
    case R_AARCH64_LDST16_ABS_LO12_NC:
    case R_AARCH64_LDST32_ABS_LO12_NC:
    case R_AARCH64_LDST64_ABS_LO12_NC:
    case R_AARCH64_LDST128_ABS_LO12_NC:
    case R_AARCH64_TSTBR14:
    case R_AARCH64_CONDBR19:
      return RelocKind{4, Need::nothing};
    case R_AARCH64_ABS16:
    case R_AARCH64_PREL16:
      return RelocKind{2, Need::nothing};
    case R_AARCH64_CALL26:
    case R_AARCH64_JUMP26:
      return RelocKind{4, Need::stub_if_external};
    case R_AARCH64_ADR_GOT_PAGE:
    case R_AARCH64_LD64_GOT_LO12_NC:
    case R_AARCH64_GOT_LD_PREL19:
      return RelocKind{4, Need::got_slot};
    default:
      if ((type >= R_AARCH64_TLSGD_ADR_PREL21 && type <= R_AARCH64_TLSLD_LDST128_DTPREL_LO12_NC) ||
          (type >= R_AARCH64_TLS_DTPMOD && type <= R_AARCH64_TLSDESC)) {
        return std::unexpected(Refusal::thread_local_storage);
      }
      return std::unexpected(Refusal::unsupported);
  }
}

std::uint64_t aarch64_page(std::uint64_t address) { return address & ~std::uint64_t{0xfff}; }

// The immediate fields of ADR/ADRP: immlo in bits 29-30, immhi in bits 5-23.
std::uint32_t aarch64_adr_immediate(std::uint64_t imm21) {
  return static_cast<std::uint32_t>(((imm21 & 0x3) << 29) | (((imm21 >> 2) & 0x7ffff) << 5));
}
constexpr std::uint32_t kAdrMask = 0x60ffffe0;

void aarch64_patch(std::byte* at, std::uint32_t mask, std::uint32_t bits) {
  const auto instruction = load_from<std::uint32_t>(at);
  store_to(at, (instruction & ~mask) | (bits & mask));
}

// A signed, 4-byte aligned PC-relative displacement in a field of `bits` bits (counting
// words) at bit `shift`.
Result<void> aarch64_branch(std::byte* at, std::uint64_t displacement, int bits, int shift) {
  const auto as_signed = static_cast<std::int64_t>(displacement);
  const std::int64_t limit = std::int64_t{1} << (bits + 1);
  if ((displacement & 3) != 0) return fail("target 0x{:x} is not 4-byte aligned", displacement);
  if (as_signed < -limit || as_signed >= limit) {
    return out_of_range(displacement, fmt::format("a {}-bit branch displacement", bits + 2));
  }
  const std::uint32_t field_mask = (std::uint32_t{1} << bits) - 1;
  const auto words = static_cast<std::uint32_t>(displacement >> 2) & field_mask;
  aarch64_patch(at, field_mask << shift, words << shift);
  return {};
}

// An ADRP: the page distance from the place to `target`, within 4 GiB unless unchecked.
Result<void> aarch64_adrp(std::byte* at, std::uint64_t target, std::uint64_t place, bool checked) {
  const std::uint64_t distance = aarch64_page(target) - aarch64_page(place);
  const auto as_signed = static_cast<std::int64_t>(distance);
  const std::int64_t limit = std::int64_t{1} << 32;
  if (checked && (as_signed < -limit || as_signed >= limit)) {
    return out_of_range(distance, "ADRP's 4 GiB page range");
  }
  aarch64_patch(at, kAdrMask, aarch64_adr_immediate(distance >> 12));
  return {};
}

// The low 12 bits of `value`, scaled by the access size 2^scale, into imm12 (bits 10-21).
Result<void> aarch64_low12(std::byte* at, std::uint64_t value, int scale) {
  const std::uint64_t low = value & 0xfff;
  if ((low & ((std::uint64_t{1} << scale) - 1)) != 0) {
    return fail("address 0x{:x} is not aligned for a {}-byte access", value, 1 << scale);
  }
  aarch64_patch(at, 0x3ffc00, static_cast<std::uint32_t>((low >> scale) << 10));
  return {};
}

// MOVZ/MOVK of the 16 bits of `value` at 16 * `group`, checking that nothing lies above.
Result<void> aarch64_movw(std::byte* at, std::uint64_t value, int group, bool checked) {
  const int top = 16 * (group + 1);
  if (checked && top < 64 && (value >> top) != 0) {
    return out_of_range(value, fmt::format("{} bits", top));
  }
  const auto imm16 = static_cast<std::uint32_t>((value >> (16 * group)) & 0xffff);
  aarch64_patch(at, 0x1fffe0, imm16 << 5);
  return {};
}

Result<void> aarch64_apply(const Fixup& f) {
  const std::uint64_t absolute = f.S + f.A;
  const std::uint64_t relative = f.S + f.A - f.P;
  switch (f.type) {
    case R_AARCH64_NONE:
    case 256: return {};
    case R_AARCH64_ABS64: return put64(f.where, absolute);
    case R_AARCH64_ABS32: return put_either<std::uint32_t>(f.where, absolute);
    case R_AARCH64_ABS16: return put_either<std::uint16_t>(f.where, absolute);
    case R_AARCH64_PREL64: return put64(f.where, relative);
    case R_AARCH64_PREL32: return put_either<std::uint32_t>(f.where, relative);
    case R_AARCH64_PREL16: return put_either<std::uint16_t>(f.where, relative);
    case R_AARCH64_CALL26:
    case R_AARCH64_JUMP26: return aarch64_branch(f.where, relative, 26, 0);
    case R_AARCH64_CONDBR19:
    case R_AARCH64_LD_PREL_LO19: return aarch64_branch(f.where, relative, 19, 5);
    case R_AARCH64_TSTBR14: return aarch64_branch(f.where, relative, 14, 5);
    case R_AARCH64_GOT_LD_PREL19: return aarch64_branch(f.where, f.G - f.P, 19, 5);
    case R_AARCH64_ADR_PREL_LO21: {
      const auto as_signed = static_cast<std::int64_t>(relative);
      if (as_signed < -(std::int64_t{1} << 20) || as_signed >= (std::int64_t{1} << 20)) {
        return out_of_range(relative, "ADR's 1 MiB range");
      }
      aarch64_patch(f.where, kAdrMask, aarch64_adr_immediate(relative));
      return {};
    }
    case R_AARCH64_ADR_PREL_PG_HI21: return aarch64_adrp(f.where, absolute, f.P, true);
    case R_AARCH64_ADR_PREL_PG_HI21_NC: return aarch64_adrp(f.where, absolute, f.P, false);
    case R_AARCH64_ADR_GOT_PAGE: return aarch64_adrp(f.where, f.G, f.P, true);
    case R_AARCH64_ADD_ABS_LO12_NC:
    case R_AARCH64_LDST8_ABS_LO12_NC: return aarch64_low12(f.where, absolute, 0);
    case R_AARCH64_LDST16_ABS_LO12_NC: return aarch64_low12(f.where, absolute, 1);
    case R_AARCH64_LDST32_ABS_LO12_NC: return aarch64_low12(f.where, absolute, 2);
    case R_AARCH64_LDST64_ABS_LO12_NC: return aarch64_low12(f.where, absolute, 3);
    case R_AARCH64_LDST128_ABS_LO12_NC: return aarch64_low12(f.where, absolute, 4);
    case R_AARCH64_LD64_GOT_LO12_NC: return aarch64_low12(f.where, f.G, 3);
    case R_AARCH64_MOVW_UABS_G0: return aarch64_movw(f.where, absolute, 0, true);
    case R_AARCH64_MOVW_UABS_G0_NC: return aarch64_movw(f.where, absolute, 0, false);
    case R_AARCH64_MOVW_UABS_G1: return aarch64_movw(f.where, absolute, 1, true);
    case R_AARCH64_MOVW_UABS_G1_NC: return aarch64_movw(f.where, absolute, 1, false);
    case R_AARCH64_MOVW_UABS_G2: return aarch64_movw(f.where, absolute, 2, true);
    case R_AARCH64_MOVW_UABS_G2_NC: return aarch64_movw(f.where, absolute, 2, false);
    case R_AARCH64_MOVW_UABS_G3: return aarch64_movw(f.where, absolute, 3, false);
    default: return fail("relocation type {} cannot be applied", f.type);
  }
}

bool aarch64_needs_low_image(std::uint32_t) { return false; }

std::uint64_t aarch64_reach(std::uint32_t type) {
  switch (type) {
    case R_AARCH64_ADR_PREL_PG_HI21: return std::uint64_t{1} << 32;
    case R_AARCH64_PREL32: return std::uint64_t{1} << 31;
    default: return 0;
  }
}

// adrp x16, slot; ldr x16, [x16, :lo12:slot]; br x16; brk #0.
void aarch64_write_stub(std::byte* at, std::uint64_t stub_address, std::uint64_t slot_address) {
  const std::uint64_t pages = aarch64_page(slot_address) - aarch64_page(stub_address);
  const std::uint32_t adrp = 0x90000010 | aarch64_adr_immediate(pages >> 12);
  const auto slot_words = static_cast<std::uint32_t>((slot_address & 0xfff) >> 3);
  const std::uint32_t ldr = 0xf9400210 | (slot_words << 10);
  const std::uint32_t br = 0xd61f0200;
  const std::uint32_t brk = 0xd4200000;
  store_to(at, adrp);
  store_to(at + 4, ldr);
  store_to(at + 8, br);
  store_to(at + 12, brk);
}

constexpr Arch kHostArch{
    .machine = EM_AARCH64,
    .large_common = SHN_UNDEF,
    .stub_bytes = kStubAlign,
    .slot_holds_addend = true,
    .classify = aarch64_classify,
    .relocation_name = aarch64_relocation_name,
    .needs_low_image = aarch64_needs_low_image,
    .reach = aarch64_reach,
    .apply = aarch64_apply,
    .write_stub = aarch64_write_stub,
};
#define RIG_ELF_HOST_ARCH_KNOWN 1

#endif

#if defined(__x86_64__)
constexpr std::string_view kHostName = "x86_64";
#elif defined(__aarch64__)
constexpr std::string_view kHostName = "aarch64";
#elif defined(__riscv)
constexpr std::string_view kHostName = "riscv";
#else
constexpr std::string_view kHostName = "this architecture";
#endif

// ---------------------------------------------------------------------------------------
// The object file, its headers, names and symbols validated.

struct Object {
  std::span<const std::byte> bytes;
  Elf64_Ehdr header{};
  std::vector<Elf64_Shdr> sections;
  std::vector<std::string_view> section_names;
  std::uint32_t symtab = 0;  // SHN_UNDEF when the object has none
  std::vector<Elf64_Sym> symbols;
  std::vector<std::string_view> symbol_names;
  std::vector<std::uint32_t> symbol_sections;  // st_shndx, extended indices resolved

  // The file's bytes of a section; empty for SHT_NOBITS. Bounds were checked by parse().
  std::span<const std::byte> contents(std::uint32_t index) const {
    const Elf64_Shdr& section = sections[index];
    if (section.sh_type == SHT_NOBITS || section.sh_type == SHT_NULL) return {};
    return bytes.subspan(section.sh_offset, section.sh_size);
  }

  // How errors name a section: its name, or its index.
  std::string describe(std::uint32_t index) const {
    if (index < section_names.size() && !section_names[index].empty()) {
      return std::string(section_names[index]);
    }
    return fmt::format("section {}", index);
  }

  // How errors name a symbol: its name, its section's name, or its index.
  std::string describe_symbol(std::uint32_t index) const {
    if (!symbol_names[index].empty()) return std::string(symbol_names[index]);
    if (ELF64_ST_TYPE(symbols[index].st_info) == STT_SECTION &&
        symbol_sections[index] < sections.size()) {
      return describe(symbol_sections[index]);
    }
    return fmt::format("symbol {}", index);
  }
};

Result<void> check_header(const Elf64_Ehdr& header) {
  const auto elf_class = header.e_ident[EI_CLASS];
  if (elf_class == ELFCLASS32) return fail("32-bit ELF is not supported");
  if (elf_class != ELFCLASS64) return fail("unknown ELF class {}", elf_class);
  const auto encoding = header.e_ident[EI_DATA];
  if (encoding == ELFDATA2MSB) return fail("big-endian ELF is not supported");
  if (encoding != ELFDATA2LSB) return fail("unknown ELF data encoding {}", encoding);
  if (header.e_ident[EI_VERSION] != EV_CURRENT || header.e_version != EV_CURRENT) {
    return fail("unknown ELF version {}", header.e_version);
  }
#if defined(RIG_ELF_HOST_ARCH_KNOWN)
  if (header.e_machine != kHostArch.machine) {
    return fail("ELF for {}, this machine is {}", machine_name(header.e_machine), kHostName);
  }
#else
  return fail("ELF loading is not supported on {}", kHostName);
#endif
  if (header.e_type != ET_REL) {
    return fail("not a relocatable object ({})", file_type_name(header.e_type));
  }
  return {};
}

Result<void> read_section_headers(Object& object) {
  const Elf64_Ehdr& header = object.header;
  const std::uint64_t file_size = object.bytes.size();
  if (header.e_shoff == 0) return fail("the object has no section headers");
  if (header.e_shentsize != sizeof(Elf64_Shdr)) {
    return fail("section header size {} is not {}", header.e_shentsize, sizeof(Elf64_Shdr));
  }
  const auto first = read_at<Elf64_Shdr>(object.bytes, header.e_shoff);
  if (!first) return fail("truncated: the section header table runs past the end of the file");

  // Extended numbering keeps large counts and indices in section 0.
  const std::uint64_t count = header.e_shnum != 0 ? header.e_shnum : first->sh_size;
  if (count == 0) return fail("the object has no sections");
  if (count > kMaxSections) return fail("too many sections ({})", count);
  if (!fits(header.e_shoff, count * sizeof(Elf64_Shdr), file_size)) {
    return fail("truncated: the section header table runs past the end of the file");
  }
  object.sections.resize(count);
  std::memcpy(object.sections.data(), object.bytes.data() + header.e_shoff,
              count * sizeof(Elf64_Shdr));

  for (std::uint64_t i = 1; i < count; ++i) {
    const Elf64_Shdr& section = object.sections[i];
    if (section.sh_type == SHT_NOBITS || section.sh_type == SHT_NULL) continue;
    if (!fits(section.sh_offset, section.sh_size, file_size)) {
      return fail("truncated: section {} runs past the end of the file", i);
    }
  }

  const std::uint32_t names = header.e_shstrndx == SHN_XINDEX ? object.sections[0].sh_link
                                                               : header.e_shstrndx;
  object.section_names.assign(count, std::string_view{});
  if (names == SHN_UNDEF) return {};
  if (names >= count) return fail("section name table index {} is out of range", names);
  if (object.sections[names].sh_type != SHT_STRTAB) {
    return fail("section name table (section {}) is not a string table", names);
  }
  const auto table = object.contents(names);
  for (std::uint64_t i = 1; i < count; ++i) {
    const auto name = string_at(table, object.sections[i].sh_name);
    if (!name) return fail("section {}: its name lies outside the section name table", i);
    object.section_names[i] = *name;
  }
  return {};
}

Result<void> read_symbols(Object& object) {
  const auto count = static_cast<std::uint32_t>(object.sections.size());
  for (std::uint32_t i = 1; i < count; ++i) {
    if (object.sections[i].sh_type != SHT_SYMTAB) continue;
    if (object.symtab != SHN_UNDEF) return fail("the object has more than one symbol table");
    object.symtab = i;
  }
  if (object.symtab == SHN_UNDEF) return {};

  const Elf64_Shdr& symtab = object.sections[object.symtab];
  if (symtab.sh_entsize != sizeof(Elf64_Sym)) {
    return fail("symbol table entry size {} is not {}", symtab.sh_entsize, sizeof(Elf64_Sym));
  }
  if (symtab.sh_size % sizeof(Elf64_Sym) != 0) {
    return fail("symbol table size {} is not a multiple of {}", symtab.sh_size, sizeof(Elf64_Sym));
  }
  if (symtab.sh_link == SHN_UNDEF || symtab.sh_link >= count ||
      object.sections[symtab.sh_link].sh_type != SHT_STRTAB) {
    return fail("symbol table's string table (section {}) is not a string table", symtab.sh_link);
  }
  const auto strings = object.contents(symtab.sh_link);
  const std::size_t symbol_count = symtab.sh_size / sizeof(Elf64_Sym);
  object.symbols.resize(symbol_count);
  if (symbol_count > 0) {
    std::memcpy(object.symbols.data(), object.contents(object.symtab).data(), symtab.sh_size);
  }

  std::span<const std::byte> extended_indices;
  for (std::uint32_t i = 1; i < count; ++i) {
    const Elf64_Shdr& section = object.sections[i];
    if (section.sh_type != SHT_SYMTAB_SHNDX || section.sh_link != object.symtab) continue;
    extended_indices = object.contents(i);
    if (extended_indices.size() / sizeof(Elf32_Word) < symbol_count) {
      return fail("extended section index table (section {}) is too short", i);
    }
  }

  object.symbol_names.resize(symbol_count);
  object.symbol_sections.resize(symbol_count);
  for (std::size_t i = 0; i < symbol_count; ++i) {
    const Elf64_Sym& symbol = object.symbols[i];
    if (symbol.st_name != 0) {
      const auto name = string_at(strings, symbol.st_name);
      if (!name) return fail("symbol {}: its name lies outside the string table", i);
      object.symbol_names[i] = *name;
    }
    std::uint32_t section = symbol.st_shndx;
    if (section == SHN_XINDEX) {
      if (extended_indices.empty()) {
        return fail("symbol {}: extended section index without an index table", i);
      }
      section = load_from<Elf32_Word>(extended_indices.data() + i * sizeof(Elf32_Word));
      if (section == SHN_UNDEF || section >= count) {
        return fail("symbol {}: section index {} is out of range", i, section);
      }
    } else if (section < SHN_LORESERVE && section >= count) {
      return fail("symbol {}: section index {} is out of range", i, section);
    }
    object.symbol_sections[i] = section;
  }
  return {};
}

// The first bytes of LLVM bitcode, raw ("BC" 0xC0DE) or in its wrapper (0x0B17C0DE, little
// endian), as clang -flto writes it (LLVM's BitCodeFormat documentation).
constexpr std::array<unsigned char, 4> kBitcodeMagic{'B', 'C', 0xC0, 0xDE};
constexpr std::array<unsigned char, 4> kBitcodeWrapperMagic{0xDE, 0xC0, 0x17, 0x0B};

// An object whose code is only link-time-optimization IR has nothing to load: gcc -flto
// without -ffat-lto-objects leaves its code in .gnu.lto_* sections and its .text, .data
// and .bss empty; clang's ELF form keeps it in .llvm.lto. Such an object has an LTO
// section and no allocated section with bytes.
Result<void> check_machine_code(const Object& object) {
  std::string_view lto;
  for (std::uint32_t i = 1; i < object.sections.size(); ++i) {
    const Elf64_Shdr& section = object.sections[i];
    if ((section.sh_flags & SHF_ALLOC) && section.sh_size != 0) return {};
    const std::string_view name = object.section_names[i];
    if (name.starts_with(".gnu.lto_")) lto = ".gnu.lto_*";
    else if (name == ".llvm.lto") lto = ".llvm.lto";
  }
  if (lto == ".gnu.lto_*") {
    return fail("the object holds only GCC LTO bytecode (sections .gnu.lto_*), no machine code: compile it "
                "without -flto, or with -ffat-lto-objects");
  }
  if (!lto.empty()) {
    return fail("the object holds only LLVM bitcode (section .llvm.lto), no machine code: compile it "
                "without -flto, or with -ffat-lto-objects");
  }
  return {};
}

Result<Object> parse(std::span<const std::byte> bytes) {
  Object object;
  object.bytes = bytes;
  constexpr std::array<unsigned char, 4> kMagic{ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3};
  auto starts_with = [&](const std::array<unsigned char, 4>& magic) {
    return bytes.size() >= magic.size() && std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
  };
  if (starts_with(kBitcodeMagic) || starts_with(kBitcodeWrapperMagic)) {
    return fail("an LLVM bitcode file (clang -flto), not an ELF object: it holds no machine code; compile it "
                "without -flto");
  }
  if (!starts_with(kMagic)) return fail("not an ELF file");
  const auto header = read_at<Elf64_Ehdr>(bytes, 0);
  if (!header) {
    // Report what the identification says before complaining of the length.
    if (bytes.size() > EI_CLASS && std::to_integer<int>(bytes[EI_CLASS]) == ELFCLASS32) {
      return fail("32-bit ELF is not supported");
    }
    return fail("truncated: the ELF header runs past the end of the file");
  }
  object.header = *header;
  if (auto checked = check_header(object.header); !checked) return std::unexpected(checked.error());
  if (auto read = read_section_headers(object); !read) return std::unexpected(read.error());
  if (auto code = check_machine_code(object); !code) return std::unexpected(code.error());
  if (auto read = read_symbols(object); !read) return std::unexpected(read.error());
  return object;
}

// ---------------------------------------------------------------------------------------
// Layout, relocation and mapping.

#if defined(RIG_ELF_HOST_ARCH_KNOWN)

enum class Segment : std::uint8_t { text, rodata, data };
constexpr std::array kSegments{Segment::text, Segment::rodata, Segment::data};

struct Placement {
  bool loaded = false;
  Segment segment = Segment::rodata;
  std::uint64_t offset = 0;  // in the image
};

// How a symbol gets its address.
struct Binding {
  enum class Kind : std::uint8_t { defined, pending, external, alias, got_base };
  Kind kind = Kind::defined;
  std::uint64_t value = 0;  // external: the address; alias: the defining symbol's index
};

struct PlannedReloc {
  std::uint32_t section;  // the section it patches
  std::uint32_t type;
  std::uint32_t symbol;
  std::uint64_t offset;  // in that section
  std::uint64_t addend;
  std::optional<std::uint32_t> slot;
  std::optional<std::uint32_t> stub;
};

struct Slot {
  std::uint32_t symbol;
  std::uint64_t addend;
};

// Addresses the image may start at, so that it reaches what it must.
struct Window {
  std::uint64_t lowest;
  std::uint64_t highest;
};

// An anonymous read-write mapping, unmapped unless released.
class Mapping {
 public:
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (base_ != nullptr) munmap(base_, size_);
  }

  // Maps `size` bytes at a start inside `window` if one is free, else in the low 2 GiB if
  // `low` (where the machine can), else anywhere.
  Result<void> map(std::size_t size, std::optional<Window> window, bool low) {
    if (window) map_inside(size, *window);
#if defined(MAP_32BIT)
    if (base_ == nullptr && low) map_with(nullptr, size, MAP_32BIT);
#else
    (void)low;
#endif
    if (base_ == nullptr) map_with(nullptr, size, 0);
    if (base_ == nullptr) return fail("cannot map {} bytes: {}", size, std::strerror(errno));
    return {};
  }

  std::byte* bytes() const { return static_cast<std::byte*>(base_); }
  std::uint64_t address() const { return reinterpret_cast<std::uintptr_t>(base_); }
  std::size_t size() const { return size_; }
  void* release() { return std::exchange(base_, nullptr); }

 private:
  void map_with(void* hint, std::size_t size, int flags) {
    void* base = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (base == MAP_FAILED) return;
    base_ = base;
    size_ = size;
  }

  // Tries starts spread over the window, its middle first.
  void map_inside(std::size_t size, Window window) {
    constexpr std::uint64_t kTries = 17;
    const std::uint64_t page = page_size();
    const std::uint64_t first = align_up(window.lowest, page);
    const std::uint64_t last = window.highest & ~(page - 1);
    if (first > last) return;
    for (std::uint64_t i = 0; i < kTries && base_ == nullptr; ++i) {
      const std::uint64_t step = (i + 1) / 2 * ((last - first) / (kTries - 1));
      const std::uint64_t middle = first + (last - first) / 2;
      const std::uint64_t start = (i % 2 == 1 ? middle - step : middle + step) & ~(page - 1);
      if (start < first || start > last) continue;
      map_with(reinterpret_cast<void*>(static_cast<std::uintptr_t>(start)), size, MAP_FIXED_NOREPLACE);
      // Kernels older than MAP_FIXED_NOREPLACE take the address as a hint only.
      if (base_ != nullptr && (address() < first || address() > last)) {
        munmap(std::exchange(base_, nullptr), size_);
      }
    }
  }

  void* base_ = nullptr;
  std::size_t size_ = 0;
};

struct Export {
  std::string_view name;
  std::uint64_t address;
  std::uint64_t size;
  bool function;
};

class Loader {
 public:
  Loader(const Object& object, const ElfImage::Resolver& resolve)
      : object_(object), resolve_(resolve) {}

  Result<void> run() {
    for (auto step : {&Loader::place_sections, &Loader::index_globals, &Loader::plan_relocations,
                      &Loader::lay_out, &Loader::map_and_copy, &Loader::fill_got_and_stubs,
                      &Loader::apply_relocations, &Loader::protect, &Loader::collect_exports}) {
      if (auto done = (this->*step)(); !done) return done;
    }
    return {};
  }

  Mapping& mapping() { return mapping_; }
  const std::vector<Export>& exports() const { return exports_; }

 private:
  Result<void> place_sections();
  Result<void> index_globals();
  Result<void> plan_relocations();
  Result<void> plan_section_relocations(std::uint32_t index);
  Result<void> bind(std::uint32_t symbol);
  std::uint32_t slot_for(std::uint32_t symbol, std::uint64_t addend);
  std::uint32_t stub_for(std::uint32_t symbol);
  Result<void> lay_out();
  Result<void> map_and_copy();
  Result<void> fill_got_and_stubs();
  Result<void> apply_relocations();
  Result<void> protect();
  Result<void> collect_exports();

  Result<std::uint64_t> address_of(std::uint32_t symbol) const;
  Result<std::uint64_t> address_of_definition(std::uint32_t symbol) const;
  std::uint64_t image_address(std::uint64_t offset) const { return mapping_.address() + offset; }
  std::string describe_reloc(const PlannedReloc& reloc) const;

  const Object& object_;
  const ElfImage::Resolver& resolve_;

  std::vector<Placement> placements_;
  std::unordered_map<std::string_view, std::uint32_t> globals_;
  std::vector<Binding> bindings_;
  std::vector<PlannedReloc> relocs_;
  std::vector<Slot> slots_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint32_t> slot_index_;
  std::vector<std::uint32_t> stubs_;  // the GOT slot each stub jumps through
  std::unordered_map<std::uint32_t, std::uint32_t> stub_index_;
  std::unordered_map<std::uint32_t, std::uint64_t> commons_;  // symbol -> image offset
  bool low_image_ = false;
  // External targets of relocations with a limited reach: the image must lie near them.
  struct Near {
    std::uint64_t lowest = std::numeric_limits<std::uint64_t>::max();
    std::uint64_t highest = 0;
    std::uint64_t reach = std::numeric_limits<std::uint64_t>::max();
  } near_;
  std::optional<Window> window() const;

  struct Range {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
  };
  std::array<Range, kSegments.size()> segments_{};
  std::uint64_t stubs_offset_ = 0;
  std::uint64_t got_offset_ = 0;
  std::uint64_t image_bytes_ = 0;

  Mapping mapping_;
  std::vector<Export> exports_;
};

bool is_constructor_section(const Elf64_Shdr& section, std::string_view name) {
  return section.sh_type == SHT_INIT_ARRAY || section.sh_type == SHT_PREINIT_ARRAY ||
         name == ".ctors" || name.starts_with(".ctors.") || name.starts_with(".init_array") ||
         name.starts_with(".preinit_array") || name == ".init";
}

bool is_destructor_section(const Elf64_Shdr& section, std::string_view name) {
  return section.sh_type == SHT_FINI_ARRAY || name == ".dtors" || name.starts_with(".dtors.") ||
         name.starts_with(".fini_array") || name == ".fini";
}

// Allocated sections of these types hold bytes the image needs; others are ignored.
bool is_loadable_type(std::uint32_t type) {
  return type == SHT_PROGBITS || type == SHT_NOBITS || type == SHT_NOTE ||
         (type >= SHT_LOPROC && type <= SHT_HIPROC);
}

Result<void> Loader::place_sections() {
  const auto count = static_cast<std::uint32_t>(object_.sections.size());
  placements_.assign(count, Placement{});
  for (std::uint32_t i = 1; i < count; ++i) {
    const Elf64_Shdr& section = object_.sections[i];
    const std::string_view name = object_.section_names[i];
    if ((section.sh_flags & SHF_ALLOC) == 0) continue;
    if (is_constructor_section(section, name)) {
      return fail("constructors are not supported (section {})", object_.describe(i));
    }
    if (is_destructor_section(section, name)) {
      return fail("destructors are not supported (section {})", object_.describe(i));
    }
    if ((section.sh_flags & SHF_TLS) != 0) {
      return fail("thread-local storage is not supported (section {})", object_.describe(i));
    }
    if (!is_loadable_type(section.sh_type)) continue;
    const bool writable = (section.sh_flags & SHF_WRITE) != 0;
    const bool executable = (section.sh_flags & SHF_EXECINSTR) != 0;
    if (writable && executable) {
      return fail("section {} is both writable and executable", object_.describe(i));
    }
    const std::uint64_t align = section.sh_addralign;
    if (align > 1 && !std::has_single_bit(align)) {
      return fail("section {}: alignment {} is not a power of two", object_.describe(i), align);
    }
    if (align > page_size()) {
      return fail("section {}: alignment {} is larger than a page", object_.describe(i), align);
    }
    if (section.sh_size > kMaxImageBytes) {
      return fail("section {} is too large ({} bytes)", object_.describe(i), section.sh_size);
    }
    placements_[i].loaded = true;
    placements_[i].segment = executable ? Segment::text : writable ? Segment::data : Segment::rodata;
  }
  return {};
}

bool is_common(std::uint32_t section) {
  return section == SHN_COMMON || (kHostArch.large_common != SHN_UNDEF && section == kHostArch.large_common);
}

bool is_global_binding(unsigned char info) {
  const auto binding = ELF64_ST_BIND(info);
  return binding == STB_GLOBAL || binding == STB_WEAK || binding == STB_GNU_UNIQUE;
}

Result<void> Loader::index_globals() {
  bindings_.assign(object_.symbols.size(), Binding{});
  for (std::uint32_t i = 0; i < object_.symbols.size(); ++i) {
    const Elf64_Sym& symbol = object_.symbols[i];
    if (object_.symbol_sections[i] == SHN_UNDEF) {
      bindings_[i].kind = i == 0 ? Binding::Kind::external : Binding::Kind::pending;
      continue;
    }
    if (is_global_binding(symbol.st_info) && !object_.symbol_names[i].empty()) {
      globals_.try_emplace(object_.symbol_names[i], i);
    }
  }
  return {};
}

Result<void> Loader::bind(std::uint32_t symbol) {
  Binding& binding = bindings_[symbol];
  if (binding.kind != Binding::Kind::pending) return {};
  const std::string_view name = object_.symbol_names[symbol];
  if (name.empty()) return fail("undefined symbol {} has no name", symbol);
  if (name == "_GLOBAL_OFFSET_TABLE_") {
    binding.kind = Binding::Kind::got_base;
    return {};
  }
  if (const auto own = globals_.find(name); own != globals_.end()) {
    binding = {Binding::Kind::alias, own->second};
    return {};
  }
  void* address = nullptr;
  if (resolve_) {
    address = resolve_(name);
  } else {
    const std::string terminated(name);
    address = dlsym(RTLD_DEFAULT, terminated.c_str());
  }
  if (address == nullptr && ELF64_ST_BIND(object_.symbols[symbol].st_info) != STB_WEAK) {
    return fail("undefined symbol {}", name);
  }
  binding = {Binding::Kind::external, reinterpret_cast<std::uintptr_t>(address)};
  return {};
}

std::uint32_t Loader::slot_for(std::uint32_t symbol, std::uint64_t addend) {
  const auto [it, added] = slot_index_.try_emplace({symbol, addend}, static_cast<std::uint32_t>(slots_.size()));
  if (added) slots_.push_back({symbol, addend});
  return it->second;
}

std::uint32_t Loader::stub_for(std::uint32_t symbol) {
  const auto [it, added] = stub_index_.try_emplace(symbol, static_cast<std::uint32_t>(stubs_.size()));
  if (added) stubs_.push_back(slot_for(symbol, 0));
  return it->second;
}

Result<void> Loader::plan_relocations() {
  const auto count = static_cast<std::uint32_t>(object_.sections.size());
  for (std::uint32_t i = 1; i < count; ++i) {
    const Elf64_Shdr& section = object_.sections[i];
    if (section.sh_type != SHT_RELA && section.sh_type != SHT_REL) continue;
    const std::uint32_t target = section.sh_info;
    if (target == SHN_UNDEF || target >= count) {
      return fail("relocation section {} applies to section {}, which does not exist",
                  object_.describe(i), target);
    }
    if (!placements_[target].loaded) continue;
    if (section.sh_type == SHT_REL) {
      return fail("REL relocations (without addends) are not supported (section {})",
                  object_.describe(i));
    }
    if (auto planned = plan_section_relocations(i); !planned) return planned;
  }
  return {};
}

Result<void> Loader::plan_section_relocations(std::uint32_t index) {
  const Elf64_Shdr& section = object_.sections[index];
  const std::uint32_t target = section.sh_info;
  const Elf64_Shdr& target_section = object_.sections[target];
  if (object_.symtab == SHN_UNDEF || section.sh_link != object_.symtab) {
    return fail("relocation section {} does not use the symbol table", object_.describe(index));
  }
  if (section.sh_entsize != sizeof(Elf64_Rela) || section.sh_size % sizeof(Elf64_Rela) != 0) {
    return fail("relocation section {} has entries of {} bytes, not {}", object_.describe(index),
                section.sh_entsize, sizeof(Elf64_Rela));
  }
  const auto entries = object_.contents(index);
  const Site site_base{object_.contents(target), 0, (target_section.sh_flags & SHF_EXECINSTR) != 0};

  for (std::size_t at = 0; at < entries.size(); at += sizeof(Elf64_Rela)) {
    const auto rela = load_from<Elf64_Rela>(entries.data() + at);
    const auto type = static_cast<std::uint32_t>(ELF64_R_TYPE(rela.r_info));
    const auto symbol = static_cast<std::uint64_t>(ELF64_R_SYM(rela.r_info));
    const auto type_name = [type] {
      const std::string_view name = kHostArch.relocation_name(type);
      return name.empty() ? fmt::format("type {}", type) : std::string(name);
    };

    Site site = site_base;
    site.offset = rela.r_offset;
    const auto kind = kHostArch.classify(type, site);
    if (!kind && kind.error() == Refusal::thread_local_storage) {
      return fail("thread-local storage is not supported (relocation {} in {})", type_name(),
                  object_.describe(target));
    }
    if (!kind) return fail("unsupported relocation {} in {}", type_name(), object_.describe(target));
    if (kind->width == 0) continue;
    if (!fits(rela.r_offset, kind->width, target_section.sh_size)) {
      return fail("relocation {} at {}+0x{:x} lies outside the section", type_name(),
                  object_.describe(target), rela.r_offset);
    }
    if (symbol >= object_.symbols.size()) {
      return fail("relocation {} at {}+0x{:x} refers to symbol {}, which does not exist", type_name(),
                  object_.describe(target), rela.r_offset, symbol);
    }
    const auto symbol_index = static_cast<std::uint32_t>(symbol);
    const auto symbol_type = ELF64_ST_TYPE(object_.symbols[symbol_index].st_info);
    if (symbol_type == STT_TLS) {
      return fail("thread-local storage is not supported (symbol {})",
                  object_.describe_symbol(symbol_index));
    }
    if (symbol_type == STT_GNU_IFUNC) {
      return fail("IFUNC symbols are not supported ({})", object_.describe_symbol(symbol_index));
    }
    if (auto bound = bind(symbol_index); !bound) return bound;

    PlannedReloc reloc{target, type, symbol_index, rela.r_offset,
                       static_cast<std::uint64_t>(rela.r_addend), std::nullopt, std::nullopt};
    if (kind->need == Need::got_slot) {
      reloc.slot = slot_for(symbol_index, kHostArch.slot_holds_addend ? reloc.addend : 0);
    } else if (kind->need == Need::stub_if_external &&
               bindings_[symbol_index].kind == Binding::Kind::external) {
      reloc.stub = stub_for(symbol_index);
    }
    low_image_ = low_image_ || kHostArch.needs_low_image(type);
    const Binding& binding = bindings_[symbol_index];
    if (const auto reach = kHostArch.reach(type);
        reach != 0 && !reloc.stub && binding.kind == Binding::Kind::external && binding.value != 0) {
      near_.lowest = std::min(near_.lowest, binding.value);
      near_.highest = std::max(near_.highest, binding.value);
      near_.reach = std::min(near_.reach, reach);
    }
    relocs_.push_back(reloc);
  }
  return {};
}

Result<void> Loader::lay_out() {
  std::uint64_t cursor = 0;
  auto place = [&](std::uint64_t size, std::uint64_t align) -> Result<std::uint64_t> {
    const std::uint64_t at = align_up(cursor, std::max<std::uint64_t>(align, 1));
    if (!fits(at, size, kMaxImageBytes)) {
      return fail("the image would be larger than {} bytes", kMaxImageBytes);
    }
    cursor = at + size;
    return at;
  };

  for (const Segment segment : kSegments) {
    Range& range = segments_[static_cast<std::size_t>(segment)];
    cursor = align_up(cursor, page_size());
    range.begin = cursor;
    for (std::uint32_t i = 1; i < placements_.size(); ++i) {
      if (!placements_[i].loaded || placements_[i].segment != segment) continue;
      const Elf64_Shdr& section = object_.sections[i];
      const auto at = place(section.sh_size, section.sh_addralign);
      if (!at) return std::unexpected(at.error());
      placements_[i].offset = *at;
    }
    if (segment == Segment::text) {
      const auto at = place(stubs_.size() * kHostArch.stub_bytes, kStubAlign);
      if (!at) return std::unexpected(at.error());
      stubs_offset_ = *at;
    } else if (segment == Segment::rodata) {
      const auto at = place(slots_.size() * kSlotBytes, kSlotBytes);
      if (!at) return std::unexpected(at.error());
      got_offset_ = *at;
    } else {
      for (std::uint32_t i = 0; i < object_.symbols.size(); ++i) {
        if (!is_common(object_.symbol_sections[i])) continue;
        const Elf64_Sym& symbol = object_.symbols[i];
        const std::uint64_t align = symbol.st_value;  // a COMMON symbol's value is its alignment
        if ((align > 1 && !std::has_single_bit(align)) || align > page_size()) {
          return fail("common symbol {}: alignment {} is not supported",
                      object_.describe_symbol(i), align);
        }
        if (symbol.st_size > kMaxImageBytes) {
          return fail("common symbol {} is too large ({} bytes)", object_.describe_symbol(i),
                      symbol.st_size);
        }
        const auto at = place(symbol.st_size, align);
        if (!at) return std::unexpected(at.error());
        commons_[i] = *at;
      }
    }
    range.end = cursor;
  }
  image_bytes_ = align_up(cursor, page_size());
  return {};
}

std::optional<Window> Loader::window() const {
  if (near_.highest == 0) return std::nullopt;
  // Every byte of the image within reach of every target, with room for addends.
  constexpr std::uint64_t kMargin = std::uint64_t{1} << 24;
  if (near_.reach < image_bytes_ + 2 * kMargin) return std::nullopt;
  const std::uint64_t span = near_.reach - image_bytes_ - kMargin;
  Window window{
      .lowest = near_.highest > near_.reach - kMargin ? near_.highest - (near_.reach - kMargin) : page_size(),
      .highest = near_.lowest + std::min(span, std::numeric_limits<std::uint64_t>::max() - near_.lowest),
  };
  if (low_image_) window.highest = std::min(window.highest, (std::uint64_t{1} << 31) - image_bytes_);
  window.lowest = std::max(window.lowest, page_size());
  if (window.lowest > window.highest) return std::nullopt;
  return window;
}

Result<void> Loader::map_and_copy() {
  if (image_bytes_ == 0) return {};
  if (auto mapped = mapping_.map(image_bytes_, window(), low_image_); !mapped) return mapped;
  for (std::uint32_t i = 1; i < placements_.size(); ++i) {
    if (!placements_[i].loaded) continue;
    const auto contents = object_.contents(i);
    if (!contents.empty()) {
      std::memcpy(mapping_.bytes() + placements_[i].offset, contents.data(), contents.size());
    }
  }
  return {};
}

Result<std::uint64_t> Loader::address_of_definition(std::uint32_t symbol) const {
  const Elf64_Sym& entry = object_.symbols[symbol];
  const std::uint32_t section = object_.symbol_sections[symbol];
  if (section == SHN_ABS) return entry.st_value;
  if (is_common(section)) {
    const auto common = commons_.find(symbol);
    if (common == commons_.end()) return fail("common symbol {} was not placed", symbol);
    return image_address(common->second);
  }
  if (section >= SHN_LORESERVE || section >= placements_.size()) {
    return fail("symbol {} has the unsupported section index 0x{:x}",
                object_.describe_symbol(symbol), section);
  }
  if (!placements_[section].loaded) {
    return fail("symbol {} is defined in {}, which is not loaded", object_.describe_symbol(symbol),
                object_.describe(section));
  }
  if (entry.st_value > object_.sections[section].sh_size) {
    return fail("symbol {} lies outside its section {}", object_.describe_symbol(symbol),
                object_.describe(section));
  }
  return image_address(placements_[section].offset + entry.st_value);
}

Result<std::uint64_t> Loader::address_of(std::uint32_t symbol) const {
  const Binding& binding = bindings_[symbol];
  switch (binding.kind) {
    case Binding::Kind::defined: return address_of_definition(symbol);
    case Binding::Kind::alias: return address_of_definition(static_cast<std::uint32_t>(binding.value));
    case Binding::Kind::external: return binding.value;
    case Binding::Kind::got_base: return image_address(got_offset_);
    case Binding::Kind::pending: break;
  }
  return fail("symbol {} was never resolved", object_.describe_symbol(symbol));
}

Result<void> Loader::fill_got_and_stubs() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    const auto address = address_of(slots_[i].symbol);
    if (!address) return std::unexpected(address.error());
    store_to(mapping_.bytes() + got_offset_ + i * kSlotBytes, *address + slots_[i].addend);
  }
  for (std::size_t i = 0; i < stubs_.size(); ++i) {
    const std::uint64_t offset = stubs_offset_ + i * kHostArch.stub_bytes;
    kHostArch.write_stub(mapping_.bytes() + offset, image_address(offset),
                         image_address(got_offset_ + stubs_[i] * kSlotBytes));
  }
  return {};
}

std::string Loader::describe_reloc(const PlannedReloc& reloc) const {
  const std::string_view name = kHostArch.relocation_name(reloc.type);
  return fmt::format("relocation {} at {}+0x{:x} against {}",
                     name.empty() ? fmt::format("type {}", reloc.type) : std::string(name),
                     object_.describe(reloc.section), reloc.offset,
                     object_.describe_symbol(reloc.symbol));
}

Result<void> Loader::apply_relocations() {
  for (const PlannedReloc& reloc : relocs_) {
    const std::uint64_t place_offset = placements_[reloc.section].offset + reloc.offset;
    const auto target = reloc.stub ? Result<std::uint64_t>(image_address(stubs_offset_ + *reloc.stub * kHostArch.stub_bytes))
                                   : address_of(reloc.symbol);
    if (!target) return fail("{}: {}", describe_reloc(reloc), target.error());
    const Elf64_Sym& symbol = object_.symbols[reloc.symbol];
    const Fixup fixup{
        .type = reloc.type,
        .where = mapping_.bytes() + place_offset,
        .S = *target,
        .A = reloc.addend,
        .P = image_address(place_offset),
        .G = reloc.slot ? image_address(got_offset_ + *reloc.slot * kSlotBytes) : 0,
        .GOT = image_address(got_offset_),
        .Z = symbol.st_size,
    };
    if (auto applied = kHostArch.apply(fixup); !applied) {
      const bool external = bindings_[reloc.symbol].kind == Binding::Kind::external;
      return fail("{}: {}{}", describe_reloc(reloc), applied.error(),
                  external ? "; the symbol is outside the image, compile with -fPIC to reach it "
                             "through the GOT"
                           : "");
    }
  }
  return {};
}

Result<void> Loader::protect() {
  if (image_bytes_ == 0) return {};
  const Range& text = segments_[static_cast<std::size_t>(Segment::text)];
  if (text.end > text.begin) {
    __builtin___clear_cache(reinterpret_cast<char*>(mapping_.bytes() + text.begin),
                            reinterpret_cast<char*>(mapping_.bytes() + text.end));
  }
  for (const Segment segment : kSegments) {
    const Range& range = segments_[static_cast<std::size_t>(segment)];
    if (range.end == range.begin) continue;
    const int protection = segment == Segment::text     ? PROT_READ | PROT_EXEC
                           : segment == Segment::rodata ? PROT_READ
                                                        : PROT_READ | PROT_WRITE;
    const std::uint64_t length = align_up(range.end, page_size()) - range.begin;
    if (mprotect(mapping_.bytes() + range.begin, length, protection) != 0) {
      return fail("cannot protect the image: {}", std::strerror(errno));
    }
  }
  return {};
}

Result<void> Loader::collect_exports() {
  for (std::uint32_t i = 1; i < object_.symbols.size(); ++i) {
    const Elf64_Sym& symbol = object_.symbols[i];
    const std::uint32_t section = object_.symbol_sections[i];
    const auto type = ELF64_ST_TYPE(symbol.st_info);
    if (!is_global_binding(symbol.st_info) || section == SHN_UNDEF || object_.symbol_names[i].empty() ||
        type == STT_SECTION || type == STT_FILE) {
      continue;
    }
    if (type == STT_TLS || type == STT_GNU_IFUNC) continue;  // no address in this image
    if (section < placements_.size() && !placements_[section].loaded) continue;
    const auto address = address_of_definition(i);
    if (!address) return std::unexpected(address.error());
    exports_.push_back({object_.symbol_names[i], *address, symbol.st_size, type == STT_FUNC});
  }
  return {};
}

#endif  // RIG_ELF_HOST_ARCH_KNOWN

}  // namespace

std::expected<std::unique_ptr<ElfImage>, std::string>
ElfImage::load(std::span<const std::byte> object, Resolver resolve) {
  const auto parsed = parse(object);
  if (!parsed) return std::unexpected(parsed.error());
#if defined(RIG_ELF_HOST_ARCH_KNOWN)
  Loader loader(*parsed, resolve);
  if (auto loaded = loader.run(); !loaded) return std::unexpected(loaded.error());

  std::unique_ptr<ElfImage> image(new ElfImage());
  for (const Export& symbol : loader.exports()) {
    const auto [it, added] = image->symbols_.try_emplace(
        std::string(symbol.name),
        Exported{reinterpret_cast<void*>(static_cast<std::uintptr_t>(symbol.address)),
                 static_cast<std::size_t>(symbol.size)});
    if (added && symbol.function) image->functions_.push_back(it->first);
  }
  image->mapped_bytes_ = loader.mapping().size();
  image->base_ = loader.mapping().release();
  return image;
#else
  (void)resolve;
  return std::unexpected(fmt::format("ELF loading is not supported on {}", kHostName));
#endif
}

ElfImage::~ElfImage() {
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
}

void* ElfImage::symbol(std::string_view name) const {
  const auto it = symbols_.find(name);
  return it == symbols_.end() ? nullptr : it->second.address;
}

std::size_t ElfImage::symbol_size(std::string_view name) const {
  const auto it = symbols_.find(name);
  return it == symbols_.end() ? 0 : it->second.size;
}

std::span<const std::string> ElfImage::functions() const { return functions_; }

std::size_t ElfImage::mapped_bytes() const { return mapped_bytes_; }

}  // namespace rig::host
