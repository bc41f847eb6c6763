// Remote devices against an agent in this process, over UCX on loopback: what a client
// sees (rig/remote.hpp), and what the agent admits.
#include <doctest/doctest.h>

#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include <sys/stat.h>
#include <unistd.h>

#include "support.hpp"
#include "ucx.hpp"
#include "wire.hpp"

using namespace rig;
using namespace std::chrono_literals;
using rig::remote::test::eventually;

namespace {

constexpr const char* kToken = "remote-test-token";

// The agent every test here shares.
remote::Agent& agent() {
  static std::unique_ptr<remote::Agent> a = [] {
    auto started = remote::Agent::start({"127.0.0.1:0", {}, kToken});
    REQUIRE_MESSAGE(started.has_value(), started.error());
    return std::move(*started);
  }();
  return *a;
}

Device open_remote(const std::string& device, std::string token = kToken) {
  static int n = 0;
  auto d = open(remote::opener(agent().address(), device, fmt::format("{}@test~{}", device, n++), token));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  return *d;
}


}  // namespace

TEST_CASE("a client that proves the token sees the agent's devices") {
  auto names = remote::devices(agent().address(), kToken);
  REQUIRE_MESSAGE(names.has_value(), names.error());
  CHECK(*names == std::vector<std::string>{"CPU", "MEM"});
}

TEST_CASE("a wrong token is refused, and the agent serves the next client") {
  const auto dropped = agent().dropped();
  auto names = remote::devices(agent().address(), "not the token");
  REQUIRE_FALSE(names.has_value());
  CHECK(names.error() == fmt::format("{} refused the token: wrong token", agent().address()));
  CHECK(agent().dropped() > dropped);
  CHECK(remote::devices(agent().address(), kToken).has_value());
}

TEST_CASE("a device the agent does not serve does not open, naming those it serves") {
  auto d = open(remote::opener(agent().address(), "GPU:3", "GPU:3@test", kToken));
  REQUIRE_FALSE(d.has_value());
  CHECK(d.error() == fmt::format("GPU:3@test: {} serves no device GPU:3; it serves CPU, MEM", agent().address()));
}

TEST_CASE("a remote device's facts are its agent's, with the host addressing none of its memory") {
  Device d = open_remote("CPU");
  const auto& f = d.facts();
  CHECK(f.arch == host().facts().arch);
  CHECK_FALSE(f.host_addresses);
  CHECK(f.maps_host);
  CHECK(f.queues.size() == 1);
  CHECK(f.queues[0].runs == std::vector<Kind>{Kind::Launch, Kind::Copy});
  CHECK((!f.waits.stores && !f.waits.hosts));
  CHECK(static_cast<bool>(f.word == &rig_words[d.index()]));
}

TEST_CASE("bytes written to remote memory read back, through copies both ways") {
  for (const char* name : {"CPU", "MEM"}) {
    CAPTURE(name);
    Device d = open_remote(name);
    Buffer in = Buffer::create(host(), 1 << 20), out = Buffer::create(host(), 1 << 20);
    in.write<std::uint32_t>([](std::span<std::uint32_t> x) { std::iota(x.begin(), x.end(), 7u); });
    Buffer b = Buffer::create(d, 1 << 20);
    Buffer::copy(in, b);
    Buffer c = Buffer::create(d, 1 << 20);
    Buffer::copy(b, c);
    Buffer::copy(c, out);
    bool same = false;
    out.read<std::uint32_t>([&](std::span<const std::uint32_t> x) {
      same = x.size() == (1 << 18) && x[0] == 7 && x[(1 << 18) - 1] == 7 + (1 << 18) - 1;
    });
    CHECK(same);
    CHECK(agent().held_bytes() >= 2u << 20);
  }
}

TEST_CASE("memory a client freed returns to the agent's device") {
  const auto before = agent().held_bytes();
  {
    Device d = open_remote("MEM");
    Buffer b = Buffer::create(d, 1 << 16);
    Buffer::copy(Buffer::of_string(std::string(1 << 16, 'x')), b);
    CHECK(agent().held_bytes() >= before + (1 << 16));
    d.close();
  }
  CHECK(eventually([&] { return agent().held_bytes() <= before; }, 2000ms));
}

TEST_CASE("malformed and truncated messages from a raw UCX client are dropped, and the agent serves on") {
  std::atomic<int> welcomes{0};
  auto where = remote::ucx::parse_address(agent().address());
  REQUIRE(where.has_value());
  remote::ucx::Worker raw({[&](ucp_ep_h, std::span<const std::byte>) { ++welcomes; }, [](ucp_ep_h, ucs_status_t) {},
                           [](ucp_ep_h) {}, {}});
  auto ep = raw.connect(*where);
  REQUIRE(ep.has_value());
  const auto dropped = agent().dropped();
  // Before the token: a well-formed request, which is dropped unanswered.
  auto alloc = remote::wire::encode(remote::wire::Message{remote::wire::Alloc{1, 0, 0, 4096}});
  raw.send(*ep, alloc);
  // Junk, a truncated hello and one whose length lies.
  const std::byte junk[5] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  raw.send(*ep, junk);
  auto hello = remote::wire::encode(remote::wire::Message{remote::wire::Hello{remote::wire::kVersion, kToken}});
  raw.send(*ep, std::span(hello).first(hello.size() - 3));
  auto lying = hello;
  lying[8] = std::byte{0xff};
  raw.send(*ep, lying);
  CHECK(eventually([&] { return agent().dropped() >= dropped + 4; }, 2000ms));
  CHECK(welcomes.load() == 0);
  // The proper hello is still answered, and another client is served.
  raw.send(*ep, hello);
  CHECK(eventually([&] { return welcomes.load() == 1; }, 2000ms));
  Device d = open_remote("MEM");
  Buffer b = Buffer::create(d, 4096), back = Buffer::create(host(), 4096);
  Buffer::copy(Buffer::of_string(std::string(4096, '*')), b);
  Buffer::copy(b, back);
  std::uint8_t first = 0;
  back.read<std::uint8_t>([&](std::span<const std::uint8_t> x) { first = x[0]; });
  CHECK(first == '*');
  raw.close(*ep);
}

TEST_CASE("a token file that others may read is refused; one only its owner reads gives its first line") {
  char path[] = "/tmp/rig-token-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "from-the-file\nsecond line\n", 26) == 26);
  ::close(fd);
  const char* before = std::getenv("RIG_TOKEN");
  const std::string saved = before ? before : "";
  ::unsetenv("RIG_TOKEN");
  ::setenv("RIG_TOKEN_FILE", path, 1);
  ::chmod(path, 0644);
  auto open_to_all = remote::token();
  ::chmod(path, 0600);
  auto owner_only = remote::token();
  ::unsetenv("RIG_TOKEN_FILE");
  auto none = remote::token();
  auto agent = remote::Agent::start({"127.0.0.1:0", {}, ""});  // an agent refuses to start without one
  if (before) ::setenv("RIG_TOKEN", saved.c_str(), 1);
  ::unlink(path);
  REQUIRE_FALSE(open_to_all.has_value());
  CHECK(open_to_all.error() == fmt::format("the token file {} may be read by others (mode 644); chmod 600 it", path));
  REQUIRE(owner_only.has_value());
  CHECK(*owner_only == "from-the-file");
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().starts_with("no token"));
  REQUIRE_FALSE(agent.has_value());
  CHECK(agent.error().starts_with("no token"));
}
