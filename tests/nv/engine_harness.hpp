// The engine tests' world: a Space of host buffers at fixed GPU addresses, a channel's ring,
// USERD and error notifier, and push buffers written word by word from the class headers'
// field definitions (clc56f.h NVC56F_DMA_*: SEC_OP 31:29, COUNT 28:16, SUBCHANNEL 15:13,
// ADDRESS 11:0 in dwords; GP entries NVC56F_GP_ENTRY0/1).
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "decode.hpp"
#include "engine.hpp"

namespace nv_test {

using namespace rig::sim::nv;

// Host buffers at GPU addresses; a buffer added read-only refuses writes.
class Test_space : public Space {
 public:
  std::byte* add(std::uint64_t va, std::size_t bytes, bool writable = true) {
    std::lock_guard lk(m_);
    auto& b = buffers_[va];
    b.bytes.assign(bytes, std::byte{0});
    b.writable = writable;
    return b.bytes.data();
  }
  std::optional<rig::ptx::Mapping> map(std::uint64_t address, std::uint64_t size, bool write) override {
    std::lock_guard lk(m_);
    auto it = buffers_.upper_bound(address);
    if (it == buffers_.begin()) return std::nullopt;
    --it;
    auto& b = it->second;
    const std::uint64_t end = it->first + b.bytes.size();
    if (address + size > end || address + size < address || (write && !b.writable)) return std::nullopt;
    return rig::ptx::Mapping{it->first, b.bytes.size(), b.bytes.data()};
  }
  // Words of 4 and 8 bytes are read and written atomically, as the engine reads and
  // writes semaphores while the test runs.
  template <class T>
  T get(std::uint64_t va) {
    auto m = map(va, sizeof(T), false);
    REQUIRE(m);
    std::byte* p = m->host + (va - m->base);
    T v;
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
      using Word = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
      const Word bits = std::atomic_ref<Word>(*reinterpret_cast<Word*>(p)).load();
      std::memcpy(&v, &bits, sizeof v);
    } else {
      std::memcpy(&v, p, sizeof v);
    }
    return v;
  }
  template <class T>
  void set(std::uint64_t va, T v) {
    auto m = map(va, sizeof(T), false);
    REQUIRE(m);
    std::byte* p = m->host + (va - m->base);
    if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
      using Word = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
      Word bits;
      std::memcpy(&bits, &v, sizeof bits);
      std::atomic_ref<Word>(*reinterpret_cast<Word*>(p)).store(bits);
    } else {
      std::memcpy(p, &v, sizeof v);
    }
  }

 private:
  struct Buffer {
    std::vector<std::byte> bytes;
    bool writable = true;
  };
  std::mutex m_;
  std::map<std::uint64_t, Buffer> buffers_;
};

// Method headers as clc56f.h defines their fields.
inline std::uint32_t header(std::uint32_t sec_op, std::uint32_t subchannel, std::uint32_t method, std::uint32_t count) {
  return (sec_op << 29) | (count << 16) | (subchannel << 13) | (method >> 2);
}
inline std::uint32_t inc(std::uint32_t sub, std::uint32_t method, std::uint32_t count) { return header(1, sub, method, count); }
inline std::uint32_t non_inc(std::uint32_t sub, std::uint32_t method, std::uint32_t count) {
  return header(3, sub, method, count);
}
inline std::uint32_t immediate(std::uint32_t sub, std::uint32_t method, std::uint32_t data) {
  return header(4, sub, method, data);
}
inline std::uint32_t inc_once(std::uint32_t sub, std::uint32_t method, std::uint32_t count) {
  return header(5, sub, method, count);
}

// Host methods (clc56f.h / clc86f.h).
constexpr std::uint32_t SET_OBJECT = 0x00, NON_STALL_INTERRUPT = 0x20, SEM_ADDR_LO = 0x5c, SEM_EXECUTE = 0x6c,
                        WFI = 0x78;
// SEM_EXECUTE fields.
constexpr std::uint32_t OP_ACQUIRE = 0, OP_RELEASE = 1, OP_ACQ_STRICT_GEQ = 2, OP_ACQ_CIRC_GEQ = 3, OP_REDUCTION = 6;
constexpr std::uint32_t RELEASE_WFI = 1u << 20, PAYLOAD_64 = 1u << 24, RELEASE_TIMESTAMP = 1u << 25;

// Addresses of the test world.
constexpr std::uint64_t ring_va = 0x10000, pb_va = 0x100000, sem_va = 0x200000, data_va = 0x400000;
constexpr std::uint32_t ring_entries = 64;
constexpr std::size_t pb_bytes = 0x40000;

struct Channel {
  Test_space space;
  std::vector<std::byte> userd = std::vector<std::byte>(0x200);
  std::vector<std::byte> notifier = std::vector<std::byte>(16);
  std::byte* ring = nullptr;
  std::byte* pb = nullptr;
  std::size_t pb_used = 0;
  std::uint32_t put = 0;
  std::uint64_t clock = 1000;

  std::mutex m;
  std::condition_variable cv;
  std::vector<std::pair<std::uint32_t, std::string>> stops;
  int nonstalls = 0;
  std::unique_ptr<Engine> engine;

  explicit Channel(Engine_kind kind = Engine_kind::compute, std::uint32_t channel_class = hopper_channel_gpfifo_a,
                   const rig::sim::nv::Code* code = nullptr) {
    ring = space.add(ring_va, ring_entries * 8);
    pb = space.add(pb_va, pb_bytes);
    space.add(sem_va, 0x1000);
    Channel_setup s;
    s.name = kind == Engine_kind::copy ? "channel 2 (copy)" : "channel 1 (compute)";
    s.kind = kind;
    s.channel_class = channel_class;
    s.space = &space;
    s.userd = userd.data();
    s.gpfifo_va = ring_va;
    s.gpfifo_entries = ring_entries;
    s.error_notifier = notifier.data();
    s.code = code;
    s.nonstall = [this] {
      std::lock_guard lk(m);
      ++nonstalls;
      cv.notify_all();
    };
    s.stopped = [this](std::uint32_t xid, const std::string& why) {
      std::lock_guard lk(m);
      stops.emplace_back(xid, why);
      cv.notify_all();
    };
    s.clock_ns = [this] { return clock; };
    engine = std::make_unique<Engine>(std::move(s));
  }

  std::uint32_t userd_word(std::size_t offset) {
    return std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(userd.data() + offset)).load();
  }
  std::uint32_t gp_get() { return userd_word(0x88); }

  // Writes a GP entry of raw words at the next ring slot and rings the doorbell.
  void entry(std::uint32_t w0, std::uint32_t w1, bool ring_doorbell = true) {
    std::memcpy(ring + 8 * put, &w0, 4);
    std::memcpy(ring + 8 * put + 4, &w1, 4);
    put = (put + 1) % ring_entries;
    std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(userd.data() + 0x8c)).store(put);
    if (ring_doorbell) engine->doorbell();
  }
  // Copies `words` into the push buffer and submits them as one segment (GP_ENTRY0_GET 31:2,
  // GP_ENTRY1 GET_HI 7:0 and LENGTH 30:10).
  std::uint64_t segment_at(const std::vector<std::uint32_t>& words) {
    const std::uint64_t va = pb_va + pb_used;
    std::memcpy(pb + pb_used, words.data(), words.size() * 4);
    pb_used += (words.size() * 4 + 63) / 64 * 64;
    return va;
  }
  void submit(const std::vector<std::uint32_t>& words, bool ring_doorbell = true) {
    const std::uint64_t va = segment_at(words);
    entry(static_cast<std::uint32_t>(va), static_cast<std::uint32_t>(va >> 32) | (static_cast<std::uint32_t>(words.size()) << 10),
          ring_doorbell);
  }
  // Waits (up to 10 s) until the engine consumed every entry or stopped; a stopped engine's
  // hook has run by then (the engine marks itself stopped first, and calls the hook after).
  bool idle() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (engine->stopped()) {
        std::unique_lock lk(m);
        return cv.wait_until(lk, until, [&] { return !stops.empty(); });
      }
      if (gp_get() == put) return true;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return false;
  }
  // Waits (up to 10 s) until the engine has run `n` methods: with an acquire as method n + 1,
  // the engine is then inside it.
  bool ran(std::uint64_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (engine->methods() < n) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
  }
  // Waits for the stopped hook; returns its (xid, why).
  std::pair<std::uint32_t, std::string> stop() {
    std::unique_lock lk(m);
    cv.wait_for(lk, std::chrono::seconds(10), [&] { return !stops.empty(); });
    REQUIRE(!stops.empty());
    return stops.front();
  }
  std::uint32_t notifier_info32() {
    std::uint32_t v;
    std::memcpy(&v, notifier.data() + 8, 4);
    return v;
  }
  std::uint16_t notifier_u16(std::size_t at) {
    std::uint16_t v;
    std::memcpy(&v, notifier.data() + at, 2);
    return v;
  }
  std::uint64_t notifier_stamp() {
    std::uint64_t v;
    std::memcpy(&v, notifier.data(), 8);
    return v;
  }
};

// SEM_ADDR_LO, SEM_ADDR_HI, SEM_PAYLOAD_LO, SEM_PAYLOAD_HI, SEM_EXECUTE in one increasing run.
inline std::vector<std::uint32_t> semaphore(std::uint64_t va, std::uint64_t payload, std::uint32_t execute,
                                            std::uint32_t sub = 0) {
  return {inc(sub, SEM_ADDR_LO, 5), static_cast<std::uint32_t>(va), static_cast<std::uint32_t>(va >> 32),
          static_cast<std::uint32_t>(payload), static_cast<std::uint32_t>(payload >> 32), execute};
}

inline std::vector<std::uint32_t> operator+(std::vector<std::uint32_t> a, const std::vector<std::uint32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace nv_test
