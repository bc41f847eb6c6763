// The PM4 and SDMA builders (amdgpu/abi/) read back by the simulator's own decoder
// (tests/sim/amd/decode.hpp): every field a builder writes is the field the decoder reads.
#include <doctest/doctest.h>

#include <array>
#include <vector>

#include "decode.hpp"
#include "pm4.hpp"
#include "sdma.hpp"

using namespace rig::amd;
namespace sim = rig::sim::amd;

namespace {

// Decodes every packet of `words` (which must hold whole packets) with the PM4 decoder.
std::vector<sim::Decoded<sim::Pm4Packet>> pm4_packets(std::span<const std::uint32_t> words) {
  std::vector<sim::Decoded<sim::Pm4Packet>> out;
  while (!words.empty()) {
    auto r = sim::decode_pm4(words);
    if (auto* bad = std::get_if<sim::Malformed>(&r)) FAIL(bad->why);
    REQUIRE(std::holds_alternative<sim::Decoded<sim::Pm4Packet>>(r));
    auto d = std::get<sim::Decoded<sim::Pm4Packet>>(r);
    words = words.subspan(d.dwords);
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<sim::Decoded<sim::SdmaPacket>> sdma_packets(std::span<const std::uint32_t> words) {
  std::vector<sim::Decoded<sim::SdmaPacket>> out;
  while (!words.empty()) {
    auto r = sim::decode_sdma(words);
    if (auto* bad = std::get_if<sim::Malformed>(&r)) FAIL(bad->why);
    REQUIRE(std::holds_alternative<sim::Decoded<sim::SdmaPacket>>(r));
    auto d = std::get<sim::Decoded<sim::SdmaPacket>>(r);
    words = words.subspan(d.dwords);
    out.push_back(std::move(d));
  }
  return out;
}

template <class T, class D>
const T& as(const D& d) {
  REQUIRE(std::holds_alternative<T>(d.packet));
  return std::get<T>(d.packet);
}

std::string malformed(std::span<const std::uint32_t> words, bool sdma = false) {
  if (sdma) {
    auto r = sim::decode_sdma(words);
    return std::holds_alternative<sim::Malformed>(r) ? std::get<sim::Malformed>(r).why : "";
  }
  auto r = sim::decode_pm4(words);
  return std::holds_alternative<sim::Malformed>(r) ? std::get<sim::Malformed>(r).why : "";
}

}  // namespace

TEST_CASE("SET_SH_REG writes consecutive compute registers") {
  std::array<std::uint32_t, 16> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  std::array<std::uint32_t, 3> v{7, 8, 9};
  p.set_sh_reg(pm4::reg::COMPUTE_NUM_THREAD_X, v);
  CHECK(p.size() == pm4::Pm4::set_sh_reg_size(3));
  auto ps = pm4_packets(std::span(w).first(p.size()));
  REQUIRE(ps.size() == 1);
  auto& s = as<sim::SetShReg>(ps[0]);
  CHECK(s.first == 0xB81C / 4);
  CHECK(s.values == std::vector<std::uint32_t>{7, 8, 9});
  CHECK(ps[0].name == "SET_SH_REG");
}

TEST_CASE("SET_SH_REG refuses registers outside the SH range") {
  std::array<std::uint32_t, 16> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  std::array<std::uint32_t, 2> v{1, 2};
  CHECK_THROWS_AS(p.set_sh_reg(0x2FFF, v), std::invalid_argument);
  CHECK_THROWS_AS(p.set_sh_reg(0x2000, 1), std::invalid_argument);
  CHECK(p.size() == 0);
}

TEST_CASE("DISPATCH_DIRECT sets wave32 and start-at-zero in the initiator") {
  std::array<std::uint32_t, 16> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  p.dispatch_direct(4, 2, 1, true);
  p.dispatch_direct(1, 1, 3, false);
  auto ps = pm4_packets(std::span(w).first(p.size()));
  REQUIRE(ps.size() == 2);
  auto& a = as<sim::DispatchDirect>(ps[0]);
  CHECK((a.x == 4 && a.y == 2 && a.z == 1));
  CHECK(a.wave32);
  CHECK((a.initiator & 1));         // COMPUTE_SHADER_EN
  CHECK((a.initiator & (1u << 2)));  // FORCE_START_AT_000
  CHECK(!as<sim::DispatchDirect>(ps[1]).wave32);
  CHECK_THROWS_AS(p.dispatch_direct(0, 1, 1, true), std::invalid_argument);
}

TEST_CASE("RELEASE_MEM stores the timeline value at end of pipe with cache actions and an interrupt") {
  std::array<std::uint32_t, 32> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  p.release_mem({0x7f0012345678, 0x1122334455667788, pm4::DataSel::Data64, pm4::IntSel::None, 0, true});
  p.release_mem({0x1000, 42, pm4::DataSel::Low32, pm4::IntSel::InterruptAfterWriteConfirm, 9, false});
  p.release_mem({0x2000, 0, pm4::DataSel::GpuClock, pm4::IntSel::None, 0, false});
  auto ps = pm4_packets(std::span(w).first(p.size()));
  REQUIRE(ps.size() == 3);
  auto& a = as<sim::ReleaseMem>(ps[0]);
  CHECK(a.event_index == 5);  // end of pipe
  CHECK(a.address == 0x7f0012345678);
  CHECK(a.data == 0x1122334455667788);
  CHECK(a.data_sel == 2);
  CHECK(a.int_sel == 0);
  CHECK((a.gcr_cntl & (1u << 21)));  // GL2 write-back
  CHECK((a.gcr_cntl & (1u << 15)));  // GL1 invalidate on gfx11
  auto& b = as<sim::ReleaseMem>(ps[1]);
  CHECK((b.data_sel == 1 && b.data == 42 && b.int_sel == 2 && b.context == 9 && b.gcr_cntl == 0));
  CHECK(as<sim::ReleaseMem>(ps[2]).data_sel == 3);
}

TEST_CASE("RELEASE_MEM refuses a misaligned address, and gfx12 takes no GL1 or GLM actions") {
  std::array<std::uint32_t, 32> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  CHECK_THROWS_AS(p.release_mem({0x1004, 1, pm4::DataSel::Data64}), std::invalid_argument);
  CHECK(p.size() == 0);
  pm4::Pm4 q(pm4::Gen::Gfx12, w);
  q.release_mem({0x1000, 1, pm4::DataSel::Data64});
  q.acquire_mem();
  auto ps = pm4_packets(std::span(w).first(q.size()));
  CHECK((as<sim::ReleaseMem>(ps[0]).gcr_cntl & (1u << 15 | 1u << 12 | 1u << 13)) == 0);
  CHECK((as<sim::AcquireMem>(ps[1]).gcr_cntl & (1u << 9 | 1u << 4 | 1u << 5)) == 0);
}

// gfx9's packets against words written out by hand from the kernel's soc15d.h (PACKET3,
// EOP_*_ACTION_EN, PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_*) and gfx_v9_0.c's fence and
// mem_sync, then read back by the decoder's gfx9 dialect.
namespace {

std::vector<sim::Decoded<sim::Pm4Packet>> gfx9_packets(std::span<const std::uint32_t> words) {
  std::vector<sim::Decoded<sim::Pm4Packet>> out;
  while (!words.empty()) {
    auto r = sim::decode_pm4(words, sim::Pm4Dialect::Gfx9);
    if (auto* bad = std::get_if<sim::Malformed>(&r)) FAIL(bad->why);
    REQUIRE(std::holds_alternative<sim::Decoded<sim::Pm4Packet>>(r));
    auto d = std::get<sim::Decoded<sim::Pm4Packet>>(r);
    words = words.subspan(d.dwords);
    out.push_back(std::move(d));
  }
  return out;
}

std::string gfx9_malformed(std::span<const std::uint32_t> words) {
  auto r = sim::decode_pm4(words, sim::Pm4Dialect::Gfx9);
  return std::holds_alternative<sim::Malformed>(r) ? std::get<sim::Malformed>(r).why : "";
}

}  // namespace

TEST_CASE("gfx9 RELEASE_MEM names the TC_WB, TCL1, TC and TC_MD actions where gfx10+ has GCR_CNTL") {
  std::array<std::uint32_t, 16> w{};
  pm4::Pm4 p(pm4::Gen::Gfx9_4, w);
  p.release_mem({0x7f0012345678, 0x1122334455667788, pm4::DataSel::Data64, pm4::IntSel::None, 0, true});
  p.release_mem({0x1000, 42, pm4::DataSel::Low32, pm4::IntSel::InterruptAfterWriteConfirm, 9, false});
  // PACKET3(RELEASE_MEM 0x49, 6) | PACKET3_COMPUTE; EVENT_TYPE(0x14) | EVENT_INDEX(5) |
  // TC_WB (15) | TCL1 (16) | TC (17) | TC_MD (21); DATA_SEL(2); address; data; int_ctxid.
  const std::array<std::uint32_t, 16> expected{0xC0064902, 0x00238514, 0x40000000, 0x12345678, 0x7f00,
                                               0x55667788, 0x11223344, 0,
                                               0xC0064902, 0x00000514, 0x22000000, 0x1000, 0, 42, 0, 9};
  CHECK(w == expected);
  auto ps = gfx9_packets(std::span(w).first(p.size()));
  REQUIRE(ps.size() == 2);
  auto& a = as<sim::ReleaseMem>(ps[0]);
  CHECK(a.cache_actions == (1u << 15 | 1u << 16 | 1u << 17 | 1u << 21));
  CHECK(a.gcr_cntl == 0);
  CHECK((a.event_index == 5 && a.data_sel == 2 && a.address == 0x7f0012345678 && a.data == 0x1122334455667788));
  auto& b = as<sim::ReleaseMem>(ps[1]);
  CHECK((b.cache_actions == 0 && b.data_sel == 1 && b.int_sel == 2 && b.context == 9 && b.data == 42));
}

TEST_CASE("gfx9 ACQUIRE_MEM is six body dwords with CP_COHER_CNTL's cache actions") {
  std::array<std::uint32_t, 7> w{};
  pm4::Pm4 p(pm4::Gen::Gfx9_4, w);
  p.acquire_mem();
  REQUIRE(p.size() == 1 + pm4::kAcquireMemBodyGfx9);
  // PACKET3(ACQUIRE_MEM 0x58, 5) | PACKET3_COMPUTE; SH_ICACHE (29) | SH_KCACHE (27) | TC (23)
  // | TCL1 (22) | TC_WB (18); all memory (size 0xffffffff, size_hi 0xffffff); base 0; poll 10.
  const std::array<std::uint32_t, 7> expected{0xC0055802, 0x28C40000, 0xffffffff, 0xffffff, 0, 0, 10};
  CHECK(w == expected);
  auto ps = gfx9_packets(w);
  auto& a = as<sim::AcquireMem>(ps[0]);
  CHECK(a.coher_cntl == 0x28C40000);
  CHECK(a.size == 0xffffffffffffffull);
  CHECK(a.gcr_cntl == 0);
  CHECK(pm4::acquire_mem_body(pm4::Gen::Gfx11) == 7);
  CHECK(pm4::acquire_mem_body(pm4::Gen::Gfx9_4) == 6);
}

TEST_CASE("the decoder reads each dialect's cache packets and refuses the other's") {
  std::array<std::uint32_t, 16> gfx11{};
  pm4::Pm4 p(pm4::Gen::Gfx11, gfx11);
  p.release_mem({0x1000, 1, pm4::DataSel::Data64});
  p.acquire_mem();
  // gfx11's GCR_CNTL bits are no gfx9 cache actions (GLV_INV is bit 14, GL2_INV bit 20)...
  CHECK(gfx9_malformed(gfx11).find("gfx9 cache action bits") != std::string::npos);
  // ... and its ACQUIRE_MEM has a dword more than gfx9's.
  CHECK(gfx9_malformed(std::span(gfx11).subspan(8)).find("a body of 7 dwords, not 6") != std::string::npos);
  std::array<std::uint32_t, 7> gfx9{};
  pm4::Pm4(pm4::Gen::Gfx9_4, gfx9).acquire_mem();
  CHECK(malformed(gfx9).find("a body of 6 dwords, not 7") != std::string::npos);
  // A gfx9 ACQUIRE_MEM asking for the colour buffer's action (CB, bit 25) is not for compute.
  gfx9[1] |= 1u << 25;
  CHECK(gfx9_malformed(gfx9).find("CP_COHER_CNTL bits 0x2000000") != std::string::npos);
}

TEST_CASE("gfx9 dispatches wave64: DISPATCH_DIRECT has no CS_W32_EN, and a wave32 dispatch is refused") {
  std::array<std::uint32_t, 8> w{};
  pm4::Pm4 p(pm4::Gen::Gfx9_4, w);
  p.dispatch_direct(4, 2, 1, false);
  // PACKET3(DISPATCH_DIRECT 0x15, 3) | PACKET3_COMPUTE; the grid; COMPUTE_SHADER_EN | FORCE_START_AT_000.
  CHECK(std::span(w).first(5)[0] == 0xC0031502);
  CHECK((w[1] == 4 && w[2] == 2 && w[3] == 1 && w[4] == 0x5));
  CHECK(!as<sim::DispatchDirect>(gfx9_packets(std::span(w).first(5))[0]).wave32);
  CHECK_THROWS_WITH_AS(p.dispatch_direct(1, 1, 1, true), doctest::Contains("gfx9.4 has no wave32"),
                       std::invalid_argument);
  CHECK(p.size() == 5);  // the refused packet wrote nothing
  std::array<std::uint32_t, 5> wave32{};
  pm4::Pm4(pm4::Gen::Gfx11, wave32).dispatch_direct(1, 1, 1, true);
  CHECK(gfx9_malformed(wave32).find("CS_W32_EN on gfx9") != std::string::npos);
}

TEST_CASE("COMPUTE_TMPRING_SIZE counts a wave's scratch in 1 KiB units on gfx9 and 256 bytes on gfx11") {
  CHECK(pm4::tmpring_size(pm4::Gen::Gfx9_4, 32, 64 << 10) == (32u | 64u << 12));
  CHECK(pm4::tmpring_size(pm4::Gen::Gfx11, 32, 64 << 10) == (32u | 256u << 12));
  CHECK(pm4::tmpring_size(pm4::Gen::Gfx9_4, 0xfff, 8191u << 10) == (0xfffu | 8191u << 12));  // both fields full
  CHECK(pm4::tmpring_size(pm4::Gen::Gfx11, 1, 32767u * 256) == (1u | 32767u << 12));
  CHECK_THROWS_WITH_AS(pm4::tmpring_size(pm4::Gen::Gfx9_4, 1, 1280), doctest::Contains("not a multiple of 1024"),
                       std::invalid_argument);
  CHECK_THROWS_AS(pm4::tmpring_size(pm4::Gen::Gfx9_4, 1, 8192u << 10), std::invalid_argument);  // 13 bits
  CHECK_THROWS_AS(pm4::tmpring_size(pm4::Gen::Gfx11, 1, 32768u * 256), std::invalid_argument);  // 15 bits
  CHECK_THROWS_WITH_AS(pm4::tmpring_size(pm4::Gen::Gfx11, 4096, 256), doctest::Contains("4096 waves"),
                       std::invalid_argument);
}

TEST_CASE("gfx942 and gfx11+ have COMPUTE_DISPATCH_SCRATCH_BASE, and gfx90a has not") {
  CHECK(!pm4::has_dispatch_scratch_base(90010));  // gfx90a
  CHECK(pm4::has_dispatch_scratch_base(90402));   // gfx942: architected flat scratch
  CHECK(pm4::has_dispatch_scratch_base(110000));
  CHECK(pm4::has_dispatch_scratch_base(120001));
}

TEST_CASE("gfx90a's COMPUTE_PGM_RSRC3 places the AccVGPRs in 4-register granules and sets TG_SPLIT") {
  CHECK(pm4::rsrc3_gfx90a(4, false) == 0);
  CHECK(pm4::rsrc3_gfx90a(12, false) == 2);
  CHECK(pm4::rsrc3_gfx90a(256, true) == (63u | 1u << 16));
  for (std::uint32_t offset : {4u, 8u, 100u, 256u})
    for (bool split : {false, true}) {
      auto r = sim::decode_rsrc3_gfx90a(pm4::rsrc3_gfx90a(offset, split));
      REQUIRE(std::holds_alternative<sim::Rsrc3Gfx90a>(r));
      CHECK(std::get<sim::Rsrc3Gfx90a>(r).accum_offset == offset);
      CHECK(std::get<sim::Rsrc3Gfx90a>(r).tg_split == split);
    }
  for (std::uint32_t bad : {0u, 6u, 260u})
    CHECK_THROWS_WITH_AS(pm4::rsrc3_gfx90a(bad, false), doctest::Contains("AccVGPR offset"), std::invalid_argument);
  CHECK(std::holds_alternative<sim::Malformed>(sim::decode_rsrc3_gfx90a(1u << 6)));
  CHECK(std::holds_alternative<sim::Malformed>(sim::decode_rsrc3_gfx90a(1u << 17)));
}

TEST_CASE("ACQUIRE_MEM invalidates over all memory") {
  std::array<std::uint32_t, 16> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  p.acquire_mem();
  auto ps = pm4_packets(std::span(w).first(p.size()));
  auto& a = as<sim::AcquireMem>(ps[0]);
  CHECK(a.base == 0);
  CHECK(a.size == 0xffffffffffull);
  CHECK((a.gcr_cntl & 1));          // instruction cache
  CHECK((a.gcr_cntl & (1u << 14)));  // GL2 invalidate
}

TEST_CASE("WAIT_REG_MEM64 waits for another device's 64-bit word to reach a value") {
  std::array<std::uint32_t, 32> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  p.wait_mem64(0x7f0000001008, pm4::Compare::GreaterEqual, 0x100000005);
  p.wait_mem32(0x4004, pm4::Compare::Equal, 3, 0xff);
  auto ps = pm4_packets(std::span(w).first(p.size()));
  auto& a = as<sim::WaitMem>(ps[0]);
  CHECK((a.wide && a.function == 5 && a.address == 0x7f0000001008 && a.reference == 0x100000005));
  CHECK(a.mask == ~0ull);
  auto& b = as<sim::WaitMem>(ps[1]);
  CHECK((!b.wide && b.function == 3 && b.reference == 3 && b.mask == 0xff));
  CHECK_THROWS_AS(p.wait_mem64(0x1004, pm4::Compare::GreaterEqual, 1), std::invalid_argument);
}

TEST_CASE("EVENT_WRITE, INDIRECT_BUFFER, WRITE_DATA, COPY_DATA and NOP decode as built") {
  std::array<std::uint32_t, 64> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  p.cs_partial_flush();
  p.indirect_buffer(0x10000, 100);
  std::array<std::uint32_t, 2> d{5, 6};
  p.write_data(0x3000, d);
  p.copy_data(pm4::CopySrc::GpuClock, 0, 0x4000, false);
  p.copy_data(pm4::CopySrc::Memory, 0x5000, 0x6000, false);
  p.nop(1);
  p.nop(5);
  auto ps = pm4_packets(std::span(w).first(p.size()));
  REQUIRE(ps.size() == 7);
  CHECK(as<sim::EventWrite>(ps[0]).event_type == 7);
  CHECK((as<sim::IndirectBuffer>(ps[1]).address == 0x10000 && as<sim::IndirectBuffer>(ps[1]).dwords == 100));
  CHECK(as<sim::WriteData>(ps[2]).data == std::vector<std::uint32_t>{5, 6});
  CHECK(as<sim::WriteData>(ps[2]).confirm);
  auto& clock = as<sim::CopyData>(ps[3]);
  CHECK((clock.src_sel == 9 && clock.wide && clock.address == 0x4000));  // the clock is 64 bits
  auto& mem = as<sim::CopyData>(ps[4]);
  CHECK((mem.src_sel == 2 && !mem.wide && mem.source == 0x5000));
  CHECK(ps[5].dwords == 1);
  CHECK(ps[6].dwords == 5);
}

TEST_CASE("PM4 packets wrap around the ring's end") {
  std::array<std::uint32_t, 16> ring{};
  pm4::Pm4 p(pm4::Gen::Gfx11, ring, 16 * 3 + 13);  // 3 words before the end
  p.release_mem({0x1000, 77, pm4::DataSel::Data64});
  CHECK(p.size() == 8);
  CHECK(p.position() == 16 * 3 + 21);
  std::array<std::uint32_t, 8> unrolled{};
  for (int i = 0; i < 8; ++i) unrolled[i] = ring[(13 + i) % 16];
  auto ps = pm4_packets(unrolled);
  CHECK(as<sim::ReleaseMem>(ps[0]).data == 77);
}

TEST_CASE("a RELEASE_MEM's address and data lie where the driver patches them") {
  // The driver encodes its values' stores once and patches the address and the value into
  // each copy: patched, the copy reads as one encoded with them.
  std::array<std::uint32_t, 8> copy{};
  pm4::Pm4(pm4::Gen::Gfx11, copy).release_mem({0, 0, pm4::DataSel::Data64});
  const std::uint64_t address = 0x7f0012345678, data = 0x1122334455667788;
  auto put64 = [&](std::uint32_t at, std::uint64_t x) { copy[at] = std::uint32_t(x), copy[at + 1] = std::uint32_t(x >> 32); };
  put64(pm4::kReleaseMemAddress, address);
  put64(pm4::kReleaseMemData, data);
  std::array<std::uint32_t, 8> encoded{};
  pm4::Pm4(pm4::Gen::Gfx11, encoded).release_mem({address, data, pm4::DataSel::Data64});
  CHECK(copy == encoded);
  auto ps = pm4_packets(copy);
  CHECK(as<sim::ReleaseMem>(ps[0]).address == address);
  CHECK(as<sim::ReleaseMem>(ps[0]).data == data);
}

TEST_CASE("a PM4 packet that does not fit writes nothing") {
  std::array<std::uint32_t, 6> w{};
  pm4::Pm4 p(pm4::Gen::Gfx11, w);
  p.cs_partial_flush();
  CHECK_THROWS_AS(p.release_mem({0x1000, 1, pm4::DataSel::Data64}), std::length_error);
  CHECK(p.size() == 2);
}

TEST_CASE("the decoder names the packet and the field it refuses") {
  std::array<std::uint32_t, 8> unknown{pm4::header(0x77, 1), 0};
  CHECK(malformed(unknown).find("opcode 0x77") != std::string::npos);
  std::array<std::uint32_t, 8> rm{};
  pm4::Pm4(pm4::Gen::Gfx11, rm).release_mem({0x1000, 1, pm4::DataSel::Data64});
  rm[2] |= 7u << 29;  // data_sel 7
  CHECK(malformed(rm).find("RELEASE_MEM: data_sel 7") != std::string::npos);
  std::array<std::uint32_t, 2> type0{0x00001234, 0};
  CHECK(malformed(type0).find("type-0") != std::string::npos);
  std::array<std::uint32_t, 8> ib{};
  pm4::Pm4(pm4::Gen::Gfx11, ib).indirect_buffer(0x1000, 4);
  ib[3] &= ~(1u << 23);
  CHECK(malformed(ib).find("VALID") != std::string::npos);
}

// ---- SDMA

TEST_CASE("SDMA COPY_LINEAR copies in chunks of at most 2^30 bytes") {
  std::vector<std::uint32_t> ring(64);
  sdma::Sdma s(ring);
  std::uint64_t bytes = 3 * sdma::kMaxChunk + 5;
  CHECK(s.copy_linear(0x200000, 0x100000, bytes) == 4);
  auto ps = sdma_packets(std::span(ring).first(s.size()));
  REQUIRE(ps.size() == 4);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    auto& c = as<sim::SdmaCopy>(ps[i]);
    CHECK(c.src == 0x100000 + total);
    CHECK(c.dst == 0x200000 + total);
    total += c.bytes;
  }
  CHECK(total == bytes);
  CHECK(as<sim::SdmaCopy>(ps[3]).bytes == 5);
}

TEST_CASE("SDMA 4 (gfx9) copies and fills in chunks of at most 4 MiB, and its decoder refuses SDMA 6's larger counts") {
  std::vector<std::uint32_t> ring(64);
  sdma::Sdma s(ring, 0, sdma::Version::Sdma4);
  const std::uint64_t bytes = 2 * (std::uint64_t(1) << 22) + 12;
  CHECK(s.copy_linear(0x200000, 0x100000, bytes) == 3);
  CHECK(s.fill(0x800000, 0xab, bytes) == 3);
  // COPY_LINEAR: op 1 sub 0, count bytes - 1 (0x3FFFFF: vega10_sdma_pkt_open.h's 22 bits full).
  CHECK((ring[0] == 0x00000001 && ring[1] == 0x003FFFFF));
  std::vector<sim::Decoded<sim::SdmaPacket>> ps;
  for (std::span<const std::uint32_t> w = std::span(ring).first(s.size()); !w.empty();) {
    auto r = sim::decode_sdma(w, sim::SdmaVersion::Sdma4);
    if (auto* bad = std::get_if<sim::Malformed>(&r)) FAIL(bad->why);
    REQUIRE(std::holds_alternative<sim::Decoded<sim::SdmaPacket>>(r));
    auto d = std::get<sim::Decoded<sim::SdmaPacket>>(r);
    w = w.subspan(d.dwords);
    ps.push_back(std::move(d));
  }
  REQUIRE(ps.size() == 6);
  std::uint64_t copied = 0, filled = 0;
  for (int i = 0; i < 3; ++i) copied += as<sim::SdmaCopy>(ps[i]).bytes, filled += as<sim::SdmaFill>(ps[3 + i]).bytes;
  CHECK(copied == bytes);
  CHECK(filled == bytes);
  CHECK(as<sim::SdmaCopy>(ps[2]).bytes == 12);
  // SDMA 6's chunk of 2^30 bytes is past SDMA 4's count.
  std::vector<std::uint32_t> big(sdma::kCopyLinearSize);
  sdma::Sdma(big).copy_linear(0x200000, 0x100000, sdma::kMaxChunk);
  auto r = sim::decode_sdma(big, sim::SdmaVersion::Sdma4);
  REQUIRE(std::holds_alternative<sim::Malformed>(r));
  CHECK(std::get<sim::Malformed>(r).why == "SDMA COPY_LINEAR: count 0x3fffffff exceeds 22 bits");
  CHECK(std::holds_alternative<sim::Decoded<sim::SdmaPacket>>(sim::decode_sdma(big)));
  CHECK(sdma::max_chunk(sdma::Version::Sdma4) == 4u << 20);
  CHECK(sdma::max_chunk(sdma::Version::Sdma6) == sdma::kMaxChunk);
}

TEST_CASE("SDMA FENCE, TRAP, POLL_REGMEM, TIMESTAMP, WRITE and CONSTANT_FILL decode as built") {
  std::vector<std::uint32_t> ring(64);
  sdma::Sdma s(ring);
  s.fence(0x1000, 0xabcd);
  s.trap(5);
  s.poll_mem(0x2000, sdma::Compare::GreaterEqual, 9);
  s.timestamp(0x3008);
  std::array<std::uint32_t, 3> d{1, 2, 3};
  s.write(0x4000, d);
  s.fill(0x5000, 0xAB, 64);
  s.fill(0x5001, 0xCD, 3);
  auto ps = sdma_packets(std::span(ring).first(s.size()));
  REQUIRE(ps.size() == 7);
  CHECK((as<sim::SdmaFence>(ps[0]).address == 0x1000 && as<sim::SdmaFence>(ps[0]).value == 0xabcd));
  CHECK(as<sim::SdmaTrap>(ps[1]).context == 5);
  auto& poll = as<sim::SdmaPoll>(ps[2]);
  CHECK((poll.function == 5 && poll.address == 0x2000 && poll.reference == 9 && poll.mask == 0xffffffff));
  CHECK(as<sim::SdmaTimestamp>(ps[3]).address == 0x3008);
  CHECK(as<sim::SdmaWrite>(ps[4]).data == std::vector<std::uint32_t>{1, 2, 3});
  auto& dw = as<sim::SdmaFill>(ps[5]);
  CHECK((dw.dwords && dw.data == 0xABABABAB && dw.bytes == 64));
  auto& by = as<sim::SdmaFill>(ps[6]);
  CHECK((!by.dwords && by.data == 0xCD && by.bytes == 3 && by.dst == 0x5001));
}

TEST_CASE("SDMA packets never straddle the ring's end") {
  std::vector<std::uint32_t> ring(16, 0xdeadbeef);
  sdma::Sdma s(ring, 16 * 5 + 12);  // 4 dwords before the end
  CHECK(s.cost(sdma::kCopyLinearSize) == 4 + 7);
  s.copy_linear(0x2000, 0x1000, 10);
  CHECK(s.size() == 11);
  for (int i = 12; i < 16; ++i) CHECK(ring[i] == 0);  // NOPs to the end
  auto ps = sdma_packets(std::span(ring).first(7));  // the packet starts at the ring's start
  CHECK(as<sim::SdmaCopy>(ps[0]).bytes == 10);
  CHECK(s.position() == 16 * 6 + 7);
}

TEST_CASE("SDMA refuses misaligned addresses and oversized fields, writing nothing") {
  std::vector<std::uint32_t> ring(16);
  sdma::Sdma s(ring);
  CHECK_THROWS_AS(s.fence(0x1002, 1), std::invalid_argument);
  CHECK_THROWS_AS(s.timestamp(0x1004), std::invalid_argument);
  CHECK_THROWS_AS(s.trap(1u << 28), std::invalid_argument);
  CHECK_THROWS_AS(s.copy_linear(0, 0, 0), std::invalid_argument);
  std::vector<std::uint32_t> big(20);
  CHECK_THROWS_AS(s.write(0x1000, big), std::length_error);
  CHECK(s.size() == 0);
}

TEST_CASE("the SDMA decoder refuses unknown opcodes and unsupported fields") {
  std::array<std::uint32_t, 4> unknown{0x3, 0, 0, 0};
  CHECK(malformed(unknown, true).find("opcode 3") != std::string::npos);
  std::vector<std::uint32_t> ring(8);
  sdma::Sdma(ring).copy_linear(0x2000, 0x1000, 8);
  ring[2] = 1;  // a swap parameter
  CHECK(malformed(ring, true).find("COPY_LINEAR: swap") != std::string::npos);
  std::vector<std::uint32_t> poll(8);
  sdma::Sdma(poll).poll_mem(0x1000, sdma::Compare::Equal, 1);
  poll[0] &= ~(1u << 31);  // register polling
  CHECK(malformed(poll, true).find("register polling") != std::string::npos);
}

TEST_CASE("the gfx9 decoder reads PRED_EXEC's XCC mask and exec count from hand-written words") {
  // PACKET3(PRED_EXEC 0x23, 0) | PACKET3_COMPUTE; EXEC_COUNT 18 (bits 0..13),
  // VIRTUAL_XCC_ID_SELECT 0b101 (bits 24..31), written out from soc15d.h's field macros.
  const std::array<std::uint32_t, 2> words{0xC0002302, 0x05000012};
  auto ps = gfx9_packets(words);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].name == "PRED_EXEC");
  auto& p = as<sim::PredExec>(ps[0]);
  CHECK((p.xcc_mask == 0b101 && p.dwords == 18));
  // gfx10+ has no XCC select; an empty mask, an empty count and reserved bits are refused.
  CHECK(malformed(words).find("only gfx9.4.3 has") != std::string::npos);
  CHECK(gfx9_malformed(std::array<std::uint32_t, 2>{0xC0002302, 0x00000012}).find("selects no XCC") != std::string::npos);
  CHECK(gfx9_malformed(std::array<std::uint32_t, 2>{0xC0002302, 0x01000000}).find("exec count of 0") != std::string::npos);
  CHECK(gfx9_malformed(std::array<std::uint32_t, 2>{0xC0002302, 0x01004012}).find("reserved bits") != std::string::npos);
}

TEST_CASE("PRED_EXEC as built selects the XCCs and counts the dwords it covers, and refuses what it cannot say") {
  std::array<std::uint32_t, 2> w{};
  pm4::Pm4 p(pm4::Gen::Gfx9_4, w);
  p.pred_exec(0x80, 0x3fff);
  CHECK(w == std::array<std::uint32_t, 2>{0xC0002302, 0x80003fff});
  auto ds = gfx9_packets(w);
  auto& d = as<sim::PredExec>(ds[0]);
  CHECK((d.xcc_mask == 0x80 && d.dwords == 0x3fff));
  pm4::Pm4 q(pm4::Gen::Gfx9_4, w);
  CHECK_THROWS_WITH_AS(q.pred_exec(0, 4), doctest::Contains("selects none"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.pred_exec(0x100, 4), doctest::Contains("selects none"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.pred_exec(1, 0x4000), doctest::Contains("1 ..= 16383"), std::invalid_argument);
  std::array<std::uint32_t, 2> gfx11{};
  pm4::Pm4 r(pm4::Gen::Gfx11, gfx11);
  CHECK_THROWS_WITH_AS(r.pred_exec(1, 4), doctest::Contains("only gfx9.4"), std::invalid_argument);
  CHECK((q.size() == 0 && r.size() == 0));
}

TEST_CASE("the gfx9 decoder reads ATOMIC_MEM's 64-bit add from hand-written words") {
  // PACKET3(ATOMIC_MEM 0x1E, 7) | PACKET3_COMPUTE; ATOMIC TC_OP_ATOMIC_ADD_RTN_64 (0x2f),
  // COMMAND 0 (single pass); address; source data; compare data 0; loop interval 0.
  const std::array<std::uint32_t, 9> words{0xC0071E02, 0x2f, 0x12345678, 0x7f00, 3, 0, 0, 0, 0};
  auto ps = gfx9_packets(words);
  REQUIRE(ps.size() == 1);
  CHECK(ps[0].name == "ATOMIC_MEM");
  auto& a = as<sim::AtomicMem>(ps[0]);
  CHECK((a.op == 0x2f && a.address == 0x7f0012345678 && a.source == 3));
  auto bad = [&](std::size_t i, std::uint32_t v) {
    auto w = words;
    w[i] = v;
    return gfx9_malformed(w);
  };
  CHECK(bad(1, 0x0f).find("only a 64-bit add") != std::string::npos);             // TC_OP_ATOMIC_ADD_RTN_32
  CHECK(bad(1, 0x12f).find("only a single pass") != std::string::npos);          // loop until compare
  CHECK(bad(2, 0x12345674).find("not 8-aligned") != std::string::npos);
  CHECK(bad(8, 0x10).find("loop interval") != std::string::npos);
  CHECK(malformed(words).find("gfx9 only") != std::string::npos);
}

TEST_CASE("ATOMIC_MEM as built adds to a 64-bit word, and refuses a misaligned one") {
  std::array<std::uint32_t, 9> w{};
  pm4::Pm4 p(pm4::Gen::Gfx9_4, w);
  p.atomic_add64(0x1000, 1);
  CHECK(w == std::array<std::uint32_t, 9>{0xC0071E02, 0x2f, 0x1000, 0, 1, 0, 0, 0, 0});
  auto as_built = gfx9_packets(w);
  auto& a = as<sim::AtomicMem>(as_built[0]);
  CHECK((a.address == 0x1000 && a.source == 1));
  pm4::Pm4 q(pm4::Gen::Gfx9_4, w);
  CHECK_THROWS_WITH_AS(q.atomic_add64(0x1004, 1), doctest::Contains("not 8-byte aligned"), std::invalid_argument);
  CHECK(q.size() == 0);
}
