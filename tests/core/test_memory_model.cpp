// A model-based property test of buffers: random creates, views, borrows, copies (with
// boxes), fills, device submissions, donations and drops over the host device, two memory
// devices and two fake devices (one whose memory the host does not address), each step
// checked against a plain model of every allocation's bytes.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <cstdlib>
#include <map>
#include <random>

#include "../support/fake_driver.hpp"

using namespace rig;

namespace {

struct Live {
  Buffer buffer;
  std::shared_ptr<std::vector<std::uint8_t>> model;  // the allocation's bytes
  std::size_t first;                                  // the buffer's offset in them
};

std::vector<std::uint8_t> contents(const Buffer& b) {
  std::vector<std::uint8_t> out(b.length());
  b.blit_to(0, std::as_writable_bytes(std::span(out)));
  return out;
}

int steps() {
  const char* n = std::getenv("RIG_MODEL_STEPS");
  return n ? std::atoi(n) : 3000;
}

}  // namespace

TEST_CASE("buffers keep every byte where the model says, the budget holds, and memory returns") {
  std::mt19937_64 rng(20261129);
  auto pick = [&](std::size_t n) { return n ? std::size_t(rng() % n) : std::size_t(0); };

  auto [o1, fake_control] = fake::opener("MODEL-FAKE", {.budget = 8 << 20, .runs_when_asleep = true});
  fake::Options vram_options;
  vram_options.budget = 16 << 20;
  vram_options.host_addresses = false;
  auto [o2, vram_control] = fake::opener("MODEL-VRAM", vram_options);
  std::vector<Device> devices{host(), memory_device("MODEL-MEM1"), memory_device("MODEL-MEM2"), *open(o1), *open(o2)};
  devices[1].set_budget(4 << 20);

  std::vector<Live> live;
  int copies = 0, fills = 0, submits = 0, donations = 0, borrows = 0;
  for (int step = 0; step < steps(); ++step) {
    CAPTURE(step);
    int op = int(pick(10));
    if (live.size() < 4) op = 0;
    if (op == 0) {  // create
      Device d = devices[pick(devices.size())];
      std::size_t n = 1 + pick(pick(8) == 0 ? (1 << 20) : 4096);
      try {
        Buffer b = Buffer::create(d, n);
        auto model = std::make_shared<std::vector<std::uint8_t>>(n);
        std::vector<std::uint8_t> init(n);
        for (auto& x : init) x = std::uint8_t(rng());
        b.blit_from(std::as_bytes(std::span(init)), 0);
        *model = init;
        live.push_back({b, model, 0});
      } catch (const OutOfMemory&) {
        CHECK(d.used() <= d.budget());
      }
    } else if (op == 1) {  // view
      const Live& l = live[pick(live.size())];
      std::size_t first = pick(l.buffer.length()), length = pick(l.buffer.length() - first + 1);
      live.push_back({l.buffer.view(first, length), l.model, l.first + first});
    } else if (op == 2) {  // borrow of host memory on a fake device
      const Live& l = live[pick(live.size())];
      if (auto b = Buffer::borrow(devices[3], l.buffer)) {
        live.push_back({*b, l.model, l.first});
        ++borrows;
      }
    } else if (op == 3 || op == 4) {  // copy with a box
      const Live& s = live[pick(live.size())];
      const Live& d = live[pick(live.size())];
      if (s.buffer.overlaps(d.buffer) || s.model == d.model) continue;
      std::size_t width = 1 + pick(std::min<std::size_t>(s.buffer.length(), d.buffer.length()));
      std::size_t rows = 1 + pick(3);
      std::size_t sp = width + pick(4), dp = width + pick(4);
      auto fits = [&](std::size_t len, std::size_t pitch) { return (rows - 1) * pitch + width <= len; };
      while (rows > 1 && (!fits(s.buffer.length(), sp) || !fits(d.buffer.length(), dp))) --rows;
      if (!fits(s.buffer.length(), sp) || !fits(d.buffer.length(), dp)) continue;
      std::size_t so = pick(s.buffer.length() - ((rows - 1) * sp + width) + 1);
      std::size_t dof = pick(d.buffer.length() - ((rows - 1) * dp + width) + 1);
      Box box{so, dof, width, rows, sp, dp};
      Buffer::submit_copy(s.buffer, d.buffer, std::span(&box, 1));
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t i = 0; i < width; ++i)
          (*d.model)[d.first + dof + r * dp + i] = (*s.model)[s.first + so + r * sp + i];
      ++copies;
    } else if (op == 5) {  // fill
      const Live& l = live[pick(live.size())];
      auto byte = std::uint8_t(rng());
      Buffer target = l.buffer;
      target.submit_fill(std::byte{byte});
      std::fill_n(l.model->begin() + std::ptrdiff_t(l.first), l.buffer.length(), byte);
      ++fills;
    } else if (op == 6) {  // a device's own submission: a fill part on its copy engine
      const Live& l = live[pick(live.size())];
      Device d = l.buffer.device();
      if (!d.facts().copy_engine || l.buffer.length() == 0) continue;
      auto byte = std::uint8_t(rng());
      Submission::Part part{"", {}, Submission::Copy{{std::nullopt, 0}, {std::nullopt, 0}, {Box::row(l.buffer.length())}, std::byte{byte}}};
      auto s = Submission::make(d, std::span(&part, 1), 0, 1);
      Run run;
      Buffer w[] = {l.buffer};
      submit(s, run, {}, w);
      std::fill_n(l.model->begin() + std::ptrdiff_t(l.first), l.buffer.length(), byte);
      ++submits;
    } else if (op == 7) {  // donate a whole allocation and keep the consumed buffer
      std::size_t i = pick(live.size());
      Live l = live[i];
      if (!l.buffer.spans() || l.buffer.is_borrowed()) continue;
      try {
        const std::vector<Buffer> group[] = {{l.buffer}};
        auto fresh = claim::with({}, group, [&](claim::Claims& c) {
          if (!c.exclusive(l.buffer)) throw std::invalid_argument("not donated: another claim holds it");
          return c.consume("donated", l.buffer);
        });
        std::erase_if(live, [&](const Live& x) { return x.model == l.model; });
        live.push_back({fresh, l.model, 0});
        ++donations;
      } catch (const std::invalid_argument&) {
        // another buffer of it holds a claim: refused, nothing taken
        CHECK(!l.buffer.dead());
      }
    } else {  // drop
      live.erase(live.begin() + std::ptrdiff_t(pick(live.size())));
    }
    // Check a random buffer, and the budgets.
    if (!live.empty()) {
      const Live& l = live[pick(live.size())];
      auto got = contents(l.buffer);
      REQUIRE(std::equal(got.begin(), got.end(), l.model->begin() + std::ptrdiff_t(l.first)));
    }
    for (auto& d : devices) REQUIRE(d.used() <= d.budget());
  }
  // Every buffer still matches.
  for (const Live& l : live) {
    auto got = contents(l.buffer);
    REQUIRE(std::equal(got.begin(), got.end(), l.model->begin() + std::ptrdiff_t(l.first)));
  }
  MESSAGE("copies " << copies << ", fills " << fills << ", submits " << submits << ", donations " << donations
                    << ", borrows " << borrows);
  CHECK(copies > 0);
  CHECK(submits > 0);
  // Every allocation returns once nothing holds it.
  live.clear();
  for (auto& d : devices) {
    d.wait(d.submitted());
    d.free_cache();
  }
  CHECK(fake_control->live_bytes() == 0);
  CHECK(vram_control->live_bytes() == 0);
  CHECK(fake_control->violations().empty());
  CHECK(vram_control->violations().empty());
  for (std::size_t i = 1; i < devices.size(); ++i) devices[i].close();
}
