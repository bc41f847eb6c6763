// decode.hpp — the NVIDIA simulator's own reading of the formats a driver writes: push-buffer
// method headers, GP entries, host semaphore operations, the copy class's LAUNCH_DMA and remap
// words, and the compute class's QMDs (V04_00 on Hopper, V03_00 on Ampere).
//
// Written from the public class headers (NVIDIA/open-gpu-doc classes/host/clc56f.h,
// classes/dma-copy/clc8b5.h and clc6b5.h, classes/compute/clcbc0qmd.h and clc6c0qmd.h;
// clc86f.h from NVIDIA/open-gpu-kernel-modules), independently of any driver's builders, so
// that a driver's encoders can be checked against it. Pure functions: words in, a struct or an
// error naming the field and the reason out; nothing here touches memory or a device.
#pragma once

#include <array>
#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rig::sim::nv {

// Class numbers (the class headers' #defines; clc86f.h HOPPER_CHANNEL_GPFIFO_A ...).
inline constexpr std::uint32_t hopper_channel_gpfifo_a = 0xC86F;
inline constexpr std::uint32_t ampere_channel_gpfifo_a = 0xC56F;
inline constexpr std::uint32_t hopper_compute_a = 0xCBC0;
inline constexpr std::uint32_t ampere_compute_a = 0xC6C0;
inline constexpr std::uint32_t hopper_dma_copy_a = 0xC8B5;
inline constexpr std::uint32_t ampere_dma_copy_a = 0xC6B5;

// ---- Method headers (clc56f.h NVC56F_DMA_*: SEC_OP 31:29, TERT_OP 17:16, COUNT 28:16,
// SUBCHANNEL 15:13, ADDRESS 11:0 in dwords; the same on C86F).

enum class Header_kind : std::uint8_t {
  nop,                   // the all-zero word (NVC56F_DMA_NOP)
  increasing,            // SEC_OP 1: `count` data words to method, method + 4, ...
  non_increasing,        // SEC_OP 3: `count` data words all to `method`
  immediate,             // SEC_OP 4: no data words; `data` (13 bits) goes to `method`
  increase_once,         // SEC_OP 5: the first data word to `method`, the rest to method + 4
  end_segment,           // SEC_OP 7: the rest of the segment is not read
  set_subdevice_mask,    // SEC_OP 0, TERT_OP 1: `data` is the mask (15:4)
  store_subdevice_mask,  // SEC_OP 0, TERT_OP 2: `data` is the mask kept for a later use
  use_subdevice_mask,    // SEC_OP 0, TERT_OP 3: the stored mask becomes the mask
};

struct Header {
  Header_kind kind = Header_kind::nop;
  std::uint32_t method = 0;      // the method's byte offset (ADDRESS << 2)
  std::uint32_t subchannel = 0;  // 0..7
  std::uint32_t count = 0;       // data words that follow
  std::uint32_t data = 0;        // the immediate data, or the subdevice mask
};

// The header `word` means. Errors name the word and the reason: SEC_OP 0 with TERT_OP 0 on a
// non-zero word and SEC_OP 2 (the pre-Fermi method forms), SEC_OP 6 (reserved).
std::expected<Header, std::string> decode_header(std::uint32_t word);

// One method write as the PBDMA hands it to host or engine.
struct Method {
  std::uint32_t subchannel = 0;
  std::uint32_t method = 0;  // byte offset
  std::uint32_t data = 0;
  std::uint32_t at = 0;      // index in the segment of the header that gave it
};

// The subdevice masks a channel keeps across segments; this simulator is subdevice 0, so
// methods are dropped while bit 0 of the mask is clear.
struct Pushbuffer_state {
  std::uint32_t mask = 0xfff;
  std::uint32_t stored = 0xfff;
};

// A segment's methods, in order, up to the first error (when there is one).
struct Segment {
  std::vector<Method> methods;
  std::optional<std::string> error;  // names the word index and the reason
  bool ended = false;                // an END_PB_SEGMENT header was met
};

// Decodes every header of the segment `words` (a GP entry's span), updating `state`. Errors:
// a malformed header, or a header whose count runs past the segment's end.
Segment decode_segment(std::span<const std::uint32_t> words, Pushbuffer_state& state);

// ---- GP entries (clc56f.h / clc86f.h NVC?6F_GP_ENTRY0/1).

struct Gp_entry {
  enum class Kind : std::uint8_t {
    segment,        // LENGTH != 0: fetch `length` words at `address`
    nop,            // LENGTH 0, OPCODE 0
    illegal,        // LENGTH 0, OPCODE 1: the channel faults
    gp_crc,         // LENGTH 0, OPCODE 2: `operand` is a CRC of the GP entries
    pb_crc,         // LENGTH 0, OPCODE 3: `operand` is a CRC of the push buffer
    extended_base,  // LENGTH 0, OPCODE 4 (C86F only): `operand` is bits 56:40 of later
                    // segment addresses (GP_ENTRY0_PB_EXTENDED_BASE_OPERAND 24:8)
  } kind = Kind::nop;
  std::uint64_t address = 0;    // bits 39:0 (GET 31:2 of word 0, GET_HI 7:0 of word 1)
  std::uint32_t length = 0;     // words (LENGTH 30:10)
  bool sync_wait = false;       // SYNC 31
  bool subroutine = false;      // LEVEL 9
  bool conditional = false;     // FETCH 0 (word 0)
  std::uint32_t operand = 0;    // control entries: word 0 (extended_base: its 24:8)
};

// The GP entry of words `w0`, `w1` on a channel of `channel_class` (0xC86F or 0xC56F). Errors:
// a control OPCODE the class does not define.
std::expected<Gp_entry, std::string> decode_gp_entry(std::uint32_t w0, std::uint32_t w1,
                                                     std::uint32_t channel_class);

// ---- Semaphore reductions, common to host, copy and QMD releases (each class numbers them
// its own way; the decoders map them here).
enum class Reduction : std::uint8_t { min, max, bit_xor, bit_and, bit_or, add, inc, dec };

// Applies `r` to `old` with `operand`, in `bits` (32 or 64) and signed unless `is_unsigned`:
// inc wraps to 0 past the operand, dec to the operand below 1 or above it (as CUDA's
// atomicInc/atomicDec).
std::uint64_t reduce(Reduction r, std::uint64_t old, std::uint64_t operand, unsigned bits, bool is_unsigned);

// ---- Host SEM_EXECUTE (clc56f.h NVC56F_SEM_EXECUTE; the same bits on C86F).

struct Sem_execute {
  enum class Op : std::uint8_t {
    acquire,             // 0: wait until the value equals the payload
    release,             // 1: write the payload
    acquire_strict_geq,  // 2: wait until the value >= the payload (unsigned)
    acquire_circ_geq,    // 3: wait until value - payload, as a signed number, is >= 0
    acquire_and,         // 4: wait until value & payload != 0
    acquire_nor,         // 5: wait until ~(value | payload) != 0
    reduction,           // 6: value = reduce(value, payload)
  } op = Op::acquire;
  bool acquire_switch_tsg = false;  // 12
  bool release_wfi = false;         // 20
  bool payload_64 = false;          // 24: 64-bit payload and semaphore
  bool release_timestamp = false;   // 25: a 16-byte semaphore: payload, then the timestamp at +8
  Reduction reduction = Reduction::min;  // 30:27
  bool reduction_unsigned = false;       // 31
};

// Errors: OPERATION 7 (undefined), a REDUCTION above 7 cannot occur (4 bits, 8-15 undefined).
std::expected<Sem_execute, std::string> decode_sem_execute(std::uint32_t word);

// ---- Copy LAUNCH_DMA (clc8b5.h / clc6b5.h NVC?B5_LAUNCH_DMA).

struct Launch_dma {
  enum class Transfer : std::uint8_t { none, pipelined, non_pipelined } transfer = Transfer::none;  // 1:0
  bool flush = false;  // 2
  enum class Semaphore : std::uint8_t { none, one_word, four_word, conditional_interrupt } semaphore =
      Semaphore::none;  // 4:3 (four_word carries the timestamp)
  enum class Interrupt : std::uint8_t { none, blocking, non_blocking } interrupt = Interrupt::none;  // 6:5
  bool src_pitch = false;   // 7: pitch (else block-linear)
  bool dst_pitch = false;   // 8
  bool multi_line = false;  // 9: LINE_COUNT lines (2D), else one line
  bool remap = false;       // 10: components through SET_REMAP_COMPONENTS
  bool src_physical = false;  // 12
  bool dst_physical = false;  // 13
  bool reduction_enable = false;  // 19, with 17:14 and sign 18
  std::uint32_t reduction = 0;
  bool reduction_unsigned = false;
  bool memory_scrub = false;      // 23 (C8B5 only)
  bool payload_two_words = false;  // 27 (C8B5 only): a 64-bit semaphore payload
};

// The LAUNCH_DMA `word` on `copy_class` (0xC8B5 or 0xC6B5). Errors: DATA_TRANSFER_TYPE 3 and
// INTERRUPT_TYPE 3 (undefined), bit 27 or 23 on C6B5 (reserved there).
std::expected<Launch_dma, std::string> decode_launch_dma(std::uint32_t word, std::uint32_t copy_class);

// SET_REMAP_COMPONENTS (clc8b5.h, the same on C6B5).
struct Remap {
  enum class Source : std::uint8_t { src_x, src_y, src_z, src_w, const_a, const_b, no_write };
  std::array<Source, 4> dst{};     // DST_X 2:0, DST_Y 6:4, DST_Z 10:8, DST_W 14:12
  std::uint32_t component_size = 1;  // bytes, 17:16 + 1
  std::uint32_t src_components = 1;  // 21:20 + 1
  std::uint32_t dst_components = 1;  // 25:24 + 1
};

// Errors: a DST_* of 7 (undefined).
std::expected<Remap, std::string> decode_remap(std::uint32_t word);

// ---- QMDs (clcbc0qmd.h V04_00, 96 dwords; clc6c0qmd.h V03_00, 64 dwords).

inline constexpr std::size_t qmd_v04_words = 96;
inline constexpr std::size_t qmd_v03_words = 64;
inline constexpr unsigned qmd_banks = 8;     // CONSTANT_BUFFER_*(i), i < 8
inline constexpr unsigned qmd_releases = 3;  // RELEASE_SEMAPHORE0..2 / RELEASE0..2

struct Qmd {
  std::uint32_t major = 0, minor = 0;  // QMD_MAJOR_VERSION 583:580, QMD_(MINOR_)VERSION 579:576
  // V04 QMD_TYPE 25:23 (2 GRID_CTA); V03 reports 0 for IS_QUEUE 136 clear (a grid), 1 for a queue.
  std::uint32_t qmd_type = 0;
  bool is_grid = false;  // a plain grid of CTAs (V04 GRID_CTA, V03 IS_QUEUE false)
  std::array<std::uint32_t, 3> grid{};   // GRID_WIDTH/HEIGHT/DEPTH, CTA_RASTER_* on V03
  std::array<std::uint32_t, 3> block{};  // CTA_THREAD_DIMENSION0..2
  std::uint32_t registers = 0;           // REGISTER_COUNT(_V)
  std::uint32_t barriers = 0;            // BARRIER_COUNT
  std::uint64_t program_address = 0;     // PROGRAM_ADDRESS_LOWER/UPPER
  std::uint32_t shared_memory_size = 0;  // SHARED_MEMORY_SIZE, bytes
  std::uint32_t min_sm_config_shared = 0, max_sm_config_shared = 0, target_sm_config_shared = 0;
  std::uint32_t local_memory_low = 0, local_memory_high = 0;  // SHADER_LOCAL_MEMORY_LOW/HIGH_SIZE
  std::uint32_t sass_version = 0;
  struct Bank {
    bool valid = false;
    std::uint64_t address = 0;  // bytes (V04 stores it >> 6)
    std::uint32_t size = 0;     // bytes (SIZE_SHIFTED4 << 4)
  };
  std::array<Bank, qmd_banks> banks{};
  struct Release {
    bool enable = false;
    enum class Size : std::uint8_t { four_words, one_word, two_words } size = Size::four_words;
    bool payload_64 = false;
    bool reduction_enable = false;
    Reduction reduction = Reduction::add;
    bool reduction_unsigned = true;
    std::uint64_t address = 0;
    std::uint64_t payload = 0;
  };
  std::array<Release, qmd_releases> releases{};
};

// The QMD V04_00 in `words` (96). Errors: fewer words, a major version other than 4, a release
// STRUCTURE_SIZE of 3 (undefined) on an enabled release.
std::expected<Qmd, std::string> decode_qmd_v04(std::span<const std::uint32_t> words);
// The QMD V03_00 in `words` (64). Errors: fewer words, a major version other than 3, a release
// STRUCTURE_SIZE of 3 on an enabled release.
std::expected<Qmd, std::string> decode_qmd_v03(std::span<const std::uint32_t> words);

// Bits hi..lo (hi - lo < 64) of the little-endian bit string `words`, as the class headers'
// MW(hi:lo) number them; 0 for bits past the end.
std::uint64_t field(std::span<const std::uint32_t> words, unsigned hi, unsigned lo);

}  // namespace rig::sim::nv
