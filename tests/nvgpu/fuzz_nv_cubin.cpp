// Fuzz target of the driver's cubin and fatbin reader (nvgpu/abi/cubin.hpp): any bytes must
// read or give an error, never crash or read past the input; a cubin that reads must give every
// kernel's SASS and relocate every section without faulting, and a fatbin that reads must give
// its cubins the same way.
//
// A libFuzzer target (scripts/fuzz); linked with tests/fuzz/replayer.cpp it replays a corpus.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cubin.hpp"

namespace {

void exercise(const rig::nv::Cubin& c) {
  std::vector<std::uint64_t> at(c.sections.size());
  for (std::size_t i = 0; i < at.size(); ++i) at[i] = 0x10000 * (i + 1);
  for (const auto& k : c.kernels)
    if (c.bytes(k.text_section).size() != c.sections[k.text_section].size && c.sections[k.text_section].type != 8)
      __builtin_trap();
  for (std::uint32_t i = 1; i < c.sections.size(); ++i) {
    const auto b = c.bytes(i);
    std::vector<std::byte> image(b.begin(), b.end());
    image.resize(c.sections[i].size > (1u << 20) ? 0 : c.sections[i].size);
    (void)rig::nv::relocate(c, i, image, at);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  if (auto c = rig::nv::read_cubin(bytes, "fuzz")) exercise(*c);
  if (auto entries = rig::nv::read_fatbin(bytes, "fuzz")) {
    for (const auto& e : *entries)
      if (!e.ptx)
        if (auto c = rig::nv::read_cubin(e.payload, "fuzz entry")) exercise(*c);
    (void)rig::nv::cubin_for_sm(bytes, 90, "fuzz");
  }
  return 0;
}
