#include "floors.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef RIG_STATIC_BUNDLE  // a static bundle has no OpenCL loader (Debian ships it shared only)
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#endif
#include <omp.h>

namespace rig::bench {

Spread spin_ping_pong(int repeats, std::uint64_t n) { return spin_hand_off(repeats, n, nullptr, 0); }

Spread spin_hand_off(int repeats, std::uint64_t n, rig_host_kernel* kernel, int calls) {
  alignas(64) std::atomic<std::uint64_t> ping{0};
  alignas(64) std::atomic<std::uint64_t> pong{0};
  std::atomic<bool> stop{false};
  std::thread partner([&] {
    std::uint64_t seen = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      std::uint64_t v = ping.load(std::memory_order_acquire);
      if (v != seen) {
        seen = v;
        rig_host_group group{{0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 0, nullptr, v};
        for (int i = 0; i < calls; ++i) kernel(nullptr, &group);
        pong.store(v, std::memory_order_release);
      }
    }
  });
  std::uint64_t counter = 0;
  Spread s = measure(repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      ++counter;
      ping.store(counter, std::memory_order_release);
      while (pong.load(std::memory_order_acquire) != counter) {
      }
    }
  });
  stop = true;
  partner.join();
  return s;
}

std::optional<Spread> opencl_empty_kernel(int repeats, std::uint64_t n, std::string& why) {
#ifdef RIG_STATIC_BUNDLE
  (void)repeats, (void)n;
  why = "this rig is a static bundle, built without OpenCL";
  return std::nullopt;
#else
  cl_platform_id platform;
  cl_uint count = 0;
  if (clGetPlatformIDs(1, &platform, &count) != CL_SUCCESS || count == 0) {
    why = "no OpenCL platform";
    return std::nullopt;
  }
  cl_device_id device;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_CPU, 1, &device, nullptr) != CL_SUCCESS) {
    why = "no OpenCL CPU device";
    return std::nullopt;
  }
  cl_int err = 0;
  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
  const char* source = "kernel void empty(void) {}";
  cl_program program = clCreateProgramWithSource(context, 1, &source, nullptr, &err);
  if (clBuildProgram(program, 1, &device, "", nullptr, nullptr) != CL_SUCCESS) {
    why = "the OpenCL compiler failed on an empty kernel";
    return std::nullopt;
  }
  cl_kernel kernel = clCreateKernel(program, "empty", &err);
  std::size_t global = 1, local = 1;
  Spread s = measure(repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &global, &local, 0, nullptr, nullptr);
      clFinish(queue);
    }
  });
  clReleaseKernel(kernel);
  clReleaseProgram(program);
  clReleaseCommandQueue(queue);
  clReleaseContext(context);
  return s;
#endif
}

Spread openmp_empty_region(int repeats, std::uint64_t n, int threads) {
  return measure(repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
#pragma omp parallel num_threads(threads)
      { asm volatile("" ::: "memory"); }
    }
  });
}

namespace {

// A TCP port on loopback that no one listens on now, for ucx_perftest's exchange: one below
// the system's ephemeral range (ip_local_port_range) where that leaves room, so that no
// socket the system numbers itself (a connection's own end, or UCX's listeners, bound to
// port 0 in both ucx_perftest processes as they start) can take it before the server binds it.
int free_port() {
  int first_ephemeral = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> first_ephemeral;
  std::minstd_rand pick{std::uint32_t(rig_now_ns())};
  for (int attempt = 0; attempt < 64; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // The last tries, or where the range starts low: a port the system picks.
    const bool below = first_ephemeral > 12000 && attempt < 48;
    a.sin_port = below ? htons(std::uint16_t(10000 + pick() % std::uint32_t(first_ephemeral - 10000))) : 0;
    socklen_t n = sizeof a;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0)
      port = ntohs(a.sin_port);
    ::close(fd);
    if (port != 0) return port;
  }
  return 0;
}

// What a process printed, on one line of at most 300 characters: its lines joined by " / ",
// UCX's "[time] [host:pid:thread] file.c:line UCX " prefixes left out.
std::string one_line(const std::string& printed) {
  std::string out;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    if (const auto ucx = line.find(" UCX "); line.starts_with('[') && ucx != std::string::npos) line.erase(0, ucx + 5);
    const auto first = line.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    if (!out.empty()) out += " / ";
    out += line.substr(first);
  }
  if (out.size() > 300) out = out.substr(0, 297) + "...";
  return out.empty() ? "nothing" : out;
}

std::string drain(FILE* f) {
  std::string out;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, f)) out += buffer;
  return out;
}

// A shell command started with its output (stdout and what it sends there) in a pipe: popen,
// with the process's id, so that a server no client reached can be ended. Each ucx_perftest
// process of a floor, server and client, is started so.
struct Spawned {
  pid_t pid = -1;
  FILE* out = nullptr;
  // What it printed, once it ended (waited for).
  std::string finish() {
    std::string printed = out ? drain(out) : "";
    if (out) std::fclose(out);
    int status = 0;
    if (pid > 0) ::waitpid(pid, &status, 0);
    return printed;
  }
};

Spawned spawn(const std::string& command) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return {};
  }
  return {pid, ::fdopen(fds[0], "r")};
}

}  // namespace

std::string remote_transports() {
  const char* tls = std::getenv("UCX_TLS");
  return tls && *tls ? tls : "tcp";
}

namespace {

// The transports of the lanes UCX chose for an endpoint, from the "ep_cfg[N]: am(tcp/lo)
// ka(tcp/lo)" lines it prints at UCX_LOG_LEVEL=info: each "name/device" once, in order.
std::vector<std::string> lane_transports(const std::string& printed) {
  std::vector<std::string> out;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("ep_cfg[");
    if (at == std::string::npos) continue;
    for (auto open = line.find('(', at); open != std::string::npos; open = line.find('(', open + 1)) {
      const auto close = line.find(')', open);
      if (close == std::string::npos) break;
      // "am(tcp/lo)", or several lanes of one kind: "rma_bw(tcp/lo tcp/eth0)".
      std::istringstream names(line.substr(open + 1, close - open - 1));
      for (std::string name; names >> name;)
        if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  }
  return out;
}

// Whether UCX_TLS's list names `transport` (or a set that holds it: "all", "shm"), or is a
// negation ("^tcp"), which a floor should not add to.
bool names_transport(const std::string& tls, std::string_view transport) {
  if (tls.starts_with('^')) return true;
  std::istringstream in(tls);
  for (std::string name; std::getline(in, name, ',');)
    if (name == transport || name == "all" || name == "shm") return true;
  return false;
}

}  // namespace

std::string bandwidth_transports() {
  const std::string tls = remote_transports();
  return names_transport(tls, "sysv") ? tls : tls + ",sysv";
}

std::optional<double> ucx_perftest(const std::string& test, std::uint64_t bytes, std::uint64_t iterations,
                                   std::string& why, std::vector<std::string>* lanes_used) {
  if (::access("/usr/bin/ucx_perftest", X_OK) != 0) {
    why = "ucx_perftest is missing (Debian's ucx-utils)";
    return std::nullopt;
  }
  const bool bandwidth = test.ends_with("_bw");
  // A bandwidth floor's buffers from sysv shared memory and nothing else: where sysv cannot
  // give them, the floor fails and says so, rather than send the zero page unnoticed.
  const std::string env = bandwidth ? fmt::format("UCX_TLS='{}' UCX_ALLOC_PRIO=md:sysv", bandwidth_transports())
                                    : fmt::format("UCX_TLS='{}'", remote_transports());
  // The client fails at once while the server does not listen yet: it tries again for 6 s.
  // It prints its endpoint's lanes (UCX_LOG_LEVEL=info), which are checked below. A server
  // that never listened (its port taken after all, or it failed) is started once more on
  // another port.
  std::string printed, served;
  for (int server_try = 0; server_try < 2 && printed.find('|') == std::string::npos; ++server_try) {
    // -e: endpoints with peer error handling, as rig's are (UCX then keeps them alive).
    const std::string args = fmt::format("-t {} -s {} -n {} -w {} -p {} -e -f", test, bytes, iterations,
                                         std::max<std::uint64_t>(1, iterations / 10), free_port());
    Spawned server = spawn(fmt::format("{} exec /usr/bin/ucx_perftest {} 2>&1", env, args));
    if (server.pid < 0) {
      why = "ucx_perftest did not start";
      return std::nullopt;
    }
    printed.clear();
    for (int attempt = 0; attempt < 20 && printed.find('|') == std::string::npos; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      printed = spawn(fmt::format("{} UCX_LOG_LEVEL=info exec /usr/bin/ucx_perftest 127.0.0.1 {} 2>&1", env, args))
                    .finish();
    }
    // A server no client reached is ended; one that served ends on its own.
    if (printed.find('|') == std::string::npos) ::kill(server.pid, SIGTERM);
    served = server.finish();
  }
  // A bandwidth floor names sysv only for UCX's allocation; were its bytes to travel over
  // shared memory, it would measure another transport than rig's copies.
  const auto lanes = lane_transports(printed);
  if (lanes_used) *lanes_used = lanes;
  if (bandwidth && !names_transport(remote_transports(), "sysv")) {
    const auto sysv = std::find_if(lanes.begin(), lanes.end(), [](const auto& l) { return l.starts_with("sysv"); });
    if (sysv != lanes.end()) {
      why = fmt::format("ucx_perftest's endpoint used {} (its lanes: {}), not the transports rig's copies use",
                        *sysv, fmt::join(lanes, " "));
      return std::nullopt;
    }
  }
  // With -f its last line is the figures: iterations, latency (50th percentile, average,
  // overall; µs), bandwidth (average, overall; MB/s), message rate (average, overall).
  std::string last;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    const auto first = line.find_first_not_of(' ');
    if (first != std::string::npos && line[first] >= '0' && line[first] <= '9') last = line;
  }
  std::istringstream in(last);
  double count = 0, typical = 0, average = 0, overall = 0, bw_average = 0, bw_overall = 0;
  in >> count >> typical >> average >> overall >> bw_average >> bw_overall;
  if (bandwidth && (last.empty() || !in) && printed.find("Out of memory") != std::string::npos) {
    why = fmt::format("ucx_perftest could not allocate its {}-byte buffers in sysv shared memory "
                      "(UCX_ALLOC_PRIO=md:sysv; see ipcs -l)", bytes);
    return std::nullopt;
  }
  if (last.empty() || !in) {
    why = fmt::format("ucx_perftest printed no figure rig can read: {} (its server: {})", one_line(printed),
                      one_line(served));
    return std::nullopt;
  }
  // The overall average, as rig's figures are (a run's time over its round trips): over tcp
  // the latency's tail is long, and the 50th percentile (5 µs one way here) is a sixth of it.
  if (test.ends_with("_lat")) return 2 * overall * 1000;  // one way in µs → a round trip in ns
  return bw_overall * double(1 << 20) / 1e9;               // MB/s (2^20 bytes) → GB/s
}

void UcxFloorInTurn::run() {
  if (!why_.empty()) return;
  if (auto figure = ucx_perftest(test_, bytes_, iterations_, why_, &lanes_)) runs_.push_back(*figure);
}

Spread UcxFloorInTurn::spread() const { return why_.empty() && !runs_.empty() ? spread_of(runs_) : Spread{}; }

std::string UcxFloorInTurn::name(std::string_view what) const {
  if (!why_.empty() || runs_.empty()) return "ucx_perftest unavailable: " + why_;
  const std::string over = lanes_.empty() ? "" : fmt::format(" over {}", fmt::join(lanes_, " "));
  if (test_.ends_with("_bw"))
    return fmt::format("ucx_perftest {}{}, loopback, UCX_TLS={}{}, its buffers in sysv shared memory (UCX_TLS={} "
                       "UCX_ALLOC_PRIO=md:sysv), measured in turn with rig's",
                       test_, what, remote_transports(), over, bandwidth_transports());
  return fmt::format("ucx_perftest {}{}, loopback, UCX_TLS={}{}, measured in turn with rig's", test_, what,
                     remote_transports(), over);
}

}  // namespace rig::bench
