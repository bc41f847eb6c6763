// Fuzz target of the remote protocol's decoder: any bytes must give a message or the reason
// they are malformed, never a crash or a read outside the input; and a message decoded
// re-encodes to the same bytes.
//
// A libFuzzer target (scripts/fuzz); linked with replayer.cpp it replays a corpus instead.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  auto m = rig::remote::wire::decode(bytes);
  if (m) {
    const auto again = rig::remote::wire::encode(*m);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  } else if (m.error().empty()) {
    __builtin_trap();
  }
  return 0;
}
