// Fuzz target of the ELF loader: any bytes must give an image or an error, never a crash
// or an access outside the input or the image.
//
// With clang this is a libFuzzer target. Built with RIG_FUZZ_REPLAYER it is a corpus
// replayer instead: it runs the entry point over the files (and folders of files) given as
// arguments and, with --mutations=N, over N deterministic mutations of each.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "elf_loader.hpp"

namespace {

// Every undefined symbol resolves, so that relocations get applied too; nothing is called.
alignas(16) char g_anything[64];

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  auto image = rig::host::ElfImage::load(bytes, [](std::string_view) -> void* { return g_anything; });
  if (image) {
    for (const auto& name : (*image)->functions()) {
      if ((*image)->symbol(name) == nullptr) __builtin_trap();
    }
  }
  return 0;
}

#if defined(RIG_FUZZ_REPLAYER)

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace {

std::vector<std::uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// xorshift64: the same mutations on every run.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  }
  std::size_t below(std::size_t bound) { return bound == 0 ? 0 : next() % bound; }
};

// One mutation: bit flips, an interesting value written somewhere, or a truncation.
std::vector<std::uint8_t> mutate(const std::vector<std::uint8_t>& input, Random& random) {
  std::vector<std::uint8_t> bytes = input;
  if (bytes.empty()) return bytes;
  switch (random.below(4)) {
    case 0: {
      const std::size_t flips = 1 + random.below(8);
      for (std::size_t i = 0; i < flips; ++i) bytes[random.below(bytes.size())] ^= 1u << random.below(8);
      break;
    }
    case 1: {
      static constexpr std::uint64_t kValues[] = {0, 1, 0x7f, 0x80, 0xff, 0xffff, 0x7fffffff,
                                                   0xffffffff, 0x8000000000000000ull, ~0ull};
      const std::uint64_t value = kValues[random.below(std::size(kValues))];
      const std::size_t width = std::size_t{1} << random.below(4);
      const std::size_t at = random.below(bytes.size());
      for (std::size_t i = 0; i < width && at + i < bytes.size(); ++i) bytes[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
      break;
    }
    case 2:
      bytes.resize(random.below(bytes.size()));
      break;
    default: {
      // The ELF header: where one change alters how all the rest is read.
      const std::size_t header = std::min<std::size_t>(bytes.size(), 64);
      bytes[random.below(header)] = static_cast<std::uint8_t>(random.next());
      break;
    }
  }
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mutations = 0;
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string_view argument = argv[i];
    if (argument.starts_with("--mutations=")) {
      mutations = std::stoul(std::string(argument.substr(12)));
    } else if (std::filesystem::is_directory(argument)) {
      for (const auto& entry : std::filesystem::directory_iterator(argument)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else {
      inputs.emplace_back(argument);
    }
  }
  if (inputs.empty()) {
    fmt::print(stderr, "usage: {} [--mutations=N] file-or-folder...\n", argv[0]);
    return 2;
  }
  std::size_t runs = 0;
  for (const auto& path : inputs) {
    const auto input = read_file(path);
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++runs;
    Random random{0x2545f4914f6cdd1dull ^ input.size()};
    for (std::size_t i = 0; i < mutations; ++i) {
      const auto mutant = mutate(input, random);
      LLVMFuzzerTestOneInput(mutant.data(), mutant.size());
      ++runs;
    }
  }
  fmt::print("replayed {} inputs from {} files\n", runs, inputs.size());
  return 0;
}

#endif
