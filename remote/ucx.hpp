// ucx.hpp — the remote part's one seam to UCX: a worker with its progress thread, which
// sends and receives the protocol's messages as active messages on endpoints, accepts
// connections on a listener and connects to one. The client and the agent both use it; no
// other file of rig calls UCX.
#pragma once

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
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

// The bytes of a data message, as UCX holds them for its handler: taken into their place by
// Worker::take, or let go by Worker::drop; Worker::keep hands them to a later caller.
class Payload {
 public:
  std::size_t length() const { return length_; }

 private:
  friend class Worker;
  void* desc_ = nullptr;                  // a rendezvous's descriptor: UCX fetches the bytes
  const std::byte* eager_ = nullptr;      // bytes that came with the header
  std::shared_ptr<std::vector<std::byte>> owned_;  // a kept payload's copy of them
  std::size_t length_ = 0;
  bool settled_ = false;                  // taken or dropped
};

// What a worker tells its owner. The handlers run one at a time, in the order UCX delivered
// the events, on whichever thread holds the worker's turn (its progress thread, or a thread
// in poll()), outside UCX's own callbacks: they may send, close endpoints and block.
struct Handlers {
  // A whole message from `from` (the endpoint to it).
  std::function<void(ucp_ep_h from, std::span<const std::byte> message)> message;
  // `ep` failed: its peer went or the connection broke.
  std::function<void(ucp_ep_h ep, ucs_status_t status)> error;
  // A connection accepted on the listener: its endpoint.
  std::function<void(ucp_ep_h ep)> accepted;
  // Called, where set, at the start of each serving round (serve_round: the progress
  // thread's spin, or a thread that serves the worker while it waits), before UCX's
  // progress: true if it did something, which keeps the thread spinning. The agent sends
  // Reached from it, so that a value reached while a thread serves needs no other thread.
  std::function<bool()> idle;
  // A data message from `from`: its header (a protocol message) and its bytes, which wait in
  // UCX until the handler takes them (Worker::take) or lets them go (Worker::drop); one of
  // the two must be called before the handler returns.
  std::function<void(ucp_ep_h from, std::span<const std::byte> header, Payload& bytes)> data;
};


// A UCX context and worker, and the thread that progresses it: it spins for a short while
// after each event, then sleeps on the worker's event fd until UCX or a send wakes it. The
// worker is UCX's thread-safe kind (UCS_THREAD_MODE_MULTI, whose lock spins), so any thread
// may send.
class Worker {
 public:
  // The linger, unless the owner asks for another: a thread's next wait in a stream of
  // launches and waits comes within it.
  static constexpr std::chrono::microseconds kLinger{200};
  // Made with the keepalive that notices a dead peer within 2 s (UCX_KEEPALIVE_INTERVAL may
  // override it), for active messages (a large one by rendezvous, over UCX's RMA lanes); throws
  // std::runtime_error with UCX's reason when UCX cannot start.
  // `linger`: how long the progress thread sleeps on once the last poller went (Polling), at
  // least 10 µs.
  explicit Worker(Handlers handlers, std::chrono::nanoseconds linger = kLinger);
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
  // Closes an endpoint, dropping what it has not sent. Handlers may call it: they run
  // outside UCX's callbacks.
  void close(ucp_ep_h ep);
  // Progresses the worker once and runs the handlers of what it delivered, if no other
  // thread holds the worker's turn; true if it did. A waiting thread calls it while it
  // spins, so that a reply needs no hand-off from the progress thread.
  bool poll();
  // One round of serving the worker, the progress thread's spin being made of them: while no
  // other thread holds the worker's turn, calls the idle hook, then progresses the worker and
  // runs the handlers of what it delivered. True if it did something. Another thread calls
  // it between begin_polling() and end_polling(), so that the progress thread stands aside
  // meanwhile.
  // The host device's dispatcher calls it while it waits for work on an agent
  // (cpu::DispatcherIdle), so that a value is received, run and reported on that one thread.
  bool serve_round();
  // Wakes the progress thread if it sleeps; it then calls the idle hook.
  void wake();
  // Whether the progress thread spins now, having called the idle hook within `within`: a
  // thread that watches for what the hook also handles may then leave it to the hook.
  bool spinning(std::chrono::nanoseconds within) const;
  // Sleeps until the progress thread sleeps on the event fd, or `most` has passed.
  void await_sleep(std::chrono::nanoseconds most);
  // While one is held, a thread polls the worker itself (poll()) while it spins for a reply:
  // the progress thread then sleeps, neither spinning beside it nor waking on the event fd
  // for what the poller takes, either of which on a machine with more runnable threads than
  // cores would take the poller's CPU. It sleeps on for the linger after the last one goes (a
  // thread that found its reply usually polls again within it, and a wake-up costs a
  // futex's system call and, on two cores, often the CPU of the thread that made it), then
  // takes what came meanwhile; a thread that will block on what the progress thread
  // delivers calls resume() first. While threads poll, it looks once a millisecond whether
  // the last one went, so it takes over between the linger and a millisecond after that.
  class Polling {
   public:
    explicit Polling(Worker& w) : w_(w) { w_.begin_polling(); }
    ~Polling() { w_.end_polling(); }
    Polling(const Polling&) = delete;

   private:
    Worker& w_;
  };
  // A Polling's two halves, for a thread whose polling does not follow one scope (a host
  // device's dispatcher that serves the worker in rounds while it waits: serve_round()).
  void begin_polling();
  void end_polling();
  // Wakes the progress thread where it sleeps because of pollers, now or in the linger.
  void resume();
  // After it returns no handler runs again; the progress thread only progresses UCX.
  void mute();
  // Mutes the worker and ends its progress thread (waiting for it), leaving UCX's objects to
  // the destructor: a process that exits with the worker alive calls it before UCX's own
  // library destructors run, which the thread would otherwise race. Threads that send or
  // poll still may; nothing progresses the worker between their calls.
  void halt();
  // The transports the endpoint's lanes use, as UCX prints them ("tcp/lo", "posix/memory"),
  // comma-separated and each once.
  std::string transports(ucp_ep_h ep);

  // --- bytes beside a message ---

  // Sends `header` (a protocol message) with `length` bytes from `bytes` as their data, by
  // rendezvous: the receiver takes them straight into their place, zero-copy from `memh`'s
  // registered memory where the transport can. The header is copied; the bytes must stay
  // as they are until the receiver took them. Started, not finished: finish() waits, or
  // forget() leaves the request to complete on its own. Null where it finished at once.
  ucs_status_ptr_t send_data(ucp_ep_h ep, std::span<const std::byte> header, const void* bytes, std::size_t length,
                             ucp_mem_h memh);
  // Lets a started request complete on its own (its header's buffer goes back then).
  void forget(ucs_status_ptr_t request);
  // Takes a data message's bytes into `into` (payload.length() of them; `memh` registers
  // that memory, or null), progressing the worker on this thread until they are there:
  // UCS_OK or UCX's error. Handlers call it.
  ucs_status_t take(Payload& payload, void* into, ucp_mem_h memh);
  // Starts taking them, as take() does, without waiting: a request that done() or finish()
  // completes, or a status (UCS_PTR_STATUS) where they are there already or UCX refused.
  ucs_status_ptr_t take_later(Payload& payload, void* into, ucp_mem_h memh);
  // Lets a data message's bytes go untaken.
  void drop(Payload& payload);
  // Keeps a data message's bytes in UCX past its handler: the payload returned, which its
  // owner takes or drops later (the one given counts as settled).
  Payload keep(Payload& payload);

  // --- registered memory ---

  // `bytes` of this process's memory from `address`, registered with UCX (ucp_mem_map), so
  // that data messages send from it and take into it without registering it each time:
  // the registration, or Error with UCX's reason.
  Result<ucp_mem_h> register_memory(void* address, std::size_t bytes);
  void unregister(ucp_mem_h memh);
  // Progresses the worker on this thread until `request` is done, and frees it: UCS_OK or
  // UCX's error. Not from inside UCX's callbacks (handlers may call it). A thread that does
  // not hold the worker's turn progresses only while it holds it, a round at a time, so that
  // no two threads progress at once (they would fight over UCX's spin lock, which on a
  // loaded machine costs more than the transfer) and the progress thread's rounds go on
  // between its own.
  ucs_status_t finish(ucs_status_ptr_t request);
  // Whether a started request is done, without progressing the worker (the progress
  // thread's rounds do): nullopt while it runs, else its status, the request freed. Any
  // thread may ask.
  std::optional<ucs_status_t> done(ucs_status_ptr_t request);

 private:
  struct Buffer;
  struct Event;
  static ucs_status_t on_message(void* arg, const void* header, std::size_t header_length, void* data,
                                 std::size_t length, const ucp_am_recv_param_t* param);
  static void on_rendezvous(void* request, ucs_status_t status, std::size_t length, void* user_data);
  static void on_sent(void* request, ucs_status_t status, void* user_data);
  static void on_data_sent(void* request, ucs_status_t status, void* user_data);
  static ucs_status_t on_data(void* arg, const void* header, std::size_t header_length, void* data,
                              std::size_t length, const ucp_am_recv_param_t* param);
  static void on_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static void on_connection(ucp_conn_request_h request, void* arg);
  void progress();
  // Whether a thread polls, or the last one went less than the linger ago.
  bool polled() const;
  // The progress thread's sleep while threads poll and the linger after, or until resume().
  void park_while_polled();
  // The worker's turn, held by scope; it records its holder, so that finish() and close()
  // on that thread progress without taking it again.
  class Turn;
  bool holding_turn() const { return holder_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }
  // One round of ucp_worker_progress under the turn: this thread's if it holds it, else
  // taken if free; false if another thread holds it (and progresses).
  bool progress_once();
  // One turn: progress, then the handlers of what it delivered (turn_ held, the caller's).
  // The number of events.
  unsigned turn();
  // Keeps what a UCX callback delivered for the turn's handlers.
  void deliver(Event e);
  // Whether delivered events wait for a turn. Read under the inbox's lock, which no call into
  // UCX is made under: UCX holds its worker's lock when its callbacks deliver.
  bool inbox_waits();
  std::unique_ptr<Buffer> buffer();
  void give_back(Buffer* b);

  Handlers handlers_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  int efd_ = -1;
  std::mutex turn_;             // who progresses and runs the handlers
  std::atomic<std::thread::id> holder_{};  // the thread that holds turn_, if any
  std::mutex inbox_mutex_;
  std::vector<Event> inbox_;    // delivered by UCX's callbacks, not yet handed over
  std::vector<Event> handing_;  // being handed over (turn_)
  std::vector<ucs_status_ptr_t> forgotten_;  // sends let go of (inbox_mutex_)
  std::vector<ucs_status_ptr_t> reaping_;    // those being freed (turn_)
  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<Buffer>> pool_;  // send buffers no send holds
  std::atomic<std::uint32_t> pollers_{0};  // threads holding a Polling
  std::uint64_t linger_ns_;
  std::atomic<std::uint64_t> left_at_{0};  // when the last one went (rig_now_ns)
  std::atomic<std::uint32_t> resumes_{0};  // the futex the parked progress thread sleeps on
  std::atomic<bool> parked_{false};        // it sleeps there
  std::atomic<std::uint64_t> idle_at_{0};  // when its spin last called the idle hook (rig_now_ns)
  std::atomic<std::uint32_t> asleep_{0};   // 1 while it sleeps on the event fd
  std::atomic<std::uint32_t> sleep_awaiters_{0};  // threads in await_sleep
  std::atomic<bool> muted_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace rig::remote::ucx
