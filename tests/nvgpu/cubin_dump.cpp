// Prints what the driver's cubin reader (nvgpu/abi/cubin.hpp) finds in each cubin named on the
// command line, in the terms `readelf -S -r -W` prints, for check_readelf.py to compare:
//   cubin FILE
//   section INDEX NAME OFFSET SIZE         (hex, sections 1..n)
//   reloc TABLE OFFSET INFO [ADDEND]       (hex; INFO = symbol << 32 | type; ADDEND for RELA)
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

#include "cubin.hpp"

int main(int argc, char** argv) {
  for (int a = 1; a < argc; ++a) {
    std::ifstream in(argv[a], std::ios::binary);
    const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const auto* p = reinterpret_cast<const std::byte*>(chars.data());
    auto c = rig::nv::read_cubin(std::span(p, chars.size()), argv[a]);
    if (!c) {
      fmt::print(stderr, "{}\n", c.error());
      return 1;
    }
    fmt::print("cubin {}\n", argv[a]);
    for (std::size_t i = 1; i < c->sections.size(); ++i) {
      const auto& s = c->sections[i];
      fmt::print("section {} {} {:x} {:x}\n", i, s.name, s.offset, s.size);
    }
    for (const auto& r : c->relocations) {
      const std::uint64_t info = (std::uint64_t{r.symbol} << 32) | r.type;
      if (r.rela)
        fmt::print("reloc {} {:x} {:x} {}\n", c->sections[r.table].name, r.offset, info, r.addend);
      else
        fmt::print("reloc {} {:x} {:x}\n", c->sections[r.table].name, r.offset, info);
    }
  }
  return 0;
}
