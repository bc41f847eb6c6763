// A GPU served by an agent: `rig serve --devices AMD:0` under RIG_SIM=amd (the simulated
// gfx1100) in a process of its own, and this process its client through AMD:0@127.0.0.1.
// The kernels are tests/amd's, built from C by clang-19, and so is the launch's making.
#include <doctest/doctest.h>

#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "../amd/support.hpp"  // gpu_kernels, launch_part
#include "served.hpp"

using namespace rig;
using rig::remote::test::contents;
using rig::remote::test::filled;
using rig::remote::test::ServedAgent;
using rig::test::amd::gpu_kernels;
using rig::test::amd::launch_part;

namespace {

ServedAgent agent("AMD:0,CPU", {"RIG_SIM=amd"}, "amd-test-token");

}  // namespace

TEST_CASE("an agent's simulated AMD GPU loads an image once and runs its compiled kernel, the bytes checked") {
  Device gpu = agent.open("AMD:0", "AMD:0@served");
  CHECK(gpu.arch() == "gfx1100");
  auto image = Image::load(gpu, gpu_kernels());
  REQUIRE_MESSAGE(image.has_value(), image.error());
  auto add = image->resolve("vector_add");
  REQUIRE(add.has_value());
  CHECK(!image->resolve("no_such_kernel").has_value());
  // vector_add(a, b, c, n): c[i] = a[i] + b[i] for i < n; the last group is partly idle.
  const std::uint32_t n = 1000;
  std::vector<float> a(n), b(n);
  for (std::uint32_t i = 0; i < n; ++i) a[i] = float(i) * 0.5f, b[i] = 1000.0f - float(i) * 0.25f;
  Buffer in_a = filled(gpu, a), in_b = filled(gpu, b);
  auto s = launch_part(gpu, *add, 28, {0, 8, 16}, 2, 1);
  auto block = s.block(0);
  // Two launches of the one image, each into a buffer of its own, with its own n.
  for (std::uint32_t count : {n, n / 2}) {
    Buffer out = filled(gpu, std::vector<float>(n + 64, -1.0f));
    Run run;
    run.groups(block, (count + 63) / 64);
    run.threads(block, 64);
    run.set(block, 24, count);
    Buffer reads[] = {in_a, in_b}, writes[] = {out};
    submit(s, run, reads, writes).wait();
    const auto c = contents<float>(out);
    for (std::uint32_t i = 0; i < count; ++i) REQUIRE(c[i] == a[i] + b[i]);
    CHECK(c[count] == -1.0f);  // past n: untouched
    CHECK(c[n] == -1.0f);
  }
  gpu.close();
}

TEST_CASE("a faulting kernel on the agent's GPU loses the remote device with the agent's reason, and it opens again") {
  {
    Device gpu = agent.open("AMD:0", "AMD:0@faulted");
    auto image = Image::load(gpu, gpu_kernels());
    REQUIRE_MESSAGE(image.has_value(), image.error());
    auto store = image->resolve("store");
    REQUIRE(store.has_value());
    // store(p, value): *p = value, at an address nothing maps.
    auto s = launch_part(gpu, *store, 12, {}, 0, 0);
    Run run;
    run.set(s.block(0), 0, std::uint64_t(0xdead0000));
    run.set(s.block(0), 8, std::uint32_t(1));
    try {
      submit(s, run, {}, {}).wait();
      FAIL("the wait returned");
    } catch (const Lost& e) {
      const std::string why = e.what();
      CHECK_MESSAGE(why.starts_with("AMD:0@faulted lost: "), why);
      CHECK_MESSAGE(why.find("page fault at 0xdead0000") != std::string::npos, why);
      CHECK_MESSAGE(why.find("in store (value 1 part 0)") != std::string::npos, why);
    }
    CHECK_THROWS_AS(Buffer::create(gpu, 4096), Lost);
  }
  // Opening the name again makes a new device on a GPU the agent opened again.
  Device again = agent.open("AMD:0", "AMD:0@faulted");
  Buffer b = filled(again, std::vector<std::uint32_t>{1, 2, 3, 4});
  CHECK(contents<std::uint32_t>(b) == std::vector<std::uint32_t>{1, 2, 3, 4});
  // The agent's other devices went on.
  Device cpu = agent.open("CPU", "CPU@beside");
  Buffer on_cpu = filled(cpu, std::vector<std::uint32_t>{5, 6});
  CHECK(contents<std::uint32_t>(on_cpu) == std::vector<std::uint32_t>{5, 6});
}
