// The edu rig driver (edu_driver.hpp) inside the VM: the conformance laws that apply to a
// copy-only device pass on it, and its own promises hold (the device writes the timeline
// word by DMA into IOMMU-mapped memory; work outside its memory loses it with the reason).
#include "edu.hpp"
#include "edu_driver.hpp"

#include <conformance.hpp>
#include <pci_bus.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <variant>
#include <vector>

#include <sys/mman.h>
#include <time.h>

using namespace rig;

namespace {

std::string edu_address() {
  auto found = pci::find("/sys/bus/pci", edu::vendor_id, edu::device_id);
  REQUIRE_MESSAGE(!found.empty(), "no edu device (1234:11e8): this program runs inside the VM of tests/vm/run_vm.py");
  return found.front();
}

// The CPU time this process has used, its threads' together, in seconds.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

}  // namespace

TEST_CASE("a copy through rig on edu moves the bytes and the device's word shows its value") {
  auto device = open(edu::opener("EDU", edu_address()));
  REQUIRE_MESSAGE(device.has_value(), device.error());
  std::string text(5000, '\0');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = char('a' + i % 23);
  Buffer from = Buffer::create(*device, text.size());
  Buffer to = Buffer::create(*device, text.size());
  from.blit_from(std::as_bytes(std::span(text)), 0);  // through Pinned staging, by the device
  const std::uint64_t before = *device->facts().word;
  auto started = std::chrono::steady_clock::now();
  Buffer::copy(from, to);                              // device to device: edu's engine
  fmt::print("edu: a copy of {} bytes ({} transfers of at most {} bytes) took {:.1f} ms\n", text.size(),
             (text.size() + edu::largest_transfer - 1) / edu::largest_transfer, edu::largest_transfer,
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  CHECK(*device->facts().word > before);
  std::string back(text.size(), '\0');
  to.blit_to(0, std::as_writable_bytes(std::span(back)));
  CHECK(back == text);
  to.fill(std::byte{0x5a});
  to.blit_to(0, std::as_writable_bytes(std::span(back)));
  CHECK(back == std::string(text.size(), '\x5a'));
  CHECK(device->facts().bus == edu_address());
}

// One transfer of edu's engine, polled (no interrupt, so none is left for the driver): false
// where it does not finish in two seconds.
bool poll_transfer(const vfio::Mmio& bar, std::uint64_t src, std::uint64_t dst, std::uint64_t bytes,
                   std::uint64_t direction) {
  bar.write64(edu::dma_source, src);
  bar.write64(edu::dma_destination, dst);
  bar.write64(edu::dma_count, bytes);
  bar.write64(edu::dma_command, edu::dma_start | direction);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (bar.read64(edu::dma_command) & edu::dma_start)
    if (std::chrono::steady_clock::now() > until) return false;
  return true;
}

TEST_CASE("dma for edu itself is Bus of the buffer's IOVAs, which edu's own engine reads; another function is in "
          "another IOMMU domain") {
  const auto started = std::chrono::steady_clock::now();
  const std::string address = edu_address();
  auto device = open(edu::opener("EDU", address));
  REQUIRE_MESSAGE(device.has_value(), device.error());
  constexpr std::size_t kBytes = 3 * 4096;
  std::string text(kBytes, '\0');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = char('A' + i * 7 % 26);
  Buffer b = Buffer::create(*device, kBytes);
  b.blit_from(std::as_bytes(std::span(text)), 0);
  auto dma = b.dma(address);
  REQUIRE_MESSAGE(dma.has_value(), (dma ? std::string() : dma.error()));
  const auto* bus = std::get_if<edge::Bus>(&*dma);
  REQUIRE(bus != nullptr);
  REQUIRE(bus->ranges.size() == 1);
  const auto [iova, bytes] = bus->ranges[0];
  CHECK(iova % 4096 == 0);
  CHECK(bytes == kBytes);
  CHECK(iova + bytes <= (std::uint64_t(1) << edu::dma_bits));
  // edu's engine, programmed here through vfio/: the buffer's last 3000 bytes, from their bus
  // address into edu's buffer, then into a page of this test's own.
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  REQUIRE(page != MAP_FAILED);
  constexpr std::uint64_t kAt = kBytes - 3000, kMove = 3000;
  auto ran = edu::with_engine(address, [&](vfio::Device& function, const vfio::Mmio& bar) {
    auto mine = function.map_dma(page, 4096);
    REQUIRE_MESSAGE(mine.has_value(), (mine ? std::string() : mine.error()));
    CHECK(poll_transfer(bar, iova + kAt, edu::buffer_address, kMove, 0));
    CHECK(poll_transfer(bar, edu::buffer_address, *mine, kMove, edu::dma_to_ram));
    CHECK(function.unmap_dma(*mine).has_value());
  });
  REQUIRE_MESSAGE(ran.has_value(), (ran ? std::string() : ran.error()));
  CHECK(std::string(static_cast<const char*>(page), kMove) == text.substr(kAt));
  munmap(page, 4096);
  // Any other function: its IOVAs are another domain's.
  Buffer other = Buffer::create(*device, 4096);
  auto elsewhere = other.dma("0000:00:1f.0");
  REQUIRE_FALSE(elsewhere.has_value());
  CHECK(elsewhere.error().find("EDU: 0000:00:1f.0 is in another IOMMU domain than " + address) != std::string::npos);
  // The device goes on.
  Buffer fresh = Buffer::create(*device, 4096);
  Buffer::copy(b.view(0, 4096), fresh);
  std::string back(4096, '\0');
  fresh.blit_to(0, std::as_writable_bytes(std::span(back)));
  CHECK(back == text.substr(0, 4096));
  fmt::print("edu: Bus read back by edu's own engine in {:.1f} ms of the VM's clock\n",
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
}

TEST_CASE("the conformance laws that apply to a copy-only device pass on edu") {
  // edu moves at most 4 KiB a transfer, each after about 100 ms of the VM's clock: the laws
  // run at a small scale unless RIG_CONFORMANCE_SCALE says otherwise.
  setenv("RIG_CONFORMANCE_SCALE", "0.05", 0);
  auto target = conformance::driver_target("EDU", [address = edu_address()] { return edu::opener("EDU", address); }, 1,
                                           "edu over VFIO (tests/vm/edu_driver.hpp)");
  // A copy is two transfers through edu's buffer: the laws that move many bytes size their
  // work and their waits by this.
  target.copy_bytes_per_second = double(edu::largest_transfer) / (2 * edu::transfer_seconds);
  std::size_t passed = 0, skipped = 0;
  conformance::RunOptions options;
  // Every law. The VM's clock runs ahead of the host's while the guest idles (QEMU's -icount
  // sleep=off): a law may take a minute of it.
  options.timeout = std::chrono::seconds(120);
  // Beside each law's time, the CPU time the program used meanwhile (also on the VM's clock:
  // QEMU counts an instruction a nanosecond, and jumps over the guest's idle time, such as
  // edu's waits before its transfers): what of the law's time the program computed.
  double cpu_before = cpu_seconds();
  options.on_outcome = [&](const conformance::Outcome& o) {
    const double cpu = cpu_seconds();
    fmt::print("law {} {} ({:.2f} s of the VM's clock, {:.2f} s of CPU){}{}\n", conformance::status_name(o.status),
               o.law, o.seconds, cpu - cpu_before, o.message.empty() ? "" : ": ", o.message);
    cpu_before = cpu;
    std::fflush(stdout);
  };
  for (const auto& o : conformance::run(target, options)) {
    CHECK_MESSAGE(o.status != conformance::Status::Failed, o.law, ": ", o.message);
    passed += o.status == conformance::Status::Passed;
    skipped += o.status == conformance::Status::Skipped;
  }
  fmt::print("edu: {} laws passed, {} skipped\n", passed, skipped);
  CHECK(passed >= 19u);
}
