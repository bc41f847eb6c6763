// SDMA packets (sdma.hpp).
#include "sdma.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace rig::amd::sdma {
namespace {

std::uint32_t lo(std::uint64_t v) { return std::uint32_t(v); }
std::uint32_t hi(std::uint64_t v) { return std::uint32_t(v >> 32); }
constexpr std::uint32_t op(std::uint32_t o, std::uint32_t sub = 0) { return o | sub << 8; }

void aligned(std::uint64_t address, std::uint64_t to, const char* packet) {
  if (address % to)
    throw std::invalid_argument(
        fmt::format("SDMA {}: address {:#x} is not {}-byte aligned", packet, address, to));
}

}  // namespace

Sdma::Sdma(std::span<std::uint32_t> ring, std::uint64_t start, Version version)
    : ring_(ring), start_(start), chunk_(max_chunk(version)) {
  if (ring.empty()) throw std::invalid_argument("SDMA: no ring to write into");
  at_ = start % ring.size();
}

std::uint32_t Sdma::cost(std::uint32_t dwords) const {
  std::uint64_t left = ring_.size() - at_;
  return dwords <= left ? dwords : std::uint32_t(left) + dwords;
}

void Sdma::begin(std::uint32_t dwords) {
  if (dwords > ring_.size())
    throw std::length_error(fmt::format("SDMA: a packet of {} dwords exceeds the ring of {}", dwords,
                                        ring_.size()));
  std::uint32_t total = cost(dwords);
  if (std::uint64_t(written_) + total > ring_.size())
    throw std::length_error(fmt::format("SDMA: a packet of {} dwords does not fit: {} of {} used",
                                        total, written_, ring_.size()));
  for (std::uint32_t pad = total - dwords; pad; --pad) put(op(kOpNop));
}

std::uint32_t Sdma::copy_linear(std::uint64_t dst, std::uint64_t src, std::uint64_t bytes) {
  if (bytes == 0) throw std::invalid_argument("SDMA COPY_LINEAR of 0 bytes");
  std::uint32_t packets = 0;
  for (std::uint64_t done = 0; done < bytes; done += chunk_, ++packets) {
    std::uint64_t n = std::min(chunk_, bytes - done);
    begin(kCopyLinearSize);
    put(op(kOpCopy, kSubCopyLinear));
    put(std::uint32_t(n - 1));
    put(0);  // parameter: no swaps
    put(lo(src + done)), put(hi(src + done));
    put(lo(dst + done)), put(hi(dst + done));
  }
  return packets;
}

std::uint32_t Sdma::fill(std::uint64_t dst, std::uint8_t byte, std::uint64_t bytes) {
  if (bytes == 0) throw std::invalid_argument("SDMA CONSTANT_FILL of 0 bytes");
  bool dwords = dst % 4 == 0 && bytes % 4 == 0;
  std::uint32_t data = dwords ? byte * 0x01010101u : byte;
  std::uint32_t packets = 0;
  for (std::uint64_t done = 0; done < bytes; done += chunk_, ++packets) {
    std::uint64_t n = std::min(chunk_, bytes - done);
    begin(kConstFillSize);
    put(op(kOpConstFill) | (dwords ? 2u : 0u) << kFillSizeShift);
    put(lo(dst + done)), put(hi(dst + done));
    put(data);
    put(std::uint32_t(n - 1));
  }
  return packets;
}

void Sdma::fence(std::uint64_t address, std::uint32_t value) {
  aligned(address, 4, "FENCE");
  begin(kFenceSize);
  put(op(kOpFence) | kFenceMtypeUncached << kFenceMtypeShift);
  put(lo(address)), put(hi(address));
  put(value);
}

void Sdma::trap(std::uint32_t context) {
  if (context >> 28) throw std::invalid_argument(fmt::format("SDMA TRAP context {:#x}: 28 bits", context));
  begin(kTrapSize);
  put(op(kOpTrap));
  put(context);
}

void Sdma::poll_mem(std::uint64_t address, Compare compare, std::uint32_t reference, std::uint32_t mask) {
  aligned(address, 4, "POLL_REGMEM");
  begin(kPollRegmemSize);
  put(op(kOpPollRegmem) | std::uint32_t(compare) << kPollFuncShift | 1u << kPollMemShift);
  put(lo(address)), put(hi(address));
  put(reference), put(mask);
  put(10 | 0xfffu << 16);  // interval 10, retry count 0xfff (retry forever)
}

void Sdma::timestamp(std::uint64_t address) {
  aligned(address, 8, "TIMESTAMP");
  begin(kTimestampSize);
  put(op(kOpTimestamp, kSubTimestampGetGlobal));
  put(lo(address)), put(hi(address));
}

void Sdma::write(std::uint64_t address, std::span<const std::uint32_t> data) {
  aligned(address, 4, "WRITE_LINEAR");
  if (data.empty() || data.size() > kMaxWriteDwords)
    throw std::invalid_argument(fmt::format("SDMA WRITE_LINEAR of {} dwords: 1 ..= 2^20", data.size()));
  begin(write_size(std::uint32_t(data.size())));
  put(op(kOpWrite, kSubWriteLinear));
  put(lo(address)), put(hi(address));
  put(std::uint32_t(data.size() - 1));
  for (auto d : data) put(d);
}

void Sdma::nop(std::uint32_t dwords) {
  for (std::uint32_t i = 0; i < dwords; ++i) {
    begin(1);
    put(op(kOpNop));
  }
}

}  // namespace rig::amd::sdma
