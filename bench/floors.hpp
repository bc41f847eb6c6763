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

// The UCX_TLS of a bandwidth floor: remote_transports() with sysv added (unless it names it,
// a set that holds it, or is a negation). ucx_perftest's buffers come from ucp_mem_map, which
// allocates from sysv shared memory first by UCX's default (UCX_ALLOC_PRIO); with UCX_TLS=tcp
// alone no shared-memory transport is loaded, its buffers are anonymous pages instead, and
// the sender, which never writes its buffer, sends the zero page from the cache: a copy that
// reads no memory, where rig's copies read written memory (memfd pages, as sysv's are). A
// bandwidth floor therefore runs with this UCX_TLS and UCX_ALLOC_PRIO=md:sysv (failing, and
// saying so, where sysv cannot give the buffers). The endpoint's lanes stay as they were: in
// peer error mode (-e) UCX takes no sysv lane.
std::string bandwidth_transports();

// UCX's own figure between two ucx_perftest processes on loopback (Debian's ucx-utils), with
// UCX_TLS set to remote_transports() (bandwidth_transports() for a "_bw" test) and endpoints
// in peer error mode (-e), as rig's are: for "ucp_am_lat", an active message's round trip in
// ns (twice the one-way latency it prints, its overall average, as rig's figure is an
// average); for a "_bw" test ("ucp_am_bw"), the bandwidth of `bytes`-byte messages in GB/s.
// nullopt with the reason in `why` where ucx_perftest is missing or prints no figure, or
// where a bandwidth floor's endpoint took a sysv lane (another transport than rig's).
// `lanes_used`, where given: the transports of the client's endpoint's lanes, as UCX printed
// them ("tcp/lo").
std::optional<double> ucx_perftest(const std::string& test, std::uint64_t bytes, std::uint64_t iterations,
                                   std::string& why, std::vector<std::string>* lanes_used = nullptr);

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
  // "ucx_perftest TEST WHAT, loopback, UCX_TLS=... over LANES, measured in turn with rig's"
  // (a bandwidth floor's also naming the UCX_TLS that put its buffers in shared memory), or
  // "ucx_perftest unavailable: why".
  std::string name(std::string_view what) const;

 private:
  std::string test_;
  std::uint64_t bytes_, iterations_;
  std::vector<double> runs_;
  std::vector<std::string> lanes_;  // the last run's endpoint's lanes
  std::string why_;
};

}  // namespace rig::bench
