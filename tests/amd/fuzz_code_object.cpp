// Fuzz target of the code-object reader: any bytes must give a code object or an error,
// never a crash or a read outside the input; a code object read must also place.
//
// With clang this is a libFuzzer target. Built with RIG_FUZZ_REPLAYER (g++, where libFuzzer
// is not available) it replays the files and folders given as arguments and, with
// --mutations=N, N deterministic mutations of each, so the test suite runs it anyway.
#include <cstddef>
#include <cstdint>
#include <span>

#include "code_object.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  auto object = rig::amd::read_code_object(bytes);
  if (!object) return 0;
  if (object->image_bytes <= (std::uint64_t(64) << 20)) {
    auto image = rig::amd::place(*object, bytes, 0x7f0000000000);
    if (image && image->size() != object->image_bytes) __builtin_trap();
  }
  for (const auto& k : object->kernels)
    if (k.name.empty() || k.symbol.empty()) __builtin_trap();
  return 0;
}

#if defined(RIG_FUZZ_REPLAYER)

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

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

// One mutation: flipped bits, a boundary value written somewhere, a truncation, or a byte
// of the ELF header or of the note (where the metadata lies) changed.
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
      std::uint64_t v = kValues[random.below(std::size(kValues))];
      std::size_t width = std::size_t{1} << random.below(4), at = random.below(b.size());
      for (std::size_t i = 0; i < width && at + i < b.size(); ++i) b[at + i] = std::uint8_t(v >> (8 * i));
      break;
    }
    case 2:
      b.resize(random.below(b.size()));
      break;
    case 3:
      b[random.below(std::min<std::size_t>(b.size(), 64))] = std::uint8_t(random.next());
      break;
    default:  // the metadata note sits in the first pages of the file
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
    std::string_view a = argv[i];
    if (a.starts_with("--mutations=")) mutations = std::stoul(std::string(a.substr(12)));
    else if (std::filesystem::is_directory(a)) {
      for (auto& e : std::filesystem::directory_iterator(a))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else inputs.emplace_back(a);
  }
  if (inputs.empty()) {
    fmt::print(stderr, "usage: {} [--mutations=N] file-or-folder...\n", argv[0]);
    return 2;
  }
  std::size_t runs = 0;
  for (auto& path : inputs) {
    auto input = read_file(path);
    LLVMFuzzerTestOneInput(input.data(), input.size()), ++runs;
    Random random{0x2545f4914f6cdd1dull ^ input.size()};
    for (std::size_t i = 0; i < mutations; ++i) {
      auto m = mutate(input, random);
      LLVMFuzzerTestOneInput(m.data(), m.size()), ++runs;
    }
  }
  fmt::print("replayed {} inputs from {} files\n", runs, inputs.size());
  return 0;
}

#endif
