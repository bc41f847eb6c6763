// A stand-alone `rig conform` for the suite's own test of tools/conform.cpp:
// conform_check [--device NAME] [--junit FILE] [--law PATTERN]... [--law-timeout SECONDS] [--list]
#include <fmt/format.h>

#include <charconv>
#include <string_view>

#include "conform.hpp"

int main(int argc, char** argv) {
  rig::tool::ConformOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if ((a == "--device" || a == "--junit") && i + 1 < argc) {
      (a == "--device" ? options.device : options.junit) = argv[++i];
    } else if (a == "--law" && i + 1 < argc) {
      options.laws.emplace_back(argv[++i]);
    } else if (a == "--law-timeout" && i + 1 < argc) {
      std::string_view v = argv[++i];
      if (std::from_chars(v.data(), v.data() + v.size(), options.law_timeout).ec != std::errc{} ||
          options.law_timeout < 1) {
        fmt::print(stderr, "conform_check: --law-timeout takes a whole number of seconds, 1 or more\n");
        return 2;
      }
    } else if (a == "--list") {
      options.list = true;
    } else {
      fmt::print(stderr,
                 "usage: conform_check [--device NAME] [--junit FILE] [--law PATTERN]... [--law-timeout SECONDS] "
                 "[--list]\n");
      return 2;
    }
  }
  return rig::tool::conform(options);
}
