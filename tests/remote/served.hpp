// served.hpp — an agent serving a simulated GPU (`rig serve --devices ...` under RIG_SIM, or
// over the fake libcuda RIG_LIBCUDA names) in a process of its own, started on first use, and
// the client's side of it: what the tests of served GPUs (test_amd.cpp, test_nv.cpp,
// test_cuda.cpp) share.
#pragma once

#include <doctest/doctest.h>

#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"

namespace rig::remote::test {

class ServedAgent {
 public:
  // An agent serving `devices` ("AMD:0,CPU") with `env` ("RIG_SIM=amd") beside this
  // process's environment, admitting `token`.
  ServedAgent(std::string devices, std::vector<std::string> env, std::string token)
      : devices_(std::move(devices)), env_(std::move(env)), token_(std::move(token)) {}

  // Its address, the agent started by the first call.
  const std::string& address() {
    if (!agent_) {
      std::vector<std::string> env = env_;
      env.push_back(fmt::format("RIG_TOKEN={}", token_));
      agent_ = std::make_unique<Tool>(std::vector<std::string>{"serve", "--devices", devices_}, std::move(env));
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
  std::string devices_;
  std::vector<std::string> env_;
  std::string token_, address_;
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

// The bytes of the file at `path` (an image the test loads).
inline std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in, "no file at ", path);
  const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// The function `name` of `image` loaded on gpu (the test fails if either is refused); it
// keeps its image loaded.
inline Function kernel(const Device& gpu, std::span<const std::byte> image, const std::string& name) {
  auto loaded = Image::load(gpu, image);
  REQUIRE_MESSAGE(loaded.has_value(), loaded.error());
  auto f = loaded->resolve(name);
  REQUIRE_MESSAGE(f.has_value(), "no function ", name);
  return *f;
}

// Launches `fault` (tests/cuda/kernels.cu's fault(), a store to address 0x10) on gpu as one
// thread and returns the reason of the Lost its wait raises; the test fails if the wait
// returns, or if gpu still allocates memory after.
inline std::string fault_loss(const Device& gpu, const Function& fault) {
  Submission::Part part{"", {}, Submission::Launch{fault, 0, {}}};
  auto s = Submission::make(gpu, std::span(&part, 1), 0, 0);
  Run run;
  run.groups(s.block(0), 1);
  run.threads(s.block(0), 1);
  std::string why;
  try {
    submit(s, run, {}, {}).wait();
    FAIL("the wait returned");
  } catch (const Lost& e) {
    why = e.what();
  }
  CHECK_THROWS_AS(Buffer::create(gpu, 4096), Lost);
  return why;
}

// Launches `add` (tests/cuda/kernels.cu's add_u32(data, n, add): data[i] += add for i < n)
// on gpu twice from one submission, each with its own n and addend, and checks every element
// of the buffer copied back after each, those past n untouched.
inline void add_u32_twice(const Device& gpu, const Function& add) {
  const std::uint32_t n = 3000;
  std::vector<std::uint32_t> start(n + 32);
  for (std::uint32_t i = 0; i < start.size(); ++i) start[i] = i * 3;
  Buffer data = filled(gpu, start);
  Submission::Launch launch{add, 20, {{0, Submission::Ref::What::Buffer, 0, {}}}};
  Submission::Part part{"", {}, launch};
  auto s = Submission::make(gpu, std::span(&part, 1), 0, 1);
  auto block = s.block(0);
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
    const auto got = contents<std::uint32_t>(data);
    for (std::uint32_t i = 0; i < got.size(); ++i) REQUIRE_MESSAGE(got[i] == want[i], "element ", i);
  }
}

}  // namespace rig::remote::test
