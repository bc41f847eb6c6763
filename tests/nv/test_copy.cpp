// The copy engine's promises (engine.hpp, copy classes C8B5 on Hopper and C6B5 on Ampere):
// pitch copies in one and two dimensions, constant fills through the remap unit, the
// semaphore types each class defines, and refusals of what it does not simulate.
#include <numeric>

#include "engine_harness.hpp"

using namespace nv_test;

namespace {

// Copy methods (clc8b5.h; the same offsets on clc6b5.h).
constexpr std::uint32_t SET_SEMAPHORE_A = 0x240, LAUNCH_DMA = 0x300, OFFSET_IN_UPPER = 0x400, PITCH_IN = 0x410,
                        LINE_LENGTH_IN = 0x418, SET_REMAP_CONST_A = 0x700;
// LAUNCH_DMA fields.
constexpr std::uint32_t NON_PIPELINED = 2, FLUSH = 1u << 2, SEM_ONE_WORD = 1u << 3, SEM_FOUR_WORD = 2u << 3,
                        SEM_CONDITIONAL_INTR = 3u << 3, INTR_NON_BLOCKING = 2u << 5, SRC_PITCH = 1u << 7,
                        DST_PITCH = 1u << 8, MULTI_LINE = 1u << 9, REMAP = 1u << 10, PAYLOAD_TWO_WORDS = 1u << 27;
constexpr std::uint32_t copy_sub = 4;

struct Copy_channel : Channel {
  std::uint32_t cls;
  explicit Copy_channel(std::uint32_t copy_class = hopper_dma_copy_a)
      : Channel(Engine_kind::copy,
                copy_class == hopper_dma_copy_a ? hopper_channel_gpfifo_a : ampere_channel_gpfifo_a),
        cls(copy_class) {
    engine->allow(cls);
    src = space.add(data_va, 0x10000);
    dst = space.add(data_va + 0x100000, 0x10000);
  }
  std::byte* src;
  std::byte* dst;
  std::vector<std::uint32_t> bind() const { return {inc(copy_sub, SET_OBJECT, 1), cls}; }
  // OFFSET_IN/OUT, PITCH_IN/OUT, LINE_LENGTH_IN, LINE_COUNT in one increasing run.
  static std::vector<std::uint32_t> lines(std::uint64_t in, std::uint64_t out, std::uint32_t pitch_in,
                                          std::uint32_t pitch_out, std::uint32_t length, std::uint32_t count) {
    return {inc(copy_sub, OFFSET_IN_UPPER, 8), static_cast<std::uint32_t>(in >> 32), static_cast<std::uint32_t>(in),
            static_cast<std::uint32_t>(out >> 32), static_cast<std::uint32_t>(out), pitch_in, pitch_out, length, count};
  }
  static std::vector<std::uint32_t> semaphore_at(std::uint64_t va, std::uint64_t payload) {
    return {inc(copy_sub, SET_SEMAPHORE_A, 4), static_cast<std::uint32_t>(va >> 32), static_cast<std::uint32_t>(va),
            static_cast<std::uint32_t>(payload), static_cast<std::uint32_t>(payload >> 32)};
  }
  static std::vector<std::uint32_t> launch(std::uint32_t word) { return {inc(copy_sub, LAUNCH_DMA, 1), word}; }
};

}  // namespace

TEST_CASE("a 1D pitch copy moves LINE_LENGTH_IN bytes and counts them") {
  Copy_channel c;
  for (int i = 0; i < 1000; ++i) c.src[i] = std::byte(i * 7);
  c.submit(c.bind() + Copy_channel::lines(data_va, data_va + 0x100000, 0, 0, 1000, 0) +
           Copy_channel::launch(NON_PIPELINED | FLUSH | SRC_PITCH | DST_PITCH));
  REQUIRE(c.idle());
  REQUIRE(!c.engine->stopped());
  CHECK(std::memcmp(c.src, c.dst, 1000) == 0);
  CHECK(c.dst[1000] == std::byte{0});
  CHECK(c.engine->bytes_copied() == 1000);
}

TEST_CASE("a 2D pitch copy moves LINE_COUNT lines between the pitches") {
  Copy_channel c;
  for (int i = 0; i < 0x1000; ++i) c.src[i] = std::byte(i);
  // 4 lines of 16 bytes, read every 256 bytes, written every 32 bytes.
  c.submit(c.bind() + Copy_channel::lines(data_va, data_va + 0x100000, 256, 32, 16, 4) +
           Copy_channel::launch(NON_PIPELINED | SRC_PITCH | DST_PITCH | MULTI_LINE));
  REQUIRE(c.idle());
  REQUIRE(!c.engine->stopped());
  for (int l = 0; l < 4; ++l) {
    CHECK(std::memcmp(c.dst + 32 * l, c.src + 256 * l, 16) == 0);
    CHECK(c.dst[32 * l + 16] == std::byte{0});
  }
  CHECK(c.engine->bytes_copied() == 64);
}

TEST_CASE("a remapped copy fills the destination with SET_REMAP_CONST_A without reading the source") {
  Copy_channel c;
  // Components of 4 bytes, one source and one destination component, DST_X = CONST_A; the
  // source address is unmapped, which a fill must not touch.
  const std::uint32_t components = 4u /* DST_X CONST_A */ | (3u << 16) /* COMPONENT_SIZE FOUR */;
  c.submit(c.bind() + std::vector<std::uint32_t>{inc(copy_sub, SET_REMAP_CONST_A, 3), 0xdeadbeef, 0, components} +
           Copy_channel::lines(0x7700000, data_va + 0x100000, 0, 0, 64, 0) +
           Copy_channel::launch(NON_PIPELINED | SRC_PITCH | DST_PITCH | REMAP));
  REQUIRE(c.idle());
  REQUIRE(!c.engine->stopped());
  for (int i = 0; i < 64; ++i) CHECK(c.space.get<std::uint32_t>(data_va + 0x100000 + 4 * i) == 0xdeadbeef);
  CHECK(c.space.get<std::uint32_t>(data_va + 0x100000 + 256) == 0);
  CHECK(c.engine->bytes_copied() == 256);
}

TEST_CASE("a remapped copy can swap components and leave NO_WRITE ones as they are") {
  Copy_channel c;
  for (std::uint32_t i = 0; i < 8; ++i) c.space.set<std::uint32_t>(data_va + 4 * i, 100 + i);
  for (std::uint32_t i = 0; i < 8; ++i) c.space.set<std::uint32_t>(data_va + 0x100000 + 4 * i, 7);
  // Two 4-byte components in and out: DST_X = SRC_Y, DST_Y = NO_WRITE.
  const std::uint32_t components = 1u | (6u << 4) | (3u << 16) | (1u << 20) | (1u << 24);
  c.submit(c.bind() + std::vector<std::uint32_t>{inc(copy_sub, SET_REMAP_CONST_A + 8, 1), components} +
           Copy_channel::lines(data_va, data_va + 0x100000, 0, 0, 4, 0) +
           Copy_channel::launch(NON_PIPELINED | SRC_PITCH | DST_PITCH | REMAP));
  REQUIRE(c.idle());
  REQUIRE(!c.engine->stopped());
  for (std::uint32_t e = 0; e < 4; ++e) {
    CHECK(c.space.get<std::uint32_t>(data_va + 0x100000 + 8 * e) == 100 + 2 * e + 1);
    CHECK(c.space.get<std::uint32_t>(data_va + 0x100000 + 8 * e + 4) == 7);
  }
}

TEST_CASE("LAUNCH_DMA releases a one-word, a two-word and a four-word semaphore with the timestamp") {
  Copy_channel c;
  c.clock = 0x1234'5678'9abcull;
  c.space.set<std::uint64_t>(sem_va, ~0ull);
  c.submit(c.bind() + Copy_channel::semaphore_at(sem_va, 0x1111'2222'3333'4444ull) + Copy_channel::launch(SEM_ONE_WORD) +
           Copy_channel::semaphore_at(sem_va + 8, 0x5555'6666'7777'8888ull) +
           Copy_channel::launch(SEM_ONE_WORD | PAYLOAD_TWO_WORDS) +
           Copy_channel::semaphore_at(sem_va + 16, 9) + Copy_channel::launch(SEM_FOUR_WORD));
  REQUIRE(c.idle());
  REQUIRE(!c.engine->stopped());
  CHECK(c.space.get<std::uint64_t>(sem_va) == 0xffff'ffff'3333'4444ull);
  CHECK(c.space.get<std::uint64_t>(sem_va + 8) == 0x5555'6666'7777'8888ull);
  CHECK(c.space.get<std::uint32_t>(sem_va + 16) == 9);
  CHECK(c.space.get<std::uint64_t>(sem_va + 24) == 0x1234'5678'9abcull);
}

TEST_CASE("a copy's semaphore follows its data, and a non-blocking interrupt calls the nonstall hook") {
  Copy_channel c;
  std::iota(reinterpret_cast<unsigned char*>(c.src), reinterpret_cast<unsigned char*>(c.src) + 64, 1);
  c.submit(c.bind() + Copy_channel::lines(data_va, data_va + 0x100000, 0, 0, 64, 0) +
           Copy_channel::semaphore_at(sem_va, 5) +
           Copy_channel::launch(NON_PIPELINED | SRC_PITCH | DST_PITCH | SEM_ONE_WORD | INTR_NON_BLOCKING));
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va) == 5);
  CHECK(std::memcmp(c.src, c.dst, 64) == 0);
  std::lock_guard lk(c.m);
  CHECK(c.nonstalls == 1);
}

TEST_CASE("the Ampere copy class C6B5 copies and releases its four-word semaphore") {
  Copy_channel c(ampere_dma_copy_a);
  c.clock = 4242;
  c.src[3] = std::byte{0x5a};
  c.submit(c.bind() + Copy_channel::lines(data_va, data_va + 0x100000, 0, 0, 8, 0) +
           std::vector<std::uint32_t>{inc(copy_sub, SET_SEMAPHORE_A, 3), 0, static_cast<std::uint32_t>(sem_va), 77} +
           Copy_channel::launch(NON_PIPELINED | SRC_PITCH | DST_PITCH | SEM_FOUR_WORD));
  REQUIRE(c.idle());
  REQUIRE(!c.engine->stopped());
  CHECK(c.dst[3] == std::byte{0x5a});
  CHECK(c.space.get<std::uint32_t>(sem_va) == 77);
  CHECK(c.space.get<std::uint64_t>(sem_va + 8) == 4242);
}

// --- refusals --------------------------------------------------------------------------------

TEST_CASE("a block-linear copy is refused with Xid 69 naming the layout") {
  Copy_channel c;
  c.submit(c.bind() + Copy_channel::lines(data_va, data_va + 0x100000, 0, 0, 16, 0) +
           Copy_channel::launch(NON_PIPELINED | DST_PITCH));
  const auto [xid, why] = c.stop();
  CHECK(xid == 69);
  CHECK(why.find("block-linear") != std::string::npos);
  CHECK(why.find("channel 2 (copy)") != std::string::npos);
  CHECK(c.notifier_u16(12) == 9);  // NV2080_ENGINE_TYPE_COPY0
  CHECK(c.dst[0] == std::byte{0});
}

TEST_CASE("a copy from unmapped memory stops the channel with Xid 31 naming the source line") {
  Copy_channel c;
  c.submit(c.bind() + Copy_channel::lines(data_va + 0xff00, data_va + 0x100000, 0, 0, 0x200, 0) +
           Copy_channel::launch(NON_PIPELINED | SRC_PITCH | DST_PITCH));
  const auto [xid, why] = c.stop();
  CHECK(xid == 31);
  CHECK(why.find("source line 0") != std::string::npos);
  CHECK(why.find("0x410000") != std::string::npos);
}

TEST_CASE("an unknown copy method, C8B5's payload upper on C6B5 and a conditional-interrupt semaphore are refused") {
  SUBCASE("method 0x350") {
    Copy_channel c;
    c.submit(c.bind() + std::vector<std::uint32_t>{inc(copy_sub, 0x350, 1), 0});
    const auto [xid, why] = c.stop();
    CHECK(xid == 69);
    CHECK(why.find("method 0x350") != std::string::npos);
    CHECK(why.find("0xc8b5") != std::string::npos);
  }
  SUBCASE("SET_SEMAPHORE_PAYLOAD_UPPER on C6B5") {
    Copy_channel c(ampere_dma_copy_a);
    c.submit(c.bind() + std::vector<std::uint32_t>{inc(copy_sub, 0x24c, 1), 0});
    CHECK(c.stop().first == 69);
  }
  SUBCASE("CONDITIONAL_INTR semaphore") {
    Copy_channel c;
    c.submit(c.bind() + Copy_channel::semaphore_at(sem_va, 1) + Copy_channel::launch(SEM_CONDITIONAL_INTR));
    const auto [xid, why] = c.stop();
    CHECK(xid == 69);
    CHECK(why.find("conditional-interrupt") != std::string::npos);
  }
}

TEST_CASE("a line longer than the mapped memory faults with Xid 31 before any byte is taken") {
  Copy_channel c;
  // 0xffffffff elements of four 4-byte components: 64 GiB a line, far past the 64 KiB mapped.
  const std::uint32_t components = 0u | (1u << 4) | (2u << 8) | (3u << 12) | (3u << 16) | (3u << 20) | (3u << 24);
  c.submit(c.bind() + std::vector<std::uint32_t>{inc(copy_sub, SET_REMAP_CONST_A + 8, 1), components} +
           Copy_channel::lines(data_va, data_va + 0x100000, 0, 0, 0xffffffffu, 0) +
           Copy_channel::launch(NON_PIPELINED | SRC_PITCH | DST_PITCH | REMAP));
  const auto [xid, why] = c.stop();
  CHECK(xid == 31);
  CHECK(why.find("destination line 0") != std::string::npos);
  CHECK(why.find("68719476720 bytes") != std::string::npos);
  CHECK(c.engine->bytes_copied() == 0);
}
