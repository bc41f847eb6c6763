// push.cpp — method headers, the counting writer, GP entries and the queue verbs (push.hpp).
#include "push.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace rig::nv {

namespace {

[[noreturn]] void refuse(const std::string& why) { throw std::invalid_argument("NVIDIA push buffer: " + why); }

std::uint32_t lo32(std::uint64_t v) { return static_cast<std::uint32_t>(v); }
std::uint32_t hi32(std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); }

std::uint64_t copy_address_limit(std::uint32_t copy_class) {
  if (copy_class == HOPPER_DMA_COPY_A) return copy::C8B5_ADDRESS_LIMIT;
  if (copy_class == AMPERE_DMA_COPY_A) return copy::C6B5_ADDRESS_LIMIT;
  refuse(fmt::format("copy class {:#06x} is not one rig writes (C8B5 or C6B5)", copy_class));
}

void check_copy_address(std::uint32_t copy_class, std::uint64_t address, std::uint64_t bytes, const char* what) {
  const std::uint64_t limit = copy_address_limit(copy_class);
  if (address >= limit || bytes > limit - address)
    refuse(fmt::format("{} {:#x} + {:#x} bytes passes the {:04X} address limit {:#x}", what, address, bytes, copy_class,
                       limit));
}

std::uint32_t checked_bytes(std::uint64_t bytes, const char* verb) {
  if (bytes == 0) refuse(fmt::format("{} of 0 bytes", verb));
  if (bytes > 0xffffffffu) refuse(fmt::format("{} of {:#x} bytes does not fit LINE_LENGTH_IN (32 bits)", verb, bytes));
  return static_cast<std::uint32_t>(bytes);
}

void offsets(Push& p, std::uint32_t sub, std::uint64_t src, std::uint64_t dst) {
  p.inc(sub, copy::OFFSET_IN_UPPER).data(hi32(src)).data(lo32(src)).data(hi32(dst)).data(lo32(dst));
}

}  // namespace

std::uint32_t method_header(std::uint32_t sec_op, std::uint32_t subchannel, std::uint32_t method, std::uint32_t count) {
  if (sec_op != dma::SEC_OP_INC_METHOD && sec_op != dma::SEC_OP_NON_INC_METHOD && sec_op != dma::SEC_OP_IMMD_DATA_METHOD &&
      sec_op != dma::SEC_OP_ONE_INC)
    refuse(fmt::format("SEC_OP {} is not a method form rig writes (1, 3, 4, 5)", sec_op));
  if (subchannel > dma::MAX_SUBCHANNEL) refuse(fmt::format("subchannel {} (0..7)", subchannel));
  if (method % 4 != 0 || method > dma::MAX_METHOD)
    refuse(fmt::format("method {:#x} is not a 4-aligned offset up to {:#x}", method, dma::MAX_METHOD));
  if (count > dma::MAX_COUNT)
    refuse(fmt::format("method {:#x}: {} {} does not fit 13 bits", method, count,
                       sec_op == dma::SEC_OP_IMMD_DATA_METHOD ? "immediate data" : "data words"));
  return (sec_op << 29) | (count << 16) | (subchannel << 13) | (method >> 2);
}

void Push::put(std::uint32_t word) {
  if (used_ == storage_.size())
    throw std::length_error(fmt::format("NVIDIA push buffer: full at {} words", storage_.size()));
  storage_[used_++] = word;
}

void Push::close() {
  if (open_ && count_ == 0)
    refuse(fmt::format("the header for method {:#x} at word {} has no data word", method_, header_at_));
  open_ = false;
}

Push& Push::open(std::uint32_t sec_op, std::uint32_t subchannel, std::uint32_t method) {
  close();
  const std::uint32_t word = method_header(sec_op, subchannel, method, 0);
  header_at_ = used_;
  put(word);
  open_ = true;
  sec_op_ = sec_op, subchannel_ = subchannel, method_ = method, count_ = 0;
  return *this;
}

Push& Push::inc(std::uint32_t subchannel, std::uint32_t method) { return open(dma::SEC_OP_INC_METHOD, subchannel, method); }
Push& Push::non_inc(std::uint32_t subchannel, std::uint32_t method) {
  return open(dma::SEC_OP_NON_INC_METHOD, subchannel, method);
}
Push& Push::inc_once(std::uint32_t subchannel, std::uint32_t method) { return open(dma::SEC_OP_ONE_INC, subchannel, method); }

Push& Push::immediate(std::uint32_t subchannel, std::uint32_t method, std::uint32_t value) {
  close();
  put(method_header(dma::SEC_OP_IMMD_DATA_METHOD, subchannel, method, value));
  return *this;
}

Push& Push::data(std::uint32_t word) {
  if (!open_) refuse("a data word with no method header open");
  if (count_ == dma::MAX_COUNT) refuse(fmt::format("method {:#x}: more than {} data words", method_, dma::MAX_COUNT));
  const std::uint32_t step = sec_op_ == dma::SEC_OP_INC_METHOD ? count_ : sec_op_ == dma::SEC_OP_ONE_INC ? (count_ ? 1 : 0) : 0;
  if (method_ + 4 * step > dma::MAX_METHOD)
    refuse(fmt::format("method {:#x}: data word {} would go past method {:#x}", method_, count_, dma::MAX_METHOD));
  put(word);
  ++count_;
  storage_[header_at_] = method_header(sec_op_, subchannel_, method_, count_);
  return *this;
}

std::span<const std::uint32_t> Push::words() const {
  if (open_ && count_ == 0)
    refuse(fmt::format("the header for method {:#x} at word {} has no data word", method_, header_at_));
  return storage_.first(used_);
}

std::array<std::uint32_t, 2> gp_entry(std::uint64_t address, std::uint32_t words, bool sync) {
  if (address % 4 != 0 || address >= gp::ADDRESS_LIMIT)
    refuse(fmt::format("GP entry address {:#x} is not 4-aligned below 2^40", address));
  if (words == 0 || words > gp::ENTRY1_MAX_LENGTH)
    refuse(fmt::format("GP entry of {} words (1..{})", words, gp::ENTRY1_MAX_LENGTH));
  return {lo32(address), (hi32(address) & 0xff) | (words << gp::ENTRY1_LENGTH_SHIFT) | (sync ? gp::ENTRY1_SYNC_WAIT : 0)};
}

void set_object(Push& p, std::uint32_t subchannel, std::uint32_t class_id) {
  if (class_id > 0xffff) refuse(fmt::format("SET_OBJECT class {:#x} does not fit NVCLASS 15:0", class_id));
  p.inc(subchannel, host::SET_OBJECT).data(class_id);
}

namespace {

void semaphore(Push& p, std::uint64_t address, std::uint64_t payload, std::uint32_t execute, const char* verb) {
  if (address >= host::SEM_ADDR_LIMIT) refuse(fmt::format("{} at {:#x}: not below 2^40", verb, address));
  p.inc(0, host::SEM_ADDR_LO).data(lo32(address)).data(hi32(address)).data(lo32(payload)).data(hi32(payload)).data(execute);
}

}  // namespace

void semaphore_acquire(Push& p, std::uint64_t address, std::uint64_t payload, bool payload_64, std::uint32_t operation) {
  if (operation != host::SEM_EXECUTE_OPERATION_ACQUIRE && operation != host::SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ &&
      operation != host::SEM_EXECUTE_OPERATION_ACQ_CIRC_GEQ && operation != host::SEM_EXECUTE_OPERATION_ACQ_AND &&
      operation != host::SEM_EXECUTE_OPERATION_ACQ_NOR)
    refuse(fmt::format("semaphore acquire with SEM_EXECUTE OPERATION {}, which is not an acquire", operation));
  const std::uint64_t align = payload_64 ? 8 : 4;
  if (address % align != 0) refuse(fmt::format("semaphore acquire at {:#x}: not {}-aligned", address, align));
  if (!payload_64 && payload > 0xffffffffu)
    refuse(fmt::format("32-bit semaphore acquire of {:#x}: the payload needs 64 bits", payload));
  semaphore(p, address, payload, operation | (payload_64 ? host::SEM_EXECUTE_PAYLOAD_SIZE_64BIT : 0), "semaphore acquire");
}

void semaphore_release(Push& p, std::uint64_t address, std::uint64_t payload, bool timestamp) {
  const std::uint64_t align = timestamp ? 16 : 8;
  if (address % align != 0) refuse(fmt::format("semaphore release at {:#x}: not {}-aligned", address, align));
  semaphore(p, address, payload,
            host::SEM_EXECUTE_OPERATION_RELEASE | host::SEM_EXECUTE_RELEASE_WFI | host::SEM_EXECUTE_PAYLOAD_SIZE_64BIT |
                (timestamp ? host::SEM_EXECUTE_RELEASE_TIMESTAMP : 0),
            "semaphore release");
}

void non_stall_interrupt(Push& p) { p.inc(0, host::NON_STALL_INTERRUPT).data(0); }

void wait_for_idle(Push& p) { p.immediate(0, host::WFI, 1); }

void copy_1d(Push& p, std::uint32_t subchannel, std::uint32_t copy_class, std::uint64_t dst, std::uint64_t src,
             std::uint64_t bytes) {
  const std::uint32_t n = checked_bytes(bytes, "copy");
  check_copy_address(copy_class, src, bytes, "copy source");
  check_copy_address(copy_class, dst, bytes, "copy destination");
  offsets(p, subchannel, src, dst);
  p.inc(subchannel, copy::LINE_LENGTH_IN).data(n);
  p.inc(subchannel, copy::LAUNCH_DMA)
      .data(copy::LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED | copy::LAUNCH_DMA_FLUSH_ENABLE |
            copy::LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH | copy::LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH);
}

void copy_2d(Push& p, std::uint32_t subchannel, std::uint32_t copy_class, std::uint64_t dst, std::uint32_t dst_pitch,
             std::uint64_t src, std::uint32_t src_pitch, std::uint32_t line_bytes, std::uint32_t lines) {
  checked_bytes(line_bytes, "2D copy line");
  if (lines == 0) refuse("2D copy of 0 lines");
  const std::uint64_t src_span = std::uint64_t{src_pitch} * (lines - 1) + line_bytes;
  const std::uint64_t dst_span = std::uint64_t{dst_pitch} * (lines - 1) + line_bytes;
  check_copy_address(copy_class, src, src_span, "2D copy source");
  check_copy_address(copy_class, dst, dst_span, "2D copy destination");
  offsets(p, subchannel, src, dst);
  p.inc(subchannel, copy::PITCH_IN).data(src_pitch).data(dst_pitch).data(line_bytes).data(lines);
  p.inc(subchannel, copy::LAUNCH_DMA)
      .data(copy::LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED | copy::LAUNCH_DMA_FLUSH_ENABLE |
            copy::LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH | copy::LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH |
            copy::LAUNCH_DMA_MULTI_LINE_ENABLE);
}

void fill(Push& p, std::uint32_t subchannel, std::uint32_t copy_class, std::uint64_t dst, std::uint64_t bytes,
          std::uint8_t value) {
  checked_bytes(bytes, "fill");
  check_copy_address(copy_class, dst, bytes, "fill destination");
  const bool words = dst % 4 == 0 && bytes % 4 == 0;
  const std::uint32_t component = words ? 4 : 1;
  const std::uint32_t pattern = words ? 0x01010101u * value : value;
  // DST_X from CONST_A, Y/Z/W not written; one source and one destination component.
  const std::uint32_t components = copy::SET_REMAP_COMPONENTS_DST_CONST_A | (copy::SET_REMAP_COMPONENTS_DST_NO_WRITE << 4) |
                                   (copy::SET_REMAP_COMPONENTS_DST_NO_WRITE << 8) |
                                   (copy::SET_REMAP_COMPONENTS_DST_NO_WRITE << 12) |
                                   ((component - 1) << copy::SET_REMAP_COMPONENTS_COMPONENT_SIZE_SHIFT);
  p.inc(subchannel, copy::SET_REMAP_CONST_A).data(pattern).data(0).data(components);
  p.inc(subchannel, copy::OFFSET_OUT_UPPER).data(hi32(dst)).data(lo32(dst));
  p.inc(subchannel, copy::LINE_LENGTH_IN).data(static_cast<std::uint32_t>(bytes / component));
  p.inc(subchannel, copy::LAUNCH_DMA)
      .data(copy::LAUNCH_DMA_DATA_TRANSFER_TYPE_NON_PIPELINED | copy::LAUNCH_DMA_FLUSH_ENABLE |
            copy::LAUNCH_DMA_SRC_MEMORY_LAYOUT_PITCH | copy::LAUNCH_DMA_DST_MEMORY_LAYOUT_PITCH |
            copy::LAUNCH_DMA_REMAP_ENABLE);
}

void copy_semaphore_release(Push& p, std::uint32_t subchannel, std::uint32_t copy_class, std::uint64_t address,
                            std::uint64_t payload, bool timestamp) {
  const bool hopper = copy_address_limit(copy_class) == copy::C8B5_ADDRESS_LIMIT;
  if (!hopper && payload > 0xffffffffu)
    refuse(fmt::format("C6B5 semaphore release of {:#x}: C6B5 has no SET_SEMAPHORE_PAYLOAD_UPPER", payload));
  const std::uint64_t align = timestamp ? 16 : (hopper ? 8 : 4);
  if (address % align != 0) refuse(fmt::format("copy semaphore release at {:#x}: not {}-aligned", address, align));
  check_copy_address(copy_class, address, align, "copy semaphore");
  p.inc(subchannel, copy::SET_SEMAPHORE_A).data(hi32(address)).data(lo32(address)).data(lo32(payload));
  if (hopper) p.data(hi32(payload));
  const std::uint32_t type = timestamp ? copy::LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_FOUR_WORD_SEMAPHORE
                                       : copy::LAUNCH_DMA_SEMAPHORE_TYPE_RELEASE_ONE_WORD_SEMAPHORE;
  p.inc(subchannel, copy::LAUNCH_DMA)
      .data(copy::LAUNCH_DMA_FLUSH_ENABLE | (type << copy::LAUNCH_DMA_SEMAPHORE_TYPE_SHIFT) |
            (hopper ? copy::LAUNCH_DMA_SEMAPHORE_PAYLOAD_SIZE_TWO_WORD : 0));
}

void set_memory_windows(Push& p, std::uint32_t subchannel, std::uint64_t shared_window, std::uint64_t local_window) {
  for (const auto w : {shared_window, local_window})
    if (w >= (1ull << 49)) refuse(fmt::format("memory window {:#x} does not fit 49 bits (upper 16:0)", w));
  p.inc(subchannel, compute::SET_SHADER_SHARED_MEMORY_WINDOW_A).data(hi32(shared_window)).data(lo32(shared_window));
  p.inc(subchannel, compute::SET_SHADER_LOCAL_MEMORY_WINDOW_A).data(hi32(local_window)).data(lo32(local_window));
}

void set_local_memory(Push& p, std::uint32_t subchannel, std::uint64_t address, std::uint64_t bytes,
                      std::uint32_t max_sm_count) {
  if (address >= (1ull << 57)) refuse(fmt::format("local memory at {:#x} does not fit 57 bits (upper 24:0)", address));
  if (bytes >= (1ull << 40)) refuse(fmt::format("local memory of {:#x} bytes does not fit 40 bits (upper 7:0)", bytes));
  if (max_sm_count > 0x1ff) refuse(fmt::format("local memory for {} SMs does not fit MAX_SM_COUNT 8:0", max_sm_count));
  p.inc(subchannel, compute::SET_SHADER_LOCAL_MEMORY_A).data(hi32(address)).data(lo32(address));
  p.inc(subchannel, compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A).data(hi32(bytes)).data(lo32(bytes)).data(max_sm_count);
}

void launch(Push& p, std::uint32_t subchannel, std::uint64_t qmd_address, std::uint32_t action) {
  if (qmd_address % 256 != 0 || qmd_address >= (1ull << 40))
    refuse(fmt::format("QMD address {:#x} is not 256-aligned below 2^40", qmd_address));
  if (action > 0xf) refuse(fmt::format("PCAS_ACTION {} does not fit 3:0", action));
  p.inc(subchannel, compute::SEND_PCAS_A).data(static_cast<std::uint32_t>(qmd_address >> 8));
  p.inc(subchannel, compute::SEND_SIGNALING_PCAS2_B).data(action);
}

}  // namespace rig::nv
