// Copies, fills and submits from four threads over shared and private memory.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <cstdlib>
#include <thread>

#include "../support/fake_driver.hpp"
#include "support.hpp"

using namespace rig;

TEST_CASE("copies and submits from four threads over one source keep every byte") {
  const int rounds = std::getenv("RIG_CONCURRENCY_ROUNDS") ? std::atoi(std::getenv("RIG_CONCURRENCY_ROUNDS")) : 300;
  fake::Options o;
  o.host_addresses = false;
  o.budget = 256 << 20;
  auto [opener, control] = fake::opener("CONC-VRAM", o);
  Device vram = *open(opener);
  Device mem = memory_device("CONC-MEM");
  const std::size_t n = 4096;
  Buffer source = Buffer::create(host(), n * 4);
  source.write<std::uint32_t>([](auto xs) {
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::uint32_t(i * 3);
  });
  Buffer shared_vram = Buffer::create(vram, n * 4);
  Buffer::copy(source, shared_vram);

  std::atomic<int> wrong{0};
  auto worker = [&](int t) {
    Buffer mine = Buffer::create(t % 2 ? mem : host(), n * 4);
    Buffer back = Buffer::create(host(), n * 4);
    Buffer on_vram = Buffer::create(vram, n * 4);
    auto add = test::one_launch(host(), test::kernel("copy_u32"), 24, 1, 1);
    Run run;
    auto b = add.block(0);
    run.set(b, 16, std::uint64_t(n));
    for (int r = 0; r < rounds; ++r) {
      Buffer::copy(source, mine);                 // host copy, shared source
      Buffer::copy(shared_vram, on_vram);         // a device copy on the shared fake
      Buffer::copy(on_vram, back);                // through staging
      mine.fill(std::byte(t));
      Buffer dst = Buffer::create(host(), n * 4);  // from the cache, concurrently
      Buffer reads[] = {source}, writes[] = {dst};
      submit(add, run, reads, writes);
      bool ok = dst.read<std::uint32_t>([](auto xs) {
        for (std::size_t i = 0; i < xs.size(); ++i)
          if (xs[i] != i * 3) return false;
        return true;
      });
      ok = ok && back.read<std::uint32_t>([](auto xs) {
        for (std::size_t i = 0; i < xs.size(); ++i)
          if (xs[i] != i * 3) return false;
        return true;
      });
      if (!ok) wrong++;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  CHECK(control->violations().empty());
  mem.close();
  vram.close();
}
