// conformance_targets.cpp — the CUDA driver's target of the conformance suite
// (docs/conformance.md): the driver of cuda/ on the fake libcuda of tests/sim/cuda, whose
// streams run on host threads, loaded by its path whatever RIG_LIBCUDA names.
#include <dlfcn.h>

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "conformance.hpp"
#include <rig/cuda.hpp>
#include "fake_libcuda.h"
#include "fake_libcuda_path.h"

namespace {

using namespace rig;
namespace conformance = rig::conformance;

// The image: a module in the fake's text format with one function, of no parameters.
constexpr std::string_view kImage = "fake-cubin\nconf_nothing\n";

// What a launch of it runs: nothing, as tests/conformance/kernels.c's does on the host.
int nothing(const fakecuda_launch*) { return 0; }

conformance::Target fake_target() {
  // The driver loads the same library by the same path, so this defines its function.
  void* fake = dlopen(RIG_FAKE_LIBCUDA_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!fake) throw std::runtime_error(fmt::format("cannot load the fake libcuda: {}", dlerror()));
  auto define = reinterpret_cast<decltype(&fakecuda_define)>(dlsym(fake, "fakecuda_define"));
  if (!define) throw std::runtime_error(fmt::format("{} is not the fake libcuda", RIG_FAKE_LIBCUDA_PATH));
  define("conf_nothing", nothing);

  conformance::Target t = conformance::driver_target(
      "CUDA-FAKE:0", [] { return rig::cuda::opener(0, RIG_FAKE_LIBCUDA_PATH); },
      1,  // CUDA runs what is enqueued: submit always commits (rig/cuda.hpp)
      "the CUDA driver on the fake libcuda of tests/sim/cuda (its streams on host threads), GPU 0");
  t.image.resize(kImage.size());
  std::memcpy(t.image.data(), kImage.data(), kImage.size());
  t.function = "conf_nothing";
  return t;
}

conformance::Registration cuda_targets{"cuda", [] {
  std::vector<conformance::Target> out;
  out.push_back(fake_target());
  return out;
}};

}  // namespace
