// Tests of a memory device's driver (host/host_driver.hpp), through edge::Driver and its
// C functions, without rig's core. Each test is named after the promise it checks.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN

#include "fake_bus.hpp"
#include "fake_udmabuf.hpp"
#include "host_driver.hpp"

#include <doctest/doctest.h>
#include <rig/edge.hpp>
#include <rig/rig_edge.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using rig::Kind;
using rig::Memory;
namespace edge = rig::edge;

// A memory driver with its word, its facts and its C table.
struct MemoryDevice {
  alignas(8) volatile std::uint64_t word = 0;
  std::unique_ptr<edge::Driver> driver;
  edge::Facts facts;
  void* edge = nullptr;
  const rig_driver* table = nullptr;

  explicit MemoryDevice(std::uint64_t start = 0, rig::os::Seam* seam = nullptr) {
    word = start;
    driver = seam ? rig::cpu::make_memory_driver_with(*seam, &word) : rig::cpu::make_memory_driver(&word);
    facts = driver->facts();
    edge = facts.edge;
    table = *static_cast<const rig_driver* const*>(edge);
  }
  ~MemoryDevice() { driver->stop("the test is over"); }

  std::uint64_t shown() const { return __atomic_load_n(&word, __ATOMIC_ACQUIRE); }

  int submit(rig_part* parts, std::uint32_t count, std::uint64_t v, const char** failure,
             std::uint64_t* times = nullptr) {
    char why[RIG_WHY] = "";
    REQUIRE(table->room(edge, parts, count, 0, why) == RIG_FITS);
    return table->submit(edge, parts, count, nullptr, 0, v, times, failure);
  }
};

rig_part copy_part(std::uint64_t src, std::uint64_t dst, const rig_box* boxes, std::uint32_t count,
                   std::int32_t fill = -1) {
  rig_part p;
  std::memset(&p, 0, sizeof p);
  p.kind = RIG_KIND_COPY;
  rig_copy& c = p.work.copy;
  c.src = src;
  c.dst = dst;
  c.src_handle = std::intptr_t(src);
  c.dst_handle = std::intptr_t(dst);
  c.boxes = boxes;
  c.count = count;
  c.fill = fill;
  return p;
}

rig_part fill_part(int (*fn)(void*, void*, std::uint64_t), void* arg) {
  rig_part p;
  std::memset(&p, 0, sizeof p);
  p.kind = RIG_KIND_FILL;
  p.work.fill.fn = fn;
  p.work.fill.arg = arg;
  return p;
}

struct FillCall {
  void* queue = reinterpret_cast<void*>(1);
  std::uint64_t v = 0;
  std::uint64_t word_during = ~0ull;
  const volatile std::uint64_t* word = nullptr;
};
int record_fill(void* queue, void* arg, std::uint64_t v) {
  auto* call = static_cast<FillCall*>(arg);
  call->queue = queue;
  call->v = v;
  call->word_during = __atomic_load_n(call->word, __ATOMIC_ACQUIRE);
  return 0;
}
int failing_fill(void*, void*, std::uint64_t) { return 3; }

}  // namespace

TEST_CASE("the memory driver states its facts") {
  MemoryDevice m;
  const edge::Facts& f = m.facts;
  CHECK(f.arch.empty());
  CHECK(f.budget > 0);
  REQUIRE(f.queues.size() == 1);
  CHECK(f.queues[0] == rig::Queue{"COPY:0", {Kind::Copy, Kind::Fill}});
  CHECK(f.copy_engine == 0);
  CHECK(f.completion == edge::Completion::Host);
  CHECK_FALSE(f.waits.stores);
  CHECK_FALSE(f.waits.hosts);
  CHECK_FALSE(f.may_block);
  CHECK_FALSE(f.hang_ms.has_value());
  CHECK(f.maps_host);
  CHECK(f.host_addresses);
  CHECK(f.alignment == 16);
  CHECK((f.alignment & (f.alignment - 1)) == 0);
  CHECK(f.counters.empty());
  CHECK((f.word == &m.word));
  REQUIRE(f.edge != nullptr);
  REQUIRE(m.table != nullptr);
  CHECK((m.table->room != nullptr));
  CHECK((m.table->submit != nullptr));
  CHECK((m.table->commit != nullptr));
  CHECK((m.table->settle == nullptr));
  CHECK((m.table->measures == nullptr));
}

TEST_CASE("memory device regions are host memory aligned by size; pinned memory is refused") {
  MemoryDevice m;
  const std::size_t page = std::size_t(sysconf(_SC_PAGESIZE));
  for (const std::size_t bytes : {std::size_t(3), std::size_t(200), std::size_t(1) << 20}) {
    const auto region = m.driver->alloc(Memory::Device, bytes);
    REQUIRE(region.has_value());
    const edge::Location at = m.driver->locate(*region);
    REQUIRE(at.host.has_value());
    CHECK(at.address == at.host);
    CHECK(*at.host % (bytes >= (1u << 20) ? page : bytes >= 128 ? 128 : 16) == 0);
    std::memset(reinterpret_cast<void*>(*at.host), 1, (bytes + 3) / 4 * 4);
    m.driver->free(*region);
  }
  CHECK_THROWS_AS(m.driver->alloc(Memory::Pinned, 64), std::invalid_argument);
}

TEST_CASE("a memory device loads no code") {
  MemoryDevice m;
  const std::vector<std::byte> object(64);
  const auto code = m.driver->image(object);
  REQUIRE_FALSE(code.has_value());
  CHECK(code.error() == "a memory device loads no code");
}

TEST_CASE("copies with several boxes and pitches, and byte fills, give the right bytes") {
  MemoryDevice m(4);
  const auto src_region = m.driver->alloc(Memory::Device, 1024);
  const auto dst_region = m.driver->alloc(Memory::Device, 1024);
  REQUIRE(src_region);
  REQUIRE(dst_region);
  auto* src = reinterpret_cast<unsigned char*>(*m.driver->locate(*src_region).host);
  auto* dst = reinterpret_cast<unsigned char*>(*m.driver->locate(*dst_region).host);
  for (int i = 0; i < 1024; ++i) src[i] = static_cast<unsigned char>(i * 7);
  std::memset(dst, 0, 1024);

  const rig_box boxes[3] = {
      {0, 0, 10, 4, 64, 16},      // 4 rows of 10 bytes: source pitch 64, destination 16
      {512, 100, 50, 1, 0, 0},    // one row
      {300, 700, 32, 3, 32, 32},  // contiguous rows (pitch == width)
  };
  const rig_box fill_boxes[2] = {{0, 900, 5, 3, 0, 20}, {0, 1000, 24, 1, 0, 0}};
  // The second copy names its ends by handle and offset, with no address.
  rig_part by_handle = copy_part(0, 0, fill_boxes, 2, 0x5a);
  by_handle.work.copy.dst_handle = std::intptr_t(dst_region->id);
  by_handle.work.copy.dst_offset = 0;
  rig_part parts[2] = {copy_part(reinterpret_cast<std::uint64_t>(src),
                                 reinterpret_cast<std::uint64_t>(dst), boxes, 3),
                       by_handle};
  const char* failure = nullptr;
  CHECK(m.submit(parts, 2, 5, &failure) == RIG_COMMITTED);
  CHECK(m.shown() == 5);

  std::vector<unsigned char> want(1024, 0);
  for (int r = 0; r < 4; ++r) {
    for (int b = 0; b < 10; ++b) want[r * 16 + b] = src[r * 64 + b];
  }
  for (int b = 0; b < 50; ++b) want[100 + b] = src[512 + b];
  for (int b = 0; b < 96; ++b) want[700 + b] = src[300 + b];
  for (int r = 0; r < 3; ++r) {
    for (int b = 0; b < 5; ++b) want[900 + r * 20 + b] = 0x5a;
  }
  for (int b = 0; b < 24; ++b) want[1000 + b] = 0x5a;
  CHECK(std::memcmp(dst, want.data(), 1024) == 0);
  m.driver->free(*src_region);
  m.driver->free(*dst_region);
}

TEST_CASE("a fill runs inside submit with a null queue context, before the word shows its value") {
  MemoryDevice m(8);
  FillCall call;
  call.word = &m.word;
  rig_part part = fill_part(record_fill, &call);
  const char* failure = nullptr;
  std::uint64_t times[2] = {0, 0};
  CHECK(m.submit(&part, 1, 9, &failure, times) == RIG_COMMITTED);
  CHECK(call.queue == nullptr);
  CHECK(call.v == 9);
  CHECK(call.word_during == 8);
  CHECK(m.shown() == 9);
  CHECK(times[0] != 0);
  CHECK(times[1] >= times[0]);
  CHECK(m.table->commit(m.edge, 9, &failure) == RIG_OK);
}

TEST_CASE("a failing fill fails the submit and every later one, with a message naming the value") {
  MemoryDevice m(11);
  rig_part part = fill_part(failing_fill, nullptr);
  const char* failure = nullptr;
  CHECK(m.submit(&part, 1, 12, &failure) == RIG_FAILED);
  REQUIRE(failure != nullptr);
  CHECK(std::string(failure) == "fill returned 3 at value 12");
  CHECK(m.shown() == 11);
  FillCall call;
  call.word = &m.word;
  rig_part ok = fill_part(record_fill, &call);
  failure = nullptr;
  CHECK(m.submit(&ok, 1, 13, &failure) == RIG_FAILED);
  CHECK(std::string(failure) == "fill returned 3 at value 12");
  CHECK(call.v == 0);
  CHECK(m.table->commit(m.edge, 12, &failure) == RIG_FAILED);
}

TEST_CASE("room answers RIG_NEVER for launches, queue words, kind 0 and other queues, saying which part") {
  MemoryDevice m;
  const rig_box box{0, 0, 1, 1, 0, 0};
  unsigned char a = 1, b = 0;
  const rig_part good =
      copy_part(reinterpret_cast<std::uint64_t>(&a), reinterpret_cast<std::uint64_t>(&b), &box, 1);
  rig_part p = good;
  char why[RIG_WHY] = "";
  CHECK(m.table->room(m.edge, &p, 1, 0, why) == RIG_FITS);
  CHECK(std::string(why).empty());
  std::string reason;
  SUBCASE("a launch") {
    std::memset(&p.work, 0, sizeof p.work);
    p.kind = RIG_KIND_LAUNCH;
    reason = "part 1: a launch, which the memory device does not run (it runs Copy and Fill)";
  }
  SUBCASE("queue words") {
    p.kind = RIG_KIND_WORDS;
    reason = "part 1: Words, which the memory device does not run (it runs Copy and Fill)";
  }
  SUBCASE("kind 0") { p.kind = 0, reason = "part 1: kind 0, no kind of work"; }
  SUBCASE("another queue") { p.queue = 1, reason = "part 1: queue 1, but the device has only queue 0"; }
  SUBCASE("a copy of boxes at no address") {
    p.work.copy.boxes = nullptr;
    reason = "part 1: a copy of 1 boxes at no address";
  }
  rig_part parts[2] = {good, p};
  CHECK(m.table->room(m.edge, parts, 2, 0, why) == RIG_NEVER);
  CHECK(std::string(why) == reason);
}

TEST_CASE("sleep returns once another thread's submit raises the word") {
  MemoryDevice m;
  FillCall call;
  call.word = &m.word;
  std::thread sleeper([&] {
    while (m.shown() < 1) m.driver->sleep(1, std::chrono::seconds(1));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  rig_part part = fill_part(record_fill, &call);
  const char* failure = nullptr;
  CHECK(m.submit(&part, 1, 1, &failure) == RIG_COMMITTED);
  sleeper.join();
  CHECK(m.shown() == 1);
}

// ---- dma: dma-bufs of memfd pages through /dev/udmabuf.

namespace {
const edge::Dmabuf* dmabuf_of(const rig::Result<edge::Dma>& d) {
  return d ? std::get_if<edge::Dmabuf>(&*d) : nullptr;
}
}  // namespace

TEST_CASE("dma gives a close-on-exec dma-buf of a region's memfd pages, which keeps them after the region is freed") {
  rig::test::FakeUdmabuf seam;
  MemoryDevice m(0, &seam);
  const std::size_t bytes = 256 * 1024;
  const auto region = m.driver->alloc(Memory::Device, bytes);
  REQUIRE(region.has_value());
  auto* host = reinterpret_cast<std::uint8_t*>(*m.driver->locate(*region).host);
  for (std::size_t i = 0; i < bytes; ++i) host[i] = std::uint8_t(i * 7 + 1);
  const auto dma = m.driver->dma(*region, "0000:00:03.0");
  const edge::Dmabuf* buf = dmabuf_of(dma);
  REQUIRE_MESSAGE(buf != nullptr, (dma ? "a bus answer" : dma.error()));
  CHECK(buf->offset == 0);
  CHECK((fcntl(buf->fd, F_GETFD) & FD_CLOEXEC) != 0);
  // What udmabuf was asked for: the region's whole memfd, sealed against shrinking.
  CHECK(seam.last.flags == UDMABUF_FLAGS_CLOEXEC);
  CHECK(seam.last.offset == 0);
  CHECK(seam.last.size == bytes);
  CHECK((fcntl(int(seam.last.memfd), F_GET_SEALS) & F_SEAL_SHRINK) != 0);
  CHECK(seam.open_fds == 0);  // the device file is closed again
  m.driver->free(*region);
  // The dma-buf's pages are the region's bytes, still there once rig freed the region.
  void* view = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, buf->fd, 0);
  REQUIRE(view != MAP_FAILED);
  const auto* seen = static_cast<const std::uint8_t*>(view);
  bool same = true;
  for (std::size_t i = 0; i < bytes; ++i) same = same && seen[i] == std::uint8_t(i * 7 + 1);
  CHECK(same);
  munmap(view, bytes);
  close(buf->fd);
}

TEST_CASE("dma refuses heap memory, a freed region and the caller's mapped memory, naming the region and why") {
  rig::test::FakeUdmabuf seam;
  MemoryDevice m(0, &seam);
  const auto small = m.driver->alloc(Memory::Device, 4096);
  REQUIRE(small.has_value());
  auto heap = m.driver->dma(*small, "0000:00:03.0");
  REQUIRE_FALSE(heap.has_value());
  CHECK(heap.error().find("4096 bytes of host memory at 0x") != std::string::npos);
  CHECK(heap.error().find("heap memory") != std::string::npos);
  m.driver->free(*small);

  const auto big = m.driver->alloc(Memory::Device, 1 << 20);
  REQUIRE(big.has_value());
  m.driver->free(*big);
  auto freed = m.driver->dma(*big, "0000:00:03.0");
  REQUIRE_FALSE(freed.has_value());
  CHECK(freed.error().find("no region of this device starts there") != std::string::npos);

  std::vector<std::byte> mine(1 << 16);
  auto mapping = m.driver->map_host(reinterpret_cast<std::uintptr_t>(mine.data()), mine.size());
  REQUIRE(std::holds_alternative<edge::Region>(mapping));
  auto theirs = m.driver->dma(std::get<edge::Region>(mapping), "0000:00:03.0");
  REQUIRE_FALSE(theirs.has_value());
  CHECK(theirs.error().find("the caller's memory") != std::string::npos);
  m.driver->free(std::get<edge::Region>(mapping));
  CHECK(seam.creates == 0);  // udmabuf was never asked
}

TEST_CASE("dma where /dev/udmabuf is absent or not permitted says which, and why the pages have no bus addresses") {
  rig::test::FakeUdmabuf seam;
  MemoryDevice m(0, &seam);
  const auto region = m.driver->alloc(Memory::Device, 1 << 20);
  REQUIRE(region.has_value());
  seam.node = rig::test::FakeUdmabuf::Node::Absent;
  auto absent = m.driver->dma(*region, "0000:00:03.0");
  REQUIRE_FALSE(absent.has_value());
  CHECK(absent.error().find("/dev/udmabuf it is absent") != std::string::npos);
  CHECK(absent.error().find("CONFIG_UDMABUF") != std::string::npos);
  CHECK(absent.error().find("no bus addresses: ") != std::string::npos);
  CHECK(absent.error().find("its pages are not locked") != std::string::npos);
  seam.node = rig::test::FakeUdmabuf::Node::Denied;
  auto denied = m.driver->dma(*region, "0000:00:03.0");
  REQUIRE_FALSE(denied.has_value());
  CHECK(denied.error().find("no permission") != std::string::npos);
  CHECK(denied.error().find("EACCES") != std::string::npos);
  // The device goes on: once udmabuf is there, the same region gives a dma-buf.
  seam.node = rig::test::FakeUdmabuf::Node::Present;
  auto later = m.driver->dma(*region, "0000:00:03.0");
  REQUIRE(dmabuf_of(later) != nullptr);
  close(dmabuf_of(later)->fd);
  m.driver->free(*region);
}

TEST_CASE("a dma-buf udmabuf refuses is an Error naming UDMABUF_CREATE, its errno and the size limit") {
  rig::test::FakeUdmabuf seam;
  seam.size_limit = 1 << 20;
  MemoryDevice m(0, &seam);
  const auto big = m.driver->alloc(Memory::Device, 2 << 20);
  REQUIRE(big.has_value());
  auto refused = m.driver->dma(*big, "0000:00:03.0");
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().find("UDMABUF_CREATE refused it: EINVAL") != std::string::npos);
  CHECK(refused.error().find("size_limit_mb") != std::string::npos);
  CHECK(seam.open_fds == 0);
  const auto fits = m.driver->alloc(Memory::Device, 1 << 20);
  REQUIRE(fits.has_value());
  auto made = m.driver->dma(*fits, "0000:00:03.0");
  REQUIRE(dmabuf_of(made) != nullptr);
  close(dmabuf_of(made)->fd);
  m.driver->free(*big);
  m.driver->free(*fits);
}

TEST_CASE("a region made where the process may open no memfd is anonymous pages, and dma says why") {
  // In a child, so that its lowered descriptor limit leaves the test process as it was.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    rig::test::FakeUdmabuf seam;
    int status = 0;
    {
      MemoryDevice m(0, &seam);
      const int probe = dup(0);
      rlimit none{rlim_t(probe), rlim_t(probe)};  // no descriptor past those open now
      close(probe);
      if (setrlimit(RLIMIT_NOFILE, &none) != 0) _exit(10);
      const auto region = m.driver->alloc(Memory::Device, 1 << 20);
      if (!region) _exit(11);
      std::memset(reinterpret_cast<void*>(*m.driver->locate(*region).host), 5, 1 << 20);  // usable memory
      auto dma = m.driver->dma(*region, "0000:00:03.0");
      if (dma) status |= 1;
      else if (dma.error().find("anonymous pages, not a memfd's (memfd_create gave EMFILE") == std::string::npos)
        status |= 2;
      m.driver->free(*region);
    }
    _exit(status);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

// ---- dma: bus addresses of locked pages for a function the IOMMU does not translate.

namespace {
constexpr const char* kFn = "0000:00:03.0";
// A region of 16 pages whose files say: locked, frames 0x100.. and 0x300.., kFn in IOMMU group
// 7 of type `type`.
struct BusRegion {
  rig::test::FakeUdmabuf udmabuf;
  rig::test::FakeBus seam{udmabuf};
  MemoryDevice m{0, &seam};
  edge::Region region{};
  std::uintptr_t address = 0;
  static constexpr std::size_t bytes = 16 * 4096;
  explicit BusRegion(const char* type = "identity\n") {
    region = *m.driver->alloc(Memory::Device, bytes);
    address = *m.driver->locate(region).host;
    locked(64);
    seam.frames(address, {0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107,
                          0x300, 0x301, 0x302, 0x303, 0x304, 0x305, 0x306, 0x307});
    seam.links["/sys/bus/pci/devices/0000:00:03.0"] = "../../../devices/pci0000:00/0000:00:03.0";
    seam.links["/sys/bus/pci/devices/0000:00:03.0/iommu_group"] = "../../../../kernel/iommu_groups/7";
    seam.files["/sys/kernel/iommu_groups/7/type"] = type;
  }
  ~BusRegion() { m.driver->free(region); }
  // /proc/self/smaps with the region's mapping, `kb` KiB of it locked, between two others.
  void locked(int kb) {
    char text[512];
    std::snprintf(text, sizeof text,
                  "1000-2000 r--p 00000000 00:00 0\nLocked:              64 kB\n"
                  "%lx-%lx rw-s 00000000 00:01 9 /memfd:rig (deleted)\nSize:               64 kB\n"
                  "Locked:              %d kB\nVmFlags: rd wr sh mr mw me ms\n"
                  "7fff0000-7fff1000 rw-p 00000000 00:00 0\nLocked:               0 kB\n",
                  static_cast<unsigned long>(address), static_cast<unsigned long>(address + bytes), kb);
    seam.files["/proc/self/smaps"] = text;
  }
  rig::Result<edge::Dma> dma(const char* fn = kFn) { return m.driver->dma(region, fn); }
};
bool says(const rig::Result<edge::Dma>& d, std::string_view part) {
  return !d && d.error().find(part) != std::string::npos;
}
}  // namespace

TEST_CASE("dma of locked pages whose frames the process reads, for a function the IOMMU does not translate, is "
          "Bus: the frames in order, runs merged") {
  BusRegion r;
  auto dma = r.dma();
  REQUIRE_MESSAGE(dma.has_value(), (dma ? "" : dma.error()));
  const auto* bus = std::get_if<edge::Bus>(&*dma);
  REQUIRE(bus != nullptr);
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> want{{0x100000, 0x8000}, {0x300000, 0x8000}};
  CHECK(bus->ranges == want);
  CHECK(r.udmabuf.creates == 0);
  CHECK(r.seam.pagemap_reads == 1);
  // No IOMMU at all: the function's addresses are physical too.
  r.seam.links.erase("/sys/bus/pci/devices/0000:00:03.0/iommu_group");
  auto bare = r.dma();
  REQUIRE(bare.has_value());
  CHECK(std::get<edge::Bus>(*bare).ranges == want);
}

TEST_CASE("dma names each condition of Bus that fails, gives the dma-buf where udmabuf can, and Bus again once all hold") {
  BusRegion r("DMA-FQ\n");
  auto translated = r.dma();  // a translating domain: the dma-buf instead
  REQUIRE(translated.has_value());
  CHECK(std::holds_alternative<edge::Dmabuf>(*translated));
  close(std::get<edge::Dmabuf>(*translated).fd);
  r.udmabuf.node = rig::test::FakeUdmabuf::Node::Absent;
  CHECK(says(r.dma(), "/dev/udmabuf it is absent"));
  CHECK(says(r.dma(), "no bus addresses: 0000:00:03.0's IOMMU group 7 translates (type DMA-FQ)"));
  r.seam.files["/sys/kernel/iommu_groups/7/type"] = "identity\n";
  r.locked(60);
  CHECK(says(r.dma(), "no bus addresses: its pages are not locked (61440 of 65536 bytes locked; mlock them)"));
  r.locked(64);
  r.seam.frames(r.address + 5 * 4096, {0});
  CHECK(says(r.dma(), "no bus addresses: /proc/self/pagemap shows no frame numbers to this process (they need "
                      "CAP_SYS_ADMIN)"));
  r.seam.pagemap = false;
  CHECK(says(r.dma(), "/proc/self/pagemap cannot be read"));
  r.seam.pagemap = true;
  r.seam.frames(r.address, {0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107,
                            0x300, 0x301, 0x302, 0x303, 0x304, 0x305, 0x306, 0x307});
  CHECK(says(r.dma("0000:00:09.0"), "no bus addresses: there is no PCI function 0000:00:09.0"));
  // Two failing at once are both named.
  r.locked(0);
  r.seam.files["/sys/kernel/iommu_groups/7/type"] = "DMA\n";
  auto both = r.dma();
  CHECK(says(both, "translates (type DMA)"));
  CHECK(says(both, "its pages are not locked"));
  r.locked(64);
  r.seam.files["/sys/kernel/iommu_groups/7/type"] = "identity\n";
  auto again = r.dma();
  REQUIRE(again.has_value());
  CHECK(std::holds_alternative<edge::Bus>(*again));
}
