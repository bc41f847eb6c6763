// The compute engine's promises (engine.hpp, CBC0 with QMD V04_00 on Hopper, C6C0 with V03_00
// on Ampere): a launch reads the QMD, checks it, finds the kernel by its SASS, reads its
// parameters from constant bank 0, places its module variables from the QMD's banks, runs it
// over the QMD's grid and releases the QMD's semaphores; a bad QMD or a faulting kernel stops
// the channel with the code and words naming it.
#include <fstream>
#include <iterator>

#include "code.hpp"
#include "cubin.hpp"
#include "engine_harness.hpp"

using namespace nv_test;
namespace cb = rig::sim::nv::cubin;

namespace {

std::vector<std::byte> kernel_file(const std::string& file) {
  std::ifstream in(std::string(RIG_NV_KERNELS) + "/" + file, std::ios::binary);
  REQUIRE_MESSAGE(in, "no committed kernel file " << file);
  const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

// Compute methods (clcbc0.h; the same offsets on clc6c0.h).
constexpr std::uint32_t SEND_PCAS_A = 0x2b4, SEND_SIGNALING_PCAS2_B = 0x2c0;
constexpr std::uint32_t PCAS_ACTION_PREFETCH_SCHEDULE = 9, PCAS_ACTION_INVALIDATE_COPY_SCHEDULE = 3;
constexpr std::uint32_t compute_sub = 1;

// Addresses of a launch.
constexpr std::uint64_t program_va = 0x300000, qmd_va = 0x500000, bank0_va = 0x600000, x_va = 0x700000,
                        y_va = 0x800000;
constexpr std::uint32_t bank0_size = 0x1000;

// A QMD as the class header lays its fields out: set(hi, lo, value) writes MW(hi:lo).
struct Qmd_words {
  bool v04;
  std::vector<std::uint32_t> w;
  explicit Qmd_words(bool hopper) : v04(hopper), w(hopper ? 96 : 64) {
    if (v04) {
      set(583, 580, 4);  // QMD_MAJOR_VERSION
      set(25, 23, 2);    // QMD_TYPE GRID_CTA
    } else {
      set(583, 580, 3);  // QMD_MAJOR_VERSION; IS_QUEUE 136 stays 0
    }
  }
  void set(unsigned hi, unsigned lo, std::uint64_t v) {
    for (unsigned b = lo; b <= hi; ++b) {
      const std::uint32_t bit = 1u << (b % 32);
      w[b / 32] = ((v >> (b - lo)) & 1) ? (w[b / 32] | bit) : (w[b / 32] & ~bit);
    }
  }
  Qmd_words& grid(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1) {
    if (v04) {
      set(1055, 1024, x), set(1071, 1056, y), set(1103, 1088, z);  // GRID_WIDTH/HEIGHT/DEPTH
    } else {
      set(415, 384, x), set(431, 416, y), set(463, 448, z);  // CTA_RASTER_WIDTH/HEIGHT/DEPTH
    }
    return *this;
  }
  Qmd_words& block(std::uint32_t x, std::uint32_t y = 1, std::uint32_t z = 1) {
    if (v04) {
      set(1167, 1152, x), set(1183, 1168, y), set(1199, 1184, z);  // CTA_THREAD_DIMENSION0..2
    } else {
      set(607, 592, x), set(623, 608, y), set(639, 624, z);
    }
    return *this;
  }
  Qmd_words& registers(std::uint32_t n) {
    v04 ? set(1208, 1200, n) : set(656, 648, n);  // REGISTER_COUNT / REGISTER_COUNT_V
    return *this;
  }
  Qmd_words& shared(std::uint32_t bytes) {
    v04 ? set(601, 584, bytes) : set(561, 544, bytes);  // SHARED_MEMORY_SIZE
    return *this;
  }
  Qmd_words& program(std::uint64_t va) {
    if (v04) {
      set(1247, 1216, va & 0xffffffff), set(1272, 1248, va >> 32);  // PROGRAM_ADDRESS_LOWER/UPPER
    } else {
      set(1567, 1536, va & 0xffffffff), set(1584, 1568, va >> 32);
    }
    return *this;
  }
  Qmd_words& bank(unsigned i, std::uint64_t va, std::uint32_t size) {
    if (v04) {
      set(416 + 4 * i, 416 + 4 * i, 1);                         // CONSTANT_BUFFER_VALID(i)
      set(1567 + 64 * i, 1536 + 64 * i, (va >> 6) & 0xffffffff);  // ADDR_LOWER_SHIFTED6(i)
      set(1586 + 64 * i, 1568 + 64 * i, va >> 38);                // ADDR_UPPER_SHIFTED6(i)
      set(1599 + 64 * i, 1587 + 64 * i, size >> 4);               // SIZE_SHIFTED4(i)
    } else {
      set(640 + i, 640 + i, 1);
      set(1055 + 64 * i, 1024 + 64 * i, va & 0xffffffff);
      set(1072 + 64 * i, 1056 + 64 * i, va >> 32);
      set(1087 + 64 * i, 1075 + 64 * i, size >> 4);
    }
    return *this;
  }
  // Release 0 as a one-word semaphore.
  Qmd_words& release(std::uint64_t va, std::uint32_t payload) {
    if (v04) {
      set(320, 320, 1), set(322, 321, 1);  // RELEASE_ENABLE(0), STRUCTURE_SIZE(0) ONE_WORD
      set(671, 640, va & 0xffffffff), set(696, 672, va >> 32), set(735, 704, payload);
    } else {
      set(823, 823, 1), set(831, 830, 1);  // RELEASE0_ENABLE, RELEASE0_STRUCTURE_SIZE ONE_WORD
      set(799, 768, va & 0xffffffff), set(807, 800, va >> 32), set(863, 832, payload);
    }
    return *this;
  }
};

struct Compute_channel : Channel {
  rig::sim::nv::Code code;
  bool hopper;
  unsigned sm;
  cb::Cubin cubin;
  const cb::Kernel_info* info = nullptr;

  // A compute channel of the generation of `hopper` with `file`'s kernels registered and
  // `kernel_name`'s SASS at program_va.
  Compute_channel(const std::string& file, const std::string& kernel_name, bool is_hopper = true)
      : Channel(Engine_kind::compute, is_hopper ? hopper_channel_gpfifo_a : ampere_channel_gpfifo_a, &code),
        hopper(is_hopper),
        sm(is_hopper ? 90 : 80) {
    const std::string base = file + ".sm_" + std::to_string(sm);
    REQUIRE(code.add_fatbin(kernel_file(base + ".fatbin"), sm, base));
    auto c = cb::read_cubin(kernel_file(base + ".cubin"), base);
    REQUIRE(c);
    cubin = std::move(*c);
    for (const auto& k : cubin.kernels)
      if (k.name == kernel_name) info = &k;
    REQUIRE(info);
    std::byte* text = space.add(program_va, info->text.size());
    std::memcpy(text, info->text.data(), info->text.size());
    space.add(qmd_va, 0x1000);
    space.add(bank0_va, bank0_size);
    engine->allow(cls());
  }
  // The engine goes before the registry it runs kernels from.
  ~Compute_channel() { engine.reset(); }
  std::uint32_t cls() const { return hopper ? hopper_compute_a : ampere_compute_a; }
  Qmd_words qmd() const {
    Qmd_words q(hopper);
    q.program(program_va).bank(0, bank0_va, bank0_size).registers(info->registers).shared(info->static_shared);
    return q;
  }
  template <class T>
  void param(std::uint32_t offset, T v) {
    space.set<T>(bank0_va + info->param_offset + offset, v);
  }
  // Writes the QMD and submits SET_OBJECT, SEND_PCAS_A and SEND_SIGNALING_PCAS2_B.
  void launch(const Qmd_words& q, std::uint32_t action = PCAS_ACTION_PREFETCH_SCHEDULE) {
    for (std::size_t i = 0; i < q.w.size(); ++i) space.set<std::uint32_t>(qmd_va + 4 * i, q.w[i]);
    submit({inc(compute_sub, SET_OBJECT, 1), cls(), inc(compute_sub, SEND_PCAS_A, 1),
            static_cast<std::uint32_t>(qmd_va >> 8), inc(compute_sub, SEND_SIGNALING_PCAS2_B, 1), action});
  }
};

// saxpy's parameters: a at 0, x at 8, y at 16, n at 24.
void saxpy_setup(Compute_channel& c, unsigned n) {
  c.space.add(x_va, n * 4);
  c.space.add(y_va, n * 4);
  for (unsigned i = 0; i < n; ++i) {
    c.space.set<float>(x_va + 4 * i, float(i));
    c.space.set<float>(y_va + 4 * i, 1.0f);
  }
  c.param<float>(0, 2.0f);
  c.param<std::uint64_t>(8, x_va);
  c.param<std::uint64_t>(16, y_va);
  c.param<std::uint32_t>(24, n);
}

}  // namespace

TEST_CASE("a CBC0 launch runs the kernel at the QMD's program address over its grid, then releases its semaphore") {
  Compute_channel c("saxpy", "saxpy");
  const unsigned n = 300;
  saxpy_setup(c, n);
  c.launch(c.qmd().grid(3).block(128).release(sem_va, 0x77));
  REQUIRE(c.idle());
  {
    std::lock_guard lk(c.m);
    REQUIRE_MESSAGE(c.stops.empty(), (c.stops.empty() ? "" : c.stops.front().second));
  }
  for (unsigned i = 0; i < n; ++i) REQUIRE(c.space.get<float>(y_va + 4 * i) == 2.0f * float(i) + 1.0f);
  CHECK(c.space.get<std::uint32_t>(sem_va) == 0x77);
  CHECK(c.engine->launches() == 1);
  CHECK(c.engine->instructions() > 0);
}

TEST_CASE("a C6C0 launch reads a V03_00 QMD and the sm_80 parameter offset") {
  Compute_channel c("saxpy", "saxpy", false);
  CHECK(c.info->param_offset == 0x160);
  const unsigned n = 100;
  saxpy_setup(c, n);
  c.launch(c.qmd().grid(1).block(128).release(sem_va, 5), PCAS_ACTION_INVALIDATE_COPY_SCHEDULE);
  REQUIRE(c.idle());
  {
    std::lock_guard lk(c.m);
    REQUIRE_MESSAGE(c.stops.empty(), (c.stops.empty() ? "" : c.stops.front().second));
  }
  for (unsigned i = 0; i < n; ++i) REQUIRE(c.space.get<float>(y_va + 4 * i) == 2.0f * float(i) + 1.0f);
  CHECK(c.space.get<std::uint32_t>(sem_va) == 5);
}

TEST_CASE("the QMD's shared memory beyond the kernel's static shared is the launch's dynamic shared memory") {
  Compute_channel c("dynshared", "reverse_block");
  const unsigned block = 64;
  c.space.add(x_va, 2 * block * 4);
  for (unsigned i = 0; i < 2 * block; ++i) c.space.set<std::uint32_t>(x_va + 4 * i, i);
  c.param<std::uint64_t>(0, x_va);
  c.launch(c.qmd().grid(2).block(block).shared(c.info->static_shared + block * 4));
  REQUIRE(c.idle());
  {
    std::lock_guard lk(c.m);
    REQUIRE_MESSAGE(c.stops.empty(), (c.stops.empty() ? "" : c.stops.front().second));
  }
  for (unsigned b = 0; b < 2; ++b)
    for (unsigned t = 0; t < block; ++t) CHECK(c.space.get<std::uint32_t>(x_va + 4 * (b * block + t)) == b * block + block - 1 - t);
}

TEST_CASE("module variables are placed from the QMD's constant banks") {
  Compute_channel c("globals", "scale_by_constants");
  // As a driver lays the module out: bank 3 holds .nv.constant3, bank 4 the address of the
  // __device__ global where its R_CUDA_64 relocation says.
  constexpr std::uint64_t bank3_va = 0x900000, bank4_va = 0xa00000, global_va = 0xb00000;
  const auto& b3 = c.cubin.constant_data[3];
  auto b4 = c.cubin.constant_data[4];
  REQUIRE(!c.cubin.bank_relocs.empty());
  std::memcpy(b4.data() + c.cubin.bank_relocs[0].offset, &global_va, 8);
  std::memcpy(c.space.add(bank3_va, 0x100), b3.data(), b3.size());
  std::memcpy(c.space.add(bank4_va, 0x100), b4.data(), b4.size());
  c.space.add(global_va, 16);
  const unsigned n = 50;
  c.space.add(y_va, 64 * 4);
  c.param<std::uint64_t>(0, y_va);
  c.param<std::uint32_t>(8, n);
  c.launch(c.qmd().grid(2).block(32).bank(3, bank3_va, 0x100).bank(4, bank4_va, 0x100));
  REQUIRE(c.idle());
  {
    std::lock_guard lk(c.m);
    REQUIRE_MESSAGE(c.stops.empty(), (c.stops.empty() ? "" : c.stops.front().second));
  }
  for (unsigned i = 0; i < n; ++i) REQUIRE(c.space.get<std::int32_t>(y_va + 4 * i) == int(i % 4 + 1) * int(i) + 100);
  CHECK(c.space.get<std::uint32_t>(global_va) == n);
}

// --- refusals --------------------------------------------------------------------------------

namespace {

// Launches `q` on a saxpy channel and returns the stop it causes.
std::pair<std::uint32_t, std::string> refused(Compute_channel& c, const Qmd_words& q) {
  saxpy_setup(c, 64);
  c.launch(q);
  auto stop = c.stop();
  CHECK(c.engine->launches() == 0);
  CHECK(c.space.get<float>(y_va) == 1.0f);  // the kernel did not run
  CHECK(c.notifier_info32() == stop.first);
  return stop;
}

}  // namespace

TEST_CASE("a QMD of the other version, or not a plain grid, stops the channel with Xid 13") {
  SUBCASE("a V03 QMD on CBC0") {
    Compute_channel c("saxpy", "saxpy");
    auto q = c.qmd().grid(1).block(64);
    q.set(583, 580, 3);
    const auto [xid, why] = refused(c, q);
    CHECK(xid == 13);
    CHECK(why.find("QMD at 0x500000") != std::string::npos);
    CHECK(why.find("QMD_MAJOR_VERSION is 3") != std::string::npos);
  }
  SUBCASE("QMD_TYPE GRID_NULL") {
    Compute_channel c("saxpy", "saxpy");
    auto q = c.qmd().grid(1).block(64);
    q.set(25, 23, 1);
    const auto [xid, why] = refused(c, q);
    CHECK(xid == 13);
    CHECK(why.find("QMD_TYPE 1") != std::string::npos);
  }
}

TEST_CASE("an empty grid or block and a block over the limits stop the channel with Xid 13") {
  {
    Compute_channel c("saxpy", "saxpy");
    const auto [xid, why] = refused(c, c.qmd().grid(1, 0).block(64));
    CHECK(xid == 13);
    CHECK(why.find("empty grid 1x0x1") != std::string::npos);
  }
  {
    Compute_channel c("saxpy", "saxpy");
    const auto [xid, why] = refused(c, c.qmd().grid(1).block(0));
    CHECK(why.find("empty block") != std::string::npos);
  }
  {
    Compute_channel c("saxpy", "saxpy");
    const auto [xid, why] = refused(c, c.qmd().grid(1).block(64, 32));
    CHECK(xid == 13);
    CHECK(why.find("block 64x32x1 is over the limits") != std::string::npos);
  }
}

TEST_CASE("constant bank 0 must be valid and hold the parameters") {
  {
    Compute_channel c("saxpy", "saxpy");
    auto q = c.qmd().grid(1).block(64);
    q.set(416, 416, 0);  // CONSTANT_BUFFER_VALID(0)
    const auto [xid, why] = refused(c, q);
    CHECK(xid == 13);
    CHECK(why.find("constant bank 0 is not valid") != std::string::npos);
  }
  {
    Compute_channel c("saxpy", "saxpy");
    const auto [xid, why] = refused(c, c.qmd().grid(1).block(64).bank(0, bank0_va, 0x200));
    CHECK(xid == 13);
    CHECK(why.find("kernel saxpy") != std::string::npos);
    CHECK(why.find("constant bank 0 has 512 bytes") != std::string::npos);
  }
}

TEST_CASE("too few registers or shared memory for the kernel stop the channel naming the kernel") {
  {
    Compute_channel c("saxpy", "saxpy");
    const auto [xid, why] = refused(c, c.qmd().grid(1).block(64).registers(c.info->registers - 1));
    CHECK(xid == 13);
    CHECK(why.find("below the " + std::to_string(c.info->registers) + " registers") != std::string::npos);
  }
  {
    Compute_channel c("dynshared", "reverse_block");
    REQUIRE(c.info->static_shared > 0);
    c.space.add(x_va, 256);
    const auto [xid, why] = refused(c, c.qmd().grid(1).block(64).shared(c.info->static_shared - 16));
    CHECK(xid == 13);
    CHECK(why.find("static shared memory") != std::string::npos);
  }
}

TEST_CASE("a program address that holds no registered kernel stops the channel naming the address") {
  Compute_channel c("saxpy", "saxpy");
  const auto [xid, why] = refused(c, c.qmd().grid(1).block(64).program(program_va + 16));
  CHECK(xid == 13);
  CHECK(why.find("program address 0x300010") != std::string::npos);
}

TEST_CASE("a QMD in unmapped memory stops the channel with Xid 31") {
  Compute_channel c("saxpy", "saxpy");
  c.submit({inc(compute_sub, SET_OBJECT, 1), c.cls(), inc(compute_sub, SEND_PCAS_A, 1), 0x7f000,
            inc(compute_sub, SEND_SIGNALING_PCAS2_B, 1), PCAS_ACTION_PREFETCH_SCHEDULE});
  const auto [xid, why] = c.stop();
  CHECK(xid == 31);
  CHECK(why.find("QMD at 0x7f00000") != std::string::npos);
}

TEST_CASE("a kernel that touches unmapped memory stops the channel with Xid 31 naming the kernel, without its release") {
  Compute_channel c("saxpy", "saxpy");
  saxpy_setup(c, 64);
  c.param<std::uint64_t>(16, 0x7700000);  // y points nowhere
  c.launch(c.qmd().grid(1).block(64).release(sem_va, 1));
  const auto [xid, why] = c.stop();
  CHECK(xid == 31);
  CHECK(why.find("kernel saxpy") != std::string::npos);
  CHECK(why.find("page fault") != std::string::npos);
  CHECK(c.space.get<std::uint32_t>(sem_va) == 0);
  CHECK(c.engine->launches() == 0);
}

// ---- Local memory (clcbc0.h/clc6c0.h SET_SHADER_LOCAL_MEMORY_A/B, NON_THROTTLED_A/B/C; the
// QMD's SHADER_LOCAL_MEMORY_LOW/HIGH_SIZE).
constexpr std::uint32_t SET_SHADER_LOCAL_MEMORY_A = 0x790, SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A = 0x2e4;
constexpr std::uint64_t local_va = 0x10000000;

void local_memory_low(Qmd_words& q, std::uint32_t bytes) {
  q.v04 ? q.set(535, 512, bytes) : q.set(759, 736, bytes);  // SHADER_LOCAL_MEMORY_LOW_SIZE
}

// What pick_private (stack.cu) gives thread i for in[i] = v.
std::int32_t pick_private_of(std::int32_t i, std::int32_t v, std::int32_t pick) {
  std::int32_t a[32];
  for (int j = 0; j < 32; ++j) a[j] = v + j;
  for (int j = 0; j < 32; ++j) a[(pick * j + i) & 31] += j;
  return a[(pick + i) & 31];
}

// pick_private (stack.cu, a 128-byte frame) with `local` bytes per thread in its QMD, after a
// backing store of `store` bytes for `sms` SMs at local_va (none when store is 0).
std::pair<std::uint32_t, std::string> stack_launch(Compute_channel& c, std::uint32_t local, std::uint64_t store,
                                                   std::uint32_t sms) {
  const unsigned n = 64;
  c.space.add(x_va, n * 4), c.space.add(y_va, n * 4);
  for (unsigned i = 0; i < n; ++i) c.space.set<std::int32_t>(x_va + 4 * i, std::int32_t(i));
  c.param<std::uint64_t>(0, x_va), c.param<std::uint64_t>(8, y_va);
  c.param<std::int32_t>(16, n), c.param<std::int32_t>(20, 5);
  if (store) {
    c.space.add(local_va, store);
    c.submit({inc(compute_sub, SET_OBJECT, 1), c.cls(), inc(compute_sub, SET_SHADER_LOCAL_MEMORY_A, 2),
              std::uint32_t(local_va >> 32), std::uint32_t(local_va), inc(compute_sub, SET_SHADER_LOCAL_MEMORY_NON_THROTTLED_A, 3),
              std::uint32_t(store >> 32), std::uint32_t(store), sms});
  }
  auto q = c.qmd().grid(1).block(n);
  local_memory_low(q, local);
  c.launch(q);
  REQUIRE(c.idle());
  std::lock_guard lk(c.m);
  if (c.stops.empty()) return {0, ""};
  return c.stops.front();
}

TEST_CASE("a kernel with a stack runs only with its local memory in the QMD and a backing store for it") {
  for (const bool hopper : {true, false}) {
    CAPTURE(hopper);
    constexpr std::uint32_t frame = 128;   // pick_private's int a[32]
    constexpr std::uint64_t per_sm = 2048;  // threads an SM holds
    {
      Compute_channel c("stack", "pick_private", hopper);
      const auto [xid, why] = stack_launch(c, 0, frame * per_sm, 1);
      CHECK(xid == 13);
      CHECK(why.find("below the kernel's 128 bytes of local memory per thread") != std::string::npos);
    }
    {
      Compute_channel c("stack", "pick_private", hopper);
      const auto [xid, why] = stack_launch(c, frame, 0, 0);
      CHECK(xid == 13);
      CHECK(why.find("pick_private") != std::string::npos);
      CHECK(why.find("no local memory backing store") != std::string::npos);
    }
    {
      Compute_channel c("stack", "pick_private", hopper);
      const auto [xid, why] = stack_launch(c, frame, frame * per_sm * 2 - 16, 2);
      CHECK(xid == 13);
      CHECK(why.find("below the 0x80000 that 128 bytes per thread take on 2 SMs") != std::string::npos);
    }
    {
      Compute_channel c("stack", "pick_private", hopper);
      const auto [xid, why] = stack_launch(c, frame, frame * per_sm * 2, 2);
      REQUIRE_MESSAGE(xid == 0, why);
      for (unsigned i = 0; i < 64; ++i) CHECK(c.space.get<std::int32_t>(y_va + 4 * i) == pick_private_of(i, i, 5));
    }
  }
}
