// Fuzz target of the PTX loader: any text must load or give an error, never crash; a
// module that loads must answer its queries about every kernel.
//
// A libFuzzer target (scripts/fuzz); linked with tests/fuzz/replayer.cpp it replays a corpus.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ptx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto m = rig::ptx::Module::load(text, "fuzz");
  if (m) {
    for (const auto& k : m->kernels()) {
      if (!m->params(k) || !m->params_size(k) || !m->shared_size(k)) __builtin_trap();
    }
  } else if (m.error().empty()) {
    __builtin_trap();
  }
  return 0;
}
