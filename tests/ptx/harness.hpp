// The tests' embedder of the PTX interpreter: device memory as host buffers at made-up
// addresses, the committed PTX kernels loaded with their variables placed, and parameter
// buffers packed by the kernels' own layout.
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include "ptx.hpp"

namespace ptx_test {

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string kernel_path(const std::string& file, const std::string& arch) {
  return fmt::format("{}/{}.{}.ptx", RIG_PTX_KERNELS, file, arch);
}

// Buffers of device memory, each at its own address with a gap after it.
class Arena : public rig::ptx::Memory {
 public:
  std::uint64_t alloc(std::size_t bytes) {
    const std::uint64_t base = next_;
    next_ += (bytes + 0xffff) / 0x10000 * 0x10000 + 0x10000;
    buffers_[base] = std::vector<std::byte>(bytes);
    return base;
  }
  template <class T>
  std::uint64_t upload(const std::vector<T>& v) {
    const std::uint64_t a = alloc(v.size() * sizeof(T));
    std::memcpy(buffers_[a].data(), v.data(), v.size() * sizeof(T));
    return a;
  }
  template <class T>
  std::vector<T> download(std::uint64_t address, std::size_t n) const {
    std::vector<T> v(n);
    std::memcpy(v.data(), buffers_.at(address).data(), n * sizeof(T));
    return v;
  }
  std::optional<rig::ptx::Mapping> map(std::uint64_t address, std::uint64_t size, bool) override {
    auto it = buffers_.upper_bound(address);
    if (it == buffers_.begin()) return std::nullopt;
    --it;
    const std::uint64_t end = it->first + it->second.size();
    if (address + size > end || address + size < address) return std::nullopt;
    return rig::ptx::Mapping{it->first, it->second.size(), it->second.data()};
  }

 private:
  std::map<std::uint64_t, std::vector<std::byte>> buffers_;
  std::uint64_t next_ = 0x7f00'0000'0000ull;
};

// A loaded kernel file with its variables placed in an arena.
struct Loaded {
  rig::ptx::Module module;
  std::map<std::string, std::uint64_t> variables;
};

inline Loaded load(Arena& arena, const std::string& file, const std::string& arch = "sm_90") {
  auto m = rig::ptx::Module::load(read_text(kernel_path(file, arch)), file + "." + arch);
  REQUIRE_MESSAGE(m.has_value(), (m ? std::string() : m.error()));
  Loaded l{std::move(*m), {}};
  for (const auto& v : l.module.variables()) {
    std::vector<std::byte> bytes(v.size);
    if (!v.init.empty())  // a variable without an initialiser starts as zeroes
      std::memcpy(bytes.data(), v.init.data(), std::min<std::size_t>(v.init.size(), bytes.size()));
    const std::uint64_t a = arena.upload(bytes);
    l.module.place(v.name, a);
    l.variables[v.name] = a;
  }
  return l;
}

// The parameter buffer of `kernel` with each argument's low bytes at its parameter's offset.
inline std::vector<std::byte> params(const rig::ptx::Module& m, const std::string& kernel,
                                     std::initializer_list<std::uint64_t> args) {
  auto layout = m.params(kernel);
  REQUIRE(layout.has_value());
  REQUIRE(layout->size() == args.size());
  std::vector<std::byte> out(*m.params_size(kernel));
  std::size_t i = 0;
  for (std::uint64_t a : args) {
    const auto& p = (*layout)[i++];
    std::memcpy(out.data() + p.offset, &a, std::min<std::size_t>(p.size, 8));
  }
  return out;
}

inline rig::ptx::Stats run(const Loaded& l, Arena& arena, const std::string& kernel, rig::ptx::Dim3 grid,
                           rig::ptx::Dim3 block, std::initializer_list<std::uint64_t> args) {
  const auto p = params(l.module, kernel, args);
  rig::ptx::Launch launch;
  launch.grid = grid;
  launch.block = block;
  launch.params = p;
  auto r = l.module.run(kernel, launch, arena);
  REQUIRE_MESSAGE(r.has_value(), (r ? std::string() : r.error()));
  return *r;
}

inline std::uint64_t f2u(float f) { std::uint32_t u; std::memcpy(&u, &f, 4); return u; }

}  // namespace ptx_test
