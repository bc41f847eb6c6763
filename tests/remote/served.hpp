// served.hpp — an agent serving a simulated GPU (`rig serve --devices ...` under RIG_SIM) in a
// process of its own, started on first use, and the client's side of it: what the tests of
// served GPUs (test_amd.cpp, test_nv.cpp) share.
#pragma once

#include <doctest/doctest.h>

#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "support.hpp"

namespace rig::remote::test {

class ServedAgent {
 public:
  // An agent serving `devices` ("AMD:0,CPU") with RIG_SIM=`sim`, admitting `token`.
  ServedAgent(std::string devices, std::string sim, std::string token)
      : devices_(std::move(devices)), sim_(std::move(sim)), token_(std::move(token)) {}

  // Its address, the agent started by the first call.
  const std::string& address() {
    if (!agent_) {
      agent_ = std::make_unique<Tool>(std::vector<std::string>{"serve", "--devices", devices_},
                                      std::vector<std::string>{fmt::format("RIG_TOKEN={}", token_),
                                                               fmt::format("RIG_SIM={}", sim_)});
      const std::string listening = agent_->line();
      REQUIRE_MESSAGE(listening.starts_with("listening "), "rig serve printed: ", listening);
      address_ = listening.substr(10);
    }
    return address_;
  }

  // A new remote device of the agent's `device`, named `name` on this side.
  Device open(const std::string& device, const std::string& name) {
    auto d = rig::open(remote::opener(address(), device, name, token_));
    REQUIRE_MESSAGE(d.has_value(), d.error());
    return *d;
  }

 private:
  std::string devices_, sim_, token_, address_;
  std::unique_ptr<Tool> agent_;
};

// A buffer of d holding `values`, copied there from host memory (the host does not address
// a remote device's memory).
template <class T>
Buffer filled(const Device& d, const std::vector<T>& values) {
  Buffer here = Buffer::create(host(), values.size() * sizeof(T));
  here.write<T>([&](std::span<T> x) { std::copy(values.begin(), values.end(), x.begin()); });
  Buffer b = Buffer::create(d, values.size() * sizeof(T));
  Buffer::copy(here, b);
  return b;
}

// The values b holds, copied back to host memory.
template <class T>
std::vector<T> contents(const Buffer& b) {
  Buffer here = Buffer::create(host(), b.length());
  Buffer::copy(b, here);
  return here.read<T>([](std::span<const T> x) { return std::vector<T>(x.begin(), x.end()); });
}

}  // namespace rig::remote::test
