// PM4 packets (pm4.hpp).
#include "pm4.hpp"

#include <fmt/format.h>

namespace rig::amd::pm4 {
namespace {

std::uint32_t lo(std::uint64_t v) { return std::uint32_t(v); }
std::uint32_t hi(std::uint64_t v) { return std::uint32_t(v >> 32); }

void aligned(std::uint64_t address, std::uint64_t to, const char* packet) {
  if (address % to)
    throw std::invalid_argument(
        fmt::format("PM4 {}: address {:#x} is not {}-byte aligned", packet, address, to));
}

}  // namespace

Pm4::Pm4(Gen gen, std::span<std::uint32_t> out, std::uint64_t start)
    : gen_(gen), out_(out), start_(start) {
  if (out.empty()) throw std::invalid_argument("PM4: no words to write into");
  at_ = start % out.size();
}

void Pm4::no_room(std::uint32_t dwords) const {
  throw std::length_error(fmt::format("PM4: a packet of {} dwords does not fit: {} of {} used",
                                      dwords, written_, out_.size()));
}

std::uint32_t tmpring_size(Gen gen, std::uint32_t waves, std::uint64_t wave_bytes) {
  const std::uint32_t granule = tmpring_granule(gen);
  const std::uint64_t units = wave_bytes / granule;
  if (waves > kTmpringWavesMax)
    throw std::invalid_argument(fmt::format("COMPUTE_TMPRING_SIZE: {} waves, over the field's {}", waves,
                                            kTmpringWavesMax));
  if (wave_bytes % granule || units >> tmpring_wavesize_bits(gen))
    throw std::invalid_argument(fmt::format(
        "COMPUTE_TMPRING_SIZE: {} bytes per wave is not a multiple of {} bytes below {} of them on {}", wave_bytes,
        granule, 1u << tmpring_wavesize_bits(gen), gen == Gen::Gfx9_4 ? "gfx9" : "gfx11+"));
  return waves | std::uint32_t(units) << 12;
}

std::uint32_t rsrc3_gfx90a(std::uint32_t accum_offset, bool tg_split) {
  if (accum_offset < 4 || accum_offset > 256 || accum_offset % 4)
    throw std::invalid_argument(fmt::format(
        "COMPUTE_PGM_RSRC3: an AccVGPR offset of {} is not a multiple of 4 in 4 ..= 256", accum_offset));
  return (accum_offset / 4 - 1) | (tg_split ? kRsrc3TgSplit : 0);
}

void Pm4::nop(std::uint32_t dwords) {
  if (dwords < 1 || dwords > 0x4000)
    throw std::invalid_argument(fmt::format("PM4 NOP of {} dwords: 1 ..= 16384", dwords));
  need(dwords);
  // A one-dword NOP is the header with count 0x3fff, which the CP reads as "no body".
  const std::uint32_t head =
      dwords == 1 ? kType3 | 0x3fffu << 16 | kNop << 8 | kShaderCompute : header(kNop, dwords - 1);
  emit(std::span(&head, 1));
  const std::uint32_t zero = 0;
  for (std::uint32_t i = 1; i < dwords; ++i) emit(std::span(&zero, 1));
}

void Pm4::set_sh_reg(std::uint32_t first, std::span<const std::uint32_t> values) {
  if (values.empty() || first < kShRegStart || first + values.size() > kShRegEnd)
    throw std::invalid_argument(fmt::format(
        "PM4 SET_SH_REG of {} registers from {:#x}: outside the SH registers", values.size(), first));
  need(set_sh_reg_size(std::uint32_t(values.size())));
  const std::uint32_t head[2] = {header(kSetShReg, std::uint32_t(values.size()) + 1), first - kShRegStart};
  emit(head);
  emit(values);
}

void Pm4::dispatch_direct(std::uint32_t x, std::uint32_t y, std::uint32_t z, bool wave32) {
  if (!x || !y || !z)
    throw std::invalid_argument(fmt::format("PM4 DISPATCH_DIRECT of an empty grid {}x{}x{}", x, y, z));
  if (wave32 && gen_ == Gen::Gfx9_4)
    throw std::invalid_argument("PM4 DISPATCH_DIRECT: gfx9.4 has no wave32");
  need(1 + kDispatchDirectBody);
  const std::uint32_t p[1 + kDispatchDirectBody] = {
      header(kDispatchDirect, kDispatchDirectBody), x, y, z,
      kInitiatorComputeShaderEn | kInitiatorForceStartAt000 | (wave32 ? kInitiatorCsW32En : 0)};
  emit(p);
}

void Pm4::release_mem(const Release& r) {
  if (r.data_sel == DataSel::Low32) aligned(r.address, 4, "RELEASE_MEM");
  if (r.data_sel == DataSel::Data64 || r.data_sel == DataSel::GpuClock) aligned(r.address, 8, "RELEASE_MEM");
  std::uint32_t gcr = 0;  // gfx9's cache actions, gfx10+'s GCR_CNTL: the same bits of the ordinal
  if (r.write_back && gen_ == Gen::Gfx9_4) {
    gcr = kEopTcWbActionEn | kEopTcl1ActionEn | kEopTcActionEn | kEopTcMdActionEn;
  } else if (r.write_back) {
    gcr = kReleaseGlvInv | kReleaseGl2Inv | kReleaseGl2Wb | kReleaseGcrSeq;
    if (gen_ == Gen::Gfx11) gcr |= kReleaseGl1Inv | kReleaseGlmWb | kReleaseGlmInv;
  }
  need(1 + kReleaseMemBody);
  const std::uint32_t p[1 + kReleaseMemBody] = {
      header(kReleaseMem, kReleaseMemBody),
      kEventCacheFlushAndInvTs | kEventIndexEndOfPipe << 8 | gcr,
      // dst_sel 0 (memory controller), int_sel in bits 24..26, data_sel in bits 29..31.
      std::uint32_t(r.int_sel) << 24 | std::uint32_t(r.data_sel) << 29,
      lo(r.address), hi(r.address),
      lo(r.data), hi(r.data),
      r.context};
  emit(p);
}

void Pm4::acquire_mem() {
  if (gen_ == Gen::Gfx9_4) {
    need(1 + kAcquireMemBodyGfx9);
    const std::uint32_t p[1 + kAcquireMemBodyGfx9] = {
        header(kAcquireMem, kAcquireMemBodyGfx9),
        kCoherShIcacheActionEna | kCoherShKcacheActionEna | kCoherTcActionEna | kCoherTcl1ActionEna |
            kCoherTcWbActionEna,
        0xffffffff,        // coher_size: all memory
        kCoherSizeHiGfx9,  // coher_size_hi (24 bits)
        0, 0,              // coher_base
        10};               // poll_interval
    emit(p);
    return;
  }
  std::uint32_t gcr = kAcquireGliInv | kAcquireGlkWb | kAcquireGlkInv | kAcquireGlvInv |
                      kAcquireGl2Inv | kAcquireGl2Wb;
  if (gen_ == Gen::Gfx11) gcr |= kAcquireGlmWb | kAcquireGlmInv | kAcquireGl1Inv;
  need(1 + kAcquireMemBody);
  const std::uint32_t p[1 + kAcquireMemBody] = {
      header(kAcquireMem, kAcquireMemBody),
      0,           // reserved
      0xffffffff,  // coher_size: all memory
      0xff,        // coher_size_hi (8 bits)
      0, 0,        // coher_base
      10,          // poll_interval
      gcr};
  emit(p);
}

void Pm4::cs_partial_flush() {
  need(1 + kEventWriteBody);
  const std::uint32_t p[1 + kEventWriteBody] = {header(kEventWrite, kEventWriteBody),
                                                kEventCsPartialFlush | kEventIndexCsPartialFlush << 8};
  emit(p);
}

void Pm4::wait_mem32(std::uint64_t address, Compare compare, std::uint32_t reference, std::uint32_t mask) {
  aligned(address, 4, "WAIT_REG_MEM");
  need(1 + kWaitRegMemBody);
  const std::uint32_t p[1 + kWaitRegMemBody] = {
      header(kWaitRegMem, kWaitRegMemBody),
      std::uint32_t(compare) | 1u << 4,  // mem_space 1: memory; operation 0; engine ME
      lo(address), hi(address),
      reference, mask,
      4};  // poll_interval
  emit(p);
}

void Pm4::wait_mem64(std::uint64_t address, Compare compare, std::uint64_t reference, std::uint64_t mask) {
  aligned(address, 8, "WAIT_REG_MEM64");
  need(1 + kWaitRegMem64Body);
  const std::uint32_t p[1 + kWaitRegMem64Body] = {
      header(kWaitRegMem64, kWaitRegMem64Body),
      std::uint32_t(compare) | 1u << 4,
      lo(address), hi(address),
      lo(reference), hi(reference),
      lo(mask), hi(mask),
      4};
  emit(p);
}

void Pm4::pred_exec(std::uint32_t xcc_mask, std::uint32_t dwords) {
  if (gen_ != Gen::Gfx9_4) throw std::invalid_argument("PM4 PRED_EXEC: only gfx9.4 selects XCCs");
  if (!xcc_mask || xcc_mask > 0xff)
    throw std::invalid_argument(fmt::format("PM4 PRED_EXEC: XCC mask {:#x} selects none of 8 XCCs", xcc_mask));
  if (dwords < 1 || dwords > kPredExecCountMax)
    throw std::invalid_argument(fmt::format("PM4 PRED_EXEC over {} dwords: 1 ..= {}", dwords, kPredExecCountMax));
  need(1 + kPredExecBody);
  const std::uint32_t p[1 + kPredExecBody] = {header(kPredExec, kPredExecBody), dwords | xcc_mask << 24};
  emit(p);
}

void Pm4::atomic_add64(std::uint64_t address, std::uint64_t addend) {
  aligned(address, 8, "ATOMIC_MEM");
  need(1 + kAtomicMemBody);
  const std::uint32_t p[1 + kAtomicMemBody] = {
      header(kAtomicMem, kAtomicMemBody), kTcOpAtomicAddRtn64, lo(address), hi(address), lo(addend), hi(addend),
      0, 0,  // cmp_data: unused by an add
      0};    // loop_interval: a single pass
  emit(p);
}

void Pm4::indirect_buffer(std::uint64_t address, std::uint32_t dwords) {
  aligned(address, 4, "INDIRECT_BUFFER");
  if (dwords < 1 || dwords > kIndirectBufferMaxDwords)
    throw std::invalid_argument(fmt::format("PM4 INDIRECT_BUFFER of {} dwords: 1 ..= 2^20 - 1", dwords));
  need(1 + kIndirectBufferBody);
  const std::uint32_t p[1 + kIndirectBufferBody] = {header(kIndirectBuffer, kIndirectBufferBody), lo(address),
                                                    hi(address), dwords | 1u << 23};  // ib_size, valid
  emit(p);
}

void Pm4::write_data(std::uint64_t address, std::span<const std::uint32_t> data) {
  aligned(address, 4, "WRITE_DATA");
  if (data.empty() || data.size() > 0x3ffd)
    throw std::invalid_argument(fmt::format("PM4 WRITE_DATA of {} dwords: 1 ..= 16381", data.size()));
  need(write_data_size(std::uint32_t(data.size())));
  const std::uint32_t head[4] = {header(kWriteData, std::uint32_t(data.size()) + 3),
                                 kWriteDstMemory << 8 | 1u << 20,  // dst_sel memory, wr_confirm
                                 lo(address), hi(address)};
  emit(head);
  emit(data);
}

void Pm4::copy_data(CopySrc source, std::uint64_t source_value, std::uint64_t address, bool bits64) {
  if (source == CopySrc::GpuClock) bits64 = true;
  aligned(address, bits64 ? 8 : 4, "COPY_DATA");
  if (source == CopySrc::Memory) aligned(source_value, bits64 ? 8 : 4, "COPY_DATA");
  need(1 + kCopyDataBody);
  const std::uint32_t p[1 + kCopyDataBody] = {
      header(kCopyData, kCopyDataBody),
      std::uint32_t(source) | kCopyDstMemory << 8 | (bits64 ? 1u : 0u) << 16 | 1u << 20,
      lo(source_value), hi(source_value),
      lo(address), hi(address)};
  emit(p);
}

}  // namespace rig::amd::pm4
