// The CUDA driver's refusals and errors, graph destruction, and the calls rig's core does
// not make yet (map_host, map_peer, profile times), on the fake libcuda, which injects the
// errors and counts what lives.
#include <doctest/doctest.h>

#include <rig/cuda_abi.hpp>
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <fcntl.h>
#include <unistd.h>

#include "support.hpp"

using namespace rig;
namespace t = rig::cuda::test;
namespace abi = rig::cuda_abi;

namespace {

constexpr int CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2, CUDA_ERROR_ILLEGAL_ADDRESS = 700,
              CUDA_ERROR_UNKNOWN = 999;

t::Fake fake() {
  auto f = t::fake();
  REQUIRE_MESSAGE(f, "RIG_LIBCUDA must be the fake libcuda");
  return f;
}

std::vector<std::byte> bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// Closes the live CUDA devices, so that the next open calls the driver's make.
void close_gpus() {
  for (auto& d : devices())
    if (d.name().starts_with("CUDA:")) d.close();
}

// A copy of the fake at a path of its own: a separate instance with its own knobs, which
// the driver loads afresh (it keeps each path it loaded).
std::string fresh_fake() {
  static int n = 0;
  // The copies stay loaded; their files go when the tests end.
  static struct Directory {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("rig-cuda-fake-" + std::to_string(getpid()));
    ~Directory() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } directory;
  const char* fake = std::getenv("RIG_LIBCUDA");
  REQUIRE(fake);
  const auto& dir = directory.path;
  std::filesystem::create_directories(dir);
  auto path = dir / ("libcuda-" + std::to_string(n++) + ".so");
  std::filesystem::copy_file(fake, path, std::filesystem::copy_options::overwrite_existing);
  return path.string();
}

std::string error_of(const Result<Device>& d) { return d ? std::string("opened") : d.error(); }

// add_u32's arguments.
std::vector<std::byte> add_args(std::uint64_t data, std::uint64_t n, std::uint32_t add) {
  std::vector<std::byte> out(20);
  std::memcpy(out.data(), &data, 8);
  std::memcpy(out.data() + 8, &n, 8);
  std::memcpy(out.data() + 16, &add, 4);
  return out;
}

// A launch of add_u32 over n elements of `data` (Pinned memory), adding `add`.
Point add(const Device& d, const Function& f, const Buffer& data, std::uint64_t n, std::uint32_t add) {
  auto s = t::one_launch(d, f, 20, 0, 1);
  Run run;
  t::elements(run, s.block(0), n);
  run.set(s.block(0), 8, n);
  run.set(s.block(0), 16, add);
  Buffer writes[] = {data};
  return submit(s, run, {}, writes);
}

// A CUDA driver opened directly (not through rig), on a word of rig_words that no device of
// the tests uses or on `own`, with its C functions at hand.
struct Direct {
  std::unique_ptr<edge::Driver> driver;
  edge::Facts facts;
  const rig_driver* c = nullptr;
  volatile std::uint64_t* word = nullptr;
  std::uint64_t v = 0;
  bool stopped = false;

  explicit Direct(int ordinal, volatile std::uint64_t* own = nullptr) {
    static std::atomic<int> slot{RIG_WORDS - 1000};
    word = own ? own : &rig_words[slot++];
    auto made = cuda::opener(ordinal).make(word);
    REQUIRE_MESSAGE(made, (made ? std::string() : made.error()));
    driver = std::move(*made);
    facts = driver->facts();
    c = *static_cast<const rig_driver* const*>(facts.edge);
    v = *word;
  }
  ~Direct() {
    if (!stopped) driver->stop("the test is done");
  }
  char why[RIG_WHY] = "";  // room's reason of its last RIG_NEVER
  int room(std::vector<rig_part>& parts, std::uint32_t waits = 0) {
    why[0] = 0;
    return c->room(facts.edge, parts.data(), std::uint32_t(parts.size()), waits, why);
  }
  // Submits parts as the next value; returns submit's answer.
  int submit(std::vector<rig_part>& parts, std::uint64_t* times = nullptr, std::vector<rig_wait> waits = {},
             const char** why = nullptr) {
    const char* failure = nullptr;
    REQUIRE(room(parts, std::uint32_t(waits.size())) == RIG_FITS);
    int r = c->submit(facts.edge, parts.data(), std::uint32_t(parts.size()), waits.data(),
                      std::uint32_t(waits.size()), ++v, times, &failure);
    if (why) *why = failure;
    return r;
  }
  void wait() {
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < v) driver->sleep(v, std::chrono::milliseconds(10));
  }
  edge::Location alloc(Memory m, std::size_t n, edge::Region* region = nullptr) {
    auto r = driver->alloc(m, n);
    REQUIRE(r);
    if (region) *region = *r;
    return driver->locate(*r);
  }
};

rig_part fill_part(std::uint32_t queue, int (*fn)(void*, void*, std::uint64_t), void* arg = nullptr) {
  rig_part p;
  std::memset(&p, 0, sizeof p);
  p.queue = queue;
  p.kind = RIG_KIND_FILL;
  p.work.fill.fn = fn;
  p.work.fill.arg = arg;
  return p;
}
int nothing(void*, void*, std::uint64_t) { return 0; }
int fails(void*, void*, std::uint64_t) { return CUDA_ERROR_INVALID_VALUE; }

}  // namespace

// ---- Refusals at open.

TEST_CASE("an absent libcuda makes open and device_count an Error that names the path") {
  t::Env env("RIG_LIBCUDA", "/nonexistent/libcuda.so.1");
  auto d = open(cuda::opener(0));
  REQUIRE_FALSE(d);
  CHECK(d.error().starts_with("CUDA:0: libcuda is absent: cannot load /nonexistent/libcuda.so.1 (RIG_LIBCUDA)"));
  auto n = cuda::device_count();
  REQUIRE_FALSE(n);
  CHECK(n.error().starts_with("libcuda is absent"));
}

TEST_CASE("an opener and device_count given a library load that one, whatever RIG_LIBCUDA names") {
  const char* fake_path = std::getenv("RIG_LIBCUDA");
  REQUIRE(fake_path);
  t::Env env("RIG_LIBCUDA", "/nonexistent/libcuda.so.1");
  auto n = cuda::device_count(fake_path);
  REQUIRE(n);
  CHECK(*n == 2);
  close_gpus();
  auto d = open(cuda::opener(1, fake_path));
  REQUIRE(d);
  CHECK(d->name() == "CUDA:1");
  d->close();
  auto absent = open(cuda::opener(0, "/nonexistent/other/libcuda.so.1"));
  REQUIRE_FALSE(absent);
  CHECK(absent.error().starts_with("CUDA:0: libcuda is absent: cannot load /nonexistent/other/libcuda.so.1: "));
}

TEST_CASE("a libcuda too old is refused: no cuGetProcAddress, or a CUDA version below 12.0") {
  const char* ancient = std::getenv("RIG_FAKE_LIBCUDA_ANCIENT");
  REQUIRE(ancient);
  {
    t::Env env("RIG_LIBCUDA", ancient);
    auto d = open(cuda::opener(0));
    REQUIRE_FALSE(d);
    CHECK(error_of(d).find("libcuda is too old") != std::string::npos);
    CHECK(error_of(d).find("reports CUDA 11.2 and has no cuGetProcAddress") != std::string::npos);
  }
  auto f = fake();
  close_gpus();
  f.set("version", 11080);
  auto d = open(cuda::opener(0));
  f.set("version", 12080);
  REQUIRE_FALSE(d);
  CHECK(error_of(d).find("libcuda is too old") != std::string::npos);
  CHECK(error_of(d).find("reports CUDA 11.8; rig needs CUDA 12.0 or later") != std::string::npos);
}

TEST_CASE("a GPU without 64-bit stream memory operations is refused, saying which") {
  auto f = fake();
  close_gpus();
  f.set("memops", 0);
  auto d = open(cuda::opener(0));
  f.set("memops", 1);
  REQUIRE_FALSE(d);
  CHECK(error_of(d).starts_with("CUDA:0: GPU 0 (Fake CUDA GPU 0) lacks 64-bit stream memory operations"));
  CHECK(error_of(d).find("CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0") != std::string::npos);

  std::string path = fresh_fake();
  t::fake(path).set("memops_functions", 0);
  t::Env env("RIG_LIBCUDA", path);
  auto e = open(cuda::opener(0));
  REQUIRE_FALSE(e);
  CHECK(error_of(e).find("has no cuStreamWriteValue64/cuStreamWaitValue64") != std::string::npos);
}

TEST_CASE("an ordinal past the GPUs, or no GPU at all, is an Error") {
  fake();
  auto d = open(cuda::opener(7));
  REQUIRE_FALSE(d);
  CHECK(error_of(d).starts_with("CUDA:7: no GPU 7: libcuda"));
  CHECK(error_of(d).find("finds 2") != std::string::npos);
  CHECK_THROWS_AS(cuda::opener(-1), std::invalid_argument);

  std::string path = fresh_fake();
  t::Env devices("FAKECUDA_DEVICES", "0");
  t::Env env("RIG_LIBCUDA", path);
  auto e = open(cuda::opener(0));
  REQUIRE_FALSE(e);
  CHECK(error_of(e).find("finds no GPU") != std::string::npos);
  CHECK(cuda::device_count() == Result<int>(0));
}

// ---- Errors that lose the device, and those that do not.

TEST_CASE("a fill that returns an error loses the device with CUDA's name for it") {
  fake();
  Device d = t::open_gpu(0);
  Buffer arg = Buffer::create(d, 8, Memory::Pinned);
  Submission::Part part{"", {}, Submission::Fill{fails, arg}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  CHECK_THROWS_AS(submit(s, run, {}, {}), Lost);
  REQUIRE(d.lost());
  CHECK(d.lost()->find("returned CUDA_ERROR_INVALID_VALUE: invalid argument") != std::string::npos);
}

namespace {
// A fill that makes no context current, against the interface.
int unset_context(void*, void* arg, std::uint64_t) {
  auto set = reinterpret_cast<int (*)(void*)>(*static_cast<void**>(arg));
  return set(nullptr);
}
}  // namespace

TEST_CASE("a fill that changes the current context loses the device") {
  fake();
  Device d = t::open_gpu(0);
  auto set = std::make_shared<void*>(t::record(d).symbol("cuCtxSetCurrent"));
  REQUIRE(*set);
  Buffer arg = Buffer::of_host({reinterpret_cast<std::byte*>(set.get()), sizeof(void*)}, set);
  Submission::Part part{"", {}, Submission::Fill{unset_context, arg}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  CHECK_THROWS_AS(submit(s, run, {}, {}), Lost);
  CHECK(d.lost()->find("changed the current context") != std::string::npos);
}

TEST_CASE("a CUDA call that fails in submit loses the device, naming the call and the error") {
  auto f = fake();
  Device d = t::open_gpu(0);
  auto fn = t::kernel(d, "add_u32");
  Buffer data = Buffer::create(d, 64, Memory::Pinned);
  f.fail("cuLaunchKernel", 1, CUDA_ERROR_INVALID_VALUE, 1);
  CHECK_THROWS_AS(add(d, fn, data, 16, 1), Lost);
  REQUIRE(d.lost());
  CHECK(d.lost()->starts_with("cuLaunchKernel of add_u32 of value"));
  CHECK(d.lost()->ends_with("failed: CUDA_ERROR_INVALID_VALUE: invalid argument"));
}

TEST_CASE("an asynchronous fault loses the device with CUDA's error name and string") {
  auto f = fake();
  Device d = t::open_gpu(0);
  auto slow = t::kernel(d, "slow_store");
  Buffer flag = Buffer::create(d, 4, Memory::Pinned);
  Submission::Part part{"", {}, Submission::Launch{slow, 20, {}}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  run.set(s.block(0), 0, std::uint64_t(flag.address()));
  run.set(s.block(0), 8, std::uint64_t(50'000'000));
  Point p = submit(s, run, {}, {});
  f.fault(0, CUDA_ERROR_ILLEGAL_ADDRESS);
  CHECK_THROWS_AS(p.wait(), Lost);
  CHECK(d.lost() == std::optional<std::string>("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"));
  // The next open resets the failed context and registers rig's words again.
  long long resets = f.count("resets");
  Device again = t::open_gpu(0);
  CHECK(f.count("resets") == resets + 1);
  auto fn = t::kernel(again, "add_u32");
  Buffer data = Buffer::create(again, 64, Memory::Pinned);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 0u); });
  add(again, fn, data, 16, 2).wait();
  data.read<std::uint32_t>([](std::span<const std::uint32_t> xs) { CHECK(xs[0] == 2u); });
}

TEST_CASE("an allocation CUDA has no memory for raises OutOfMemory; another error loses the device") {
  auto f = fake();
  Device d = t::open_gpu(0);
  // Every call of the rounds of reclamation finds no memory.
  f.fail("cuMemAlloc", 1, CUDA_ERROR_OUT_OF_MEMORY, 100);
  CHECK_THROWS_AS(Buffer::create(d, 4096), OutOfMemory);
  f.fail("cuMemAlloc", 0, 0, 0);
  CHECK_FALSE(d.lost());
  Buffer fine = Buffer::create(d, 4096);
  f.fail("cuMemHostAlloc", 1, CUDA_ERROR_UNKNOWN, 1);
  CHECK_THROWS_AS(Buffer::create(d, 4096, Memory::Pinned), Lost);
  REQUIRE(d.lost());
  CHECK(d.lost()->find("cuMemHostAlloc failed: CUDA_ERROR_UNKNOWN: unknown error") != std::string::npos);
}

TEST_CASE("bytes that are no image are an Error, and the device stays usable") {
  auto f = fake();
  Device d = t::open_gpu(0);
  auto bad = Image::load(d, bytes("\x7f" "ELF not really a cubin"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().starts_with("CUDA:0: CUDA rejected the cubin (23 bytes): CUDA_ERROR_INVALID_IMAGE"));
  CHECK(Image::load(d, {}).error() == "CUDA:0: an empty binary is no cubin, fatbin or PTX");
  f.fail("cuModuleLoadDataEx", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
  CHECK(Image::load(d, t::kernels_image()).error().find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos);
  CHECK_FALSE(d.lost());
  CHECK(Image::load(d, t::kernels_image()));
}

// ---- Real kernels: the fake runs the PTX of what nvcc built (kernels/).

TEST_CASE("a fatbin's and PTX text's functions take the parameters their PTX declares") {
  fake();  // RIG_LIBCUDA is the fake
  Device d = t::open_gpu(0);
  for (const char* file : {"kernels.sm_90.fatbin", "kernels.sm_80.fatbin", "kernels.sm_90.ptx"}) {
    CAPTURE(file);
    auto bytes = t::committed(file);
    if (std::string_view(file).ends_with(".ptx")) bytes.push_back(std::byte{0});  // CUDA reads PTX to its NUL
    auto image = Image::load(d, bytes);
    REQUIRE_MESSAGE(image, (image ? std::string() : image.error()));
    auto add = image->resolve("add_u32");
    REQUIRE(add);
    CHECK(add->params() == std::optional<std::size_t>(20));  // u32*, u64, u32: 8 + 8 + 4
    auto write = image->resolve("write_u64");
    REQUIRE(write);
    CHECK(write->params() == std::optional<std::size_t>(16));
    CHECK_FALSE(image->resolve("nope"));
  }
}

TEST_CASE("a fatbin's function gives the launch bounds and static shared memory nvcc recorded") {
  fake();  // RIG_LIBCUDA is the fake
  close_gpus();
  std::ifstream in(std::string(RIG_NV_KERNELS) + "/reduce.sm_90.fatbin", std::ios::binary);
  REQUIRE(in);
  const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> fatbin(chars.size());
  std::memcpy(fatbin.data(), chars.data(), chars.size());
  Direct g(0);
  auto image = g.driver->image(fatbin);
  REQUIRE(image);
  auto id = std::get<edge::Loaded>(*image).image;
  auto entry = std::get<edge::Entry>(g.driver->entry(id, "reduce_sum"));
  CHECK(entry.threads == std::optional<std::size_t>(256));  // __launch_bounds__(256)
  CHECK(entry.params == std::optional<std::size_t>(20));
  g.driver->unload(id);
  auto plain = std::get<edge::Loaded>(*g.driver->image(t::kernels_image())).image;
  CHECK(std::get<edge::Entry>(g.driver->entry(plain, "add_u32")).threads == std::optional<std::size_t>(1024));
  g.driver->unload(plain);
}

TEST_CASE("a cubin alone is refused with CUDA_ERROR_NO_BINARY_FOR_GPU: the fake runs no SASS") {
  fake();  // RIG_LIBCUDA is the fake
  Device d = t::open_gpu(0);
  auto bad = Image::load(d, t::committed("kernels.sm_90.cubin"));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().find("CUDA_ERROR_NO_BINARY_FOR_GPU") != std::string::npos);
  CHECK(bad.error().find("JIT log: a cubin holds SASS only, and the fake libcuda runs only PTX") != std::string::npos);
  CHECK_FALSE(d.lost());
}

TEST_CASE("a trap in a kernel fails the context with CUDA_ERROR_LAUNCH_FAILED") {
  fake();  // RIG_LIBCUDA is the fake
  Device d = t::open_gpu(0);
  auto trap = t::kernel(d, "trap");
  Submission::Part part{"", {}, Submission::Launch{trap, 0, {}}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  CHECK_THROWS_AS(submit(s, run, {}, {}).wait(), Lost);
  REQUIRE(d.lost());
  CHECK(d.lost()->find("CUDA_ERROR_LAUNCH_FAILED") != std::string::npos);
}

TEST_CASE("a kernel writing memory CUDA does not know fails the context with CUDA_ERROR_ILLEGAL_ADDRESS") {
  fake();  // RIG_LIBCUDA is the fake
  Device d = t::open_gpu(0);
  auto write = t::kernel(d, "write_u64");
  Submission::Part part{"", {}, Submission::Launch{write, 16, {}}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  std::uint64_t host_word = 0;  // host memory neither pinned nor registered
  run.set(s.block(0), 0, std::uint64_t(reinterpret_cast<std::uintptr_t>(&host_word)));
  run.set(s.block(0), 8, std::uint64_t(42));
  CHECK_THROWS_AS(submit(s, run, {}, {}).wait(), Lost);
  REQUIRE(d.lost());
  CHECK(d.lost()->find("CUDA_ERROR_ILLEGAL_ADDRESS") != std::string::npos);
  CHECK(host_word == 0);
}

TEST_CASE("Mapped memory on a GPU whose memory the host reads directly has one address for both") {
  auto f = fake();
  close_gpus();
  f.set("host_visible", 1);
  Device d = t::open_gpu(0);
  f.set("host_visible", 0);
  Buffer mapped = Buffer::create(d, 4096, Memory::Mapped);
  REQUIRE(mapped.host_address());
  CHECK(*mapped.host_address() == mapped.address());
  mapped.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 9u); });
  auto fn = t::kernel(d, "add_u32");
  add(d, fn, mapped, 1024, 1).wait();
  mapped.read<std::uint32_t>([](std::span<const std::uint32_t> xs) { CHECK(xs[1023] == 10u); });
  d.close();
  // Elsewhere the driver has no window, and rig falls back to Pinned memory.
  Device plain = t::open_gpu(0);
  const long long managed = f.count("calls:cuMemAllocManaged"), pinned = f.count("calls:cuMemHostAlloc");
  Buffer fallback = Buffer::create(plain, 1 << 20, Memory::Mapped);
  CHECK(fallback.host_address());
  CHECK(f.count("calls:cuMemAllocManaged") == managed);
  CHECK(f.count("calls:cuMemHostAlloc") == pinned + 1);
}

TEST_CASE("without cuFuncGetParamInfo a function's params are unknown") {
  std::string path = fresh_fake();
  auto f = t::fake(path);
  f.set("param_info", 0);
  t::Env env("RIG_LIBCUDA", path);
  close_gpus();
  auto image_bytes = t::kernels_image();
  Direct g(0);
  auto image = g.driver->image(image_bytes);
  REQUIRE(image);
  auto id = std::get<edge::Loaded>(*image).image;
  auto entry = std::get<edge::Entry>(g.driver->entry(id, "add_u32"));
  CHECK_FALSE(entry.params);
  CHECK(entry.threads == std::optional<std::size_t>(1024));
  CHECK(std::holds_alternative<edge::Absent>(g.driver->entry(id, "nope")));
  g.driver->unload(id);
}

// ---- Graphs: destroyed at the next open, image load, image unload or graph construction.

TEST_CASE("a collected graph is destroyed at the next graph construction, image load, image unload and open") {
  auto f = fake();
  Device d = t::open_gpu(0);
  auto fn = t::kernel(d, "add_u32");
  const auto& rec = t::record(d);
  Buffer data = Buffer::create(d, 64, Memory::Pinned);
  std::array<abi::Kernel, 1> one = {
      abi::Kernel{reinterpret_cast<abi::CUfunction>(fn.entry()), {1, 1, 1}, {16, 1, 1}, add_args(data.address(), 16, 1)}};
  const long long base = f.count("graph_execs");
  auto make = [&] {
    auto g = rec.graph(one);
    REQUIRE(g);
    return *g;
  };
  make();  // collected at once
  CHECK(f.count("graph_execs") == base + 1);  // collection alone destroys nothing
  CHECK(f.count("graphs") >= 1);

  make();  // construction destroys the first; the second is collected
  CHECK(f.count("graph_execs") == base + 1);

  auto image = Image::load(d, t::kernels_image());  // a load destroys it
  REQUIRE(image);
  CHECK(f.count("graph_execs") == base);

  make();
  image = Image::load(d, t::kernels_image());  // the first image's unload (and this load)
  CHECK(f.count("graph_execs") == base);

  make();
  { auto gone = std::move(image); }  // the unload alone
  CHECK(f.count("graph_execs") == base);

  make();
  d.close();
  CHECK(f.count("graph_execs") == base + 1);  // stopping destroys nothing
  Device again = t::open_gpu(0);              // the open does
  CHECK(f.count("graph_execs") == base);
  // The old device's record refuses to make graphs.
  auto late = rec.graph(one);
  REQUIRE_FALSE(late);
  CHECK(late.error() == "CUDA:0: the device is stopping or stopped");
}

TEST_CASE("a graph keeps the modules of its kernels loaded after their image goes") {
  auto f = fake();
  Device d = t::open_gpu(0);
  const auto& rec = t::record(d);
  const long long modules = f.count("modules");
  abi::Graph graph;
  {
    auto image = Image::load(d, t::kernels_image());
    REQUIRE(image);
    auto fn = image->resolve("empty");
    REQUIRE(fn);
    abi::Kernel k;
    k.func = reinterpret_cast<abi::CUfunction>(fn->entry());
    std::array<abi::Kernel, 2> two = {k, k};
    auto g = rec.graph(two);
    REQUIRE(g);
    graph = *g;
    CHECK(f.count("modules") == modules + 1);
  }
  CHECK(f.count("modules") == modules + 1);  // the image went; its module stays for the graph
  graph = {};
  CHECK(f.count("modules") == modules + 1);  // collected, not yet destroyed
  std::array<abi::Kernel, 0> none{};
  CHECK(rec.graph(none));                     // construction destroys the graph, then the module
  CHECK(f.count("modules") == modules);
}

namespace {
struct InsideArg {
  const abi::Record* record;
  bool refused;
};
int graph_inside(void*, void* arg, std::uint64_t) {
  auto& a = *static_cast<InsideArg*>(arg);
  try {
    a.record->graph({});
  } catch (const std::invalid_argument&) {
    a.refused = true;
  }
  return 0;
}
}  // namespace

TEST_CASE("graph refuses a call from inside a fill, and gives the context's error once it failed") {
  auto f = fake();
  Device d = t::open_gpu(0);
  auto arg = std::make_shared<InsideArg>(InsideArg{&t::record(d), false});
  Buffer arg_buffer = Buffer::of_host({reinterpret_cast<std::byte*>(arg.get()), sizeof(InsideArg)}, arg);
  Submission::Part part{"", {}, Submission::Fill{graph_inside, arg_buffer}};
  auto s = Submission::make(d, std::span(&part, 1), 0, 0);
  Run run;
  submit(s, run, {}, {}).wait();
  CHECK(arg->refused);

  f.fault(0, CUDA_ERROR_ILLEGAL_ADDRESS);
  auto failed = t::record(d).graph({});
  REQUIRE_FALSE(failed);
  CHECK(failed.error() ==
        "CUDA:0: cuGraphCreate failed: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered");
  CHECK_THROWS_AS(submit(s, run, {}, {}), Lost);
  auto stopped = t::record(d).graph({});
  REQUIRE_FALSE(stopped);
  CHECK(stopped.error() == "CUDA:0: the device is stopping or stopped");
  t::open_gpu(0);  // resets the context for the tests after this one
}

// ---- The driver directly: room, profiles, map_host, map_peer, host waits, stop.

TEST_CASE("room answers NEVER for Words and for kinds a queue does not run, with the reason; FITS otherwise") {
  fake();
  Direct g(0);
  std::vector<rig_part> parts = {fill_part(0, nothing), fill_part(1, nothing)};
  CHECK(g.room(parts, 3) == RIG_FITS);
  CHECK(std::string(g.why).empty());
  parts[1].kind = RIG_KIND_WORDS;
  CHECK(g.room(parts) == RIG_NEVER);
  CHECK(std::string(g.why) == "part 1: queue COPY:0 does not run Words");
  parts[1].kind = RIG_KIND_COPY;
  CHECK(g.room(parts) == RIG_FITS);
  parts[1].queue = 0;  // COMPUTE:0 runs no Copy
  CHECK(g.room(parts) == RIG_NEVER);
  CHECK(std::string(g.why) == "part 1: queue COMPUTE:0 does not run Copy (COPY:0 does)");
  parts[1].kind = RIG_KIND_LAUNCH;  // a launch without a function
  CHECK(g.room(parts) == RIG_NEVER);
  CHECK(std::string(g.why) == "part 1: a launch of no function");
  parts[1].queue = 2;
  parts[1].kind = RIG_KIND_FILL;
  CHECK(g.room(parts) == RIG_NEVER);
  CHECK(std::string(g.why) == "part 1: queue 2, but the device has 2 queues");
}

TEST_CASE("a launch past the GPU's grid or the function's shared memory is refused with the limit, and goes on") {
  fake();
  Device d = t::open_gpu(0);
  auto fn = t::kernel(d, "add_u32");
  Buffer data = Buffer::create(d, 256 * 4, Memory::Pinned);
  data.write<std::uint32_t>([](std::span<std::uint32_t> xs) { std::fill(xs.begin(), xs.end(), 0u); });
  auto s = t::one_launch(d, fn, 20, 0, 1);
  auto b = s.block(0);
  Run run;
  t::elements(run, b, 256);
  run.set(b, 8, std::uint64_t(256));
  run.set(b, 16, std::uint32_t(1));
  Buffer writes[] = {data};
  const std::string name(d.name());
  run.groups(b, 1, 70000);
  CHECK_THROWS_WITH_AS(submit(s, run, {}, writes),
                       (name + ": part 0: 70000 groups in y, over the GPU's limit of 2^16-1").c_str(),
                       std::invalid_argument);
  run.groups(b, 1);
  run.shared(b, 1u << 30);
  try {
    submit(s, run, {}, writes);
    FAIL("the submit was not refused");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CAPTURE(what);
    CHECK(what.starts_with(name + ": part 0: 1 GiB of dynamic shared memory, over add_u32's limit of "));
  }
  CHECK(!d.lost());
  run.shared(b, 0);
  submit(s, run, {}, writes).wait();
  data.read<std::uint32_t>([](std::span<const std::uint32_t> xs) { CHECK(xs[0] == 1); });
}

TEST_CASE("a timed value's times are on the host clock, within its submit and its completion") {
  fake();
  Direct g(0);
  auto image = g.driver->image(t::kernels_image());
  REQUIRE(image);
  auto id = std::get<edge::Loaded>(*image).image;
  auto entry = std::get<edge::Entry>(g.driver->entry(id, "write_u64"));
  edge::Region region;
  auto where = g.alloc(Memory::Pinned, 64, &region);
  REQUIRE(where.host);
  std::array<std::uint64_t, 2> params = {*where.address, 42};
  rig_part p;
  std::memset(&p, 0, sizeof p);
  p.queue = 0;
  p.kind = RIG_KIND_LAUNCH;
  p.work.launch.code = entry.code;
  p.work.launch.launch = entry.launch;
  for (int k = 0; k < 3; ++k) p.work.launch.groups[k] = p.work.launch.threads[k] = 1;
  p.work.launch.param_bytes = 16;
  p.work.launch.params = params.data();
  std::vector<rig_part> parts = {p};
  std::uint64_t times[2] = {0, 0};
  const std::uint64_t before = rig_now_ns();
  REQUIRE(g.submit(parts, times) == RIG_COMMITTED);
  g.wait();
  const std::uint64_t after = rig_now_ns();
  CHECK(*reinterpret_cast<std::uint64_t*>(*where.host) == 42);
  const char* failure = nullptr;
  REQUIRE(g.c->settle(g.facts.edge, g.v, times, &failure) == RIG_OK);
  const std::uint64_t slack = 1'000'000;  // the anchor's correlation, generously
  CHECK(times[0] + slack >= before);
  CHECK(times[0] <= times[1]);
  CHECK(times[1] <= after + slack);
  std::uint64_t kept[2] = {times[0], times[1]};
  CHECK(g.c->settle(g.facts.edge, g.v, times, &failure) == RIG_OK);  // found written, left
  CHECK(times[0] == kept[0]);
  // A second timed value starts no earlier than the first ended.
  std::uint64_t second[2] = {0, 0};
  REQUIRE(g.submit(parts, second) == RIG_COMMITTED);
  g.wait();
  REQUIRE(g.c->settle(g.facts.edge, g.v, second, &failure) == RIG_OK);
  CHECK(second[0] >= times[1]);
  // An untimed value has nothing to settle.
  REQUIRE(g.submit(parts) == RIG_COMMITTED);
  g.wait();
  std::uint64_t none[2] = {0, 0};
  CHECK(g.c->settle(g.facts.edge, g.v, none, &failure) == RIG_FAILED);
  CHECK(std::string(failure).ends_with("was not timed"));
  g.driver->free(region);
  g.driver->unload(id);
}

TEST_CASE("a word of the caller's own host memory has its page mapped for the device's life, and its values reach it") {
  auto f = fake();
  auto* page = static_cast<std::uint64_t*>(std::aligned_alloc(4096, 4096));
  std::fill(page, page + 512, std::uint64_t(0));
  volatile std::uint64_t* word = page + 5;  // memory CUDA does not know, outside rig_words
  *word = 40;
  Direct on_rig_words(0);  // rig_words registered first: the counts below are the page's alone
  const long long registrations = f.count("registrations");
  {
    Direct g(0, word);
    CHECK(g.v == 40);  // the values start after what the word holds
    CHECK(f.count("registrations") == registrations + 1);
    std::vector<rig_part> parts = {fill_part(0, nothing)};
    {
      // Another device's word on the same page shares the registration, which outlives it.
      Direct beside(1, page + 6);
      CHECK(f.count("registrations") == registrations + 1);
      REQUIRE(beside.submit(parts) == RIG_COMMITTED);
      beside.wait();
    }
    CHECK(f.count("registrations") == registrations + 1);
    REQUIRE(g.submit(parts) == RIG_COMMITTED);
    g.wait();
    CHECK(*word == 41);
  }
  CHECK(f.count("registrations") == registrations);  // returned once the last device went
  f.fail("cuMemHostRegister", 1, CUDA_ERROR_INVALID_VALUE, 1);
  auto refused = cuda::opener(0).make(word);
  REQUIRE_FALSE(refused);
  CHECK_MESSAGE(refused.error().find(fmt::format("the timeline word at {:#x} lies outside rig_words, and CUDA "
                                                 "refuses to map the page that holds it",
                                                 reinterpret_cast<std::uintptr_t>(word))) != std::string::npos,
                refused.error());
  CHECK(f.count("registrations") == registrations);
  std::free(page);
}

TEST_CASE("a handle stopped after a later open reset its failed context leaves the new handle's streams and word page alone") {
  auto f = fake();
  auto* page = static_cast<std::uint64_t*>(std::aligned_alloc(4096, 4096));
  std::fill(page, page + 512, std::uint64_t(0));
  close_gpus();  // the reset below destroys what every open handle of GPU 0 holds
  { Direct on_rig_words(0); }  // rig_words registered (and again after the reset below, by the fresh handle)
  const long long registrations = f.count("registrations");
  std::vector<rig_part> parts = {fill_part(0, nothing)};
  {
    auto failed = std::make_unique<Direct>(0, page + 5);
    f.fault(0, CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK(failed->submit(parts) != RIG_COMMITTED);  // the driver saw the failure
    const long long resets = f.count("resets");
    Direct fresh(0, page + 6);  // opened while the failed handle is not stopped yet
    REQUIRE(f.count("resets") == resets + 1);
    CHECK(f.count("registrations") == registrations + 1);  // the page, registered again
    failed.reset();  // stops it, and returns what it borrowed before the reset
    CHECK(f.count("registrations") == registrations + 1);
    REQUIRE(fresh.submit(parts) == RIG_COMMITTED);
    fresh.wait();
    CHECK(page[6] == 1);
  }
  CHECK(f.count("registrations") == registrations);
  std::free(page);
}

TEST_CASE("map_host registers a range once for every CUDA device; map_peer reaches another GPU's memory") {
  auto f = fake();
  Direct a(0), b(1);
  REQUIRE(a.facts.maps_host);
  auto* host = static_cast<std::byte*>(std::aligned_alloc(4096, 16384));
  const auto at = reinterpret_cast<std::uintptr_t>(host);
  const long long registrations = f.count("registrations");
  auto ma = a.driver->map_host(at, 16384);
  auto mb = b.driver->map_host(at, 16384);
  REQUIRE(std::holds_alternative<edge::Region>(ma));
  REQUIRE(std::holds_alternative<edge::Region>(mb));
  CHECK(f.count("registrations") == registrations + 1);
  auto where = a.driver->locate(std::get<edge::Region>(ma));
  CHECK(where.address == std::optional<std::uint64_t>(at));
  CHECK(where.host == std::optional<std::uintptr_t>(at));
  a.driver->free(std::get<edge::Region>(ma));
  CHECK(f.count("registrations") == registrations + 1);
  b.driver->free(std::get<edge::Region>(mb));
  CHECK(f.count("registrations") == registrations);
  f.fail("cuMemHostRegister", 1, CUDA_ERROR_OUT_OF_MEMORY, 1);
  CHECK(std::holds_alternative<edge::NoRoom>(a.driver->map_host(at, 16384)));
  f.fail("cuMemHostRegister", 1, CUDA_ERROR_INVALID_VALUE, 1);
  CHECK(std::holds_alternative<edge::Never>(a.driver->map_host(at, 16384)));
  std::free(host);

  edge::Region theirs, pinned;
  auto peer = b.alloc(Memory::Device, 4096, &theirs);
  auto mapped = a.driver->map_peer(peer, 4096);
  REQUIRE(std::holds_alternative<edge::Region>(mapped));
  CHECK(a.driver->locate(std::get<edge::Region>(mapped)).address == peer.address);
  CHECK(f.count("peer_enables") >= 1);
  auto host_peer = a.driver->map_peer(b.alloc(Memory::Pinned, 4096, &pinned), 4096);
  CHECK(std::holds_alternative<edge::Region>(host_peer));
  edge::Location stranger{std::uint64_t(0x10), std::nullopt, 0};
  CHECK(std::holds_alternative<edge::Never>(a.driver->map_peer(stranger, 64)));
  CHECK(std::holds_alternative<edge::Never>(a.driver->map_peer(edge::Location{}, 64)));
  edge::Region mine;
  auto own = a.alloc(Memory::Device, 64, &mine);
  f.set("peer", 0);
  CHECK(std::holds_alternative<edge::Never>(b.driver->map_peer(own, 64)));
  f.set("peer", 1);
  a.driver->free(mine);
  a.driver->free(std::get<edge::Region>(mapped));
  a.driver->free(std::get<edge::Region>(host_peer));
  b.driver->free(theirs);
  b.driver->free(pinned);
}

TEST_CASE("a wait on a word outside rig_words is waited for on the host, inside submit") {
  fake();
  Direct g(0);
  alignas(8) static std::uint64_t outside = 0;
  std::thread later([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    __atomic_store_n(&outside, 1, __ATOMIC_RELEASE);
  });
  std::vector<rig_part> parts = {fill_part(0, nothing)};
  const auto start = std::chrono::steady_clock::now();
  CHECK(g.submit(parts, nullptr, {rig_wait{&outside, 1, 999, 1}}) == RIG_COMMITTED);
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(25));
  later.join();
  g.wait();
}

TEST_CASE("stop raises the word to the last submitted value once nothing runs") {
  fake();
  Direct g(0);
  std::vector<rig_part> ok = {fill_part(0, nothing)};
  REQUIRE(g.submit(ok) == RIG_COMMITTED);
  g.wait();
  std::vector<rig_part> bad = {fill_part(1, fails)};
  const char* why = nullptr;
  CHECK(g.submit(bad, nullptr, {}, &why) == RIG_FAILED);
  CHECK(std::string(why).find("returned CUDA_ERROR_INVALID_VALUE") != std::string::npos);
  CHECK(*g.word == g.v - 1);
  g.driver->stop("failed");
  g.stopped = true;
  CHECK(*g.word == g.v);
}

// ---- dma: cuMemGetHandleForAddressRange's dma-bufs.

TEST_CASE("dma of Device memory is a close-on-exec dma-buf of the whole host pages it lies on") {
  auto f = fake();
  Device d = t::open_gpu(0);
  Buffer b = Buffer::create(d, 10000);
  const long long before = f.count("dmabufs");
  auto dma = b.view(100, 10).dma("0000:41:00.0");
  REQUIRE_MESSAGE(dma.has_value(), (dma ? "" : dma.error()));
  const auto* buf = std::get_if<edge::Dmabuf>(&*dma);
  REQUIRE(buf != nullptr);
  CHECK(buf->offset == b.address() % 4096);
  CHECK((fcntl(buf->fd, F_GETFD) & FD_CLOEXEC) != 0);  // set by rig: CUDA does not promise it
  CHECK(lseek(buf->fd, 0, SEEK_END) == 12288);         // 10000 bytes lie on three pages
  CHECK(f.count("dmabufs") == before + 1);
  close(buf->fd);
}

TEST_CASE("dma CUDA refuses is an Error naming CUDA's error and the GPU's dma-buf attribute, and the device goes on") {
  auto f = fake();
  Device d = t::open_gpu(0);
  Buffer device = Buffer::create(d, 4096);
  f.set("dma_buf", 0);
  auto unsupported = device.dma("0000:41:00.0");
  f.set("dma_buf", 1);
  REQUIRE_FALSE(unsupported.has_value());
  CHECK(unsupported.error().find("CUDA:0: 4096 bytes at 0x") != std::string::npos);
  CHECK(unsupported.error().find("cuMemGetHandleForAddressRange failed: CUDA_ERROR_NOT_SUPPORTED") != std::string::npos);
  CHECK(unsupported.error().find("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0") != std::string::npos);

  Buffer pinned = Buffer::create(d, 8192, Memory::Pinned);
  auto host_unsupported = pinned.dma("0000:41:00.0");
  REQUIRE_FALSE(host_unsupported.has_value());
  CHECK(host_unsupported.error().find("CU_DEVICE_ATTRIBUTE_HOST_ALLOC_DMA_BUF_SUPPORTED is 0") != std::string::npos);
  f.set("host_dma_buf", 1);
  Buffer pinned2 = Buffer::create(d, 8192, Memory::Pinned);
  auto host_made = pinned2.dma("0000:41:00.0");
  f.set("host_dma_buf", 0);
  REQUIRE(host_made.has_value());
  close(std::get<edge::Dmabuf>(*host_made).fd);

  f.fail("cuMemGetHandleForAddressRange", 1, CUDA_ERROR_INVALID_VALUE, 1);
  Buffer other = Buffer::create(d, 4096);
  auto invalid = other.dma("0000:41:00.0");
  REQUIRE_FALSE(invalid.has_value());
  CHECK(invalid.error().find("CUDA_ERROR_INVALID_VALUE") != std::string::npos);
  CHECK_FALSE(d.lost());
  Buffer again = Buffer::create(d, 4096);
  auto made = again.dma("0000:41:00.0");
  REQUIRE(made.has_value());
  close(std::get<edge::Dmabuf>(*made).fd);
}
