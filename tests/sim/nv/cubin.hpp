// cubin.hpp — the simulators' own reader of what nvcc writes for NVIDIA GPUs: fatbin
// containers (their PTX and ELF entries, zstd-compressed ones decompressed) and cubins (the
// CUDA ELF: its kernels, their attributes from .nv.info, module variables and relocations).
//
// Pure format code, independent of any driver: bytes in, structs out. Every length and
// offset is checked against the input before it is used; a file that does not hold what it
// claims is an error naming the file and the reason, never a crash. Sizes the input gives
// (decompressed sizes above all) are never trusted for an allocation beyond kMaxPayload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig::sim::nv::cubin {

// The largest entry payload or decompressed size the reader accepts (a bound against input
// that claims gigabytes; rig's test kernels are a few KiB).
inline constexpr std::uint64_t kMaxPayload = 64ull << 20;

// ---- Fatbins (read from nvcc 13.0's output; layout also described by public fatbin dumpers).

inline constexpr std::uint32_t kFatbinMagic = 0xBA55ED50;  // u32 at 0 of the container
inline constexpr std::size_t kFatbinHeaderSize = 16;       // u32 magic, u16 version, u16 header size, u64 size
inline constexpr std::size_t kFatbinEntryHeaderMin = 64;   // an entry's header, before its payload
inline constexpr std::uint64_t kFatbinFlagCompressed = 0x8000;  // entry flags (u64 at 40): zstd payload

enum class Entry_kind : std::uint16_t { ptx = 1, elf = 2 };  // u16 at 0 of an entry

struct Fatbin_entry {
  Entry_kind kind;
  unsigned sm = 0;            // u32 at 28: 90 for sm_90 / compute_90
  std::uint64_t flags = 0;    // u64 at 40
  bool compressed = false;    // flags & kFatbinFlagCompressed
  std::vector<std::byte> payload;  // the PTX text or ELF, decompressed
};

// The entries of the fatbin container(s) in `bytes` (nvcc may concatenate containers), in
// order. Errors name `name` and the reason: too short for a header, a bad magic, a size
// running past the input, an entry header shorter than 64 bytes, an unknown entry kind, a
// compressed payload that does not decompress to exactly the size its header declares, or a
// size over kMaxPayload.
std::expected<std::vector<Fatbin_entry>, std::string> read_fatbin(std::span<const std::byte> bytes,
                                                                  std::string_view name = "fatbin");

// ---- Cubins (CUDA ELF; facts in /work/shared/facts/nv-hopper.md "Cubin (sm_90)").

inline constexpr std::uint16_t kEmCuda = 190;            // e_machine
inline constexpr std::uint32_t kShtCudaInfo = 0x70000000;  // .nv.info sections
inline constexpr std::uint8_t kStoCudaEntry = 0x10;      // st_other of a kernel's symbol

// EIATTR attribute codes of .nv.info records.
inline constexpr std::uint8_t kAttrMaxThreads = 0x05;
inline constexpr std::uint8_t kAttrParamCbank = 0x0a;
inline constexpr std::uint8_t kAttrKparamInfo = 0x17;
inline constexpr std::uint8_t kAttrCbankParamSize = 0x19;
inline constexpr std::uint8_t kAttrRegcount = 0x2f;
// Per-kernel local memory in the module .nv.info (SVAL: u32 symbol, u32 bytes per thread).
inline constexpr std::uint8_t kAttrFrameSize = 0x11, kAttrMinStackSize = 0x12, kAttrMaxStackSize = 0x23;

// Relocation types (R_CUDA_*).
inline constexpr std::uint32_t kRelocCuda32 = 1;
inline constexpr std::uint32_t kRelocCuda64 = 2;

struct Reloc {
  std::uint64_t offset = 0;   // in the section it patches
  std::uint32_t type = 0;
  std::uint32_t symbol = 0;   // index in .symtab
  std::int64_t addend = 0;    // 0 for REL
};

struct Elf_symbol {
  std::string name;
  std::uint64_t value = 0;
  std::uint64_t size = 0;
  std::uint8_t info = 0;      // binding << 4 | type
  std::uint8_t other = 0;
  std::uint16_t section = 0;  // st_shndx
};

// One kernel parameter as KPARAM_INFO gives it.
struct Kparam {
  std::uint32_t ordinal = 0;
  std::uint32_t offset = 0;   // from the start of the parameter buffer
  std::uint32_t size = 0;
};

struct Kernel_info {
  std::string name;
  std::vector<std::byte> text;     // .text.<name>
  std::vector<Reloc> text_relocs;  // from .rel(a).text.<name>
  std::uint32_t param_offset = 0;  // in constant bank 0 (PARAM_CBANK)
  std::uint32_t param_size = 0;    // PARAM_CBANK's size, else CBANK_PARAM_SIZE
  std::vector<Kparam> params;      // by ordinal
  std::uint32_t registers = 0;     // REGCOUNT, else .text's sh_info 31:24
  std::uint32_t max_threads = 0;   // MAX_THREADS' product, 0 when absent
  std::uint32_t static_shared = 0; // sh_size of .nv.shared.<name>
  std::uint32_t local_bytes = 0;   // per thread: the largest of FRAME_SIZE, MIN/MAX_STACK_SIZE
};

// A module variable the cubin places: in `bank` at `offset` when its section is
// .nv.constant<bank>, in `.nv.global`/`.nv.global.init` (global = true) otherwise.
struct Variable {
  std::string name;
  bool global = false;
  std::uint32_t bank = 0;
  std::uint64_t offset = 0;   // st_value in its section
  std::uint64_t size = 0;
};

// A relocation in a module constant bank (.rel(a).nv.constant<bank>): the driver writes the
// address of `symbol` (+ addend) at `offset` of that bank.
struct Bank_reloc {
  std::uint32_t bank = 0;
  std::uint64_t offset = 0;
  std::uint32_t type = 0;
  std::string symbol;
  std::int64_t addend = 0;
};

struct Cubin {
  unsigned sm = 0;                     // from e_flags
  std::vector<Elf_symbol> symbols;
  std::vector<Kernel_info> kernels;    // entry functions (st_other kStoCudaEntry), in symbol order
  std::vector<Variable> variables;     // OBJECT symbols in .nv.constantN (N >= 1) and .nv.global*
  std::vector<Bank_reloc> bank_relocs;
  std::vector<std::byte> constant_data[18];  // module-wide .nv.constantN bytes (N = 1..17), by N
};

// Reads a cubin. Errors name `name` and the reason: not a 64-bit little-endian ELF, not
// EM_CUDA, a section header, name, symbol, relocation or .nv.info record outside the file or
// its section, a kernel without its .text section, a relocation naming a symbol that does
// not exist.
std::expected<Cubin, std::string> read_cubin(std::span<const std::byte> bytes, std::string_view name = "cubin");

}  // namespace rig::sim::nv::cubin
