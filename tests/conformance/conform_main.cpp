// A stand-alone `rig conform` for the suite's own test of tools/conform.cpp:
// conform_check [--device NAME] [--junit FILE]
#include <fmt/format.h>

#include <string_view>

#include "conform.hpp"

int main(int argc, char** argv) {
  rig::tool::ConformOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if ((a == "--device" || a == "--junit") && i + 1 < argc) {
      (a == "--device" ? options.device : options.junit) = argv[++i];
    } else {
      fmt::print(stderr, "usage: conform_check [--device NAME] [--junit FILE]\n");
      return 2;
    }
  }
  return rig::tool::conform(options);
}
