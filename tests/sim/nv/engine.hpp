// engine.hpp — one GPFIFO channel's engine on its own thread: the PBDMA that fetches GP
// entries and decodes methods, the host methods, and the copy (C8B5/C6B5) or compute
// (CBC0/C6C0) class bound on it. Asynchronous as hardware is: a doorbell wakes it, it runs
// until GPGet reaches GPPut, then sleeps.
#pragma once

#include "gpu.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace rig::sim::nv {

class Engine {
 public:
  // Starts the channel's thread. `setup`'s pointers outlive the engine.
  explicit Engine(Channel_setup setup);
  // Stops the thread after the method it is in.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // An engine object of `class_id` was allocated under the channel: SET_OBJECT may name it.
  void allow(std::uint32_t class_id);
  // The channel's work-submit token was written to the usermode page's doorbell.
  void doorbell();
  // While held, the engine takes no new GP entry and sleeps; hold(true) returns once the
  // entry it was in is done, or, when it waits on a semaphore acquire, once it has set that
  // wait aside: after hold(false) it takes the acquire up again, with the methods of the
  // entry before it not run twice (as a preempted PBDMA resumes where it was).
  void hold(bool held);

  // The channel stopped on an error (and runs nothing more until destroyed).
  bool stopped() const;
  // Methods decoded, kernels launched, PTX instructions run, bytes copied, so far.
  std::uint64_t methods() const;
  std::uint64_t launches() const;
  std::uint64_t instructions() const;
  std::uint64_t bytes_copied() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rig::sim::nv
