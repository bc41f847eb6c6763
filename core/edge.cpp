// The parts of the driver contract that rig defines: the timeline words, the host clock,
// code sync, room's reasons, and the defaults of edge::Driver.
#include <rig/edge.hpp>

#include <fmt/format.h>

#include <cstdarg>
#include <cstdio>
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

int rig_never(char* why, const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::vsnprintf(why, RIG_WHY, format, args);
  va_end(args);
  return RIG_NEVER;
}
}

namespace rig::edge {

Figure bytes_figure(std::uint64_t n) noexcept {
  static constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  Figure f;
  int unit = -1;
  std::uint64_t shown = n;
  while (unit < 5 && shown >= 1024 && shown % 1024 == 0) shown /= 1024, ++unit;
  if (unit >= 0) {
    std::snprintf(f.text, sizeof f.text, "%llu %s", (unsigned long long)shown, units[unit]);
  } else {
    std::snprintf(f.text, sizeof f.text, "%llu byte%s", (unsigned long long)n, n == 1 ? "" : "s");
  }
  return f;
}

Figure count_figure(std::uint64_t n) noexcept {
  Figure f;
  if (n >= 1024 && (n & (n - 1)) == 0) {
    std::snprintf(f.text, sizeof f.text, "2^%d", __builtin_ctzll(n));
  } else if (n >= 1023 && (n & (n + 1)) == 0) {
    std::snprintf(f.text, sizeof f.text, "2^%d-1", n == ~std::uint64_t(0) ? 64 : __builtin_ctzll(n + 1));
  } else {
    std::snprintf(f.text, sizeof f.text, "%llu", (unsigned long long)n);
  }
  return f;
}

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
