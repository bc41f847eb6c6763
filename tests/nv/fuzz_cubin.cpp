// Fuzz target of the simulators' fatbin and cubin reader (tests/sim/nv/cubin.hpp) and of
// Code's registering: any bytes must read or give an error, never crash. The input is read
// as a fatbin (and each ELF entry of it as a cubin), as a cubin, and registered with Code
// for sm_90 and sm_80; a kernel that registers must be found at its SASS.
//
// A libFuzzer target (scripts/fuzz); linked with tests/fuzz/replayer.cpp it replays a corpus.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "code.hpp"
#include "cubin.hpp"

namespace {

struct One_buffer : rig::ptx::Memory {
  std::vector<std::byte> bytes;
  std::optional<rig::ptx::Mapping> map(std::uint64_t address, std::uint64_t size, bool) override {
    if (address < 0x1000 || address - 0x1000 > bytes.size() || size > bytes.size() - (address - 0x1000))
      return std::nullopt;
    return rig::ptx::Mapping{0x1000, bytes.size(), bytes.data()};
  }
};

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  namespace cb = rig::sim::nv::cubin;
  if (const auto entries = cb::read_fatbin(input, "fuzz")) {
    for (const auto& e : *entries)
      if (e.kind == cb::Entry_kind::elf) {
        const auto c = cb::read_cubin(e.payload, "fuzz");
        check(c || !c.error().empty());
      }
  } else {
    check(!entries.error().empty());
  }
  const auto c = cb::read_cubin(input, "fuzz");
  check(c || !c.error().empty());
  for (const unsigned sm : {90u, 80u}) {
    rig::sim::nv::Code code;
    const auto n = code.add_fatbin(input, sm, "fuzz");
    check(n || !n.error().empty());
  }
  if (c && !c->kernels.empty()) {
    One_buffer memory;
    memory.bytes = c->kernels[0].text;
    rig::sim::nv::Code code;
    (void)code.find(0x1000, memory);
  }
  return 0;
}
