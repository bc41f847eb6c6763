// An NVIDIA GPU served by an agent: `rig serve --devices NV:0` under RIG_SIM=nv (the simulated
// Hopper, whose engines know the benches' kernels: tests/cuda/kernels as nvcc built them) in a
// process of its own, and this process its client through NV:0@127.0.0.1, loading the same
// committed fatbin.
#include <doctest/doctest.h>

#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "support.hpp"

using namespace rig;
using rig::remote::test::Tool;

namespace {

constexpr const char* kToken = "nv-test-token";

// The agent both tests share, started on first use; its address.
const std::string& agent_address() {
  static std::unique_ptr<Tool> agent;
  static std::string address;
  if (!agent) {
    agent = std::make_unique<Tool>(std::vector<std::string>{"serve", "--devices", "NV:0,CPU"},
                                   std::vector<std::string>{fmt::format("RIG_TOKEN={}", kToken), "RIG_SIM=nv"});
    const std::string listening = agent->line();
    REQUIRE_MESSAGE(listening.starts_with("listening "), "rig serve printed: ", listening);
    address = listening.substr(10);
  }
  return address;
}

// A new remote device NV:0 of the agent, named `name` on this side.
Device remote_gpu(const std::string& name) {
  auto d = open(remote::opener(agent_address(), "NV:0", name, kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  return *d;
}

// The committed sm_90 fatbin of tests/cuda/kernels.cu.
std::vector<std::byte> fatbin() {
  std::ifstream in(RIG_NV_FATBIN, std::ios::binary);
  REQUIRE_MESSAGE(in, "no fatbin at " RIG_NV_FATBIN);
  const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// A buffer of d holding `values`, copied there from host memory.
Buffer filled(const Device& d, const std::vector<std::uint32_t>& values) {
  Buffer here = Buffer::create(host(), values.size() * 4);
  here.write<std::uint32_t>([&](std::span<std::uint32_t> x) { std::copy(values.begin(), values.end(), x.begin()); });
  Buffer b = Buffer::create(d, values.size() * 4);
  Buffer::copy(here, b);
  return b;
}

std::vector<std::uint32_t> contents(const Buffer& b) {
  Buffer here = Buffer::create(host(), b.length());
  Buffer::copy(b, here);
  return here.read<std::uint32_t>([](std::span<const std::uint32_t> x) { return std::vector<std::uint32_t>(x.begin(), x.end()); });
}

}  // namespace

TEST_CASE("an agent's simulated Hopper loads a fatbin once and runs its nvcc-built kernel, the bytes checked") {
  Device gpu = remote_gpu("NV:0@served");
  CHECK(gpu.arch() == "sm_90");
  auto image = Image::load(gpu, fatbin());
  REQUIRE_MESSAGE(image.has_value(), image.error());
  auto add = image->resolve("add_u32");
  REQUIRE(add.has_value());
  CHECK(!image->resolve("no_such_kernel").has_value());
  // add_u32(data, n, add): data[i] += add for i < n.
  const std::uint32_t n = 3000;
  std::vector<std::uint32_t> start(n + 32);
  for (std::uint32_t i = 0; i < start.size(); ++i) start[i] = i * 3;
  Buffer data = filled(gpu, start);
  Submission::Launch launch{*add, 20, {{0, Submission::Ref::What::Buffer, 0, {}}}};
  Submission::Part part{"", {}, launch};
  auto s = Submission::make(gpu, std::span(&part, 1), 0, 1);
  auto block = s.block(0);
  // Two launches of the one image, each with its own n and addend.
  std::vector<std::uint32_t> want = start;
  for (auto [count, addend] : {std::pair{n, 7u}, std::pair{n / 2, 1000u}}) {
    Run run;
    run.groups(block, (count + 127) / 128);
    run.threads(block, 128);
    run.set<std::uint64_t>(block, 8, count);
    run.set<std::uint32_t>(block, 16, addend);
    Buffer writes[] = {data};
    submit(s, run, {}, writes).wait();
    for (std::uint32_t i = 0; i < count; ++i) want[i] += addend;
    const auto got = contents(data);
    for (std::uint32_t i = 0; i < got.size(); ++i) REQUIRE_MESSAGE(got[i] == want[i], "element ", i);
  }
  gpu.close();
}

TEST_CASE("a faulting kernel on the agent's Hopper loses the remote device with the agent's reason, and it opens again") {
  {
    Device gpu = remote_gpu("NV:0@faulted");
    auto image = Image::load(gpu, fatbin());
    REQUIRE_MESSAGE(image.has_value(), image.error());
    auto fault = image->resolve("fault");  // stores to address 0x10, which no range maps
    REQUIRE(fault.has_value());
    Submission::Part part{"", {}, Submission::Launch{*fault, 0, {}}};
    auto s = Submission::make(gpu, std::span(&part, 1), 0, 0);
    Run run;
    run.groups(s.block(0), 1);
    run.threads(s.block(0), 1);
    try {
      submit(s, run, {}, {}).wait();
      FAIL("the wait returned");
    } catch (const Lost& e) {
      const std::string why = e.what();
      CHECK_MESSAGE(why.starts_with("NV:0@faulted lost: "), why);
      CHECK_MESSAGE(why.find("(Xid 31) in COMPUTE:0, value ") != std::string::npos, why);
      CHECK_MESSAGE(why.find("(kernel fault)") != std::string::npos, why);
    }
    CHECK_THROWS_AS(Buffer::create(gpu, 4096), Lost);
  }
  Device again = remote_gpu("NV:0@faulted");
  Buffer b = filled(again, {1, 2, 3, 4});
  CHECK(contents(b) == std::vector<std::uint32_t>{1, 2, 3, 4});
  auto cpu = open(remote::opener(agent_address(), "CPU", "CPU@beside", kToken));
  REQUIRE_MESSAGE(cpu.has_value(), cpu.error());
  Buffer on_cpu = filled(*cpu, {5, 6});
  CHECK(contents(on_cpu) == std::vector<std::uint32_t>{5, 6});
}
