// The conformance targets of this machine's GPUs, for `rig conform`: each AMD GPU through
// KFD ("AMD:N"; with RIG_SIM=amd the simulated gfx1100, which every device the laws open
// shares) and each CUDA GPU through libcuda ("CUDA:N"), as machine.hpp finds them. They carry
// no image, so the laws of images skip on them; the suite's own programs add the simulators'
// targets.
#include <fmt/format.h>

#include "conformance.hpp"
#include "machine.hpp"

namespace rig::tool {
namespace {

conformance::Registration machine_targets{"machine", [] {
  std::vector<conformance::Target> out;
  for (auto& gpu : gpu_openers([](const std::string&) {}))
    out.push_back(conformance::driver_target(gpu.name, gpu.make, gpu.commit_bound, gpu.about));
  return out;
}};

}  // namespace
}  // namespace rig::tool
