// gfx9_mnemonics — the CDNA interpreter's decoder (tests/sim/amd/gfx9.hpp) for isa_coverage.py.
// Reads lines "PROCESSOR WORD WORD..." (gfx90a or gfx942, then an instruction's dwords in hex
// as llvm-objdump-19 prints them) and writes, for each, the mnemonic the decoder gives it, or
// "-" for one outside its subset. A line it cannot read gets "?".
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gfx9.hpp"

namespace gfx9 = rig::sim::amd::gfx9;

int main() {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string processor, word;
    in >> processor;
    std::vector<std::uint32_t> words;
    bool readable = true;
    while (in >> word) {
      char* end = nullptr;
      unsigned long value = std::strtoul(word.c_str(), &end, 16);
      if (*end || word.size() > 8) readable = false;
      words.push_back(std::uint32_t(value));
    }
    if ((processor != "gfx90a" && processor != "gfx942") || words.empty() || !readable) {
      std::cout << "?\n";
      continue;
    }
    std::size_t length = 0;
    auto target = processor == "gfx90a" ? gfx9::Target::gfx90a : gfx9::Target::gfx942;
    std::string name = gfx9::mnemonic(target, words.data(), words.size(), length);
    std::cout << (name.empty() ? "-" : name) << '\n';
  }
}
