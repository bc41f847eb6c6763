// decode.cpp — the formats of decode.hpp, field by field as the class headers lay them out.
#include "decode.hpp"

#include <fmt/format.h>

namespace rig::sim::nv {

namespace {

std::uint32_t bits(std::uint32_t word, unsigned hi, unsigned lo) {
  const unsigned width = hi - lo + 1;
  const std::uint32_t mask = width >= 32 ? ~0u : (1u << width) - 1;
  return (word >> lo) & mask;
}

// Method header fields (clc56f.h NVC56F_DMA_*).
constexpr unsigned sec_op_hi = 31, sec_op_lo = 29;
constexpr unsigned count_hi = 28, count_lo = 16;
constexpr unsigned tert_op_hi = 17, tert_op_lo = 16;
constexpr unsigned subchannel_hi = 15, subchannel_lo = 13;
constexpr unsigned address_hi = 11, address_lo = 0;
constexpr unsigned subdevice_mask_hi = 15, subdevice_mask_lo = 4;

enum Sec_op : std::uint32_t {
  grp0_use_tert = 0, inc_method = 1, grp2_use_tert = 2, non_inc_method = 3,
  immd_data_method = 4, one_inc = 5, reserved6 = 6, end_pb_segment = 7,
};
enum Tert_op : std::uint32_t { grp0_inc_method = 0, set_sub_dev_mask = 1, store_sub_dev_mask = 2, use_sub_dev_mask = 3 };

// GP entry fields (clc56f.h / clc86f.h NVC?6F_GP_ENTRY*).
constexpr std::uint32_t gp_get_mask = 0xfffffffcu;      // ENTRY0_GET 31:2, in place
constexpr unsigned gp_get_hi_hi = 7, gp_get_hi_lo = 0;  // ENTRY1_GET_HI: address 39:32
constexpr unsigned gp_level_bit = 9;
constexpr unsigned gp_length_hi = 30, gp_length_lo = 10;
constexpr unsigned gp_sync_bit = 31;
constexpr unsigned gp_opcode_hi = 7, gp_opcode_lo = 0;
constexpr unsigned gp_extended_base_hi = 24, gp_extended_base_lo = 8;  // C86F only

Reduction host_reduction(std::uint32_t v) {
  // NVC56F_SEM_EXECUTE_REDUCTION: IMIN 0, IMAX 1, IXOR 2, IAND 3, IOR 4, IADD 5, INC 6, DEC 7.
  static constexpr Reduction order[] = {Reduction::min, Reduction::max, Reduction::bit_xor, Reduction::bit_and,
                                        Reduction::bit_or, Reduction::add, Reduction::inc, Reduction::dec};
  return order[v & 7];
}

Reduction qmd_reduction(std::uint32_t v) {
  // NVCBC0_QMDV04_00_RELEASE_REDUCTION_OP / NVC6C0_QMDV03_00_RELEASE0_REDUCTION_OP:
  // ADD 0, MIN 1, MAX 2, INC 3, DEC 4, AND 5, OR 6, XOR 7.
  static constexpr Reduction order[] = {Reduction::add, Reduction::min, Reduction::max, Reduction::inc,
                                        Reduction::dec, Reduction::bit_and, Reduction::bit_or, Reduction::bit_xor};
  return order[v & 7];
}

}  // namespace

std::uint64_t field(std::span<const std::uint32_t> words, unsigned hi, unsigned lo) {
  std::uint64_t v = 0;
  for (unsigned b = hi + 1; b-- > lo;) {
    const unsigned w = b / 32;
    const std::uint64_t bit = w < words.size() ? (words[w] >> (b % 32)) & 1u : 0;
    v = (v << 1) | bit;
  }
  return v;
}

std::expected<Header, std::string> decode_header(std::uint32_t word) {
  Header h;
  if (word == 0) return h;  // NVC56F_DMA_NOP
  h.subchannel = bits(word, subchannel_hi, subchannel_lo);
  h.method = bits(word, address_hi, address_lo) << 2;
  h.count = bits(word, count_hi, count_lo);
  switch (bits(word, sec_op_hi, sec_op_lo)) {
    case inc_method:
      h.kind = Header_kind::increasing;
      return h;
    case non_inc_method:
      h.kind = Header_kind::non_increasing;
      return h;
    case immd_data_method:
      h.kind = Header_kind::immediate;
      h.data = h.count;
      h.count = 0;
      return h;
    case one_inc:
      h.kind = Header_kind::increase_once;
      return h;
    case end_pb_segment:
      return Header{Header_kind::end_segment, 0, 0, 0, 0};
    case grp0_use_tert: {
      const std::uint32_t mask = bits(word, subdevice_mask_hi, subdevice_mask_lo);
      switch (bits(word, tert_op_hi, tert_op_lo)) {
        case set_sub_dev_mask:
          return Header{Header_kind::set_subdevice_mask, 0, 0, 0, mask};
        case store_sub_dev_mask:
          return Header{Header_kind::store_subdevice_mask, 0, 0, 0, mask};
        case use_sub_dev_mask:
          return Header{Header_kind::use_subdevice_mask, 0, 0, 0, 0};
        default:
          return std::unexpected(fmt::format(
              "method header {:#010x}: SEC_OP 0 with TERT_OP 0 is the old incrementing form, not valid on Volta and later",
              word));
      }
    }
    case grp2_use_tert:
      return std::unexpected(fmt::format(
          "method header {:#010x}: SEC_OP 2 is the old non-incrementing form, not valid on Volta and later", word));
    default:
      return std::unexpected(fmt::format("method header {:#010x}: SEC_OP 6 is reserved", word));
  }
}

Segment decode_segment(std::span<const std::uint32_t> words, Pushbuffer_state& state) {
  Segment s;
  std::size_t i = 0;
  while (i < words.size()) {
    const std::size_t at = i;
    auto h = decode_header(words[i++]);
    if (!h) {
      s.error = fmt::format("word {}: {}", at, h.error());
      return s;
    }
    const bool on = (state.mask & 1u) != 0;  // this simulator is subdevice 0
    const auto emit = [&](std::uint32_t method, std::uint32_t data) {
      if (on) s.methods.push_back({h->subchannel, method, data, static_cast<std::uint32_t>(at)});
    };
    switch (h->kind) {
      case Header_kind::nop:
        break;
      case Header_kind::end_segment:
        s.ended = true;
        return s;
      case Header_kind::set_subdevice_mask:
        state.mask = h->data;
        break;
      case Header_kind::store_subdevice_mask:
        state.stored = h->data;
        break;
      case Header_kind::use_subdevice_mask:
        state.mask = state.stored;
        break;
      case Header_kind::immediate:
        emit(h->method, h->data);
        break;
      case Header_kind::increasing:
      case Header_kind::non_increasing:
      case Header_kind::increase_once: {
        if (h->count > words.size() - i) {
          s.error = fmt::format("word {}: method header {:#010x} (method {:#x}) counts {} data words but the segment has {} left",
                                at, words[at], h->method, h->count, words.size() - i);
          return s;
        }
        for (std::uint32_t k = 0; k < h->count; ++k) {
          std::uint32_t step = 0;
          if (h->kind == Header_kind::increasing) step = k;
          if (h->kind == Header_kind::increase_once) step = k == 0 ? 0 : 1;
          // ADDRESS is 12 bits of dwords: an increasing run wraps inside the method space.
          emit((h->method + 4 * step) & 0x3ffcu, words[i + k]);
        }
        i += h->count;
        break;
      }
    }
  }
  return s;
}

std::expected<Gp_entry, std::string> decode_gp_entry(std::uint32_t w0, std::uint32_t w1, std::uint32_t channel_class) {
  Gp_entry e;
  e.conditional = (w0 & 1u) != 0;
  e.subroutine = ((w1 >> gp_level_bit) & 1u) != 0;
  e.sync_wait = ((w1 >> gp_sync_bit) & 1u) != 0;
  e.length = bits(w1, gp_length_hi, gp_length_lo);
  if (e.length != 0) {
    e.kind = Gp_entry::Kind::segment;
    e.address = (std::uint64_t{bits(w1, gp_get_hi_hi, gp_get_hi_lo)} << 32) | (w0 & gp_get_mask);
    return e;
  }
  e.operand = w0;
  switch (const std::uint32_t opcode = bits(w1, gp_opcode_hi, gp_opcode_lo)) {
    case 0:
      e.kind = Gp_entry::Kind::nop;
      return e;
    case 1:
      e.kind = Gp_entry::Kind::illegal;
      return e;
    case 2:
      e.kind = Gp_entry::Kind::gp_crc;
      return e;
    case 3:
      e.kind = Gp_entry::Kind::pb_crc;
      return e;
    case 4:
      if (channel_class == hopper_channel_gpfifo_a) {
        e.kind = Gp_entry::Kind::extended_base;
        e.operand = bits(w0, gp_extended_base_hi, gp_extended_base_lo);
        return e;
      }
      [[fallthrough]];
    default:
      return std::unexpected(fmt::format("GP entry {:#010x}'{:08x}: control OPCODE {} is not defined by class {:#06x}",
                                         w1, w0, opcode, channel_class));
  }
}

std::uint64_t reduce(Reduction r, std::uint64_t old, std::uint64_t operand, unsigned bits_, bool is_unsigned) {
  const std::uint64_t mask = bits_ >= 64 ? ~0ull : (1ull << bits_) - 1;
  old &= mask;
  operand &= mask;
  const auto as_signed = [&](std::uint64_t v) -> std::int64_t {
    if (bits_ >= 64) return static_cast<std::int64_t>(v);
    const std::uint64_t sign = 1ull << (bits_ - 1);
    return static_cast<std::int64_t>((v ^ sign) - sign);
  };
  const bool less = is_unsigned ? old < operand : as_signed(old) < as_signed(operand);
  std::uint64_t v = 0;
  switch (r) {
    case Reduction::min: v = less ? old : operand; break;
    case Reduction::max: v = less ? operand : old; break;
    case Reduction::bit_xor: v = old ^ operand; break;
    case Reduction::bit_and: v = old & operand; break;
    case Reduction::bit_or: v = old | operand; break;
    case Reduction::add: v = old + operand; break;
    case Reduction::inc: v = old >= operand ? 0 : old + 1; break;
    case Reduction::dec: v = (old == 0 || old > operand) ? operand : old - 1; break;
  }
  return v & mask;
}

std::expected<Sem_execute, std::string> decode_sem_execute(std::uint32_t word) {
  Sem_execute s;
  const std::uint32_t op = bits(word, 2, 0);  // OPERATION 2:0
  if (op > 6)
    return std::unexpected(fmt::format("SEM_EXECUTE {:#010x}: OPERATION {} is not defined", word, op));
  s.op = static_cast<Sem_execute::Op>(op);
  s.acquire_switch_tsg = bits(word, 12, 12) != 0;
  s.release_wfi = bits(word, 20, 20) != 0;
  s.payload_64 = bits(word, 24, 24) != 0;
  s.release_timestamp = bits(word, 25, 25) != 0;
  const std::uint32_t reduction = bits(word, 30, 27);
  if (s.op == Sem_execute::Op::reduction && reduction > 7)
    return std::unexpected(fmt::format("SEM_EXECUTE {:#010x}: REDUCTION {} is not defined", word, reduction));
  s.reduction = host_reduction(reduction);
  s.reduction_unsigned = bits(word, 31, 31) != 0;
  return s;
}

std::expected<Launch_dma, std::string> decode_launch_dma(std::uint32_t word, std::uint32_t copy_class) {
  Launch_dma d;
  const std::uint32_t transfer = bits(word, 1, 0);
  if (transfer == 3)
    return std::unexpected(fmt::format("LAUNCH_DMA {:#010x}: DATA_TRANSFER_TYPE 3 is not defined", word));
  d.transfer = static_cast<Launch_dma::Transfer>(transfer);
  d.flush = bits(word, 2, 2) != 0;
  d.semaphore = static_cast<Launch_dma::Semaphore>(bits(word, 4, 3));
  const std::uint32_t interrupt = bits(word, 6, 5);
  if (interrupt == 3)
    return std::unexpected(fmt::format("LAUNCH_DMA {:#010x}: INTERRUPT_TYPE 3 is not defined", word));
  d.interrupt = static_cast<Launch_dma::Interrupt>(interrupt);
  d.src_pitch = bits(word, 7, 7) != 0;
  d.dst_pitch = bits(word, 8, 8) != 0;
  d.multi_line = bits(word, 9, 9) != 0;
  d.remap = bits(word, 10, 10) != 0;
  d.src_physical = bits(word, 12, 12) != 0;
  d.dst_physical = bits(word, 13, 13) != 0;
  d.reduction = bits(word, 17, 14);
  d.reduction_unsigned = bits(word, 18, 18) != 0;
  d.reduction_enable = bits(word, 19, 19) != 0;
  if (copy_class == hopper_dma_copy_a) {
    d.memory_scrub = bits(word, 23, 23) != 0;
    d.payload_two_words = bits(word, 27, 27) != 0;
  } else if (bits(word, 27, 27) != 0) {
    return std::unexpected(fmt::format(
        "LAUNCH_DMA {:#010x}: bit 27 (SEMAPHORE_PAYLOAD_SIZE on C8B5) is reserved on class {:#06x}", word, copy_class));
  }
  return d;
}

std::expected<Remap, std::string> decode_remap(std::uint32_t word) {
  Remap r;
  for (unsigned c = 0; c < 4; ++c) {
    const std::uint32_t v = bits(word, 4 * c + 2, 4 * c);
    if (v == 7)
      return std::unexpected(fmt::format("SET_REMAP_COMPONENTS {:#010x}: DST_{} source 7 is not defined", word, "XYZW"[c]));
    r.dst[c] = static_cast<Remap::Source>(v);
  }
  r.component_size = bits(word, 17, 16) + 1;
  r.src_components = bits(word, 21, 20) + 1;
  r.dst_components = bits(word, 25, 24) + 1;
  return r;
}

namespace {

std::expected<void, std::string> check_release(const Qmd::Release& r, std::uint32_t size_field, unsigned i,
                                               const char* version) {
  if (r.enable && size_field == 3)
    return std::unexpected(fmt::format("QMD {}: release {} STRUCTURE_SIZE 3 is not defined", version, i));
  return {};
}

}  // namespace

std::expected<Qmd, std::string> decode_qmd_v04(std::span<const std::uint32_t> w) {
  if (w.size() < qmd_v04_words)
    return std::unexpected(fmt::format("QMD V04_00: {} words, the format has {}", w.size(), qmd_v04_words));
  const auto f = [&](unsigned hi, unsigned lo) { return field(w, hi, lo); };
  Qmd q;
  q.major = f(583, 580);
  q.minor = f(579, 576);
  if (q.major != 4)
    return std::unexpected(fmt::format("QMD V04_00: QMD_MAJOR_VERSION is {} (minor {}), not 4", q.major, q.minor));
  q.qmd_type = f(25, 23);
  q.is_grid = q.qmd_type == 2;  // QMD_TYPE_GRID_CTA
  q.grid = {static_cast<std::uint32_t>(f(1055, 1024)), static_cast<std::uint32_t>(f(1071, 1056)),
            static_cast<std::uint32_t>(f(1103, 1088))};
  q.block = {static_cast<std::uint32_t>(f(1167, 1152)), static_cast<std::uint32_t>(f(1183, 1168)),
             static_cast<std::uint32_t>(f(1199, 1184))};
  q.registers = f(1208, 1200);
  q.barriers = f(1215, 1211);
  q.program_address = (f(1272, 1248) << 32) | f(1247, 1216);
  q.shared_memory_size = f(601, 584);
  q.min_sm_config_shared = f(613, 608);
  q.max_sm_config_shared = f(619, 614);
  q.target_sm_config_shared = f(625, 620);
  q.local_memory_low = f(535, 512);
  q.local_memory_high = f(567, 544);
  q.sass_version = f(543, 536);
  for (unsigned i = 0; i < qmd_banks; ++i) {
    auto& b = q.banks[i];
    b.valid = f(416 + 4 * i, 416 + 4 * i) != 0;
    const std::uint64_t lower = f(1567 + 64 * i, 1536 + 64 * i), upper = f(1586 + 64 * i, 1568 + 64 * i);
    b.address = ((upper << 32) | lower) << 6;  // ADDR_*_SHIFTED6
    b.size = static_cast<std::uint32_t>(f(1599 + 64 * i, 1587 + 64 * i) << 4);  // SIZE_SHIFTED4
  }
  for (unsigned i = 0; i < qmd_releases; ++i) {
    auto& r = q.releases[i];
    const unsigned b = 320 + 16 * i;  // RELEASE_*(i) at 320 + 16i
    r.enable = f(b, b) != 0;
    const std::uint32_t size = f(b + 2, b + 1);
    if (auto ok = check_release(r, size, i, "V04_00"); !ok) return std::unexpected(ok.error());
    r.size = static_cast<Qmd::Release::Size>(size & 3);
    r.reduction_enable = f(b + 4, b + 4) != 0;
    r.reduction = qmd_reduction(f(b + 7, b + 5));
    r.reduction_unsigned = f(b + 9, b + 8) == 0;  // FORMAT UNSIGNED 0, SIGNED 1
    r.payload_64 = f(b + 12, b + 12) != 0;
    const unsigned s = 640 + 128 * i;  // RELEASE_SEMAPHORE<i>_ADDR_LOWER
    r.address = (f(s + 56, s + 32) << 32) | f(s + 31, s);
    r.payload = (f(s + 127, s + 96) << 32) | f(s + 95, s + 64);
  }
  return q;
}

std::expected<Qmd, std::string> decode_qmd_v03(std::span<const std::uint32_t> w) {
  if (w.size() < qmd_v03_words)
    return std::unexpected(fmt::format("QMD V03_00: {} words, the format has {}", w.size(), qmd_v03_words));
  const auto f = [&](unsigned hi, unsigned lo) { return field(w, hi, lo); };
  Qmd q;
  q.major = f(583, 580);
  q.minor = f(579, 576);
  if (q.major != 3)
    return std::unexpected(fmt::format("QMD V03_00: QMD_MAJOR_VERSION is {} (version {}), not 3", q.major, q.minor));
  q.qmd_type = f(136, 136);  // IS_QUEUE
  q.is_grid = q.qmd_type == 0;
  q.grid = {static_cast<std::uint32_t>(f(415, 384)), static_cast<std::uint32_t>(f(431, 416)),
            static_cast<std::uint32_t>(f(463, 448))};
  q.block = {static_cast<std::uint32_t>(f(607, 592)), static_cast<std::uint32_t>(f(623, 608)),
             static_cast<std::uint32_t>(f(639, 624))};
  q.registers = f(656, 648);
  q.barriers = f(767, 763);
  q.program_address = (f(1584, 1568) << 32) | f(1567, 1536);
  q.shared_memory_size = f(561, 544);
  q.min_sm_config_shared = f(567, 562);
  q.max_sm_config_shared = f(574, 569);
  q.target_sm_config_shared = f(662, 657);
  q.local_memory_low = f(759, 736);
  q.local_memory_high = f(1623, 1600);
  q.sass_version = f(1663, 1656);
  for (unsigned i = 0; i < qmd_banks; ++i) {
    auto& b = q.banks[i];
    b.valid = f(640 + i, 640 + i) != 0;
    b.address = (f(1072 + 64 * i, 1056 + 64 * i) << 32) | f(1055 + 64 * i, 1024 + 64 * i);
    b.size = static_cast<std::uint32_t>(f(1087 + 64 * i, 1075 + 64 * i) << 4);
  }
  // RELEASE0 at 768, RELEASE1 at 896, RELEASE2 at 1664: address lower, upper (8 bits), then
  // the flags word, then the payload.
  static constexpr unsigned base[qmd_releases] = {768, 896, 1664};
  for (unsigned i = 0; i < qmd_releases; ++i) {
    auto& r = q.releases[i];
    const unsigned s = base[i];
    r.address = (f(s + 39, s + 32) << 32) | f(s + 31, s);
    r.enable = f(s + 55, s + 55) != 0;
    const std::uint32_t size = f(s + 63, s + 62);
    if (auto ok = check_release(r, size, i, "V03_00"); !ok) return std::unexpected(ok.error());
    r.size = static_cast<Qmd::Release::Size>(size & 3);
    r.reduction = qmd_reduction(f(s + 54, s + 52));
    r.reduction_unsigned = f(s + 57, s + 56) == 0;
    r.reduction_enable = f(s + 58, s + 58) != 0;
    r.payload_64 = f(s + 61, s + 61) != 0;
    r.payload = (f(s + 127, s + 96) << 32) | f(s + 95, s + 64);
  }
  return q;
}

}  // namespace rig::sim::nv
