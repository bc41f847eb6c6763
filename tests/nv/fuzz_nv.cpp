// Fuzz target of the NVIDIA simulator's readers (decode.hpp): any words must decode as a
// push-buffer segment, GP entries, QMDs (V04_00 and V03_00), LAUNCH_DMA, remap and SEM_EXECUTE
// words, or give an error naming the reason, never crash; what decodes must keep the formats'
// bounds (methods inside the 16 KiB method space, subchannels below 8, no more methods than
// data words).
//
// A libFuzzer target (scripts/fuzz); linked with tests/fuzz/replayer.cpp it replays a corpus.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "decode.hpp"

using namespace rig::sim::nv;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint32_t> words(size / 4);
  if (!words.empty()) std::memcpy(words.data(), data, words.size() * 4);

  Pushbuffer_state state;
  const Segment s = decode_segment(words, state);
  if (s.methods.size() > words.size()) __builtin_trap();
  for (const Method& m : s.methods)
    if (m.method >= 0x4000 || m.method % 4 != 0 || m.subchannel >= 8 || m.at >= words.size()) __builtin_trap();
  if (s.error && s.error->empty()) __builtin_trap();

  for (std::size_t i = 0; i + 1 < words.size(); i += 2) {
    for (const std::uint32_t cls : {hopper_channel_gpfifo_a, ampere_channel_gpfifo_a}) {
      auto e = decode_gp_entry(words[i], words[i + 1], cls);
      if (!e && e.error().empty()) __builtin_trap();
      if (e && e->kind == Gp_entry::Kind::segment && (e->length == 0 || e->address >= (1ull << 40))) __builtin_trap();
    }
  }
  for (const std::uint32_t w : words) {
    if (auto h = decode_header(w); h && (h->method >= 0x4000 || h->subchannel >= 8)) __builtin_trap();
    for (const std::uint32_t cls : {hopper_dma_copy_a, ampere_dma_copy_a}) {
      auto d = decode_launch_dma(w, cls);
      if (!d && d.error().empty()) __builtin_trap();
    }
    auto r = decode_remap(w);
    if (r && (r->component_size > 4 || r->src_components > 4 || r->dst_components > 4)) __builtin_trap();
    auto x = decode_sem_execute(w);
    if (!x && x.error().empty()) __builtin_trap();
  }

  for (auto q : {decode_qmd_v04(words), decode_qmd_v03(words)}) {
    if (!q) {
      if (q.error().empty()) __builtin_trap();
      continue;
    }
    if (q->registers > 511 || q->barriers > 31 || q->shared_memory_size >= (1u << 18)) __builtin_trap();
    for (const auto& b : q->banks)
      if (b.size % 16 != 0) __builtin_trap();
  }
  return 0;
}
