// A CUDA GPU served by an agent: `rig serve --devices CUDA:0` with RIG_LIBCUDA naming the fake
// libcuda the suite builds (tests/sim/cuda, which runs the PTX of fatbins on the PTX
// interpreter) in a process of its own, and this process its client through CUDA:0@127.0.0.1,
// loading the CUDA tests' committed fatbin. The same fake GPU opened here, through the same
// library, is what the served facts are compared with.
#include <doctest/doctest.h>

#include <rig/cuda.hpp>
#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "served.hpp"

using namespace rig;
using namespace rig::remote::test;  // ServedAgent and its helpers

namespace {

ServedAgent agent("CUDA:0,CPU", {"RIG_LIBCUDA=" RIG_FAKE_LIBCUDA}, "cuda-test-token");

// The committed sm_90 fatbin of tests/cuda/kernels.cu, whose PTX the fake runs.
std::vector<std::byte> fatbin() { return file_bytes(RIG_CUDA_FATBIN); }

}  // namespace

TEST_CASE("an agent's CUDA GPU comes across with the facts of the same GPU opened here") {
  Device served = agent.open("CUDA:0", "CUDA:0@served");
  auto local = rig::open(rig::cuda::opener(0, RIG_FAKE_LIBCUDA));
  REQUIRE_MESSAGE(local.has_value(), local.error());
  CHECK(served.name() == "CUDA:0@served");
  CHECK(served.arch() == "sm_90");
  CHECK(served.arch() == local->arch());
  const edge::Facts& here = local->facts();
  const edge::Facts& there = served.facts();
  CHECK(there.budget == here.budget);
  CHECK(there.alignment == here.alignment);
  CHECK(there.cache_bytes == here.cache_bytes);
  CHECK(there.copy_engine == here.copy_engine);
  REQUIRE(there.queues.size() == here.queues.size());
  for (std::size_t q = 0; q < here.queues.size(); ++q) CHECK(there.queues[q].name == here.queues[q].name);
  local->close();
  served.close();
}

TEST_CASE("an agent's CUDA GPU loads a fatbin once and runs its kernel twice, every element checked") {
  Device gpu = agent.open("CUDA:0", "CUDA:0@served");
  const Function add = kernel(gpu, fatbin(), "add_u32");
  CHECK(add.params() == std::optional<std::size_t>(20));  // cuFuncGetParamInfo's, on the agent
  add_u32_twice(gpu, add);
  gpu.close();
}

TEST_CASE("a kernel name the agent's CUDA module lacks is not resolved, and the image goes on") {
  Device gpu = agent.open("CUDA:0", "CUDA:0@served");
  auto image = Image::load(gpu, fatbin());
  REQUIRE_MESSAGE(image.has_value(), image.error());
  CHECK(!image->resolve("no_such_kernel").has_value());
  CHECK(!image->resolve("").has_value());
  CHECK(image->resolve("copy_u32").has_value());
  CHECK(!gpu.lost());
  gpu.close();
}

TEST_CASE("bytes CUDA cannot load are refused at Image::load with CUDA's reason, and the device goes on") {
  Device gpu = agent.open("CUDA:0", "CUDA:0@served");
  const std::string junk = "not a cubin, a fatbin or PTX";
  std::vector<std::byte> bytes(junk.size());
  std::transform(junk.begin(), junk.end(), bytes.begin(), [](char c) { return std::byte(c); });
  auto image = Image::load(gpu, bytes);
  REQUIRE_FALSE(image.has_value());
  // Text that is no cubin or fatbin is PTX to CUDA, whose JIT refuses it; the agent's reason comes across.
  CHECK_MESSAGE(image.error().starts_with("CUDA:0@served: CUDA rejected the PTX (28 bytes): CUDA_ERROR_INVALID_PTX"),
                image.error());
  CHECK(!gpu.lost());
  Buffer b = filled(gpu, std::vector<std::uint32_t>{9, 8, 7});
  CHECK(contents<std::uint32_t>(b) == std::vector<std::uint32_t>{9, 8, 7});
  gpu.close();
}

TEST_CASE("a faulting kernel on the agent's CUDA GPU loses the remote device with CUDA's reason, and it opens again") {
  {
    Device gpu = agent.open("CUDA:0", "CUDA:0@faulted");
    // fault() stores to address 0x10, which CUDA does not know: the agent's context fails.
    // The reason is the agent's CUDA error, which shows at the agent's wait or already at the
    // call of its submit that follows the kernel (cuStreamWriteValue64 of the value).
    const std::string why = fault_loss(gpu, kernel(gpu, fatbin(), "fault"));
    CHECK_MESSAGE(why.starts_with("CUDA:0@faulted lost: "), why);
    CHECK_MESSAGE(why.ends_with("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"), why);
  }
  // The agent's next open of the GPU resets the failed context: work runs there again.
  Device again = agent.open("CUDA:0", "CUDA:0@faulted");
  add_u32_twice(again, kernel(again, fatbin(), "add_u32"));
  Device cpu = agent.open("CPU", "CPU@beside");
  Buffer on_cpu = filled(cpu, std::vector<std::uint32_t>{5, 6});
  CHECK(contents<std::uint32_t>(on_cpu) == std::vector<std::uint32_t>{5, 6});
}
