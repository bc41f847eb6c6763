// The QMD builders' promises (nvgpu/abi/qmd.hpp), each QMD read back by the simulator's own
// decoder (decode_qmd_v04 / decode_qmd_v03) and compared field by field.
#include <doctest/doctest.h>

#include <stdexcept>

#include "decode.hpp"
#include "qmd.hpp"

namespace sim = rig::sim::nv;
using namespace rig::nv;

namespace {

Qmd full(bool v04) {
  Qmd q = v04 ? Qmd::v04() : Qmd::v03();
  q.grid(300, 20, 3)
      .block(128, 4, 2)
      .register_count(40)
      .barrier_count(2)
      .shared_memory(5000, 8 * 1024, 100 * 1024, 32 * 1024)
      .program_address(0x12'3456'7880)
      .constant_buffer(0, 0x7'0000'1040, 0x1000)
      .constant_buffer(3, 0x8'0000'0000, 0x10000)
      .release(0, 0x9'0000'0008, 0x77)
      .release(2, 0xa'0000'0010, 0x1'0000'0002, true, false)
      .local_memory(0x100, 0x40)
      .invalidate_caches()
      .sass_version(v04 ? 0x90 : 0x80);
  return q;
}

sim::Qmd decoded(const Qmd& q) {
  auto d = q.is_v04() ? sim::decode_qmd_v04(q.words()) : sim::decode_qmd_v03(q.words());
  REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
  return *d;
}

}  // namespace

TEST_CASE("a V04_00 QMD is 384 bytes of version 4.0, a grid of CTAs") {
  const auto q = Qmd::v04();
  CHECK(q.bytes() == 384);
  const auto d = decoded(q);
  CHECK(d.major == 4);
  CHECK(d.minor == 0);
  CHECK(d.is_grid);
  CHECK(d.qmd_type == qmd_v04::QMD_TYPE_GRID_CTA);
  CHECK(q.get(qmd_v04::API_VISIBLE_CALL_LIMIT) == 1);
}

TEST_CASE("a V03_00 QMD is 256 bytes of version 3.0, not a queue") {
  const auto q = Qmd::v03();
  CHECK(q.bytes() == 256);
  const auto d = decoded(q);
  CHECK(d.major == 3);
  CHECK(d.minor == 0);
  CHECK(d.is_grid);
  CHECK(q.get(qmd_v03::API_VISIBLE_CALL_LIMIT) == 1);
}

TEST_CASE("every field a builder sets reads back through the simulator's decoder, on both versions") {
  for (const bool v04 : {true, false}) {
    CAPTURE(v04);
    const auto d = decoded(full(v04));
    CHECK(d.grid == std::array<std::uint32_t, 3>{300, 20, 3});
    CHECK(d.block == std::array<std::uint32_t, 3>{128, 4, 2});
    CHECK(d.registers == 40);
    CHECK(d.barriers == 2);
    CHECK(d.shared_memory_size == 5000);
    // KiB / 4 + 1 of 8, 100 and 32 KiB.
    CHECK(d.min_sm_config_shared == 3);
    CHECK(d.max_sm_config_shared == 26);
    CHECK(d.target_sm_config_shared == 9);
    CHECK(d.program_address == 0x12'3456'7880);
    CHECK(d.banks[0].valid);
    CHECK(d.banks[0].address == 0x7'0000'1040);
    CHECK(d.banks[0].size == 0x1000);
    CHECK(d.banks[3].valid);
    CHECK(d.banks[3].address == 0x8'0000'0000);
    CHECK(d.banks[3].size == 0x10000);
    for (unsigned i : {1u, 2u, 4u, 5u, 6u, 7u}) CHECK(!d.banks[i].valid);
    CHECK(d.releases[0].enable);
    CHECK(d.releases[0].size == sim::Qmd::Release::Size::one_word);
    CHECK(!d.releases[0].payload_64);
    CHECK(d.releases[0].address == 0x9'0000'0008);
    CHECK(d.releases[0].payload == 0x77);
    CHECK(!d.releases[1].enable);
    CHECK(d.releases[2].enable);
    CHECK(d.releases[2].size == sim::Qmd::Release::Size::two_words);
    CHECK(d.releases[2].payload_64);
    CHECK(d.releases[2].address == 0xa'0000'0010);
    CHECK(d.releases[2].payload == 0x1'0000'0002);
    CHECK(d.local_memory_low == 0x100);
    CHECK(d.local_memory_high == 0x40);
    CHECK(d.sass_version == (v04 ? 0x90u : 0x80u));
  }
}

TEST_CASE("the invalidate bits and the release membar are set where the headers put them") {
  const auto h = full(true);
  for (const auto& f : {qmd_v04::INVALIDATE_TEXTURE_HEADER_CACHE, qmd_v04::INVALIDATE_TEXTURE_SAMPLER_CACHE,
                        qmd_v04::INVALIDATE_TEXTURE_DATA_CACHE, qmd_v04::INVALIDATE_SHADER_DATA_CACHE,
                        qmd_v04::INVALIDATE_INSTRUCTION_CACHE, qmd_v04::INVALIDATE_SHADER_CONSTANT_CACHE})
    CHECK(sim::field(h.words(), f.hi, f.lo) == 1);
  CHECK(sim::field(h.words(), 323, 323) == 1);            // RELEASE_MEMBAR_TYPE(0)
  CHECK(sim::field(h.words(), 323 + 32, 323 + 32) == 0);  // RELEASE_MEMBAR_TYPE(2)
  const auto a = full(false);
  CHECK(sim::field(a.words(), 191, 186) == 0x3f);  // INVALIDATE_* 191:186
  CHECK(sim::field(a.words(), 819, 819) == 1);     // RELEASE0_MEMBAR_TYPE
}

TEST_CASE("a value wider than its field is refused naming the field") {
  auto q = Qmd::v04();
  CHECK_THROWS_WITH_AS(q.register_count(512), doctest::Contains("REGISTER_COUNT = 0x200 does not fit 9 bits"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.barrier_count(32), doctest::Contains("BARRIER_COUNT"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Qmd::v03().grid(1, 0x10000), doctest::Contains("CTA_RASTER_HEIGHT"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.set(qmd_v03::RELEASE_PAYLOAD_UPPER(2), 1).set(Qmd_field{3100, 3100, "PAST"}, 1),
                       doctest::Contains("PAST"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(Qmd::v03().set(Qmd_field{2100, 2090, "A_V04_ONLY_FIELD"}, 1), doctest::Contains("64-word"),
                       std::invalid_argument);
}

TEST_CASE("bad grids, banks, releases and shared memory configurations are refused") {
  auto q = Qmd::v04();
  CHECK_THROWS_WITH_AS(q.grid(0), doctest::Contains("0x1x1"), std::invalid_argument);
  CHECK_THROWS_AS(q.block(1, 0), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.constant_buffer(8, 0, 16), doctest::Contains("constant buffer 8"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.constant_buffer(0, 0x1010, 16), doctest::Contains("not 64-aligned"), std::invalid_argument);
  CHECK_NOTHROW(Qmd::v03().constant_buffer(0, 0x1010, 16));
  CHECK_THROWS_AS(q.constant_buffer(0, 0x1000, 24), std::invalid_argument);
  CHECK_THROWS_AS(q.constant_buffer(0, 0x1000, 0x10010), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.release(3, 0x1000, 1), doctest::Contains("release 3"), std::invalid_argument);
  CHECK_THROWS_AS(q.release(0, 0x1004, 1), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.release(0, 0x1000, 1ull << 32), doctest::Contains("one-word"), std::invalid_argument);
  CHECK_THROWS_AS(q.shared_memory(0, 1000, 8192, 8192), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.shared_memory(0, 16384, 8192, 8192), doctest::Contains("not in order"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(q.shared_memory(9000, 8192, 8192, 8192), doctest::Contains("exceed"), std::invalid_argument);
  CHECK_THROWS_AS(q.local_memory(8, 0), std::invalid_argument);
}
