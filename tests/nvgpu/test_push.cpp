// The push-buffer writer's promises (nvgpu/abi/push.hpp), each read back by the simulator's own
// decoder (tests/sim/nv/decode.hpp): headers count their data words, GP entries carry the
// segment, and each verb's methods and fields are what its contract says; misuse is refused.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "decode.hpp"
#include "push.hpp"

namespace sim = rig::sim::nv;
using namespace rig::nv;

namespace {

struct Buffer {
  std::vector<std::uint32_t> words = std::vector<std::uint32_t>(1024);
  Push p{words};
};

// The methods the simulator's decoder reads from `p`, with no error.
std::vector<sim::Method> methods(const Push& p) {
  sim::Pushbuffer_state state;
  auto seg = sim::decode_segment(p.words(), state);
  REQUIRE_MESSAGE(!seg.error, *seg.error);
  return seg.methods;
}

// The data last written to `method` on `sub` in `p`.
std::uint32_t last(const Push& p, std::uint32_t method, std::uint32_t sub = 0) {
  std::optional<std::uint32_t> v;
  for (const auto& m : methods(p))
    if (m.method == method && m.subchannel == sub) v = m.data;
  REQUIRE_MESSAGE(v, "no method " << method << " on subchannel " << sub);
  return *v;
}

}  // namespace

TEST_CASE("an increasing header counts the data words written after it") {
  Buffer b;
  b.p.inc(3, host::SEM_ADDR_LO).data(1).data(2).data(3);
  REQUIRE(b.p.size() == 4);
  auto h = sim::decode_header(b.p.words()[0]);
  REQUIRE(h);
  CHECK(h->kind == sim::Header_kind::increasing);
  CHECK(h->count == 3);
  CHECK(h->subchannel == 3);
  CHECK(h->method == host::SEM_ADDR_LO);
  const auto m = methods(b.p);
  REQUIRE(m.size() == 3);
  for (unsigned i = 0; i < 3; ++i) {
    CHECK(m[i].method == host::SEM_ADDR_LO + 4 * i);
    CHECK(m[i].data == i + 1);
    CHECK(m[i].subchannel == 3);
  }
}

TEST_CASE("non-increasing, increase-once and immediate headers decode to their methods") {
  Buffer b;
  b.p.non_inc(1, 0x100).data(7).data(8);
  b.p.inc_once(2, 0x200).data(9).data(10).data(11);
  b.p.immediate(4, host::WFI, 0x1fff);
  const auto m = methods(b.p);
  REQUIRE(m.size() == 6);
  CHECK((m[0].method == 0x100 && m[1].method == 0x100 && m[0].data == 7 && m[1].data == 8));
  CHECK((m[2].method == 0x200 && m[3].method == 0x204 && m[4].method == 0x204));
  CHECK((m[5].method == host::WFI && m[5].data == 0x1fff && m[5].subchannel == 4));
  CHECK(sim::decode_header(b.p.words()[0])->kind == sim::Header_kind::non_increasing);
  CHECK(sim::decode_header(b.p.words()[3])->kind == sim::Header_kind::increase_once);
  CHECK(sim::decode_header(b.p.words()[7])->kind == sim::Header_kind::immediate);
}

TEST_CASE("a data word with no header open is refused") {
  Buffer b;
  CHECK_THROWS_WITH_AS(b.p.data(1), doctest::Contains("no method header open"), std::invalid_argument);
  b.p.immediate(0, host::WFI, 1);
  CHECK_THROWS_AS(b.p.data(1), std::invalid_argument);
  CHECK(b.p.size() == 1);
}

TEST_CASE("a header left without data words is refused") {
  Buffer b;
  b.p.inc(0, host::SEM_EXECUTE);
  CHECK_THROWS_WITH_AS(b.p.words(), doctest::Contains("no data word"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(b.p.inc(0, host::WFI), doctest::Contains("method 0x6c"), std::invalid_argument);
}

TEST_CASE("a header's count stops at 8191 data words") {
  std::vector<std::uint32_t> words(9000);
  Push p(words);
  p.non_inc(0, 0x100);
  for (unsigned i = 0; i < dma::MAX_COUNT; ++i) p.data(i);
  CHECK(sim::decode_header(p.words()[0])->count == dma::MAX_COUNT);
  CHECK_THROWS_WITH_AS(p.data(0), doctest::Contains("more than 8191"), std::invalid_argument);
}

TEST_CASE("an increasing header may not run past the last method") {
  Buffer b;
  b.p.inc(0, dma::MAX_METHOD).data(1);
  CHECK_THROWS_WITH_AS(b.p.data(2), doctest::Contains("past method 0x3ffc"), std::invalid_argument);
  Buffer once;
  once.p.inc_once(0, dma::MAX_METHOD).data(1);
  CHECK_THROWS_AS(once.p.data(2), std::invalid_argument);
  Buffer same;
  same.p.non_inc(0, dma::MAX_METHOD).data(1).data(2);
  CHECK(methods(same.p).size() == 2);
}

TEST_CASE("fields that do not fit a header are refused by name") {
  Buffer b;
  CHECK_THROWS_WITH_AS(b.p.inc(8, 0), doctest::Contains("subchannel 8"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(b.p.inc(0, 0x102), doctest::Contains("method 0x102"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(b.p.immediate(0, host::WFI, 0x2000), doctest::Contains("immediate data"), std::invalid_argument);
  CHECK(b.p.size() == 0);
}

TEST_CASE("a writer that runs out of room raises length_error and keeps what it wrote") {
  std::vector<std::uint32_t> words(3);
  Push p(words);
  p.inc(0, 0x100).data(1).data(2);
  CHECK_THROWS_AS(p.data(3), std::length_error);
  CHECK(p.size() == 3);
  CHECK(sim::decode_header(p.words()[0])->count == 2);
}

TEST_CASE("a GP entry carries the segment's address, length and sync") {
  for (const auto cls : {sim::hopper_channel_gpfifo_a, sim::ampere_channel_gpfifo_a}) {
    const auto e = gp_entry(0xab'1234'5678, 0x12345, true);
    auto g = sim::decode_gp_entry(e[0], e[1], cls);
    REQUIRE(g);
    CHECK(g->kind == sim::Gp_entry::Kind::segment);
    CHECK(g->address == 0xab'1234'5678);
    CHECK(g->length == 0x12345);
    CHECK(g->sync_wait);
    CHECK(!g->subroutine);
    CHECK(!g->conditional);
    CHECK(!sim::decode_gp_entry(gp_entry(0x1000, 4)[0], gp_entry(0x1000, 4)[1], cls)->sync_wait);
  }
}

TEST_CASE("a GP entry refuses a misaligned or too high address and an empty or too long segment") {
  CHECK_THROWS_WITH_AS(gp_entry(0x1002, 4), doctest::Contains("0x1002"), std::invalid_argument);
  CHECK_THROWS_AS(gp_entry(1ull << 40, 4), std::invalid_argument);
  CHECK_THROWS_WITH_AS(gp_entry(0x1000, 0), doctest::Contains("0 words"), std::invalid_argument);
  CHECK_THROWS_AS(gp_entry(0x1000, 1u << 21), std::invalid_argument);
}

TEST_CASE("a semaphore release writes a 64-bit payload after the channel's work, with a timestamp when asked") {
  for (const bool ts : {false, true}) {
    Buffer b;
    semaphore_release(b.p, 0x12'3456'7890, 0x1122'3344'5566'7788, ts);
    CHECK(last(b.p, host::SEM_ADDR_LO) == 0x3456'7890);
    CHECK(last(b.p, host::SEM_ADDR_HI) == 0x12);
    CHECK(last(b.p, host::SEM_PAYLOAD_LO) == 0x5566'7788);
    CHECK(last(b.p, host::SEM_PAYLOAD_HI) == 0x1122'3344);
    auto e = sim::decode_sem_execute(last(b.p, host::SEM_EXECUTE));
    REQUIRE(e);
    CHECK(e->op == sim::Sem_execute::Op::release);
    CHECK(e->release_wfi);
    CHECK(e->payload_64);
    CHECK(e->release_timestamp == ts);
  }
}

TEST_CASE("a semaphore acquire waits with the operation and payload size it was given") {
  Buffer b;
  semaphore_acquire(b.p, 0x2000, 0xfeed'0000'0001);
  auto e = sim::decode_sem_execute(last(b.p, host::SEM_EXECUTE));
  REQUIRE(e);
  CHECK(e->op == sim::Sem_execute::Op::acquire_circ_geq);
  CHECK(e->payload_64);
  CHECK(!e->release_wfi);
  CHECK(last(b.p, host::SEM_PAYLOAD_HI) == 0xfeed);
  Buffer c;
  semaphore_acquire(c.p, 0x2004, 5, false, host::SEM_EXECUTE_OPERATION_ACQ_STRICT_GEQ);
  e = sim::decode_sem_execute(last(c.p, host::SEM_EXECUTE));
  REQUIRE(e);
  CHECK(e->op == sim::Sem_execute::Op::acquire_strict_geq);
  CHECK(!e->payload_64);
}

TEST_CASE("semaphore verbs refuse misaligned addresses, non-acquire operations and oversized payloads") {
  Buffer b;
  CHECK_THROWS_WITH_AS(semaphore_release(b.p, 0x2004, 1), doctest::Contains("not 8-aligned"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(semaphore_release(b.p, 0x2008, 1, true), doctest::Contains("not 16-aligned"), std::invalid_argument);
  CHECK_THROWS_AS(semaphore_release(b.p, 1ull << 40, 1), std::invalid_argument);
  CHECK_THROWS_WITH_AS(semaphore_acquire(b.p, 0x2000, 1, true, host::SEM_EXECUTE_OPERATION_RELEASE),
                       doctest::Contains("not an acquire"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(semaphore_acquire(b.p, 0x2000, 1ull << 32, false), doctest::Contains("needs 64 bits"),
                       std::invalid_argument);
  CHECK(b.p.size() == 0);
}

TEST_CASE("SET_OBJECT, NON_STALL_INTERRUPT and WFI are the host methods of their names") {
  Buffer b;
  set_object(b.p, 1, HOPPER_COMPUTE_A);
  non_stall_interrupt(b.p);
  wait_for_idle(b.p);
  const auto m = methods(b.p);
  REQUIRE(m.size() == 3);
  CHECK((m[0].method == host::SET_OBJECT && m[0].subchannel == 1 && m[0].data == sim::hopper_compute_a));
  CHECK(m[1].method == host::NON_STALL_INTERRUPT);
  CHECK((m[2].method == host::WFI && m[2].data == 1));
  CHECK_THROWS_AS(set_object(b.p, 1, 0x1'0000), std::invalid_argument);
}

TEST_CASE("a 1D copy sets both offsets and the length, and launches a pitch-to-pitch non-pipelined DMA") {
  for (const auto cls : {HOPPER_DMA_COPY_A, AMPERE_DMA_COPY_A}) {
    Buffer b;
    copy_1d(b.p, 4, cls, 0x1'0000'2000, 0x3'0000'1000, 5000);
    CHECK(last(b.p, copy::OFFSET_IN_UPPER, 4) == 3);
    CHECK(last(b.p, copy::OFFSET_IN_LOWER, 4) == 0x1000);
    CHECK(last(b.p, copy::OFFSET_OUT_UPPER, 4) == 1);
    CHECK(last(b.p, copy::OFFSET_OUT_LOWER, 4) == 0x2000);
    CHECK(last(b.p, copy::LINE_LENGTH_IN, 4) == 5000);
    auto d = sim::decode_launch_dma(last(b.p, copy::LAUNCH_DMA, 4), cls);
    REQUIRE(d);
    CHECK(d->transfer == sim::Launch_dma::Transfer::non_pipelined);
    CHECK(d->src_pitch);
    CHECK(d->dst_pitch);
    CHECK(!d->multi_line);
    CHECK(!d->remap);
    CHECK(d->semaphore == sim::Launch_dma::Semaphore::none);
  }
}

TEST_CASE("a 2D copy sets the pitches and the line count and enables multi-line") {
  Buffer b;
  copy_2d(b.p, 4, HOPPER_DMA_COPY_A, 0x8000, 256, 0x4000, 128, 100, 7);
  CHECK(last(b.p, copy::PITCH_IN, 4) == 128);
  CHECK(last(b.p, copy::PITCH_OUT, 4) == 256);
  CHECK(last(b.p, copy::LINE_LENGTH_IN, 4) == 100);
  CHECK(last(b.p, copy::LINE_COUNT, 4) == 7);
  auto d = sim::decode_launch_dma(last(b.p, copy::LAUNCH_DMA, 4), HOPPER_DMA_COPY_A);
  REQUIRE(d);
  CHECK(d->multi_line);
  CHECK_THROWS_WITH_AS(copy_2d(b.p, 4, HOPPER_DMA_COPY_A, 0x8000, 256, 0x4000, 128, 100, 0), doctest::Contains("0 lines"),
                       std::invalid_argument);
}

TEST_CASE("a fill writes the remapped constant A, in words when it can") {
  Buffer b;
  fill(b.p, 4, HOPPER_DMA_COPY_A, 0x8000, 64, 0xab);
  CHECK(last(b.p, copy::SET_REMAP_CONST_A, 4) == 0xabababab);
  CHECK(last(b.p, copy::LINE_LENGTH_IN, 4) == 16);
  auto r = sim::decode_remap(last(b.p, copy::SET_REMAP_COMPONENTS, 4));
  REQUIRE(r);
  CHECK(r->dst[0] == sim::Remap::Source::const_a);
  CHECK(r->component_size == 4);
  CHECK(r->dst_components == 1);
  auto d = sim::decode_launch_dma(last(b.p, copy::LAUNCH_DMA, 4), HOPPER_DMA_COPY_A);
  REQUIRE(d);
  CHECK(d->remap);
  Buffer odd;
  fill(odd.p, 4, AMPERE_DMA_COPY_A, 0x8001, 5, 0xcd);
  CHECK(last(odd.p, copy::SET_REMAP_CONST_A, 4) == 0xcd);
  CHECK(last(odd.p, copy::LINE_LENGTH_IN, 4) == 5);
  CHECK(sim::decode_remap(last(odd.p, copy::SET_REMAP_COMPONENTS, 4))->component_size == 1);
}

TEST_CASE("copy verbs refuse an unknown class, empty or oversized lengths and addresses past the class's limit") {
  Buffer b;
  CHECK_THROWS_WITH_AS(copy_1d(b.p, 4, 0xC7B5, 0, 0, 4), doctest::Contains("0xc7b5"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(copy_1d(b.p, 4, HOPPER_DMA_COPY_A, 0, 0, 0), doctest::Contains("0 bytes"), std::invalid_argument);
  CHECK_THROWS_AS(copy_1d(b.p, 4, HOPPER_DMA_COPY_A, 0, 0, 1ull << 32), std::invalid_argument);
  CHECK_THROWS_WITH_AS(copy_1d(b.p, 4, AMPERE_DMA_COPY_A, 1ull << 49, 0, 4), doctest::Contains("address limit"),
                       std::invalid_argument);
  CHECK_NOTHROW(copy_1d(b.p, 4, HOPPER_DMA_COPY_A, 1ull << 49, 0, 4));
  CHECK_THROWS_AS(fill(b.p, 4, HOPPER_DMA_COPY_A, 0, 0, 1), std::invalid_argument);
}

TEST_CASE("a copy-engine semaphore release is 64-bit on C8B5 and 32-bit on C6B5, four words with a timestamp") {
  Buffer h;
  copy_semaphore_release(h.p, 4, HOPPER_DMA_COPY_A, 0x12'0000'1000, 0xaaaa'bbbb'cccc'dddd, true);
  CHECK(last(h.p, copy::SET_SEMAPHORE_A, 4) == 0x12);
  CHECK(last(h.p, copy::SET_SEMAPHORE_B, 4) == 0x1000);
  CHECK(last(h.p, copy::SET_SEMAPHORE_PAYLOAD, 4) == 0xcccc'dddd);
  CHECK(last(h.p, copy::SET_SEMAPHORE_PAYLOAD_UPPER, 4) == 0xaaaa'bbbb);
  auto d = sim::decode_launch_dma(last(h.p, copy::LAUNCH_DMA, 4), HOPPER_DMA_COPY_A);
  REQUIRE(d);
  CHECK(d->semaphore == sim::Launch_dma::Semaphore::four_word);
  CHECK(d->payload_two_words);
  CHECK(d->transfer == sim::Launch_dma::Transfer::none);
  Buffer a;
  copy_semaphore_release(a.p, 4, AMPERE_DMA_COPY_A, 0x1004, 9);
  d = sim::decode_launch_dma(last(a.p, copy::LAUNCH_DMA, 4), AMPERE_DMA_COPY_A);
  REQUIRE(d);
  CHECK(d->semaphore == sim::Launch_dma::Semaphore::one_word);
  CHECK(!d->payload_two_words);
  CHECK_THROWS_WITH_AS(copy_semaphore_release(a.p, 4, AMPERE_DMA_COPY_A, 0x1000, 1ull << 32),
                       doctest::Contains("no SET_SEMAPHORE_PAYLOAD_UPPER"), std::invalid_argument);
  CHECK_THROWS_AS(copy_semaphore_release(a.p, 4, HOPPER_DMA_COPY_A, 0x1004, 1), std::invalid_argument);
}

TEST_CASE("a launch sends the QMD address >> 8 and the PCAS action") {
  Buffer b;
  launch(b.p, 1, 0x12'3456'7800);
  CHECK(last(b.p, compute::SEND_PCAS_A, 1) == 0x1234'5678);
  CHECK(last(b.p, compute::SEND_SIGNALING_PCAS2_B, 1) == compute::PCAS_ACTION_PREFETCH_SCHEDULE);
  CHECK_THROWS_WITH_AS(launch(b.p, 1, 0x1080), doctest::Contains("256-aligned"), std::invalid_argument);
  CHECK_THROWS_AS(launch(b.p, 1, 0x1000, 16), std::invalid_argument);
}

TEST_CASE("the memory windows and the local memory store are set with their upper words first") {
  Buffer b;
  set_memory_windows(b.p, 1, 0x1'0000'0000'0000, 0xff'0000'0000);
  set_local_memory(b.p, 1, 0x12'3456'0000, 0x2'0000'1000, 132);
  CHECK(last(b.p, compute::SET_SHADER_SHARED_MEMORY_WINDOW_A, 1) == 0x1'0000);
  CHECK(last(b.p, compute::SET_SHADER_SHARED_MEMORY_WINDOW_B, 1) == 0);
  CHECK(last(b.p, compute::SET_SHADER_LOCAL_MEMORY_WINDOW_A, 1) == 0xff);
  CHECK(last(b.p, compute::SET_SHADER_LOCAL_MEMORY_A, 1) == 0x12);
  CHECK(last(b.p, compute::SET_SHADER_LOCAL_MEMORY_B, 1) == 0x3456'0000);
  CHECK(last(b.p, compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, 1) == 2);
  CHECK(last(b.p, compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_B, 1) == 0x1000);
  CHECK(last(b.p, compute::SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_C, 1) == 132);
  CHECK_THROWS_WITH_AS(set_memory_windows(b.p, 1, 1ull << 49, 0), doctest::Contains("49 bits"), std::invalid_argument);
  CHECK_THROWS_AS(set_local_memory(b.p, 1, 0, 1ull << 40, 1), std::invalid_argument);
  CHECK_THROWS_WITH_AS(set_local_memory(b.p, 1, 0, 16, 512), doctest::Contains("MAX_SM_COUNT"), std::invalid_argument);
}
