// The NVIDIA driver's hand-over (device.hpp). The channels are made and scheduled when the
// device opens, but the work they run (push buffers, semaphores, launches) is not built yet:
// room refuses every part, naming it, so that nothing claims to run.
#include "device.hpp"

namespace rig::nv::driver {

int Device::room(void* edge, rig_part* parts, std::uint32_t count, std::uint32_t, char* why) {
  Device& d = self(edge);
  if (count == 0) return RIG_FITS;
  const rig_part& p = parts[0];
  const char* queue = p.queue == 0 ? "COPY:0" : p.queue == 1 ? "COMPUTE:0" : "no queue";
  return rig_never(why, "part 0: work on %s of %s is not built yet: the driver opens the GPU, its channels and its "
                   "memory, but runs no submissions", queue, d.name_.c_str());
}

int Device::submit(void* edge, rig_part*, std::uint32_t, const rig_wait*, std::uint32_t, std::uint64_t, std::uint64_t*,
                   const char** failure) {
  (void)edge;
  *failure = "the NVIDIA driver runs no submissions yet (room refuses every part)";
  return RIG_FAILED;
}

}  // namespace rig::nv::driver
