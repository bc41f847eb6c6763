// code_object.hpp — AMDGPU code objects (HSA ELF shared objects) read into plain structs.
//
// Pure code over bytes: read() parses the ELF with LLVM's libObject, decodes the
// NT_AMDGPU_METADATA note (MessagePack) with LLVM's msgpack reader, and reads each kernel's
// 64-byte kernel descriptor (the symbol NAME.kd). place() lays the loadable segments out at
// an address and applies the dynamic relocations, giving the bytes a device's memory holds.
//
// Facts: the kernel descriptor layout, the kernel_code_properties bits and the metadata keys
// (amdhsa.kernels, .name, .symbol, .kernarg_segment_size, .args[.offset, .size, .value_kind,
// .address_space], ...) are those of LLVM's AMDGPUUsage documentation ("Code Object V3..V5
// Metadata", "Kernel Descriptor"); relocation numbers are ELF.h's R_AMDGPU_*; the e_flags
// fields are AMDGPUUsage's "AMDGPU ELF Header" (EF_AMDGPU_MACH_*, EF_AMDGPU_FEATURE_*_V4).
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig::amd {

// The 64-byte kernel descriptor that a dispatch's registers come from.
struct KernelDescriptor {
  static constexpr std::size_t kBytes = 64;
  std::uint32_t group_segment_fixed_size = 0;    // byte 0
  std::uint32_t private_segment_fixed_size = 0;  // byte 4
  std::uint32_t kernarg_size = 0;                // byte 8
  std::int64_t kernel_code_entry_byte_offset = 0;  // byte 16, from the descriptor's address
  std::uint32_t compute_pgm_rsrc3 = 0;           // byte 44
  std::uint32_t compute_pgm_rsrc1 = 0;           // byte 48
  std::uint32_t compute_pgm_rsrc2 = 0;           // byte 52
  std::uint16_t kernel_code_properties = 0;      // byte 56
  std::uint16_t kernarg_preload = 0;             // byte 58

  // kernel_code_properties bits: the user SGPRs the kernel expects, in this order.
  static constexpr std::uint16_t kPrivateSegmentBuffer = 1 << 0;  // 4 SGPRs
  static constexpr std::uint16_t kDispatchPtr = 1 << 1;           // 2
  static constexpr std::uint16_t kQueuePtr = 1 << 2;              // 2
  static constexpr std::uint16_t kKernargSegmentPtr = 1 << 3;     // 2
  static constexpr std::uint16_t kDispatchId = 1 << 4;            // 2
  static constexpr std::uint16_t kFlatScratchInit = 1 << 5;       // 2
  static constexpr std::uint16_t kPrivateSegmentSize = 1 << 6;    // 1
  static constexpr std::uint16_t kWavefrontSize32 = 1 << 10;
  static constexpr std::uint16_t kUsesDynamicStack = 1 << 11;

  bool wave32() const { return kernel_code_properties & kWavefrontSize32; }
  // gfx90a and gfx942's COMPUTE_PGM_RSRC3 (AMDGPUUsage, "compute_pgm_rsrc3 for GFX90A,
  // GFX942"): the first AccVGPR, ACCUM_OFFSET (bits 0..5) in units of 4 registers less one,
  // and TG_SPLIT (bit 16), whether a group's waves may run on different CUs. Meaningless on
  // other processors.
  std::uint32_t accum_offset() const { return ((compute_pgm_rsrc3 & 0x3f) + 1) * 4; }
  bool tg_split() const { return (compute_pgm_rsrc3 >> 16) & 1; }
  // COMPUTE_PGM_RSRC2.USER_SGPR: the user SGPRs the hardware loads (bits 1..5).
  std::uint32_t user_sgpr_count() const { return (compute_pgm_rsrc2 >> 1) & 0x1f; }

  // Decodes 64 bytes (little-endian). Error if there are fewer.
  static std::expected<KernelDescriptor, std::string> decode(std::span<const std::byte> bytes);
};

// A kernel argument as the metadata describes it.
struct KernelArgument {
  std::string name;           // .name, may be empty
  std::uint32_t offset = 0;   // .offset in the kernarg segment
  std::uint32_t size = 0;     // .size in bytes
  std::string value_kind;     // .value_kind: by_value, global_buffer, hidden_block_count_x, ...
  std::string address_space;  // .address_space for pointers: global, generic, ...; else empty
};

// A kernel: its metadata and its descriptor.
struct Kernel {
  std::string name;    // .name
  std::string symbol;  // .symbol, NAME.kd
  std::uint32_t kernarg_segment_size = 0;
  std::uint32_t kernarg_segment_align = 0;
  std::uint32_t group_segment_fixed_size = 0;
  std::uint32_t private_segment_fixed_size = 0;
  std::uint32_t wavefront_size = 0;
  std::uint32_t max_flat_workgroup_size = 0;
  std::uint32_t sgpr_count = 0, vgpr_count = 0;
  bool uses_dynamic_stack = false;
  std::vector<KernelArgument> args;
  std::uint64_t descriptor_address = 0;  // the .kd symbol's value: its offset in the image
  KernelDescriptor descriptor;
  // The address of the kernel's first instruction, from the image's start.
  std::uint64_t code_address() const {
    return descriptor_address + std::uint64_t(descriptor.kernel_code_entry_byte_offset);
  }
};

// A PT_LOAD segment.
struct Segment {
  std::uint64_t address = 0;      // p_vaddr, from the image's start
  std::uint64_t file_offset = 0;  // p_offset
  std::uint64_t file_bytes = 0;   // p_filesz
  std::uint64_t memory_bytes = 0; // p_memsz
};

// A dynamic relocation the loader applies (R_AMDGPU_RELATIVE64, R_AMDGPU_ABS64, ABS32_LO/HI).
struct Relocation {
  std::uint64_t offset = 0;  // r_offset: where, from the image's start
  std::uint32_t type = 0;
  std::uint64_t symbol_value = 0;  // the symbol's value from the image's start (0 if none)
  bool symbol_defined = true;
  std::int64_t addend = 0;
};

// R_AMDGPU_* numbers (llvm/BinaryFormat/ELFRelocs/AMDGPU.def).
constexpr std::uint32_t kRelocAbs32Lo = 1, kRelocAbs32Hi = 2, kRelocAbs64 = 3,
                        kRelocRelative64 = 13;

// The ELF header's e_flags: EF_AMDGPU_MACH (bits 0..7) names the processor; code object v4+
// keep the xnack setting in bits 8..9 and sramecc's in bits 10..11 (EF_AMDGPU_FEATURE_*_V4:
// 0 unsupported, 1 any, 2 off, 3 on).
enum class Feature : std::uint8_t { Unsupported = 0, Any = 1, Off = 2, On = 3 };
constexpr std::uint32_t kMachMask = 0xff;
constexpr unsigned kXnackShift = 8, kSrameccShift = 10;
constexpr std::uint32_t kMachGfx90a = 0x3f;    // EF_AMDGPU_MACH_AMDGCN_GFX90A
constexpr std::uint32_t kMachGfx942 = 0x4c;    // EF_AMDGPU_MACH_AMDGCN_GFX942
constexpr std::uint32_t kMachGfx1100 = 0x41;   // EF_AMDGPU_MACH_AMDGCN_GFX1100
constexpr std::uint32_t kMachGfx1201 = 0x4e;   // EF_AMDGPU_MACH_AMDGCN_GFX1201
// The processor an EF_AMDGPU_MACH value names among those above; empty for any other.
std::string_view processor_of_mach(std::uint32_t mach);

struct CodeObject {
  std::string target;  // amdhsa.target, such as "amdgcn-amd-amdhsa--gfx1100"
  std::string arch;    // the processor in it: "gfx1100" (features such as ":xnack-" dropped)
  std::uint32_t mach = 0;  // e_flags' EF_AMDGPU_MACH
  Feature xnack = Feature::Unsupported, sramecc = Feature::Unsupported;
  std::vector<std::uint32_t> version;  // amdhsa.version: [1, 2] is code object v5
  std::vector<Kernel> kernels;
  std::vector<Segment> segments;
  std::vector<Relocation> relocations;
  std::uint64_t image_bytes = 0;  // the end of the last segment: the bytes place() gives

  const Kernel* find(std::string_view name) const;
};

// Reads a code object. Error (naming what is wrong) if the bytes are not a 64-bit
// little-endian AMDGPU ELF shared object, if the ELF header's EF_AMDGPU_MACH names a
// processor (of those processor_of_mach knows) other than the metadata's target, if it has
// no AMDGPU metadata note or the note does not decode, if a kernel's descriptor symbol is missing or lies outside its section, or if
// a dynamic relocation has a type place() does not apply.
std::expected<CodeObject, std::string> read_code_object(std::span<const std::byte> elf);

// The image as it lies at device address `base`: image_bytes bytes, each segment's file
// bytes at its address (the rest zero), and the relocations applied for `base`. Error if a
// relocation names an undefined symbol or lies outside the image.
std::expected<std::string, std::string> place(const CodeObject& object, std::span<const std::byte> elf,
                                              std::uint64_t base);

// The processor of a target triple: "amdgcn-amd-amdhsa--gfx90a:xnack+" gives "gfx90a".
std::string processor_of(std::string_view target);

// What a kernel may use on a processor, as rig launches it.
struct ProcessorLimits {
  std::uint32_t wave_size = 32;          // the lanes of its waves
  std::uint32_t lds_bytes = 64 << 10;    // group-shared bytes one group may use
  std::uint32_t private_bytes = 0;       // scratch bytes one lane may use
};
// The limits of gfx90a and gfx942: wave64 (CDNA has no wave32), 64 KiB of LDS per group
// (AMDGPUUsage's processor table: 64 KiB for both; gfx950 has 160 KiB) and 131056 bytes of
// scratch per lane (COMPUTE_TMPRING_SIZE.WAVESIZE's largest wave, 8191 KiB, over 64 lanes:
// the bound LLVM's "stack frame size exceeds limit" names for wave64). Of gfx11 and gfx12
// (gfx11xx, gfx12xx): wave32 as rig launches them, 64 KiB per group and 262136 bytes per
// lane (WAVESIZE's 32767 units of 256 bytes over 32 lanes; gfx12 is given gfx11's field).
// nullopt for any other processor.
std::optional<ProcessorLimits> limits_of(std::string_view processor);

// Whether `object`'s kernels run on `processor` as rig launches them. Error naming the
// reason: a code object for another processor, or a processor limits_of does not know; or
// naming the first kernel that cannot run and why: a wave32 kernel on gfx9 or a wave64 one
// on gfx10+, group-shared (.group_segment_fixed_size) or private memory
// (.private_segment_fixed_size) past the processor's limits.
std::expected<void, std::string> check_for(const CodeObject& object, std::string_view processor);

}  // namespace rig::amd
