// saxpy on the host device: loads the kernel object, runs y = a * x + y over n floats in one
// submission, checks every element against a plain loop, and exits non-zero on a mismatch.
//
// usage: saxpy [KERNEL_OBJECT] [N]    (defaults: saxpy_kernel.o beside the program, 1 Mi)
#include <rig/rig.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

std::vector<std::byte> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto* first = reinterpret_cast<const std::byte*>(bytes.data());
  return {first, first + bytes.size()};
}

}  // namespace

int main(int argc, char** argv) {
  std::string object = argc > 1 ? argv[1] : std::string(argv[0]) + "_kernel.o";
  const std::uint32_t n = argc > 2 ? std::uint32_t(std::strtoul(argv[2], nullptr, 10)) : 1u << 20;
  const std::uint32_t threads = 4096;
  const float a = 2.5f;

  rig::Device cpu = rig::host();
  auto image = rig::Image::load(cpu, slurp(object));
  if (!image) {
    std::fprintf(stderr, "saxpy: %s\n", image.error().c_str());
    return 1;
  }
  auto saxpy = image->resolve("saxpy");
  if (!saxpy) {
    std::fprintf(stderr, "saxpy: %s has no function saxpy\n", object.c_str());
    return 1;
  }

  rig::Buffer x = rig::Buffer::create(cpu, n * sizeof(float));
  rig::Buffer y = rig::Buffer::create(cpu, n * sizeof(float));
  x.write<float>([](std::span<float> xs) {
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 100);
  });
  y.write<float>([](std::span<float> ys) {
    for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = 1.0f;
  });

  // Parameters: x's address at byte 0 and y's at byte 8 (refs to the run's buffers 0 and 1),
  // then n and a.
  using Ref = rig::Submission::Ref;
  rig::Submission::Part part{"", {}, rig::Submission::Launch{*saxpy, 24,
      {{0, Ref::What::Buffer, 0, std::nullopt}, {8, Ref::What::Buffer, 1, std::nullopt}}}};
  auto s = rig::Submission::make(cpu, std::span(&part, 1), /*reads*/ 1, /*writes*/ 1);

  rig::Run run;
  auto b = s.block(0);
  run.groups(b, (n + threads - 1) / threads);
  run.threads(b, threads);
  run.set(b, 0, std::uint64_t(0));  // offsets into the buffers
  run.set(b, 8, std::uint64_t(0));
  run.set(b, 16, n);
  run.set(b, 20, a);
  rig::Buffer reads[] = {x}, writes[] = {y};
  rig::Point p = rig::submit(s, run, reads, writes);
  p.wait();

  std::size_t wrong = 0;
  y.read<float>([&](std::span<const float> ys) {
    for (std::size_t i = 0; i < ys.size(); ++i)
      if (ys[i] != a * float(i % 100) + 1.0f) ++wrong;
  });
  std::printf("saxpy on %s: %u floats at value %llu, %zu wrong\n", std::string(cpu.name()).c_str(), n,
              static_cast<unsigned long long>(p.value()), wrong);
  return wrong == 0 ? 0 : 1;
}
