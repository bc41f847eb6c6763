// rig's NVIDIA driver (nvgpu/) on the NVIDIA simulator (tests/sim/nv/): each test is one
// promise or refusal of rig/nv.hpp.
#include <doctest/doctest.h>

#include <rig/nv.hpp>
#include <rig/profile.hpp>
#include <rig/rig.hpp>

#include <sim.hpp>

#include "push.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace rig;
namespace nvsim = rig::sim::nv;

namespace {

// A page of timeline words of the tests' own, one per make.
alignas(4096) volatile std::uint64_t words[512] = {};
int next_word = 0;
volatile std::uint64_t* word() { return &words[next_word++ % 512]; }

// The driver made directly, so that its regions can be read through the simulator.
std::unique_ptr<edge::Driver> make(nvsim::Simulator& sim, int index = 0) {
  auto made = nv::opener(index, sim).make(word());
  REQUIRE_MESSAGE(made, (made ? std::string() : made.error()));
  return std::move(*made);
}
std::string refusal(os::Seam& seam, int index = 0) {
  auto made = nv::opener(index, seam).make(word());
  REQUIRE(!made);
  return made.error();
}
bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// A seam that is the simulator but for the files it hides.
class Hiding final : public os::Seam {
 public:
  Hiding(nvsim::Simulator& sim, std::string hidden) : sim_(sim), hidden_(std::move(hidden)) {}
  int open(const char* path, int flags) override { return path == hidden_ ? -ENOENT : sim_.open(path, flags); }
  int close(int fd) override { return sim_.close(fd); }
  int ioctl(int fd, unsigned long request, void* arg) override { return sim_.ioctl(fd, request, arg); }
  std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) override {
    return sim_.mmap(addr, length, prot, flags, fd, offset);
  }
  int munmap(void* addr, std::size_t length) override { return sim_.munmap(addr, length); }
  int poll(pollfd* fds, nfds_t count, int timeout_ms) override { return sim_.poll(fds, count, timeout_ms); }
  ssize_t read(int fd, void* buffer, std::size_t n) override { return sim_.read(fd, buffer, n); }
  int eventfd(unsigned initial, int flags) override { return sim_.eventfd(initial, flags); }

 private:
  nvsim::Simulator& sim_;
  std::string hidden_;
};

// The environment variable set for one scope.
struct Env {
  const char* name;
  Env(const char* n, const char* value) : name(n) { ::setenv(n, value, 1); }
  ~Env() { ::unsetenv(name); }
};

}  // namespace

TEST_CASE("NV:0 opens on the simulated Hopper as sm_90 with its two queues and the video memory CARD_INFO lists") {
  nvsim::Simulator sim;
  auto d = rig::open(nv::opener(0, sim));
  REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
  CHECK(d->name() == "NV:0");
  const auto& f = d->facts();
  CHECK(f.arch == "sm_90");
  CHECK(f.budget == sim.config().vram_bytes);
  REQUIRE(f.queues.size() == 2);
  CHECK(f.queues[0] == Queue{"COPY:0", {Kind::Copy, Kind::Fill}});
  CHECK(f.queues[1] == Queue{"COMPUTE:0", {Kind::Words, Kind::Fill, Kind::Launch}});
  CHECK(f.copy_engine == 0);
  CHECK(f.maps_host);
  CHECK(!f.host_addresses);
  CHECK(f.alignment == 4096);
  // The bring-up made its objects without one refusal: client, device, subdevice, usermode,
  // VA space, group, ring memory, two notifiers, share, two channels, two engine objects, two
  // push buffers, the sequence words, the stamps, rig_words' window, two OS events.
  CHECK(sim.errors().empty());
  CHECK(sim.live_objects() == 21);
  // The rings, two push buffers, the sequence words, the stamps, rig_words, and the two
  // channels UVM_REGISTER_CHANNEL gave it.
  CHECK(sim.live_uvm_ranges() == 8);
  CHECK(sim.live_cpu_mappings() == 8);  // the usermode page, the rings, the notifiers, the push buffers, the sequence words, the stamps
  d->close();
}

// The device still copies and fills after a refusal.
static void goes_on(Device& d) {
  Buffer other = Buffer::create(d, 4096);
  other.fill(std::byte{7});
  std::vector<std::byte> seen(4096);
  other.blit_to(0, seen);
  CHECK(seen[4095] == std::byte{7});
}

TEST_CASE("dma of video memory is a close-on-exec dma-buf at offset 0 of the bytes rig wrote, kept after the buffer goes") {
  nvsim::Simulator sim;
  auto d = rig::open(nv::opener(0, sim));
  REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
  constexpr std::size_t kBytes = 256 << 10;
  std::vector<std::byte> bytes(kBytes);
  for (std::size_t i = 0; i < kBytes; ++i) bytes[i] = std::byte(i * 131 >> 3);
  auto dmabuf = [&] {
    Buffer b = Buffer::create(*d, kBytes);  // Device memory: video memory
    b.blit_from(bytes, 0);
    auto dma = b.dma("0000:c1:00.0");
    REQUIRE_MESSAGE(dma, (dma ? std::string() : dma.error()));
    REQUIRE(std::holds_alternative<edge::Dmabuf>(*dma));
    CHECK(!b.free());  // outside the claims for good
    return std::get<edge::Dmabuf>(*dma);
  }();
  CHECK(dmabuf.offset == 0);
  REQUIRE(dmabuf.fd >= 0);
  CHECK((::fcntl(dmabuf.fd, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(sim.dmabuf_exports() == 1);
  // The module's dma-buf of video memory maps for no CPU; the simulator's is its memfd, which does.
  auto* seen = static_cast<std::byte*>(::mmap(nullptr, kBytes, PROT_READ, MAP_SHARED, dmabuf.fd, 0));
  REQUIRE(seen != MAP_FAILED);
  CHECK(std::memcmp(seen, bytes.data(), kBytes) == 0);
  ::munmap(seen, kBytes);
  ::close(dmabuf.fd);
  CHECK(sim.errors().empty());
  goes_on(*d);
  d->close();
}

TEST_CASE("dma of Pinned system memory is the module's refusal naming NV:0, the memory and its status, and the device goes on") {
  nvsim::Simulator sim;
  auto d = rig::open(nv::opener(0, sim));
  REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
  Buffer b = Buffer::create(*d, 65536, Memory::Pinned);
  auto dma = b.dma("0000:c1:00.0");
  REQUIRE_FALSE(dma.has_value());
  CHECK(has(dma.error(), "NV:0: the dma-buf of system memory at 0x"));
  CHECK(has(dma.error(), "(65536 bytes, RM handle 0x"));
  CHECK(has(dma.error(), "NV_ESC_EXPORT_TO_DMABUF_FD: the kernel module refused it with NV_ERR_INVALID_ARGUMENT (0x1f)"));
  CHECK(has(dma.error(), "it exports only video memory"));
  CHECK(!b.free());  // outside the claims for good, though the driver refused
  CHECK(sim.dmabuf_exports() == 0);
  goes_on(*d);
  d->close();
}

TEST_CASE("dma where the ioctl fails (gVisor's nvproxy without its rdma capability) names the errno, and the device goes on") {
  nvsim::Config gvisor;
  gvisor.gvisor = true;
  nvsim::Simulator sim(gvisor);
  auto d = rig::open(nv::opener(0, sim));
  REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
  Buffer b = Buffer::create(*d, 65536);
  auto dma = b.dma("0000:c1:00.0");
  REQUIRE_FALSE(dma.has_value());
  CHECK(has(dma.error(), "NV:0: the dma-buf of video memory at 0x"));
  CHECK(has(dma.error(), "NV_ESC_EXPORT_TO_DMABUF_FD: the ioctl failed"));
  CHECK(sim.dmabuf_exports() == 0);
  goes_on(*d);
  d->close();
}

TEST_CASE("the Ampere table opens as sm_80, and gvisor mode opens as outside it") {
  nvsim::Config ampere;
  ampere.classes = nvsim::kAmpere;
  nvsim::Simulator a(ampere);
  CHECK(make(a)->facts().arch == "sm_80");
  CHECK(a.errors().empty());
  nvsim::Config gvisor;
  gvisor.gvisor = true;
  nvsim::Simulator g(gvisor);
  CHECK(make(g)->facts().arch == "sm_90");
  CHECK(g.errors().empty());
}

TEST_CASE("a missing /dev/nvidiactl or /dev/nvidia-uvm is an Error naming the file and what to do") {
  nvsim::Simulator sim;
  Hiding no_ctl(sim, "/dev/nvidiactl");
  const std::string ctl = refusal(no_ctl);
  CHECK(has(ctl, "NV:0: cannot open /dev/nvidiactl: ENOENT"));
  CHECK(has(ctl, "modprobe nvidia"));
  Hiding no_uvm(sim, "/dev/nvidia-uvm");
  const std::string uvm = refusal(no_uvm);
  CHECK(has(uvm, "NV:0: cannot open /dev/nvidia-uvm: ENOENT"));
  CHECK(has(uvm, "modprobe nvidia-uvm"));
  CHECK(sim.live_objects() == 0);  // the refused open freed its client
  CHECK(sim.open_files() == 0);
}

TEST_CASE("a kernel driver of another branch is refused naming both versions, unless RIG_NV_DRIVER_VERSION_OK=1") {
  nvsim::Config config;
  config.driver_version = "575.64.05";
  nvsim::Simulator sim(config);
  const std::string why = refusal(sim);
  CHECK(has(why, "NV:0: the NVIDIA kernel driver is version 575.64.05"));
  CHECK(has(why, "the 580 branch"));
  CHECK(has(why, "RIG_NV_DRIVER_VERSION_OK=1"));
  CHECK(sim.live_objects() == 0);
  {
    Env other("RIG_NV_DRIVER_VERSION_OK", "yes");  // only "1" opens
    CHECK(has(refusal(sim), "version 575.64.05"));
  }
  Env ok("RIG_NV_DRIVER_VERSION_OK", "1");
  CHECK(make(sim)->facts().arch == "sm_90");
}

TEST_CASE("a GPU without Hopper's or Ampere's classes is refused, naming the compute classes it offers") {
  nvsim::Config config;
  config.classes = nvsim::Classes{0xC96F, 0xCDC0, 0xC9B5, 0xC761, 100};
  nvsim::Simulator sim(config);
  const std::string why = refusal(sim);
  CHECK(has(why, "NV:0: the GPU offers no class set"));
  CHECK(has(why, "0xcdc0"));
  CHECK(sim.live_objects() == 0);
}

TEST_CASE("NV:1 on a machine of one GPU is an Error saying how many the driver lists") {
  nvsim::Simulator sim;
  CHECK(has(refusal(sim, 1), "NV:1: the NVIDIA kernel driver lists 1 GPU, so there is no NV:1"));
}

TEST_CASE("Mapped and Pinned memory: the bytes the CPU writes are the bytes the GPU reads at the region's address") {
  nvsim::Simulator sim;
  auto d = make(sim);
  auto objects = nv::objects_of(*d);
  REQUIRE_MESSAGE(objects, (objects ? std::string() : objects.error()));
  for (Memory kind : {Memory::Mapped, Memory::Pinned}) {
    auto r = d->alloc(kind, 10'000);
    REQUIRE(r);
    const auto at = d->locate(*r);
    REQUIRE(at.address);
    REQUIRE(at.host);
    CHECK(*at.address % 4096 == 0);
    CHECK(*at.address >= (1ull << 32));  // the driver's heap: above 2^32, below the semaphores' 2^40
    CHECK(*at.address + 10'000 <= (1ull << 40));
    std::vector<std::uint8_t> bytes(10'000), seen(10'000);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = std::uint8_t(i * 7 + int(kind));
    std::memcpy(reinterpret_cast<void*>(*at.host), bytes.data(), bytes.size());
    REQUIRE(sim.read_gpu(objects->client, objects->vaspace, *at.address, seen.data(), seen.size()));
    CHECK(seen == bytes);
    d->free(*r);
    CHECK(!sim.read_gpu(objects->client, objects->vaspace, *at.address, seen.data(), 1));  // unmapped
  }
  auto dev = d->alloc(Memory::Device, 1 << 20);
  REQUIRE(dev);
  const auto at = d->locate(*dev);
  CHECK(at.address);
  CHECK(!at.host);  // video memory without a CPU mapping
  std::uint8_t byte = 1;
  CHECK(sim.read_gpu(objects->client, objects->vaspace, *at.address + (1 << 20) - 1, &byte, 1));
  CHECK(sim.errors().empty());
}

TEST_CASE("Device memory past the video memory is no room (nullopt), not a fault") {
  nvsim::Config config;
  config.vram_bytes = 64ull << 20;
  nvsim::Simulator sim(config);
  auto d = make(sim);
  CHECK(!d->alloc(Memory::Device, 128ull << 20));
  auto fits = d->alloc(Memory::Device, 32ull << 20);
  CHECK(fits);
}

TEST_CASE("map_host maps page-aligned host memory at its own address, and refuses what is not page-aligned") {
  nvsim::Simulator sim;
  auto d = make(sim);
  auto objects = nv::objects_of(*d);
  REQUIRE(objects);
  void* pages = ::mmap(nullptr, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(pages != MAP_FAILED);
  std::memset(pages, 0x5A, 3 * 4096);
  const auto host = reinterpret_cast<std::uintptr_t>(pages);
  auto mapping = d->map_host(host, 3 * 4096);
  REQUIRE(std::holds_alternative<edge::Region>(mapping));
  const auto r = std::get<edge::Region>(mapping);
  const auto at = d->locate(r);
  CHECK(at.address == host);
  CHECK(at.host == host);
  std::uint8_t seen[16]{};
  static_cast<std::uint8_t*>(pages)[2 * 4096 + 5] = 0xC3;
  REQUIRE(sim.read_gpu(objects->client, objects->vaspace, host + 2 * 4096, seen, sizeof seen));
  CHECK(seen[0] == 0x5A);
  CHECK(seen[5] == 0xC3);
  CHECK(std::holds_alternative<edge::Never>(d->map_host(host + 8, 4096)));
  d->free(r);
  CHECK(!sim.read_gpu(objects->client, objects->vaspace, host, seen, 1));
  ::munmap(pages, 3 * 4096);
}

namespace {

// The device's C functions, and its timeline word.
struct Table {
  edge::Driver& d;
  void* edge;
  const rig_driver* table;
  explicit Table(edge::Driver& driver)
      : d(driver), edge(driver.facts().edge), table(*static_cast<const rig_driver* const*>(edge)) {}
  int room(rig_part* parts, std::uint32_t count, std::string* why = nullptr, std::uint32_t waits = 0) {
    char text[RIG_WHY] = "";
    const int r = table->room(edge, parts, count, waits, text);
    if (why) *why = text;
    return r;
  }
  // Submits and waits (at most 5 s) for the word to show v.
  bool run(rig_part* parts, std::uint32_t count, std::uint64_t v, const rig_wait* waits = nullptr,
           std::uint32_t wait_count = 0, bool wait = true, std::uint64_t* times = nullptr) {
    std::string why;
    REQUIRE_MESSAGE(room(parts, count, &why, wait_count) == RIG_FITS, why);
    const char* failure = nullptr;
    REQUIRE_MESSAGE(table->submit(edge, parts, count, waits, wait_count, v, times, &failure) == RIG_COMMITTED,
                    (failure ? failure : ""));
    return !wait || reached(v);
  }
  // settle's answer for value v's times, with its failure in `why`.
  int settle(std::uint64_t v, std::uint64_t* times, std::string* why = nullptr) {
    const char* failure = nullptr;
    const int r = table->settle(edge, v, times, &failure);
    if (why) *why = failure ? failure : "";
    return r;
  }
  bool reached(std::uint64_t v, int ms = 5000) {
    const volatile std::uint64_t* w = d.facts().word;
    for (int i = 0; i < ms && __atomic_load_n(w, __ATOMIC_ACQUIRE) < v; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return __atomic_load_n(w, __ATOMIC_ACQUIRE) >= v;
  }
};

rig_part copy_part(std::uint64_t src, std::uint64_t dst, const rig_box* boxes, std::uint32_t count, int fill = -1) {
  rig_part p{};
  p.queue = 0;
  p.kind = RIG_KIND_COPY;
  p.work.copy = {src, dst, 0, 0, 0, 0, boxes, count, fill};
  return p;
}

struct Region {
  edge::Region r;
  std::uint64_t address;
  std::uint8_t* host;
};
// The fault sleep raises while waiting (at most 5 s) for value v, or "".
std::string fault_of(edge::Driver& d, std::uint64_t v) {
  for (int i = 0; i < 500; ++i) {
    try {
      d.sleep(v, std::chrono::milliseconds(10));
    } catch (const edge::Fault& f) {
      return f.what();
    }
  }
  return "";
}

Region mapped(edge::Driver& d, std::size_t n) {
  auto r = d.alloc(Memory::Mapped, n);
  REQUIRE(r);
  auto l = d.locate(*r);
  return {*r, *l.address, reinterpret_cast<std::uint8_t*>(*l.host)};
}

}  // namespace

TEST_CASE("COPY:0 copies boxes and fills rows, and the value's release shows v in the timeline word") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  auto src = mapped(*d, 1 << 16), dst = mapped(*d, 1 << 16);
  for (int i = 0; i < 1 << 16; ++i) src.host[i] = std::uint8_t(i * 31 + 7);
  std::memset(dst.host, 0, 1 << 16);
  // 1000 bytes at 0; 3 rows of 100 bytes, 256 apart at the source and 512 at the destination.
  const rig_box boxes[2] = {{0, 0, 1000, 1, 1000, 1000}, {4096, 8192, 100, 3, 256, 512}};
  auto part = copy_part(src.address, dst.address, boxes, 2);
  CHECK(t.run(&part, 1, 1));
  CHECK(std::memcmp(dst.host, src.host, 1000) == 0);
  for (int row = 0; row < 3; ++row) CHECK(std::memcmp(dst.host + 8192 + row * 512, src.host + 4096 + row * 256, 100) == 0);
  CHECK(dst.host[1000] == 0);
  CHECK(dst.host[8192 + 100] == 0);
  // A fill of 2 rows of 10 bytes (not a multiple of 4: one-byte components).
  const rig_box rows = {0, 20000, 10, 2, 0, 64};
  auto fill = copy_part(0, dst.address, &rows, 1, 0xAB);
  CHECK(t.run(&fill, 1, 2));
  CHECK(dst.host[20000] == 0xAB);
  CHECK(dst.host[20009] == 0xAB);
  CHECK(dst.host[20010] == 0);
  CHECK(dst.host[20064 + 9] == 0xAB);
  CHECK(sim.faults().empty());
}

TEST_CASE("a timed value's start and end are the GPU's stamps on the host clock, in order, within the submit's span") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  auto dst = mapped(*d, 1 << 16);
  const rig_box box{0, 0, 1 << 16, 1, 1 << 16, 1 << 16};
  rig_part words{};
  words.queue = 1, words.kind = RIG_KIND_WORDS, words.work.words = {nullptr, 0};
  std::uint64_t times[6][2]{};
  std::uint64_t before[6], after[6];
  for (std::uint64_t v = 1; v <= 6; ++v) {
    // Copies alone, words alone, and a copy after words.
    rig_part parts[2] = {words, copy_part(0, dst.address, &box, 1, int(v))};
    rig_part* first = v % 3 == 1 ? &parts[1] : parts;
    const std::uint32_t count = v % 3 == 0 ? 2 : 1;
    before[v - 1] = rig_now_ns();
    REQUIRE(t.run(first, count, v, nullptr, 0, true, times[v - 1]));
    after[v - 1] = rig_now_ns();
  }
  std::uint64_t last_end = 0;
  for (std::uint64_t v = 1; v <= 6; ++v) {
    std::string why;
    REQUIRE_MESSAGE(t.settle(v, times[v - 1], &why) == RIG_OK, why);
    const auto [start, end] = std::pair(times[v - 1][0], times[v - 1][1]);
    CHECK(start > 0);
    CHECK(start <= end);
    CHECK(start >= last_end);  // device order
    // The correlation is good to the TIMER_GET_TIME call's span (microseconds here).
    CHECK(start + 1'000'000 >= before[v - 1]);
    CHECK(end <= after[v - 1] + 1'000'000);
    last_end = end;
    std::uint64_t again[2] = {times[v - 1][0], times[v - 1][1]};
    CHECK(t.settle(v, again) == RIG_OK);  // a later call leaves them
    CHECK((again[0] == start && again[1] == end));
  }
  CHECK(dst.host[0] == 6);
  CHECK(sim.faults().empty());
}

TEST_CASE("a timed value whose stamp slot a later value takes before settle gets its times from that submit") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  rig_part words{};
  words.queue = 1, words.kind = RIG_KIND_WORDS, words.work.words = {nullptr, 0};
  const std::uint64_t n = 1024 + 8;  // past the stamps' slots
  std::vector<std::array<std::uint64_t, 2>> times(n + 1, {0, 0});
  for (std::uint64_t v = 1; v <= n; ++v) {
    while (t.room(&words, 1) == RIG_LATER) std::this_thread::yield();
    REQUIRE(t.run(&words, 1, v, nullptr, 0, false, times[v].data()));
  }
  REQUIRE(t.reached(n));
  // Values 1..8 had their slots taken by 1025..1032: their times are written, in order.
  for (std::uint64_t v = 1; v <= 8; ++v) {
    CHECK(times[v][0] > 0);
    CHECK(times[v][0] <= times[v][1]);
    CHECK(t.settle(v, times[v].data()) == RIG_OK);
  }
  for (std::uint64_t v = 9; v <= n; ++v) REQUIRE(t.settle(v, times[v].data()) == RIG_OK);
  for (std::uint64_t v = 2; v <= n; ++v) REQUIRE(times[v][0] >= times[v - 1][1]);
}

TEST_CASE("through rig: a profile shows NV:0's values with device times inside the span of the work") {
  nvsim::Simulator sim;
  auto d = rig::open(nv::opener(0, sim));
  REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
  Buffer a = Buffer::create(*d, 1 << 20, Memory::Mapped), b = Buffer::create(*d, 1 << 20, Memory::Mapped);
  std::vector<Submission::Part> parts{{"", {}, Submission::Copy{{a, 0}, {b, 0}, {Box::row(1 << 20)}, std::nullopt}}};
  auto s = Submission::make(*d, parts, 0, 0);
  Run run;
  const std::uint64_t before = rig_now_ns();
  auto records = profile::take([&] {
    for (int i = 0; i < 4; ++i) submit(s, run, {}, {}).wait();
  });
  const std::uint64_t after = rig_now_ns();
  int values = 0;
  std::uint64_t last_end = 0;
  for (const auto& r : records) {
    if (r.what != profile::Record::What::Value || r.device != "NV:0") continue;
    ++values;
    CHECK(r.start_ns > 0);
    CHECK(r.start_ns <= r.end_ns);
    CHECK(r.start_ns + 1'000'000 >= before);
    CHECK(r.end_ns <= after + 1'000'000);
    CHECK(r.start_ns >= last_end);
    last_end = r.end_ns;
  }
  CHECK(values == 4);
  CHECK(!d->lost());
  d->close();
}

TEST_CASE("parts run in order across the queues: a copy after COMPUTE:0's words sees what they wrote") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  auto a = mapped(*d, 4096), b = mapped(*d, 4096);
  std::memset(a.host, 0, 4096), std::memset(b.host, 0, 4096);
  for (std::uint64_t v = 1; v <= 20; ++v) {
    // Words: a host semaphore release of v at a; then the copy of a's 8 bytes into b.
    std::uint32_t storage[16];
    nv::Push p(storage);
    nv::semaphore_release(p, a.address, 0x1000 + v);
    rig_part parts[2]{};
    parts[0].queue = 1, parts[0].kind = RIG_KIND_WORDS;
    parts[0].work.words = {p.words().data(), p.words().size()};
    const rig_box box{0, 8 * v, 8, 1, 8, 8};
    parts[1] = copy_part(a.address, b.address, &box, 1);
    const std::uint32_t after = 0;
    parts[1].after = &after, parts[1].after_count = 1;
    REQUIRE(t.run(parts, 2, v));
    std::uint64_t seen;
    std::memcpy(&seen, b.host + 8 * v, 8);
    CHECK(seen == 0x1000 + v);
  }
  CHECK(sim.faults().empty());
}

TEST_CASE("a value waits for a foreign word to reach its point before it runs") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  auto a = mapped(*d, 4096);
  std::memset(a.host, 0, 4096);
  volatile std::uint64_t& foreign = words[500];  // on the page of the device's own word
  __atomic_store_n(&foreign, 0, __ATOMIC_RELEASE);
  const rig_box box{0, 0, 8, 1, 8, 8};
  auto fill = copy_part(0, a.address, &box, 1, 0x11);
  const rig_wait wait{&foreign, 5, 7, 1};
  t.run(&fill, 1, 1, &wait, 1, false);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(__atomic_load_n(d->facts().word, __ATOMIC_ACQUIRE) < 1);
  CHECK(a.host[0] == 0);
  __atomic_store_n(&foreign, 5, __ATOMIC_RELEASE);
  CHECK(t.reached(1));
  CHECK(a.host[0] == 0x11);
}

TEST_CASE("room refuses a launch of no kernel, kinds a queue does not run and parts over the push buffer") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  std::string why;
  rig_part p{};
  p.queue = 1, p.kind = RIG_KIND_LAUNCH;
  CHECK(t.room(&p, 1, &why) == RIG_NEVER);
  CHECK(has(why, "part 0: a launch of no kernel"));
  p.queue = 0, p.kind = RIG_KIND_WORDS;
  CHECK(t.room(&p, 1, &why) == RIG_NEVER);
  CHECK(has(why, "COPY:0 runs Copy and Fill, not kind 1"));
  p.queue = 2;
  CHECK(t.room(&p, 1, &why) == RIG_NEVER);
  CHECK(has(why, "no queue 2"));
  std::vector<std::uint32_t> many(200'000);
  p.queue = 1, p.kind = RIG_KIND_WORDS, p.work.words = {many.data(), many.size()};
  CHECK(t.room(&p, 1, &why) == RIG_NEVER);
  CHECK(has(why, "COMPUTE:0's part of the submission takes"));
  CHECK(has(why, "512 KiB"));
  const rig_box wide{0, 0, 1ull << 33, 1, 0, 0};
  auto copy = copy_part(1 << 20, 2 << 20, &wide, 1);
  CHECK(t.room(&copy, 1, &why) == RIG_NEVER);
  CHECK(has(why, "over the copy engine's 32 bits"));
}

TEST_CASE("room answers LATER while the push buffer is full of values in flight, FITS once they are done") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  volatile std::uint64_t& gate = words[501];
  __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
  const rig_wait wait{&gate, 1, 9, 1};
  std::vector<std::uint32_t> nops(60'000, 0);  // 240 KB of zero words (a NOP header of count 0)
  rig_part p{};
  p.queue = 1, p.kind = RIG_KIND_WORDS, p.work.words = {nops.data(), nops.size()};
  std::uint64_t v = 0;
  while (t.room(&p, 1, nullptr, 1) == RIG_FITS) {
    REQUIRE(t.run(&p, 1, ++v, &wait, 1, false) == true);
    REQUIRE(v < 10);
  }
  CHECK(v >= 3);
  CHECK(t.room(&p, 1, nullptr, 1) == RIG_LATER);
  __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
  CHECK(t.reached(v));
  CHECK(t.room(&p, 1, nullptr, 1) == RIG_FITS);
}

TEST_CASE("a Fill's function writes its channel's words; one that fails or writes past its room fails the submit") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  auto a = mapped(*d, 4096);
  std::memset(a.host, 0, 4096);
  struct Arg {
    std::uint64_t address;
    int result;
    std::uint32_t extra;
  } arg{a.address, 0, 0};
  auto fn = [](void* queue, void* argp, std::uint64_t v) {
    auto& q = *static_cast<nv::FillQueue*>(queue);
    auto& x = *static_cast<Arg*>(argp);
    nv::Push p({q.words, q.room});
    nv::semaphore_release(p, x.address, 0x5000 + v);
    q.count = std::uint32_t(p.size()) + x.extra;
    return x.result;
  };
  rig_part part{};
  part.queue = 1, part.kind = RIG_KIND_FILL;
  part.work.fill = {fn, &arg, 16, 0};
  CHECK(t.run(&part, 1, 1));
  std::uint64_t seen;
  std::memcpy(&seen, a.host, 8);
  CHECK(seen == 0x5001);
  for (auto [result, extra, text] : {std::tuple{3, 0u, "NV:0: part 0: its fill returned 3"},
                                     std::tuple{0, 100u, "NV:0: part 0: its fill wrote 106 words, over its 16"}}) {
    arg.result = result, arg.extra = extra;
    std::string why;
    REQUIRE(t.room(&part, 1, &why) == RIG_FITS);
    const char* failure = nullptr;
    CHECK(t.table->submit(t.edge, &part, 1, nullptr, 0, 2, nullptr, &failure) == RIG_FAILED);
    REQUIRE(failure);
    CHECK(std::string(failure) == text);
  }
}

TEST_CASE("a channel that faults loses the device, naming the Xid and the queue; another device goes on") {
  nvsim::Simulator sim;
  auto d = make(sim), other = make(sim);
  Table t(*d), u(*other);
  // SET_OBJECT of the copy class on the compute channel: a class the channel has not (Xid 69).
  std::uint32_t storage[4];
  nv::Push p(storage);
  nv::set_object(p, 1, 0xC8B5);
  rig_part part{};
  part.queue = 1, part.kind = RIG_KIND_WORDS, part.work.words = {p.words().data(), p.words().size()};
  t.run(&part, 1, 1, nullptr, 0, false);
  const std::string fault = fault_of(*d, 1);
  CHECK(fault == "a graphics engine class error (Xid 69) in COMPUTE:0, value 1 part 0");
  CHECK_THROWS_WITH_AS(d->sleep(1, std::chrono::milliseconds(1)), fault.c_str(), edge::Fault);  // it stays
  auto a = mapped(*other, 4096);
  const rig_box box{0, 0, 16, 1, 16, 16};
  auto fill = copy_part(0, a.address, &box, 1, 0x77);
  CHECK(u.run(&fill, 1, 1));
  CHECK(a.host[15] == 0x77);
}

TEST_CASE("a copy engine's MMU fault names COPY:0, the value and the part it stopped in") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  auto a = mapped(*d, 4096);
  const rig_box box{0, 0, 64, 1, 64, 64};
  auto good = copy_part(0, a.address, &box, 1, 0x11);
  REQUIRE(t.run(&good, 1, 1));
  REQUIRE(t.run(&good, 1, 2));
  rig_part words{};
  words.queue = 1, words.kind = RIG_KIND_WORDS, words.work.words = {nullptr, 0};
  // Part 1 writes where nothing is mapped (inside the driver's heap, past its regions).
  rig_part parts[2] = {words, copy_part(0, 0x70'0000'0000ull, &box, 1, 0x22)};
  t.run(parts, 2, 3, nullptr, 0, false);
  const std::string fault = fault_of(*d, 3);
  CHECK(fault == "an MMU fault (Xid 31) in COPY:0, value 3 part 1");
}

TEST_CASE("a value that never completes loses its device after hang_ms with rig's reason; another device goes on") {
  nvsim::Simulator sim, other_sim;
  auto d = rig::open(nv::opener(0, sim, {100}));
  auto second = nv::opener(0, other_sim);
  second.name = "NV-OTHER:0";  // the second simulator's GPU, as a device of its own
  auto other = rig::open(second);
  REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
  REQUIRE_MESSAGE(other, (other ? std::string() : other.error()));
  // COMPUTE:0 acquires a word of the device's memory that nothing raises.
  Buffer flag = Buffer::create(*d, 4096, Memory::Mapped);
  flag.write<std::uint64_t>([](std::span<std::uint64_t> x) { x[0] = 0; });
  std::uint32_t storage[16];
  nv::Push push(storage);
  nv::semaphore_acquire(push, flag.address(), 1);
  Buffer words = Buffer::create(*d, push.words().size() * 4, Memory::Mapped);
  words.write<std::uint32_t>([&](std::span<std::uint32_t> x) { std::copy(push.words().begin(), push.words().end(), x.begin()); });
  std::vector<Submission::Part> parts{{"COMPUTE:0", {}, Submission::Words{words}}};
  Run run;
  Point stuck = submit(Submission::make(*d, parts, 0, 0), run, {}, {});
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(stuck.wait(), doctest::Contains("NV:0 lost: no progress for 100 ms"), Lost);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(100));
  CHECK(d->lost() == std::optional<std::string>("no progress for 100 ms"));
  Buffer a = Buffer::create(*other, 4096, Memory::Mapped), b = Buffer::create(*other, 4096, Memory::Mapped);
  a.fill(std::byte{9});
  Buffer::copy(a, b);
  CHECK(b.read<std::uint8_t>([](std::span<const std::uint8_t> x) { return x[4095]; }) == 9);
  CHECK(!other->lost());
  other->close();
}

TEST_CASE("sleep returns once the non-stall interrupt of the value's release fires, well before its limit") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  volatile std::uint64_t& gate = words[503];
  __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
  const rig_wait wait{&gate, 1, 9, 1};
  rig_part part{};
  part.queue = 1, part.kind = RIG_KIND_WORDS, part.work.words = {nullptr, 0};
  t.run(&part, 1, 1, &wait, 1, false);
  std::thread raise([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
  });
  const auto start = std::chrono::steady_clock::now();
  while (__atomic_load_n(d->facts().word, __ATOMIC_ACQUIRE) < 1 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    d->sleep(1, std::chrono::seconds(5));
  const auto took = std::chrono::steady_clock::now() - start;
  raise.join();
  CHECK(__atomic_load_n(d->facts().word, __ATOMIC_ACQUIRE) >= 1);
  CHECK(took < std::chrono::seconds(1));  // woken by the interrupt, not the 5 s limit
}

TEST_CASE("closing frees every RM object, UVM range and channel registration, CPU mapping and file, over 100 rounds") {
  nvsim::Simulator sim;
  for (int round = 0; round < 100; ++round) {
    auto d = make(sim);
    auto a = d->alloc(Memory::Mapped, 8192);
    auto b = d->alloc(Memory::Pinned, 4096);
    auto c = d->alloc(Memory::Device, 1 << 16);
    REQUIRE((a && b && c));
    // Used: a fill of the Mapped region on COPY:0, then a copy from it into the Device region.
    Table t(*d);
    const auto at = d->locate(*a), to = d->locate(*c);
    const rig_box box{0, 0, 8192, 1, 8192, 8192};
    rig_part parts[2] = {copy_part(0, *at.address, &box, 1, round), copy_part(*at.address, *to.address, &box, 1)};
    parts[1].after_count = 0;
    REQUIRE(t.run(parts, 2, 1));
    REQUIRE(reinterpret_cast<const std::uint8_t*>(*at.host)[8191] == std::uint8_t(round));
    if (round % 2) d->free(*b);  // some freed before, the rest at close
    if (round % 3 == 0) d->stop("lost");
    d.reset();
    REQUIRE(sim.live_objects() == 0);
    REQUIRE(sim.live_uvm_ranges() == 0);
    REQUIRE(sim.live_uvm_maps() == 0);
    REQUIRE(sim.live_cpu_mappings() == 0);
    REQUIRE(sim.open_files() == 0);
  }
  CHECK(sim.errors().empty());
  auto d = make(sim);
  CHECK(nv::objects_of(*d));
  d->stop("lost");
  CHECK(has(nv::objects_of(*d).error(), "closed"));
  d.reset();
  CHECK(sim.live_objects() == 0);
}

TEST_CASE("a tracing seam notes each call with RM's and UVM's statuses; UVM lets go of the channels before RM frees them") {
  nvsim::Simulator sim;
  char path[] = "/tmp/rig-nv-trace-XXXXXX";
  const int file = ::mkstemp(path);
  REQUIRE(file >= 0);
  ::close(file);
  std::vector<std::string> lines;
  {
    nv::TracingSeam traced(sim, path);
    auto made = nv::opener(0, traced).make(word());
    REQUIRE_MESSAGE(made, (made ? std::string() : made.error()));
    auto d = std::move(*made);
    CHECK(!d->alloc(Memory::Device, std::size_t(1) << 40));  // RM refuses it: NV_ERR_NO_MEMORY
    d.reset();
    lines = traced.lines();
  }
  auto index_of = [&](std::string_view part, std::size_t from = 0) {
    for (std::size_t i = from; i < lines.size(); ++i)
      if (has(lines[i], part)) return i;
    return lines.size();
  };
  CHECK(index_of("open /dev/nvidiactl -> ") == 0);
  CHECK(index_of("UVM_REGISTER_GPU_VASPACE: NV_OK (0x0) -> 0") < lines.size());
  const auto registered = index_of("UVM_REGISTER_CHANNEL: NV_OK");
  CHECK(index_of("UVM_REGISTER_CHANNEL: NV_OK", registered + 1) < lines.size());  // both channels
  CHECK(index_of("RM_ALLOC class 0x40 under") < lines.size());
  CHECK(index_of("NV_ERR_NO_MEMORY") < lines.size());
  const auto unregistered = index_of("UVM_UNREGISTER_CHANNEL: NV_OK");
  const auto second = index_of("UVM_UNREGISTER_CHANNEL: NV_OK", unregistered + 1);
  REQUIRE(second < lines.size());
  // The channel group, which holds the channels, is the first object RM frees, after both.
  CHECK(index_of("RM_FREE") > second);
  CHECK(index_of("RM_FREE") < lines.size());
  // The file has every line as it was noted.
  std::FILE* f = std::fopen(path, "r");
  REQUIRE(f);
  std::size_t in_file = 0;
  for (int c; (c = std::fgetc(f)) != EOF;) in_file += c == '\n';
  std::fclose(f);
  ::unlink(path);
  CHECK(in_file == lines.size());
  CHECK(sim.live_objects() == 0);
}

TEST_CASE("stop tears the channels down, makes the word show the last submitted value, and regions free after it") {
  nvsim::Simulator sim;
  auto d = make(sim);
  Table t(*d);
  auto a = mapped(*d, 4096);
  volatile std::uint64_t& gate = words[502];
  __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
  const rig_wait wait{&gate, 1, 9, 1};
  const rig_box box{0, 0, 8, 1, 8, 8};
  auto fill = copy_part(0, a.address, &box, 1, 0x22);
  t.run(&fill, 1, 7, &wait, 1, false);  // held by the gate
  const auto live = sim.live_objects();
  d->stop("lost");
  CHECK(__atomic_load_n(d->facts().word, __ATOMIC_ACQUIRE) >= 7);
  CHECK(sim.live_objects() < live);  // the channel group, its channels and their memory
  CHECK_THROWS_AS(d->alloc(Memory::Device, 4096), edge::Fault);
  d->free(a.r);
  d.reset();
  CHECK(sim.live_objects() == 0);
  CHECK(sim.live_uvm_ranges() == 0);
  CHECK(sim.open_files() == 0);
}

TEST_CASE("map_host inside host memory it maps already shares that mapping; over part of one it is Never") {
  nvsim::Simulator sim;
  auto d = make(sim);
  auto objects = nv::objects_of(*d);
  REQUIRE(objects);
  void* pages = ::mmap(nullptr, 8 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(pages != MAP_FAILED);
  const auto host = reinterpret_cast<std::uintptr_t>(pages);
  auto whole = d->map_host(host, 4 * 4096);
  auto inside = d->map_host(host + 4096, 2 * 4096);
  REQUIRE(std::holds_alternative<edge::Region>(whole));
  REQUIRE(std::holds_alternative<edge::Region>(inside));
  CHECK(d->locate(std::get<edge::Region>(inside)).address == host + 4096);
  CHECK(std::holds_alternative<edge::Never>(d->map_host(host + 3 * 4096, 2 * 4096)));  // over its end
  d->free(std::get<edge::Region>(whole));
  std::uint8_t byte = 0;
  CHECK(sim.read_gpu(objects->client, objects->vaspace, host + 4096, &byte, 1));  // the share keeps it
  d->free(std::get<edge::Region>(inside));
  CHECK(!sim.read_gpu(objects->client, objects->vaspace, host, &byte, 1));
  auto again = d->map_host(host + 3 * 4096, 2 * 4096);  // free again once both went
  CHECK(std::holds_alternative<edge::Region>(again));
  ::munmap(pages, 8 * 4096);
}

TEST_CASE("through rig: a copy and a fill between Mapped buffers of NV:0 complete, and the device closes clean") {
  nvsim::Simulator sim;
  {
    auto d = rig::open(nv::opener(0, sim));
    REQUIRE_MESSAGE(d, (d ? std::string() : d.error()));
    const std::size_t bytes = (1 << 20) + 12;
    Buffer src = Buffer::create(*d, bytes, Memory::Mapped), dst = Buffer::create(*d, bytes, Memory::Mapped),
           filled = Buffer::create(*d, bytes, Memory::Mapped);
    src.write<std::uint32_t>([](std::span<std::uint32_t> x) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::uint32_t(i * 2654435761u);
    });
    std::vector<Submission::Part> parts{
        {"", {}, Submission::Copy{{src, 0}, {dst, 0}, {Box::row(bytes)}, std::nullopt}},
        {"", {}, Submission::Copy{{src, 0}, {filled, 0}, {Box::row(bytes)}, std::byte{0x3c}}}};
    Run run;
    submit(Submission::make(*d, parts, 0, 0), run, {}, {}).wait();
    auto same = src.read<std::uint32_t>([&](std::span<const std::uint32_t> a) {
      return dst.read<std::uint32_t>([&](std::span<const std::uint32_t> b) { return std::equal(a.begin(), a.end(), b.begin()); });
    });
    CHECK(same);
    CHECK(filled.read<std::uint8_t>([](std::span<const std::uint8_t> x) {
      return std::all_of(x.begin(), x.end(), [](std::uint8_t b) { return b == 0x3c; });
    }));
    CHECK(!d->lost());
    d->close();
  }
  CHECK(sim.faults().empty());
  CHECK(sim.live_objects() == 0);
  CHECK(sim.open_files() == 0);
}
