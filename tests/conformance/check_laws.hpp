// check_laws.hpp — the doctest side of a conformance run, for the suite's test programs: each
// law's outcome printed (status, seconds, law, message), and a failed law a failed check
// naming the target and the law. A skip, with its reason, is only printed.
#pragma once

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstdio>

#include "conformance.hpp"

namespace rig::conformance {

inline void check_laws(const Target& target) {
  fmt::print("{} — {}\n", target.name, target.about);
  for (const auto& o : run(target)) {
    fmt::print("  {}  {:6.2f}s  {}{}\n", status_name(o.status), o.seconds, o.law,
               o.message.empty() ? "" : "\n        " + o.message);
    CAPTURE(target.name);
    CAPTURE(o.law);
    CAPTURE(o.message);
    CHECK(o.status != Status::Failed);
  }
  std::fflush(stdout);
}

}  // namespace rig::conformance
