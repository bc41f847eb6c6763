// The thread device (thread_driver.hpp), a driver built outside rig, opened with rig::open
// and used through rig's API: a fill, copies between it and the host device in both
// directions, and a copy that waits for a memory device's value. Every byte is checked; the
// program exits non-zero on a mismatch. It also shows that rig refuses an opener made with
// another version's headers.
#include <rig/rig.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "thread_driver.hpp"

int main() {
  auto opened = rig::open(example::thread_opener("THREAD:0"));
  if (!opened) {
    std::fprintf(stderr, "driver_demo: %s\n", opened.error().c_str());
    return 1;
  }
  rig::Device thread = *opened;
  rig::Device cpu = rig::host();
  rig::Device mem = rig::memory_device("MEM:source");
  const std::size_t n = 1 << 20;
  std::size_t wrong = 0;

  // A fill on the thread device, then its bytes copied back to the host device.
  rig::Buffer on_thread = rig::Buffer::create(thread, n);
  rig::Point filled = on_thread.submit_fill(std::byte{0x5a});
  rig::Buffer back = rig::Buffer::create(cpu, n);
  rig::Buffer::copy(on_thread, back);
  back.read<unsigned char>([&](std::span<const unsigned char> bytes) {
    for (unsigned char b : bytes) wrong += b != 0x5a;
  });

  // Bytes written on a memory device, copied by the thread device (its queue waits for the
  // memory device's value), then to the host device.
  rig::Buffer source = rig::Buffer::create(mem, n);
  source.write<unsigned char>([](std::span<unsigned char> bytes) {
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 7);
  });
  rig::Box all = rig::Box::row(n);
  rig::Point copied = rig::Buffer::submit_copy(source, on_thread, std::span(&all, 1));
  rig::Buffer::copy(on_thread, back);
  back.read<unsigned char>([&](std::span<const unsigned char> bytes) {
    for (std::size_t i = 0; i < bytes.size(); ++i) wrong += bytes[i] != static_cast<unsigned char>(i * 7);
  });

  std::printf("%s: fill at value %llu, copy at value %llu on %s, %zu bytes, %zu wrong\n",
              std::string(thread.name()).c_str(), static_cast<unsigned long long>(filled.value()),
              static_cast<unsigned long long>(copied.value()), std::string(copied.device().name()).c_str(), n,
              wrong);

  // A copy of more boxes than the device takes is refused with the driver's reason, and the
  // device stays usable.
  std::vector<rig::Box> many(300, rig::Box::row(16));
  rig::Buffer other = rig::Buffer::create(thread, n);
  bool refused_boxes = false;
  try {
    rig::Buffer::submit_copy(on_thread, other, many);
  } catch (const std::invalid_argument& e) {
    refused_boxes = std::string(e.what()).find("300 boxes, over the limit of 256") != std::string::npos;
    std::printf("a copy of 300 boxes: %s\n", e.what());
  }
  rig::Point after = on_thread.submit_fill(std::byte{1});
  after.wait();

  // An opener made with other headers than the library's is refused, naming both versions.
  auto stale = example::thread_opener("THREAD:stale");
  stale.rig_version = "0.0.1";
  auto refused = rig::open(stale);
  bool refused_well = !refused && refused.error().find("0.0.1") != std::string::npos &&
                      refused.error().find(std::string(rig::version())) != std::string::npos;
  std::printf("an opener for rig 0.0.1: %s\n", refused ? "opened (wrong)" : refused.error().c_str());
  thread.close();
  return wrong == 0 && refused_well && refused_boxes ? 0 : 1;
}
