// `rig serve`: an agent that serves this machine's devices to rig clients on other machines
// over UCX (rig/remote.hpp, docs/remote.md). It prints the address it listens on as one line,
// "listening HOST:PORT", for launchers to read, then serves until SIGINT or SIGTERM. Besides
// CPU and MEM it can serve this machine's GPUs as `rig devices` lists them (`--devices
// AMD:0`; with RIG_SIM=amd the simulated one).
#include <rig/config.h>

#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "machine.hpp"
#include "tool.hpp"

#if RIG_DRIVER_REMOTE
#include <rig/remote.hpp>
#endif

namespace rig::tool {

int serve(const ServeOptions& options) {
#if RIG_DRIVER_REMOTE
  remote::ServeOptions o;
  o.listen = options.listen;
  o.devices = options.devices;
  for (auto& gpu : gpu_openers([](const std::string&) {})) o.openers.push_back(gpu.make());
  if (!options.token_file.empty()) {
    ::setenv("RIG_TOKEN_FILE", options.token_file.c_str(), 1);
    ::unsetenv("RIG_TOKEN");
  }
  // The signals that end it are taken by sigwait below, on this thread; the agent's threads,
  // started after, inherit the mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  auto agent = remote::Agent::start(o);
  if (!agent) throw std::invalid_argument(fmt::format("serve: {}", agent.error()));
  fmt::print("listening {}\n", (*agent)->address());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&set, &signal);
  return 0;
#else
  (void)options;
  throw std::invalid_argument("serve: this rig was built without remote devices (-Dremote=disabled, or no libucx-dev)");
#endif
}

}  // namespace rig::tool
