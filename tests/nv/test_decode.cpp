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
