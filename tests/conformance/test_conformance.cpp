// Every law on every built-in target (and every registered one): a failure fails the test;
// a skip, with its reason, is printed. RIG_CONFORMANCE_TARGET=NAME runs one target, and
// RIG_CONFORMANCE_SCALE shortens the laws (sanitized builds shorten them on their own).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstdlib>

#include "check_laws.hpp"
#include "conformance.hpp"
#include "fake_driver.hpp"

using namespace rig::conformance;

TEST_CASE("every law holds on every target present") {
  const char* only = std::getenv("RIG_CONFORMANCE_TARGET");
  int ran = 0;
  for (const auto& target : targets()) {
    if (only && target.name != only) continue;
    ++ran;
    check_laws(target);
  }
  CHECK(ran > 0);
  // A hung law's thread still blocks in its driver: end here rather than wait at exit.
  if (hung()) std::_Exit(1);
}

TEST_CASE("the built-in targets are the host, a memory device, nine configurations of the fake and an io device") {
  std::vector<std::string> names;
  for (const auto& t : builtin_targets()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"CPU", "MEM", "FAKE", "FAKE/commit_every=8", "FAKE/own_word",
                                          "FAKE/waits=none", "FAKE/completion=Host", "FAKE/hang_ms=60",
                                          "FAKE/host_addresses=false", "FAKE/maps_host_cheaply", "FAKE/maps_host=false",
                                          "IO-MEM"});
}

TEST_CASE("registered targets come after the host's devices and before the fake driver's") {
  // The targets the drivers built here registered (the simulators') come first.
  const std::size_t others = targets().size() - builtin_targets().size();
  add_targets("conformance-test", [] {
    std::vector<Target> out;
    out.push_back(driver_target("REGISTERED", [] { return rig::fake::opener("REGISTERED").first; }, 1));
    return out;
  });
  add_targets("broken", []() -> std::vector<Target> { throw std::runtime_error("no such bus"); });
  auto all = targets();
  REQUIRE(all.size() == builtin_targets().size() + others + 2);
  CHECK(all[1].name == "MEM");
  const std::size_t at = 2 + others;
  CHECK(all[at].name == "REGISTERED");
  CHECK(all[at + 1].name == "broken");
  CHECK(all[at + 2].name == "FAKE");
  // The registered target opens devices of its own names and runs laws, the leak check with
  // driver_target's count of its driver's memory.
  RunOptions options;
  options.only = {"facts are well formed",
                  "device order: a value starts after the previous one completed, on every queue",
                  "memory returns to its driver once its stamps allow, and not before"};
  auto outcomes = run(all[at], options);
  REQUIRE(outcomes.size() == 3);
  for (auto& o : outcomes) {
    CAPTURE(o.message);
    CHECK(o.status == Status::Passed);
  }
  // A source that cannot list its targets shows as a target whose laws fail with its reason.
  options.only = {"facts are well formed"};
  auto broken = run(all[at + 1], options);
  REQUIRE(broken.size() == 1);
  CHECK(broken[0].status == Status::Failed);
  CHECK(broken[0].message.find("no such bus") != std::string::npos);
}

TEST_CASE("on a target that states a slow copy rate, the laws sized by it still pass") {
  // The fake whose memory the host does not address, as edu's: copies stage, and Pinned memory
  // is a kind of its own. At edu's rate (docs/vfio.md) every law below takes its smaller sizes.
  Target slow;
  for (const auto& t : builtin_targets())
    if (t.name == "FAKE/host_addresses=false") slow = t;
  REQUIRE(slow.open);
  slow.copy_bytes_per_second = 4032 / 0.2;
  RunOptions options;
  options.only = {"copies are the identity across every memory kind",
                  "a reader sees the last writer",
                  "device order: a value starts after the previous one completed, on every queue",
                  "prefix order: each queue runs its parts in the order they were handed",
                  "the timeline word never moves backwards (a model run from two threads)",
                  "memory returns to its driver once its stamps allow, and not before",
                  "a lost device's memory returns to its driver once its word shows its last value",
                  "close of a busy device waits for its work",
                  "a loss leaves the other devices' copies through staging alone"};
  auto outcomes = run(slow, options);
  REQUIRE(outcomes.size() == options.only.size());
  for (auto& o : outcomes) {
    CAPTURE(o.law);
    CAPTURE(o.message);
    CHECK(o.status == Status::Passed);
  }
}

TEST_CASE("JUnit XML has a testsuite per target, a testcase per law, and escapes its text") {
  std::vector<Suite> suites{{"A&B", {{"law <1>", Status::Passed, "", 0.5},
                                     {"law \"2\"", Status::Failed, "it broke: x < y & \x01", 1.0},
                                     {"law 3", Status::Skipped, "no hang_ms", 0}}},
                            {"C", {}}};
  std::string x = junit(suites);
  CHECK(x.find("<testsuites name=\"rig conformance\" tests=\"3\" failures=\"1\" skipped=\"1\"") != std::string::npos);
  CHECK(x.find("<testsuite name=\"A&amp;B\" tests=\"3\" failures=\"1\" skipped=\"1\"") != std::string::npos);
  CHECK(x.find("<testcase classname=\"A&amp;B\" name=\"law &lt;1&gt;\" time=\"0.500\"/>") != std::string::npos);
  CHECK(x.find("<failure message=\"it broke: x &lt; y &amp; \" type=\"law\">") != std::string::npos);
  CHECK(x.find("<skipped message=\"no hang_ms\"/>") != std::string::npos);
  CHECK(x.find("<testsuite name=\"C\" tests=\"0\"") != std::string::npos);
  CHECK(x.find('\x01') == std::string::npos);
}
