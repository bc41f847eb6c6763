// The GPFIFO engine's promises (engine.hpp): the PBDMA walks the ring to GPPut, every header
// form reaches its methods, the host methods do what clc56f.h/clc86f.h define, and every
// error stops the channel with the RC code, the notifier written and words that name it.
#include <future>

#include "engine_harness.hpp"

using namespace nv_test;

TEST_CASE("a release writes the payload and GPGet reaches GPPut") {
  Channel c;
  c.submit(semaphore(sem_va, 0x1234, OP_RELEASE));
  c.submit(semaphore(sem_va + 4, 0x5678, OP_RELEASE | RELEASE_WFI));
  REQUIRE(c.idle());
  CHECK(c.gp_get() == 2);
  CHECK(c.space.get<std::uint32_t>(sem_va) == 0x1234);
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 0x5678);
  CHECK(c.space.get<std::uint32_t>(sem_va + 8) == 0);
  CHECK(c.engine->methods() == 10);
  CHECK(!c.engine->stopped());
}

TEST_CASE("a 64-bit release writes both words, a 32-bit one only the low word") {
  Channel c;
  c.space.set<std::uint64_t>(sem_va + 8, ~0ull);
  c.submit(semaphore(sem_va, 0x1122334455667788ull, OP_RELEASE | PAYLOAD_64) +
           semaphore(sem_va + 8, 0x99aabbccddeeff00ull, OP_RELEASE));
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint64_t>(sem_va) == 0x1122334455667788ull);
  CHECK(c.space.get<std::uint64_t>(sem_va + 8) == 0xffffffffddeeff00ull);
}

TEST_CASE("a release with timestamp writes the GPU clock 8 bytes after the payload") {
  Channel c;
  c.clock = 0xabcdef012345ull;
  c.submit(semaphore(sem_va + 16, 7, OP_RELEASE | PAYLOAD_64 | RELEASE_TIMESTAMP));
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint64_t>(sem_va + 16) == 7);
  CHECK(c.space.get<std::uint64_t>(sem_va + 24) == 0xabcdef012345ull);
}

TEST_CASE("an acquire waits until the semaphore equals the payload, then the methods after it run") {
  Channel c;
  c.submit(semaphore(sem_va, 5, OP_ACQUIRE) + semaphore(sem_va + 4, 1, OP_RELEASE));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.gp_get() == 0);
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 0);
  c.space.set<std::uint32_t>(sem_va, 4);  // not yet: an acquire wants equality
  c.engine->doorbell();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 0);
  c.space.set<std::uint32_t>(sem_va, 5);
  REQUIRE(c.idle());
  CHECK(c.gp_get() == 1);
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 1);
}

TEST_CASE("an acquire sees memory change without a doorbell") {
  Channel c;
  c.submit(semaphore(sem_va, 9, OP_ACQUIRE) + semaphore(sem_va + 4, 1, OP_RELEASE));
  REQUIRE(c.ran(4));  // in the acquire
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  c.space.set<std::uint32_t>(sem_va, 9);
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 1);
}

TEST_CASE("an acquire-circular-geq passes once value - payload is not negative, across the wrap") {
  Channel c;
  c.space.set<std::uint32_t>(sem_va, 0xfffffff0u);
  // 0xfffffff0 - 0xfffffffe is negative: waits; 2 - 0xfffffffe = 4 (wrapped) passes.
  c.submit(semaphore(sem_va, 0xfffffffeu, OP_ACQ_CIRC_GEQ) + semaphore(sem_va + 4, 1, OP_RELEASE));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 0);
  c.space.set<std::uint32_t>(sem_va, 2);
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 1);
}

TEST_CASE("an acquire-strict-geq compares without wrapping") {
  Channel c;
  c.space.set<std::uint32_t>(sem_va, 2);
  c.submit(semaphore(sem_va, 0xfffffffeu, OP_ACQ_STRICT_GEQ) + semaphore(sem_va + 4, 1, OP_RELEASE));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 0);
  c.space.set<std::uint32_t>(sem_va, 0xffffffffu);
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 1);
}

TEST_CASE("a reduction adds the payload to the semaphore") {
  Channel c;
  c.space.set<std::uint32_t>(sem_va, 40);
  c.submit(semaphore(sem_va, 2, OP_REDUCTION | (5u << 27) | (1u << 31)));  // IADD, unsigned
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va) == 42);
}

TEST_CASE("NON_STALL_INTERRUPT calls the nonstall hook; WFI does nothing visible") {
  Channel c;
  c.submit({immediate(0, WFI, 0), inc(0, NON_STALL_INTERRUPT, 1), 0, immediate(0, NON_STALL_INTERRUPT, 0)});
  REQUIRE(c.idle());
  std::lock_guard lk(c.m);
  CHECK(c.nonstalls == 2);
  CHECK(c.stops.empty());
}

TEST_CASE("every header form reaches its methods") {
  Channel c;
  // Non-increasing: both words go to SEM_PAYLOAD_LO (0x64), the last one stays.
  // Increase-once: SEM_ADDR_LO, then SEM_ADDR_HI twice.
  // Immediate: SEM_EXECUTE = 1 (release) from the header's 13-bit data.
  c.submit({inc_once(0, SEM_ADDR_LO, 3), static_cast<std::uint32_t>(sem_va + 12), 0x55, 0, non_inc(0, 0x64, 2), 111,
            222, inc(0, 0x68, 1), 0, 0 /* NOP */, immediate(0, SEM_EXECUTE, OP_RELEASE)});
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va + 12) == 222);
  CHECK(c.engine->methods() == 7);
}

TEST_CASE("END_PB_SEGMENT ends the segment: the words after it are not read") {
  Channel c;
  c.submit(semaphore(sem_va, 1, OP_RELEASE) + std::vector<std::uint32_t>{7u << 29, 0xdeadbeef} +
           semaphore(sem_va + 4, 1, OP_RELEASE));
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va) == 1);
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 0);
  CHECK(!c.engine->stopped());
}

TEST_CASE("a subdevice mask without bit 0 drops the methods until it is set again") {
  Channel c;
  const std::uint32_t set_mask_0 = (1u << 16) | (0x2u << 4);   // SET_SUB_DEV_MASK, mask 0b10
  const std::uint32_t set_mask_1 = (1u << 16) | (0x1u << 4);
  c.submit(std::vector<std::uint32_t>{set_mask_0} + semaphore(sem_va, 1, OP_RELEASE) +
           std::vector<std::uint32_t>{set_mask_1} + semaphore(sem_va + 4, 1, OP_RELEASE));
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va) == 0);
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 1);
}

TEST_CASE("control GP entries: NOP is skipped, the extended base raises later segment addresses") {
  Channel c;
  constexpr std::uint64_t high = 0x12ull << 40;
  Test_space& s = c.space;
  std::byte* hi_pb = s.add(high | pb_va, 0x1000);
  const auto words = semaphore(sem_va, 3, OP_RELEASE);
  std::memcpy(hi_pb, words.data(), words.size() * 4);
  c.entry(0, 0);                           // NOP (OPCODE 0, LENGTH 0)
  c.entry(0x12u << 8, 4);                  // SET_PB_SEGMENT_EXTENDED_BASE, operand 24:8
  c.entry(static_cast<std::uint32_t>(pb_va), static_cast<std::uint32_t>(words.size()) << 10);
  REQUIRE(c.idle());
  CHECK(!c.engine->stopped());
  CHECK(c.space.get<std::uint32_t>(sem_va) == 3);
}

TEST_CASE("hold keeps the engine from taking entries until released") {
  Channel c;
  c.engine->hold(true);
  c.submit(semaphore(sem_va, 1, OP_RELEASE));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.gp_get() == 0);
  CHECK(c.space.get<std::uint32_t>(sem_va) == 0);
  c.engine->hold(false);
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint32_t>(sem_va) == 1);
}

TEST_CASE("hold during an acquire sets it aside, and the entry resumes at the acquire without running its earlier methods again") {
  Channel c;
  // Add 1 to a counter, wait for sem_va == 1, then release sem_va + 4.
  c.submit(semaphore(sem_va + 8, 1, OP_REDUCTION | (5u << 27) | (1u << 31)) + semaphore(sem_va, 1, OP_ACQUIRE) +
           semaphore(sem_va + 4, 1, OP_RELEASE));
  REQUIRE(c.ran(9));  // the reduction and the acquire's set-up methods: in the acquire
  REQUIRE(c.space.get<std::uint32_t>(sem_va + 8) == 1);
  auto held = std::async(std::launch::async, [&] { c.engine->hold(true); });
  const bool returned = held.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  if (!returned) c.space.set<std::uint32_t>(sem_va, 1);  // let the test end
  REQUIRE(returned);
  c.space.set<std::uint32_t>(sem_va, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 0);  // held: the acquire is not taken up
  c.engine->hold(false);
  REQUIRE(c.idle());
  CHECK(c.gp_get() == 1);
  CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 1);
  CHECK(c.space.get<std::uint32_t>(sem_va + 8) == 1);  // the reduction ran once
  CHECK(c.engine->methods() == 15);
}

// --- errors ----------------------------------------------------------------------------------

TEST_CASE("SET_OBJECT of a class not allocated on the channel stops it with Xid 69 and the notifier written") {
  Channel c;
  c.clock = 777;
  c.submit({inc(1, SET_OBJECT, 1), hopper_compute_a});
  const auto [xid, why] = c.stop();
  CHECK(xid == 69);
  CHECK(why.find("channel 1 (compute)") != std::string::npos);
  CHECK(why.find("SET_OBJECT") != std::string::npos);
  CHECK(why.find("0xcbc0") != std::string::npos);
  CHECK(c.engine->stopped());
  CHECK(c.notifier_stamp() == 777);
  CHECK(c.notifier_info32() == 69);
  CHECK(c.notifier_u16(12) == 1);  // NV2080_ENGINE_TYPE_GRAPHICS
  CHECK(c.notifier_u16(14) == 0xffff);
}

TEST_CASE("SET_OBJECT of an allowed class of the wrong kind or generation stops the channel") {
  SUBCASE("a copy class on a compute channel") {
    Channel c;
    c.engine->allow(hopper_dma_copy_a);
    c.submit({inc(4, SET_OBJECT, 1), hopper_dma_copy_a});
    CHECK(c.stop().first == 69);
  }
  SUBCASE("an Ampere class on a Hopper channel") {
    Channel c;
    c.engine->allow(ampere_compute_a);
    c.submit({inc(1, SET_OBJECT, 1), ampere_compute_a});
    const auto [xid, why] = c.stop();
    CHECK(xid == 69);
    CHECK(why.find("0xc6c0") != std::string::npos);
  }
}

TEST_CASE("an allowed SET_OBJECT binds the class and the channel goes on") {
  Channel c;
  c.engine->allow(hopper_compute_a);
  c.submit(std::vector<std::uint32_t>{inc(1, SET_OBJECT, 1), hopper_compute_a, inc(1, 0x100, 1), 0} + semaphore(sem_va, 1, OP_RELEASE, 1));
  REQUIRE(c.idle());
  CHECK(!c.engine->stopped());
  CHECK(c.space.get<std::uint32_t>(sem_va) == 1);
}

TEST_CASE("a method on a subchannel with no object stops the channel with Xid 69") {
  Channel c;
  c.submit({inc(2, 0x2b4, 1), 0});
  const auto [xid, why] = c.stop();
  CHECK(xid == 69);
  CHECK(why.find("subchannel 2") != std::string::npos);
  CHECK(why.find("0x2b4") != std::string::npos);
}

TEST_CASE("a malformed method header stops the channel with Xid 32 after the methods before it") {
  for (const std::uint32_t bad : {0x00040001u /* SEC_OP 0, TERT_OP 0 */, 2u << 29, 6u << 29}) {
    Channel c;
    c.submit(semaphore(sem_va, 1, OP_RELEASE) + std::vector<std::uint32_t>{bad} + semaphore(sem_va + 4, 1, OP_RELEASE));
    const auto [xid, why] = c.stop();
    CHECK(xid == 32);
    CHECK(why.find("word 6") != std::string::npos);
    CHECK(c.space.get<std::uint32_t>(sem_va) == 1);
    CHECK(c.space.get<std::uint32_t>(sem_va + 4) == 0);
    CHECK(c.gp_get() == 0);
    CHECK(c.notifier_info32() == 32);
  }
}

TEST_CASE("a header counting past the segment's end stops the channel") {
  Channel c;
  c.submit({inc(0, SEM_ADDR_LO, 5), static_cast<std::uint32_t>(sem_va), 0});
  const auto [xid, why] = c.stop();
  CHECK(xid == 32);
  CHECK(why.find("counts 5 data words") != std::string::npos);
}

TEST_CASE("a semaphore outside mapped memory stops the channel with Xid 31 naming the address") {
  Channel c;
  c.submit(semaphore(0x7000000, 1, OP_RELEASE));
  const auto [xid, why] = c.stop();
  CHECK(xid == 31);
  CHECK(why.find("0x7000000") != std::string::npos);
  CHECK(c.notifier_info32() == 31);
}

TEST_CASE("a release to read-only memory stops the channel with Xid 31") {
  Channel c;
  c.space.add(0x800000, 0x1000, false);
  c.submit(semaphore(0x800000, 1, OP_RELEASE));
  CHECK(c.stop().first == 31);
}

TEST_CASE("a segment outside mapped memory stops the channel with Xid 31") {
  Channel c;
  c.entry(0x9000000, 4u << 10);
  const auto [xid, why] = c.stop();
  CHECK(xid == 31);
  CHECK(why.find("push buffer segment") != std::string::npos);
}

TEST_CASE("an unknown host method and an undefined SEM_EXECUTE operation stop the channel with Xid 32") {
  SUBCASE("host method 0x44") {
    Channel c;
    c.submit({inc(0, 0x44, 1), 0});
    const auto [xid, why] = c.stop();
    CHECK(xid == 32);
    CHECK(why.find("host method 0x44") != std::string::npos);
  }
  SUBCASE("SEM_EXECUTE operation 7") {
    Channel c;
    c.submit(semaphore(sem_va, 1, 7));
    const auto [xid, why] = c.stop();
    CHECK(xid == 32);
    CHECK(why.find("OPERATION 7") != std::string::npos);
  }
}

TEST_CASE("an ILLEGAL GP entry, an undefined GP opcode and a GPPut past the ring stop the channel") {
  SUBCASE("OPCODE ILLEGAL") {
    Channel c;
    c.entry(0, 1);
    CHECK(c.stop().first == 32);
  }
  SUBCASE("OPCODE 4 on Ampere, which has no extended base") {
    Channel c(Engine_kind::compute, ampere_channel_gpfifo_a);
    c.entry(0, 4);
    const auto [xid, why] = c.stop();
    CHECK(xid == 32);
    CHECK(why.find("OPCODE 4") != std::string::npos);
  }
  SUBCASE("GPPut past the ring") {
    Channel c;
    std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(c.userd.data() + 0x8c)).store(ring_entries + 3);
    c.engine->doorbell();
    const auto [xid, why] = c.stop();
    CHECK(xid == 32);
    CHECK(why.find("GPPut 67") != std::string::npos);
  }
}

TEST_CASE("a stopped channel runs nothing more") {
  Channel c;
  c.submit({inc(0, 0x44, 1), 0});
  c.stop();
  c.submit(semaphore(sem_va, 1, OP_RELEASE));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(c.space.get<std::uint32_t>(sem_va) == 0);
  std::lock_guard lk(c.m);
  CHECK(c.stops.size() == 1);
}

TEST_CASE("destroying an engine that waits on an acquire ends its thread") {
  Channel c;
  c.submit(semaphore(sem_va, 1, OP_ACQUIRE));
  REQUIRE(c.ran(4));  // in the acquire
  c.engine.reset();
  CHECK(c.space.get<std::uint32_t>(sem_va) == 0);
}
