// ucx.hpp — the remote part's one seam to UCX: a worker with its progress thread, which
// sends and receives the protocol's messages as active messages on endpoints, accepts
// connections on a listener and connects to one. The client and the agent both use it; no
// other file of rig calls UCX.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <rig/edge.hpp>

namespace rig::remote::ucx {

// UCX's words for a status: "Connection reset by remote peer".
std::string status_text(ucs_status_t status);

// "HOST:PORT" split; Error naming the address where it is not one.
struct Address {
  std::string host;
  std::uint16_t port = 0;
};
Result<Address> parse_address(std::string_view address);

// What a worker tells its owner, on its progress thread. The handlers may send.
struct Handlers {
  // A whole message from `from` (the endpoint to it).
  std::function<void(ucp_ep_h from, std::span<const std::byte> message)> message;
  // `ep` failed: its peer went or the connection broke.
  std::function<void(ucp_ep_h ep, ucs_status_t status)> error;
  // A connection accepted on the listener: its endpoint.
  std::function<void(ucp_ep_h ep)> accepted;
};

// A UCX context and worker, and the thread that progresses it: it spins for a short while
// after each event, then sleeps on the worker's event fd until UCX or a send wakes it. Every
// call of the worker is made under one lock, so any thread may send.
class Worker {
 public:
  // Made with the keepalive that notices a dead peer within 2 s (UCX_KEEPALIVE_INTERVAL may
  // override it); throws std::runtime_error with UCX's reason when UCX cannot start.
  explicit Worker(Handlers handlers);
  ~Worker();
  Worker(const Worker&) = delete;

  // Listens on `address` (port 0: one the system picks): the address it listens on, or Error.
  Result<Address> listen(const Address& address);
  // An endpoint to the listener at `address` (the connection completes on its own; a failure
  // reaches the error handler), or Error.
  Result<ucp_ep_h> connect(const Address& address);
  // Sends the message's bytes (copied: the caller may reuse them at once). False if UCX
  // refused it at once.
  bool send(ucp_ep_h ep, std::span<const std::byte> message);
  // Closes an endpoint, dropping what it has not sent.
  void close(ucp_ep_h ep);

 private:
  struct Buffer;
  static ucs_status_t on_message(void* arg, const void* header, std::size_t header_length, void* data,
                                 std::size_t length, const ucp_am_recv_param_t* param);
  static void on_rendezvous(void* request, ucs_status_t status, std::size_t length, void* user_data);
  static void on_sent(void* request, ucs_status_t status, void* user_data);
  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void on_connection(ucp_conn_request_h request, void* arg);
  void progress();
  std::unique_ptr<Buffer> buffer();
  void give_back(Buffer* b);

  Handlers handlers_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int efd_ = -1;
  std::recursive_mutex mutex_;  // every call of the worker; handlers run under it
  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<Buffer>> pool_;  // send buffers no send holds
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace rig::remote::ucx
