// The committed nvcc-built kernels (tests/nv/kernels), read as bytes or text.
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace nvgpu_test {

inline std::vector<std::byte> kernel_file(const std::string& file) {
  std::ifstream in(std::string(RIG_NV_KERNELS) + "/" + file, std::ios::binary);
  REQUIRE_MESSAGE(in, "no committed kernel file " << file);
  const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

inline std::string kernel_text(const std::string& file) {
  const auto b = kernel_file(file);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

inline const char* const kernel_sources[] = {"saxpy", "reduce", "atomics", "globals", "dynshared", "stack"};
inline const unsigned kernel_sms[] = {90, 89, 80};

}  // namespace nvgpu_test
