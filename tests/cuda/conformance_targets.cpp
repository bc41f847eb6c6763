// conformance_targets.cpp — the CUDA driver's target of the conformance suite
// (docs/conformance.md): the driver of cuda/ on the fake libcuda of tests/sim/cuda, whose
// streams run on host threads, loaded by its path whatever RIG_LIBCUDA names, running
// kernels.cu as nvcc compiled it.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "conformance.hpp"
#include <rig/cuda.hpp>
#include "fake_libcuda_path.h"

namespace {

using namespace rig;
namespace conformance = rig::conformance;

// The image: kernels.cu as nvcc built it (the committed sm_90 fatbin, whose PTX the fake
// runs); the suite launches its function of no parameters, `empty`.
std::vector<std::byte> fatbin() { return conformance::file_bytes(RIG_CUDA_KERNELS "/kernels.sm_90.fatbin"); }

conformance::Target fake_target() {
  conformance::Target t = conformance::driver_target(
      "CUDA-FAKE:0", [] { return rig::cuda::opener(0, RIG_FAKE_LIBCUDA_PATH); },
      1,  // CUDA runs what is enqueued: submit always commits (rig/cuda.hpp)
      "the CUDA driver on the fake libcuda of tests/sim/cuda (its streams on host threads), GPU 0");
  t.image = fatbin();
  t.function = "empty";
  return t;
}

conformance::Registration cuda_targets{"cuda", [] {
  std::vector<conformance::Target> out;
  out.push_back(fake_target());
  return out;
}};

}  // namespace
