// Push buffers of random headers and data, the same ones on every run: whatever a driver
// writes, the engine either gets through the segment or stops the channel with an error that
// names it, and never crashes or hangs the simulator.
#include <algorithm>

#include "engine_harness.hpp"

using namespace nv_test;

namespace {

// splitmix64: the same push buffers everywhere.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(next() % n); }
  template <class T, std::size_t N>
  T pick(const T (&from)[N]) {
    return from[below(N)];
  }
};

// Methods a driver uses (host, copy, compute), and two no class here has (0x44, 0x350).
constexpr std::uint32_t host_methods[] = {0x08, 0x20, 0x24, 0x5c, 0x60, 0x64, 0x68, 0x6c, 0x6c, 0x78, 0x44, 0x00};
constexpr std::uint32_t copy_methods[] = {0x100, 0x240, 0x244, 0x248, 0x24c, 0x300, 0x300, 0x400, 0x404, 0x408,
                                          0x40c, 0x410, 0x414, 0x418, 0x41c, 0x700, 0x704, 0x708, 0x350};
constexpr std::uint32_t compute_methods[] = {0x100, 0x2a0, 0x2a4, 0x2b4, 0x2c0, 0x790, 0x794, 0x7b0, 0x7b4, 0x1698, 0x350};

std::uint32_t data_for(std::uint32_t method, Random& r) {
  switch (method) {
    case 0x00: return r.pick({hopper_compute_a, hopper_dma_copy_a, ampere_compute_a, ampere_dma_copy_a, 0x1234u});
    case 0x6c: return (r.next() & 0xfffffff8u & ~(1u << 31)) | r.pick({1u, 6u, 7u});  // releases, reductions, one undefined
    case 0x41c: return r.below(8);                                                    // LINE_COUNT
    case 0x418: return r.below(0x2000);                                               // LINE_LENGTH_IN
    default: break;
  }
  switch (r.below(4)) {
    case 0: return r.below(256);
    case 1: return static_cast<std::uint32_t>(sem_va + 8 * r.below(64));
    case 2: return static_cast<std::uint32_t>(data_va + 16 * r.below(0x100));
    default: return static_cast<std::uint32_t>(r.next());
  }
}

std::vector<std::uint32_t> random_segment(Random& r, bool copy) {
  std::vector<std::uint32_t> words;
  const std::uint32_t bound_sub = copy ? 4 : 1;
  const std::uint32_t headers = 1 + r.below(24);
  for (std::uint32_t h = 0; h < headers; ++h) {
    const std::uint32_t method = r.below(3) == 0 ? r.pick(host_methods) : copy ? r.pick(copy_methods) : r.pick(compute_methods);
    const std::uint32_t sub = r.below(16) == 0 ? r.below(8) : bound_sub;
    const std::uint32_t any_count = r.below(6);
    switch (r.below(40)) {
      case 0:  // a malformed or end-of-segment header, or a random word
        words.push_back(r.pick({0x00040001u, 0x40010017u, 0xc0010017u, 0xe0000000u, 0x00010010u,
                                static_cast<std::uint32_t>(r.next())}));
        continue;
      case 1:
      case 2:
      case 3:  // an immediate
        words.push_back(header(4, sub, method, data_for(method, r) & 0x1fff));
        continue;
      default: {
        const std::uint32_t sec_op = r.pick({1u, 1u, 3u, 5u});
        // Increasing runs mostly stay on the methods named (past them lie undefined ones).
        const std::uint32_t count = sec_op == 1 && r.below(4) != 0 ? std::min(any_count, 2u) : any_count;
        words.push_back(header(sec_op, sub, method, count));
        for (std::uint32_t k = 0; k < count; ++k) {
          const std::uint32_t m = sec_op == 1 ? method + 4 * k : (sec_op == 5 && k > 0 ? method + 4 : method);
          words.push_back(data_for(m, r));
        }
      }
    }
  }
  if (r.below(8) == 0) words.resize(words.size() - r.below(static_cast<std::uint32_t>(words.size())));  // cut short
  if (words.empty()) words.push_back(0);
  return words;
}

}  // namespace

TEST_CASE("random push buffers end or stop the channel with a named error, never crash or hang") {
  Random r{0x5eed'0f'0e1e'7e47ull};
  int stopped = 0, finished = 0;
  for (int i = 0; i < 800; ++i) {
    const bool copy = i % 2 == 1;
    const bool hopper = i % 4 < 2;
    Channel c(copy ? Engine_kind::copy : Engine_kind::compute, hopper ? hopper_channel_gpfifo_a : ampere_channel_gpfifo_a);
    c.space.add(data_va, 0x10000);
    const std::uint32_t cls = copy ? (hopper ? hopper_dma_copy_a : ampere_dma_copy_a) : (hopper ? hopper_compute_a : ampere_compute_a);
    c.engine->allow(cls);
    const std::uint32_t entries = 1 + r.below(3);
    for (std::uint32_t e = 0; e < entries; ++e) {
      auto words = random_segment(r, copy);
      if (e == 0) words.insert(words.begin(), {inc(copy ? 4 : 1, SET_OBJECT, 1), cls});
      c.submit(words);
    }
    REQUIRE_MESSAGE(c.idle(), "case " << i << " neither finished nor stopped");
    if (c.engine->stopped()) {
      ++stopped;
      const auto [xid, why] = c.stop();
      CHECK((xid == 13 || xid == 31 || xid == 32 || xid == 69));
      CHECK(why.starts_with(copy ? "channel 2 (copy): " : "channel 1 (compute): "));
      CHECK(why.size() > 24);
      CHECK(c.notifier_info32() == xid);
    } else {
      ++finished;
      CHECK(c.gp_get() == entries);
    }
  }
  // The mix reaches both ends: some buffers run through, most meet an error.
  CHECK(stopped > 0);
  CHECK(finished > 0);
  MESSAGE(stopped << " stopped, " << finished << " finished");
}
