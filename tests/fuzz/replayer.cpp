// The replayer of a fuzz target, for compilers without libFuzzer (g++): linked with a
// source that defines LLVMFuzzerTestOneInput, it runs the entry point over the files (and
// folders of files) given as arguments and, with --mutations=N, over N deterministic
// mutations of each, so that the test suite exercises every target on every build.
// scripts/fuzz runs the same targets under libFuzzer with clang.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// splitmix64: the same mutations on every run.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n ? next() % n : 0; }
};

// One mutation: flipped bits, a boundary value written somewhere, a truncation, a byte of
// the ELF header (where one change alters how the rest is read), or a byte of the first
// pages (where section headers, notes and tables of small objects lie).
std::vector<std::uint8_t> mutate(const std::vector<std::uint8_t>& input, Random& random) {
  std::vector<std::uint8_t> b = input;
  if (b.empty()) return b;
  switch (random.below(5)) {
    case 0:
      for (std::size_t i = 0, n = 1 + random.below(8); i < n; ++i) b[random.below(b.size())] ^= 1u << random.below(8);
      break;
    case 1: {
      static constexpr std::uint64_t kValues[] = {0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff, 0xffffffff,
                                                   0x8000000000000000ull, ~0ull};
      const std::uint64_t v = kValues[random.below(std::size(kValues))];
      const std::size_t width = std::size_t{1} << random.below(4), at = random.below(b.size());
      for (std::size_t i = 0; i < width && at + i < b.size(); ++i) b[at + i] = std::uint8_t(v >> (8 * i));
      break;
    }
    case 2:
      b.resize(random.below(b.size()));
      break;
    case 3:
      b[random.below(std::min<std::size_t>(b.size(), 64))] = std::uint8_t(random.next());
      break;
    default:
      b[(0x200 + random.below(0x1000)) % b.size()] = std::uint8_t(random.next());
      break;
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mutations = 0;
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a.starts_with("--mutations=")) {
      mutations = std::stoul(std::string(a.substr(12)));
    } else if (std::filesystem::is_directory(a)) {
      for (const auto& e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else {
      inputs.emplace_back(a);
    }
  }
  if (inputs.empty()) {
    fmt::print(stderr, "usage: {} [--mutations=N] file-or-folder...\n", argv[0]);
    return 2;
  }
  std::sort(inputs.begin(), inputs.end());  // the same order, so the same run, everywhere
  std::size_t runs = 0;
  for (const auto& path : inputs) {
    const auto input = read_file(path);
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++runs;
    Random random{0x2545f4914f6cdd1dull ^ input.size()};
    for (std::size_t i = 0; i < mutations; ++i) {
      const auto m = mutate(input, random);
      LLVMFuzzerTestOneInput(m.data(), m.size());
      ++runs;
    }
  }
  fmt::print("replayed {} inputs from {} files\n", runs, inputs.size());
  return 0;
}
