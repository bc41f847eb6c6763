// cubin.hpp — the driver's reader of the kernels nvcc builds: cubins (ELF for EM_CUDA) and the
// fatbins that carry them, with what a launch needs of each kernel (its SASS, registers,
// barriers, parameter layout in constant bank 0, shared memory, stack) and the relocations a
// driver applies to the images it copies to the GPU.
//
// Facts from the ELF files nvcc 13.0 writes (read with readelf and by parsing the committed
// kernels under tests/nv/kernels), with the attribute numbers of the EIATTR_* records as
// NVIDIA/open-gpu-kernel-modules and public cuobjdump output name them (docs/nv.md). Pure
// code: bytes in, structs out; every length and offset is checked against the image before it
// is read, and every refusal names the image and the reason.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig::nv {

inline constexpr std::uint16_t EM_CUDA = 190;          // e_machine of a cubin
inline constexpr unsigned E_FLAGS_SM_SHIFT = 8;        // SM (90 for sm_90) in e_flags 15:8
inline constexpr std::uint32_t SHT_CUDA_INFO = 0x70000000;  // .nv.info sections (SHT_LOPROC)
inline constexpr std::uint8_t STO_CUDA_ENTRY = 0x10;   // st_other of a kernel's entry symbol
inline constexpr unsigned TEXT_INFO_REGISTERS_SHIFT = 24;  // .text.<fn> sh_info 31:24 (pre-sm_90)
inline constexpr unsigned TEXT_FLAGS_BARRIERS_SHIFT = 20;  // .text.<fn> sh_flags 24:20
inline constexpr std::uint64_t TEXT_FLAGS_BARRIERS_MASK = 0x1f;

// .nv.info record formats (u8 format, u8 attribute, then a u16 value or, for SVAL, a u16 size
// and that many bytes).
namespace eifmt {
inline constexpr std::uint8_t NVAL = 1, BVAL = 2, HVAL = 3, SVAL = 4;
}
// .nv.info attributes (EIATTR_*).
namespace eiattr {
inline constexpr std::uint8_t MAX_THREADS = 0x05;        // SVAL: u32 x, y, z
inline constexpr std::uint8_t PARAM_CBANK = 0x0a;        // SVAL: u32 symbol, u16 offset, u16 size
inline constexpr std::uint8_t REQNTID = 0x10;            // SVAL: u32 x, y, z
inline constexpr std::uint8_t FRAME_SIZE = 0x11;         // SVAL: u32 symbol, u32 bytes
inline constexpr std::uint8_t MIN_STACK_SIZE = 0x12;     // SVAL: u32 symbol, u32 bytes
inline constexpr std::uint8_t KPARAM_INFO = 0x17;        // SVAL: u32 index, u16 ordinal, u16 offset, u32 flags
inline constexpr std::uint8_t CBANK_PARAM_SIZE = 0x19;   // HVAL: bytes
inline constexpr std::uint8_t MAXREG_COUNT = 0x1b;       // HVAL
inline constexpr std::uint8_t EXIT_INSTR_OFFSETS = 0x1c; // SVAL: u32 offsets in .text.<fn>
inline constexpr std::uint8_t MAX_STACK_SIZE = 0x23;     // SVAL: u32 symbol, u32 bytes
inline constexpr std::uint8_t REGCOUNT = 0x2f;           // SVAL: u32 symbol, u32 registers
inline constexpr std::uint8_t NUM_BARRIERS = 0x4c;       // BVAL/HVAL: barriers
inline constexpr unsigned KPARAM_INFO_SIZE_SHIFT = 18;   // KPARAM_INFO flags 31:18: the size in bytes
}  // namespace eiattr

// Relocation types (ELF64_R_TYPE of .rel/.rela sections of a cubin). Each writes S + A (the
// symbol's address plus the addend: RELA's, or for REL the bits already in the field) into a
// bit field of the little-endian bytes at the relocation's offset, named position_width:
namespace r_cuda {
inline constexpr std::uint32_t R_CUDA_64 = 2;            // bits 63:0 = S + A
inline constexpr std::uint32_t R_CUDA_ABS32_LO_32 = 0x38;  // bits 63:32 = (S + A) & 0xffffffff
inline constexpr std::uint32_t R_CUDA_ABS32_HI_32 = 0x39;  // bits 63:32 = (S + A) >> 32
inline constexpr std::uint32_t R_CUDA_ABS47_34 = 0x3a;   // bits 80:34 = (S + A) & (2^47 - 1)
}  // namespace r_cuda

struct Cubin_section {
  std::string name;
  std::uint32_t type = 0;
  std::uint64_t flags = 0;
  std::uint64_t offset = 0, size = 0;  // bytes in the file (none for SHT_NOBITS)
  std::uint32_t link = 0, info = 0;
};

struct Cubin_symbol {
  std::string name;
  std::uint64_t value = 0, size = 0;
  std::uint16_t section = 0;  // st_shndx
  std::uint8_t info = 0, other = 0;
};

struct Cubin_relocation {
  std::uint32_t section = 0;  // the section it patches (sh_info of its .rel/.rela section)
  std::uint32_t table = 0;    // the .rel/.rela section it is read from
  std::uint64_t offset = 0;
  std::uint32_t type = 0;
  std::uint32_t symbol = 0;
  std::int64_t addend = 0;    // RELA's; 0 for REL
  bool rela = false;
};

// A kernel parameter as KPARAM_INFO gives it.
struct Cubin_param {
  std::uint32_t ordinal = 0;
  std::uint32_t offset = 0;  // from the start of the parameters (PARAM_CBANK's offset)
  std::uint32_t size = 0;
};

struct Cubin_kernel {
  std::string name;
  std::uint32_t text_section = 0;      // index of .text.<fn>
  std::uint32_t registers = 0;         // REGCOUNT, else .text sh_info 31:24
  std::uint32_t barriers = 0;          // NUM_BARRIERS, else .text sh_flags 24:20
  std::uint32_t param_offset = 0;      // PARAM_CBANK: where the parameters start in bank 0
  std::uint32_t param_size = 0;        // PARAM_CBANK's size
  std::uint32_t cbank_param_size = 0;  // CBANK_PARAM_SIZE
  std::vector<Cubin_param> params;     // by ordinal
  std::array<std::uint32_t, 3> max_threads{};  // MAX_THREADS (0s when absent)
  std::array<std::uint32_t, 3> reqntid{};      // REQNTID (0s when absent)
  std::uint32_t frame_size = 0, min_stack_size = 0, max_stack_size = 0;
  std::vector<std::uint32_t> exit_offsets;  // EXIT_INSTR_OFFSETS
  std::uint32_t static_shared = 0;          // sh_size of .nv.shared.<fn> (0 when absent)
  // The kernel's own constant banks (.nv.constantN.<fn>): bank number and section index.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> banks;
};

struct Cubin {
  std::string name;                 // the image's name, for errors
  std::vector<std::byte> image;     // the whole file
  unsigned sm = 0;                  // from e_flags (90 for sm_90)
  std::vector<Cubin_section> sections;
  std::vector<Cubin_symbol> symbols;
  std::vector<Cubin_relocation> relocations;
  std::vector<Cubin_kernel> kernels;
  // Module-wide constant banks (.nv.constantN without a kernel's name): bank and section.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> banks;
  std::optional<std::uint32_t> global, global_init;  // .nv.global (NOBITS) and .nv.global.init

  // The bytes of section `index` in the file (empty for SHT_NOBITS or a bad index).
  std::span<const std::byte> bytes(std::uint32_t index) const;
  // The section or kernel named `name`, or nullptr.
  const Cubin_section* section(std::string_view name) const;
  std::optional<std::uint32_t> section_index(std::string_view name) const;
  const Cubin_kernel* kernel(std::string_view name) const;
};

// Reads the cubin in `bytes` (copied). Errors name `name` and the reason: not a 64-bit
// little-endian ELF, an e_machine other than EM_CUDA, a section table, section, name, symbol,
// relocation or .nv.info record that runs past the image or its section, a malformed .nv.info
// record or attribute, a relocation naming a symbol or section that does not exist.
std::expected<Cubin, std::string> read_cubin(std::span<const std::byte> bytes, std::string_view name);

// Applies every relocation that patches section `target` to `image` (a copy of that section's
// bytes the driver will place on the GPU). `section_address[i]` is where section i lies on the
// GPU (S is that plus the symbol's value). Errors name the cubin, the relocation and the
// reason: an unsupported relocation type (by its number), a field past the image, a symbol in a
// section that has no address (0), an image whose size is not the section's.
std::expected<void, std::string> relocate(const Cubin& cubin, std::uint32_t target, std::span<std::byte> image,
                                          std::span<const std::uint64_t> section_address);

// ---- Fatbins (nvcc -fatbin; the layout read from the files nvcc 13.0 writes): a 16-byte
// header (u32 magic 0xBA55ED50, u16 version, u16 header size, u64 size of the entries), then
// entries, each a header (u16 kind: 1 PTX, 2 ELF; u16 version; u32 header size; u64 payload size;
// u32 compressed size at 16; u32 SM at 28; u64 flags at 40; u64 uncompressed size at 56) and its
// payload.
namespace fatbin {
inline constexpr std::uint32_t MAGIC = 0xBA55ED50;
inline constexpr std::uint16_t KIND_PTX = 1, KIND_ELF = 2;
inline constexpr std::size_t HEADER_SIZE = 16, ENTRY_HEADER_MIN = 64;
inline constexpr std::uint64_t FLAG_COMPRESSED_ZSTD = 0x8000;  // set on nvcc 13's compressed entries
inline constexpr std::uint64_t FLAG_COMPRESSED_LZ4 = 0x2000;   // older nvcc's compression
inline constexpr std::uint64_t MAX_UNCOMPRESSED = 256ull << 20;  // rig's limit on one entry
}  // namespace fatbin

struct Fatbin_entry {
  bool ptx = false;           // PTX text, else an ELF (a cubin)
  unsigned sm = 0;            // 90 for sm_90 / compute_90
  bool was_compressed = false;
  std::vector<std::byte> payload;  // decompressed
};

// Every entry of the fatbin `bytes`. Errors name `name` and the reason: a bad magic, a header or
// entry past the end, an entry kind that is neither PTX nor ELF, an LZ4-compressed entry, a zstd
// frame whose size is not the entry's (or over 256 MiB), a payload that does not decompress.
std::expected<std::vector<Fatbin_entry>, std::string> read_fatbin(std::span<const std::byte> bytes,
                                                                  std::string_view name);

// The cubin for `sm` in the fatbin `bytes`, read. Errors: those of read_fatbin and read_cubin,
// and no ELF entry for `sm`: "no SASS for sm_90 in the fatbin (it holds sm_80, compute_90
// PTX); rig does not JIT PTX without libcuda".
std::expected<Cubin, std::string> cubin_for_sm(std::span<const std::byte> bytes, unsigned sm, std::string_view name);

}  // namespace rig::nv
