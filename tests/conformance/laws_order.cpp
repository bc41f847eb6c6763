// laws_order.cpp — the laws of order, commits and waits.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "laws.hpp"

namespace rig::conformance::detail {

namespace {

// A submission of one Words part: what a held fake producer runs.
Submission words_submission(const Device& d) {
  Submission::Part part{"", {}, Submission::Words{Buffer::of_string(std::string(8, '\0'))}};
  return Submission::make(d, std::span(&part, 1), 0, 0);
}

}  // namespace

void device_order(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  need_copy_engine(d);
  auto queues = copy_queues(d);
  const std::size_t n = copy_size(c, scale() >= 1 ? (256 << 10) : (16 << 10));
  const int chain = 12, rounds = std::max(3, int(8 * scale()));
  std::vector<Buffer> b;
  for (int i = 0; i <= chain; ++i) b.push_back(Buffer::create(d, n));
  for (auto& x : b) x.fill(std::byte{0});
  // Value i copies b[i-1] into b[i], on the queues in turn: each must start after the one
  // before it completed, whatever queue ran it.
  std::vector<Submission> copies;
  for (int i = 1; i <= chain; ++i)
    copies.push_back(copy_submission(d, b[std::size_t(i - 1)], b[std::size_t(i)], queues[std::size_t(i) % queues.size()]));
  for (int r = 1; r <= rounds; ++r) {
    go(fill_submission(d, b[0], std::uint8_t(r), queues[0]));
    Point last;
    for (auto& s : copies) last = go(s);
    require(settle(o, last, copy_limit(c, std::size_t(chain + 1) * n)), "round {}: the chain of copies did not complete",
            r);
    expect_all(b[std::size_t(chain)], std::uint8_t(r),
               fmt::format("round {}: the end of a chain of {} copies over {} queues", r, chain, queues.size()));
  }
  if (queues.size() < 2) c.note("it has one queue that runs Copy: the order across queues was not tried");
}

void prefix_order(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  need_copy_engine(d);
  auto queues = copy_queues(d);
  const std::size_t n = copy_size(c, 64 << 10);
  Buffer a = Buffer::create(d, n), b = Buffer::create(d, n), cc = Buffer::create(d, n), dd = Buffer::create(d, n),
         e = Buffer::create(d, n), f = Buffer::create(d, n), g = Buffer::create(d, n);
  std::pair<Buffer, Access> fixed[] = {{a, Access::ReadWrite},  {b, Access::ReadWrite}, {cc, Access::ReadWrite},
                                       {dd, Access::ReadWrite}, {e, Access::ReadWrite}, {f, Access::ReadWrite},
                                       {g, Access::ReadWrite}};
  auto fill = [&](std::string q, std::vector<int> after, const Buffer& dst, std::uint8_t byte) {
    return Submission::Part{std::move(q), std::move(after),
                            Submission::Copy{{std::nullopt, 0}, {dst, 0}, {Box::row(n)}, std::byte{byte}}};
  };
  auto copy = [&](std::string q, std::vector<int> after, const Buffer& src, const Buffer& dst) {
    return Submission::Part{std::move(q), std::move(after), Submission::Copy{{src, 0}, {dst, 0}, {Box::row(n)}, {}}};
  };
  const bool two = queues.size() >= 2;
  const int rounds = std::max(3, int(10 * scale()));
  for (int r = 1; r <= rounds; ++r) {
    const auto x = std::uint8_t(3 * r), y = std::uint8_t(3 * r + 1), z = std::uint8_t(3 * r + 2);
    const std::string q0 = queues[0];
    std::vector<Submission::Part> parts{
        fill(q0, {}, a, x), copy(q0, {}, a, b), fill(q0, {}, a, y), copy(q0, {}, a, cc), copy(q0, {}, cc, dd),
    };
    if (two) {
      const std::string q1 = queues[1];
      parts.push_back(copy(q1, {4}, dd, e));   // after part 4 of the other queue
      parts.push_back(fill(q1, {}, f, z));
      parts.push_back(copy(q0, {6}, f, g));    // after part 6 of the other queue
    }
    Point p = go(Submission::make(d, parts, 0, 0, fixed));
    require(settle(o, p, copy_limit(c, parts.size() * n)), "round {}: the submission did not complete", r);
    expect_all(b, x, fmt::format("round {}: a copy after a fill on one queue", r));
    expect_all(cc, y, fmt::format("round {}: a copy after a second fill of its source on one queue", r));
    expect_all(dd, y, fmt::format("round {}: a copy of a copy on one queue", r));
    if (two) {
      expect_all(e, y, fmt::format("round {}: a part of {} after a part of {}", r, queues[1], queues[0]));
      expect_all(g, z, fmt::format("round {}: a part of {} after a part of {}", r, queues[0], queues[1]));
    }
  }
  if (!two) c.note("it has one queue that runs Copy: parts that follow another queue's were not tried");
}

void work_completes_with_no_further_call(Context& c) {
  if (!c.target.commit_bound) skip("the target states no commit bound k (Target::commit_bound)");
  const std::uint64_t k = *c.target.commit_bound;
  Opened o = c.device();
  Device d = o.device;
  need_copy_engine(d);
  Buffer a = Buffer::create(d, 256), b = Buffer::create(d, 256);
  auto s = copy_submission(d, a, b);
  Run run;
  d.wait(d.submitted());
  for (int round = 0; round < 3; ++round) {
    const std::uint64_t n = 3 * k + 2 + std::uint64_t(round);
    Point last;
    for (std::uint64_t i = 0; i < n; ++i) last = submit(s, run, {}, {});
    // "the word shows each value at most k values late while work is submitted": with no call
    // of rig, the device runs what its driver committed on its own.
    const std::uint64_t must = last.value() - (k - 1);
    auto until = std::chrono::steady_clock::now() + 10s;
    while (raw_word(d) < must && std::chrono::steady_clock::now() < until) {
      if (o.step) o.step(SIZE_MAX);
      std::this_thread::sleep_for(100us);
    }
    require(raw_word(d) >= must,
            "after {} submits and no other call its word shows {}, below {}: the driver did not commit on its own "
            "within k = {} values",
            n, raw_word(d), must, k);
    d.wait(last.value());
  }
}

void it_waits_for_other_devices_values(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  need_copy_engine(d);
  for (auto completion : {edge::Completion::Store, edge::Completion::Host}) {
    const std::string kind = completion == edge::Completion::Store ? "Store" : "Host";
    auto [p, pc] = c.held_fake({.completion = completion});
    Point made = go(words_submission(p));
    Buffer a = Buffer::create(d, 4096), b = Buffer::create(d, 4096);
    auto bytes = pattern(4096, 77);
    put(a, bytes);
    auto s = copy_submission(d, a, b);
    const bool in_queue = completion == edge::Completion::Store ? d.facts().waits.stores : d.facts().waits.hosts;
    auto after = std::make_shared<Point>();
    Async submitting([s, made, after] {
      Point w[] = {made};
      *after = go(s, w);
    });
    std::this_thread::sleep_for(30ms);
    if (in_queue) {
      require(submitting.wait(5s), "a submit waiting for a {} producer did not return, though its queues wait for it",
              kind);
      submitting.rethrow();
      if (o.step) o.step(SIZE_MAX);
      std::this_thread::sleep_for(5ms);
      require(!after->reached(), "its work ran before the {} producer's value was reached", kind);
    } else {
      require(!submitting.ended(),
              "a submit waiting for a {} producer returned before the producer's value was reached, though its "
              "queues do not wait for it: the host must wait before handing the work over",
              kind);
    }
    pc->step();
    require(submitting.wait(10s), "a submit waiting for a {} producer did not return once the value was reached", kind);
    submitting.rethrow();
    require(settle(o, *after), "its work waiting for a {} producer did not complete once the value was reached", kind);
    require(made.reached(), "its work completed before the {} producer's value was reached", kind);
    expect_bytes(b, bytes, fmt::format("a copy that waited for a {} producer", kind));
  }
}

void other_devices_wait_for_its_values(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  need_copy_engine(d);
  auto [f, fc] = c.held_fake();  // waits in its queue for every producer
  auto fs = words_submission(f);
  Device m = c.memory();  // waits on the host
  Buffer ma = Buffer::create(m, 256), mb = Buffer::create(m, 256);
  auto ms = copy_submission(m, ma, mb);
  Buffer ha = Buffer::create(host(), 256), hb = Buffer::create(host(), 256);
  auto hs = copy_submission(host(), ha, hb);
  Buffer a = Buffer::create(d, 64 << 10);
  const int rounds = std::max(5, int(20 * scale()));
  for (int r = 0; r < rounds; ++r) {
    Point pv = o.slow && r % 4 == 0 ? o.slow(2ms) : go(fill_submission(d, a, std::uint8_t(r)));
    Point w[] = {pv};
    Point fv = go(fs, w);
    fc->step();
    if (!pv.reached()) require(!fv.reached(), "round {}: the fake's work ran before the device's value", r);
    Point hv = go(hs, w);
    Point mv = go(ms, w);  // the host waits for pv inside this submit
    require(pv.reached(), "round {}: a memory device's submit that waits for the device's value returned before it", r);
    auto until = std::chrono::steady_clock::now() + 10s;
    while (!(fv.reached() && hv.reached() && mv.reached())) {
      require(std::chrono::steady_clock::now() < until, "round {}: work waiting for the device's value did not complete",
              r);
      fc->step();
      if (o.step) o.step(SIZE_MAX);
      std::this_thread::sleep_for(50us);
    }
  }
}

void the_word_never_moves_backwards(Context& c) {
  Opened o = c.device();
  Device d = o.device;
  need_copy_engine(d);
  const std::size_t n = 4096;
  // Operations a thread: 40 at least, or on a target whose copies are slow what it copies in
  // about ten seconds (most operations move a buffer, on either thread), 16 at least.
  int ops = std::max(40, int(300 * scale()));
  if (const auto rate = c.target.copy_bytes_per_second) ops = std::min(ops, std::max(16, int(*rate * 10 / (2.0 * n))));
  std::atomic<bool> done{false};
  std::mutex found_mutex;
  std::vector<std::string> found;
  auto report = [&](std::string s) {
    std::lock_guard g(found_mutex);
    if (found.size() < 8) found.push_back(std::move(s));
  };
  // The sampler reads the word as another device's queue would, and steps the device where
  // its work needs it, concurrently with the submits.
  std::thread sampler([&] {
    std::uint64_t last = raw_word(d);
    while (!done.load()) {
      std::uint64_t w = raw_word(d);
      if (w < last) report(fmt::format("the word moved back from {} to {}", last, w));
      // One submit at a time is in flight, whose value the word may show before rig notes it.
      if (std::uint64_t s = d.submitted(); w > s + 1)
        report(fmt::format("the word shows {}, past the {} values submitted", w, s));
      last = std::max(last, w);
      if (o.step) o.step(SIZE_MAX);
      std::this_thread::sleep_for(20us);
    }
  });
  struct Stop {  // however the law ends
    std::atomic<bool>& done;
    std::thread& sampler;
    ~Stop() {
      done = true;
      if (sampler.joinable()) sampler.join();
    }
  } stop{done, sampler};

  std::vector<std::vector<std::uint64_t>> values(2);
  auto worker = [&](int t) {
    std::mt19937_64 rng(std::uint64_t(1234 + t));
    auto pick = [&](std::size_t k) { return std::size_t(rng() % k); };
    std::vector<Buffer> bufs;
    std::vector<std::vector<std::uint8_t>> model;
    for (int i = 0; i < 3; ++i) {
      bufs.push_back(Buffer::create(d, n));
      model.push_back(pattern(n, std::uint64_t(t * 10 + i)));
      put(bufs.back(), model.back());
    }
    Buffer h = Buffer::create(host(), n);
    std::vector<Point> points, waited;
    auto submitted = [&](Point p) {
      if (p.index() != d.index()) report(fmt::format("a submit returned a point of device index {}", p.index()));
      if (!points.empty() && p.value() <= points.back().value())
        report(fmt::format("thread {}: value {} after value {}", t, p.value(), points.back().value()));
      points.push_back(p);
      values[std::size_t(t)].push_back(p.value());
    };
    for (int op = 0; op < ops; ++op) {
      std::size_t i = pick(3), j = (i + 1 + pick(2)) % 3;
      switch (pick(8)) {
        case 0: {
          auto byte = std::uint8_t(rng());
          submitted(go(fill_submission(d, bufs[i], byte)));
          std::fill(model[i].begin(), model[i].end(), byte);
          break;
        }
        case 1:
          submitted(go(copy_submission(d, bufs[i], bufs[j])));
          model[j] = model[i];
          break;
        case 2: {
          std::size_t at = pick(n), len = 1 + pick(n - at);
          auto bytes = pattern(len, rng());
          put(bufs[i], bytes, at);
          std::copy(bytes.begin(), bytes.end(), model[i].begin() + std::ptrdiff_t(at));
          break;
        }
        case 3:
          if (get(bufs[i]) != model[i]) report(fmt::format("thread {}: buffer {} differs from the model at op {}", t, i, op));
          break;
        case 4:
          if (!points.empty()) {
            Point p = points[pick(points.size())];
            p.wait();
            if (!p.reached()) report(fmt::format("value {} is not reached after a wait for it", p.value()));
            waited.push_back(p);
          }
          break;
        case 5:
          for (const Point& p : waited)
            if (!p.reached()) report(fmt::format("value {} was reached, and is no longer", p.value()));
          break;
        case 6:
          Buffer::copy(bufs[i], h);
          if (get(h) != model[i]) report(fmt::format("thread {}: a copy of buffer {} out differs at op {}", t, i, op));
          break;
        case 7:
          bufs[i] = Buffer::create(d, n);
          put(bufs[i], model[i]);
          break;
      }
    }
    for (std::size_t i = 0; i < 3; ++i)
      if (get(bufs[i]) != model[i]) report(fmt::format("thread {}: buffer {} differs from the model at the end", t, i));
  };
  std::exception_ptr errors[2];
  std::thread threads[2];
  for (int t = 0; t < 2; ++t)
    threads[t] = std::thread([&, t] {
      try {
        worker(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  d.wait(d.submitted());
  done = true;
  sampler.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<std::uint64_t> all = values[0];
  all.insert(all.end(), values[1].begin(), values[1].end());
  std::sort(all.begin(), all.end());
  if (std::adjacent_find(all.begin(), all.end()) != all.end()) report("two submits were given the same value");
  if (raw_word(d) < d.submitted())
    report(fmt::format("after a wait for value {} the word shows {}", d.submitted(), raw_word(d)));
  if (!found.empty()) {
    std::string all_found;
    for (auto& s : found) all_found += (all_found.empty() ? "" : "; ") + s;
    fail("{}", all_found);
  }
}

}  // namespace rig::conformance::detail
