// Floors the benches measure beside rig, in the same run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rig/host_kernel.h>

#include "bench.hpp"

namespace rig::bench {

// A round trip between two threads through one atomic word each way, spinning.
Spread spin_ping_pong(int repeats, std::uint64_t n);
// The same round trip, the other thread calling `kernel` `calls` times (one group of one
// thread, no parameters) before it answers: a launch's hand-over to a worker and back,
// with nothing of rig's between.
Spread spin_hand_off(int repeats, std::uint64_t n, rig_host_kernel* kernel, int calls);
// OpenCL (the first platform's CPU device, PoCL on Debian): enqueue of an empty kernel and
// clFinish. nullopt with the reason in `why` where no OpenCL CPU device is available.
std::optional<Spread> opencl_empty_kernel(int repeats, std::uint64_t n, std::string& why);
// An empty OpenMP parallel region over `threads` threads.
Spread openmp_empty_region(int repeats, std::uint64_t n, int threads);

// The transports the remote benches' floors run over: UCX_TLS where it is set (the client's
// environment, which the agent should share), else "tcp". rig's endpoints use UCX's peer
// error mode, which UCX 1.13's shared-memory transports (posix, sysv: "ep_check" error
// handling only) do not give, so on one machine rig's messages travel over tcp; a floor over
// shared memory would measure another transport.
std::string remote_transports();

// UCX's own figure between two ucx_perftest processes on loopback (Debian's ucx-utils), with
// UCX_TLS set to remote_transports() and endpoints in peer error mode (-e), as rig's are: for
// "ucp_am_lat", an active message's round trip in ns (twice the one-way latency it prints,
// its overall average, as rig's figure is an average); for a "_bw" test ("ucp_am_bw"),
// the bandwidth of `bytes`-byte messages in GB/s. nullopt with the reason in `why` where
// ucx_perftest is missing or prints no figure.
std::optional<double> ucx_perftest(const std::string& test, std::uint64_t bytes, std::uint64_t iterations,
                                   std::string& why);

// A ucx_perftest floor taken in turn with rig's own runs: run() once after each of rig's, so
// that both figures see the same minutes of a shared machine, where the floor moves from one
// second to the next as much as rig's figures do. After a run that fails, it runs no more.
class UcxFloorInTurn {
 public:
  UcxFloorInTurn(std::string test, std::uint64_t bytes, std::uint64_t iterations)
      : test_(std::move(test)), bytes_(bytes), iterations_(iterations) {}
  void run();
  // The median of the runs, or no Spread once one failed.
  Spread spread() const;
  // "ucx_perftest TEST WHAT, loopback, UCX_TLS=..., measured in turn with rig's", or
  // "ucx_perftest unavailable: why".
  std::string name(std::string_view what) const;

 private:
  std::string test_;
  std::uint64_t bytes_, iterations_;
  std::vector<double> runs_;
  std::string why_;
};

}  // namespace rig::bench
