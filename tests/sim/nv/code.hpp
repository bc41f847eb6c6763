// code.hpp — the kernels a simulated NVIDIA GPU can run: registered from the fatbins (or
// cubins and PTX) nvcc built, found at launch by the SASS bytes at the QMD's program address,
// and run on the PTX interpreter from the same build.
//
// The simulator cannot execute SASS; it runs the PTX of the same source. A launch is only
// accepted when the GPU memory at the QMD's program address holds exactly the .text.<fn>
// bytes of a registered cubin (the bits relocations fill are left out of the comparison), so
// a driver that copied the wrong section, or pointed the QMD elsewhere, is caught.
#pragma once

#include <ptx.hpp>

#include <cstddef>
#include <cstdint>
#include <expected>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rig::sim::nv {

// Where a module-scope PTX variable lives at run time, as the cubin tells a driver to put it.
struct Symbol {
  std::string name;  // the PTX variable's name
  enum class Kind : std::uint8_t {
    in_bank,       // its bytes are at `offset` in constant bank `bank` (__constant__ data)
    address_in_bank,  // its 64-bit GPU address is at `offset` in constant bank `bank`
                      // (R_CUDA_64 in .rela.nv.constantN: __device__ globals)
  } kind;
  std::uint32_t bank = 0;
  std::uint32_t offset = 0;
};

struct Kernel {
  std::string name;            // the .entry's (mangled) name
  unsigned sm = 0;             // the cubin's SM (90 for sm_90)
  std::size_t sass_size = 0;   // bytes of its .text.<fn>
  std::uint32_t param_offset = 0;  // where its parameters start in constant bank 0
  std::uint32_t param_size = 0;
  std::uint32_t static_shared = 0;  // .nv.shared.<fn>'s size, reserved block included
  std::uint32_t registers = 0;
  std::uint32_t max_threads = 0;    // 0 when the cubin gives none
  std::uint32_t local_bytes = 0;    // per thread, from the cubin's frame and stack sizes
  std::vector<Symbol> symbols;      // the module variables it may use, and where
};

// A module variable's GPU address for one launch (from the QMD's constant banks and Symbol).
struct Placement {
  std::string name;
  std::uint64_t address = 0;
};

// Kernels are registered (add, add_fatbin) before engines use the Code: find and run may be
// called from any engine thread at once, but not while an add runs.
class Code {
 public:
  Code();
  ~Code();
  Code(Code&&) noexcept;
  Code& operator=(Code&&) noexcept;

  // Registers every kernel of a fatbin as nvcc writes it: the ELF entry for `sm` and the
  // PTX entry (decompressed when compressed). Returns how many kernels were added, or an
  // error naming `name` and the reason (not a fatbin, no cubin for sm_<sm>, no PTX, a PTX the
  // interpreter refuses, a cubin kernel the PTX lacks).
  std::expected<std::size_t, std::string> add_fatbin(std::span<const std::byte> fatbin, unsigned sm,
                                                     std::string_view name = "fatbin");
  // The same for a cubin and the PTX text nvcc built from the same source.
  std::expected<std::size_t, std::string> add(std::span<const std::byte> cubin, std::string_view ptx,
                                              std::string_view name = "cubin");

  // The kernel whose SASS lies at `address` in `memory`, or an error naming the address
  // (nothing mapped there, or no registered kernel's bytes).
  std::expected<const Kernel*, std::string> find(std::uint64_t address, ptx::Memory& memory) const;

  // Runs `kernel` on the interpreter with its module's variables at `placements`.
  // Launches of kernels of one module are serialized. Errors are the interpreter's.
  std::expected<ptx::Stats, std::string> run(const Kernel& kernel, const ptx::Launch& launch,
                                             ptx::Memory& memory, std::span<const Placement> placements) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rig::sim::nv
