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
}

void Pm4::need(std::uint32_t dwords) const {
  if (std::uint64_t(written_) + dwords > out_.size())
    throw std::length_error(fmt::format("PM4: a packet of {} dwords does not fit: {} of {} used",
                                        dwords, written_, out_.size()));
}

void Pm4::put(std::uint32_t word) {
  out_[(start_ + written_) % out_.size()] = word;
  ++written_;
}

void Pm4::no_gfx9(const char* packet) const {
  if (gen_ == Gen::Gfx9_4)
    throw std::invalid_argument(
        fmt::format("PM4 {} for gfx9.4 (CP_COHER_CNTL cache actions) is not built yet", packet));
}

void Pm4::nop(std::uint32_t dwords) {
  if (dwords < 1 || dwords > 0x4000)
    throw std::invalid_argument(fmt::format("PM4 NOP of {} dwords: 1 ..= 16384", dwords));
  need(dwords);
  // A one-dword NOP is the header with count 0x3fff, which the CP reads as "no body".
  put(dwords == 1 ? kType3 | 0x3fffu << 16 | kNop << 8 | kShaderCompute : header(kNop, dwords - 1));
  for (std::uint32_t i = 1; i < dwords; ++i) put(0);
}

void Pm4::set_sh_reg(std::uint32_t first, std::span<const std::uint32_t> values) {
  if (values.empty() || first < kShRegStart || first + values.size() > kShRegEnd)
    throw std::invalid_argument(fmt::format(
        "PM4 SET_SH_REG of {} registers from {:#x}: outside the SH registers", values.size(), first));
  need(set_sh_reg_size(std::uint32_t(values.size())));
  put(header(kSetShReg, std::uint32_t(values.size()) + 1));
  put(first - kShRegStart);
  for (auto v : values) put(v);
}

void Pm4::dispatch_direct(std::uint32_t x, std::uint32_t y, std::uint32_t z, bool wave32) {
  if (!x || !y || !z)
    throw std::invalid_argument(fmt::format("PM4 DISPATCH_DIRECT of an empty grid {}x{}x{}", x, y, z));
  if (wave32 && gen_ == Gen::Gfx9_4)
    throw std::invalid_argument("PM4 DISPATCH_DIRECT: gfx9.4 has no wave32");
  need(1 + kDispatchDirectBody);
  put(header(kDispatchDirect, kDispatchDirectBody));
  put(x), put(y), put(z);
  put(kInitiatorComputeShaderEn | kInitiatorForceStartAt000 | (wave32 ? kInitiatorCsW32En : 0));
}

void Pm4::release_mem(const Release& r) {
  no_gfx9("RELEASE_MEM");
  if (r.data_sel == DataSel::Low32) aligned(r.address, 4, "RELEASE_MEM");
  if (r.data_sel == DataSel::Data64 || r.data_sel == DataSel::GpuClock) aligned(r.address, 8, "RELEASE_MEM");
  std::uint32_t gcr = 0;
  if (r.write_back) {
    gcr = kReleaseGlvInv | kReleaseGl2Inv | kReleaseGl2Wb | kReleaseGcrSeq;
    if (gen_ == Gen::Gfx11) gcr |= kReleaseGl1Inv | kReleaseGlmWb | kReleaseGlmInv;
  }
  need(1 + kReleaseMemBody);
  put(header(kReleaseMem, kReleaseMemBody));
  put(kEventCacheFlushAndInvTs | kEventIndexEndOfPipe << 8 | gcr);
  // dst_sel 0 (memory controller), int_sel in bits 24..26, data_sel in bits 29..31.
  put(std::uint32_t(r.int_sel) << 24 | std::uint32_t(r.data_sel) << 29);
  put(lo(r.address)), put(hi(r.address));
  put(lo(r.data)), put(hi(r.data));
  put(r.context);
}

void Pm4::acquire_mem() {
  no_gfx9("ACQUIRE_MEM");
  std::uint32_t gcr = kAcquireGliInv | kAcquireGlkWb | kAcquireGlkInv | kAcquireGlvInv |
                      kAcquireGl2Inv | kAcquireGl2Wb;
  if (gen_ == Gen::Gfx11) gcr |= kAcquireGlmWb | kAcquireGlmInv | kAcquireGl1Inv;
  need(1 + kAcquireMemBody);
  put(header(kAcquireMem, kAcquireMemBody));
  put(0);           // reserved
  put(0xffffffff);  // coher_size: all memory
  put(0xff);        // coher_size_hi (8 bits)
  put(0), put(0);   // coher_base
  put(10);          // poll_interval
  put(gcr);
}

void Pm4::cs_partial_flush() {
  need(1 + kEventWriteBody);
  put(header(kEventWrite, kEventWriteBody));
  put(kEventCsPartialFlush | kEventIndexCsPartialFlush << 8);
}

void Pm4::wait_mem32(std::uint64_t address, Compare compare, std::uint32_t reference, std::uint32_t mask) {
  aligned(address, 4, "WAIT_REG_MEM");
  need(1 + kWaitRegMemBody);
  put(header(kWaitRegMem, kWaitRegMemBody));
  put(std::uint32_t(compare) | 1u << 4);  // mem_space 1: memory; operation 0; engine ME
  put(lo(address)), put(hi(address));
  put(reference), put(mask);
  put(4);  // poll_interval
}

void Pm4::wait_mem64(std::uint64_t address, Compare compare, std::uint64_t reference, std::uint64_t mask) {
  aligned(address, 8, "WAIT_REG_MEM64");
  need(1 + kWaitRegMem64Body);
  put(header(kWaitRegMem64, kWaitRegMem64Body));
  put(std::uint32_t(compare) | 1u << 4);
  put(lo(address)), put(hi(address));
  put(lo(reference)), put(hi(reference));
  put(lo(mask)), put(hi(mask));
  put(4);
}

void Pm4::indirect_buffer(std::uint64_t address, std::uint32_t dwords) {
  aligned(address, 4, "INDIRECT_BUFFER");
  if (dwords < 1 || dwords > kIndirectBufferMaxDwords)
    throw std::invalid_argument(fmt::format("PM4 INDIRECT_BUFFER of {} dwords: 1 ..= 2^20 - 1", dwords));
  need(1 + kIndirectBufferBody);
  put(header(kIndirectBuffer, kIndirectBufferBody));
  put(lo(address)), put(hi(address));
  put(dwords | 1u << 23);  // ib_size, valid
}

void Pm4::write_data(std::uint64_t address, std::span<const std::uint32_t> data) {
  aligned(address, 4, "WRITE_DATA");
  if (data.empty() || data.size() > 0x3ffd)
    throw std::invalid_argument(fmt::format("PM4 WRITE_DATA of {} dwords: 1 ..= 16381", data.size()));
  need(write_data_size(std::uint32_t(data.size())));
  put(header(kWriteData, std::uint32_t(data.size()) + 3));
  put(kWriteDstMemory << 8 | 1u << 20);  // dst_sel memory, wr_confirm
  put(lo(address)), put(hi(address));
  for (auto d : data) put(d);
}

void Pm4::copy_data(CopySrc source, std::uint64_t source_value, std::uint64_t address, bool bits64) {
  if (source == CopySrc::GpuClock) bits64 = true;
  aligned(address, bits64 ? 8 : 4, "COPY_DATA");
  if (source == CopySrc::Memory) aligned(source_value, bits64 ? 8 : 4, "COPY_DATA");
  need(1 + kCopyDataBody);
  put(header(kCopyData, kCopyDataBody));
  put(std::uint32_t(source) | kCopyDstMemory << 8 | (bits64 ? 1u : 0u) << 16 | 1u << 20);
  put(lo(source_value)), put(hi(source_value));
  put(lo(address)), put(hi(address));
}

}  // namespace rig::amd::pm4
