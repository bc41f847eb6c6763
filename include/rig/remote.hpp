// rig/remote.hpp — devices of other machines, served by `rig serve` agents over UCX
// (docs/remote.md).
//
// An agent opens devices of its machine and serves them to clients that prove its token.
// A client opens one of them through opener(): a device whose driver runs the whole
// contract over the wire, while its timeline word stays in this process (rig_words), moved
// by the agent's messages, so waits on a remote value are local reads.
#pragma once

#include <rig/edge.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rig::remote {

// The token a client proves and an agent expects: `token` where it is not empty, else the
// environment variable RIG_TOKEN, else the contents of the file RIG_TOKEN_FILE names (one
// line; its end of line dropped), which must be readable by its owner only. Error naming the
// file and the reason (readable by others, missing), or saying that none is set.
Result<std::string> token(std::string_view token = {});

// An opener of the agent's device `device` ("CPU", "MEM") at `address` ("HOST:PORT"): the
// device is named "DEVICE@HOST" ("CPU@127.0.0.1"), or `name` where that is not empty.
// Devices of one agent share one connection, opened with the first of them; `token` as
// token() takes it.
//
// make gives Error when the token is missing, the address is not HOST:PORT, the agent cannot
// be reached or refuses the token within 5 s ("127.0.0.1:7000 refused the token"), or has no
// such device ("127.0.0.1:7000 serves no device GPU:3; it serves CPU, MEM").
//
// The device's facts are the agent's device's, except that the host addresses none of its
// memory (host_addresses false: copies stage through mapped host memory), it maps host memory
// (maps_host: map_host registers it with UCX and the agent gets and puts its bytes by RMA, the
// bytes a value writes there put back before the word shows the value), its queues wait for
// no producer of this process (the host waits), its word is the one make was given
// (completion Host), it may block, and it lists no counters and no capability. Its Device and
// Mapped memory is the agent device's own (no window reaches it from this host); its Pinned
// memory is this process's, page-aligned, mapped as map_host maps memory. It runs Words, Copy
// and Launch parts on the agent, and Fill parts here: its first queue lists Fill, and submit
// calls a fill, with no queue context (NULL), before the value leaves. A timed value's times
// are the agent device's, shifted to this process's clock by the offset measured at
// connection.
//
// Loss: when the connection breaks (the agent died, the network went; UCX's keepalive
// notices a silent peer within 2 s), every device of that agent is lost with "connection to
// HOST:PORT lost: REASON"; a device lost on the agent's side is lost here with the agent's
// reason.
edge::Opener<> opener(std::string address, std::string device, std::string name = {}, std::string token = {});

// The names of the devices the agent at `address` serves, or Error as make gives it.
Result<std::vector<std::string>> devices(std::string_view address, std::string token = {});

// An agent: what `rig serve` runs.
struct ServeOptions {
  std::string listen = "127.0.0.1:0";  // HOST:PORT; port 0: one the system picks
  std::vector<std::string> devices;    // the devices it serves; empty: CPU and MEM
  std::string token;                   // as token() takes it
  // Devices of other drivers it may serve too, by their openers' names (a program that
  // embeds an agent: a test serving a fault-injecting driver). They count as devices it can
  // open; `devices` names them to serve them.
  std::vector<edge::Opener<>> openers = {};
};

class Agent {
 public:
  // Starts serving: listens and answers clients on threads of its own. Error when the
  // token is missing, a device is not one this agent can open, or it cannot listen.
  static Result<std::unique_ptr<Agent>> start(ServeOptions options);
  virtual ~Agent() = default;

  // The address it listens on, with the port it got: "127.0.0.1:40123".
  virtual std::string address() const = 0;
  // Clients connected now, admitted or not.
  virtual std::size_t clients() const = 0;
  // Messages it dropped: before a client proved the token, malformed, or naming what the
  // client does not hold.
  virtual std::uint64_t dropped() const = 0;
  // Bytes of device memory its clients hold now.
  virtual std::uint64_t held_bytes() const = 0;
};

}  // namespace rig::remote
