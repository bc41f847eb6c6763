// What the AMD format and interpreter tests read from the build: its files whole, and
// llvm-objdump's listings of the kernels as (mnemonic, words) pairs.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace rig::test::amd {

// The whole file at `path`; the test fails naming it where the build did not write it.
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing build output ", path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Listed {
  std::string mnemonic, second;  // second: a gfx11 VOPD's Y half ("" elsewhere)
  std::vector<std::uint32_t> words;
};

// llvm-objdump -d lines: "\tMNEMONIC operands // ADDRESS: HEX HEX".
inline std::vector<Listed> disassembly(const std::string& text) {
  std::vector<Listed> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '\t') continue;
    auto slash = line.rfind("// ");
    if (slash == std::string::npos) continue;
    Listed l;
    std::istringstream(line.substr(1, slash - 1)) >> l.mnemonic;
    if (auto dual = line.find(":: "); dual != std::string::npos && dual < slash)
      std::istringstream(line.substr(dual + 3)) >> l.second;
    auto colon = line.find(": ", slash);
    std::istringstream words(line.substr(colon + 2));
    std::string w;
    while (words >> w && w.size() == 8) l.words.push_back(std::uint32_t(std::stoul(w, nullptr, 16)));
    if (!l.words.empty()) out.push_back(std::move(l));
  }
  return out;
}

}  // namespace rig::test::amd
