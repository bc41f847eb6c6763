// sdma.hpp — packets for AMD's system DMA engines (SDMA 4 on gfx90a and gfx942, SDMA 6 on
// gfx11, SDMA 7 on gfx12).
//
// Pure code: an Sdma writes packets into a ring of 32-bit words it is given. Packets never
// straddle the ring's end: a packet that would is preceded by one-dword NOPs up to the end,
// and starts again at the ring's first word.
//
// Facts and where they come from: opcodes and sub-opcodes are those of the kernel's
// sdma_v6_0 packet header (navi10_sdma_pkt_open.h lineage: SDMA_OP_*, SDMA_SUBOP_*); the
// header is op (bits 0..7) | sub_op (8..15) | extra (16..31); field positions are that
// header's *_shift constants (POLL_REGMEM func 28, mem_poll 31; FENCE mtype 16;
// CONSTANT_FILL fillsize 30; COPY_LINEAR count: bytes - 1 in 30 bits on SDMA 6 and 7).
// SDMA 4 (the kernel's sdma_v4_0 and sdma_v4_4_2, vega10_sdma_pkt_open.h) has the same
// opcodes and layouts for the packets built here; its COPY_LINEAR and CONSTANT_FILL counts
// have 22 bits (SDMA_PKT_COPY_LINEAR_COUNT_count_mask, _CONSTANT_FILL_COUNT_count_mask
// 0x003FFFFF), so its chunks are at most 4 MiB.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>

namespace rig::amd::sdma {

constexpr std::uint32_t kOpNop = 0;
constexpr std::uint32_t kOpCopy = 1;
constexpr std::uint32_t kOpWrite = 2;
constexpr std::uint32_t kOpFence = 5;
constexpr std::uint32_t kOpTrap = 6;
constexpr std::uint32_t kOpPollRegmem = 8;
constexpr std::uint32_t kOpConstFill = 11;
constexpr std::uint32_t kOpTimestamp = 13;
constexpr std::uint32_t kSubCopyLinear = 0;
constexpr std::uint32_t kSubWriteLinear = 0;
constexpr std::uint32_t kSubTimestampGetGlobal = 2;

constexpr std::uint32_t kPollFuncShift = 28;
constexpr std::uint32_t kPollMemShift = 31;
constexpr std::uint32_t kFenceMtypeShift = 16;
constexpr std::uint32_t kFillSizeShift = 30;  // 0: bytes, 2: dwords
constexpr std::uint32_t kFenceMtypeUncached = 3;

// The engine versions whose packets differ here.
enum class Version { Sdma4, Sdma6 };
// The most bytes one COPY_LINEAR or CONSTANT_FILL moves: count is bytes - 1 in 30 bits on
// SDMA 6 and 7 (kMaxChunk), in 22 bits on SDMA 4.
constexpr std::uint64_t kMaxChunk = std::uint64_t(1) << 30;
constexpr std::uint64_t kMaxChunkSdma4 = std::uint64_t(1) << 22;
constexpr std::uint64_t max_chunk(Version v) { return v == Version::Sdma4 ? kMaxChunkSdma4 : kMaxChunk; }
// The most dwords one WRITE_LINEAR carries (count is dwords - 1 in 20 bits).
constexpr std::uint32_t kMaxWriteDwords = 1u << 20;

// Dwords of each packet.
constexpr std::uint32_t kCopyLinearSize = 7;
constexpr std::uint32_t kFenceSize = 4;
constexpr std::uint32_t kTrapSize = 2;
constexpr std::uint32_t kPollRegmemSize = 6;
constexpr std::uint32_t kTimestampSize = 3;
constexpr std::uint32_t kConstFillSize = 5;
constexpr std::uint32_t write_size(std::uint32_t dwords) { return 4 + dwords; }
// The largest fixed packet: a submission reserves this much beyond its packets for the
// padding before one packet at the ring's end.
constexpr std::uint32_t kMaxFixedPacket = 7;

// POLL_REGMEM compare functions (the same encoding as PM4 WAIT_REG_MEM).
enum class Compare : std::uint32_t {
  Always = 0, Less = 1, LessEqual = 2, Equal = 3, NotEqual = 4, GreaterEqual = 5, Greater = 6
};

// Writes SDMA packets into a ring. Every method throws std::length_error, having written
// nothing of the packet, if it (with its padding) does not fit in what is left, and
// std::invalid_argument for a field out of range (each method says which).
class Sdma {
 public:
  // Packets go at ring[(start + i) % ring.size()]; at most ring.size() dwords are written,
  // for an engine of `version`.
  explicit Sdma(std::span<std::uint32_t> ring, std::uint64_t start = 0, Version version = Version::Sdma6);

  std::uint32_t size() const { return written_; }
  std::uint64_t position() const { return start_ + written_; }
  // Dwords a packet of `dwords` would take from `position`, padding included.
  std::uint32_t cost(std::uint32_t dwords) const;

  // COPY_LINEAR of `bytes` bytes (at least 1) from `src` to `dst`, as as many packets of at
  // most max_chunk(version) bytes as it takes. Returns the packets written.
  std::uint32_t copy_linear(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes);
  // CONSTANT_FILL of `bytes` bytes (at least 1) at `dst` with `byte`: dword fills where dst
  // and bytes are 4-aligned, byte fills otherwise, in chunks of at most max_chunk(version).
  std::uint32_t fill(std::uint64_t dst, std::uint8_t byte, std::uint64_t bytes);
  // FENCE: writes the 32-bit `value` at `address` (4-aligned) after earlier packets.
  void fence(std::uint64_t address, std::uint32_t value);
  // TRAP: raises an interrupt carrying `context` (28 bits).
  void trap(std::uint32_t context);
  // POLL_REGMEM on memory: waits until (word at address & mask) `compare` reference holds.
  // The address must be 4-aligned.
  void poll_mem(std::uint64_t address, Compare compare, std::uint32_t reference,
                std::uint32_t mask = 0xffffffff);
  // TIMESTAMP (GET_GLOBAL): writes the 64-bit GPU clock at `address` (8-aligned).
  void timestamp(std::uint64_t address);
  // WRITE_LINEAR of `data` (1 ..= kMaxWriteDwords dwords) at `address` (4-aligned).
  void write(std::uint64_t address, std::span<const std::uint32_t> data);
  // NOPs up to `dwords` dwords.
  void nop(std::uint32_t dwords);

 private:
  void begin(std::uint32_t dwords);  // pads to the ring's start if the packet would straddle
  // The next dword, at ring_[at_]: the ring position kept as an index (no division per dword).
  void put(std::uint32_t word) {
    ring_[at_] = word;
    if (++at_ == ring_.size()) at_ = 0;
    ++written_;
  }

  std::span<std::uint32_t> ring_;
  std::uint64_t start_;
  std::uint64_t chunk_;  // max_chunk of the engine's version
  std::size_t at_ = 0;  // (start_ + written_) % ring_.size()
  std::uint32_t written_ = 0;
};

}  // namespace rig::amd::sdma
