// push.hpp — NVIDIA push buffers as rig's driver writes them: method headers, a writer that
// counts the data words of each header for the caller, GP entries, and the small verbs a queue
// is made of (semaphore acquire and release, copy, fill, launch) for the host, copy and compute
// classes of Hopper (C86F, C8B5, CBC0) and Ampere (C56F, C6B5, C6C0).
//
// Every method offset and field is a named constant with the header it was read from
// (NVIDIA/open-gpu-doc classes/host/clc56f.h, classes/dma-copy/clc8b5.h and clc6b5.h,
// classes/compute/clcbc0.h and clc6c0.h; clc86f.h from NVIDIA/open-gpu-kernel-modules, whose
// host methods and GP entry fields are those of clc56f.h). Pure code: words out, no device.
//
// Misuse (a value that does not fit its field, a writer that runs out of room, data with no
// header open) raises std::invalid_argument or std::length_error naming the method and the
// reason; nothing is written half.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace rig::nv {

// ---- Class numbers (each class header's #define of its class id).
inline constexpr std::uint32_t HOPPER_CHANNEL_GPFIFO_A = 0xC86F;  // clc86f.h
inline constexpr std::uint32_t AMPERE_CHANNEL_GPFIFO_A = 0xC56F;  // clc56f.h
inline constexpr std::uint32_t HOPPER_COMPUTE_A = 0xCBC0;         // clcbc0.h
inline constexpr std::uint32_t AMPERE_COMPUTE_A = 0xC6C0;         // clc6c0.h
inline constexpr std::uint32_t HOPPER_DMA_COPY_A = 0xC8B5;        // clc8b5.h
inline constexpr std::uint32_t AMPERE_DMA_COPY_A = 0xC6B5;        // clc6b5.h

// ---- Method headers (clc56f.h NVC56F_DMA_*; the same on C86F): SEC_OP 31:29, COUNT (or the
// immediate data) 28:16, SUBCHANNEL 15:13, ADDRESS 11:0 in dwords.
namespace dma {
inline constexpr std::uint32_t SEC_OP_INC_METHOD = 1;     // NVC56F_DMA_INCR_OPCODE_VALUE
inline constexpr std::uint32_t SEC_OP_NON_INC_METHOD = 3; // NVC56F_DMA_NONINCR_OPCODE_VALUE
inline constexpr std::uint32_t SEC_OP_IMMD_DATA_METHOD = 4;  // NVC56F_DMA_IMMD_OPCODE_VALUE
inline constexpr std::uint32_t SEC_OP_ONE_INC = 5;        // NVC56F_DMA_ONEINCR_OPCODE_VALUE
inline constexpr std::uint32_t MAX_COUNT = 0x1fff;        // COUNT 28:16 (13 bits)
inline constexpr std::uint32_t MAX_IMMEDIATE = 0x1fff;    // IMMD_DATA 28:16
inline constexpr std::uint32_t MAX_SUBCHANNEL = 7;        // SUBCHANNEL 15:13
inline constexpr std::uint32_t MAX_METHOD = 0x3ffc;       // ADDRESS 11:0, in dwords
}  // namespace dma

// The header word of `sec_op` (one of dma::SEC_OP_*) for `count` data words (or the immediate
// data) to `method` (a byte offset, 4-aligned) on `subchannel`. Raises std::invalid_argument
// when a field does not fit or `method` is not 4-aligned.
std::uint32_t method_header(std::uint32_t sec_op, std::uint32_t subchannel, std::uint32_t method,
                            std::uint32_t count);

// ---- Host methods (clc56f.h NVC56F_*; the same offsets and fields on clc86f.h).
namespace host {
inline constexpr std::uint32_t SET_OBJECT = 0x0000;           // NVC56F_SET_OBJECT (NVCLASS 15:0)
inline constexpr std::uint32_t NON_STALL_INTERRUPT = 0x0020;  // NVC56F_NON_STALL_INTERRUPT
inline constexpr std::uint32_t SEM_ADDR_LO = 0x005c;          // NVC56F_SEM_ADDR_LO (OFFSET 31:2)
inline constexpr std::uint32_t SEM_ADDR_HI = 0x0060;          // NVC56F_SEM_ADDR_HI (OFFSET 7:0)
inline constexpr std::uint32_t SEM_PAYLOAD_LO = 0x0064;       // NVC56F_SEM_PAYLOAD_LO
inline constexpr std::uint32_t SEM_PAYLOAD_HI = 0x0068;       // NVC56F_SEM_PAYLOAD_HI
inline constexpr std::uint32_t SEM_EXECUTE = 0x006c;          // NVC56F_SEM_EXECUTE
inline constexpr std::uint32_t WFI = 0x0078;                  // NVC56F_WFI (SCOPE 0:0)
// SEM_EXECUTE fields.
inline constexpr std::uint32_t SEM_EXECUTE_OPERATION_ACQUIRE = 0;         // OPERATION 2:0
inline constexpr std::uint32_t SEM_EXECUTE_OPERATION_RELEASE = 1;
inline constexpr std::uint32_t SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ = 2;
inline constexpr std::uint32_t SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ = 3;
inline constexpr std::uint32_t SEM_EXECUTE_OPERATION_ACQ_AND = 4;
inline constexpr std::uint32_t SEM_EXECUTE_OPERATION_ACQ_NOR = 5;
inline constexpr std::uint32_t SEM_EXECUTE_OPERATION_REDUCTION = 6;
inline constexpr std::uint32_t SEM_EXECUTE_ACQUIRE_SWITCH_TSG = 1u << 12;  // 12:12
inline constexpr std::uint32_t SEM_EXECUTE_RELEASE_WFI = 1u << 20;         // 20:20
inline constexpr std::uint32_t SEM_EXECUTE_PAYLOAD_SIZE_64BIT = 1u << 24;  // 24:24
inline constexpr std::uint32_t SEM_EXECUTE_RELEASE_TIMESTAMP = 1u << 25;   // 25:25
inline constexpr unsigned SEM_EXECUTE_REDUCTION_SHIFT = 27;                // REDUCTION 30:27
inline constexpr std::uint32_t SEM_EXECUTE_REDUCTION_FORMAT_UNSIGNED = 1u << 31;  // 31:31
inline constexpr std::uint64_t SEM_ADDR_LIMIT = 1ull << 40;  // OFFSET 31:2 + HI 7:0: 40 bits
}  // namespace host

// ---- Compute methods (clcbc0.h NVCBC0_*; clc6c0.h gives the same offsets on C6C0).
namespace compute {
inline constexpr std::uint32_t SET_OBJECT = 0x0000;                          // NVCBC0_SET_OBJECT
inline constexpr std::uint32_t SET_SHADER_SHARED_MEMORY_WINDOW_A = 0x02a0;   // BASE_ADDRESS_UPPER 16:0
inline constexpr std::uint32_t SET_SHADER_SHARED_MEMORY_WINDOW_B = 0x02a4;   // BASE_ADDRESS 31:0
inline constexpr std::uint32_t SEND_PCAS_A = 0x02b4;                         // QMD_ADDRESS_SHIFTED8 31:0
inline constexpr std::uint32_t SEND_SIGNALING_PCAS2_B = 0x02c0;              // PCAS_ACTION 3:0
inline constexpr std::uint32_t SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A = 0x02e4;  // SIZE_UPPER 7:0
inline constexpr std::uint32_t SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B = 0x02e8;  // SIZE_LOWER 31:0
inline constexpr std::uint32_t SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C = 0x02ec;  // MAX_SM_COUNT 8:0
inline constexpr std::uint32_t SET_SHADER_LOCAL_MEMORY_A = 0x0790;           // ADDRESS_UPPER 24:0
inline constexpr std::uint32_t SET_SHADER_LOCAL_MEMORY_B = 0x0794;           // ADDRESS_LOWER 31:0
inline constexpr std::uint32_t SET_SHADER_LOCAL_MEMORY_WINDOW_A = 0x07b0;    // BASE_ADDRESS_UPPER 16:0
inline constexpr std::uint32_t SET_SHADER_LOCAL_MEMORY_WINDOW_B = 0x07b4;    // BASE_ADDRESS 31:0
inline constexpr std::uint32_t INVALIDATE_SHADER_CACHES_NO_WFI = 0x1698;
// SEND_SIGNALING_PCAS2_B PCAS_ACTION values.
inline constexpr std::uint32_t PCAS_ACTION_INVALIDATE_COPY_SCHEDULE = 3;
inline constexpr std::uint32_t PCAS_ACTION_PREFETCH_SCHEDULE = 9;
}  // namespace compute

// ---- Copy methods (clc8b5.h NVC8B5_*; clc6b5.h gives the same offsets on C6B5 except where
// noted).
namespace copy {
inline constexpr std::uint32_t SET_SEMAPHORE_A = 0x0240;          // UPPER 24:0 (C6B5: 16:0)
inline constexpr std::uint32_t SET_SEMAPHORE_B = 0x0244;          // LOWER 31:0
inline constexpr std::uint32_t SET_SEMAPHORE_PAYLOAD = 0x0248;
inline constexpr std::uint32_t SET_SEMAPHORE_PAYLOAD_UPPER = 0x024c;  // C8B5 only
inline constexpr std::uint32_t LAUNCH_DMA = 0x0300;
inline constexpr std::uint32_t OFFSET_IN_UPPER = 0x0400;          // UPPER 24:0 (C6B5: 16:0)
inline constexpr std::uint32_t OFFSET_IN_LOWER = 0x0404;
inline constexpr std::uint32_t OFFSET_OUT_UPPER = 0x0408;
inline constexpr std::uint32_t OFFSET_OUT_LOWER = 0x040c;
inline constexpr std::uint32_t PITCH_IN = 0x0410;
inline constexpr std::uint32_t PITCH_OUT = 0x0414;
inline constexpr std::uint32_t LINE_LENGTH_IN = 0x0418;
inline constexpr std::uint32_t LINE_COUNT = 0x041c;
inline constexpr std::uint32_t SET_REMAP_CONST_A = 0x0700;
inline constexpr std::uint32_t SET_REMAP_CONST_B = 0x0704;
inline constexpr std::uint32_t SET_REMAP_COMPONENTS = 0x0708;
// LAUNCH_DMA fields.
inline constexpr std::uint32_t LAUNCH_DMA_DATA_TRANSFER_TYPE_PIPELINED = 1;      // 1:0
inline constexpr std::uint32_t LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED = 2;
inline constexpr std::uint32_t LAUNCH_DMA_FLUSH_ENABLE = 1u << 2;                // 2:2
inline constexpr unsigned LAUNCH_DMA_SEMAPHORE_TYPE_SHIFT = 3;                   // 4:3
inline constexpr std::uint32_t LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE = 1;
inline constexpr std::uint32_t LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE = 2;  // with timestamp
inline constexpr unsigned LAUNCH_DMA_INTERRUPT_TYPE_SHIFT = 5;                   // 6:5
inline constexpr std::uint32_t LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH = 1u << 7;     // 7:7
inline constexpr std::uint32_t LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH = 1u << 8;     // 8:8
inline constexpr std::uint32_t LAUNCH_DMA_MULTI_LINE_ENABLE = 1u << 9;           // 9:9
inline constexpr std::uint32_t LAUNCH_DMA_REMAP_ENABLE = 1u << 10;               // 10:10
inline constexpr std::uint32_t LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE_TWO_WORD = 1u << 27;  // 27:27, C8B5 only
// SET_REMAP_COMPONENTS fields: DST_X 2:0 ... DST_W 14:12, COMPONENT_SIZE 17:16 (bytes - 1),
// NUM_SRC_COMPONENTS 21:20, NUM_DST_COMPONENTS 25:24 (count - 1).
inline constexpr std::uint32_t SET_REMAP_COMPONENTS_DST_CONST_A = 4;
inline constexpr std::uint32_t SET_REMAP_COMPONENTS_DST_NO_WRITE = 6;
inline constexpr unsigned SET_REMAP_COMPONENTS_COMPONENT_SIZE_SHIFT = 16;
inline constexpr unsigned SET_REMAP_COMPONENTS_NUM_SRC_COMPONENTS_SHIFT = 20;
inline constexpr unsigned SET_REMAP_COMPONENTS_NUM_DST_COMPONENTS_SHIFT = 24;
// Address limits of OFFSET_IN/OUT_UPPER and SET_SEMAPHORE_A: 57 bits on C8B5, 49 on C6B5.
inline constexpr std::uint64_t C8B5_ADDRESS_LIMIT = 1ull << 57;
inline constexpr std::uint64_t C6B5_ADDRESS_LIMIT = 1ull << 49;
}  // namespace copy

// ---- The writer.
//
// Push writes into `storage`, which the caller owns (it allocates nothing). inc(), non_inc()
// and inc_once() open a method header with a count of 0; every data() after it grows that
// header's COUNT, so no caller computes a length. immediate() writes a complete header and
// closes the open one.
class Push {
 public:
  explicit Push(std::span<std::uint32_t> storage) : storage_(storage) {}

  // Opens an increasing header (SEC_OP 1): the next data words go to method, method + 4, ...
  Push& inc(std::uint32_t subchannel, std::uint32_t method);
  // Opens a non-increasing header (SEC_OP 3): every data word goes to `method`.
  Push& non_inc(std::uint32_t subchannel, std::uint32_t method);
  // Opens an increase-once header (SEC_OP 5): the first data word to `method`, the rest to
  // method + 4.
  Push& inc_once(std::uint32_t subchannel, std::uint32_t method);
  // Writes an immediate header (SEC_OP 4) carrying `value` (13 bits) to `method`.
  Push& immediate(std::uint32_t subchannel, std::uint32_t method, std::uint32_t value);
  // Appends one data word to the open header, growing its COUNT. Raises std::invalid_argument
  // when no header is open, when the header already counts 8191 words, or when an increasing
  // or increase-once header's method would pass 0x3ffc; std::length_error when `storage` is full.
  Push& data(std::uint32_t word);

  // The words written so far. Raises std::invalid_argument when the last header opened has no
  // data word (a header of count 0 is a caller's mistake: it writes no method).
  std::span<const std::uint32_t> words() const;
  std::size_t size() const { return used_; }
  // Room left, in words.
  std::size_t room() const { return storage_.size() - used_; }

 private:
  Push& open(std::uint32_t sec_op, std::uint32_t subchannel, std::uint32_t method);
  void put(std::uint32_t word);
  void close();

  std::span<std::uint32_t> storage_;
  std::size_t used_ = 0;
  std::size_t header_at_ = 0;
  bool open_ = false;
  std::uint32_t sec_op_ = 0, subchannel_ = 0, method_ = 0, count_ = 0;
};

// ---- GP entries (clc56f.h NVC56F_GP_ENTRY0/1; the same on C86F): word 0 GET 31:2 (address
// bits 31:2), word 1 GET_HI 7:0 (address bits 39:32), LENGTH 30:10 (words), SYNC 31:31.
namespace gp {
inline constexpr unsigned ENTRY1_LENGTH_SHIFT = 10;
inline constexpr std::uint32_t ENTRY1_MAX_LENGTH = (1u << 21) - 1;
inline constexpr std::uint32_t ENTRY1_SYNC_WAIT = 1u << 31;
inline constexpr std::uint64_t ADDRESS_LIMIT = 1ull << 40;
}  // namespace gp

// The two words of a GP entry that fetches `words` words at `address`; with `sync`, the PBDMA
// waits for the previous entries' work before fetching it. Raises std::invalid_argument for an
// address that is not 4-aligned or not below 2^40, and for a length of 0 or above 2^21 - 1.
std::array<std::uint32_t, 2> gp_entry(std::uint64_t address, std::uint32_t words, bool sync = false);

// ---- Verbs. Each writes complete methods into `p`; host methods go on subchannel 0.

// SET_OBJECT binding `class_id` to `subchannel`.
void set_object(Push& p, std::uint32_t subchannel, std::uint32_t class_id);

// Host semaphore acquire: the channel waits until the 64-bit (`payload_64`) or 32-bit value at
// `address` meets `payload` under `operation` (one of host::SEM_EXECUTE_OPERATION_ACQ*).
// Raises std::invalid_argument for an unaligned address (8 for 64-bit, 4 for 32-bit), an address
// not below 2^40, an operation that is not an acquire, or a 32-bit payload above 2^32 - 1.
void semaphore_acquire(Push& p, std::uint64_t address, std::uint64_t payload, bool payload_64 = true,
                       std::uint32_t operation = host::SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ);
// Host semaphore release of `payload` (64-bit, 8-aligned) at `address`, after the channel's
// earlier work (RELEASE_WFI); with `timestamp`, the 16-byte form whose second 8 bytes receive
// the time of the release (16-aligned). Raises std::invalid_argument for a misaligned address or
// one not below 2^40.
void semaphore_release(Push& p, std::uint64_t address, std::uint64_t payload, bool timestamp = false);
// NON_STALL_INTERRUPT: wakes a waiter on the channel's non-stall event.
void non_stall_interrupt(Push& p);
// WFI with SCOPE ALL.
void wait_for_idle(Push& p);

// A copy of `bytes` bytes from `src` to `dst` on a copy class `copy_class` (C8B5 or C6B5),
// pitch to pitch, one line. Raises std::invalid_argument for an unknown copy class, 0 bytes,
// bytes above 2^32 - 1, or an address past the class's limit.
void copy_1d(Push& p, std::uint32_t subchannel, std::uint32_t copy_class, std::uint64_t dst, std::uint64_t src,
             std::uint64_t bytes);
// A 2D copy of `lines` lines of `line_bytes` bytes, the source lines `src_pitch` apart, the
// destination lines `dst_pitch` apart. The same errors as copy_1d, and 0 lines.
void copy_2d(Push& p, std::uint32_t subchannel, std::uint32_t copy_class, std::uint64_t dst, std::uint32_t dst_pitch,
             std::uint64_t src, std::uint32_t src_pitch, std::uint32_t line_bytes, std::uint32_t lines);
// Writes `bytes` bytes of `value` at `dst` through the remapped constant A (no source read):
// four-byte components when `dst` and `bytes` are multiples of 4, else one-byte components. The
// same errors as copy_1d.
void fill(Push& p, std::uint32_t subchannel, std::uint32_t copy_class, std::uint64_t dst, std::uint64_t bytes,
          std::uint8_t value);
// A copy-engine semaphore release of `payload` at `address` (a LAUNCH_DMA that moves no data):
// 64-bit on C8B5 (SEMAPHORE_PAYLOAD_SIZE TWO_WORD), 32-bit on C6B5; with `timestamp`, the
// four-word form. Raises std::invalid_argument for a 64-bit payload on C6B5, a misaligned
// address, or one past the class's limit.
void copy_semaphore_release(Push& p, std::uint32_t subchannel, std::uint32_t copy_class, std::uint64_t address,
                            std::uint64_t payload, bool timestamp = false);

// The compute class's shared and local memory windows: the addresses at which a kernel's
// generic pointers see shared and local memory (SET_SHADER_SHARED_MEMORY_WINDOW_A/B,
// SET_SHADER_LOCAL_MEMORY_WINDOW_A/B: upper bits 16:0, lower 31:0). Raises
// std::invalid_argument for a window not below 2^49.
void set_memory_windows(Push& p, std::uint32_t subchannel, std::uint64_t shared_window, std::uint64_t local_window);
// The backing store of local memory: `bytes` at `address` (SET_SHADER_LOCAL_MEMORY_A/B, upper
// 24:0), sized for `max_sm_count` SMs (SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A/B/C: size upper
// 7:0, lower 31:0, MAX_SM_COUNT 8:0). Raises std::invalid_argument for an address not below
// 2^57, a size not below 2^40, or an SM count above 511.
void set_local_memory(Push& p, std::uint32_t subchannel, std::uint64_t address, std::uint64_t bytes,
                      std::uint32_t max_sm_count);

// Launches the QMD at `qmd_address` (256-aligned, below 2^40) on the compute subchannel:
// SEND_PCAS_A with the address >> 8, then SEND_SIGNALING_PCAS2_B with `action`. Raises
// std::invalid_argument for a misaligned or too high address, or an action above 15.
void launch(Push& p, std::uint32_t subchannel, std::uint64_t qmd_address,
            std::uint32_t action = compute::PCAS_ACTION_PREFETCH_SCHEDULE);

}  // namespace rig::nv
