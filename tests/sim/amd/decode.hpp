// decode.hpp — a decoder of PM4 (compute) and SDMA packets, written apart from the driver's
// builders (amdgpu/abi/) so that the tests compare two readings of the formats. Its
// constants are its own, from the same public facts (nvd.h opcodes, AMD's MEC packet
// layouts, the sdma_v6 packet header); it shares no code or header with the builders.
//
// PM4 comes in two dialects here: gfx9 (CDNA2 and CDNA3: gfx90a, gfx942), whose RELEASE_MEM
// names cache actions (soc15d.h EOP_*_ACTION_EN) and whose ACQUIRE_MEM has six body dwords
// with CP_COHER_CNTL first and no wave32, and gfx10+ (gfx11, gfx12), with GCR_CNTL.
//
// decode_pm4 and decode_sdma read one packet from the words given (the packet's first word
// first). They return the packet, or Incomplete when the words end before the packet does,
// or a Malformed naming the packet and the field that is wrong. The simulator's command
// processors fault a queue on Malformed; the tests check the builders against it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace rig::sim::amd {

// ---- PM4.

struct Nop {};
struct SetShReg {
  std::uint32_t first;  // dword register address (0x2C00 + offset)
  std::vector<std::uint32_t> values;
};
struct DispatchDirect {
  std::uint32_t x, y, z;
  std::uint32_t initiator;
  bool wave32;
};
struct ReleaseMem {
  std::uint32_t event_type, event_index;
  std::uint32_t gcr_cntl;       // gfx10+: bits 12..24 of the ordinal (0 on gfx9)
  std::uint32_t cache_actions;  // gfx9: the EOP_*_ACTION_EN bits (0 on gfx10+)
  std::uint32_t dst_sel, int_sel, data_sel;
  std::uint64_t address, data;
  std::uint32_t context;
};
struct AcquireMem {
  std::uint64_t size, base;
  std::uint32_t gcr_cntl;    // gfx10+ (0 on gfx9)
  std::uint32_t coher_cntl;  // gfx9: CP_COHER_CNTL (0 on gfx10+)
};
struct EventWrite {
  std::uint32_t event_type, event_index;
};
struct WaitMem {  // WAIT_REG_MEM (32-bit) or WAIT_REG_MEM64
  bool wide;
  std::uint32_t function;
  std::uint64_t address, reference, mask;
};
struct IndirectBuffer {
  std::uint64_t address;
  std::uint32_t dwords;
};
struct WriteData {
  std::uint32_t dst_sel;
  bool confirm;
  std::uint64_t address;
  std::vector<std::uint32_t> data;
};
struct CopyData {
  std::uint32_t src_sel, dst_sel;
  bool wide, confirm;
  std::uint64_t source, address;
};

// gfx9 only (gfx9.4.3's XCCs): the next `dwords` dwords run on the XCCs `xcc_mask` selects.
struct PredExec {
  std::uint32_t xcc_mask, dwords;
};
// gfx9 only: an atomic operation on memory; the simulated MEC runs single-pass 64-bit adds.
struct AtomicMem {
  std::uint32_t op;  // the TC operation (TC_OP_ATOMIC_ADD_RTN_64)
  std::uint64_t address, source;
};

using Pm4Packet = std::variant<Nop, SetShReg, DispatchDirect, ReleaseMem, AcquireMem, EventWrite,
                               WaitMem, IndirectBuffer, WriteData, CopyData, PredExec, AtomicMem>;

// ---- SDMA.

struct SdmaNop {};
struct SdmaCopy {
  std::uint64_t src, dst, bytes;
};
struct SdmaFill {
  std::uint64_t dst, bytes;
  std::uint32_t data;
  bool dwords;  // fills whole dwords with data, else bytes with data's low byte
};
struct SdmaWrite {
  std::uint64_t address;
  std::vector<std::uint32_t> data;
};
struct SdmaFence {
  std::uint64_t address;
  std::uint32_t value, mtype;
};
struct SdmaTrap {
  std::uint32_t context;
};
struct SdmaPoll {
  std::uint32_t function;
  std::uint64_t address;
  std::uint32_t reference, mask, interval, retries;
};
struct SdmaTimestamp {
  std::uint64_t address;
};

using SdmaPacket = std::variant<SdmaNop, SdmaCopy, SdmaFill, SdmaWrite, SdmaFence, SdmaTrap, SdmaPoll,
                                SdmaTimestamp>;

// ---- Results.

struct Incomplete {
  std::uint32_t needed;  // the packet's dwords, if known from its header (else 0)
};
struct Malformed {
  std::string why;  // "PM4 RELEASE_MEM: data_sel 7 is not a data selection"
};
template <class P>
struct Decoded {
  P packet;
  std::uint32_t dwords;  // the packet's length, header included
  std::string name;      // "RELEASE_MEM", "COPY_LINEAR", ...
};

using Pm4Result = std::variant<Decoded<Pm4Packet>, Incomplete, Malformed>;
using SdmaResult = std::variant<Decoded<SdmaPacket>, Incomplete, Malformed>;

enum class Pm4Dialect { Gfx9, Gfx10Plus };
Pm4Result decode_pm4(std::span<const std::uint32_t> words, Pm4Dialect dialect = Pm4Dialect::Gfx10Plus);
// SDMA 4 (gfx9: vega10_sdma_pkt_open.h) counts COPY_LINEAR's and CONSTANT_FILL's bytes in
// 22 bits, SDMA 6 and 7 in 30.
enum class SdmaVersion { Sdma4, Sdma6 };
SdmaResult decode_sdma(std::span<const std::uint32_t> words, SdmaVersion version = SdmaVersion::Sdma6);

// gfx90a and gfx942's COMPUTE_PGM_RSRC3 (LLVM's AMDGPUUsage, "compute_pgm_rsrc3 for GFX90A,
// GFX942"): the first AccVGPR, 4 * (ACCUM_OFFSET + 1) from bits 0..5, and TG_SPLIT (bit 16);
// Malformed when a reserved bit (6..15, 17..31) is set.
struct Rsrc3Gfx90a {
  std::uint32_t accum_offset;
  bool tg_split;
};
std::variant<Rsrc3Gfx90a, Malformed> decode_rsrc3_gfx90a(std::uint32_t value);

// The dwords of the packet whose header is `header` (known from the header alone), or 0
// where the length needs more words (SDMA WRITE_LINEAR: 4 + its count word).
std::uint32_t pm4_length(std::uint32_t header);

}  // namespace rig::sim::amd
