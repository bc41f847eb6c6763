// What the AMD driver's tests share: a simulator per test (kept for the whole run, since
// rig keeps a device's driver, and so its seam, after the device closes), a device that
// closes when the test ends, the kernels built from C, and PM4 words for Words parts.
#pragma once

#include <rig/amd_abi.hpp>
#include <rig/rig.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <rig/amd.hpp>
#include "sim.hpp"

namespace rig::test::amd {

// A new simulator that lives until the process exits.
inline sim::amd::Simulator& simulator(sim::amd::Config config = {}) {
  static std::mutex m;
  static std::vector<std::unique_ptr<sim::amd::Simulator>> all;
  std::lock_guard g(m);
  return *all.emplace_back(std::make_unique<sim::amd::Simulator>(std::move(config)));
}

// "AMD:0" on `sim`, closed when the guard goes (rig returns a live device of the same name,
// so every test closes its own).
struct Opened {
  Device device;
  explicit Opened(sim::amd::Simulator& sim, rig::amd::Options options = {})
      : device([&] {
          auto d = rig::open(rig::amd::opener(0, sim, options));
          if (!d) FAIL(d.error());
          return *d;
        }()) {}
  ~Opened() {
    try {
      device.close();
    } catch (const std::exception&) {
    }
  }
  Device* operator->() { return &device; }
  operator const Device&() const { return device; }
};

inline std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing ", path);
  std::vector<char> c{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> out(c.size());
  std::memcpy(out.data(), c.data(), c.size());
  return out;
}

// The gfx1100 code object of tests/amd/kernels/amd_kernels.c.
inline const std::vector<std::byte>& gpu_kernels() {
  static auto bytes = file_bytes(fmt::format("{}/amd_kernels_gfx1100.co", RIG_AMD_KERNEL_DIR));
  return bytes;
}
// The host device's object of tests/amd/kernels/host_kernels.c.
inline const std::vector<std::byte>& host_kernels() {
  static auto bytes = file_bytes(fmt::format("{}/amd_host_kernels.o", RIG_AMD_KERNEL_DIR));
  return bytes;
}

// A buffer of `d` holding `words` (the host addresses every AMD region).
inline Buffer words_buffer(const Device& d, std::span<const std::uint32_t> words) {
  Buffer b = Buffer::create(d, words.size() * 4);
  b.write<std::uint32_t>([&](std::span<std::uint32_t> out) { std::copy(words.begin(), words.end(), out.begin()); });
  return b;
}

// A submission of one Words part on `queue` over `words`.
inline Submission words_part(const Device& d, const Buffer& words, std::string queue = "COMPUTE:0") {
  Submission::Part part{std::move(queue), {}, Submission::Words{words}};
  return Submission::make(d, std::span(&part, 1), 0, 0);
}

// A launch of `f` whose parameter slots at `refs` are the run's buffers in slot order.
inline Submission launch_part(const Device& d, const Function& f, std::uint32_t params,
                              std::vector<std::uint32_t> refs, int reads, int writes) {
  Submission::Launch launch{f, params, {}};
  for (std::uint32_t i = 0; i < refs.size(); ++i)
    launch.refs.push_back({refs[i], Submission::Ref::What::Buffer, i, {}});
  Submission::Part part{"", {}, launch};
  return Submission::make(d, std::span(&part, 1), reads, writes);
}

}  // namespace rig::test::amd
