// qmd.cpp — the QMD builders (qmd.hpp).
#include "qmd.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace rig::nv {

namespace {

[[noreturn]] void refuse(bool v04, const std::string& why) {
  throw std::invalid_argument(fmt::format("QMD {}: {}", v04 ? "V04_00" : "V03_00", why));
}

constexpr std::uint32_t shared_config(std::uint32_t bytes) { return bytes / 4096 + 1; }

}  // namespace

Qmd Qmd::v04() {
  Qmd q(true);
  q.set(qmd_v04::QMD_MAJOR_VERSION, 4).set(qmd_v04::QMD_MINOR_VERSION, 0);
  q.set(qmd_v04::QMD_TYPE, qmd_v04::QMD_TYPE_GRID_CTA);
  q.set(qmd_v04::API_VISIBLE_CALL_LIMIT, 1).set(qmd_v04::SAMPLER_INDEX, 1);
  return q;
}

Qmd Qmd::v03() {
  Qmd q(false);
  q.set(qmd_v03::QMD_MAJOR_VERSION, 3).set(qmd_v03::QMD_VERSION, 0).set(qmd_v03::IS_QUEUE, 0);
  q.set(qmd_v03::API_VISIBLE_CALL_LIMIT, 1).set(qmd_v03::SAMPLER_INDEX, 1);
  return q;
}

Qmd& Qmd::set(const Qmd_field& f, std::uint64_t value) {
  const unsigned width = f.hi - f.lo + 1;
  if (f.hi < f.lo || width > 64 || f.hi >= words().size() * 32)
    refuse(v04_, fmt::format("{} ({}:{}) is not a field of a {}-word QMD", f.name, f.hi, f.lo, words().size()));
  if (width < 64 && (value >> width) != 0)
    refuse(v04_, fmt::format("{} = {:#x} does not fit {} bits", f.name, value, width));
  for (unsigned b = 0; b < width; ++b) {
    const unsigned at = f.lo + b;
    const std::uint32_t bit = 1u << (at % 32);
    words_[at / 32] = ((value >> b) & 1) ? (words_[at / 32] | bit) : (words_[at / 32] & ~bit);
  }
  return *this;
}

std::uint64_t Qmd::get(const Qmd_field& f) const {
  std::uint64_t v = 0;
  for (unsigned at = f.hi + 1; at-- > f.lo;) {
    v <<= 1;
    if (at / 32 < words().size()) v |= (words_[at / 32] >> (at % 32)) & 1;
  }
  return v;
}

Qmd& Qmd::grid(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  if (x == 0 || y == 0 || z == 0) refuse(v04_, fmt::format("a grid of {}x{}x{} CTAs", x, y, z));
  if (v04_) return set(qmd_v04::GRID_WIDTH, x).set(qmd_v04::GRID_HEIGHT, y).set(qmd_v04::GRID_DEPTH, z);
  return set(qmd_v03::CTA_RASTER_WIDTH, x).set(qmd_v03::CTA_RASTER_HEIGHT, y).set(qmd_v03::CTA_RASTER_DEPTH, z);
}

Qmd& Qmd::block(std::uint32_t x, std::uint32_t y, std::uint32_t z) {
  if (x == 0 || y == 0 || z == 0) refuse(v04_, fmt::format("a CTA of {}x{}x{} threads", x, y, z));
  if (v04_)
    return set(qmd_v04::CTA_THREAD_DIMENSION0, x).set(qmd_v04::CTA_THREAD_DIMENSION1, y).set(qmd_v04::CTA_THREAD_DIMENSION2, z);
  return set(qmd_v03::CTA_THREAD_DIMENSION0, x).set(qmd_v03::CTA_THREAD_DIMENSION1, y).set(qmd_v03::CTA_THREAD_DIMENSION2, z);
}

Qmd& Qmd::register_count(std::uint32_t registers) {
  return set(v04_ ? qmd_v04::REGISTER_COUNT : qmd_v03::REGISTER_COUNT_V, registers);
}

Qmd& Qmd::barrier_count(std::uint32_t barriers) {
  return set(v04_ ? qmd_v04::BARRIER_COUNT : qmd_v03::BARRIER_COUNT, barriers);
}

Qmd& Qmd::shared_memory(std::uint32_t bytes, std::uint32_t min_config, std::uint32_t max_config,
                        std::uint32_t target_config) {
  for (std::uint32_t c : {min_config, max_config, target_config})
    if (c % 4096 != 0) refuse(v04_, fmt::format("an SM shared memory configuration of {} bytes (not a multiple of 4 KiB)", c));
  if (min_config > target_config || target_config > max_config)
    refuse(v04_, fmt::format("SM shared memory configurations min {} target {} max {} are not in order", min_config,
                             target_config, max_config));
  if (bytes > target_config)
    refuse(v04_, fmt::format("{} bytes of shared memory exceed the target configuration of {}", bytes, target_config));
  if (v04_)
    return set(qmd_v04::SHARED_MEMORY_SIZE, bytes)
        .set(qmd_v04::MIN_SM_CONFIG_SHARED_MEM_SIZE, shared_config(min_config))
        .set(qmd_v04::MAX_SM_CONFIG_SHARED_MEM_SIZE, shared_config(max_config))
        .set(qmd_v04::TARGET_SM_CONFIG_SHARED_MEM_SIZE, shared_config(target_config));
  return set(qmd_v03::SHARED_MEMORY_SIZE, bytes)
      .set(qmd_v03::MIN_SM_CONFIG_SHARED_MEM_SIZE, shared_config(min_config))
      .set(qmd_v03::MAX_SM_CONFIG_SHARED_MEM_SIZE, shared_config(max_config))
      .set(qmd_v03::TARGET_SM_CONFIG_SHARED_MEM_SIZE, shared_config(target_config));
}

Qmd& Qmd::program_address(std::uint64_t address) {
  if (v04_)
    return set(qmd_v04::PROGRAM_ADDRESS_LOWER, address & 0xffffffffu).set(qmd_v04::PROGRAM_ADDRESS_UPPER, address >> 32);
  return set(qmd_v03::PROGRAM_ADDRESS_LOWER, address & 0xffffffffu).set(qmd_v03::PROGRAM_ADDRESS_UPPER, address >> 32);
}

Qmd& Qmd::constant_buffer(unsigned i, std::uint64_t address, std::uint32_t size) {
  if (i >= QMD_CONSTANT_BUFFERS) refuse(v04_, fmt::format("constant buffer {} (0..7)", i));
  if (size % 16 != 0 || size > 0x10000)
    refuse(v04_, fmt::format("constant buffer {} of {} bytes (a multiple of 16 up to 64 KiB)", i, size));
  if (v04_) {
    if (address % 64 != 0) refuse(v04_, fmt::format("constant buffer {} at {:#x} is not 64-aligned", i, address));
    return set(qmd_v04::CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(i), (address >> 6) & 0xffffffffu)
        .set(qmd_v04::CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(i), address >> 38)
        .set(qmd_v04::CONSTANT_BUFFER_SIZE_SHIFTED4(i), size >> 4)
        .set(qmd_v04::CONSTANT_BUFFER_VALID(i), 1);
  }
  return set(qmd_v03::CONSTANT_BUFFER_ADDR_LOWER(i), address & 0xffffffffu)
      .set(qmd_v03::CONSTANT_BUFFER_ADDR_UPPER(i), address >> 32)
      .set(qmd_v03::CONSTANT_BUFFER_SIZE_SHIFTED4(i), size >> 4)
      .set(qmd_v03::CONSTANT_BUFFER_VALID(i), 1);
}

Qmd& Qmd::release(unsigned i, std::uint64_t address, std::uint64_t payload, bool payload_64, bool membar) {
  if (i >= QMD_RELEASES) refuse(v04_, fmt::format("release {} (0..2)", i));
  if (address % 8 != 0) refuse(v04_, fmt::format("release {} at {:#x} is not 8-aligned", i, address));
  if (!payload_64 && payload > 0xffffffffu)
    refuse(v04_, fmt::format("release {} of {:#x}: a one-word release carries 32 bits", i, payload));
  const std::uint32_t size =
      payload_64 ? RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS : RELEASE_STRUCTURE_SIZE_SEMAPHORE_ONE_WORD;
  if (v04_)
    return set(qmd_v04::RELEASE_SEMAPHORE_ADDR_LOWER(i), address & 0xffffffffu)
        .set(qmd_v04::RELEASE_SEMAPHORE_ADDR_UPPER(i), address >> 32)
        .set(qmd_v04::RELEASE_SEMAPHORE_PAYLOAD_LOWER(i), payload & 0xffffffffu)
        .set(qmd_v04::RELEASE_SEMAPHORE_PAYLOAD_UPPER(i), payload >> 32)
        .set(qmd_v04::RELEASE_STRUCTURE_SIZE(i), size)
        .set(qmd_v04::RELEASE_PAYLOAD64B(i), payload_64)
        .set(qmd_v04::RELEASE_MEMBAR_TYPE(i), membar)
        .set(qmd_v04::RELEASE_ENABLE(i), 1);
  return set(qmd_v03::RELEASE_ADDRESS_LOWER(i), address & 0xffffffffu)
      .set(qmd_v03::RELEASE_ADDRESS_UPPER(i), address >> 32)
      .set(qmd_v03::RELEASE_PAYLOAD_LOWER(i), payload & 0xffffffffu)
      .set(qmd_v03::RELEASE_PAYLOAD_UPPER(i), payload >> 32)
      .set(qmd_v03::RELEASE_STRUCTURE_SIZE(i), size)
      .set(qmd_v03::RELEASE_PAYLOAD64B(i), payload_64)
      .set(qmd_v03::RELEASE_MEMBAR_TYPE(i), membar)
      .set(qmd_v03::RELEASE_ENABLE(i), 1);
}

Qmd& Qmd::local_memory(std::uint32_t low, std::uint32_t high) {
  if (low % 16 != 0 || high % 16 != 0)
    refuse(v04_, fmt::format("local memory sizes {} and {} bytes (multiples of 16)", low, high));
  if (v04_) return set(qmd_v04::SHADER_LOCAL_MEMORY_LOW_SIZE, low).set(qmd_v04::SHADER_LOCAL_MEMORY_HIGH_SIZE, high);
  return set(qmd_v03::SHADER_LOCAL_MEMORY_LOW_SIZE, low).set(qmd_v03::SHADER_LOCAL_MEMORY_HIGH_SIZE, high);
}

Qmd& Qmd::invalidate_caches() {
  if (v04_)
    return set(qmd_v04::INVALIDATE_TEXTURE_HEADER_CACHE, 1)
        .set(qmd_v04::INVALIDATE_TEXTURE_SAMPLER_CACHE, 1)
        .set(qmd_v04::INVALIDATE_TEXTURE_DATA_CACHE, 1)
        .set(qmd_v04::INVALIDATE_SHADER_DATA_CACHE, 1)
        .set(qmd_v04::INVALIDATE_INSTRUCTION_CACHE, 1)
        .set(qmd_v04::INVALIDATE_SHADER_CONSTANT_CACHE, 1);
  return set(qmd_v03::INVALIDATE_TEXTURE_HEADER_CACHE, 1)
      .set(qmd_v03::INVALIDATE_TEXTURE_SAMPLER_CACHE, 1)
      .set(qmd_v03::INVALIDATE_TEXTURE_DATA_CACHE, 1)
      .set(qmd_v03::INVALIDATE_SHADER_DATA_CACHE, 1)
      .set(qmd_v03::INVALIDATE_INSTRUCTION_CACHE, 1)
      .set(qmd_v03::INVALIDATE_SHADER_CONSTANT_CACHE, 1);
}

Qmd& Qmd::sass_version(std::uint32_t version) {
  return set(v04_ ? qmd_v04::SASS_VERSION : qmd_v03::SASS_VERSION, version);
}

}  // namespace rig::nv
