#pragma once
// Loader of relocatable ELF objects (ET_REL) into this process: the host device's kernels
// are C compiled to .o at build time, then laid out, relocated and mapped here.

#include <cstddef>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace rig::host {

// A relocatable object laid out in this process's memory, its code executable.
class ElfImage {
 public:
  // Resolves a symbol the object leaves undefined: its address, or nullptr if unknown.
  using Resolver = std::function<void*(std::string_view name)>;

  // Loads `object`, an ELF relocatable object (ET_REL) for this machine: lays out its
  // allocated sections (SHF_ALLOC: code, read-only data, data, bss, COMMON symbols),
  // applies its relocations, resolves undefined symbols first against the object's own
  // global symbols, then with `resolve` (default: dlsym in the process; a given resolver
  // replaces dlsym), and maps the code W^X (text read+exec, rodata and the GOT read-only,
  // data read-write). Error: a message naming the object's problem: "not an ELF file",
  // "ELF for aarch64, this machine is x86_64", "truncated: section 5 runs past the end of
  // the file", "unsupported relocation R_X86_64_COPY in .text", "undefined symbol foo",
  // "not a relocatable object (ET_DYN)", "constructors are not supported (section
  // .init_array)", "thread-local storage is not supported (section .tbss)"...
  static std::expected<std::unique_ptr<ElfImage>, std::string>
  load(std::span<const std::byte> object, Resolver resolve = {});

  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;
  ~ElfImage();  // unmaps

  // The address of the object's defined global (or weak) symbol `name` (function or data),
  // or nullptr.
  void* symbol(std::string_view name) const;
  // Size in bytes of that symbol as st_size records it, or 0.
  std::size_t symbol_size(std::string_view name) const;
  // Names of its defined global (or weak) function symbols (STT_FUNC), in symbol-table order.
  std::span<const std::string> functions() const;
  // Bytes of memory the image occupies (whole pages).
  std::size_t mapped_bytes() const;

 private:
  struct Exported {
    void* address;
    std::size_t size;
  };
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const noexcept {
      return std::hash<std::string_view>{}(name);
    }
  };

  ElfImage() = default;

  void* base_ = nullptr;
  std::size_t mapped_bytes_ = 0;
  std::unordered_map<std::string, Exported, NameHash, std::equal_to<>> symbols_;
  std::vector<std::string> functions_;
};

}  // namespace rig::host
