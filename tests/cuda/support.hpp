// What the CUDA tests share: the library under test (the fake libcuda in CI, the real one on
// a GPU machine), the kernels' image, and small helpers over rig's public API.
//
// RIG_LIBCUDA names the library (meson sets it to the fake's path). On a GPU machine,
// RIG_CUDA_TEST_CUBIN names a cubin of kernels.cu that nvcc built; otherwise the image is
// the committed sm_90 fatbin of kernels.cu (kernels/, scripts/nv-kernels), whose PTX the
// fake runs on its interpreter.
#pragma once

#include <rig/cuda_abi.hpp>
#include <rig/rig.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <rig/cuda.hpp>
#include "fake_libcuda.h"

namespace rig::cuda::test {

// The fake's controls, when RIG_LIBCUDA is the fake; all null otherwise.
struct Fake {
  void (*fail)(const char*, unsigned long long, int, unsigned long long) = nullptr;
  void (*fault)(int, int) = nullptr;
  void (*set)(const char*, long long) = nullptr;
  long long (*count)(const char*) = nullptr;
  explicit operator bool() const { return fail != nullptr; }
};
// The controls of the library at `path` (RIG_LIBCUDA when empty), which this loads.
Fake fake(const std::string& path = "");

// The image of the tests' kernels: the cubin at RIG_CUDA_TEST_CUBIN, or the committed fatbin.
std::vector<std::byte> kernels_image();
// A file of kernels/: kernels.cu as nvcc built it ("kernels.sm_90.cubin", ".ptx", ".fatbin").
std::vector<std::byte> committed(std::string_view file);
// An image CUDA's JIT rejects: PTX with a syntax error.
std::vector<std::byte> bad_ptx();
// The host device's image of host_kernels.c.
std::span<const std::byte> host_kernels();

// CUDA:<ordinal>, opened (std::runtime_error if it cannot).
Device open_gpu(int ordinal = 0);
// The number of GPUs, 0 when libcuda is absent.
int gpus();
// A function of the tests' kernels on d.
Function kernel(const Device& d, std::string_view name);

// Copies host bytes into any memory of d, and back, through d's copy engine.
void upload(const Buffer& to, std::span<const std::uint32_t> from);
std::vector<std::uint32_t> download(const Buffer& from);

// A submission of one launch of `f` whose first reads + writes 8-byte parameters are the
// addresses of the run's buffers, in slot order, reading `params` bytes.
Submission one_launch(const Device& d, const Function& f, std::uint32_t params, int reads, int writes);

// Sets the run's geometry for n elements of add_u32 or copy_u32 (256 threads a group).
void elements(Run& run, const Submission::Block& b, std::uint64_t n);

// The record d declares.
const cuda_abi::Record& record(const Device& d);

// Sets an environment variable for the scope of the object.
class Env {
 public:
  Env(const char* name, const std::string& value);
  ~Env();
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};


}  // namespace rig::cuda::test
