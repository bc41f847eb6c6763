// gfx9_decode.hpp — the CDNA interpreter's decoder (gfx9_decode.cpp), which its execution
// (gfx9_execute.cpp) and mnemonic() share: an instruction's encoding family, opcode, fields and
// name, and the operand codes and opcode numbers both halves read.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "gfx9.hpp"

namespace rig::sim::amd::gfx9 {

constexpr int kLanes = 64;
constexpr std::uint32_t kSgprs = 102;  // s0..s101 (GFX9); then flat_scratch, xnack_mask, vcc
constexpr std::uint32_t kMaxVgprs = 512;  // the unified VGPR/AGPR file of gfx90a and gfx942

// Operand codes of 9-bit sources and 7-bit scalar destinations (GFX9).
enum : std::uint32_t {
  FLAT_SCRATCH_LO = 102, FLAT_SCRATCH_HI = 103, XNACK_MASK_LO = 104, XNACK_MASK_HI = 105,
  VCC_LO = 106, VCC_HI = 107, M0 = 124, EXEC_LO = 126, EXEC_HI = 127,
  SRC_SHARED_BASE = 235, SRC_SHARED_LIMIT = 236, SRC_PRIVATE_BASE = 237, SRC_PRIVATE_LIMIT = 238,
  SRC_VCCZ = 251, SRC_EXECZ = 252, SRC_SCC = 253, LITERAL = 255, VGPR0 = 256,
  SOURCE_SDWA = 0xF9, SOURCE_DPP = 0xFA, SADDR_OFF = 0x7F,
};

// VOP3 numbers VOPC at op, VOP2 at 256 + op, VOP1 at 320 + op, its own from 448.
constexpr std::uint32_t kVop3Vop2 = 256, kVop3Vop1 = 320, kVop3Own = 448;
// SDWA selects: BYTE_0..BYTE_3 are 0..3, WORD_0 and WORD_1 4 and 5, DWORD 6.
constexpr std::uint32_t kSelectDword = 6;

enum class Family { SOP1, SOP2, SOPC, SOPK, SOPP, SMEM, VOP1, VOP2, VOPC, VOP3, VOP3P, DS, FLAT, MUBUF };

struct Inst {
  Family family;
  std::uint32_t op = 0;
  std::uint32_t length = 1;  // dwords, literal or DPP word included
  std::uint32_t w0 = 0, w1 = 0;
  std::optional<std::uint32_t> literal;
  bool dpp = false, sdwa = false;  // the second dword is a DPP or SDWA word
  const char* name = nullptr;
};

// FLAT's segment field: which aperture the instruction names.
enum : std::uint32_t { SEG_FLAT = 0, SEG_SCRATCH = 1, SEG_GLOBAL = 2 };
const char* segment_prefix(std::uint32_t seg);

// The VOP3P operations simulated: the packed f32 ones of gfx90a and gfx942 on register pairs,
// and on single registers the packed f16 fma and the mixed-precision fmas (f32 or f16 sources,
// an f32 result or an f16 one into the low or high half).
constexpr std::uint32_t kVop3pFma = 48, kVop3pMul = 49, kVop3pAdd = 50, kVop3pMovB32 = 51;
constexpr std::uint32_t kVop3pFmaF16 = 14, kVop3pMixF32 = 32, kVop3pMixLo = 33, kVop3pMixHi = 34;

// MUBUF loads and stores share FLAT's opcode numbers (16..31) and names.
constexpr std::uint32_t kBufferFirst = 16, kBufferLast = 31;
constexpr std::uint32_t kAddTidEnableBit = 23;  // SQ_BUF_RSRC_WORD3.ADD_TID_ENABLE (GFX9)

struct DecodeError {
  std::string why;
};
// Decodes the instruction at w (up to `available` dwords) for `target`.
std::variant<Inst, DecodeError> decode(Target target, const std::uint32_t* w, std::size_t available);

// The instruction's name as llvm-objdump prints it.
std::string display_name(const Inst& in);

}  // namespace rig::sim::amd::gfx9
