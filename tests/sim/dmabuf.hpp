// dmabuf.hpp — the dma-bufs the simulated kernel drivers (tests/sim/amd, tests/sim/nv) hand
// out. A simulated device's memory is a memfd the simulator owns; the dma-buf a simulated
// driver exports of it is a new descriptor of that memfd, so a test that maps it, or hands it
// to whatever imports it, sees the very pages the device's work reads and writes, and the
// pages stay while the descriptor does. Where a real dma-buf differs (it may refuse mmap, as
// the NVIDIA module does for a GPU's video memory; it is no memfd), each simulator says so.
#pragma once

#include <cerrno>

#include <fcntl.h>

namespace rig::sim {

// A new descriptor of `memfd`'s pages, close-on-exec where `cloexec`; -errno where the
// process may open no more descriptors.
inline int dmabuf_of_memfd(int memfd, bool cloexec) {
  const int fd = ::fcntl(memfd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
  return fd < 0 ? -errno : fd;
}

}  // namespace rig::sim
