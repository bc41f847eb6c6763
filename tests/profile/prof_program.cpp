// prof_program — a small program for the tests of `rig prof`: on the host device, 10
// launches of prof_short (2 groups of 50 µs) and 3 of prof_long (2 groups of 2 ms), each
// waited for, and a copy on a memory device; then it exits with the status its first
// argument gives (0 by default). Run under RIG_PROFILE, its rig writes the trace at exit.
#include <rig/rig.hpp>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "work.hpp"

int main(int argc, char** argv) {
  const int status = argc > 1 ? std::atoi(argv[1]) : 0;
  rig::test::Spinner small("prof_short"), large("prof_long");
  for (int i = 0; i < 10; ++i) small.launch(50'000, 2).wait();
  for (int i = 0; i < 3; ++i) large.launch(2'000'000, 2).wait();
  rig::Device memory = rig::memory_device("PROF-MEM");
  rig::Buffer a = rig::Buffer::create(memory, 1 << 20), b = rig::Buffer::create(memory, 1 << 20);
  a.fill(std::byte{7});
  rig::Buffer::copy(a, b);
  const bool ok = small.ran() == 20 && large.ran() == 6;
  std::printf("prof_program: %u + %u groups ran\n", small.ran(), large.ran());
  return ok ? status : 1;
}
