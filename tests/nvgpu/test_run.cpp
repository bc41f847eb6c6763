// Push buffers, QMDs and kernel images the driver's formats make (nvgpu/abi), run on the NVIDIA
// simulator's engines (tests/sim/nv/engine.hpp) in the test Space of tests/nv/engine_harness.hpp:
// a semaphore release, copies, fills and compute launches of the committed kernels, whose
// SASS, constant banks and relocated addresses come from the driver's own cubin reader.
#include <algorithm>

#include "code.hpp"
#include "cubin.hpp"
#include "engine_harness.hpp"
#include "kernel_files.hpp"
#include "push.hpp"
#include "qmd.hpp"

namespace abi = rig::nv;
using namespace nv_test;
using nvgpu_test::kernel_file;

namespace {

constexpr std::uint32_t compute_sub = 1, copy_sub = 4;

// Writes `build`'s methods with the driver's writer and submits them through a GP entry the
// driver's encoder made.
template <class F>
void run(Channel& c, F&& build) {
  std::vector<std::uint32_t> storage(4096);
  abi::Push p(storage);
  build(p);
  const std::vector<std::uint32_t> words(p.words().begin(), p.words().end());
  const std::uint64_t va = c.segment_at(words);
  const auto e = abi::gp_entry(va, static_cast<std::uint32_t>(words.size()));
  c.entry(e[0], e[1]);
  REQUIRE(c.idle());
  std::lock_guard lk(c.m);
  REQUIRE_MESSAGE(c.stops.empty(), (c.stops.empty() ? "" : c.stops.front().second));
}

struct Copy_channel : Channel {
  std::uint32_t cls;
  std::byte* src;
  std::byte* dst;
  explicit Copy_channel(std::uint32_t copy_class)
      : Channel(Engine_kind::copy, copy_class == abi::HOPPER_DMA_COPY_A ? hopper_channel_gpfifo_a : ampere_channel_gpfifo_a),
        cls(copy_class) {
    engine->allow(cls);
    src = space.add(data_va, 0x10000);
    dst = space.add(data_va + 0x100000, 0x10000);
    for (int i = 0; i < 0x10000; ++i) src[i] = std::byte(i * 13 + 1);
  }
};

// Addresses of a launch.
constexpr std::uint64_t program_va = 0x300000, qmd_va = 0x500000, bank0_va = 0x600000, module_banks_va = 0x640000,
                        global_va = 0x6c0000, x_va = 0x700000, y_va = 0x800000;

std::uint64_t round_up(std::uint64_t v, std::uint64_t to) { return (v + to - 1) / to * to; }

// A compute channel with the kernels of `file` placed as the driver places them: the cubin
// for the channel's SM picked from the fatbin by the driver's reader, its kernel's .text and
// the module's constant banks and globals copied and relocated, constant bank 0 sized for the
// cubin's own .nv.constant0.<fn>.
struct Compute_channel : Channel {
  rig::sim::nv::Code code;
  bool hopper;
  abi::Cubin cubin;
  const abi::Cubin_kernel* kernel = nullptr;
  std::vector<std::uint64_t> at;  // each section's GPU address
  std::uint32_t bank0_size = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> module_banks;  // bank, bytes

  Compute_channel(const std::string& file, bool is_hopper)
      : Channel(Engine_kind::compute, is_hopper ? hopper_channel_gpfifo_a : ampere_channel_gpfifo_a, &code),
        hopper(is_hopper) {
    const unsigned sm = hopper ? 90 : 80;
    const std::string base = file + ".sm_" + std::to_string(sm);
    const auto fatbin = kernel_file(base + ".fatbin");
    REQUIRE(code.add_fatbin(fatbin, sm, base));
    auto c = abi::cubin_for_sm(fatbin, sm, base);
    REQUIRE_MESSAGE(c, (c ? std::string() : c.error()));
    cubin = std::move(*c);
    at.assign(cubin.sections.size(), 0);
    space.add(qmd_va, 0x1000);
    // The module's banks, 64 KiB apart, and its globals.
    for (const auto& [bank, index] : cubin.banks) {
      at[index] = module_banks_va + 0x10000 * bank;
      module_banks.emplace_back(bank, static_cast<std::uint32_t>(round_up(cubin.sections[index].size, 64)));
    }
    std::uint64_t next_global = global_va;
    for (auto g : {cubin.global, cubin.global_init})
      if (g) {
        at[*g] = next_global;
        next_global += round_up(cubin.sections[*g].size, 256);
      }
    if (next_global > global_va) space.add(global_va, next_global - global_va);
    for (const auto& [bank, index] : cubin.banks) {
      std::byte* p = space.add(at[index], round_up(cubin.sections[index].size, 64));
      place(index, p);
    }
    if (cubin.global_init) place(*cubin.global_init, space.map(at[*cubin.global_init], 1, true)->host);
    engine->allow(cls());
  }
  ~Compute_channel() { engine.reset(); }

  // Copies section `index`, relocated, to `to`.
  void place(std::uint32_t index, std::byte* to) {
    const auto bytes = cubin.bytes(index);
    std::vector<std::byte> image(bytes.begin(), bytes.end());
    auto r = abi::relocate(cubin, index, image, at);
    REQUIRE_MESSAGE(r, (r ? std::string() : r.error()));
    std::copy(image.begin(), image.end(), to);
  }

  // Makes `name` the kernel at program_va with its bank 0 at bank0_va.
  void use(const std::string& name) {
    kernel = cubin.kernel(name);
    REQUIRE(kernel);
    at[kernel->text_section] = program_va;
    place(kernel->text_section, space.add(program_va, cubin.bytes(kernel->text_section).size()));
    const auto own0 = std::find_if(kernel->banks.begin(), kernel->banks.end(), [](const auto& b) { return b.first == 0; });
    REQUIRE(own0 != kernel->banks.end());
    bank0_size = static_cast<std::uint32_t>(round_up(cubin.sections[own0->second].size, 64));
    CHECK(bank0_size >= kernel->param_offset + kernel->param_size);
    space.add(bank0_va, bank0_size);
  }
  std::uint32_t cls() const { return hopper ? abi::HOPPER_COMPUTE_A : abi::AMPERE_COMPUTE_A; }

  // Parameter `ordinal` as KPARAM_INFO places it in bank 0.
  template <class T>
  void param(std::uint32_t ordinal, T v) {
    REQUIRE(ordinal < kernel->params.size());
    const auto& p = kernel->params[ordinal];
    REQUIRE(p.size == sizeof(T));
    space.set<T>(bank0_va + kernel->param_offset + p.offset, v);
  }

  // The QMD the driver builds for the kernel: its registers, barriers and shared memory from the
  // cubin, bank 0 and the module's banks, release 0 of `payload` at sem_va.
  abi::Qmd qmd(std::uint32_t groups, std::uint32_t threads, std::uint32_t payload, std::uint32_t dynamic_shared = 0) const {
    abi::Qmd q = hopper ? abi::Qmd::v04() : abi::Qmd::v03();
    const std::uint32_t shared = kernel->static_shared + dynamic_shared;
    const std::uint32_t config = static_cast<std::uint32_t>(std::max<std::uint64_t>(round_up(shared, 4096), 8192));
    q.grid(groups).block(threads).register_count(kernel->registers).barrier_count(kernel->barriers);
    q.shared_memory(shared, 8192, 100 * 1024, config).program_address(program_va).constant_buffer(0, bank0_va, bank0_size);
    for (const auto& [bank, bytes] : module_banks) q.constant_buffer(bank, module_banks_va + 0x10000 * bank, bytes);
    q.release(0, sem_va, payload).invalidate_caches().sass_version(hopper ? 0x90 : 0x80);
    return q;
  }

  void launch(const abi::Qmd& q) {
    for (std::size_t i = 0; i < q.words().size(); ++i) space.set<std::uint32_t>(qmd_va + 4 * i, q.words()[i]);
    run(*this, [&](abi::Push& p) {
      abi::set_object(p, compute_sub, cls());
      abi::launch(p, compute_sub, qmd_va,
                  hopper ? abi::compute::PCAS_ACTION_PREFETCH_SCHEDULE : abi::compute::PCAS_ACTION_INVALIDATE_COPY_SCHEDULE);
    });
  }
};

}  // namespace

TEST_CASE("a host semaphore release the writer makes stores its 64-bit payload, and the time when asked") {
  Channel c;
  run(c, [](abi::Push& p) {
    abi::semaphore_release(p, sem_va, 0x1122'3344'5566'7788);
    abi::semaphore_release(p, sem_va + 0x20, 42, true);
    abi::non_stall_interrupt(p);
  });
  CHECK(c.space.get<std::uint64_t>(sem_va) == 0x1122'3344'5566'7788);
  CHECK(c.space.get<std::uint64_t>(sem_va + 0x20) == 42);
  CHECK(c.space.get<std::uint64_t>(sem_va + 0x28) == c.clock);
  std::lock_guard lk(c.m);
  CHECK(c.nonstalls == 1);
}

TEST_CASE("a 64-bit semaphore acquire the writer makes holds the channel until the value is reached") {
  Channel c;
  std::vector<std::uint32_t> storage(64);
  abi::Push p(storage);
  abi::semaphore_acquire(p, sem_va, 0x1'0000'0005);
  abi::semaphore_release(p, sem_va + 0x10, 1);
  c.submit(std::vector<std::uint32_t>(p.words().begin(), p.words().end()));
  REQUIRE(c.ran(4));  // the acquire's set-up methods: in the acquire
  c.space.set<std::uint64_t>(sem_va, 0x5);  // below in the upper word: still waits
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(c.space.get<std::uint64_t>(sem_va + 0x10) == 0);
  c.space.set<std::uint64_t>(sem_va, 0x1'0000'0007);
  REQUIRE(c.idle());
  CHECK(c.space.get<std::uint64_t>(sem_va + 0x10) == 1);
  std::lock_guard lk(c.m);
  CHECK(c.stops.empty());
}

TEST_CASE("copies the writer makes move the bytes on C8B5 and C6B5, then release the copy semaphore") {
  for (const auto cls : {abi::HOPPER_DMA_COPY_A, abi::AMPERE_DMA_COPY_A}) {
    CAPTURE(cls);
    Copy_channel c(cls);
    run(c, [&](abi::Push& p) {
      abi::set_object(p, copy_sub, cls);
      abi::copy_1d(p, copy_sub, cls, data_va + 0x100000, data_va + 3, 1001);
      abi::copy_semaphore_release(p, copy_sub, cls, sem_va, 7);
    });
    CHECK(std::memcmp(c.dst, c.src + 3, 1001) == 0);
    CHECK(c.dst[1001] == std::byte{0});
    CHECK(c.space.get<std::uint32_t>(sem_va) == 7);
  }
}

TEST_CASE("a 2D copy the writer makes moves each line from its pitch to the other") {
  Copy_channel c(abi::HOPPER_DMA_COPY_A);
  run(c, [&](abi::Push& p) {
    abi::set_object(p, copy_sub, c.cls);
    abi::copy_2d(p, copy_sub, c.cls, data_va + 0x100000, 300, data_va, 200, 150, 9);
  });
  for (int line = 0; line < 9; ++line) {
    CHECK(std::memcmp(c.dst + 300 * line, c.src + 200 * line, 150) == 0);
    CHECK(c.dst[300 * line + 150] == std::byte{0});
  }
}

TEST_CASE("a fill the writer makes sets every byte it names and no other, in words or bytes") {
  for (const auto cls : {abi::HOPPER_DMA_COPY_A, abi::AMPERE_DMA_COPY_A}) {
    Copy_channel c(cls);
    run(c, [&](abi::Push& p) {
      abi::set_object(p, copy_sub, cls);
      abi::fill(p, copy_sub, cls, data_va + 0x100000, 4096, 0x5a);
      abi::fill(p, copy_sub, cls, data_va + 0x100000 + 5001, 7, 0xc3);
      abi::copy_semaphore_release(p, copy_sub, cls, sem_va, 1, true);
    });
    for (int i = 0; i < 4096; ++i) REQUIRE(c.dst[i] == std::byte{0x5a});
    CHECK(c.dst[4096] == std::byte{0});
    CHECK(c.dst[5000] == std::byte{0});
    for (int i = 5001; i < 5008; ++i) REQUIRE(c.dst[i] == std::byte{0xc3});
    CHECK(c.dst[5008] == std::byte{0});
    CHECK(c.space.get<std::uint32_t>(sem_va) == 1);
  }
}

TEST_CASE("saxpy launched from the driver's cubin reader and QMD computes y = a x + y, on Hopper and Ampere") {
  for (const bool hopper : {true, false}) {
    CAPTURE(hopper);
    Compute_channel c("saxpy", hopper);
    c.use("saxpy");
    const unsigned n = 300;
    c.space.add(x_va, n * 4);
    c.space.add(y_va, n * 4);
    for (unsigned i = 0; i < n; ++i) {
      c.space.set<float>(x_va + 4 * i, float(i));
      c.space.set<float>(y_va + 4 * i, 1.0f);
    }
    c.param<float>(0, 2.0f);
    c.param<std::uint64_t>(1, x_va);
    c.param<std::uint64_t>(2, y_va);
    c.param<std::uint32_t>(3, n);
    c.launch(c.qmd(3, 128, 0x77));
    for (unsigned i = 0; i < n; ++i) REQUIRE(c.space.get<float>(y_va + 4 * i) == 2.0f * float(i) + 1.0f);
    CHECK(c.space.get<std::uint32_t>(sem_va) == 0x77);
    CHECK(c.engine->launches() == 1);
  }
}

TEST_CASE("reduce_sum runs with the barrier and shared memory its cubin records") {
  for (const bool hopper : {true, false}) {
    CAPTURE(hopper);
    Compute_channel c("reduce", hopper);
    c.use("reduce_sum");
    if (!hopper) CHECK(c.kernel->barriers == 1);
    const unsigned groups = 4, threads = 256, n = groups * threads;
    c.space.add(x_va, n * 4);
    c.space.add(y_va, groups * 4);
    for (unsigned i = 0; i < n; ++i) c.space.set<std::uint32_t>(x_va + 4 * i, i);
    c.param<std::uint64_t>(0, x_va);
    c.param<std::uint64_t>(1, y_va);
    c.param<std::uint32_t>(2, n);
    c.launch(c.qmd(groups, threads, 3));
    for (unsigned g = 0; g < groups; ++g) {
      std::uint32_t sum = 0;
      for (unsigned i = g * threads; i < (g + 1) * threads; ++i) sum += i;
      CHECK(c.space.get<std::uint32_t>(y_va + 4 * g) == sum);
    }
    CHECK(c.space.get<std::uint32_t>(sem_va) == 3);
  }
}

TEST_CASE("module variables work through the banks and relocations the driver placed") {
  for (const bool hopper : {true, false}) {
    CAPTURE(hopper);
    Compute_channel c("globals", hopper);
    c.use("scale_by_constants");
    const unsigned n = 100;
    c.space.add(x_va, n * 4);
    c.param<std::uint64_t>(0, x_va);
    c.param<std::uint32_t>(1, n);
    c.launch(c.qmd(1, 128, 1));
    const int coefficients[4] = {1, 2, 3, 4};
    for (unsigned i = 0; i < n; ++i) REQUIRE(c.space.get<std::int32_t>(x_va + 4 * i) == coefficients[i % 4] * int(i) + 100);
    // `launched` lives in .nv.global, whose address the relocated bank 4 carries.
    REQUIRE(c.cubin.global);
    CHECK(c.space.get<std::uint32_t>(c.at[*c.cubin.global]) == n);
  }
}
