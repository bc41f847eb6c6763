// The gfx11 interpreter (tests/sim/amd/gfx11.hpp): its decoder against LLVM's disassembler
// on every instruction of its subset and of the compiled kernels, and its semantics on a
// program whose results the RDNA3 ISA fixes (tests/amd/kernels/gfx11_program.s).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include "build_outputs.hpp"
#include "gfx11.hpp"

namespace gfx11 = rig::sim::amd::gfx11;

using rig::test::amd::disassembly;
using rig::test::amd::slurp;

namespace {

std::string strip(std::string m) {
  for (const char* suffix : {"_e32", "_e64"})
    if (m.ends_with(suffix)) m.resize(m.size() - 4);
  return m;
}

void check_listing(const std::string& file) {
  auto listed = disassembly(slurp(fmt::format("{}/{}", RIG_AMD_KERNEL_DIR, file)));
  REQUIRE(listed.size() > 20);
  for (auto& l : listed) {
    CAPTURE(l.mnemonic);
    std::size_t length = 0;
    std::string mine = gfx11::mnemonic(l.words.data(), l.words.size(), length);
    if (l.mnemonic == "s_code_end") continue;  // padding after the code, never run
    std::string expected = strip(l.mnemonic);
    if (!l.second.empty()) expected += " :: " + strip(l.second);
    CHECK(mine == expected);
    CHECK(length == l.words.size());
  }
}

// Memory of the test: ranges of host bytes at GPU addresses.
struct Ranges final : gfx11::Memory {
  std::map<std::uint64_t, std::vector<std::byte>> ranges;
  std::byte* at(std::uint64_t a, std::size_t n, bool) override {
    auto it = ranges.upper_bound(a);
    if (it == ranges.begin()) return nullptr;
    --it;
    if (a - it->first + n > it->second.size()) return nullptr;
    return it->second.data() + (a - it->first);
  }
};

}  // namespace

TEST_CASE("the decoder names every instruction of its subset as LLVM does") { check_listing("gfx11_subset.dis"); }

TEST_CASE("the decoder names every instruction of the compiled kernels as LLVM does") {
  check_listing("amd_kernels_gfx1100.dis");
}

TEST_CASE("the interpreter computes what the ISA says on a program of scalar, vector and LDS work") {
  std::string code = slurp(fmt::format("{}/gfx11_program.bin", RIG_AMD_KERNEL_DIR));
  Ranges memory;
  const std::uint64_t code_at = 0x100000, out_at = 0x200000;
  memory.ranges[code_at].resize(code.size() + 64);
  std::memcpy(memory.ranges[code_at].data(), code.data(), code.size());
  memory.ranges[out_at].assign(32 * 4, std::byte{0});
  gfx11::Dispatch d;
  d.code = code_at;
  d.rsrc1 = 2;             // 24 VGPRs
  d.rsrc2 = 2 << 1 | 1 << 15;  // 2 user SGPRs, 512 bytes of LDS
  d.user_data[0] = std::uint32_t(out_at), d.user_data[1] = 0;
  std::atomic<bool> stop{false};
  auto outcome = gfx11::run(d, memory, stop);
  REQUIRE_MESSAGE(outcome.ok, outcome.fault);
  std::uint32_t out[32];
  std::memcpy(out, memory.ranges[out_at].data(), sizeof out);
  CHECK(out[0] == 1);
  CHECK(out[1] == 1);
  CHECK(out[2] == 7);
  CHECK(out[3] == 8);
  CHECK(out[4] == 0xbc);
  CHECK(out[5] == 2);
  CHECK(out[6] == 11);
  CHECK(std::bit_cast<float>(out[7]) == 5.0f);
  CHECK(std::bit_cast<float>(out[8]) == 5.0f);
  CHECK(out[9] == 1);
  CHECK(out[10] == 3);
  CHECK(out[11] == 10);
  CHECK(out[12] == 21);
  CHECK(out[13] == 0xffffffffu);
  CHECK(out[14] == 7);
  CHECK(out[15] == 0x1234);
  CHECK(out[16] == 0x1239);
  CHECK(out[17] == 0xffffffffu);
  CHECK(out[18] == 15);
  CHECK(out[19] == 7);
  CHECK(out[20] == 1);
  CHECK(out[21] == 10);
  CHECK(outcome.instructions > 80);
}

TEST_CASE("the interpreter faults on a VGPR the dispatch did not allocate, and on memory outside the map") {
  std::string code = slurp(fmt::format("{}/gfx11_program.bin", RIG_AMD_KERNEL_DIR));
  Ranges memory;
  memory.ranges[0x100000].resize(code.size() + 64);
  std::memcpy(memory.ranges[0x100000].data(), code.data(), code.size());
  memory.ranges[0x200000].assign(128, std::byte{0});
  gfx11::Dispatch d;
  d.code = 0x100000;
  d.rsrc1 = 0;  // 8 VGPRs: the program uses v8 and up
  d.rsrc2 = 2 << 1 | 1 << 15;
  d.user_data[0] = 0x200000;
  std::atomic<bool> stop{false};
  auto outcome = gfx11::run(d, memory, stop);
  CHECK(!outcome.ok);
  CHECK(outcome.fault.find("VGPR v8 outside the 8") != std::string::npos);
  d.rsrc1 = 2;
  d.user_data[0] = 0x900000;  // nothing is mapped there
  outcome = gfx11::run(d, memory, stop);
  CHECK(!outcome.ok);
  CHECK(outcome.page_fault);
  CHECK(outcome.fault_address == 0x900000);
  CHECK(outcome.fault.find("global_store_b32") != std::string::npos);
}
