// `rig bench submit`: the core's own cost for one submit — one launch part, two buffer refs,
// no waits — on a null driver whose values complete inside its submit, so nothing but rig
// is measured. The floor is the same driver's room and submit called directly. It also
// counts the heap allocations per submit, which must be 0.
#include <rig/rig.hpp>

#include <cstdlib>
#include <fmt/format.h>

#include "bench.hpp"

namespace rig::bench {
namespace {

// A driver that runs nothing: every value it is given completes at once. Memory is host
// memory; its one image has one function, "kernel", with 16 parameter bytes.
class Null final : public edge::Driver {
 public:
  explicit Null(volatile std::uint64_t* word) { state_.word = word; }
  edge::Facts facts() override {
    edge::Facts f;
    f.arch = "null";
    f.budget = std::size_t(1) << 30;
    f.queues = {{"COMPUTE:0", {Kind::Launch}}};
    f.completion = edge::Completion::Store;
    f.host_addresses = true;
    f.alignment = 64;
    f.word = state_.word;
    f.edge = &state_;
    return f;
  }
  std::optional<edge::Region> alloc(Memory, std::size_t n) override {
    void* p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (!p) return std::nullopt;
    return edge::Region{reinterpret_cast<std::uintptr_t>(p)};
  }
  void free(edge::Region r) override { std::free(reinterpret_cast<void*>(r.id)); }
  edge::Location locate(edge::Region r) override { return {r.id, r.id, std::intptr_t(r.id)}; }
  Result<edge::Code> image(std::span<const std::byte>) override { return edge::Loaded{1}; }
  edge::EntryAnswer entry(edge::ImageId, std::string_view name) override {
    if (name != "kernel") return edge::Absent{};
    return edge::Entry{0x1000, nullptr, 16, 1024};
  }
  void unload(edge::ImageId) override {}
  void stop(std::string_view) override {}

  struct State {
    const rig_driver* table = &kTable;
    volatile std::uint64_t* word = nullptr;
  };
  static int room(void*, rig_part*, std::uint32_t, std::uint32_t) { return RIG_FITS; }
  static int submit(void* edge, rig_part*, std::uint32_t, const rig_wait*, std::uint32_t, std::uint64_t v,
                    std::uint64_t*, const char**) {
    __atomic_store_n(static_cast<State*>(edge)->word, v, __ATOMIC_RELEASE);
    return RIG_COMMITTED;
  }
  static int commit(void*, std::uint64_t, const char**) { return RIG_OK; }
  static constexpr rig_driver kTable{room, submit, commit, nullptr, nullptr};
  State state_;
};

}  // namespace

std::vector<Figure> submit(const Options& o) {
  edge::Opener<> opener{"NULL", [](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
                          return std::make_unique<Null>(word);
                        }};
  Device d = *open(opener);
  Function f = *Image::load(d, {})->resolve("kernel");
  using Ref = Submission::Ref;
  Submission::Part part{"", {}, Submission::Launch{f, 16, {{0, Ref::What::Buffer, 0, {}}, {8, Ref::What::Buffer, 1, {}}}}};
  auto s = Submission::make(d, std::span(&part, 1), 1, 1);
  Buffer a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
  Buffer reads[] = {a}, writes[] = {b};
  Run run;
  run.groups(s.block(0), 1);
  submit(s, run, reads, writes);  // the run grows to fit once

  const std::uint64_t n = 1'000'000;
  std::uint64_t submits = 0, allocated = 0;
  Spread rig = measure(o.repeats, n, [&](std::uint64_t k) {
    std::uint64_t before = heap_allocations();
    for (std::uint64_t i = 0; i < k; ++i) rig::submit(s, run, reads, writes);
    allocated += heap_allocations() - before;
    submits += k;
  });
  double allocs = double(allocated) / double(submits);

  // The floor: the driver's own room + submit, called directly on a prepared part.
  volatile std::uint64_t floor_word = 0;
  Null::State floor_state;
  floor_state.word = &floor_word;
  auto* state = &floor_state;
  rig_part raw{};
  raw.kind = RIG_KIND_LAUNCH;
  std::uint64_t v = 0;
  Spread floor = measure(o.repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      if (state->table->room(state, &raw, 1, 0) == RIG_FITS) {
        const char* failure = nullptr;
        state->table->submit(state, &raw, 1, nullptr, 0, ++v, nullptr, &failure);
      }
    }
  });
  d.wait(d.submitted());
  std::vector<Figure> out;
  out.push_back(make_figure("submit", rig, "ns", floor, "the driver's room + submit alone",
                            "one launch part, two buffer refs, no waits"));
  Figure a_fig;
  a_fig.name = "submit-allocations";
  a_fig.value = a_fig.min = a_fig.max = allocs;
  a_fig.unit = "allocs";
  a_fig.floor = 0;
  a_fig.floor_name = "none allowed";
  a_fig.ratio = allocs;
  a_fig.note = fmt::format("heap allocations per submit over {} submits", submits);
  out.push_back(a_fig);
  d.close();
  return out;
}

}  // namespace rig::bench
