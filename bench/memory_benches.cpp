// `rig bench copy` and `rig bench alloc`: copies of 256 MiB and the allocation cache, each
// beside memcpy or malloc/free measured in the same run; on the devices they are given, or
// on host memory, a memory device and a fake device of their own.
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "../tests/support/fake_driver.hpp"
#include "bench.hpp"
#include "floors.hpp"

namespace rig::bench {
namespace {

constexpr std::size_t kCopyBytes = std::size_t(256) << 20;

// Bytes per second of `copy` over `bytes`, as a Spread of GB/s (median of repeats).
Spread gbps(int repeats, const std::function<void()>& copy, std::size_t bytes = kCopyBytes) {
  Spread ns = measure(repeats, 1, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) copy();
  });
  auto rate = [bytes](double t) { return double(bytes) / t; };  // bytes per ns = GB/s
  return {rate(ns.median), rate(ns.max), rate(ns.min)};
}

void touch(Buffer& b) { b.fill(std::byte{1}); }

// Copies between host memory and the memory of `d`, each way: 256 MiB, or the largest
// power of two within a quarter of its budget where that is less (a simulator's memory).
std::vector<Figure> copy_with(const Device& d, int repeats) {
  std::size_t bytes = kCopyBytes;
  while (bytes > 4096 && bytes > d.budget() / 4) bytes /= 2;
  Buffer a = Buffer::create(host(), bytes), b = Buffer::create(host(), bytes);
  touch(a);
  touch(b);
  Buffer v = Buffer::create(d, bytes);
  Buffer::copy(a, v);
  if (d.name().find('@') != std::string::npos) {
    // A remote device: beside UCX's own bandwidth for messages of the same size between two
    // processes that both progress, as the agent and the client do. Not ucx_perftest's
    // ucp_put_bw: over tcp, which has no RDMA, a put lands only when the target progresses,
    // and that test's target does not (here it gave 56 MB/s for 1 MiB puts, a wait for the
    // target's keepalive, not the wire's rate). The floor sends from shared memory, as these
    // copies send written memory (bandwidth_transports()). Also from the device's Pinned
    // memory (this process's memory, mapped on the agent), which the copy does not stage
    // through host memory of rig's own. Each repeat copies once each way and runs the floor once, so that
    // rig's figures and the floor's are taken in turn: on a shared machine the floor moves
    // from one second to the next as much as rig's figures do (each is the median of its runs).
    Buffer pinned = Buffer::create(d, bytes, Memory::Pinned);
    touch(pinned);
    const std::function<void()> copies[] = {[&] { Buffer::copy(a, v); }, [&] { Buffer::copy(v, b); },
                                            [&] { Buffer::copy(pinned, v); }, [&] { Buffer::copy(v, pinned); }};
    for (const auto& copy : copies) copy();  // warm up
    std::vector<double> runs[4];
    UcxFloorInTurn floor("ucp_am_bw", bytes, 8);
    for (int r = 0; r < repeats; ++r) {
      for (int c = 0; c < 4; ++c) {
        const auto t0 = std::chrono::steady_clock::now();
        copies[c]();
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
        runs[c].push_back(double(bytes) / double(ns.count()));  // bytes per ns = GB/s
      }
      floor.run();
    }
    const Spread ucx = floor.spread();
    const std::string name = floor.name("");
    const std::string size = fmt::format("{} MiB", double(bytes) / double(1 << 20));
    std::vector<Figure> out{
        make_figure(on("copy-host-device", d), spread_of(runs[0]), "GB/s", ucx, name,
                    fmt::format("Buffer::copy of {} from host memory to {}'s memory", size, d.name())),
        make_figure(on("copy-device-host", d), spread_of(runs[1]), "GB/s", ucx, name,
                    fmt::format("Buffer::copy of {} from {}'s memory to host memory", size, d.name())),
        make_figure(on("copy-pinned-device", d), spread_of(runs[2]), "GB/s", ucx, name,
                    fmt::format("Buffer::copy of {} from {}'s Pinned memory to its memory", size, d.name())),
        make_figure(on("copy-device-pinned", d), spread_of(runs[3]), "GB/s", ucx, name,
                    fmt::format("Buffer::copy of {} from {}'s memory to its Pinned memory", size, d.name()))};
    for (auto& f : out) f.ratio = f.floor > 0 ? f.value / f.floor : 0;  // a fraction of UCX's rate
    return out;
  }
  auto* pa = reinterpret_cast<void*>(*a.host_address());
  auto* pb = reinterpret_cast<void*>(*b.host_address());
  Spread floor = gbps(repeats, [&] { std::memcpy(pb, pa, bytes); }, bytes);
  Spread to = gbps(repeats, [&] { Buffer::copy(a, v); }, bytes);
  Spread from = gbps(repeats, [&] { Buffer::copy(v, b); }, bytes);
  const std::string size = fmt::format("{} MiB", double(bytes) / double(1 << 20));
  const std::string memory = fmt::format("{}'s memory ({})", d.name(),
                                         d.facts().host_addresses ? "the host addresses it"
                                                                  : "the host does not address it");
  std::vector<Figure> out;
  out.push_back(make_figure(on("copy-host-device", d), to, "GB/s", floor, "memcpy of the same bytes",
                            fmt::format("Buffer::copy of {} from host memory to {}", size, memory)));
  out.push_back(make_figure(on("copy-device-host", d), from, "GB/s", floor, "memcpy of the same bytes",
                            fmt::format("Buffer::copy of {} from {} to host memory", size, memory)));
  return out;
}

}  // namespace

std::optional<std::string> refuses_memory(const Device& d) {
  if (!d.computes())
    return fmt::format("{} is an io device: its memory is files (Buffer::of_io), which rig does not allocate",
                       d.name());
  return std::nullopt;
}

std::vector<Figure> copy(const Options& o) {
  std::vector<Figure> out;
  int repeats = std::max(3, o.repeats / 2);
  if (o.device) return copy_with(*o.device, repeats);
  Buffer a = Buffer::create(host(), kCopyBytes), b = Buffer::create(host(), kCopyBytes);
  touch(a);
  touch(b);
  auto* pa = reinterpret_cast<void*>(*a.host_address());
  auto* pb = reinterpret_cast<void*>(*b.host_address());
  Spread floor = gbps(repeats, [&] { std::memcpy(pb, pa, kCopyBytes); });
  Spread rig = gbps(repeats, [&] { Buffer::copy(a, b); });
  out.push_back(make_figure("copy-host-host", rig, "GB/s", floor, "memcpy of the same bytes",
                            "Buffer::copy of 256 MiB between host buffers (the host copies)"));

  Device m = memory_device("BENCH-MEM");
  Buffer mb = Buffer::create(m, kCopyBytes);
  touch(mb);
  Spread from_memory = gbps(repeats, [&] { Buffer::copy(mb, b); });
  out.push_back(make_figure("copy-memory-host", from_memory, "GB/s", floor, "memcpy of the same bytes",
                            "memory device -> host, 256 MiB (both host-addressed: the host copies)"));
  m.close();

  // A device whose memory the host does not address: the copy passes through staging.
  fake::Options options;
  options.host_addresses = false;
  options.budget = std::size_t(1) << 30;
  auto [opener, control] = fake::opener("BENCH-VRAM", options);
  Device v = *rig::open(opener);
  Buffer vb = Buffer::create(v, kCopyBytes);
  Buffer::copy(a, vb);
  Spread staged = gbps(repeats, [&] { Buffer::copy(vb, b); });
  out.push_back(make_figure("copy-staged-host", staged, "GB/s", floor, "memcpy of the same bytes",
                            "fake device (memory the host does not address) -> host through staging, 256 MiB"));
  v.close();
  for (auto& f : out) f.ratio = f.floor > 0 ? f.value / f.floor : 0;  // a fraction of memcpy's rate
  return out;
}

std::vector<Figure> alloc(const Options& o) {
  const std::size_t n = 64 << 10;
  const std::uint64_t count = 200000;
  const Device d = o.device.value_or(host());
  Spread rig = measure(o.repeats, count, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      Buffer b = Buffer::create(d, n);
      asm volatile("" ::"r"(&b) : "memory");
    }
  });
  Spread floor = measure(o.repeats, count, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      void* p = std::malloc(n);
      asm volatile("" ::"r"(p) : "memory");
      std::free(p);
    }
  });
  return {make_figure(d == host() ? "alloc" : on("alloc", d), rig, "ns", floor, "malloc + free of 64 KiB",
                      fmt::format("a 64 KiB buffer on {} created and dropped (served by the cache)",
                                  d == host() ? std::string("the host device") : std::string(d.name())))};
}

}  // namespace rig::bench
