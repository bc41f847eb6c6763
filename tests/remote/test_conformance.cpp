// The conformance laws on remote devices: the host device and a memory device of an agent
// in this process, reached over UCX on loopback ("CPU@127.0.0.1", "MEM@127.0.0.1").
#include <doctest/doctest.h>

#include <rig/remote.hpp>

#include <fmt/format.h>

#include "check_laws.hpp"
#include "conformance.hpp"

using namespace rig;
using namespace rig::conformance;

TEST_CASE("every law holds on CPU@127.0.0.1 and MEM@127.0.0.1") {
  auto agent = remote::Agent::start({"127.0.0.1:0", {}, "conformance-token"});
  REQUIRE_MESSAGE(agent.has_value(), agent.error());
  const std::string address = (*agent)->address();
  for (std::string device : {"CPU", "MEM"}) {
    Target t = driver_target(device + "@127.0.0.1",
                             [address, device] { return remote::opener(address, device, "", "conformance-token"); },
                             1, fmt::format("{} of an agent in this process at {}", device, address));
    if (device == "CPU") {  // the host device's kernels, loaded on the agent's host device
      const Target cpu = builtin_targets()[0];
      t.image = cpu.image;
      t.function = cpu.function;
    }
    check_laws(t);
  }
}
