// Load time of the ELF loader: loads an object (default: the test kernel) 1000 times and
// prints the median time of one load. Not a test; run it by hand:
//   build/host/elf/bench_elf_load [object.o]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "elf_loader.hpp"

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : std::string(RIG_ELF_OBJECT_DIR) + "/kernels_o2.o";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "cannot open {}\n", path);
    return 1;
  }
  const std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto bytes = std::as_bytes(std::span(chars));

  constexpr int kLoads = 1000;
  std::vector<double> micros;
  micros.reserve(kLoads);
  for (int i = 0; i < kLoads; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto image = rig::host::ElfImage::load(bytes);
    const auto stop = std::chrono::steady_clock::now();
    if (!image) {
      fmt::print(stderr, "{}: {}\n", path, image.error());
      return 1;
    }
    image->reset();
    micros.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  std::sort(micros.begin(), micros.end());
  fmt::print("{}: {} bytes, median {:.1f} us per load (min {:.1f}, p90 {:.1f}) over {} loads\n",
             path, bytes.size(), micros[kLoads / 2], micros.front(), micros[kLoads * 9 / 10], kLoads);
  return 0;
}
