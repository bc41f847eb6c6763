// The NVIDIA simulator's decoder (decode.hpp), on words written by hand from the class
// headers' field definitions.
#include <doctest/doctest.h>

#include "decode.hpp"

using namespace rig::sim::nv;

// --- method headers (clc56f.h NVC56F_DMA_*) ---------------------------------------------------

TEST_CASE("decode_header reads an incrementing header's count, subchannel and method") {
  // SEC_OP 1 (31:29), COUNT 5 (28:16), SUBCHANNEL 3 (15:13), ADDRESS 0x17 dwords (11:0).
  auto h = decode_header(0x2005'6017u);
  REQUIRE(h);
  CHECK(h->kind == Header_kind::increasing);
  CHECK(h->count == 5);
  CHECK(h->subchannel == 3);
  CHECK(h->method == 0x5c);
}

TEST_CASE("decode_header reads non-increasing, increase-once and immediate headers") {
  auto n = decode_header(0x6002'0019u);  // SEC_OP 3, COUNT 2, subchannel 0, method 0x64
  REQUIRE(n);
  CHECK(n->kind == Header_kind::non_increasing);
  CHECK(n->count == 2);
  CHECK(n->method == 0x64);
  auto o = decode_header(0xa003'8017u);  // SEC_OP 5, COUNT 3, subchannel 4, method 0x5c
  REQUIRE(o);
  CHECK(o->kind == Header_kind::increase_once);
  CHECK(o->subchannel == 4);
  CHECK(o->count == 3);
  auto i = decode_header(0x8fff'201bu);  // SEC_OP 4, IMMD_DATA 0xfff, subchannel 1, method 0x6c
  REQUIRE(i);
  CHECK(i->kind == Header_kind::immediate);
  CHECK(i->data == 0xfff);
  CHECK(i->count == 0);
  CHECK(i->method == 0x6c);
  CHECK(i->subchannel == 1);
}

TEST_CASE("decode_header reads NOP, END_PB_SEGMENT and the subdevice mask forms") {
  CHECK(decode_header(0)->kind == Header_kind::nop);
  CHECK(decode_header(0xe000'0000u)->kind == Header_kind::end_segment);
  auto set = decode_header(0x0001'0ab0u);  // SEC_OP 0, TERT_OP 1, mask 0xab (15:4)
  REQUIRE(set);
  CHECK(set->kind == Header_kind::set_subdevice_mask);
  CHECK(set->data == 0xab);
  CHECK(decode_header(0x0002'0010u)->kind == Header_kind::store_subdevice_mask);
  CHECK(decode_header(0x0003'0000u)->kind == Header_kind::use_subdevice_mask);
}

TEST_CASE("decode_header refuses the old method forms and the reserved SEC_OP") {
  const auto old_inc = decode_header(0x0004'0017u);  // SEC_OP 0, TERT_OP 0, not zero
  REQUIRE(!old_inc);
  CHECK(old_inc.error().find("0x00040017") != std::string::npos);
  CHECK(old_inc.error().find("old incrementing") != std::string::npos);
  const auto old_non_inc = decode_header(0x4001'0017u);  // SEC_OP 2
  REQUIRE(!old_non_inc);
  CHECK(old_non_inc.error().find("SEC_OP 2") != std::string::npos);
  const auto reserved = decode_header(0xc001'0017u);  // SEC_OP 6
  REQUIRE(!reserved);
  CHECK(reserved.error().find("reserved") != std::string::npos);
}

TEST_CASE("decode_segment delivers every data word to its method in order") {
  const std::uint32_t words[] = {
      0x2002'2017u, 1, 2,     // increasing, subchannel 1: 0x5c, 0x60
      0x6002'0019u, 3, 4,     // non-increasing: 0x64, 0x64
      0xa003'0017u, 5, 6, 7,  // increase-once: 0x5c, 0x60, 0x60
      0x8001'001bu,           // immediate 1 to 0x6c
  };
  Pushbuffer_state st;
  const Segment s = decode_segment(words, st);
  REQUIRE(!s.error);
  CHECK(!s.ended);
  const std::uint32_t methods[] = {0x5c, 0x60, 0x64, 0x64, 0x5c, 0x60, 0x60, 0x6c};
  const std::uint32_t data[] = {1, 2, 3, 4, 5, 6, 7, 1};
  const std::uint32_t at[] = {0, 0, 3, 3, 6, 6, 6, 10};
  REQUIRE(s.methods.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(s.methods[i].method == methods[i]);
    CHECK(s.methods[i].data == data[i]);
    CHECK(s.methods[i].at == at[i]);
  }
  CHECK(s.methods[0].subchannel == 1);
  CHECK(s.methods[2].subchannel == 0);
}

TEST_CASE("decode_segment stops at END_PB_SEGMENT and reports a count past the end") {
  Pushbuffer_state st;
  const std::uint32_t ended[] = {0x8001'001bu, 0xe000'0000u, 0xc000'0000u};
  const Segment e = decode_segment(ended, st);
  CHECK(e.ended);
  CHECK(!e.error);
  CHECK(e.methods.size() == 1);
  const std::uint32_t short_[] = {0x8001'001bu, 0x2003'0017u, 1, 2};
  const Segment s = decode_segment(short_, st);
  REQUIRE(s.error);
  CHECK(s.error->find("word 1") != std::string::npos);
  CHECK(s.error->find("counts 3 data words but the segment has 2 left") != std::string::npos);
  CHECK(s.methods.size() == 1);  // the method before the bad header was decoded
}

TEST_CASE("decode_segment drops methods while the subdevice mask lacks bit 0, and keeps the mask state") {
  Pushbuffer_state st;
  const std::uint32_t words[] = {0x0002'0010u,   // STORE mask 1
                                 0x0001'0020u,   // SET mask 2: subdevice 0 off
                                 0x8001'001bu,   // dropped
                                 0x0003'0000u,   // USE the stored mask 1
                                 0x8002'001bu};  // kept
  const Segment s = decode_segment(words, st);
  REQUIRE(!s.error);
  REQUIRE(s.methods.size() == 1);
  CHECK(s.methods[0].data == 2);
  CHECK(st.mask == 1);
  CHECK(st.stored == 1);
}

// --- GP entries (clc56f.h / clc86f.h NVC?6F_GP_ENTRY0/1) ----------------------------------------

TEST_CASE("decode_gp_entry reads a segment's 40-bit address, length in words and SYNC") {
  // ENTRY0 GET 31:2 in place; ENTRY1 GET_HI 7:0 = 0x12, LENGTH 30:10 = 6, SYNC 31.
  auto e = decode_gp_entry(0x0010'0000u, 0x8000'1812u, hopper_channel_gpfifo_a);
  REQUIRE(e);
  CHECK(e->kind == Gp_entry::Kind::segment);
  CHECK(e->address == 0x12'0010'0000ull);
  CHECK(e->length == 6);
  CHECK(e->sync_wait);
  CHECK(!e->subroutine);
  CHECK(!e->conditional);
  auto f = decode_gp_entry(0x0010'0001u, 0x0000'0600u, ampere_channel_gpfifo_a);  // FETCH 1, LEVEL 1, LENGTH 1
  REQUIRE(f);
  CHECK(f->conditional);
  CHECK(f->subroutine);
  CHECK(f->length == 1);
  CHECK(f->address == 0x0010'0000ull);
}

TEST_CASE("decode_gp_entry reads the control entries and refuses opcodes the class lacks") {
  CHECK(decode_gp_entry(0, 0, hopper_channel_gpfifo_a)->kind == Gp_entry::Kind::nop);
  CHECK(decode_gp_entry(0, 1, hopper_channel_gpfifo_a)->kind == Gp_entry::Kind::illegal);
  auto crc = decode_gp_entry(0xdead'beefu, 2, ampere_channel_gpfifo_a);
  REQUIRE(crc);
  CHECK(crc->kind == Gp_entry::Kind::gp_crc);
  CHECK(crc->operand == 0xdead'beefu);
  CHECK(decode_gp_entry(0, 3, ampere_channel_gpfifo_a)->kind == Gp_entry::Kind::pb_crc);
  auto base = decode_gp_entry(0x0001'2300u, 4, hopper_channel_gpfifo_a);  // PB_EXTENDED_BASE_OPERAND 24:8
  REQUIRE(base);
  CHECK(base->kind == Gp_entry::Kind::extended_base);
  CHECK(base->operand == 0x123);
  const auto ampere = decode_gp_entry(0x0001'2300u, 4, ampere_channel_gpfifo_a);
  REQUIRE(!ampere);
  CHECK(ampere.error().find("OPCODE 4") != std::string::npos);
  CHECK(ampere.error().find("0xc56f") != std::string::npos);
  CHECK(!decode_gp_entry(0, 5, hopper_channel_gpfifo_a));
}

// --- SEM_EXECUTE (clc56f.h NVC56F_SEM_EXECUTE) ---------------------------------------------------

TEST_CASE("decode_sem_execute reads the operation and its flags") {
  auto r = decode_sem_execute(0x0310'0001u);  // RELEASE, RELEASE_WFI 20, PAYLOAD_SIZE 24, RELEASE_TIMESTAMP 25
  REQUIRE(r);
  CHECK(r->op == Sem_execute::Op::release);
  CHECK(r->release_wfi);
  CHECK(r->payload_64);
  CHECK(r->release_timestamp);
  auto a = decode_sem_execute(0x0000'1003u);  // ACQ_CIRC_GEQ, ACQUIRE_SWITCH_TSG 12
  REQUIRE(a);
  CHECK(a->op == Sem_execute::Op::acquire_circ_geq);
  CHECK(a->acquire_switch_tsg);
  CHECK(!a->payload_64);
  auto red = decode_sem_execute(0xa800'0006u);  // REDUCTION 6, REDUCTION 30:27 = 5 (IADD), FORMAT 31 unsigned
  REQUIRE(red);
  CHECK(red->op == Sem_execute::Op::reduction);
  CHECK(red->reduction == Reduction::add);
  CHECK(red->reduction_unsigned);
}

TEST_CASE("decode_sem_execute refuses an undefined operation") {
  const auto e = decode_sem_execute(0x0000'0007u);
  REQUIRE(!e);
  CHECK(e.error().find("OPERATION 7") != std::string::npos);
}

TEST_CASE("reduce applies each reduction in its width and signedness") {
  CHECK(reduce(Reduction::add, 0xffff'ffffu, 2, 32, true) == 1);
  CHECK(reduce(Reduction::add, 0xffff'ffffu, 2, 64, true) == 0x1'0000'0001ull);
  CHECK(reduce(Reduction::min, 0xffff'ffffu, 1, 32, false) == 0xffff'ffffu);  // -1 < 1
  CHECK(reduce(Reduction::min, 0xffff'ffffu, 1, 32, true) == 1);
  CHECK(reduce(Reduction::max, 0xffff'ffffu, 1, 32, false) == 1);
  CHECK(reduce(Reduction::inc, 5, 5, 32, true) == 0);
  CHECK(reduce(Reduction::inc, 3, 5, 32, true) == 4);
  CHECK(reduce(Reduction::dec, 0, 5, 32, true) == 5);
  CHECK(reduce(Reduction::dec, 6, 5, 32, true) == 5);
  CHECK(reduce(Reduction::dec, 3, 5, 32, true) == 2);
  CHECK(reduce(Reduction::bit_and, 0b1100, 0b1010, 32, true) == 0b1000);
  CHECK(reduce(Reduction::bit_or, 0b1100, 0b1010, 32, true) == 0b1110);
  CHECK(reduce(Reduction::bit_xor, 0b1100, 0b1010, 32, true) == 0b0110);
}

// --- copy (clc8b5.h / clc6b5.h NVC?B5_LAUNCH_DMA, SET_REMAP_COMPONENTS) --------------------------

TEST_CASE("decode_launch_dma reads every field C8B5 defines") {
  // NON_PIPELINED 1:0 = 2, FLUSH 2, SEMAPHORE_TYPE 4:3 = FOUR_WORD, INTERRUPT_TYPE 6:5 =
  // NON_BLOCKING, SRC/DST PITCH 7, 8, MULTI_LINE 9, REMAP 10, PAYLOAD_SIZE 27 TWO_WORD.
  auto d = decode_launch_dma(0x0800'07d6u, hopper_dma_copy_a);
  REQUIRE(d);
  CHECK(d->transfer == Launch_dma::Transfer::non_pipelined);
  CHECK(d->flush);
  CHECK(d->semaphore == Launch_dma::Semaphore::four_word);
  CHECK(d->interrupt == Launch_dma::Interrupt::non_blocking);
  CHECK(d->src_pitch);
  CHECK(d->dst_pitch);
  CHECK(d->multi_line);
  CHECK(d->remap);
  CHECK(d->payload_two_words);
  CHECK(!d->src_physical);
  CHECK(!d->reduction_enable);
  // SRC_TYPE 12, DST_TYPE 13 physical; SEMAPHORE_REDUCTION 17:14 = 5 with ENABLE 19, SIGN 18
  // unsigned; MEMORY_SCRUB 23; ONE_WORD semaphore; block-linear both sides.
  auto p = decode_launch_dma(0x008d'7009u, hopper_dma_copy_a);
  REQUIRE(p);
  CHECK(p->transfer == Launch_dma::Transfer::pipelined);
  CHECK(p->semaphore == Launch_dma::Semaphore::one_word);
  CHECK(!p->src_pitch);
  CHECK(!p->dst_pitch);
  CHECK(p->src_physical);
  CHECK(p->dst_physical);
  CHECK(p->reduction_enable);
  CHECK(p->reduction == 5);
  CHECK(p->reduction_unsigned);
  CHECK(p->memory_scrub);
}

TEST_CASE("decode_launch_dma refuses undefined values and C8B5 bits on C6B5") {
  const auto transfer = decode_launch_dma(0x3u, hopper_dma_copy_a);
  REQUIRE(!transfer);
  CHECK(transfer.error().find("DATA_TRANSFER_TYPE 3") != std::string::npos);
  const auto interrupt = decode_launch_dma(0x60u, hopper_dma_copy_a);
  REQUIRE(!interrupt);
  CHECK(interrupt.error().find("INTERRUPT_TYPE 3") != std::string::npos);
  const auto ampere = decode_launch_dma(0x0800'0000u, ampere_dma_copy_a);
  REQUIRE(!ampere);
  CHECK(ampere.error().find("bit 27") != std::string::npos);
  auto ampere_ok = decode_launch_dma(0x0000'0396u, ampere_dma_copy_a);
  REQUIRE(ampere_ok);
  CHECK(!ampere_ok->payload_two_words);
  CHECK(ampere_ok->semaphore == Launch_dma::Semaphore::four_word);
}

TEST_CASE("decode_remap reads the destination sources and component counts") {
  // DST_X CONST_A, DST_Y CONST_B, DST_Z NO_WRITE, DST_W SRC_X; COMPONENT_SIZE FOUR (17:16 = 3),
  // NUM_SRC_COMPONENTS TWO (21:20 = 1), NUM_DST_COMPONENTS FOUR (25:24 = 3).
  auto r = decode_remap(0x0313'0654u);
  REQUIRE(r);
  CHECK(r->dst[0] == Remap::Source::const_a);
  CHECK(r->dst[1] == Remap::Source::const_b);
  CHECK(r->dst[2] == Remap::Source::no_write);
  CHECK(r->dst[3] == Remap::Source::src_x);
  CHECK(r->component_size == 4);
  CHECK(r->src_components == 2);
  CHECK(r->dst_components == 4);
  const auto bad = decode_remap(0x0000'0070u);
  REQUIRE(!bad);
  CHECK(bad.error().find("DST_Y source 7") != std::string::npos);
}

// --- QMDs (clcbc0qmd.h V04_00, clc6c0qmd.h V03_00) -----------------------------------------------

namespace {

// A V04_00 QMD written dword by dword from the MW(hi:lo) positions of clcbc0qmd.h.
std::vector<std::uint32_t> hopper_qmd() {
  std::vector<std::uint32_t> w(96);
  w[0] = 0x0100'0000;   // QMD_TYPE 25:23 = GRID_CTA (2)
  w[10] = 0x0005'0003;  // RELEASE_ENABLE(0) 320, STRUCTURE_SIZE(0) 322:321 ONE_WORD; ENABLE(1) 336, SIZE(1) TWO_WORDS
  w[13] = 0x0000'1001;  // CONSTANT_BUFFER_VALID(0) 416, VALID(3) 428
  w[16] = 0x9000'0800;  // SHADER_LOCAL_MEMORY_LOW_SIZE 535:512, SASS_VERSION 543:536
  w[17] = 0x0000'0100;  // SHADER_LOCAL_MEMORY_HIGH_SIZE 567:544
  w[18] = 0x0024'0040;  // QMD_MINOR_VERSION 579:576 = 0, MAJOR 583:580 = 4, SHARED_MEMORY_SIZE 601:584 = 0x2400
  w[19] = 0x0003'ae83;  // MIN/MAX/TARGET_SM_CONFIG_SHARED_MEM_SIZE 613:608, 619:614, 625:620
  w[20] = 0x0020'0010;  // RELEASE_SEMAPHORE0_ADDR_LOWER 671:640
  w[21] = 0x0000'0001;  // ..._ADDR_UPPER 696:672
  w[22] = 0x0000'cafe;  // ..._PAYLOAD_LOWER 735:704
  w[24] = 0x0020'0020;  // RELEASE_SEMAPHORE1_ADDR_LOWER 799:768
  w[26] = 0x1111'2222;  // ..._PAYLOAD_LOWER 863:832
  w[27] = 0x3333'4444;  // ..._PAYLOAD_UPPER 895:864
  w[32] = 100;          // GRID_WIDTH 1055:1024
  w[33] = 2;            // GRID_HEIGHT 1071:1056
  w[34] = 3;            // GRID_DEPTH 1103:1088
  w[36] = 0x0002'0100;  // CTA_THREAD_DIMENSION0 1167:1152 = 256, DIMENSION1 1183:1168 = 2
  w[37] = 0x0828'0001;  // DIMENSION2 1199:1184 = 1, REGISTER_COUNT 1208:1200 = 40, BARRIER_COUNT 1215:1211 = 1
  w[38] = 0x1234'5600;  // PROGRAM_ADDRESS_LOWER 1247:1216
  w[39] = 0x0000'007f;  // PROGRAM_ADDRESS_UPPER 1272:1248
  w[48] = 0x0001'8000;  // CONSTANT_BUFFER_ADDR_LOWER_SHIFTED6(0) 1567:1536 = 0x600000 >> 6
  w[49] = 0x0800'0000;  // SIZE_SHIFTED4(0) 1599:1587 = 0x1000 >> 4
  w[54] = 0xfc00'0001;  // ADDR_LOWER_SHIFTED6(3) 1759:1728: 0x7f00000040 >> 6 = 0x1fc000001
  w[55] = 0x0020'0001;  // ADDR_UPPER_SHIFTED6(3) 1778:1760 = 1, SIZE_SHIFTED4(3) 1791:1779 = 4
  return w;
}

// A V03_00 QMD written the same way from clc6c0qmd.h.
std::vector<std::uint32_t> ampere_qmd() {
  std::vector<std::uint32_t> w(64);
  w[12] = 7;            // CTA_RASTER_WIDTH 415:384
  w[13] = 5;            // CTA_RASTER_HEIGHT 431:416
  w[14] = 1;            // CTA_RASTER_DEPTH 463:448
  w[17] = 0x0000'1000;  // SHARED_MEMORY_SIZE 561:544
  w[18] = 0x0040'0030;  // QMD_VERSION 579:576 = 0, QMD_MAJOR_VERSION 583:580 = 3, CTA_THREAD_DIMENSION0 607:592 = 64
  w[19] = 0x0001'0002;  // CTA_THREAD_DIMENSION1 623:608 = 2, DIMENSION2 639:624 = 1
  w[20] = 0x0000'2005;  // CONSTANT_BUFFER_VALID(0) 640 and (2) 642, REGISTER_COUNT_V 656:648 = 32
  w[23] = 0x1000'0000;  // BARRIER_COUNT 767:763 = 2
  w[24] = 0x0020'0040;  // RELEASE0_ADDRESS_LOWER 799:768
  w[25] = 0x2080'0012;  // RELEASE0_ADDRESS_UPPER 807:800, ENABLE 823, PAYLOAD64B 829, STRUCTURE_SIZE 831:830 FOUR_WORDS
  w[26] = 0xaaaa'bbbb;  // RELEASE0_PAYLOAD_LOWER 863:832
  w[27] = 0x0000'0001;  // RELEASE0_PAYLOAD_UPPER 895:864
  w[32] = 0x0060'0000;  // CONSTANT_BUFFER_ADDR_LOWER(0) 1055:1024
  w[33] = 0x0400'0000;  // ADDR_UPPER(0) 1072:1056 = 0, SIZE_SHIFTED4(0) 1087:1075 = 0x800 >> 4
  w[36] = 0x0070'0000;  // ADDR_LOWER(2) 1183:1152
  w[37] = 0x0080'0003;  // ADDR_UPPER(2) 1200:1184 = 3, SIZE_SHIFTED4(2) 1215:1203 = 0x100 >> 4
  w[48] = 0x0030'0000;  // PROGRAM_ADDRESS_LOWER 1567:1536
  w[49] = 0x0000'0001;  // PROGRAM_ADDRESS_UPPER 1584:1568
  w[51] = 0x8000'0000;  // SASS_VERSION 1663:1656
  return w;
}

}  // namespace

TEST_CASE("decode_qmd_v04 reads every field at the bit positions of clcbc0qmd.h") {
  auto q = decode_qmd_v04(hopper_qmd());
  REQUIRE(q);
  CHECK(q->major == 4);
  CHECK(q->minor == 0);
  CHECK(q->qmd_type == 2);
  CHECK(q->is_grid);
  CHECK(q->grid == std::array<std::uint32_t, 3>{100, 2, 3});
  CHECK(q->block == std::array<std::uint32_t, 3>{256, 2, 1});
  CHECK(q->registers == 40);
  CHECK(q->barriers == 1);
  CHECK(q->program_address == 0x7f'1234'5600ull);
  CHECK(q->shared_memory_size == 0x2400);
  CHECK(q->min_sm_config_shared == 3);
  CHECK(q->max_sm_config_shared == 0x3a);
  CHECK(q->target_sm_config_shared == 0x3a);
  CHECK(q->local_memory_low == 0x800);
  CHECK(q->local_memory_high == 0x100);
  CHECK(q->sass_version == 0x90);
  CHECK(q->banks[0].valid);
  CHECK(q->banks[0].address == 0x60'0000);
  CHECK(q->banks[0].size == 0x1000);
  CHECK(!q->banks[1].valid);
  CHECK(q->banks[3].valid);
  CHECK(q->banks[3].address == 0x7f'0000'0040ull);
  CHECK(q->banks[3].size == 0x40);
  CHECK(q->releases[0].enable);
  CHECK(q->releases[0].size == Qmd::Release::Size::one_word);
  CHECK(q->releases[0].address == 0x1'0020'0010ull);
  CHECK(q->releases[0].payload == 0xcafe);
  CHECK(q->releases[1].enable);
  CHECK(q->releases[1].size == Qmd::Release::Size::two_words);
  CHECK(q->releases[1].address == 0x20'0020);
  CHECK(q->releases[1].payload == 0x3333'4444'1111'2222ull);
  CHECK(!q->releases[2].enable);
}

TEST_CASE("decode_qmd_v04 refuses another version, a short QMD and an undefined release size") {
  auto w = hopper_qmd();
  w[18] = (w[18] & ~0xf0u) | 0x30u;  // QMD_MAJOR_VERSION 3
  const auto v3 = decode_qmd_v04(w);
  REQUIRE(!v3);
  CHECK(v3.error().find("QMD_MAJOR_VERSION is 3") != std::string::npos);
  const auto words = hopper_qmd();
  const auto short_ = decode_qmd_v04(std::span<const std::uint32_t>(words).first(64));
  REQUIRE(!short_);
  CHECK(short_.error().find("64 words") != std::string::npos);
  w = hopper_qmd();
  w[10] |= 0x6;  // STRUCTURE_SIZE(0) = 3
  const auto size = decode_qmd_v04(w);
  REQUIRE(!size);
  CHECK(size.error().find("release 0 STRUCTURE_SIZE 3") != std::string::npos);
}

TEST_CASE("decode_qmd_v03 reads every field at the bit positions of clc6c0qmd.h") {
  auto q = decode_qmd_v03(ampere_qmd());
  REQUIRE(q);
  CHECK(q->major == 3);
  CHECK(q->is_grid);
  CHECK(q->grid == std::array<std::uint32_t, 3>{7, 5, 1});
  CHECK(q->block == std::array<std::uint32_t, 3>{64, 2, 1});
  CHECK(q->registers == 32);
  CHECK(q->barriers == 2);
  CHECK(q->shared_memory_size == 0x1000);
  CHECK(q->program_address == 0x1'0030'0000ull);
  CHECK(q->sass_version == 0x80);
  CHECK(q->banks[0].valid);
  CHECK(q->banks[0].address == 0x60'0000);
  CHECK(q->banks[0].size == 0x800);
  CHECK(!q->banks[1].valid);
  CHECK(q->banks[2].valid);
  CHECK(q->banks[2].address == 0x3'0070'0000ull);
  CHECK(q->banks[2].size == 0x100);
  CHECK(q->releases[0].enable);
  CHECK(q->releases[0].size == Qmd::Release::Size::four_words);
  CHECK(q->releases[0].payload_64);
  CHECK(q->releases[0].address == 0x12'0020'0040ull);
  CHECK(q->releases[0].payload == 0x1'aaaa'bbbbull);
  CHECK(!q->releases[1].enable);
  auto queue = ampere_qmd();
  queue[4] |= 1u << 8;  // IS_QUEUE 136
  CHECK(!decode_qmd_v03(queue)->is_grid);
}

TEST_CASE("decode_qmd_v03 refuses a V04 QMD") {
  auto w = ampere_qmd();
  w[18] = (w[18] & ~0xf0u) | 0x40u;
  const auto e = decode_qmd_v03(w);
  REQUIRE(!e);
  CHECK(e.error().find("not 3") != std::string::npos);
}
