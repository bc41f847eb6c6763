// An NVIDIA GPU served by an agent: `rig serve --devices NV:0` under RIG_SIM=nv (the simulated
// Hopper, whose engines know the benches' kernels: tests/cuda/kernels as nvcc built them) in a
// process of its own, and this process its client through NV:0@127.0.0.1, loading the same
// committed fatbin.
#include <doctest/doctest.h>

#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <vector>

#include "served.hpp"

using namespace rig;
using namespace rig::remote::test;  // ServedAgent and its helpers

namespace {

ServedAgent agent("NV:0,CPU", {"RIG_SIM=nv"}, "nv-test-token");

// The committed sm_90 fatbin of tests/cuda/kernels.cu.
std::vector<std::byte> fatbin() { return file_bytes(RIG_NV_FATBIN); }

}  // namespace

TEST_CASE("an agent's simulated Hopper loads a fatbin once and runs its nvcc-built kernel, the bytes checked") {
  Device gpu = agent.open("NV:0", "NV:0@served");
  CHECK(gpu.arch() == "sm_90");
  auto image = Image::load(gpu, fatbin());
  REQUIRE_MESSAGE(image.has_value(), image.error());
  auto add = image->resolve("add_u32");
  REQUIRE(add.has_value());
  CHECK(!image->resolve("no_such_kernel").has_value());
  add_u32_twice(gpu, *add);
  gpu.close();
}

TEST_CASE("a faulting kernel on the agent's Hopper loses the remote device with the agent's reason, and it opens again") {
  {
    Device gpu = agent.open("NV:0", "NV:0@faulted");
    // fault() stores to address 0x10, which no range maps.
    const std::string why = fault_loss(gpu, kernel(gpu, fatbin(), "fault"));
    CHECK_MESSAGE(why.starts_with("NV:0@faulted lost: "), why);
    CHECK_MESSAGE(why.find("(Xid 31) in COMPUTE:0, value ") != std::string::npos, why);
    CHECK_MESSAGE(why.find("(kernel fault)") != std::string::npos, why);
  }
  Device again = agent.open("NV:0", "NV:0@faulted");
  Buffer b = filled(again, std::vector<std::uint32_t>{1, 2, 3, 4});
  CHECK(contents<std::uint32_t>(b) == std::vector<std::uint32_t>{1, 2, 3, 4});
  Device cpu = agent.open("CPU", "CPU@beside");
  Buffer on_cpu = filled(cpu, std::vector<std::uint32_t>{5, 6});
  CHECK(contents<std::uint32_t>(on_cpu) == std::vector<std::uint32_t>{5, 6});
}
