// Fuzz target of the ELF loader: any bytes must give an image or an error, never a crash
// or an access outside the input or the image.
//
// A libFuzzer target (scripts/fuzz); linked with replayer.cpp it replays a corpus instead.
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
