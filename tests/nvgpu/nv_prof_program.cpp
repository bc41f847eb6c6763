// nv_prof_program — a small program for the test of `rig prof` on rig's NVIDIA driver: on
// NV:0 of the NVIDIA simulator (the GPU RIG_SIM=nv gives the tool), 10 values of a 1 MiB copy
// between Mapped buffers, each waited for. Run under RIG_PROFILE, its rig writes the trace,
// with the values' device times, at exit.
#include <rig/nv.hpp>
#include <rig/rig.hpp>

#include <cstdio>
#include <vector>

#include <sim.hpp>

int main() {
  // rig keeps the device's driver, and with it the seam, until the process ends.
  auto* sim = new rig::sim::nv::Simulator;
  auto d = rig::open(rig::nv::opener(0, *sim));
  if (!d) {
    std::fprintf(stderr, "nv_prof_program: %s\n", d.error().c_str());
    return 1;
  }
  const std::size_t bytes = 1 << 20;
  rig::Buffer a = rig::Buffer::create(*d, bytes, rig::Memory::Mapped), b = rig::Buffer::create(*d, bytes, rig::Memory::Mapped);
  std::vector<rig::Submission::Part> parts{
      {"", {}, rig::Submission::Copy{{a, 0}, {b, 0}, {rig::Box::row(bytes)}, std::nullopt}}};
  auto s = rig::Submission::make(*d, parts, 0, 0);
  rig::Run run;
  for (int i = 0; i < 10; ++i) submit(s, run, {}, {}).wait();
  std::printf("nv_prof_program: 10 copies on %.*s\n", int(d->name().size()), d->name().data());
  return d->lost() ? 1 : 0;
}
