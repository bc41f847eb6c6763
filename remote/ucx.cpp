// ucx.cpp — the worker, its progress thread, and active messages over UCX (ucx.hpp).
#include "ucx.hpp"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>

#include "../host/futex.hpp"

namespace rig::remote::ucx {
namespace {

// The one active-message id the protocol uses: every message carries its type itself.
constexpr unsigned kMessageId = 17;
// The active message id of data messages: a protocol message as the header, bytes as the data.
constexpr unsigned kDataId = 18;
// How long the progress thread spins after an event before it sleeps on the event fd: a
// round trip's next message usually comes within it, and a sleep's wake-up costs tens of
// microseconds on these machines (DESIGN.md). Each round yields the CPU, so that on a
// machine with more runnable threads than cores the spinner does not keep the thread it
// waits for (the device's, which runs the value) off the CPU: with 20 µs of pauses first, the
// host device's thread started a served value 20 µs late when it shared the agent's CPU.
constexpr std::uint64_t kSpinNs = 200'000;
constexpr std::uint64_t kEagerNs = 0;
// The longest the progress thread sleeps before it looks at its stop flag again.
constexpr int kSleepMs = 100;
// While threads poll the worker, how often the progress thread, parked, looks whether the
// last one went (see park_while_polled).
constexpr std::uint64_t kPolledLookNs = 1'000'000;
// UCX's keepalive: a peer silent this long is probed, so a dead one is noticed within 2 s.
constexpr const char* kKeepalive = "500ms";

}  // namespace

class Worker::Turn {
 public:
  // Takes w's turn; with std::try_to_lock, only if it is free (owns() says).
  explicit Turn(Worker& w) : w_(w), lock_(w.turn_) { w_.holder_.store(std::this_thread::get_id()); }
  Turn(Worker& w, std::try_to_lock_t) : w_(w), lock_(w.turn_, std::try_to_lock) {
    if (lock_.owns_lock()) w_.holder_.store(std::this_thread::get_id());
  }
  ~Turn() {
    if (lock_.owns_lock()) w_.holder_.store(std::thread::id());
  }
  Turn(const Turn&) = delete;
  bool owns() const { return lock_.owns_lock(); }

 private:
  Worker& w_;
  std::unique_lock<std::mutex> lock_;
};

struct Worker::Buffer {
  Worker* worker = nullptr;
  std::vector<std::byte> bytes;
  ucp_ep_h ep = nullptr;  // for a rendezvous receive: who sent it
};

// What UCX's callbacks delivered, handed to the handlers after ucp_worker_progress returns.
struct Worker::Event {
  enum Kind { Message, Error, Accepted, Data };
  Event(Kind k, ucp_ep_h from, std::unique_ptr<Buffer> bytes, ucs_status_t st = UCS_OK)
      : kind(k), ep(from), message(std::move(bytes)), status(st) {}
  Kind kind = Message;
  ucp_ep_h ep = nullptr;
  std::unique_ptr<Buffer> message;  // a Message's bytes; a Data's header, then its eager bytes
  ucs_status_t status = UCS_OK;
  std::size_t header = 0;  // a Data's header bytes
  Payload payload;         // a Data's bytes (its eager ones point into message)
};

std::string status_text(ucs_status_t status) { return ucs_status_string(status); }

Result<Address> parse_address(std::string_view address) {
  const auto colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return std::unexpected(fmt::format("{}: not an address HOST:PORT", address));
  Address a;
  a.host = std::string(address.substr(0, colon));
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  const auto port = address.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value > 65535)
    return std::unexpected(fmt::format("{}: the port {} is not a number from 0 to 65535", address, port));
  a.port = std::uint16_t(value);
  return a;
}

namespace {

// The socket address of host:port (a name is resolved), or Error.
Result<sockaddr_storage> socket_address(const Address& a, socklen_t* length) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &found);
  if (rc != 0) return std::unexpected(fmt::format("{}:{}: {}", a.host, a.port, ::gai_strerror(rc)));
  sockaddr_storage out{};
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  *length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return out;
}

}  // namespace

Worker::Worker(Handlers handlers, std::chrono::nanoseconds linger)
    : handlers_(std::move(handlers)), linger_ns_(std::uint64_t(std::max<std::int64_t>(10'000, linger.count()))) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) throw std::runtime_error("UCX: cannot read its configuration: " + status_text(st));
  if (std::getenv("UCX_KEEPALIVE_INTERVAL") == nullptr) ucp_config_modify(config, "KEEPALIVE_INTERVAL", kKeepalive);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) throw std::runtime_error("UCX: cannot start: " + status_text(st));
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  st = ucp_worker_create(context_, &wp, &worker_);
  if (st != UCS_OK) {
    ucp_cleanup(context_);
    throw std::runtime_error("UCX: cannot make a worker: " + status_text(st));
  }
  st = ucp_worker_get_efd(worker_, &efd_);
  ucp_am_handler_param_t am{};
  am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  am.id = kMessageId;
  am.cb = &Worker::on_message;
  am.arg = this;
  am.flags = UCP_AM_FLAG_WHOLE_MSG;
  if (st == UCS_OK) st = ucp_worker_set_am_recv_handler(worker_, &am);
  am.id = kDataId;
  am.cb = &Worker::on_data;
  if (st == UCS_OK) st = ucp_worker_set_am_recv_handler(worker_, &am);
  if (st != UCS_OK) {
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
    throw std::runtime_error("UCX: cannot set up its worker: " + status_text(st));
  }
  thread_ = std::thread([this] { progress(); });
}

void Worker::halt() {
  muted_.store(true);
  stopping_.store(true);
  ucp_worker_signal(worker_);
  resumes_.fetch_add(1, std::memory_order_seq_cst);
  host::futex_wake(resumes_);  // the progress thread, if it sleeps because threads poll
  asleep_.store(1, std::memory_order_seq_cst);  // it spins no more: watchers watch
  host::futex_wake(asleep_);
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

Worker::~Worker() {
  halt();
  if (thread_.joinable()) thread_.detach();  // halted from its own thread: it returns at once
  if (listener_) ucp_listener_destroy(listener_);
  // Sends still in flight hold their buffers: progress them out before the worker goes.
  for (int i = 0; i < 1000 && ucp_worker_progress(worker_) != 0; ++i) {
  }
  std::vector<Event> left;
  {
    std::lock_guard g(inbox_mutex_);
    left.swap(inbox_);
    reaping_.swap(forgotten_);
  }
  // Outside the inbox's lock, as in turn().
  for (auto& e : left)
    if (e.kind == Event::Data) drop(e.payload);
  for (auto r : reaping_) ucp_request_free(r);
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

Result<Address> Worker::listen(const Address& address) {
  socklen_t length = 0;
  auto sa = socket_address(address, &length);
  if (!sa) return std::unexpected(sa.error());
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*sa);
  lp.sockaddr.addrlen = length;
  lp.conn_handler.cb = &Worker::on_connection;
  lp.conn_handler.arg = this;
  ucs_status_t st = ucp_listener_create(worker_, &lp, &listener_);
  if (st != UCS_OK)
    return std::unexpected(fmt::format("cannot listen on {}:{}: {}", address.host, address.port, status_text(st)));
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  st = ucp_listener_query(listener_, &attr);
  Address out = address;
  if (st == UCS_OK) {
    if (attr.sockaddr.ss_family == AF_INET)
      out.port = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
    else if (attr.sockaddr.ss_family == AF_INET6)
      out.port = ntohs(reinterpret_cast<const sockaddr_in6*>(&attr.sockaddr)->sin6_port);
  }
  return out;
}

Result<ucp_ep_h> Worker::connect(const Address& address) {
  socklen_t length = 0;
  auto sa = socket_address(address, &length);
  if (!sa) return std::unexpected(sa.error());
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&*sa);
  ep.sockaddr.addrlen = length;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &Worker::on_error;
  ep.err_handler.arg = this;
  ucp_ep_h out = nullptr;
  const ucs_status_t st = ucp_ep_create(worker_, &ep, &out);
  if (st != UCS_OK)
    return std::unexpected(fmt::format("cannot connect to {}:{}: {}", address.host, address.port, status_text(st)));
  ucp_worker_signal(worker_);
  return out;
}

std::unique_ptr<Worker::Buffer> Worker::buffer() {
  {
    std::lock_guard g(pool_mutex_);
    if (!pool_.empty()) {
      auto b = std::move(pool_.back());
      pool_.pop_back();
      return b;
    }
  }
  auto b = std::make_unique<Buffer>();
  b->worker = this;
  return b;
}

void Worker::give_back(Buffer* b) {
  std::lock_guard g(pool_mutex_);
  pool_.emplace_back(b);
}

bool Worker::send(ucp_ep_h ep, std::span<const std::byte> message) {
  auto b = buffer();
  b->bytes.assign(message.begin(), message.end());
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY;
  p.cb.send = &Worker::on_sent;
  p.user_data = b.get();
  ucs_status_ptr_t r = ucp_am_send_nbx(ep, kMessageId, nullptr, 0, b->bytes.data(), b->bytes.size(), &p);
  if (UCS_PTR_IS_PTR(r)) {
    b.release();  // on_sent gives it back
    ucp_worker_signal(worker_);
    return true;
  }
  give_back(b.release());
  return UCS_PTR_STATUS(r) == UCS_OK;
}

void Worker::on_sent(void* request, ucs_status_t, void* user_data) {
  auto* b = static_cast<Buffer*>(user_data);
  b->worker->give_back(b);
  ucp_request_free(request);
}

void Worker::close(ucp_ep_h ep) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &p);
  if (UCS_PTR_IS_PTR(r)) {
    while (ucp_request_check_status(r) == UCS_INPROGRESS)
      if (!progress_once()) host::cpu_relax();
    ucp_request_free(r);
  }
  // Events its progress delivered wait in the inbox: the progress thread hands them over.
  if (inbox_waits()) ucp_worker_signal(worker_);
}

ucs_status_t Worker::on_message(void* arg, const void*, std::size_t, void* data, std::size_t length,
                                const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Worker*>(arg);
  ucp_ep_h from = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
  auto b = self->buffer();
  b->ep = from;
  if (!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    const auto* bytes = static_cast<const std::byte*>(data);
    b->bytes.assign(bytes, bytes + length);
    self->deliver(Event{Event::Message, from, std::move(b)});
    return UCS_OK;
  }
  // A large message: fetch it into a buffer of its own, then hand it over.
  b->bytes.resize(length);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.recv_am = &Worker::on_rendezvous;
  p.user_data = b.get();
  ucs_status_ptr_t r = ucp_am_recv_data_nbx(self->worker_, data, b->bytes.data(), length, &p);
  if (UCS_PTR_IS_PTR(r)) {
    b.release();
  } else if (UCS_PTR_STATUS(r) == UCS_OK) {
    self->deliver(Event{Event::Message, from, std::move(b)});
  } else {
    self->give_back(b.release());
  }
  return UCS_OK;
}

namespace {

// A request's parameters naming memh, the registration of its local memory, where there is one.
ucp_request_param_t registered(ucp_mem_h memh) {
  ucp_request_param_t p{};
  if (memh) {
    p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh;
  }
  return p;
}

}  // namespace

ucs_status_t Worker::on_data(void* arg, const void* header, std::size_t header_length, void* data,
                             std::size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<Worker*>(arg);
  ucp_ep_h from = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? param->reply_ep : nullptr;
  const bool rendezvous = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
  auto b = self->buffer();
  const auto* h = static_cast<const std::byte*>(header);
  b->bytes.assign(h, h + header_length);
  // Bytes that came with the header live only in this callback: kept beside it.
  if (!rendezvous) b->bytes.insert(b->bytes.end(), static_cast<const std::byte*>(data),
                                   static_cast<const std::byte*>(data) + length);
  Event e{Event::Data, from, std::move(b)};
  e.header = header_length;
  e.payload.length_ = length;
  if (rendezvous)
    e.payload.desc_ = data;
  else
    e.payload.eager_ = e.message->bytes.data() + header_length;
  self->deliver(std::move(e));
  return rendezvous ? UCS_INPROGRESS : UCS_OK;
}

ucs_status_ptr_t Worker::send_data(ucp_ep_h ep, std::span<const std::byte> header, const void* bytes,
                                   std::size_t length, ucp_mem_h memh) {
  auto b = buffer();
  b->bytes.assign(header.begin(), header.end());
  ucp_request_param_t p = registered(memh);
  p.op_attr_mask |= UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_RNDV;
  p.cb.send = &Worker::on_data_sent;
  p.user_data = b.get();
  ucs_status_ptr_t r = ucp_am_send_nbx(ep, kDataId, b->bytes.data(), b->bytes.size(), bytes, length, &p);
  if (UCS_PTR_IS_PTR(r)) {
    b.release();  // on_data_sent gives it back; the request is the caller's
    ucp_worker_signal(worker_);
  } else {
    give_back(b.release());
  }
  return r;
}

void Worker::on_data_sent(void*, ucs_status_t, void* user_data) {
  auto* b = static_cast<Buffer*>(user_data);
  b->worker->give_back(b);
}

void Worker::forget(ucs_status_ptr_t request) {
  if (!UCS_PTR_IS_PTR(request)) return;
  std::lock_guard g(inbox_mutex_);
  forgotten_.push_back(request);
}

ucs_status_t Worker::take(Payload& payload, void* into, ucp_mem_h memh) {
  return finish(take_later(payload, into, memh));
}

ucs_status_ptr_t Worker::take_later(Payload& payload, void* into, ucp_mem_h memh) {
  payload.settled_ = true;
  if (!payload.desc_) {
    if (payload.length_) std::memcpy(into, payload.eager_, payload.length_);
    return UCS_STATUS_PTR(UCS_OK);
  }
  const ucp_request_param_t p = registered(memh);
  return ucp_am_recv_data_nbx(worker_, payload.desc_, into, payload.length_, &p);
}

Payload Worker::keep(Payload& payload) {
  Payload out = payload;
  if (payload.eager_) {
    // Bytes that came with the header live in the event's buffer, which goes after the
    // handler: the kept payload owns a copy.
    out.owned_ = std::make_shared<std::vector<std::byte>>(payload.eager_, payload.eager_ + payload.length_);
    out.eager_ = out.owned_->data();
  }
  payload.settled_ = true;
  return out;
}

void Worker::drop(Payload& payload) {
  if (payload.settled_) return;
  payload.settled_ = true;
  if (payload.desc_) ucp_am_data_release(worker_, payload.desc_);
}

void Worker::on_rendezvous(void* request, ucs_status_t status, std::size_t, void* user_data) {
  auto* b = static_cast<Buffer*>(user_data);
  Worker* self = b->worker;
  if (status == UCS_OK)
    self->deliver(Event{Event::Message, b->ep, std::unique_ptr<Buffer>(b)});
  else
    self->give_back(b);
  ucp_request_free(request);
}

void Worker::on_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  static_cast<Worker*>(arg)->deliver(Event{Event::Error, ep, nullptr, status});
}

void Worker::on_connection(ucp_conn_request_h request, void* arg) {
  auto* self = static_cast<Worker*>(arg);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.conn_request = request;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &Worker::on_error;
  ep.err_handler.arg = self;
  ucp_ep_h out = nullptr;
  if (ucp_ep_create(self->worker_, &ep, &out) == UCS_OK) self->deliver(Event{Event::Accepted, out, nullptr});
}

void Worker::deliver(Event e) {
  std::lock_guard g(inbox_mutex_);
  inbox_.push_back(std::move(e));
}

bool Worker::inbox_waits() {
  std::lock_guard g(inbox_mutex_);
  return !inbox_.empty();
}

unsigned Worker::turn() {
  const unsigned events = ucp_worker_progress(worker_);
  {
    std::lock_guard g(inbox_mutex_);
    reaping_.swap(forgotten_);
    handing_.swap(inbox_);
  }
  // Sends let go of complete on their own: the done ones are freed, outside the inbox's lock,
  // since UCX frees a request under its worker's lock and holds that lock when its callbacks
  // deliver into the inbox (the two taken in both orders could deadlock).
  if (!reaping_.empty()) {
    std::erase_if(reaping_, [](ucs_status_ptr_t r) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
      ucp_request_free(r);
      return true;
    });
    std::lock_guard g(inbox_mutex_);
    forgotten_.insert(forgotten_.end(), reaping_.begin(), reaping_.end());
    reaping_.clear();
  }
  if (handing_.empty()) return events;
  for (auto& e : handing_) {
    const bool muted = muted_.load(std::memory_order_relaxed);
    if (e.kind == Event::Data) {
      if (!muted && handlers_.data)
        handlers_.data(e.ep, std::span(e.message->bytes).first(e.header), e.payload);
      drop(e.payload);  // what the handler neither took nor dropped
    } else if (!muted) {
      if (e.kind == Event::Message)
        handlers_.message(e.ep, e.message->bytes);
      else if (e.kind == Event::Error)
        handlers_.error(e.ep, e.status);
      else
        handlers_.accepted(e.ep);
    }
    if (e.message) give_back(e.message.release());
  }
  const unsigned handed = unsigned(handing_.size());
  handing_.clear();
  return events + handed;
}

bool Worker::poll() {
  Turn t(*this, std::try_to_lock);
  if (!t.owns()) return false;
  turn();
  return true;
}

bool Worker::serve_round() {
  Turn t(*this, std::try_to_lock);
  if (!t.owns()) return false;
  // The idle hook first: on an agent whose host device's dispatcher serves the worker, the
  // round after a value is where the value's Reached goes out, and the progress before it (a
  // system call per tcp device) would only hold it back. Launch and wait on a remote host
  // device: 16.1–32.9 µs (median 21.1 µs) against 17.6–29.9 µs (median 22.7 µs) with the
  // hook after the progress, sixteen pairs alternating (ratios 1.15–1.75× against
  // 1.23–2.05×, lower in ten).
  bool did = false;
  if (handlers_.idle && !muted_.load(std::memory_order_relaxed)) {
    idle_at_.store(rig_now_ns(), std::memory_order_relaxed);
    did = handlers_.idle();
  }
  return turn() != 0 || did;
}

bool Worker::progress_once() {
  if (holding_turn()) {
    ucp_worker_progress(worker_);
    return true;
  }
  Turn t(*this, std::try_to_lock);
  if (!t.owns()) return false;
  ucp_worker_progress(worker_);
  return true;
}

void Worker::wake() { ucp_worker_signal(worker_); }

bool Worker::spinning(std::chrono::nanoseconds within) const {
  if (asleep_.load(std::memory_order_seq_cst) != 0) return false;
  return rig_now_ns() - idle_at_.load(std::memory_order_relaxed) < std::uint64_t(within.count());
}

void Worker::await_sleep(std::chrono::nanoseconds most) {
  sleep_awaiters_.fetch_add(1, std::memory_order_seq_cst);
  if (asleep_.load(std::memory_order_seq_cst) == 0 && !stopping_.load(std::memory_order_seq_cst))
    host::futex_wait(asleep_, 0, most);
  sleep_awaiters_.fetch_sub(1, std::memory_order_relaxed);
}

bool Worker::polled() const {
  return pollers_.load(std::memory_order_seq_cst) != 0 ||
         rig_now_ns() - left_at_.load(std::memory_order_relaxed) < linger_ns_;
}

void Worker::begin_polling() { pollers_.fetch_add(1, std::memory_order_seq_cst); }

void Worker::end_polling() {
  left_at_.store(rig_now_ns(), std::memory_order_relaxed);
  pollers_.fetch_sub(1, std::memory_order_seq_cst);
}

void Worker::park_while_polled() {
  // Raised before the futex's word is read: a resume() after this read sees it and wakes
  // this thread; one before it changed the word, and the wait returns at once.
  parked_.store(true, std::memory_order_seq_cst);
  const std::uint32_t word = resumes_.load(std::memory_order_seq_cst);
  while (!stopping_.load(std::memory_order_seq_cst)) {
    // While a thread polls, a look every kPolledLookNs (or linger, if longer): the last one
    // may go meanwhile, unheard. Nothing on a poller's way in or out makes a system call (a
    // timer the last one to go set, tried, made the remote round trip 20-40 µs slower on
    // these VMs), and a look is a wake-up that takes a CPU from the threads on the value's
    // path: a look every linger was 5000 of them a second. Once none polls, the linger's rest.
    std::uint64_t wait = std::max(linger_ns_, kPolledLookNs);
    if (pollers_.load(std::memory_order_seq_cst) == 0) {
      const std::uint64_t since = rig_now_ns() - left_at_.load(std::memory_order_relaxed);
      if (since >= linger_ns_) break;
      wait = linger_ns_ - since;
    }
    host::futex_wait(resumes_, word, std::chrono::nanoseconds(wait));
    if (resumes_.load(std::memory_order_seq_cst) != word) break;
  }
  parked_.store(false, std::memory_order_relaxed);
}

void Worker::resume() {
  left_at_.store(0, std::memory_order_relaxed);  // no linger: the thread takes over at once
  if (!parked_.load(std::memory_order_seq_cst)) return;
  resumes_.fetch_add(1, std::memory_order_seq_cst);
  host::futex_wake(resumes_);
}

void Worker::mute() {
  Turn t(*this);
  muted_.store(true);
}

Result<ucp_mem_h> Worker::register_memory(void* address, std::size_t bytes) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = address;
  mp.length = bytes;
  ucp_mem_h memh = nullptr;
  const ucs_status_t st = ucp_mem_map(context_, &mp, &memh);
  if (st != UCS_OK) return std::unexpected(fmt::format("UCX cannot register {} bytes: {}", bytes, status_text(st)));
  return memh;
}

void Worker::unregister(ucp_mem_h memh) {
  if (memh) ucp_mem_unmap(context_, memh);
}

ucs_status_t Worker::finish(ucs_status_ptr_t request) {
  if (!UCS_PTR_IS_PTR(request)) return UCS_PTR_STATUS(request);
  ucs_status_t st;
  while ((st = ucp_request_check_status(request)) == UCS_INPROGRESS)
    if (!progress_once()) host::cpu_relax();
  ucp_request_free(request);
  // Events its progress delivered wait in the inbox: the progress thread hands them over.
  if (inbox_waits()) ucp_worker_signal(worker_);
  return st;
}

std::optional<ucs_status_t> Worker::done(ucs_status_ptr_t request) {
  if (!UCS_PTR_IS_PTR(request)) return UCS_PTR_STATUS(request);
  const ucs_status_t st = ucp_request_check_status(request);
  if (st == UCS_INPROGRESS) return std::nullopt;
  ucp_request_free(request);
  return st;
}

std::string Worker::transports(ucp_ep_h ep) {
  char* text = nullptr;
  std::size_t length = 0;
  FILE* f = ::open_memstream(&text, &length);
  if (!f) return "unknown";
  ucp_ep_print_info(ep, f);
  std::fclose(f);
  // Each lane's line ("lane[0]:  1:tcp/lo.0 md[1] ...") names its transport and device.
  std::set<std::string> seen;
  std::string out;
  std::string_view all(text, length);
  for (std::size_t at = 0; at < all.size();) {
    std::size_t end = all.find('\n', at);
    if (end == std::string_view::npos) end = all.size();
    const std::string_view line = all.substr(at, end - at);
    at = end + 1;
    if (line.find("lane[") == std::string_view::npos) continue;
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    auto rest = line.substr(colon + 1);
    rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
    // "1:tcp/lo.0": the resource's number, the transport and device, the path's number.
    std::string name(rest.substr(0, rest.find_first_of(" \t")));
    if (const auto number = name.find(':'); number != std::string::npos) name.erase(0, number + 1);
    if (const auto path = name.rfind('.'); path != std::string::npos && path > name.find('/')) name.erase(path);
    if (name.find('/') == std::string::npos || !seen.insert(name).second) continue;
    if (!out.empty()) out += ',';
    out += name;
  }
  std::free(text);
  return out.empty() ? "unknown" : out;
}

void Worker::progress() {
  while (!stopping_.load(std::memory_order_relaxed)) {
    host::Spin spin(kEagerNs, kSpinNs);
    bool busy = false;
    while (!stopping_.load(std::memory_order_relaxed)) {
      // A poller progresses the worker itself: this thread takes nothing, and sleeps until
      // the pollers are gone and the linger has passed.
      if (polled()) break;
      // Another thread holding the turn (finishing a request) is not slept on either: a
      // futex hand-off costs tens of microseconds.
      busy = serve_round();
      if (busy || !spin.spin()) break;
    }
    if (busy || stopping_.load(std::memory_order_relaxed)) continue;
    if (polled()) {
      park_while_polled();
      continue;
    }
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY || inbox_waits()) continue;
    pollfd pfd{efd_, POLLIN, 0};
    // Raised before the awaiters are counted: one that counts itself after this store sees
    // it, one before is woken.
    asleep_.store(1, std::memory_order_seq_cst);
    if (sleep_awaiters_.load(std::memory_order_seq_cst) != 0) host::futex_wake(asleep_);
    ::poll(&pfd, 1, kSleepMs);
    asleep_.store(0, std::memory_order_seq_cst);
    // A sleep's end, timed out or woken: the idle hook looks once more (the agent's frees
    // wait for the values it reports).
    Turn t(*this);
    if (handlers_.idle && !muted_.load(std::memory_order_relaxed)) handlers_.idle();
  }
}

}  // namespace rig::remote::ucx
