// Fuzz target of the code-object reader: any bytes must give a code object or an error,
// never a crash or a read outside the input; a code object read must also place.
//
// A libFuzzer target (scripts/fuzz); linked with tests/fuzz/replayer.cpp it replays a corpus
// instead.
#include <cstddef>
#include <cstdint>
#include <span>

#include "code_object.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  auto object = rig::amd::read_code_object(bytes);
  if (!object) return 0;
  if (object->image_bytes <= (std::uint64_t(64) << 20)) {
    auto image = rig::amd::place(*object, bytes, 0x7f0000000000);
    if (image && image->size() != object->image_bytes) __builtin_trap();
  }
  for (const auto& k : object->kernels)
    if (k.name.empty() || k.symbol.empty()) __builtin_trap();
  return 0;
}
