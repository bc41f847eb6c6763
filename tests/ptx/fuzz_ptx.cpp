// Fuzz target of the PTX loader and executor: any text must load or give an error, never
// crash; a module that loads must answer its queries about every kernel, and running each
// (one warp, zero parameters, no memory mapped, a bounded count) must end or fault.
//
// A libFuzzer target (scripts/fuzz); linked with tests/fuzz/replayer.cpp it replays a corpus.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ptx.hpp"

namespace {

struct NoMemory : rig::ptx::Memory {
  std::optional<rig::ptx::Mapping> map(std::uint64_t, std::uint64_t, bool) override { return std::nullopt; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = rig::ptx::Module::load(text, "fuzz");
  if (m) {
    for (const auto& k : m->kernels()) {
      if (!m->params(k) || !m->params_size(k) || !m->shared_size(k)) __builtin_trap();
      for (const auto& v : m->variables()) m->place(v.name, 0x1000);
      const std::vector<std::byte> params(*m->params_size(k));
      rig::ptx::Launch launch;
      launch.block = {32, 1, 1};
      launch.params = params;
      launch.max_instructions = 20000;
      NoMemory memory;
      auto r = m->run(k, launch, memory);
      if (!r && r.error().empty()) __builtin_trap();
    }
  } else if (m.error().empty()) {
    __builtin_trap();
  }
  return 0;
}
