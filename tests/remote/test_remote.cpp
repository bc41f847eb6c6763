// Remote devices against an agent in this process, over UCX on loopback: what a client
// sees (rig/remote.hpp), and what the agent admits.
#include <doctest/doctest.h>

#include <rig/profile.hpp>
#include <rig/remote.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include "fake_driver.hpp"
#include "faulty.hpp"
#include "host_driver.hpp"
#include "maps.hpp"
#include "support.hpp"
#include "ucx.hpp"
#include "wire.hpp"

using namespace rig;
using namespace std::chrono_literals;
using rig::remote::test::eventually;

namespace {

constexpr const char* kToken = "remote-test-token";

// The agent every test here shares.
remote::Agent& agent() {
  static std::unique_ptr<remote::Agent> a = [] {
    auto started = remote::Agent::start({"127.0.0.1:0", {}, kToken});
    REQUIRE_MESSAGE(started.has_value(), started.error());
    return std::move(*started);
  }();
  return *a;
}

Device open_remote(const std::string& device, std::string token = kToken) {
  static int n = 0;
  auto d = open(remote::opener(agent().address(), device, fmt::format("{}@test~{}", device, n++), token));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  return *d;
}

// Whether d still works: 4096 bytes of `c` copied to it and back.
bool round_trips(const Device& d, char c) {
  Buffer x = Buffer::create(d, 4096), back = Buffer::create(host(), 4096);
  Buffer::copy(Buffer::of_string(std::string(4096, c)), x);
  Buffer::copy(x, back);
  bool same = false;
  back.read<char>([&](std::span<const char> s) {
    same = std::all_of(s.begin(), s.end(), [&](char y) { return y == c; });
  });
  return same;
}


}  // namespace

TEST_CASE("a client that proves the token sees the agent's devices") {
  auto names = remote::devices(agent().address(), kToken);
  REQUIRE_MESSAGE(names.has_value(), names.error());
  CHECK(*names == std::vector<std::string>{"CPU", "MEM"});
}

TEST_CASE("a wrong token is refused, and the agent serves the next client") {
  const auto dropped = agent().dropped();
  auto names = remote::devices(agent().address(), "not the token");
  REQUIRE_FALSE(names.has_value());
  CHECK(names.error() == fmt::format("{} refused the token: wrong token", agent().address()));
  CHECK(agent().dropped() > dropped);
  CHECK(remote::devices(agent().address(), kToken).has_value());
}

TEST_CASE("a device the agent does not serve does not open, naming those it serves") {
  auto d = open(remote::opener(agent().address(), "GPU:3", "GPU:3@test", kToken));
  REQUIRE_FALSE(d.has_value());
  CHECK(d.error() == fmt::format("GPU:3@test: {} serves no device GPU:3; it serves CPU, MEM", agent().address()));
}

TEST_CASE("a remote device's facts are its agent's, with the host addressing none of its memory and its first queue running fills") {
  Device d = open_remote("CPU");
  const auto& f = d.facts();
  CHECK(f.arch == host().facts().arch);
  CHECK_FALSE(f.host_addresses);
  CHECK(f.maps_host);
  CHECK(f.queues.size() == 1);
  CHECK(f.queues[0].runs == (std::vector<Kind>{Kind::Launch, Kind::Copy, Kind::Fill}));
  CHECK((!f.waits.stores && !f.waits.hosts));
  CHECK(static_cast<bool>(f.word == &rig_words[d.index()]));
}

TEST_CASE("bytes written to remote memory read back, through copies both ways") {
  for (const char* name : {"CPU", "MEM"}) {
    CAPTURE(name);
    Device d = open_remote(name);
    Buffer in = Buffer::create(host(), 1 << 20), out = Buffer::create(host(), 1 << 20);
    in.write<std::uint32_t>([](std::span<std::uint32_t> x) { std::iota(x.begin(), x.end(), 7u); });
    Buffer b = Buffer::create(d, 1 << 20);
    Buffer::copy(in, b);
    Buffer c = Buffer::create(d, 1 << 20);
    Buffer::copy(b, c);
    Buffer::copy(c, out);
    bool same = false;
    out.read<std::uint32_t>([&](std::span<const std::uint32_t> x) {
      same = x.size() == (1 << 18) && x[0] == 7 && x[(1 << 18) - 1] == 7 + (1 << 18) - 1;
    });
    CHECK(same);
    CHECK(agent().held_bytes() >= 2u << 20);
  }
}

TEST_CASE("memory a client freed returns to the agent's device") {
  const auto before = agent().held_bytes();
  {
    Device d = open_remote("MEM");
    Buffer b = Buffer::create(d, 1 << 16);
    Buffer::copy(Buffer::of_string(std::string(1 << 16, 'x')), b);
    CHECK(agent().held_bytes() >= before + (1 << 16));
    d.close();
  }
  CHECK(eventually([&] { return agent().held_bytes() <= before; }, 2000ms));
}

TEST_CASE("malformed and truncated messages from a raw UCX client are dropped, and the agent serves on") {
  std::atomic<int> welcomes{0};
  auto where = remote::ucx::parse_address(agent().address());
  REQUIRE(where.has_value());
  remote::ucx::Worker raw({[&](ucp_ep_h, std::span<const std::byte>) { ++welcomes; }, [](ucp_ep_h, ucs_status_t) {},
                           [](ucp_ep_h) {}, {}, {}});
  auto ep = raw.connect(*where);
  REQUIRE(ep.has_value());
  const auto dropped = agent().dropped();
  // Before the token: a well-formed request, which is dropped unanswered.
  auto alloc = remote::wire::encode(remote::wire::Message{remote::wire::Alloc{1, 0, 0, 4096}});
  raw.send(*ep, alloc);
  // Junk, a truncated hello and one whose length lies.
  const std::byte junk[5] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  raw.send(*ep, junk);
  auto hello = remote::wire::encode(remote::wire::Message{remote::wire::Hello{remote::wire::kVersion, kToken}});
  raw.send(*ep, std::span(hello).first(hello.size() - 3));
  auto lying = hello;
  lying[8] = std::byte{0xff};
  raw.send(*ep, lying);
  CHECK(eventually([&] { return agent().dropped() >= dropped + 4; }, 2000ms));
  CHECK(welcomes.load() == 0);
  // The proper hello is still answered, and another client is served.
  raw.send(*ep, hello);
  CHECK(eventually([&] { return welcomes.load() == 1; }, 2000ms));
  Device d = open_remote("MEM");
  Buffer b = Buffer::create(d, 4096), back = Buffer::create(host(), 4096);
  Buffer::copy(Buffer::of_string(std::string(4096, '*')), b);
  Buffer::copy(b, back);
  std::uint8_t first = 0;
  back.read<std::uint8_t>([&](std::span<const std::uint8_t> x) { first = x[0]; });
  CHECK(first == '*');
  raw.close(*ep);
}

TEST_CASE("a token file that others may read is refused; one only its owner reads gives its first line") {
  char path[] = "/tmp/rig-token-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "from-the-file\nsecond line\n", 26) == 26);
  ::close(fd);
  const char* before = std::getenv("RIG_TOKEN");
  const std::string saved = before ? before : "";
  ::unsetenv("RIG_TOKEN");
  ::setenv("RIG_TOKEN_FILE", path, 1);
  ::chmod(path, 0644);
  auto open_to_all = remote::token();
  ::chmod(path, 0600);
  auto owner_only = remote::token();
  ::unsetenv("RIG_TOKEN_FILE");
  auto none = remote::token();
  auto agent = remote::Agent::start({"127.0.0.1:0", {}, ""});  // an agent refuses to start without one
  if (before) ::setenv("RIG_TOKEN", saved.c_str(), 1);
  ::unlink(path);
  REQUIRE_FALSE(open_to_all.has_value());
  CHECK(open_to_all.error() == fmt::format("the token file {} may be read by others (mode 644); chmod 600 it", path));
  REQUIRE(owner_only.has_value());
  CHECK(*owner_only == "from-the-file");
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().starts_with("no token"));
  REQUIRE_FALSE(agent.has_value());
  CHECK(agent.error().starts_with("no token"));
}

namespace {

// Writes byte i of b as (i * 31 + seed) mod 256.
void write_pattern(Buffer& b, std::size_t seed) {
  b.write<std::uint8_t>([&](std::span<std::uint8_t> x) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::uint8_t(i * 31 + seed);
  });
}

// How many bytes of b differ from write_pattern's.
std::size_t unlike_pattern(Buffer& b, std::size_t seed) {
  std::size_t wrong = 0;
  b.read<std::uint8_t>([&](std::span<const std::uint8_t> x) {
    for (std::size_t i = 0; i < x.size(); ++i) wrong += x[i] != std::uint8_t(i * 31 + seed);
  });
  return wrong;
}

}  // namespace

TEST_CASE("copies with host memory travel as Data: bytes match both ways, below and above the rendezvous threshold") {
  Device d = open_remote("MEM");
  // UCX's tcp transport sends up to 8 KiB in one message and larger ones by rendezvous
  // (ucx_info -d: am_bcopy <= 8K, am_zcopy <= 64K).
  for (std::size_t n : {std::size_t(1), std::size_t(100), std::size_t(8191), std::size_t(8193), std::size_t(65537),
                        std::size_t(1) << 20, (std::size_t(4) << 20) + 3}) {
    CAPTURE(n);
    Buffer in = Buffer::create(host(), n), out = Buffer::create(host(), n), remote = Buffer::create(d, n);
    write_pattern(in, n);
    out.write<std::uint8_t>([](std::span<std::uint8_t> x) { std::fill(x.begin(), x.end(), 0); });
    Buffer::copy(in, remote);
    Buffer::copy(remote, out);
    CHECK(unlike_pattern(out, n) == 0);
  }
}

TEST_CASE("a remote device's Pinned memory of 64 KiB or more is pages of its own, as the host device's; all of it is "
          "on a page, and copies fill it and read it") {
  Device d = open_remote("CPU");
  for (std::size_t n : {std::size_t(100), std::size_t(4096), std::size_t(64) << 10, (std::size_t(4) << 20) + 5}) {
    CAPTURE(n);
    Buffer pinned = Buffer::create(d, n, Memory::Pinned), there = Buffer::create(d, n);
    const auto at = pinned.host_address();
    REQUIRE(at.has_value());
    CHECK(*at % 4096 == 0);
    const std::string mapping = rig::test::mapping_of(*at);
    CAPTURE(mapping);
    // Copies from the agent's device into anonymous heap pages ran at two-thirds of the
    // rate into a memfd's pages: large Pinned memory is the latter, as rig's host memory is.
    CHECK((mapping.find("memfd:rig-host") != std::string::npos) == (n >= (std::size_t(64) << 10)));
    Buffer in = Buffer::create(host(), n);
    write_pattern(in, n);
    Buffer::copy(in, there);
    Buffer::copy(there, pinned);
    CHECK(unlike_pattern(pinned, n) == 0);
    write_pattern(pinned, n + 1);
    Buffer::copy(pinned, there);
    Buffer::copy(there, in);
    CHECK(unlike_pattern(in, n + 1) == 0);
  }
}

namespace {

// A client that speaks the wire itself, as a malicious one would: of the shared agent, or of
// the agent at `address`.
class RawClient {
 public:
  explicit RawClient(std::string address = {})
      : worker_({[this](ucp_ep_h, std::span<const std::byte> m) {
                   wait_while_held();
                   auto decoded = remote::wire::decode(m);
                   std::lock_guard g(mutex_);
                   if (decoded) got_.push_back(std::move(*decoded));
                 },
                 [](ucp_ep_h, ucs_status_t) {}, [](ucp_ep_h) {}, {},
                 [this](ucp_ep_h, std::span<const std::byte> header, remote::ucx::Payload& bytes) {
                   // The agent's Data: their headers and bytes, in the order they came.
                   wait_while_held();
                   std::vector<std::byte> into(bytes.length());
                   if (worker_.take(bytes, into.data(), nullptr) != UCS_OK) into.clear();  // a test's check sees it
                   auto decoded = remote::wire::decode(header);
                   std::lock_guard g(mutex_);
                   if (decoded) got_.push_back(std::move(*decoded));
                   taken_.push_back(std::move(into));
                 }}) {
    auto where = remote::ucx::parse_address(address.empty() ? agent().address() : address);
    REQUIRE(where.has_value());
    auto ep = worker_.connect(*where);
    REQUIRE(ep.has_value());
    ep_ = *ep;
    send(remote::wire::Hello{remote::wire::kVersion, kToken});
    REQUIRE(next<remote::wire::Welcome>().admitted);
  }
  ~RawClient() {
    release();
    worker_.close(ep_);
  }

  // From hold() to release() the handlers wait, holding the worker's progress thread: the
  // client takes none of the agent's bytes and serves none of its own (a stopped process).
  // A message that comes meanwhile waits, and every one after it.
  void hold() {
    std::lock_guard g(hold_mutex_);
    held_ = true;
  }
  void release() {
    {
      std::lock_guard g(hold_mutex_);
      held_ = false;
    }
    hold_cv_.notify_all();
  }

  template <class T>
  void send(const T& m) {
    std::vector<std::byte> b;
    remote::wire::encode(m, b);
    worker_.send(ep_, b);
  }
  // Sends d with its bytes from `bytes`, which must stay until the agent took them (it may
  // take them only once the value's Submit came, as rig's client sends them).
  void send_data(const remote::wire::Data& d, const void* bytes) {
    std::vector<std::byte> b;
    remote::wire::encode(d, b);
    worker_.forget(worker_.send_data(ep_, b, bytes, std::size_t(d.length), nullptr));
  }
  // The next message of type T the agent sent (within 5 s).
  template <class T>
  T next() {
    T out{};
    const bool came = eventually(
        [&] {
          std::lock_guard g(mutex_);
          for (auto it = got_.begin(); it != got_.end(); ++it)
            if (auto* t = std::get_if<T>(&*it)) {
              out = std::move(*t);
              got_.erase(it);
              return true;
            }
          return false;
        },
        5000ms);
    REQUIRE_MESSAGE(came, "the agent sent no message of the type awaited within 5 s");
    return out;
  }
  // The first message of type T the agent sent and no call took yet, or nullopt.
  template <class T>
  std::optional<T> take() {
    std::lock_guard g(mutex_);
    for (auto it = got_.begin(); it != got_.end(); ++it)
      if (auto* t = std::get_if<T>(&*it)) {
        T out = std::move(*t);
        got_.erase(it);
        return out;
      }
    return std::nullopt;
  }
  // Opens the agent's device of that name: its number.
  std::uint32_t open_device(const std::string& name = "MEM") {
    send(remote::wire::Open{1, name});
    auto o = next<remote::wire::Opened>();
    REQUIRE_MESSAGE(o.ok, o.why);
    return o.device;
  }
  // A region of `bytes` of device memory: its number.
  std::uint64_t alloc(std::uint32_t device, std::uint64_t bytes) {
    send(remote::wire::Alloc{2, device, std::uint32_t(Memory::Device), bytes});
    auto r = next<remote::wire::Reply>();
    REQUIRE_MESSAGE(r.status == remote::wire::kOk, r.why);
    return r.a;
  }
  remote::ucx::Worker& worker() { return worker_; }
  // The bytes of the agent's Data so far, in the order they came.
  std::vector<std::vector<std::byte>> taken() {
    std::lock_guard g(mutex_);
    return taken_;
  }
  // Maps `bytes` of host memory from `host` on the device: the window's region.
  std::uint64_t map(std::uint32_t device, const void* host, std::uint64_t bytes) {
    send(remote::wire::MapHost{3, device, bytes, reinterpret_cast<std::uint64_t>(host)});
    auto mapped = next<remote::wire::Reply>();
    REQUIRE_MESSAGE(mapped.status == remote::wire::kOk, mapped.why);
    return mapped.a;
  }

 private:
  void wait_while_held() {
    std::unique_lock g(hold_mutex_);
    hold_cv_.wait(g, [&] { return !held_; });
  }

  std::mutex mutex_;
  std::vector<remote::wire::Message> got_;
  std::vector<std::vector<std::byte>> taken_;
  std::mutex hold_mutex_;
  std::condition_variable hold_cv_;
  bool held_ = false;
  remote::ucx::Worker worker_;
  ucp_ep_h ep_ = nullptr;
};

// A copy part of the whole of region src into region dst, `bytes` wide.
remote::wire::Part copy_part(std::uint64_t src, std::uint64_t dst, std::uint64_t bytes) {
  remote::wire::Part p;
  p.kind = RIG_KIND_COPY;
  p.src_region = src;
  p.dst_region = dst;
  p.boxes = {remote::wire::Box{0, 0, bytes, 1, bytes, bytes}};
  return p;
}

}  // namespace

namespace {

// Whether another client of the agent at `address` round-trips bytes through its MEM
// device within 2 s, and a raw one opens a device, allocates and is answered a clock.
bool others_served(const std::string& address, const char* name) {
  const auto before = std::chrono::steady_clock::now();
  auto d = open(remote::opener(address, "MEM", name, kToken));
  if (!d) return false;
  RawClient raw(address);
  const auto device = raw.open_device("MEM");
  raw.alloc(device, 4096);
  raw.send(remote::wire::Clock{7});
  return raw.next<remote::wire::Reply>().request == 7 && round_trips(*d, 'o') &&
         std::chrono::steady_clock::now() - before < 2s;
}

// Waits (5 s at most) for the client to be told that its device's word reached v.
bool told_reached(RawClient& client, std::uint64_t v) {
  std::uint64_t reached = 0;
  return eventually([&] {
    while (auto r = client.take<remote::wire::Reached>()) reached = std::max(reached, r->to);
    return reached >= v;
  }, 5000ms);
}

constexpr std::uint64_t kStuckBytes = 1 << 20;  // sent by rendezvous

// An agent serving MEM, and a raw client of it that holds kStuckBytes of the device's memory
// and maps as many of its host memory.
struct StuckRig {
  std::vector<std::byte> host = std::vector<std::byte>(kStuckBytes + 4096);
  std::byte* bytes = reinterpret_cast<std::byte*>((reinterpret_cast<std::uintptr_t>(host.data()) + 4095) &
                                                  ~std::uintptr_t(4095));  // the mapped host memory
  std::unique_ptr<remote::Agent> agent;
  std::string address;
  std::unique_ptr<RawClient> client;
  std::uint32_t device = 0;
  std::uint64_t memory = 0;  // the device's
  std::uint64_t window = 0;  // the mapped host memory's region

  StuckRig() {
    auto served = remote::Agent::start({"127.0.0.1:0", {"MEM"}, kToken, {}});
    REQUIRE_MESSAGE(served.has_value(), served.error());
    agent = std::move(*served);
    address = agent->address();
    client = std::make_unique<RawClient>(address);
    device = client->open_device("MEM");
    memory = client->alloc(device, kStuckBytes);
    window = client->map(device, bytes, kStuckBytes);
  }
  // Value v copies the client's `from` into the device's memory, or that memory back.
  void upload(std::uint64_t v, const std::byte* from, bool timed = false) {
    client->send_data(remote::wire::Data{device, v, window, 0, kStuckBytes}, from);
    client->send(remote::wire::Submit{device, v, {copy_part(window, memory, kStuckBytes)}, {{window, 0, kStuckBytes}}, {},
                                      timed});
  }
  void download(std::uint64_t v, bool timed = false) {
    client->send(remote::wire::Submit{device, v, {copy_part(memory, window, kStuckBytes)}, {}, {{window, 0, kStuckBytes}},
                                      timed});
  }
};

}  // namespace

TEST_CASE("a client that stops taking the bytes its values wrote holds none of the agent's other clients; once it "
          "takes them, its Reached follow") {
  const std::vector<std::byte> filled(kStuckBytes, std::byte{'f'});
  StuckRig rig;
  RawClient& stuck = *rig.client;
  // The device's memory filled with the client's bytes first, while it still takes part.
  rig.upload(1, filled.data());
  REQUIRE(told_reached(stuck, 1));
  // Value 2 copies straight from the device's memory into the client's; value 3, timed,
  // through the window. Each one's bytes wait for a client that takes nothing.
  for (std::uint64_t v : {2, 3}) {
    CAPTURE(v);
    stuck.hold();
    rig.download(v, v == 3);
    std::this_thread::sleep_for(100ms);
    CHECK(others_served(rig.address, v == 2 ? "MEM@beside-a-stuck-client" : "MEM@beside-a-stuck-client-again"));
    CHECK(stuck.taken().size() == v - 2);
    stuck.release();
    REQUIRE(told_reached(stuck, v));
    auto taken = stuck.taken();
    REQUIRE(taken.size() == v - 1);
    CHECK(taken.back() == filled);
  }
}

TEST_CASE("memory of a device stopped while its bytes travel to a client that takes nothing stays until they arrived") {
  const std::vector<std::byte> filled(kStuckBytes, std::byte{'s'});
  StuckRig rig;
  RawClient& stuck = *rig.client;
  const auto held = rig.agent->held_bytes();
  rig.upload(1, filled.data());
  REQUIRE(told_reached(stuck, 1));
  // Value 2's bytes wait for the held client, straight from the device's memory; the device
  // stops and its client frees that memory and the window meanwhile.
  stuck.hold();
  rig.download(2);
  std::this_thread::sleep_for(100ms);
  stuck.send(remote::wire::Stop{8, rig.device, "its client stops it"});
  stuck.send(remote::wire::Free{rig.device, rig.memory});
  stuck.send(remote::wire::Free{rig.device, rig.window});
  std::this_thread::sleep_for(100ms);
  CHECK(rig.agent->held_bytes() == held);  // the memory stays
  stuck.release();
  auto answer = stuck.next<remote::wire::Reply>();
  CHECK(answer.request == 8);
  REQUIRE(eventually([&] { return stuck.taken().size() == 1; }, 5000ms));
  CHECK(stuck.taken()[0] == filled);
  CHECK(eventually([&] { return rig.agent->held_bytes() == held - kStuckBytes; }, 5000ms));
}

TEST_CASE("a client that stops serving the bytes it sent holds none of the agent's other clients; once it serves them, "
          "its value runs on them") {
  StuckRig rig;
  RawClient& stuck = *rig.client;
  // Value 1 sends its bytes straight into the device's memory; value 3, timed, through the
  // window. While each one's are fetched, the client's progress thread is held (by the
  // clock's answer): the fetch waits. Values 2 and 4 bring the device's memory back.
  std::uint64_t request = 10;
  for (char c : {'u', 'w'}) {
    CAPTURE(c);
    static std::vector<std::byte> sent;
    sent.assign(kStuckBytes, std::byte(c));
    const std::uint64_t v = c == 'u' ? 1 : 3;
    stuck.hold();
    stuck.send(remote::wire::Clock{++request});
    std::this_thread::sleep_for(100ms);
    rig.upload(v, sent.data(), c == 'w');
    std::this_thread::sleep_for(100ms);
    CHECK(others_served(rig.address, c == 'u' ? "MEM@beside-a-client-that-serves-nothing"
                                              : "MEM@beside-a-client-that-serves-nothing-again"));
    stuck.release();
    REQUIRE(told_reached(stuck, v));
    rig.download(v + 1);
    REQUIRE(told_reached(stuck, v + 1));
    auto taken = stuck.taken();
    REQUIRE(!taken.empty());
    CHECK(taken.back() == sent);
  }
}

TEST_CASE("a copy whose box runs past its region is refused with the reason, and the agent serves on") {
  RawClient raw;
  const auto device = raw.open_device();
  const auto a = raw.alloc(device, 4096), b = raw.alloc(device, 4096);
  raw.send(remote::wire::Submit{device, 1, {copy_part(a, b, 8192)}, {}, {}});
  auto lost = raw.next<remote::wire::Lost>();
  CHECK(lost.device == device);
  CHECK(lost.why == "value 1: part 0: a copy's boxes run outside their regions");
  // Others go on: a device opened through the public API copies.
  Device d = open_remote("MEM");
  CHECK(round_trips(d, 'k'));
}

TEST_CASE("mapped host memory freed while a copy reads it stays until that copy's value; a later copy of it is refused") {
  RawClient raw;
  const auto device = raw.open_device();
  const auto dst = raw.alloc(device, 4096);
  // 4096 bytes of this process, mapped: the agent keeps a window of them.
  alignas(4096) static std::byte host_bytes[4096];
  std::memset(host_bytes, 'r', sizeof host_bytes);
  const std::uint64_t window = raw.map(device, host_bytes, sizeof host_bytes);
  // The copy of value 1 reads it, its bytes sent ahead; the free comes before the value is reached.
  raw.send_data(remote::wire::Data{device, 1, window, 0, 4096}, host_bytes);
  raw.send(remote::wire::Submit{device, 1, {copy_part(window, dst, 4096)}, {{window, 0, 4096}}, {}});
  raw.send(remote::wire::Free{device, window});
  auto reached = raw.next<remote::wire::Reached>();
  CHECK((reached.from == 0 && reached.to == 1));
  // Value 2 names the freed memory.
  raw.send(remote::wire::Submit{device, 2, {copy_part(window, dst, 4096)}, {{window, 0, 4096}}, {}});
  auto lost = raw.next<remote::wire::Lost>();
  CHECK(lost.why == "value 2: part 0: a copy between regions the client does not hold");
}

TEST_CASE("a value whose Submit comes before its Data waits for them, then runs on the client's bytes") {
  RawClient raw;
  const auto device = raw.open_device();
  const auto dst = raw.alloc(device, 4096);
  alignas(4096) static std::byte host_bytes[4096];
  const std::uint64_t window = raw.map(device, host_bytes, sizeof host_bytes);
  std::memset(host_bytes, 'q', sizeof host_bytes);
  raw.send(remote::wire::Submit{device, 1, {copy_part(window, dst, 4096)}, {{window, 0, 4096}}, {}});
  std::this_thread::sleep_for(50ms);
  CHECK_FALSE(raw.take<remote::wire::Reached>().has_value());  // its bytes have not come
  raw.send_data(remote::wire::Data{device, 1, window, 0, 4096}, host_bytes);
  auto reached = raw.next<remote::wire::Reached>();
  CHECK((reached.from == 0 && reached.to == 1));
  // Value 2 copies them back: the agent sends them as a Data before the Reached.
  raw.send(remote::wire::Submit{device, 2, {copy_part(dst, window, 4096)}, {}, {{window, 0, 4096}}});
  reached = raw.next<remote::wire::Reached>();
  CHECK((reached.from == 1 && reached.to == 2));
  auto data = raw.next<remote::wire::Data>();
  CHECK((data.device == device && data.value == 2 && data.region == window && data.offset == 0 &&
         data.length == 4096));
  auto taken = raw.taken();
  REQUIRE(taken.size() == 1);
  CHECK(std::all_of(taken[0].begin(), taken[0].end(), [](std::byte b) { return b == std::byte{'q'}; }));
}

TEST_CASE("two parts of a value reading one range of mapped host memory each take their own Data") {
  RawClient raw;
  const auto device = raw.open_device();
  const auto one = raw.alloc(device, 4096), two = raw.alloc(device, 4096);
  alignas(4096) static std::byte host_bytes[4096];
  std::memset(host_bytes, 't', sizeof host_bytes);
  const std::uint64_t window = raw.map(device, host_bytes, sizeof host_bytes);
  raw.send_data(remote::wire::Data{device, 1, window, 0, 4096}, host_bytes);
  raw.send_data(remote::wire::Data{device, 1, window, 0, 4096}, host_bytes);
  raw.send(remote::wire::Submit{device, 1, {copy_part(window, one, 4096), copy_part(window, two, 4096)},
                                {{window, 0, 4096}, {window, 0, 4096}}, {}});
  CHECK(raw.next<remote::wire::Reached>().to == 1);
  raw.send(remote::wire::Submit{device, 2, {copy_part(two, window, 4096)}, {}, {{window, 0, 4096}}});
  CHECK(raw.next<remote::wire::Reached>().to == 2);
  auto taken = raw.taken();
  REQUIRE(taken.size() == 1);
  CHECK(std::all_of(taken[0].begin(), taken[0].end(), [](std::byte b) { return b == std::byte{'t'}; }));
}

namespace {

// Opens MEM on raw and submits value 1, a copy of all 4096 bytes of a window of `host` into
// device memory, with a Data of its first `data_length` bytes: the device and the window.
std::pair<std::uint32_t, std::uint64_t> copy_in(RawClient& raw, const std::byte* host, std::uint64_t data_length) {
  const auto device = raw.open_device();
  const auto dst = raw.alloc(device, 4096);
  const std::uint64_t window = raw.map(device, host, 4096);
  raw.send_data(remote::wire::Data{device, 1, window, 0, data_length}, host);
  raw.send(remote::wire::Submit{device, 1, {copy_part(window, dst, 4096)}, {{window, 0, 4096}}, {}});
  return {device, window};
}

}  // namespace

TEST_CASE("Data outside the window, after their value, or not the ranges the parts read lose the device; others go on") {
  alignas(4096) static std::byte host_bytes[4096];
  {
    RawClient raw;
    const auto device = raw.open_device();
    const std::uint64_t window = raw.map(device, host_bytes, sizeof host_bytes);
    raw.send_data(remote::wire::Data{device, 1, window, 2048, 4096}, host_bytes);
    CHECK(raw.next<remote::wire::Lost>().why == "value 1: Data outside what the client mapped");
  }
  {
    RawClient raw;
    const auto [device, window] = copy_in(raw, host_bytes, 4096);
    CHECK(raw.next<remote::wire::Reached>().to == 1);
    raw.send_data(remote::wire::Data{device, 1, window, 0, 4096}, host_bytes);
    CHECK(raw.next<remote::wire::Lost>().why == "value 1: Data after the value was handed over");
  }
  {
    RawClient raw;
    copy_in(raw, host_bytes, 2048);
    CHECK(raw.next<remote::wire::Lost>().why ==
          "value 1: its Data are not the ranges of mapped host memory its parts read");
  }
  {
    // A Data sent as a plain message has no bytes: dropped and counted.
    RawClient raw;
    const auto device = raw.open_device();
    const auto dropped = agent().dropped();
    raw.send(remote::wire::Data{device, 1, 1, 0, 8});
    CHECK(eventually([&] { return agent().dropped() > dropped; }, 2000ms));
  }
  Device d = open_remote("MEM");
  CHECK(round_trips(d, 'd'));
}

namespace {

// A fill that notes each value it is called with in its argument: a count, then the values.
int note_value(void*, void* arg, std::uint64_t v) {
  auto* words = static_cast<std::uint64_t*>(arg);
  words[1 + words[0]++] = v;
  return 0;
}

}  // namespace

TEST_CASE("a fill on a remote device is called at each hand-over, in value order, beside the agent's work") {
  Device d = open_remote("CPU");
  Buffer arg = Buffer::create(host(), 64);
  arg.write<std::uint64_t>([](std::span<std::uint64_t> x) { std::fill(x.begin(), x.end(), 0); });
  Buffer src = Buffer::create(d, 4096), dst = Buffer::create(d, 4096);
  std::vector<Submission::Part> parts{{"", {}, Submission::Fill{note_value, arg}},
                                      {"", {0}, Submission::Copy{{src}, {dst}, {Box{0, 0, 4096, 1, 4096, 4096}}, {}}}};
  auto s = Submission::make(d, parts, 0, 0);
  Run run;
  std::uint64_t values[3];
  for (auto& v : values) {
    Point p = submit(s, run, {}, {});
    p.wait();
    v = p.value();
  }
  std::vector<std::uint64_t> noted;
  arg.read<std::uint64_t>([&](std::span<const std::uint64_t> x) { noted.assign(x.begin() + 1, x.begin() + 1 + x[0]); });
  CHECK(noted == std::vector<std::uint64_t>(std::begin(values), std::end(values)));
}

TEST_CASE("a failed fill loses the remote device with its reason, and the agent's other devices go on") {
  Device d = open_remote("MEM"), other = open_remote("MEM");
  Buffer arg = Buffer::create(host(), 64);
  Submission::Part part{"", {}, Submission::Fill{[](void*, void*, std::uint64_t) { return 3; }, arg}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  std::string why;
  Run run;
  try {
    submit(s, run, {}, {}).wait();
  } catch (const Lost& e) {
    why = e.what();
  }
  CHECK(why.starts_with(fmt::format("{} lost: fill returned 3 at value ", d.name())));
  CHECK(round_trips(other, 'o'));
}

namespace {

// What a fill on one agent's device saw of another agent's device's word at its hand-over.
struct WordSeen {
  const volatile std::uint64_t* word;
  std::uint64_t seen;
};

int see_word(void*, void* arg, std::uint64_t) {
  auto* w = static_cast<WordSeen*>(arg);
  w->seen = __atomic_load_n(w->word, __ATOMIC_ACQUIRE);
  return 0;
}

}  // namespace

TEST_CASE("a value on one agent's device waits for a value on another agent's device, the client forwarding it") {
  auto second = remote::Agent::start({"127.0.0.1:0", {"MEM"}, kToken});
  REQUIRE_MESSAGE(second.has_value(), second.error());
  Device a = open_remote("CPU");
  auto b = open(remote::opener((*second)->address(), "MEM", "MEM@second", kToken));
  REQUIRE_MESSAGE(b.has_value(), b.error());
  // A's value: a copy of 32 MiB, which takes its agent milliseconds.
  constexpr std::size_t kBytes = 32 << 20;
  Buffer x = Buffer::create(a, kBytes), y = Buffer::create(a, kBytes);
  Buffer::copy(Buffer::of_string(std::string(kBytes, 'w')), x);
  Submission::Part copy{"", {}, Submission::Copy{{x}, {y}, {Box::row(kBytes)}, {}}};
  auto on_a = Submission::make(a, std::span(&copy, 1), 0, 0);
  // B's value, after A's: its fill notes A's word at B's hand-over.
  Buffer arg = Buffer::create(host(), sizeof(WordSeen));
  arg.write<WordSeen>([&](std::span<WordSeen> w) { w[0] = {&rig_words[a.index()], 0}; });
  Submission::Part fill{"", {}, Submission::Fill{see_word, arg}};
  auto on_b = Submission::make(*b, std::span(&fill, 1), 0, 0);
  Run run_a, run_b;
  for (int i = 0; i < 3; ++i) {
    const Point pa = submit(on_a, run_a, {}, {});
    const Point pb = submit(on_b, run_b, {}, {}, std::span(&pa, 1));
    pb.wait();
    std::uint64_t seen = 0;
    arg.read<WordSeen>([&](std::span<const WordSeen> w) { seen = w[0].seen; });
    CAPTURE(i);
    CHECK(seen >= pa.value());
  }
}

TEST_CASE("a device lost on the agent's side, by a fault there, is lost on the client with the agent's reason; others go on") {
  // The agent serves a memory device whose driver fails the submits a test arms.
  auto [faulty_opener, control] = faulty::wrap(
      edge::Opener<>{"MEM", [](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
                       return cpu::make_memory_driver(word);
                     }},
      "FAULTY");
  auto served = remote::Agent::start({"127.0.0.1:0", {"MEM", "FAULTY"}, kToken, {faulty_opener}});
  REQUIRE_MESSAGE(served.has_value(), served.error());
  auto d = open(remote::opener((*served)->address(), "FAULTY", "FAULTY@agent", kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  auto other = open(remote::opener((*served)->address(), "MEM", "MEM@agent", kToken));
  REQUIRE_MESSAGE(other.has_value(), other.error());
  Buffer a = Buffer::create(*d, 4096), b = Buffer::create(*d, 4096);
  Buffer::copy(a, b);  // the device works until the fault
  control->fail_next(faulty::Call::Submit, "the memory controller reported an uncorrectable error");
  std::string why;
  try {
    Buffer::copy(a, b);
    b.read<char>([](std::span<const char>) {});
  } catch (const Lost& e) {
    why = e.what();
  }
  CHECK(why.starts_with("FAULTY@agent lost: the memory controller reported an uncorrectable error"));
  CHECK_THROWS_AS(Buffer::copy(a, b), Lost);
  // The agent's other device, and the client's own, go on.
  CHECK(round_trips(*other, 'g'));
}

TEST_CASE("a profile shows a remote device's values with the agent's times, on this process's clock") {
  Device d = open_remote("CPU");
  Buffer x = Buffer::create(d, 1 << 20), y = Buffer::create(d, 1 << 20);
  const std::uint64_t before = profile::now_ns();
  auto records = profile::take([&] {
    for (int i = 0; i < 4; ++i) Buffer::copy(x, y);
  });
  const std::uint64_t after = profile::now_ns();
  std::vector<const profile::Record*> values;
  for (const auto& r : records)
    if (r.what == profile::Record::What::Value && r.device == d.name()) values.push_back(&r);
  REQUIRE(values.size() >= 4);
  std::uint64_t last_end = 0;
  for (const auto* r : values) {
    CAPTURE(r->value);
    CHECK(r->start_ns != 0);
    CHECK(r->start_ns <= r->end_ns);
    // The agent runs on this machine, one clock for both, so its times, shifted, fall inside
    // the profile's, up to the shift's error: half the shortest of the clock readings' round
    // trips at connection, well under 200 µs on loopback.
    constexpr std::uint64_t kShiftError = 200'000;
    CHECK(r->start_ns + kShiftError >= before);
    CHECK(r->end_ns <= after + kShiftError);
    CHECK(r->start_ns >= last_end);
    last_end = r->end_ns;
  }
}

TEST_CASE("an agent places the code of a driver that places its images in device memory, and frees it with the image") {
  fake::Options placing;
  placing.place_images = true;
  auto [fake_opener, control] = fake::opener("PLACING", placing);
  auto served = remote::Agent::start({"127.0.0.1:0", {"PLACING"}, kToken, {fake_opener}});
  REQUIRE_MESSAGE(served.has_value(), served.error());
  auto d = open(remote::opener((*served)->address(), "PLACING", "PLACING@agent", kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  const std::string text = "fake-image\nfirst 16 64\n";
  {
    auto image = Image::load(*d, std::as_bytes(std::span(text)));
    REQUIRE_MESSAGE(image.has_value(), image.error());
    CHECK((*served)->held_bytes() == text.size());  // the code's memory, on the agent's device
    auto f = image->resolve("first");
    REQUIRE(f.has_value());
    CHECK(!image->resolve("second").has_value());
  }
  CHECK(eventually([&] { return (*served)->held_bytes() == 0; }, 2000ms));
}

TEST_CASE("an agent refuses an image whose driver places code in memory the agent's host does not address") {
  fake::Options placing;
  placing.place_images = true;
  placing.host_addresses = false;
  auto [fake_opener, control] = fake::opener("VRAM", placing);
  auto served = remote::Agent::start({"127.0.0.1:0", {"VRAM"}, kToken, {fake_opener}});
  REQUIRE_MESSAGE(served.has_value(), served.error());
  auto d = open(remote::opener((*served)->address(), "VRAM", "VRAM@agent", kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  const std::string text = "fake-image\nfirst 16 64\n";
  auto image = Image::load(*d, std::as_bytes(std::span(text)));
  REQUIRE(!image.has_value());
  CHECK_MESSAGE(image.error().find("VRAM@agent: its driver places code in memory the agent's host does not address") !=
                    std::string::npos,
                image.error());
  CHECK((*served)->held_bytes() == 0);  // nothing left held
  // The device goes on.
  CHECK(round_trips(*d, 'v'));
}

TEST_CASE("a Stop that waits for its device's work holds none of the agent's other clients") {
  // A device whose work runs only when the test steps it: a Stop there waits for its value.
  fake::Options stepped;
  stepped.runs_when_asleep = false;
  auto [fake_opener, control] = fake::opener("STEPPED", stepped);
  auto served = remote::Agent::start({"127.0.0.1:0", {"MEM", "STEPPED"}, kToken, {fake_opener}});
  REQUIRE_MESSAGE(served.has_value(), served.error());
  RawClient first((*served)->address());
  first.send(remote::wire::Open{1, "STEPPED"});
  auto o = first.next<remote::wire::Opened>();
  REQUIRE_MESSAGE(o.ok, o.why);
  std::uint64_t regions[2];
  for (auto& r : regions) {
    first.send(remote::wire::Alloc{2, o.device, std::uint32_t(Memory::Device), 4096});
    auto reply = first.next<remote::wire::Reply>();
    REQUIRE_MESSAGE(reply.status == remote::wire::kOk, reply.why);
    r = reply.a;
  }
  first.send(remote::wire::Submit{o.device, 1, {copy_part(regions[0], regions[1], 4096)}, {}, {}});
  REQUIRE(eventually([&] { return control->pending() == 1; }, 2000ms));
  first.send(remote::wire::Stop{3, o.device, "its client stops it"});
  // Another client's work goes on while the Stop waits.
  auto d = open(remote::opener((*served)->address(), "MEM", "MEM@beside-a-stop", kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  const auto before = std::chrono::steady_clock::now();
  CHECK(round_trips(*d, 's'));
  CHECK(std::chrono::steady_clock::now() - before < 2s);  // the drain's limit is 10 s
  CHECK(!control->stopped());
  // The value runs: the Stop is answered, the word having reached it.
  CHECK(control->step() == 1);
  auto answer = first.next<remote::wire::Reply>();
  CHECK(answer.request == 3);
  CHECK(answer.a == 1);
  CHECK(control->stopped());
  CHECK(control->stop_reason() == "its client stops it");
  CHECK(control->violations().empty());
}

namespace {

// A Words part: one word, which the fake device logs when its value runs.
remote::wire::Part words_part(std::uint32_t word) {
  remote::wire::Part p;
  p.kind = RIG_KIND_WORDS;
  p.words = {word};
  return p;
}

// A device whose queue holds one part and runs only when the test steps it: while value v
// waits to run, room answers LATER for value v + 1.
fake::Options one_entry() {
  fake::Options o;
  o.runs_when_asleep = false;
  o.capacity = 1;
  o.grow_to = 1;
  return o;
}

// An agent serving "ONE", a one_entry() fake device, beside MEM; the fake's control.
std::pair<std::unique_ptr<remote::Agent>, std::shared_ptr<fake::Control>> one_entry_agent() {
  auto [fake_opener, control] = fake::opener("ONE", one_entry());
  auto served = remote::Agent::start({"127.0.0.1:0", {"MEM", "ONE"}, kToken, {fake_opener}});
  REQUIRE_MESSAGE(served.has_value(), served.error());
  return {std::move(*served), control};
}

// Whether, stepping the fake device, the client is told (within 2 s) that the device's word
// reached v.
bool steps_to(RawClient& client, fake::Control& control, std::uint64_t v) {
  std::uint64_t reached = 0;
  return eventually(
      [&] {
        control.step();
        while (auto r = client.take<remote::wire::Reached>()) reached = std::max(reached, r->to);
        return reached >= v;
      },
      2000ms);
}

TEST_CASE("bytes a value copies straight into or out of device memory move only after the values before it ran") {
  // On a device whose work runs only when the test steps it: value 1 copies zeros over dst,
  // value 2 the client's bytes into dst, value 3 dst back to the client (both straight
  // between the device's memory, which the host addresses, and the client's), all three
  // submitted before any runs. The client's bytes must be what it sees.
  auto [fake_opener, control] = fake::opener("STEPPED", [] {
    fake::Options o;
    o.runs_when_asleep = false;
    return o;
  }());
  auto served = remote::Agent::start({"127.0.0.1:0", {"STEPPED"}, kToken, {fake_opener}});
  REQUIRE_MESSAGE(served.has_value(), served.error());
  RawClient raw((*served)->address());
  const auto device = raw.open_device("STEPPED");
  const auto zeros = raw.alloc(device, 4096), dst = raw.alloc(device, 4096);
  alignas(4096) static std::byte host_bytes[4096];
  std::memset(host_bytes, 'b', sizeof host_bytes);
  const std::uint64_t window = raw.map(device, host_bytes, sizeof host_bytes);
  raw.send(remote::wire::Submit{device, 1, {copy_part(zeros, dst, 4096)}, {}, {}});
  REQUIRE(eventually([&] { return control->pending() == 1; }, 2000ms));
  raw.send_data(remote::wire::Data{device, 2, window, 0, 4096}, host_bytes);
  raw.send(remote::wire::Submit{device, 2, {copy_part(window, dst, 4096)}, {{window, 0, 4096}}, {}});
  raw.send(remote::wire::Submit{device, 3, {copy_part(dst, window, 4096)}, {}, {{window, 0, 4096}}});
  std::this_thread::sleep_for(50ms);
  CHECK(control->pending() == 1);  // values 2 and 3 wait for value 1
  CHECK(raw.taken().empty());
  REQUIRE(steps_to(raw, *control, 3));
  auto taken = raw.taken();
  REQUIRE(taken.size() == 1);
  CHECK(std::all_of(taken[0].begin(), taken[0].end(), [](std::byte b) { return b == std::byte{'b'}; }));
  CHECK(control->violations().empty());
}

// The values of the fake's log, in the order they ran.
std::vector<std::uint64_t> ran(const fake::Control& control) {
  std::vector<std::uint64_t> out;
  for (const auto& r : control.log()) out.push_back(r.value);
  return out;
}

}  // namespace

TEST_CASE("a value that waits for room on the agent's device holds none of the agent's other clients") {
  auto [served, control] = one_entry_agent();
  RawClient first(served->address());
  const std::uint32_t device = first.open_device("ONE");
  // Value 1 fills the queue; value 2 finds no room until value 1 ran; value 3 comes after it.
  for (std::uint32_t v = 1; v <= 3; ++v) first.send(remote::wire::Submit{device, v, {words_part(0xA0 + v)}, {}, {}});
  REQUIRE(eventually([&] { return control->pending() == 1 && control->calls(fake::Call::Room) >= 2; }, 2000ms));
  // Another client opens, allocates, submits and waits meanwhile, promptly.
  const auto before = std::chrono::steady_clock::now();
  auto d = open(remote::opener(served->address(), "MEM", "MEM@beside-a-full-queue", kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  CHECK(round_trips(*d, 'r'));
  CHECK(std::chrono::steady_clock::now() - before < 2s);  // the old wait for room was 20 s
  CHECK(ran(*control).empty());
  // Once value 1 runs, value 2 gets its room, and after it value 3.
  CHECK(steps_to(first, *control, 3));
  CHECK(ran(*control) == std::vector<std::uint64_t>{1, 2, 3});
  std::vector<std::uint32_t> words;
  for (const auto& r : control->log()) words.insert(words.end(), r.words.begin(), r.words.end());
  CHECK(words == std::vector<std::uint32_t>{0xA1, 0xA2, 0xA3});
  CHECK(control->violations().empty());
  CHECK(round_trips(*d, 'q'));
}

TEST_CASE("a value that waits for room is dropped when its device stops, faults or its client goes meanwhile") {
  auto [served, control] = one_entry_agent();
  static int run = 0;  // each subcase opens a device of its own agent, by a name of its own
  auto d = open(remote::opener(served->address(), "MEM", fmt::format("MEM@beside-a-dropped-value~{}", run++), kToken));
  REQUIRE_MESSAGE(d.has_value(), d.error());
  auto first = std::make_unique<RawClient>(served->address());
  const std::uint32_t device = first->open_device("ONE");
  for (std::uint32_t v = 1; v <= 2; ++v) first->send(remote::wire::Submit{device, v, {words_part(v)}, {}, {}});
  REQUIRE(eventually([&] { return control->pending() == 1 && control->calls(fake::Call::Room) >= 2; }, 2000ms));

  SUBCASE("a Stop answers once value 1 ran, value 2 never reaching the device") {
    first->send(remote::wire::Stop{3, device, "its client stops it"});
    CHECK(round_trips(*d, 's'));
    CHECK(!control->stopped());
    CHECK(control->step() == 1);
    auto answer = first->next<remote::wire::Reply>();
    CHECK(answer.request == 3);
    CHECK(answer.a == 1);
    CHECK(control->stopped());
    CHECK(control->stop_reason() == "its client stops it");
  }
  SUBCASE("a fault loses the device with its reason") {
    control->fault("a page fault at 0x1000");
    auto lost = first->next<remote::wire::Lost>();
    CHECK(lost.device == device);
    CHECK(lost.why == "a page fault at 0x1000");
    CHECK(round_trips(*d, 'f'));
    CHECK(ran(*control).empty());
  }
  SUBCASE("its client's departure stops the device once value 1 ran") {
    first.reset();
    REQUIRE(eventually([&] { return served->clients() == 1; }, 2000ms));
    CHECK(round_trips(*d, 'g'));
    CHECK(eventually([&] { return control->step() > 0 || control->stopped(); }, 2000ms));
    CHECK(eventually([&] { return control->stopped(); }, 2000ms));
    CHECK(control->stop_reason() == "its client let it go");
  }
  CHECK(control->calls(fake::Call::Submit) == 1);  // value 2 never reached the device
  CHECK(ran(*control).size() <= 1);
  CHECK(control->violations().empty());
  CHECK(round_trips(*d, 'z'));
}

TEST_CASE("memory freed while a value that uses it waits for room stays until that value ran") {
  auto [served, control] = one_entry_agent();
  RawClient first(served->address());
  const std::uint32_t device = first.open_device("ONE");
  const std::uint64_t a = first.alloc(device, 4096), b = first.alloc(device, 4096);
  first.send(remote::wire::Submit{device, 1, {words_part(1)}, {}, {}});
  first.send(remote::wire::Submit{device, 2, {copy_part(a, b, 4096)}, {}, {}});
  REQUIRE(eventually([&] { return control->pending() == 1 && control->calls(fake::Call::Room) >= 2; }, 2000ms));
  first.send(remote::wire::Free{device, a});
  first.send(remote::wire::Free{device, b});
  // The frees wait for value 2, which has not reached the device.
  first.send(remote::wire::Clock{9});
  CHECK(first.next<remote::wire::Reply>().request == 9);
  CHECK(control->live_regions() == 2);
  CHECK(steps_to(first, *control, 2));
  CHECK(eventually([&] { return control->live_regions() == 0; }, 2000ms));
  CHECK(ran(*control) == std::vector<std::uint64_t>{1, 2});
  CHECK(control->violations().empty());
}

TEST_CASE("a value that never fits its device's queues loses the device, naming the value and the limit") {
  auto [served, control] = one_entry_agent();
  RawClient first(served->address());
  const std::uint32_t device = first.open_device("ONE");
  first.send(remote::wire::Submit{device, 1, {words_part(1), words_part(2)}, {}, {}});
  auto lost = first.next<remote::wire::Lost>();
  CHECK(lost.device == device);
  CHECK(lost.why == "value 1 never fits: 2 parts and 0 waits take 2 queue entries, over the 1 its queues grow to");
  CHECK(control->calls(fake::Call::Submit) == 0);
  CHECK(control->violations().empty());
}

namespace {

// Two workers joined over loopback: `here` (whose progress thread lingers `linger` after a
// poller goes) connects to `there`, which answers each message it gets with the same bytes.
// here's handler notes each message, the thread that ran it and when; its idle hook, the
// last thread that ran it.
struct EchoPair {
  std::mutex mutex;
  std::atomic<std::thread::id> idle_on{};
  std::vector<std::thread::id> handled_on;  // here's handler runs, by thread
  std::vector<std::uint64_t> handled_at;    // and their times (rig_now_ns)
  remote::ucx::Worker there{{[this](ucp_ep_h from, std::span<const std::byte> m) { there.send(from, m); },
                             [](ucp_ep_h, ucs_status_t) {}, [](ucp_ep_h) {}, {}, {}}};
  remote::ucx::Worker here;
  ucp_ep_h ep = nullptr;

  explicit EchoPair(std::chrono::nanoseconds linger = remote::ucx::Worker::kLinger)
      : here({[this](ucp_ep_h, std::span<const std::byte>) {
                std::lock_guard g(mutex);
                handled_on.push_back(std::this_thread::get_id());
                handled_at.push_back(rig_now_ns());
              },
              [](ucp_ep_h, ucs_status_t) {}, [](ucp_ep_h) {},
              [this] {
                idle_on.store(std::this_thread::get_id());
                return false;
              },
              {}},
             linger) {
    auto listening = there.listen({"127.0.0.1", 0});
    REQUIRE_MESSAGE(listening.has_value(), listening.error());
    auto connected = here.connect(*listening);
    REQUIRE_MESSAGE(connected.has_value(), connected.error());
    ep = *connected;
  }
  ~EchoPair() { here.close(ep); }
  std::size_t handled() {
    std::lock_guard g(mutex);
    return handled_on.size();
  }
  // An echo taken, then one that comes back while this thread polls, untaken: the time the
  // poller went.
  std::uint64_t echo_as_the_poller_goes() {
    const std::byte ping[8] = {};
    REQUIRE(here.send(ep, ping));
    REQUIRE(eventually([&] { return handled() == 1; }, 5000ms));
    remote::ucx::Worker::Polling polling(here);
    REQUIRE(here.send(ep, ping));
    std::this_thread::sleep_for(100ms);  // the echo comes back meanwhile
    return rig_now_ns();
  }
};

}  // namespace

TEST_CASE("while a thread polls a worker, the progress thread takes none of its messages; once it goes, it takes them again") {
  EchoPair pair;
  const std::byte ping[8] = {};
  // A first echo, so that the connection is up before the progress thread is put aside.
  REQUIRE(pair.here.send(pair.ep, ping));
  REQUIRE(eventually([&] { return pair.handled() == 1; }, 5000ms));
  {
    remote::ucx::Worker::Polling polling(pair.here);
    REQUIRE(pair.here.send(pair.ep, ping));
    // The echo comes back meanwhile: it waits for this thread, not handled by another.
    std::this_thread::sleep_for(300ms);
    CHECK(pair.handled() == 1);
    REQUIRE(eventually([&] {
      pair.here.poll();
      return pair.handled() == 2;
    }, 5000ms));
    std::lock_guard g(pair.mutex);
    CHECK(pair.handled_on.back() == std::this_thread::get_id());
  }
  REQUIRE(pair.here.send(pair.ep, ping));
  REQUIRE(eventually([&] { return pair.handled() == 3; }, 5000ms));
  std::lock_guard g(pair.mutex);
  CHECK(pair.handled_on.back() != std::this_thread::get_id());
}

TEST_CASE("once the last poller goes, the progress thread sleeps on for its linger before it takes a message; resume() "
          "wakes it at once") {
  const auto linger = 20s;  // far beyond any wait of this test: a message taken early was woken for
  EchoPair pair(linger);
  const std::uint64_t went = pair.echo_as_the_poller_goes();
  // The progress thread lingers: the echo waits.
  std::this_thread::sleep_for(300ms);
  CHECK(pair.handled() == 1);
  // Until a thread that will block on it asks for it.
  pair.here.resume();
  REQUIRE(eventually([&] { return pair.handled() == 2; }, 5000ms));
  std::lock_guard g(pair.mutex);
  CHECK(pair.handled_on.back() != std::this_thread::get_id());
  CHECK(pair.handled_at.back() - went < std::uint64_t(std::chrono::nanoseconds(linger).count()));
}

TEST_CASE("a progress thread's linger ends on its own: a message that came as the last poller went is taken once it "
          "passed") {
  const auto linger = 300ms;
  EchoPair pair(linger);
  const std::uint64_t went = pair.echo_as_the_poller_goes();
  REQUIRE(eventually([&] { return pair.handled() == 2; }, 5000ms));
  std::lock_guard g(pair.mutex);
  CHECK(pair.handled_on.back() != std::this_thread::get_id());
  CHECK(pair.handled_at.back() - went >= std::uint64_t(std::chrono::nanoseconds(linger).count()));
}

TEST_CASE("a thread that serves a worker in rounds takes its messages and runs its idle hook itself, the progress "
          "thread standing aside between rounds; once it goes, the progress thread takes them after the linger") {
  const auto linger = 300ms;
  EchoPair pair(linger);
  const std::byte ping[8] = {};
  REQUIRE(pair.here.send(pair.ep, ping));
  REQUIRE(eventually([&] { return pair.handled() == 1; }, 5000ms));
  const auto me = std::this_thread::get_id();
  pair.here.begin_polling();
  REQUIRE(pair.here.send(pair.ep, ping));
  REQUIRE(eventually([&] {
    pair.here.serve_round();
    return pair.handled() == 2;
  }, 5000ms));
  {
    std::lock_guard g(pair.mutex);
    CHECK(pair.handled_on.back() == me);
  }
  // A round with nothing delivered runs the idle hook, on this thread.
  REQUIRE(eventually([&] {
    pair.here.serve_round();
    return pair.idle_on.load() == me;
  }, 5000ms));
  // Between rounds, however long, the progress thread takes nothing.
  REQUIRE(pair.here.send(pair.ep, ping));
  std::this_thread::sleep_for(2 * linger);
  CHECK(pair.handled() == 2);
  REQUIRE(eventually([&] {
    pair.here.serve_round();
    return pair.handled() == 3;
  }, 5000ms));
  // Its rounds end with an echo on its way back: the progress thread takes it, a linger on.
  REQUIRE(pair.here.send(pair.ep, ping));
  std::this_thread::sleep_for(100ms);  // the echo comes back meanwhile
  const std::uint64_t went = rig_now_ns();
  pair.here.end_polling();
  REQUIRE(eventually([&] { return pair.handled() == 4; }, 5000ms));
  std::lock_guard g(pair.mutex);
  CHECK(pair.handled_on.back() != me);
  CHECK(pair.handled_at.back() - went >= std::uint64_t(std::chrono::nanoseconds(linger).count()));
}

TEST_CASE("a host device that a client closes right after its work ran stops, though the Stop comes to the thread that "
          "ran that work; the agent serves on") {
  // The host device's dispatcher serves the agent's connection while it waits for work, so
  // a Stop that comes just after a value is often handled on the very thread it stops.
  for (int i = 0; i < 20; ++i) {
    Device d = open_remote("CPU");
    Buffer a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
    Buffer::copy(Buffer::of_string(std::string(4096, char('a' + i))), a);
    Buffer::copy(a, b);
    d.close();
  }
  CHECK(round_trips(open_remote("CPU"), 'z'));
}
