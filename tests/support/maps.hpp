// maps.hpp — what the tests ask of this process's address space: the line of
// /proc/self/maps that holds an address (its range, permissions, offset, device, inode and
// path, as the kernel writes them).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace rig::test {

// The line of /proc/self/maps whose mapping holds `address`, or "" where none does.
inline std::string mapping_of(std::uintptr_t address) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash == std::string::npos || space == std::string::npos || space < dash) continue;
    const auto begin = std::stoull(line.substr(0, dash), nullptr, 16);
    const auto end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
    if (begin <= address && address < end) return line;
  }
  return "";
}

}  // namespace rig::test
