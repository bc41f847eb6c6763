// qmd.hpp — Queue Meta Data: the launch descriptor the compute class reads at SEND_PCAS_A's
// address. V04_00 (Hopper, CBC0: 96 words, 384 bytes) from NVIDIA/open-gpu-doc
// classes/compute/clcbc0qmd.h, V03_00 (Ampere, C6C0: 64 words, 256 bytes) from clc6c0qmd.h.
//
// Each field is a named (hi, lo) constant spelled as the header spells it (without its
// NVCBC0_QMDV04_00_ / NVC6C0_QMDV03_00_ prefix), and bit hi..lo of the QMD as a little-endian
// bit string of 32-bit words, as the headers' MW(hi:lo) number them. Pure code: words out.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace rig::nv {

struct Qmd_field {
  unsigned hi, lo;
  std::string_view name;
};

namespace qmd_v04 {  // clcbc0qmd.h NVCBC0_QMDV04_00_*
inline constexpr std::size_t WORDS = 96;
inline constexpr Qmd_field QMD_TYPE{25, 23, "QMD_TYPE"};
inline constexpr std::uint32_t QMD_TYPE_GRID_CTA = 2;
inline constexpr Qmd_field SHADER_LOCAL_MEMORY_LOW_SIZE{535, 512, "SHADER_LOCAL_MEMORY_LOW_SIZE"};
inline constexpr Qmd_field SASS_VERSION{543, 536, "SASS_VERSION"};
inline constexpr Qmd_field SHADER_LOCAL_MEMORY_HIGH_SIZE{567, 544, "SHADER_LOCAL_MEMORY_HIGH_SIZE"};
inline constexpr Qmd_field API_VISIBLE_CALL_LIMIT{568, 568, "API_VISIBLE_CALL_LIMIT"};  // 1: NO_CHECK
inline constexpr Qmd_field SAMPLER_INDEX{569, 569, "SAMPLER_INDEX"};
inline constexpr Qmd_field QMD_MINOR_VERSION{579, 576, "QMD_MINOR_VERSION"};
inline constexpr Qmd_field QMD_MAJOR_VERSION{583, 580, "QMD_MAJOR_VERSION"};
inline constexpr Qmd_field SHARED_MEMORY_SIZE{601, 584, "SHARED_MEMORY_SIZE"};
inline constexpr Qmd_field INVALIDATE_TEXTURE_HEADER_CACHE{602, 602, "INVALIDATE_TEXTURE_HEADER_CACHE"};
inline constexpr Qmd_field INVALIDATE_TEXTURE_SAMPLER_CACHE{603, 603, "INVALIDATE_TEXTURE_SAMPLER_CACHE"};
inline constexpr Qmd_field INVALIDATE_TEXTURE_DATA_CACHE{604, 604, "INVALIDATE_TEXTURE_DATA_CACHE"};
inline constexpr Qmd_field INVALIDATE_SHADER_DATA_CACHE{605, 605, "INVALIDATE_SHADER_DATA_CACHE"};
inline constexpr Qmd_field INVALIDATE_INSTRUCTION_CACHE{606, 606, "INVALIDATE_INSTRUCTION_CACHE"};
inline constexpr Qmd_field INVALIDATE_SHADER_CONSTANT_CACHE{607, 607, "INVALIDATE_SHADER_CONSTANT_CACHE"};
inline constexpr Qmd_field MIN_SM_CONFIG_SHARED_MEM_SIZE{613, 608, "MIN_SM_CONFIG_SHARED_MEM_SIZE"};
inline constexpr Qmd_field MAX_SM_CONFIG_SHARED_MEM_SIZE{619, 614, "MAX_SM_CONFIG_SHARED_MEM_SIZE"};
inline constexpr Qmd_field TARGET_SM_CONFIG_SHARED_MEM_SIZE{625, 620, "TARGET_SM_CONFIG_SHARED_MEM_SIZE"};
inline constexpr Qmd_field GRID_WIDTH{1055, 1024, "GRID_WIDTH"};
inline constexpr Qmd_field GRID_HEIGHT{1071, 1056, "GRID_HEIGHT"};
inline constexpr Qmd_field GRID_DEPTH{1103, 1088, "GRID_DEPTH"};
inline constexpr Qmd_field CWD_MEMBAR_TYPE{1137, 1136, "CWD_MEMBAR_TYPE"};
inline constexpr Qmd_field CTA_THREAD_DIMENSION0{1167, 1152, "CTA_THREAD_DIMENSION0"};
inline constexpr Qmd_field CTA_THREAD_DIMENSION1{1183, 1168, "CTA_THREAD_DIMENSION1"};
inline constexpr Qmd_field CTA_THREAD_DIMENSION2{1199, 1184, "CTA_THREAD_DIMENSION2"};
inline constexpr Qmd_field REGISTER_COUNT{1208, 1200, "REGISTER_COUNT"};
inline constexpr Qmd_field BARRIER_COUNT{1215, 1211, "BARRIER_COUNT"};
inline constexpr Qmd_field PROGRAM_ADDRESS_LOWER{1247, 1216, "PROGRAM_ADDRESS_LOWER"};
inline constexpr Qmd_field PROGRAM_ADDRESS_UPPER{1272, 1248, "PROGRAM_ADDRESS_UPPER"};
// Indexed fields: RELEASE_*(i) for i < 3, CONSTANT_BUFFER_*(i) for i < 8.
constexpr Qmd_field RELEASE_ENABLE(unsigned i) { return {320 + 16 * i, 320 + 16 * i, "RELEASE_ENABLE"}; }
constexpr Qmd_field RELEASE_STRUCTURE_SIZE(unsigned i) { return {322 + 16 * i, 321 + 16 * i, "RELEASE_STRUCTURE_SIZE"}; }
constexpr Qmd_field RELEASE_MEMBAR_TYPE(unsigned i) { return {323 + 16 * i, 323 + 16 * i, "RELEASE_MEMBAR_TYPE"}; }
constexpr Qmd_field RELEASE_PAYLOAD64B(unsigned i) { return {332 + 16 * i, 332 + 16 * i, "RELEASE_PAYLOAD64B"}; }
constexpr Qmd_field CONSTANT_BUFFER_VALID(unsigned i) { return {416 + 4 * i, 416 + 4 * i, "CONSTANT_BUFFER_VALID"}; }
// RELEASE_SEMAPHOREi_ADDR_LOWER/UPPER, PAYLOAD_LOWER/UPPER: 128 bits apart from 640.
constexpr Qmd_field RELEASE_SEMAPHORE_ADDR_LOWER(unsigned i) { return {671 + 128 * i, 640 + 128 * i, "RELEASE_SEMAPHORE_ADDR_LOWER"}; }
constexpr Qmd_field RELEASE_SEMAPHORE_ADDR_UPPER(unsigned i) { return {696 + 128 * i, 672 + 128 * i, "RELEASE_SEMAPHORE_ADDR_UPPER"}; }
constexpr Qmd_field RELEASE_SEMAPHORE_PAYLOAD_LOWER(unsigned i) { return {735 + 128 * i, 704 + 128 * i, "RELEASE_SEMAPHORE_PAYLOAD_LOWER"}; }
constexpr Qmd_field RELEASE_SEMAPHORE_PAYLOAD_UPPER(unsigned i) { return {767 + 128 * i, 736 + 128 * i, "RELEASE_SEMAPHORE_PAYLOAD_UPPER"}; }
constexpr Qmd_field CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(unsigned i) { return {1567 + 64 * i, 1536 + 64 * i, "CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6"}; }
constexpr Qmd_field CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6(unsigned i) { return {1586 + 64 * i, 1568 + 64 * i, "CONSTANT_BUFFER_ADDR_UPPER_SHIFTED6"}; }
constexpr Qmd_field CONSTANT_BUFFER_SIZE_SHIFTED4(unsigned i) { return {1599 + 64 * i, 1587 + 64 * i, "CONSTANT_BUFFER_SIZE_SHIFTED4"}; }
}  // namespace qmd_v04

namespace qmd_v03 {  // clc6c0qmd.h NVC6C0_QMDV03_00_*
inline constexpr std::size_t WORDS = 64;
inline constexpr Qmd_field IS_QUEUE{136, 136, "IS_QUEUE"};
inline constexpr Qmd_field INVALIDATE_TEXTURE_HEADER_CACHE{186, 186, "INVALIDATE_TEXTURE_HEADER_CACHE"};
inline constexpr Qmd_field INVALIDATE_TEXTURE_SAMPLER_CACHE{187, 187, "INVALIDATE_TEXTURE_SAMPLER_CACHE"};
inline constexpr Qmd_field INVALIDATE_TEXTURE_DATA_CACHE{188, 188, "INVALIDATE_TEXTURE_DATA_CACHE"};
inline constexpr Qmd_field INVALIDATE_SHADER_DATA_CACHE{189, 189, "INVALIDATE_SHADER_DATA_CACHE"};
inline constexpr Qmd_field INVALIDATE_INSTRUCTION_CACHE{190, 190, "INVALIDATE_INSTRUCTION_CACHE"};
inline constexpr Qmd_field INVALIDATE_SHADER_CONSTANT_CACHE{191, 191, "INVALIDATE_SHADER_CONSTANT_CACHE"};
inline constexpr Qmd_field CWD_MEMBAR_TYPE{369, 368, "CWD_MEMBAR_TYPE"};
inline constexpr Qmd_field API_VISIBLE_CALL_LIMIT{378, 378, "API_VISIBLE_CALL_LIMIT"};
inline constexpr Qmd_field SAMPLER_INDEX{382, 382, "SAMPLER_INDEX"};
inline constexpr Qmd_field CTA_RASTER_WIDTH{415, 384, "CTA_RASTER_WIDTH"};
inline constexpr Qmd_field CTA_RASTER_HEIGHT{431, 416, "CTA_RASTER_HEIGHT"};
inline constexpr Qmd_field CTA_RASTER_DEPTH{463, 448, "CTA_RASTER_DEPTH"};
inline constexpr Qmd_field SHARED_MEMORY_SIZE{561, 544, "SHARED_MEMORY_SIZE"};
inline constexpr Qmd_field MIN_SM_CONFIG_SHARED_MEM_SIZE{567, 562, "MIN_SM_CONFIG_SHARED_MEM_SIZE"};
inline constexpr Qmd_field MAX_SM_CONFIG_SHARED_MEM_SIZE{574, 569, "MAX_SM_CONFIG_SHARED_MEM_SIZE"};
inline constexpr Qmd_field QMD_VERSION{579, 576, "QMD_VERSION"};
inline constexpr Qmd_field QMD_MAJOR_VERSION{583, 580, "QMD_MAJOR_VERSION"};
inline constexpr Qmd_field CTA_THREAD_DIMENSION0{607, 592, "CTA_THREAD_DIMENSION0"};
inline constexpr Qmd_field CTA_THREAD_DIMENSION1{623, 608, "CTA_THREAD_DIMENSION1"};
inline constexpr Qmd_field CTA_THREAD_DIMENSION2{639, 624, "CTA_THREAD_DIMENSION2"};
inline constexpr Qmd_field REGISTER_COUNT_V{656, 648, "REGISTER_COUNT_V"};
inline constexpr Qmd_field TARGET_SM_CONFIG_SHARED_MEM_SIZE{662, 657, "TARGET_SM_CONFIG_SHARED_MEM_SIZE"};
inline constexpr Qmd_field SHADER_LOCAL_MEMORY_LOW_SIZE{759, 736, "SHADER_LOCAL_MEMORY_LOW_SIZE"};
inline constexpr Qmd_field BARRIER_COUNT{767, 763, "BARRIER_COUNT"};
inline constexpr Qmd_field PROGRAM_ADDRESS_LOWER{1567, 1536, "PROGRAM_ADDRESS_LOWER"};
inline constexpr Qmd_field PROGRAM_ADDRESS_UPPER{1584, 1568, "PROGRAM_ADDRESS_UPPER"};
inline constexpr Qmd_field SHADER_LOCAL_MEMORY_HIGH_SIZE{1623, 1600, "SHADER_LOCAL_MEMORY_HIGH_SIZE"};
inline constexpr Qmd_field SASS_VERSION{1663, 1656, "SASS_VERSION"};
constexpr Qmd_field CONSTANT_BUFFER_VALID(unsigned i) { return {640 + i, 640 + i, "CONSTANT_BUFFER_VALID"}; }
constexpr Qmd_field CONSTANT_BUFFER_ADDR_LOWER(unsigned i) { return {1055 + 64 * i, 1024 + 64 * i, "CONSTANT_BUFFER_ADDR_LOWER"}; }
constexpr Qmd_field CONSTANT_BUFFER_ADDR_UPPER(unsigned i) { return {1072 + 64 * i, 1056 + 64 * i, "CONSTANT_BUFFER_ADDR_UPPER"}; }
constexpr Qmd_field CONSTANT_BUFFER_SIZE_SHIFTED4(unsigned i) { return {1087 + 64 * i, 1075 + 64 * i, "CONSTANT_BUFFER_SIZE_SHIFTED4"}; }
// RELEASE0 at 768, RELEASE1 at 896, RELEASE2 at 1664: the same fields at the same offsets
// from each base.
constexpr unsigned release_base(unsigned i) { return i == 0 ? 768 : i == 1 ? 896 : 1664; }
constexpr Qmd_field RELEASE_ADDRESS_LOWER(unsigned i) { return {release_base(i) + 31, release_base(i), "RELEASE_ADDRESS_LOWER"}; }
constexpr Qmd_field RELEASE_ADDRESS_UPPER(unsigned i) { return {release_base(i) + 39, release_base(i) + 32, "RELEASE_ADDRESS_UPPER"}; }
constexpr Qmd_field RELEASE_MEMBAR_TYPE(unsigned i) { return {release_base(i) + 51, release_base(i) + 51, "RELEASE_MEMBAR_TYPE"}; }
constexpr Qmd_field RELEASE_ENABLE(unsigned i) { return {release_base(i) + 55, release_base(i) + 55, "RELEASE_ENABLE"}; }
constexpr Qmd_field RELEASE_PAYLOAD64B(unsigned i) { return {release_base(i) + 61, release_base(i) + 61, "RELEASE_PAYLOAD64B"}; }
constexpr Qmd_field RELEASE_STRUCTURE_SIZE(unsigned i) { return {release_base(i) + 63, release_base(i) + 62, "RELEASE_STRUCTURE_SIZE"}; }
constexpr Qmd_field RELEASE_PAYLOAD_LOWER(unsigned i) { return {release_base(i) + 95, release_base(i) + 64, "RELEASE_PAYLOAD_LOWER"}; }
constexpr Qmd_field RELEASE_PAYLOAD_UPPER(unsigned i) { return {release_base(i) + 127, release_base(i) + 96, "RELEASE_PAYLOAD_UPPER"}; }
}  // namespace qmd_v03

// RELEASE_STRUCTURE_SIZE values (both headers).
inline constexpr std::uint32_t RELEASE_STRUCTURE_SIZE_SEMAPHORE_FOUR_WORDS = 0;
inline constexpr std::uint32_t RELEASE_STRUCTURE_SIZE_SEMAPHORE_ONE_WORD = 1;
inline constexpr std::uint32_t RELEASE_STRUCTURE_SIZE_SEMAPHORE_TWO_WORDS = 2;

inline constexpr unsigned QMD_CONSTANT_BUFFERS = 8;
inline constexpr unsigned QMD_RELEASES = 3;

// A QMD being built. v04() and v03() start from zeros with the version fields set and a plain
// grid of CTAs (V04 QMD_TYPE GRID_CTA; V03 IS_QUEUE 0), API_VISIBLE_CALL_LIMIT NO_CHECK and
// SAMPLER_INDEX VIA_HEADER_INDEX. Every setter raises std::invalid_argument naming the field
// and the value when the value does not fit, or the index is out of range.
class Qmd {
 public:
  static Qmd v04();
  static Qmd v03();

  bool is_v04() const { return v04_; }
  // The QMD's words: 96 for V04_00, 64 for V03_00.
  std::span<const std::uint32_t> words() const { return std::span(words_).first(v04_ ? qmd_v04::WORDS : qmd_v03::WORDS); }
  std::size_t bytes() const { return words().size() * 4; }

  // Sets bits f.hi..f.lo to `value`. Raises std::invalid_argument when `value` needs more bits
  // or the field lies past this version's words.
  Qmd& set(const Qmd_field& f, std::uint64_t value);
  // Bits f.hi..f.lo (0 past the end).
  std::uint64_t get(const Qmd_field& f) const;

  // The grid in CTAs (GRID_WIDTH/HEIGHT/DEPTH on V04, CTA_RASTER_* on V03); each at least 1.
  Qmd& grid(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1);
  // CTA_THREAD_DIMENSION0..2; each at least 1.
  Qmd& block(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1);
  Qmd& register_count(std::uint32_t registers);  // REGISTER_COUNT (V04) / REGISTER_COUNT_V (V03)
  Qmd& barrier_count(std::uint32_t barriers);    // BARRIER_COUNT
  // SHARED_MEMORY_SIZE in bytes, and MIN/MAX/TARGET_SM_CONFIG_SHARED_MEM_SIZE, each given in
  // bytes (a multiple of 4 KiB) and stored as KiB / 4 + 1 as NVIDIA's drivers store it.
  Qmd& shared_memory(std::uint32_t bytes, std::uint32_t min_config, std::uint32_t max_config,
                     std::uint32_t target_config);
  Qmd& program_address(std::uint64_t address);  // PROGRAM_ADDRESS_LOWER/UPPER (not shifted)
  // Constant buffer `i` (< 8) at `address` (64-aligned on V04, which stores it >> 6) of `size`
  // bytes (a multiple of 16, at most 64 KiB), marked valid.
  Qmd& constant_buffer(unsigned i, std::uint64_t address, std::uint32_t size);
  // Release `i` (< 3): when the grid is done, `payload` is written at `address` (8-aligned):
  // one word, or two with `payload_64`. With `membar`, after a system memory barrier.
  Qmd& release(unsigned i, std::uint64_t address, std::uint64_t payload, bool payload_64 = false, bool membar = true);
  // SHADER_LOCAL_MEMORY_LOW_SIZE and HIGH_SIZE, bytes per thread (multiples of 16).
  Qmd& local_memory(std::uint32_t low, std::uint32_t high);
  // INVALIDATE_* caches before the grid: texture header, sampler and data, shader data,
  // instruction and constant.
  Qmd& invalidate_caches();
  Qmd& sass_version(std::uint32_t version);  // SASS_VERSION (0x90 for sm_90)

 private:
  explicit Qmd(bool v04) : v04_(v04) {}
  bool v04_;
  std::array<std::uint32_t, qmd_v04::WORDS> words_{};
};

}  // namespace rig::nv
