// A PTX interpreter: loads the PTX text nvcc emits for sm_80..sm_90 and runs its kernels
// over a grid on the calling thread, for rig's NVIDIA simulators.
//
// Loading parses and decodes every instruction once; anything the interpreter does not
// implement (an instruction, a modifier, a directive) is refused at load with its line and
// mnemonic, so a kernel that loads never meets an unknown at run time. Global, constant and
// generic memory belong to the embedder and are reached through a Memory callback; shared
// memory (per block), local memory and call parameters (per thread) belong to the
// interpreter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig::ptx {

// The state spaces of PTX variables the embedder sees.
enum class Space : std::uint8_t { global, constant, shared };

// A module-scope .global or .const variable: the embedder gives it an address (place) and
// copies `init` there (bytes not covered by `init` are zero). `size` is in bytes.
struct Variable {
  std::string name;
  Space space;
  std::uint64_t size;
  std::uint32_t align;
  std::vector<std::byte> init;
};

// One parameter of a kernel: where it lies in the parameter buffer a launch passes.
struct Param {
  std::string name;
  std::uint32_t offset;
  std::uint32_t size;
  std::uint32_t align;
};

// A run of embedder memory: `size` bytes at device address `base`, held at host `host`.
struct Mapping {
  std::uint64_t base;
  std::uint64_t size;
  std::byte* host;
};

// The embedder's memory: global, constant and generic addresses (outside the shared and
// local windows of the launch) are resolved here.
class Memory {
 public:
  virtual ~Memory() = default;
  // Returns the mapping holding [address, address + size), or nullopt when any of it is not
  // mapped (or not writable, for a write): the kernel then faults naming the address.
  virtual std::optional<Mapping> map(std::uint64_t address, std::uint64_t size, bool write) = 0;
};

struct Dim3 {
  std::uint32_t x = 1, y = 1, z = 1;
};

struct Launch {
  Dim3 grid;
  Dim3 block;
  std::uint32_t dynamic_shared = 0;       // bytes after the static .shared variables
  std::span<const std::byte> params;      // the kernel's parameter buffer (Module::params)
  // Generic addresses [window, window + 4 GiB) reach shared and local memory.
  std::uint64_t shared_window = 0x0100'0000'0000'0000ull;
  std::uint64_t local_window = 0x0200'0000'0000'0000ull;
  std::uint64_t max_instructions = 1ull << 36;  // a fault past this many, against hangs
};

struct Stats {
  std::uint64_t instructions = 0;  // executed (guarded-off ones count too)
};

class Module {
 public:
  // Parses and decodes PTX text. Returns the module, or an error naming `name`, the line
  // and what was refused (a syntax error, an unknown instruction, modifier or directive, an
  // undeclared register, label or symbol, a call to a function without a body, recursion).
  static std::expected<Module, std::string> load(std::string_view text, std::string_view name = "ptx");

  // The names of the .entry functions, in the order of the text.
  std::vector<std::string> kernels() const;
  // The module-scope .global and .const variables, in the order of the text.
  std::span<const Variable> variables() const;
  // The parameters of `kernel` and the size of its parameter buffer; nullopt for no such kernel.
  std::optional<std::vector<Param>> params(std::string_view kernel) const;
  std::optional<std::uint32_t> params_size(std::string_view kernel) const;
  // Bytes of static .shared memory a block of `kernel` uses (dynamic shared comes after).
  std::optional<std::uint32_t> shared_size(std::string_view kernel) const;

  // Gives variable `name` the device address `address` (the embedder has put its initial
  // bytes there). Throws std::invalid_argument if there is no such .global/.const variable.
  void place(std::string_view name, std::uint64_t address);

  // Runs `kernel` over the grid, one block after another, on the calling thread. Returns
  // the counts, or an error: no such kernel, a parameter buffer shorter than the kernel's,
  // an unplaced variable it may use, an empty grid or block, more than 1024 threads a block,
  // more shared or local memory than sm_90 has (227 KiB a block, 512 KiB a thread); or a fault, naming the
  // kernel, the block and thread, the instruction (line and text) and, for a memory
  // fault, the address and space (unmapped, misaligned or outside shared/local memory), a
  // deadlock at a barrier or warp operation, trap, or running past max_instructions.
  std::expected<Stats, std::string> run(std::string_view kernel, const Launch& launch, Memory& memory) const;

  struct Impl;

 private:
  explicit Module(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace rig::ptx
