// What the remote tests share.
#pragma once

#include <chrono>
#include <thread>

namespace rig::remote::test {

// True once f() is, polled every millisecond; false if it is not within `limit`.
template <class F>
bool eventually(F f, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace rig::remote::test
