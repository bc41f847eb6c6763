// thread_driver.hpp — a driver built outside rig, against its installed headers alone: the
// "thread device", host memory whose one queue runs copies on a thread of its own, as a GPU's
// copy engine runs them beside the host. It is the fake driver's skeleton (rig's
// tests/support/fake_driver.cpp) grown into a device that runs by itself.
//
// The device: queue "COPY:0" {Copy, Fill}, its copy engine. Memory is host memory aligned to
// 64 bytes, whose device address is its host address; the host addresses Mapped and Pinned
// regions only, so that, as on a GPU, rig moves the bytes of Device memory through the
// device's own copies (staging through host memory, which it maps as it is). A fill's
// function is called during submit; a copy is queued for the device's thread, which runs the
// values in order, each once the words of its waits show their values (its queue waits for
// every producer), and then stores the value into the timeline word. Its ring holds
// `ring_values` values: room answers LATER while it is full. It loads no code.
#pragma once

#include <rig/edge.hpp>

#include <cstdint>
#include <string>

namespace example {

struct ThreadOptions {
  std::uint32_t ring_values = 64;  // values in flight at most
  std::uint32_t most_boxes = 256;  // boxes a copy part may hold
};

// An opener of the thread device `name`. Its Opener::rig_version is the version of the rig
// headers this file was compiled with, which rig::open checks.
rig::edge::Opener<> thread_opener(std::string name = "THREAD:0", ThreadOptions options = {});

}  // namespace example
