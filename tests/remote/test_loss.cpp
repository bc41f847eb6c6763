// Loss and faults between processes: an agent killed mid-submission, a client killed
// mid-run, two clients at once. The agent or the client on the other side is the rig tool
// (RIG_TOOL names it), started as a process of its own.
#include <doctest/doctest.h>

#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"

using namespace rig;
using namespace std::chrono_literals;
using rig::remote::test::eventually;
using rig::remote::test::Tool;

namespace {

constexpr const char* kToken = "loss-test-token";

}  // namespace

TEST_CASE("an agent killed mid-submission loses its devices within 2 s, and nothing hangs") {
  Tool agent({"serve", "--devices", "MEM"}, {fmt::format("RIG_TOKEN={}", kToken)});
  const std::string listening = agent.line();
  REQUIRE(listening.starts_with("listening "));
  const std::string address = listening.substr(10);
  auto d = open(remote::opener(address, "MEM", "MEM@killed", kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  Buffer a = Buffer::create(*d, 16 << 20), b = Buffer::create(*d, 16 << 20);
  std::atomic<bool> copying{false};
  std::atomic<std::int64_t> lost_at{0};
  std::string why;
  std::thread client([&] {
    try {
      for (;;) {
        Buffer::copy(a, b);
        copying = true;
      }
    } catch (const Lost& e) {
      lost_at = std::chrono::steady_clock::now().time_since_epoch().count();
      why = e.what();
    }
  });
  REQUIRE(eventually([&] { return copying.load(); }, 5000ms));
  const auto killed = std::chrono::steady_clock::now();
  agent.kill();
  const bool ended = eventually([&] { return lost_at.load() != 0; }, 2000ms);
  if (!ended) client.detach();
  REQUIRE(ended);
  client.join();
  const auto after = std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(lost_at.load())) - killed;
  CHECK(after < 2s);
  CHECK(why.starts_with(fmt::format("MEM@killed lost: connection to {} lost: ", address)));
  // Other devices go on.
  Buffer here = Buffer::create(host(), 4096);
  Buffer::copy(Buffer::of_string(std::string(4096, 'x')), here);
}

TEST_CASE("a client killed mid-run: the agent frees all it held and serves the next, two at once") {
  auto agent = remote::Agent::start({"127.0.0.1:0", {"MEM"}, kToken});
  REQUIRE_MESSAGE(agent.has_value(), agent.error());
  const std::string address = (*agent)->address();
  const std::vector<std::string> env{fmt::format("RIG_TOKEN={}", kToken), fmt::format("RIG_REMOTE={}", address),
                                     "RIG_CONFORMANCE_SCALE=1"};
  {
    // A client that runs copies for a long while, killed once it holds memory there.
    Tool client({"conform", "--device", "MEM@127.0.0.1", "--law", "copies are the identity*"}, env);
    REQUIRE(eventually([&] { return (*agent)->held_bytes() > 0; }, 10000ms));
    client.kill();
  }
  CHECK(eventually([&] { return (*agent)->clients() == 0 && (*agent)->held_bytes() == 0; }, 3000ms));
  // Two clients at once: the tool's, and this process's.
  Tool other({"conform", "--device", "MEM@127.0.0.1", "--law", "a reader sees the last writer"}, env);
  auto d = open(remote::opener(address, "MEM", "MEM@next", kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  CHECK(eventually([&] { return (*agent)->clients() == 2; }, 5000ms));
  Buffer b = Buffer::create(*d, 1 << 20), back = Buffer::create(host(), 1 << 20);
  for (int i = 0; i < 20; ++i) {
    Buffer::copy(Buffer::of_string(std::string(1 << 20, char('a' + i))), b);
    Buffer::copy(b, back);
  }
  char last = 0;
  back.read<char>([&](std::span<const char> x) { last = x[x.size() - 1]; });
  CHECK(last == 'a' + 19);
  CHECK(other.wait() == 0);
}
