// The parts of the driver contract that rig defines: the timeline words, the host clock,
// code sync, and the defaults of edge::Driver.
#include <rig/edge.hpp>

#include <fmt/format.h>

#include <thread>
#include <time.h>

extern "C" {

alignas(64) volatile std::uint64_t rig_words[RIG_WORDS];

std::uint64_t rig_now_ns(void) {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return std::uint64_t(t.tv_sec) * 1'000'000'000u + std::uint64_t(t.tv_nsec);
}

void rig_code_sync(void* addr, std::size_t n) {
  auto* p = static_cast<char*>(addr);
  __builtin___clear_cache(p, p + n);
}
}

namespace rig::edge {

Mapping Driver::map_host(std::uintptr_t, std::size_t) { return Never{}; }
Mapping Driver::map_peer(const Location&, std::size_t) { return Never{}; }

GrowAnswer Driver::grow() { throw Fault("the driver answered RIG_GROW but cannot grow its queues"); }

std::uint64_t Driver::signaled() {
  throw Fault("the device has a word of its own but its driver does not read it (signaled)");
}

void Driver::sleep(std::uint64_t, std::chrono::nanoseconds) { std::this_thread::yield(); }

Result<Dma> Driver::dma(Region, std::string_view pci_function) {
  return std::unexpected(fmt::format("the driver describes no DMA for {}", pci_function));
}

}  // namespace rig::edge
