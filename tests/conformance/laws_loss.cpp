// laws_loss.cpp — the laws of loss, hangs, faults and close.
#include <algorithm>
#include <atomic>
#include <thread>

#include "laws.hpp"

namespace rig::conformance::detail {

namespace {

Submission words_submission(const Device& d) {
  Submission::Part part{"", {}, Submission::Words{Buffer::of_string(std::string(8, '\0'))}};
  return Submission::make(d, std::span(&part, 1), 0, 0);
}

// Work and data on other devices that a loss must leave alone: a buffer on each, checked, and
// new work run on each.
struct Bystanders {
  struct One {
    Device device;
    Buffer buffer;
    std::vector<std::uint8_t> bytes;
  };
  std::vector<One> all;
  void add(const Device& d, std::uint64_t seed) {
    Buffer b = Buffer::create(d, 4096);
    auto bytes = pattern(4096, seed);
    put(b, bytes);
    all.push_back({d, b, bytes});
  }
  void check(std::string_view after) {
    for (auto& one : all) {
      require(!one.device.lost(), "after {} the device {} is lost too: {}", after, one.device.name(),
              one.device.lost().value_or(""));
      expect_bytes(one.buffer, one.bytes, fmt::format("{}'s data after {}", one.device.name(), after));
      if (one.device.facts().copy_engine) {
        Buffer b = Buffer::create(one.device, 4096);
        go(copy_submission(one.device, one.buffer, b)).wait();
        expect_bytes(b, one.bytes, fmt::format("new work on {} after {}", one.device.name(), after));
      }
    }
  }
};

// Checks the device is lost with a reason that holds `why`, and that later uses raise Lost
// naming it.
void expect_lost(const Device& d, std::string_view after, std::string_view why) {
  auto reason = d.lost();
  require(bool(reason), "after {} the device is not lost", after);
  require(reason->find(why) != std::string::npos, "after {} the device is lost with \"{}\", not with \"{}\"", after,
          *reason, why);
  std::string message = expect_throw<Lost>(fmt::format("an allocation after {}", after),
                                           [&] { Buffer::create(d, 64); });
  require(message.find(std::string(d.name()) + " lost: ") == 0, "after {} a use raised \"{}\", not \"{} lost: …\"",
          after, message, d.name());
}

}  // namespace

void a_failed_part_loses_the_device_and_nothing_else(Context& c) {
  Opened before = c.fresh();  // another device of its driver, opened first: it goes on
  Opened o = c.fresh();
  Device d = o.device;
  if (!runs(d, Kind::Fill)) skip("its queues run no Fill, the part this law fails");
  Bystanders others;
  others.add(before.device, 1);
  others.add(c.memory(), 2);
  others.add(host(), 3);
  Buffer arg = Buffer::of_string("x");
  Submission::Part part{"", {}, Submission::Fill{[](void*, void*, std::uint64_t) { return 3; }, arg}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  auto raised = lost_within(10s, [s] { go(s).wait(); });
  require(bool(raised), "a submit of a failing fill and a wait for it did not return within 10 s");
  require(!raised->empty(), "a fill that returned 3 raised no Lost from its submit or a wait for it");
  require(raised->find(std::string(d.name()) + " lost: ") == 0, "the failed fill raised \"{}\", which does not name {}",
          *raised, d.name());
  expect_lost(d, "a failed fill", "");
  expect_throw<Lost>("a submit after the loss", [&] { go(s); });
  others.check("another device's failed fill");
}

void an_injected_fault_loses_the_device_and_nothing_else(Context& c) {
  Bystanders others;
  others.add(c.memory(), 11);
  others.add(host(), 12);
  std::vector<std::string> untried;
  int tried = 0;
  using faulty::Call;
  for (Call call : {Call::Submit, Call::Commit, Call::Alloc, Call::Map, Call::Image, Call::Entry, Call::Sleep,
                    Call::Signaled, Call::Room}) {
    auto [o, fc] = c.faulty();
    Device d = o.device;
    const std::string why = fmt::format("conformance: injected {} fault", faulty::name(call));
    const std::string what = fmt::format("an injected fault in {}", faulty::name(call));
    auto untriggered = [&, call = call](std::string reason) {
      untried.push_back(fmt::format("{} ({})", faulty::name(call), reason));
      if (!d.lost()) d.close();
    };
    std::optional<Buffer> a, b;
    if (d.facts().copy_engine) a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
    // Triggers the call; false where the call did not happen.
    std::string raised;
    auto trying = [&](auto&& f) {
      try {
        f();
      } catch (const Lost& e) {
        raised = e.what();
      }
    };
    switch (call) {
      case Call::Submit:
      case Call::Commit:
      case Call::Sleep:
      case Call::Room:
        if (!a) {
          untriggered("no copy engine to submit to");
          continue;
        }
        break;
      default: break;
    }
    const std::uint64_t before = fc->calls(call);
    fc->fail_next(call, why);
    switch (call) {
      case Call::Submit: trying([&] { go(copy_submission(d, *a, *b)); }); break;
      case Call::Commit:
      case Call::Sleep: trying([&] { go(copy_submission(d, *a, *b)).wait(); }); break;
      case Call::Alloc: trying([&] { Buffer::create(d, 12345 * 16 + 7); }); break;
      case Call::Map: {
        if (!d.facts().maps_host) {
          untriggered("it maps no host memory");
          continue;
        }
        Buffer h = Buffer::create(host(), 1 << 20);
        trying([&] { Buffer::borrow(d, h); });
        break;
      }
      case Call::Image:
        trying([&] { (void)Image::load(d, c.target.image.empty() ? std::vector<std::byte>(16) : c.target.image); });
        break;
      case Call::Entry: {
        if (c.target.image.empty()) {
          untriggered("the target gives no image");
          continue;
        }
        fc->disarm();
        auto image = Image::load(d, c.target.image);
        require(bool(image), "the target's image did not load: {}", image ? "" : image.error());
        fc->fail_next(call, why);
        trying([&] { image->resolve(c.target.function); });
        break;
      }
      case Call::Signaled:
        if (d.facts().word == &rig_words[d.index()]) {
          untriggered("its word is rig's, read without signaled");
          continue;
        }
        trying([&] { d.signaled(); });
        break;
      case Call::Room: {
        // room has no failure: the injected answer is RIG_NEVER, a refusal.
        expect_throw<std::invalid_argument>("a submit whose room answered NEVER",
                                            [&] { go(copy_submission(d, *a, *b)); });
        fc->disarm();
        require(!d.lost(), "a room that answered NEVER lost the device: {}", d.lost().value_or(""));
        go(copy_submission(d, *a, *b)).wait();
        ++tried;
        d.close();
        continue;
      }
      default: break;
    }
    fc->disarm();
    if (fc->calls(call) == before) {
      untriggered(call == Call::Commit ? "its submit commits every value, so rig never asks it to commit"
                  : call == Call::Sleep ? "the work was done before rig slept in the driver"
                                        : "rig made no such call");
      continue;
    }
    ++tried;
    expect_lost(d, what, why);
    // A wait whose value was reached before the loss returns; a signaled returns the word.
    if (call != Call::Signaled && call != Call::Sleep)
      require(!raised.empty(), "{}: the call that met it raised no Lost", what);
    others.check(what);
  }
  if (!untried.empty()) {
    std::string all;
    for (auto& u : untried) all += (all.empty() ? "" : ", ") + u;
    c.note(fmt::format("not triggered: {}", all));
  }
  require(tried > 0, "no injected fault was triggered");
}

void a_loss_leaves_other_devices_copies_alone(Context& c) {
  auto [o, fc] = c.faulty();
  Device d = o.device;
  need_copy_engine(d);
  if (d.facts().host_addresses) skip("the host addresses its memory, so its copies do not pass through staging memory");
  Opened other = c.fresh();
  const std::size_t n = copy_size(c, 64 << 10);
  Buffer h = Buffer::create(host(), n), x = Buffer::create(d, n), y = Buffer::create(other.device, n);
  put(h, pattern(n, 1));
  // A copy into its memory through staging, queued and, where it waits to be stepped, not run.
  Box row = Box::row(n);
  Buffer::submit_copy(h, x, std::span(&row, 1));
  fc->fail_next(faulty::Call::Submit, "conformance: lost with a staged copy queued");
  expect_throw<Lost>("a submit whose driver failed", [&] { go(fill_submission(d, x, 1)); });
  // Copies of other devices through staging go on.
  auto bytes = pattern(n, 2);
  put(h, bytes);
  Buffer::copy(h, y);
  expect_bytes(y, bytes, "another device's copy through staging after a loss");
  Buffer h2 = Buffer::create(host(), n);
  Buffer::copy(y, h2);
  expect_bytes(h2, bytes, "another device's copy out through staging after a loss");
}

void a_lost_devices_memory_raises_lost(Context& c) {
  Opened o = c.fresh();
  Device d = o.device;
  Buffer b = Buffer::create(d, 4096), h = Buffer::create(host(), 4096);
  put(b, pattern(4096, 5));
  d.close();
  expect_throw<Lost>("a blit out of a closed device's buffer", [&] { get(b); });
  expect_throw<Lost>("a blit into a closed device's buffer", [&] { put(b, pattern(4096, 6)); });
  expect_throw<Lost>("a copy out of a closed device's buffer into a host buffer", [&] { Buffer::copy(b, h); });
  expect_throw<Lost>("a fill of a closed device's buffer", [&] { b.fill(std::byte{1}); });
}

void a_lost_devices_memory_returns(Context& c) {
  auto [o, fc] = c.faulty();
  if (!o.live_bytes) skip("the target gives no count of its driver's memory (Opened::live_bytes)");
  Device d = o.device;
  need_copy_engine(d);
  const std::size_t base = o.live_bytes();
  { Buffer cached = Buffer::create(d, 1 << 16); }  // in rig's cache when the loss comes
  {
    Buffer a = Buffer::create(d, 1 << 20), b = Buffer::create(d, 1 << 20), idle = Buffer::create(d, 4096);
    // Whole buffers, or on a target whose copies are slow their first copy_size bytes: the
    // five values are handed over at once, and are still running at the loss.
    const std::size_t n = copy_size(c, a.length());
    auto s = n == a.length() ? copy_submission(d, a, b) : copy_submission(d, a.view(0, n), b.view(0, n));
    for (int i = 0; i < 5; ++i) go(s);  // left unreached where the device needs stepping
    fc->fail_next(faulty::Call::Submit, "conformance: lost with work in flight");
    expect_throw<Lost>("a submit whose driver failed", [&] { go(s); });
  }
  // With no call of free_cache: the loss returns the cache too.
  auto until = std::chrono::steady_clock::now() + 300ms;
  while (o.live_bytes() != base && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  require(o.live_bytes() == base,
          "after the device was lost and its buffers went, its driver holds {} bytes, not {}: rig never returned the "
          "memory of a lost device's unreached work, though the word shows its last submitted value",
          o.live_bytes(), base);
}

void a_wait_on_a_lost_producer_loses_the_waiting_device(Context& c) {
  Opened o = c.fresh();
  Device d = o.device;
  need_copy_engine(d);
  // A Store producer, stepped by nobody: its value stays unreached. Its stop raises its word
  // to its last submitted value ("after a loss the word may go on to show dropped values"),
  // and the device runs meanwhile, as hardware would: it must not run the waiting work as if
  // the value were reached.
  std::shared_ptr<faulty::Control> producer_faults;
  auto [p, pc] = c.held_fake({}, [&](edge::Opener<> inner) {
    auto [wrapped, f] = faulty::wrap(std::move(inner));
    producer_faults = f;
    return wrapped;
  });
  producer_faults->after_stop([step = o.step] {
    if (step)
      step(SIZE_MAX);
    else
      std::this_thread::sleep_for(20ms);
  });
  Point made = go(words_submission(p));
  Buffer a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
  auto s = copy_submission(d, a, b);
  const std::string producer_lost = std::string(p.name()) + " lost";
  if (!d.facts().waits.stores) {
    // The host waits inside submit: the producer's loss raises there, naming the producer,
    // and the device goes on.
    Async submitting([s, made] {
      Point w[] = {made};
      go(s, w);
    });
    std::this_thread::sleep_for(20ms);
    require(!submitting.ended(), "a submit waiting on the host for a held value returned: {}", submitting.raised());
    pc->fault("conformance: the producer faulted");
    require(submitting.wait(10s), "a submit waiting on the host for a faulted producer did not return");
    submitting.rethrow_unless_lost();
    require(submitting.raised().find(producer_lost) == 0,
            "a submit waiting on the host for a lost producer ended with \"{}\", not \"{}: …\"", submitting.raised(),
            producer_lost);
    require(!d.lost(), "the device is lost though none of its work waited: {}", d.lost().value_or(""));
    return;
  }
  Point w[] = {made};
  Point after = go(s, w);  // handed over: its queue waits for the producer's word
  pc->fault("conformance: the producer faulted");
  require(bool(lost_within(10s, [made] { made.wait(); })), "a wait on a faulted producer did not return");
  require(bool(p.lost()), "the faulted producer is not lost");
  auto raised = lost_within(10s, [after] { after.wait(); });
  require(bool(raised), "a wait for work that waits for a lost producer's unreached value did not return within 10 s");
  require(bool(d.lost()),
          "its queue ran work that waited for a lost producer's unreached value, and it is not lost (the wait for that "
          "work {})",
          raised->empty() ? std::string("returned") : "raised " + *raised);
  require(d.lost()->find(producer_lost) != std::string::npos, "the device is lost with \"{}\", not \"{}: …\"",
          *d.lost(), producer_lost);
}

void a_wait_interrupted_by_a_loss_raises_lost(Context& c) {
  auto [o, fc] = c.faulty();
  Device d = o.device;
  need_copy_engine(d);
  if (!d.facts().waits.stores) skip("its queues wait for no Store producer, so no other device can hold its work back");
  auto [p, pc] = c.held_fake();
  Point made = go(words_submission(p));
  Buffer a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
  Point w[] = {made};
  Point blocked = go(copy_submission(d, a, b), w);
  Async waiting([blocked] { blocked.wait(); });
  std::this_thread::sleep_for(20ms);
  require(!waiting.ended(), "a wait for work held back by another device's value returned");
  fc->fail_next(faulty::Call::Submit, "conformance: lost while another thread waits");
  expect_throw<Lost>("a submit whose driver failed", [&] { go(copy_submission(d, b, a)); });
  const bool ended = waiting.wait(2s);
  pc->step();  // releases the producer, in case the wait still blocks
  require(ended, "a wait blocked on the device did not return within 2 s of its loss");
  require(waiting.raised_lost() && waiting.raised().find(std::string(d.name()) + " lost: ") == 0,
          "a wait blocked on the device ended with \"{}\", not with Lost naming it",
          waiting.raised().empty() ? std::string("(returned)") : waiting.raised());
}

void close_of_an_idle_device(Context& c) {
  Opened o = c.fresh();
  Device d = o.device;
  Buffer b = Buffer::create(d, 4096);
  put(b, pattern(4096, 1));
  d.close();
  require(d.lost() == std::optional<std::string>("closed"), "after close the device's loss reads \"{}\", not \"closed\"",
          d.lost().value_or("(live)"));
  std::string message = expect_throw<Lost>("an allocation on a closed device", [&] { Buffer::create(d, 64); });
  require(message == std::string(d.name()) + " lost: closed", "a use of a closed device raised \"{}\"", message);
  if (d.facts().copy_engine) expect_throw<Lost>("a submission on a closed device", [&] { fill_submission(d, b, 1); });
  d.close();  // closing a lost device does nothing
  require(d.lost() == std::optional<std::string>("closed"), "a second close changed the reason to \"{}\"",
          d.lost().value_or("(live)"));
  for (const Device& live : devices())
    require(!(live == d), "rig::devices() still lists the closed device");
}

void close_of_a_busy_device_waits_for_its_work(Context& c) {
  Opened o = c.fresh();
  Device d = o.device;
  need_copy_engine(d);
  const std::size_t n = copy_size(c, 256 << 10);
  Buffer h = Buffer::create(host(), n);
  put(h, std::vector<std::uint8_t>(n, 0));
  auto borrowed = Buffer::borrow(d, h);
  Buffer a = Buffer::create(d, n), b = Buffer::create(d, n);
  auto bytes = pattern(n, 42);
  put(a, bytes);
  auto there = copy_submission(d, a, b), back = copy_submission(d, b, a);
  // 50 values of work in flight, or on a target whose copies are slow, what it copies in
  // about two seconds (8 values at least).
  const auto rate = c.target.copy_bytes_per_second;
  const int values = rate ? std::clamp(int(*rate * 2 / double(n)), 8, 50) : 50;
  Point last;
  for (int i = 0; i < values; ++i) last = go(i % 2 ? back : there);
  if (borrowed) last = go(copy_submission(d, a, *borrowed));
  d.close();
  require(d.lost() == std::optional<std::string>("closed"), "after close the device's loss reads \"{}\"",
          d.lost().value_or("(live)"));
  require(raw_word(d) >= last.value(), "after close its word shows {}, below its last value {}", raw_word(d),
          last.value());
  if (borrowed)
    expect_bytes(h, bytes, "host memory the device's last work wrote before close");
  else
    c.note("it cannot borrow host memory: the work's bytes were not checked after close");
}

void long_work_is_not_a_hang(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  if (!d.facts().hang_ms) skip("its facts give no hang_ms: the vendor's driver bounds its hangs");
  if (!o.slow) skip("the target gives no slow work (Opened::slow)");
  const int h = *d.facts().hang_ms;
  const auto per = std::chrono::milliseconds(std::max(1, h * 2 / 5));
  const int n = 6;
  auto t0 = std::chrono::steady_clock::now();
  Point last;
  for (int i = 0; i < n; ++i) last = o.slow(per);
  auto raised = lost_within(std::chrono::milliseconds(20 * h * n + 10000), [last] { last.wait(); });
  require(bool(raised), "a wait for slow work did not return");
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  require(raised->empty(), "work of {} values of {} ms each, which progressed, was lost as a hang: {}", n, per.count(),
          *raised);
  require(!d.lost(), "the device is lost: {}", d.lost().value_or(""));
  require(took.count() > h, "the work took {} ms, no longer than hang_ms {}: the law proved nothing", took.count(), h);
}

void a_stall_past_hang_ms_is_a_hang(Context& c) {
  Opened probe = c.device();
  if (!probe.device.facts().hang_ms) skip("its facts give no hang_ms: the vendor's driver bounds its hangs");
  Opened o = c.fresh();
  Device d = o.device;
  if (!o.slow) skip("the target gives no slow work (Opened::slow)");
  const int h = *d.facts().hang_ms;
  Point p = o.slow(std::chrono::milliseconds(4 * h));
  auto t0 = std::chrono::steady_clock::now();
  auto raised = lost_within(std::chrono::milliseconds(40 * h + 10000), [p] { p.wait(); });
  require(bool(raised), "a wait for stalled work did not return");
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  const std::string why = fmt::format("no progress for {} ms", h);
  require(!raised->empty(), "work that made no progress for {} ms (hang_ms {}) was not lost", 4 * h, h);
  require(d.lost() == std::optional<std::string>(why), "the stalled device's loss reads \"{}\", not \"{}\"",
          d.lost().value_or("(live)"), why);
  require(took.count() >= h, "the hang was declared after {} ms, before hang_ms {}", took.count(), h);
}

}  // namespace rig::conformance::detail
