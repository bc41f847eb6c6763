// The simulator's reading of PM4 and SDMA packets (decode.hpp). Every field of every packet
// it accepts is checked: reserved bits must be zero, selectors must name what the simulated
// engines do, addresses must be aligned as the packet requires.
#include "decode.hpp"

#include <fmt/format.h>

#include <optional>

namespace rig::sim::amd {
namespace {

// Bits [lo, lo + n) of w.
constexpr std::uint32_t bits(std::uint32_t w, unsigned lo, unsigned n) {
  return n == 32 ? w : (w >> lo) & ((1u << n) - 1);
}
constexpr std::uint64_t join(std::uint32_t lo, std::uint32_t hi) { return std::uint64_t(hi) << 32 | lo; }

// PM4 IT opcodes this decoder reads (kernel nvd.h values).
enum : std::uint32_t {
  IT_NOP = 0x10,
  IT_ATOMIC_MEM = 0x1E,
  IT_PRED_EXEC = 0x23,
  IT_DISPATCH_DIRECT = 0x15,
  IT_WRITE_DATA = 0x37,
  IT_WAIT_REG_MEM = 0x3C,
  IT_INDIRECT_BUFFER = 0x3F,
  IT_COPY_DATA = 0x40,
  IT_EVENT_WRITE = 0x46,
  IT_RELEASE_MEM = 0x49,
  IT_ACQUIRE_MEM = 0x58,
  IT_SET_SH_REG = 0x76,
  IT_WAIT_REG_MEM64 = 0x93,
};

const char* pm4_name(std::uint32_t op) {
  switch (op) {
    case IT_NOP: return "NOP";
    case IT_ATOMIC_MEM: return "ATOMIC_MEM";
    case IT_PRED_EXEC: return "PRED_EXEC";
    case IT_DISPATCH_DIRECT: return "DISPATCH_DIRECT";
    case IT_WRITE_DATA: return "WRITE_DATA";
    case IT_WAIT_REG_MEM: return "WAIT_REG_MEM";
    case IT_INDIRECT_BUFFER: return "INDIRECT_BUFFER";
    case IT_COPY_DATA: return "COPY_DATA";
    case IT_EVENT_WRITE: return "EVENT_WRITE";
    case IT_RELEASE_MEM: return "RELEASE_MEM";
    case IT_ACQUIRE_MEM: return "ACQUIRE_MEM";
    case IT_SET_SH_REG: return "SET_SH_REG";
    case IT_WAIT_REG_MEM64: return "WAIT_REG_MEM64";
  }
  return nullptr;
}

// What the simulated MEC accepts in the cache-control fields.
constexpr std::uint32_t kReleaseGcrKnown = 0x7FF000;  // GLM_WB .. SEQ, bits 12..22
constexpr std::uint32_t kAcquireGcrKnown = 0x1FFFF;   // GLI_INV .. SEQ, bits 0..16

// gfx9's cache actions the simulated MEC accepts: RELEASE_MEM's EOP_TCL1_VOL (12), TC_VOL
// (13), TC_WB (15), TCL1 (16), TC (17), TC_NC (19), TC_MD (21) (soc15d.h), and ACQUIRE_MEM's
// CP_COHER_CNTL TC_NC (3), TC_WC (4), TC_INV_METADATA (5), TCL1_VOL (15), TC_WB (18), TCL1
// (22), TC (23), SH_KCACHE (27), SH_KCACHE_VOL (28), SH_ICACHE (29), SH_KCACHE_WB (30); the
// graphics ones (CB 25, DB 26) are not for a compute queue.
constexpr std::uint32_t kGfx9ReleaseActionsKnown =
    1u << 12 | 1u << 13 | 1u << 15 | 1u << 16 | 1u << 17 | 1u << 19 | 1u << 21;
constexpr std::uint32_t kGfx9CoherKnown = 1u << 3 | 1u << 4 | 1u << 5 | 1u << 15 | 1u << 18 | 1u << 22 | 1u << 23 |
                                          1u << 27 | 1u << 28 | 1u << 29 | 1u << 30;
constexpr std::uint32_t kGfx9CsW32En = 1u << 15;  // the initiator bit gfx9 does not have

// ATOMIC_MEM operations the simulated MEC runs: TC_OP_ATOMIC_ADD_RTN_64 (vega10_enum.h).
constexpr std::uint32_t kTcAtomicAddRtn64 = 0x2f;

// Event types the simulated MEC understands.
constexpr std::uint32_t kCsPartialFlush = 0x07, kCacheFlushAndInvTsEvent = 0x14, kBottomOfPipeTs = 0x28;

struct Pm4Reader {
  std::span<const std::uint32_t> w;
  std::string name;
  bool gfx9 = false;
  Malformed bad(std::string what) const { return {fmt::format("PM4 {}: {}", name, what)}; }
};

Pm4Result pm4_body(std::uint32_t op, std::span<const std::uint32_t> b, const Pm4Reader& r) {
  auto need = [&](std::size_t n, bool exact = true) -> std::optional<Malformed> {
    if (exact ? b.size() != n : b.size() < n)
      return r.bad(fmt::format("a body of {} dwords, not {}{}", b.size(), exact ? "" : "at least ", n));
    return std::nullopt;
  };
  std::uint32_t total = std::uint32_t(b.size() + 1);
  auto done = [&](Pm4Packet p) -> Pm4Result { return Decoded<Pm4Packet>{std::move(p), total, r.name}; };
  switch (op) {
    case IT_NOP:
      return done(Nop{});
    case IT_SET_SH_REG: {
      if (auto e = need(2, false)) return *e;
      std::uint32_t offset = bits(b[0], 0, 16);
      if (bits(b[0], 16, 16)) return r.bad(fmt::format("reserved/index bits {:#x} set", b[0] >> 16));
      std::uint32_t n = std::uint32_t(b.size() - 1);
      if (offset + n > 0x400) return r.bad(fmt::format("registers {:#x}+{} leave the SH range", offset, n));
      return done(SetShReg{0x2C00 + offset, {b.begin() + 1, b.end()}});
    }
    case IT_DISPATCH_DIRECT: {
      if (auto e = need(4)) return *e;
      std::uint32_t init = b[3];
      // COMPUTE_SHADER_EN (0), FORCE_START_AT_000 (2), ORDER_MODE (6), CS_W32_EN (15).
      constexpr std::uint32_t known = 1u << 0 | 1u << 2 | 1u << 6 | 1u << 15;
      if (init & ~known) return r.bad(fmt::format("initiator bits {:#x} the simulator does not run", init & ~known));
      if (r.gfx9 && (init & kGfx9CsW32En)) return r.bad("CS_W32_EN on gfx9, which has no wave32");
      if (!(init & 1)) return r.bad("initiator without COMPUTE_SHADER_EN");
      if (!b[0] || !b[1] || !b[2]) return r.bad(fmt::format("an empty grid {}x{}x{}", b[0], b[1], b[2]));
      return done(DispatchDirect{b[0], b[1], b[2], init, bool(init & (1u << 15))});
    }
    case IT_RELEASE_MEM: {
      if (auto e = need(7)) return *e;
      ReleaseMem m{};
      m.event_type = bits(b[0], 0, 6);
      m.event_index = bits(b[0], 8, 4);
      if (bits(b[0], 6, 2) || bits(b[0], 25, 7))
        return r.bad(fmt::format("reserved or unsupported bits in {:#x}", b[0]));
      if (r.gfx9) {
        m.cache_actions = b[0] & 0x1FFF000;
        if (m.cache_actions & ~kGfx9ReleaseActionsKnown)
          return r.bad(fmt::format("gfx9 cache action bits {:#x} unknown", m.cache_actions & ~kGfx9ReleaseActionsKnown));
      } else {
        m.gcr_cntl = b[0] & 0x1FFF000;
        if (m.gcr_cntl & ~kReleaseGcrKnown) return r.bad(fmt::format("GCR_CNTL bits {:#x} unknown", m.gcr_cntl));
      }
      if (m.event_type != kCacheFlushAndInvTsEvent && m.event_type != kBottomOfPipeTs)
        return r.bad(fmt::format("event type {:#x} is not an end-of-pipe event", m.event_type));
      if (m.event_index != 5) return r.bad(fmt::format("event index {} is not end-of-pipe (5)", m.event_index));
      m.dst_sel = bits(b[1], 16, 2);
      m.int_sel = bits(b[1], 24, 3);
      m.data_sel = bits(b[1], 29, 3);
      if (bits(b[1], 0, 16) || bits(b[1], 18, 6) || bits(b[1], 27, 2))
        return r.bad(fmt::format("reserved or MES bits in {:#x}", b[1]));
      if (m.dst_sel > 1) return r.bad(fmt::format("dst_sel {} is not memory", m.dst_sel));
      if (m.int_sel > 2) return r.bad(fmt::format("int_sel {} is not none or an interrupt", m.int_sel));
      if (m.data_sel > 3) return r.bad(fmt::format("data_sel {} is not a data selection", m.data_sel));
      m.address = join(b[2], b[3]);
      m.data = join(b[4], b[5]);
      m.context = b[6];
      if (m.data_sel == 1 && m.address % 4) return r.bad(fmt::format("address {:#x} not 4-aligned", m.address));
      if (m.data_sel >= 2 && m.address % 8) return r.bad(fmt::format("address {:#x} not 8-aligned", m.address));
      if (m.data_sel && !m.address) return r.bad("data to write at address 0");
      if (m.data_sel == 1 && b[5]) return r.bad("32-bit data with a high dword");
      if (m.data_sel == 3 && (b[4] || b[5])) return r.bad("a clock store with data");
      return done(m);
    }
    case IT_ACQUIRE_MEM: {
      if (r.gfx9) {  // COHER_CNTL, COHER_SIZE, COHER_SIZE_HI (24 bits), COHER_BASE, _HI, POLL_INTERVAL
        if (auto e = need(6)) return *e;
        if (b[0] >> 31) return r.bad("ENGINE_SEL 1 (the PFP) on a compute queue");
        if (b[0] & ~kGfx9CoherKnown)
          return r.bad(fmt::format("CP_COHER_CNTL bits {:#x} a compute queue does not take", b[0] & ~kGfx9CoherKnown));
        if (b[2] >> 24) return r.bad(fmt::format("coher_size_hi {:#x} exceeds 24 bits", b[2]));
        if (b[4] >> 24) return r.bad(fmt::format("coher_base_hi {:#x} exceeds 24 bits", b[4]));
        if (b[5] >> 16) return r.bad(fmt::format("poll_interval dword {:#x} has reserved bits", b[5]));
        return done(AcquireMem{join(b[1], b[2]), join(b[3], b[4]), 0, b[0]});
      }
      if (auto e = need(7)) return *e;
      if (b[0]) return r.bad(fmt::format("reserved dword {:#x}", b[0]));
      if (b[2] >> 8) return r.bad(fmt::format("coher_size_hi {:#x} exceeds 8 bits", b[2]));
      if (b[4] >> 24) return r.bad(fmt::format("coher_base_hi {:#x} exceeds 24 bits", b[4]));
      if (b[5] >> 16) return r.bad(fmt::format("poll_interval dword {:#x} has reserved bits", b[5]));
      if (b[6] & ~kAcquireGcrKnown) return r.bad(fmt::format("GCR_CNTL bits {:#x} unknown", b[6]));
      return done(AcquireMem{join(b[1], b[2]), join(b[3], b[4]), b[6], 0});
    }
    case IT_EVENT_WRITE: {
      if (auto e = need(1)) return *e;
      std::uint32_t type = bits(b[0], 0, 6), index = bits(b[0], 8, 4);
      if (bits(b[0], 6, 2) || bits(b[0], 12, 20)) return r.bad(fmt::format("reserved bits in {:#x}", b[0]));
      if (type != kCsPartialFlush || index != 4)
        return r.bad(fmt::format("event {:#x} index {}: only CS_PARTIAL_FLUSH (7, 4) is simulated", type, index));
      return done(EventWrite{type, index});
    }
    case IT_WAIT_REG_MEM:
    case IT_WAIT_REG_MEM64: {
      bool wide = op == IT_WAIT_REG_MEM64;
      if (auto e = need(wide ? 8 : 6)) return *e;
      WaitMem m{};
      m.wide = wide;
      m.function = bits(b[0], 0, 3);
      if (bits(b[0], 3, 1) || bits(b[0], 8, 14) || bits(b[0], 27, 5))
        return r.bad(fmt::format("reserved bits in {:#x}", b[0]));
      if (m.function > 6) return r.bad(fmt::format("function {} is not a comparison", m.function));
      if (bits(b[0], 4, 2) != 1) return r.bad("register polling is not simulated (mem_space must be 1)");
      if (bits(b[0], 6, 2) != 0) return r.bad(fmt::format("operation {} is not wait_reg_mem", bits(b[0], 6, 2)));
      m.address = join(b[1], b[2]);
      if (m.address % (wide ? 8 : 4)) return r.bad(fmt::format("address {:#x} not {}-aligned", m.address, wide ? 8 : 4));
      if (wide) {
        m.reference = join(b[3], b[4]), m.mask = join(b[5], b[6]);
        if (bits(b[7], 16, 15)) return r.bad(fmt::format("reserved bits in poll interval {:#x}", b[7]));
      } else {
        m.reference = b[3], m.mask = b[4];
        if (bits(b[5], 16, 15)) return r.bad(fmt::format("reserved bits in poll interval {:#x}", b[5]));
      }
      return done(m);
    }
    case IT_INDIRECT_BUFFER: {
      if (auto e = need(3)) return *e;
      if (b[0] & 3) return r.bad(fmt::format("ib_base_lo {:#x} not 4-aligned", b[0]));
      std::uint32_t size = bits(b[2], 0, 20);
      if (!bits(b[2], 23, 1)) return r.bad("the VALID bit is clear");
      if (bits(b[2], 20, 1)) return r.bad("chained indirect buffers are not simulated");
      if (b[2] & ~(0xFFFFFu | 1u << 23)) return r.bad(fmt::format("unsupported bits in {:#x}", b[2]));
      if (!size) return r.bad("an indirect buffer of 0 dwords");
      return done(IndirectBuffer{join(b[0], b[1]), size});
    }
    case IT_WRITE_DATA: {
      if (auto e = need(4, false)) return *e;
      std::uint32_t dst = bits(b[0], 8, 4);
      if (bits(b[0], 0, 8) || bits(b[0], 12, 4) || bits(b[0], 16, 4) || bits(b[0], 21, 4) || bits(b[0], 27, 5))
        return r.bad(fmt::format("reserved or unsupported bits in {:#x}", b[0]));
      if (dst != 2 && dst != 5) return r.bad(fmt::format("dst_sel {} is not memory", dst));
      std::uint64_t address = join(b[1], b[2]);
      if (address % 4) return r.bad(fmt::format("address {:#x} not 4-aligned", address));
      return done(WriteData{dst, bool(bits(b[0], 20, 1)), address, {b.begin() + 3, b.end()}});
    }
    case IT_PRED_EXEC: {  // EXEC_COUNT bits 0..13, VIRTUAL_XCC_ID_SELECT bits 24..31 (soc15d.h)
      if (!r.gfx9) return r.bad("PRED_EXEC selects XCCs, which only gfx9.4.3 has");
      if (auto e = need(1)) return *e;
      if (bits(b[0], 14, 10)) return r.bad(fmt::format("reserved bits in {:#x}", b[0]));
      PredExec p{bits(b[0], 24, 8), bits(b[0], 0, 14)};
      if (!p.xcc_mask) return r.bad("an XCC mask of 0 selects no XCC");
      if (!p.dwords) return r.bad("an exec count of 0 dwords");
      return done(p);
    }
    case IT_ATOMIC_MEM: {  // ATOMIC 0..5, COMMAND 8..11, CACHE_POLICY 25..26; address; src; cmp; loop
      if (!r.gfx9) return r.bad("ATOMIC_MEM is simulated on gfx9 only");
      if (auto e = need(8)) return *e;
      if (bits(b[0], 6, 2) || bits(b[0], 12, 13) || bits(b[0], 27, 5))
        return r.bad(fmt::format("reserved bits in {:#x}", b[0]));
      std::uint32_t op = bits(b[0], 0, 6), command = bits(b[0], 8, 4);
      if (op != kTcAtomicAddRtn64) return r.bad(fmt::format("atomic {:#x}: only a 64-bit add (0x2f) is simulated", op));
      if (command) return r.bad(fmt::format("command {}: only a single pass (0) is simulated", command));
      AtomicMem a{op, join(b[1], b[2]), join(b[3], b[4])};
      if (a.address % 8) return r.bad(fmt::format("address {:#x} not 8-aligned", a.address));
      if (b[5] || b[6]) return r.bad("compare data for an add");
      if (b[7]) return r.bad(fmt::format("a loop interval {:#x} for a single pass", b[7]));
      return done(a);
    }
    case IT_COPY_DATA: {
      if (auto e = need(5)) return *e;
      CopyData c{};
      c.src_sel = bits(b[0], 0, 4);
      c.dst_sel = bits(b[0], 8, 4);
      c.wide = bits(b[0], 16, 1);
      c.confirm = bits(b[0], 20, 1);
      if (bits(b[0], 4, 4) || bits(b[0], 12, 1) || bits(b[0], 17, 3) || bits(b[0], 21, 4) || bits(b[0], 27, 5))
        return r.bad(fmt::format("reserved or unsupported bits in {:#x}", b[0]));
      if (c.src_sel != 2 && c.src_sel != 5 && c.src_sel != 9)
        return r.bad(fmt::format("src_sel {} is not memory, an immediate or the GPU clock", c.src_sel));
      if (c.dst_sel != 2 && c.dst_sel != 5) return r.bad(fmt::format("dst_sel {} is not memory", c.dst_sel));
      if (c.src_sel == 9 && !c.wide) return r.bad("a GPU clock copy of 32 bits");
      c.source = join(b[1], b[2]);
      c.address = join(b[3], b[4]);
      unsigned align = c.wide ? 8 : 4;
      if (c.address % align) return r.bad(fmt::format("address {:#x} not {}-aligned", c.address, align));
      if (c.src_sel == 2 && c.source % align) return r.bad(fmt::format("source {:#x} not {}-aligned", c.source, align));
      return done(c);
    }
  }
  return Malformed{fmt::format("PM4 opcode {:#04x} is unknown to the simulator", op)};
}

}  // namespace

std::variant<Rsrc3Gfx90a, Malformed> decode_rsrc3_gfx90a(std::uint32_t value) {
  if (bits(value, 6, 10) || bits(value, 17, 15))
    return Malformed{fmt::format("COMPUTE_PGM_RSRC3 {:#x}: reserved bits set for gfx90a/gfx942", value)};
  return Rsrc3Gfx90a{(bits(value, 0, 6) + 1) * 4, bits(value, 16, 1) == 1};
}

std::uint32_t pm4_length(std::uint32_t header) {
  std::uint32_t count = bits(header, 16, 14);
  if (bits(header, 8, 8) == IT_NOP && count == 0x3FFF) return 1;
  return count + 2;
}

Pm4Result decode_pm4(std::span<const std::uint32_t> w, Pm4Dialect dialect) {
  if (w.empty()) return Incomplete{0};
  std::uint32_t h = w[0];
  if (bits(h, 30, 2) != 3)
    return Malformed{fmt::format("PM4 header {:#010x} is a type-{} packet; only type 3 is simulated", h, h >> 30)};
  std::uint32_t op = bits(h, 8, 8);
  const char* name = pm4_name(op);
  if (!name) return Malformed{fmt::format("PM4 opcode {:#04x} (header {:#010x}) is unknown to the simulator", op, h)};
  Pm4Reader r{w, name, dialect == Pm4Dialect::Gfx9};
  if (bits(h, 0, 1)) return r.bad("predicated packets are not simulated");
  if (bits(h, 2, 6)) return r.bad(fmt::format("reserved header bits in {:#010x}", h));
  std::uint32_t n = pm4_length(h);
  if (w.size() < n) return Incomplete{n};
  return pm4_body(op, w.subspan(1, n - 1), r);
}

// ---- SDMA.

namespace {

enum : std::uint32_t {
  OP_NOP = 0, OP_COPY = 1, OP_WRITE = 2, OP_FENCE = 5, OP_TRAP = 6, OP_POLL_REGMEM = 8,
  OP_CONST_FILL = 11, OP_TIMESTAMP = 13,
};

Malformed sdma_bad(const char* name, std::string what) { return {fmt::format("SDMA {}: {}", name, what)}; }

}  // namespace

SdmaResult decode_sdma(std::span<const std::uint32_t> w, SdmaVersion version) {
  const unsigned count_bits = version == SdmaVersion::Sdma4 ? 22 : 30;
  if (w.empty()) return Incomplete{0};
  std::uint32_t h = w[0];
  std::uint32_t op = bits(h, 0, 8), sub = bits(h, 8, 8);
  auto have = [&](std::uint32_t n) { return w.size() >= n; };
  auto done = [&](SdmaPacket p, std::uint32_t n, const char* name) -> SdmaResult {
    return Decoded<SdmaPacket>{std::move(p), n, name};
  };
  switch (op) {
    case OP_NOP: {
      // NOP's count (bits 16..29) is the number of dwords it skips after the header.
      if (sub) return sdma_bad("NOP", fmt::format("sub-op {}", sub));
      std::uint32_t n = 1 + bits(h, 16, 14);
      if (bits(h, 30, 2)) return sdma_bad("NOP", fmt::format("reserved bits in {:#010x}", h));
      if (!have(n)) return Incomplete{n};
      return done(SdmaNop{}, n, "NOP");
    }
    case OP_COPY: {
      if (sub != 0) return sdma_bad("COPY", fmt::format("sub-op {} is not LINEAR (0)", sub));
      if (bits(h, 16, 16)) return sdma_bad("COPY_LINEAR", fmt::format("extra bits in header {:#010x}", h));
      if (!have(7)) return Incomplete{7};
      if (w[1] >> count_bits)
        return sdma_bad("COPY_LINEAR", fmt::format("count {:#x} exceeds {} bits", w[1], count_bits));
      if (w[2]) return sdma_bad("COPY_LINEAR", fmt::format("swap parameter {:#x} is not simulated", w[2]));
      return done(SdmaCopy{join(w[3], w[4]), join(w[5], w[6]), std::uint64_t(w[1]) + 1}, 7, "COPY_LINEAR");
    }
    case OP_WRITE: {
      if (sub != 0) return sdma_bad("WRITE", fmt::format("sub-op {} is not LINEAR (0)", sub));
      if (bits(h, 16, 16)) return sdma_bad("WRITE_LINEAR", fmt::format("extra bits in header {:#010x}", h));
      if (!have(4)) return Incomplete{0};
      if (w[3] >> 20) return sdma_bad("WRITE_LINEAR", fmt::format("count {:#x} exceeds 20 bits", w[3]));
      std::uint32_t n = 4 + w[3] + 1;
      if (!have(n)) return Incomplete{n};
      std::uint64_t a = join(w[1], w[2]);
      if (a % 4) return sdma_bad("WRITE_LINEAR", fmt::format("address {:#x} not 4-aligned", a));
      return done(SdmaWrite{a, {w.begin() + 4, w.begin() + n}}, n, "WRITE_LINEAR");
    }
    case OP_FENCE: {
      if (sub) return sdma_bad("FENCE", fmt::format("sub-op {}", sub));
      if (bits(h, 19, 13)) return sdma_bad("FENCE", fmt::format("reserved bits in header {:#010x}", h));
      if (!have(4)) return Incomplete{4};
      std::uint64_t a = join(w[1], w[2]);
      if (a % 4) return sdma_bad("FENCE", fmt::format("address {:#x} not 4-aligned", a));
      return done(SdmaFence{a, w[3], bits(h, 16, 3)}, 4, "FENCE");
    }
    case OP_TRAP: {
      if (sub || bits(h, 16, 16)) return sdma_bad("TRAP", fmt::format("header {:#010x} has extra bits", h));
      if (!have(2)) return Incomplete{2};
      if (w[1] >> 28) return sdma_bad("TRAP", fmt::format("int context {:#x} exceeds 28 bits", w[1]));
      return done(SdmaTrap{w[1]}, 2, "TRAP");
    }
    case OP_POLL_REGMEM: {
      if (sub) return sdma_bad("POLL_REGMEM", fmt::format("sub-op {}", sub));
      if (bits(h, 16, 10) || bits(h, 27, 1))
        return sdma_bad("POLL_REGMEM", fmt::format("reserved bits in header {:#010x}", h));
      if (bits(h, 26, 1)) return sdma_bad("POLL_REGMEM", "HDP flush polling is not simulated");
      if (!bits(h, 31, 1)) return sdma_bad("POLL_REGMEM", "register polling is not simulated (mem_poll must be 1)");
      std::uint32_t f = bits(h, 28, 3);
      if (f > 6) return sdma_bad("POLL_REGMEM", fmt::format("function {} is not a comparison", f));
      if (!have(6)) return Incomplete{6};
      std::uint64_t a = join(w[1], w[2]);
      if (a % 4) return sdma_bad("POLL_REGMEM", fmt::format("address {:#x} not 4-aligned", a));
      if (bits(w[5], 28, 4)) return sdma_bad("POLL_REGMEM", fmt::format("reserved bits in {:#x}", w[5]));
      return done(SdmaPoll{f, a, w[3], w[4], bits(w[5], 0, 16), bits(w[5], 16, 12)}, 6, "POLL_REGMEM");
    }
    case OP_CONST_FILL: {
      if (sub) return sdma_bad("CONSTANT_FILL", fmt::format("sub-op {}", sub));
      std::uint32_t size = bits(h, 30, 2);
      if (bits(h, 16, 14)) return sdma_bad("CONSTANT_FILL", fmt::format("reserved or swap bits in {:#010x}", h));
      if (size != 0 && size != 2) return sdma_bad("CONSTANT_FILL", fmt::format("fill size {} is not bytes or dwords", size));
      if (!have(5)) return Incomplete{5};
      std::uint64_t a = join(w[1], w[2]), n = std::uint64_t(w[4]) + 1;
      if (w[4] >> count_bits)
        return sdma_bad("CONSTANT_FILL", fmt::format("count {:#x} exceeds {} bits", w[4], count_bits));
      if (size == 2 && (a % 4 || n % 4))
        return sdma_bad("CONSTANT_FILL", fmt::format("a dword fill of {} bytes at {:#x}: not 4-aligned", n, a));
      if (size == 0 && w[3] >> 8) return sdma_bad("CONSTANT_FILL", fmt::format("a byte fill with data {:#x}", w[3]));
      return done(SdmaFill{a, n, w[3], size == 2}, 5, "CONSTANT_FILL");
    }
    case OP_TIMESTAMP: {
      if (sub != 2) return sdma_bad("TIMESTAMP", fmt::format("sub-op {} is not GET_GLOBAL (2)", sub));
      if (bits(h, 16, 16)) return sdma_bad("TIMESTAMP", fmt::format("extra bits in header {:#010x}", h));
      if (!have(3)) return Incomplete{3};
      std::uint64_t a = join(w[1], w[2]);
      if (a % 8) return sdma_bad("TIMESTAMP", fmt::format("address {:#x} not 8-aligned", a));
      return done(SdmaTimestamp{a}, 3, "TIMESTAMP_GET_GLOBAL");
    }
  }
  return Malformed{fmt::format("SDMA opcode {} (header {:#010x}) is unknown to the simulator", op, h)};
}

}  // namespace rig::sim::amd
