// `rig demo`: the main job. On the host device, loads the demo's ELF object, runs saxpy and
// a sum reduction over 16 Mi floats in submissions chained by waits, checks the results
// against a plain scalar loop, and prints one row per submission.
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "tool.hpp"

extern const unsigned char rig_demo_object[];
extern const std::size_t rig_demo_object_size;

namespace rig::tool {
namespace {

struct FillParams {
  std::uint64_t x, y, n, chunk;
};
struct SaxpyParams {
  std::uint64_t x, y, n, chunk;
  float a;
  std::uint32_t pad;
};
struct SumParams {
  std::uint64_t x, partial, n, chunk;
};
struct TotalParams {
  std::uint64_t partial, total, count;
};

using Ref = Submission::Ref;

// A submission of one launch of `f` whose parameters start with the addresses of the
// buffers in `slots` (one 8-byte ref each), followed by plain bytes.
Submission one_launch(const Device& d, const Function& f, std::uint32_t params, int reads, int writes) {
  Submission::Launch launch{f, params, {}};
  for (int i = 0; i < reads + writes; ++i)
    launch.refs.push_back(Ref{std::uint32_t(8 * i), Ref::What::Buffer, std::uint32_t(i), std::nullopt});
  std::vector<Submission::Part> parts{{"", {}, launch}};
  return Submission::make(d, parts, reads, writes);
}

}  // namespace

int demo(const DemoOptions& options) {
  const std::uint64_t n = options.elements;
  const float a = 2.5f;
  Device cpu = host();
  auto image = Image::load(cpu, std::span(reinterpret_cast<const std::byte*>(rig_demo_object),
                                          rig_demo_object_size));
  if (!image) {
    fmt::print(stderr, "rig demo: {}\n", image.error());
    return 1;
  }
  auto fn = [&](std::string_view name) {
    auto f = image->resolve(name);
    if (!f) throw std::runtime_error(fmt::format("the demo image has no function {}", name));
    return *f;
  };
  const std::uint32_t groups = options.groups;
  const std::uint64_t chunk = (n + groups - 1) / groups;

  Buffer x = Buffer::create(cpu, n * sizeof(float));
  Buffer y = Buffer::create(cpu, n * sizeof(float));
  Buffer partial = Buffer::create(cpu, groups * sizeof(double));
  Buffer total = Buffer::create(cpu, sizeof(double));

  Submission fill = one_launch(cpu, fn("demo_fill"), sizeof(FillParams), 0, 2);
  Submission saxpy = one_launch(cpu, fn("demo_saxpy"), sizeof(SaxpyParams), 1, 1);
  Submission sum = one_launch(cpu, fn("demo_sum"), sizeof(SumParams), 1, 1);
  Submission finish = one_launch(cpu, fn("demo_total"), sizeof(TotalParams), 1, 1);

  fmt::print("rig demo on {} ({}): {} floats, {} groups per launch\n", cpu.name(), cpu.arch(), n, groups);
  fmt::print("{:>6}  {:<12} {:>7}  {:>12}\n", "value", "kernel", "groups", "wall");
  auto row = [](Point p, std::string_view kernel, std::uint32_t g, std::chrono::nanoseconds t) {
    fmt::print("{:>6}  {:<12} {:>7}  {:>9.3f} ms\n", p.value(), kernel, g, double(t.count()) / 1e6);
  };
  using clock = std::chrono::steady_clock;

  // Each submission waits for the point of the one before it, besides what its buffers order.
  Run run;
  Point last;
  auto launch = [&](const Submission& s, std::string_view kernel, std::uint32_t g,
                    std::span<const Buffer> reads, std::span<const Buffer> writes, auto set_plain) {
    auto b = s.block(0);
    run.groups(b, g);
    set_plain(b);
    auto t0 = clock::now();
    Point waits[] = {last};
    last = submit(s, run, reads, writes, waits);
    last.wait();
    row(last, kernel, g, clock::now() - t0);
  };
  {
    Buffer w[] = {x, y};
    launch(fill, "fill", groups, {}, w, [&](const Submission::Block& b) {
      run.set(b, 0, std::uint64_t(0));
      run.set(b, 8, std::uint64_t(0));
      run.set(b, 16, n);
      run.set(b, 24, chunk);
    });
  }
  {
    Buffer r[] = {x}, w[] = {y};
    launch(saxpy, "saxpy", groups, r, w, [&](const Submission::Block& b) {
      run.set(b, 0, std::uint64_t(0));
      run.set(b, 8, std::uint64_t(0));
      run.set(b, 16, n);
      run.set(b, 24, chunk);
      run.set(b, 32, a);
    });
  }
  {
    Buffer r[] = {y}, w[] = {partial};
    launch(sum, "sum", groups, r, w, [&](const Submission::Block& b) {
      run.set(b, 0, std::uint64_t(0));
      run.set(b, 8, std::uint64_t(0));
      run.set(b, 16, n);
      run.set(b, 24, chunk);
    });
  }
  {
    Buffer r[] = {partial}, w[] = {total};
    launch(finish, "total", 1, r, w, [&](const Submission::Block& b) {
      run.set(b, 0, std::uint64_t(0));
      run.set(b, 8, std::uint64_t(0));
      run.set(b, 16, std::uint64_t(groups));
    });
  }

  // The scalar loop the results must match.
  std::uint64_t mismatches = 0;
  double expected_total = 0;
  y.read<float>([&](std::span<const float> ys) {
    for (std::uint64_t i = 0; i < n; ++i) {
      float xi = float(i % 1024) / 256.0f;
      float yi = 1.0f + float(i % 7);
      float want = a * xi + yi;
      if (ys[i] != want) {
        if (mismatches < 5) fmt::print(stderr, "y[{}] = {}, expected {}\n", i, ys[i], want);
        ++mismatches;
      }
      expected_total += double(want);
    }
  });
  double got_total = total.read<double>([](std::span<const double> t) { return t[0]; });
  const double tolerance = 1e-9 * std::abs(expected_total);
  bool total_ok = std::abs(got_total - expected_total) <= tolerance;
  fmt::print("saxpy: {} of {} elements match the scalar loop\n", n - mismatches, n);
  fmt::print("sum: {:.6f}, scalar loop {:.6f} ({})\n", got_total, expected_total,
             total_ok ? "match" : "MISMATCH");
  if (mismatches || !total_ok) {
    fmt::print(stderr, "rig demo: results differ from the scalar loop\n");
    return 1;
  }
  fmt::print("rig demo: all results verified\n");
  return 0;
}

}  // namespace rig::tool
