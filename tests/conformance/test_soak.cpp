// The soak: random operations across three devices whose drivers fail at random (a fake
// committing every 4 values, a memory device, and a fake whose memory the host does not
// address, each wrapped in a faulty driver), with the host device beside them. After each
// loss it checks that the other devices' work and data are intact and that the lost device's
// memory returns to its driver; a device that is lost is opened again. A watchdog fails the
// test if any operation takes longer than 20 s (a hang). RIG_SOAK_OPS sets the number of
// operations (10 000; 2 500 under sanitizers); RIG_SOAK_SEED the seed.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "conformance.hpp"

#include "../../host/host_driver.hpp"
#include "fake_driver.hpp"
#include "faulty.hpp"

using namespace rig;
using namespace std::chrono_literals;

namespace {

int ops_to_run() {
  if (const char* n = std::getenv("RIG_SOAK_OPS")) return std::atoi(n);
  return conformance::sanitized() ? 2500 : 10000;
}

std::uint64_t seed() {
  if (const char* s = std::getenv("RIG_SOAK_SEED")) return std::strtoull(s, nullptr, 10);
  return 20261129;
}

// What the core does not yet do, found by the soak and checked in the test cases after it,
// marked may_fail: the memory of lost devices that did not return, and operations on live
// devices that raised Lost for a device lost earlier.
std::vector<std::string>& lost_device_leaks() {
  static std::vector<std::string> leaks;
  return leaks;
}
std::vector<std::string>& stale_losses() {
  static std::vector<std::string> stale;
  return stale;
}
std::atomic<bool> soak_ran{false};

constexpr std::string_view kInjected = "soak: injected";

// One of the three devices under faults, as opened now.
struct Dev {
  std::string kind;  // "FAKE", "MEM", "VRAM"
  Device device;
  std::shared_ptr<faulty::Control> faults;
  std::shared_ptr<fake::Control> fake;  // null for the memory device
  std::size_t base_bytes = 0;           // the fake's live bytes once opened
};

Dev open_dev(const std::string& kind) {
  static std::atomic<int> n{0};
  const std::string name = fmt::format("SOAK-{}~{}", kind, n++);
  edge::Opener<> inner;
  std::shared_ptr<fake::Control> fc;
  if (kind == "MEM") {
    inner = {name, [](volatile std::uint64_t* w) -> Result<std::unique_ptr<edge::Driver>> {
               return cpu::make_memory_driver(w);
             }};
  } else {
    fake::Options o;
    o.budget = 64 << 20;
    if (kind == "FAKE") o.commit_every = 4;
    if (kind == "VRAM") o.host_addresses = false;
    auto made = fake::opener(name, o);
    inner = made.first;
    fc = made.second;
  }
  auto [opener, faults] = faulty::wrap(inner);
  auto d = open(opener);
  REQUIRE(d);
  return Dev{kind, *d, faults, fc, fc ? fc->live_bytes() : 0};
}

struct Live {
  Buffer buffer;
  std::vector<std::uint8_t> model;
  int dev;  // 0..2: a faulty device; 3: the host
};

std::vector<std::uint8_t> bytes_of(const Buffer& b) {
  std::vector<std::uint8_t> out(b.length());
  b.blit_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

}  // namespace

TEST_CASE("soak: random work across three devices with random faults keeps every other device's work and data") {
  soak_ran = true;
  const int ops = ops_to_run();
  std::mt19937_64 rng(seed());
  auto pick = [&](std::size_t n) { return n ? std::size_t(rng() % n) : std::size_t(0); };
  auto chance = [&](double p) { return std::uniform_real_distribution<>(0, 1)(rng) < p; };

  std::vector<Dev> devs{open_dev("FAKE"), open_dev("MEM"), open_dev("VRAM")};
  std::vector<std::shared_ptr<fake::Control>> every_fake;
  for (auto& d : devs)
    if (d.fake) every_fake.push_back(d.fake);
  Device cpu = host();
  auto device_of = [&](int i) { return i == 3 ? cpu : devs[std::size_t(i)].device; };

  // The fakes' hardware: a thread that runs their committed work, as a GPU would, so that a
  // queue of one that waits for the other's value gets it.
  std::mutex fakes_mutex;
  std::vector<std::shared_ptr<fake::Control>> running{devs[0].fake, devs[2].fake};
  std::atomic<bool> done{false};
  // Ends the threads however the test ends.
  struct Join {
    std::atomic<bool>& done;
    std::vector<std::thread> threads;
    ~Join() {
      done = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } join{done, {}};
  join.threads.emplace_back([&] {
    while (!done.load()) {
      {
        std::lock_guard g(fakes_mutex);
        for (auto& f : running) f->step();
      }
      std::this_thread::sleep_for(100us);
    }
  });

  // The watchdog: any operation longer than 20 s is a hang.
  std::atomic<std::int64_t> op_started{0};
  std::atomic<int> op_index{-1};
  std::mutex what_mutex;
  std::string what_now;
  join.threads.emplace_back([&] {
    while (!done.load()) {
      std::this_thread::sleep_for(100ms);
      std::int64_t started = op_started.load();
      if (started && std::chrono::steady_clock::now().time_since_epoch().count() - started > 20'000'000'000) {
        std::lock_guard g(what_mutex);
        fmt::print(stderr, "soak: operation {} ({}) has run for 20 s: a hang\n", op_index.load(), what_now);
        std::fflush(stderr);
        std::_Exit(3);
      }
    }
  });

  std::vector<Live> live;
  int losses = 0, spread = 0, refusals = 0, reopened = 0;
  std::map<std::string, int> injected_by_call;
  std::map<std::string, int> done_by_op;

  // True for a Lost that names a device lost and replaced earlier, which the soak records.
  auto stale = [&](const Lost& e, int op) {
    for (auto& d : devs)
      if (d.device.name() == e.device()) return false;
    stale_losses().push_back(fmt::format("op {}: {}", op, e.what()));
    return true;
  };
  // Puts a destination's model back where an operation that raised may have written part of
  // it; drops it where that fails too.
  auto restore = [&](Live* destination, int op) {
    if (!destination || device_of(destination->dev).lost()) return;
    try {
      destination->buffer.blit_from(std::as_bytes(std::span(destination->model)), 0);
    } catch (const Lost& e) {
      stale(e, op);  // else its device is lost now: the loss's handling drops its buffers
      std::erase_if(live, [&](const Live& l) { return &l == destination; });
    }
  };

  // Checks every live buffer of every live device against its model.
  auto verify_all = [&](std::string_view after) {
    for (const Live& l : live) {
      if (device_of(l.dev).lost()) continue;
      std::vector<std::uint8_t> got;
      try {
        got = bytes_of(l.buffer);
      } catch (const Lost& e) {
        if (!stale(e, op_index.load())) throw;
        continue;
      }
      if (got != l.model) {
        std::size_t i = 0;
        while (got[i] == l.model[i]) ++i;
        FAIL_CHECK(fmt::format("{}: a buffer of {} bytes on {} differs from its model at byte {} ({} vs {})", after,
                               l.buffer.length(), device_of(l.dev).name(), i, got[i], l.model[i]));
        return;
      }
    }
  };

  // After a Lost: which devices are lost and why, the others intact, the lost ones' memory
  // returned, and new devices in their place.
  auto handle_loss = [&](const Lost& e, Live* destination, int op) {
    // A Lost naming a device lost and replaced earlier (recorded by stale) refused an
    // operation of live devices; the soak goes on.
    const bool old = stale(e, op);
    std::vector<int> lost;
    for (int i = 0; i < 3; ++i)
      if (devs[std::size_t(i)].device.lost()) lost.push_back(i);
    if (lost.empty()) {
      if (old) {
        restore(destination, op);
        return;
      }
      std::string state;
      for (auto& d : devs) state += fmt::format(" {} ({})", d.device.name(), d.device.lost().value_or("live"));
      FAIL(fmt::format("Lost was raised ({}) but no device is lost:{}", e.what(), state));
    }
    ++losses;
    // Faults armed and not yet met are dropped: the checks below must not meet them.
    for (auto& d : devs) d.faults->disarm();
    CHECK_MESSAGE(!cpu.lost(), "the host device was lost: " << cpu.lost().value_or(""));
    if (!old) {
      bool named = false;
      for (int i : lost) named = named || devs[std::size_t(i)].device.name() == e.device();
      CHECK_MESSAGE(named, "Lost names " << e.device() << ", which is not lost");
    }
    for (int i : lost) {
      std::string why = *devs[std::size_t(i)].device.lost();
      bool injected = why.find(kInjected) != std::string::npos;
      bool spread_from_lost = false;
      for (int j : lost)
        if (j != i && why == std::string(devs[std::size_t(j)].device.name()) + " lost") spread_from_lost = true;
      spread += spread_from_lost;
      CHECK_MESSAGE((injected || spread_from_lost),
                    devs[std::size_t(i)].device.name() << " is lost for a reason no fault explains: " << why);
    }
    // A copy or fill that raised may have written part of a surviving destination: put its
    // model back.
    restore(destination, op);
    verify_all(fmt::format("after the loss of {}", e.device()));
    for (int i : lost) {
      Dev& d = devs[std::size_t(i)];
      std::erase_if(live, [&](const Live& l) { return l.dev == i; });
      d.device.free_cache();
      if (d.fake) {
        auto until = std::chrono::steady_clock::now() + 200ms;
        while (d.fake->live_bytes() != d.base_bytes && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(1ms);
        if (d.fake->live_bytes() != d.base_bytes)
          lost_device_leaks().push_back(fmt::format("{} lost ({}): its driver still holds {} bytes, not {}",
                                                    d.device.name(), *d.device.lost(), d.fake->live_bytes(),
                                                    d.base_bytes));
      }
      d = open_dev(d.kind);
      ++reopened;
      if (d.fake) every_fake.push_back(d.fake);
    }
    std::lock_guard g(fakes_mutex);
    running = {devs[0].fake, devs[2].fake};
  };

  for (int op = 0; op < ops; ++op) {
    op_index = op;
    op_started = std::chrono::steady_clock::now().time_since_epoch().count();
    int kind = int(pick(20));
    if (live.size() < 12) kind = 0;
    Live* destination = nullptr;
    const std::uint64_t room_before = devs[0].faults->injected(faulty::Call::Room) +
                                      devs[1].faults->injected(faulty::Call::Room) +
                                      devs[2].faults->injected(faulty::Call::Room);
    try {
      switch (kind) {
        case 0:
        case 1: {  // create, with bytes from the host
          int dev = int(pick(4));
          std::size_t n = 1 + pick(pick(4) == 0 ? (64 << 10) : 4096);
          Buffer b = Buffer::create(device_of(dev), n);
          std::vector<std::uint8_t> bytes(n);
          for (auto& x : bytes) x = std::uint8_t(rng());
          live.push_back({b, bytes, dev});
          destination = &live.back();
          b.blit_from(std::as_bytes(std::span(bytes)), 0);
          ++done_by_op["create"];
          break;
        }
        case 2:
        case 3: {  // drop
          live.erase(live.begin() + std::ptrdiff_t(pick(live.size())));
          ++done_by_op["drop"];
          break;
        }
        case 4:
        case 5: {  // a host write of part of a buffer
          Live& l = live[pick(live.size())];
          destination = &l;
          std::size_t at = pick(l.model.size()), n = 1 + pick(l.model.size() - at);
          std::vector<std::uint8_t> bytes(n);
          for (auto& x : bytes) x = std::uint8_t(rng());
          std::copy(bytes.begin(), bytes.end(), l.model.begin() + std::ptrdiff_t(at));
          l.buffer.blit_from(std::as_bytes(std::span(bytes)), at);
          ++done_by_op["write"];
          break;
        }
        case 6:
        case 7:
        case 8: {  // check a buffer against its model
          const Live& l = live[pick(live.size())];
          auto got = bytes_of(l.buffer);
          CHECK_MESSAGE(got == l.model, "op " << op << ": a buffer on " << device_of(l.dev).name()
                                             << " differs from its model");
          ++done_by_op["read"];
          break;
        }
        case 9:
        case 10:
        case 11: {  // a copy of a row between two buffers, wherever they are
          Live& s = live[pick(live.size())];
          Live& d = live[pick(live.size())];
          if (&s == &d) break;
          destination = &d;
          std::size_t n = 1 + pick(std::min(s.model.size(), d.model.size()));
          std::size_t so = pick(s.model.size() - n + 1), dof = pick(d.model.size() - n + 1);
          std::copy_n(s.model.begin() + std::ptrdiff_t(so), n, d.model.begin() + std::ptrdiff_t(dof));
          Box box = Box::row(n, so, dof);
          Point p = Buffer::submit_copy(s.buffer, d.buffer, std::span(&box, 1));
          if (chance(0.3)) p.wait();
          ++done_by_op["copy"];
          break;
        }
        case 12:
        case 13:
        case 14: {  // a submission of the device's own: a fill, or a copy between two of its buffers
          Live& d = live[pick(live.size())];
          Device dev = device_of(d.dev);
          destination = &d;
          std::vector<Live*> same;
          for (auto& l : live)
            if (l.dev == d.dev && &l != &d && l.model.size() >= d.model.size()) same.push_back(&l);
          Submission::Part part{"", {}, Submission::Copy{}};
          std::vector<std::pair<Buffer, Access>> fixed{{d.buffer, Access::ReadWrite}};
          if (same.empty() || chance(0.4)) {
            auto byte = std::uint8_t(rng());
            part.work = Submission::Copy{{std::nullopt, 0}, {d.buffer, 0}, {Box::row(d.model.size())}, std::byte{byte}};
            std::fill(d.model.begin(), d.model.end(), byte);
          } else {
            Live& s = *same[pick(same.size())];
            part.work = Submission::Copy{{s.buffer, 0}, {d.buffer, 0}, {Box::row(d.model.size())}, {}};
            fixed.push_back({s.buffer, Access::Read});
            std::copy_n(s.model.begin(), d.model.size(), d.model.begin());
          }
          auto sub = Submission::make(dev, std::span(&part, 1), 0, 0, fixed);
          Run run;
          submit(sub, run, {}, {});
          ++done_by_op["submit"];
          break;
        }
        case 15: {  // a fill through rig
          Live& l = live[pick(live.size())];
          destination = &l;
          auto byte = std::uint8_t(rng());
          std::fill(l.model.begin(), l.model.end(), byte);
          l.buffer.fill(std::byte{byte});
          ++done_by_op["fill"];
          break;
        }
        case 16: {  // a wait for a device's work
          Device d = device_of(int(pick(4)));
          d.wait(d.submitted());
          ++done_by_op["wait"];
          break;
        }
        case 17: {  // the cache back to the driver
          device_of(int(pick(4))).free_cache();
          ++done_by_op["free_cache"];
          break;
        }
        default: {  // arm a fault, or a no-room answer, in a call of one of the three
          Dev& d = devs[pick(3)];
          using faulty::Call;
          static constexpr Call calls[] = {Call::Submit, Call::Commit, Call::Alloc, Call::Map, Call::Sleep, Call::Room};
          if (chance(0.35)) {
            Call c = calls[pick(std::size(calls))];
            d.faults->fail_next(c, fmt::format("{} {} fault at op {}", kInjected, faulty::name(c), op));
            ++injected_by_call[std::string(faulty::name(c))];
          } else {
            static constexpr Call no_room[] = {Call::Alloc, Call::Map};
            Call c = no_room[pick(2)];
            d.faults->no_room_nth(c, d.faults->calls(c) + 1);
            ++injected_by_call[std::string("no room in ") + std::string(faulty::name(c))];
          }
          break;
        }
      }
      if (op % 500 == 499) {
        for (auto& d : devs) d.faults->disarm();
        verify_all(fmt::format("op {}", op));
      }
    } catch (const Lost& e) {
      {
        std::lock_guard g(what_mutex);
        what_now = fmt::format("handling the loss: {}", e.what());
      }
      handle_loss(e, destination, op);
    } catch (const std::invalid_argument& e) {
      // Only an injected NEVER from room refuses a soak operation.
      const std::uint64_t room_after = devs[0].faults->injected(faulty::Call::Room) +
                                       devs[1].faults->injected(faulty::Call::Room) +
                                       devs[2].faults->injected(faulty::Call::Room);
      CHECK_MESSAGE(room_after > room_before, "op " << op << " was refused: " << e.what());
      ++refusals;
      restore(destination, op);
    }
  }
  op_started = 0;

  // Everything returns once its work is done.
  for (auto& d : devs) d.faults->disarm();
  verify_all("the end");
  live.clear();
  for (auto& d : devs) {
    if (d.device.lost()) continue;
    d.faults->disarm();
    d.device.wait(d.device.submitted());
    d.device.free_cache();
    if (d.fake)
      CHECK_MESSAGE(d.fake->live_bytes() == d.base_bytes,
                    d.device.name() << "'s driver holds " << d.fake->live_bytes() << " bytes after the soak");
  }
  done = true;
  for (auto& t : join.threads) t.join();
  for (auto& f : every_fake)
    for (auto& v : f->violations()) FAIL_CHECK("a fake driver saw rig break the contract: " << v);
  for (auto& d : devs)
    if (!d.device.lost()) d.device.close();

  std::string ran;
  for (auto& [name, n] : done_by_op) ran += fmt::format(" {} {}", name, n);
  std::string armed;
  for (auto& [name, n] : injected_by_call) armed += fmt::format(" {}: {},", name, n);
  MESSAGE(fmt::format("{} operations:{}; armed:{} {} losses ({} spread to a waiting device), {} refusals, {} "
                      "devices opened again",
                      ops, ran, armed, losses, spread, refusals, reopened));
  if (ops >= 2000) CHECK(losses >= 3);  // the soak exercised loss
}

TEST_CASE("soak: a device's loss leaves the other devices' copies alone") {
  REQUIRE(soak_ran.load());
  std::size_t shown = 0;
  for (const auto& s : stale_losses())
    if (shown++ < 5) FAIL_CHECK(s);
  CHECK_MESSAGE(stale_losses().empty(), stale_losses().size() << " operations raised Lost for a device lost earlier");
}

TEST_CASE("soak: a lost device's memory returns to its driver") {
  REQUIRE(soak_ran.load());
  for (const auto& leak : lost_device_leaks()) FAIL_CHECK(leak);
}
