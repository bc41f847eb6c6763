// A copy and a launch across two devices: floats written on a memory device ("MEM:staging",
// host memory with a timeline of its own) are copied to the host device, where a kernel
// scales them. rig orders the launch after the copy through the buffers' stamps: the launch
// reads what the copy wrote, so it waits for the copy's point, on the other device's
// timeline. Every element is checked; the program exits non-zero on a mismatch.
//
// usage: two_devices KERNEL_OBJECT [N]
#include <rig/rig.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: two_devices KERNEL_OBJECT [N]\n");
    return 2;
  }
  const std::uint32_t n = argc > 2 ? std::uint32_t(std::strtoul(argv[2], nullptr, 10)) : 1u << 20;
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<char> object((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  std::printf("rig %s, drivers:", std::string(rig::version()).c_str());
  for (auto name : rig::drivers()) std::printf(" %s", std::string(name).c_str());
  std::printf("\n");

  rig::Device cpu = rig::host();
  rig::Device mem = rig::memory_device("MEM:staging");
  auto image = rig::Image::load(cpu, std::as_bytes(std::span(object)));
  if (!image) {
    std::fprintf(stderr, "two_devices: %s\n", image.error().c_str());
    return 1;
  }
  auto scale = image->resolve("scale");
  if (!scale) {
    std::fprintf(stderr, "two_devices: %s has no function scale\n", argv[1]);
    return 1;
  }

  rig::Buffer source = rig::Buffer::create(mem, n * sizeof(float));
  source.write<float>([](std::span<float> xs) {
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = float(i % 1000);
  });
  rig::Buffer input = rig::Buffer::create(cpu, n * sizeof(float));
  rig::Buffer output = rig::Buffer::create(cpu, n * sizeof(float));

  // The copy, from the memory device's buffer into the host device's.
  rig::Box all = rig::Box::row(n * sizeof(float));
  rig::Point copied = rig::Buffer::submit_copy(source, input, std::span(&all, 1));

  // The launch, which reads `input`: it starts once the copy's point is reached.
  using Ref = rig::Submission::Ref;
  rig::Submission::Part part{"", {}, rig::Submission::Launch{*scale, 24,
      {{0, Ref::What::Buffer, 0, std::nullopt}, {8, Ref::What::Buffer, 1, std::nullopt}}}};
  auto s = rig::Submission::make(cpu, std::span(&part, 1), 1, 1);
  rig::Run run;
  auto b = s.block(0);
  const std::uint32_t threads = 4096;
  run.groups(b, (n + threads - 1) / threads);
  run.threads(b, threads);
  run.set(b, 0, std::uint64_t(0));
  run.set(b, 8, std::uint64_t(0));
  run.set(b, 16, n);
  run.set(b, 20, 3.0f);
  rig::Buffer reads[] = {input}, writes[] = {output};
  rig::Point launched = rig::submit(s, run, reads, writes);
  launched.wait();

  std::size_t wrong = 0;
  output.read<float>([&](std::span<const float> ys) {
    for (std::size_t i = 0; i < ys.size(); ++i)
      if (ys[i] != 3.0f * float(i % 1000)) ++wrong;
  });
  std::printf("copy on %s (value %llu), then scale on %s (value %llu): %u floats, %zu wrong\n",
              std::string(copied.device().name()).c_str(), static_cast<unsigned long long>(copied.value()),
              std::string(cpu.name()).c_str(), static_cast<unsigned long long>(launched.value()), n, wrong);
  return wrong == 0 ? 0 : 1;
}
