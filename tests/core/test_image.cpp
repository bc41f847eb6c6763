// Images and functions through the core.
#include <doctest/doctest.h>

#include <rig/rig.hpp>

#include <atomic>
#include <cstring>
#include <vector>

#include "../support/fake_driver.hpp"
#include "support.hpp"

using namespace rig;

namespace {
std::vector<std::byte> bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}
std::vector<std::byte> kernels_copy() {
  auto k = test::core_kernels();
  return {k.begin(), k.end()};
}
// The host device stays usable: a launch still runs and completes.
void host_still_runs() {
  Run run;
  auto s = test::one_launch(host(), test::kernel("nothing"), 0, 0, 0);
  submit(s, run, {}, {}).wait();
}
}  // namespace

TEST_CASE("an image's functions give their params and threads and keep it loaded") {
  auto image = Image::load(host(), test::core_kernels());
  REQUIRE(image);
  CHECK(image->device() == host());
  auto add = image->resolve("add_u32");
  REQUIRE(add);
  CHECK(add->name() == "add_u32");
  CHECK(add->params() == std::optional<std::size_t>(24));
  CHECK(add->threads() == std::optional<std::size_t>(1024));
  CHECK(add->entry() != 0);
  CHECK(add->image() == *image);
  CHECK(image->resolve("add_u32") == add);  // one function per name while it lives
  auto copy = image->resolve("copy_u32");
  REQUIRE(copy);
  CHECK(copy->threads() == std::nullopt);  // the kernel states no limit
  CHECK(!image->resolve("no_such_kernel"));
  image->prepare("add_u32");
}

TEST_CASE("a function keeps its image loaded after the image's handle goes") {
  std::optional<Function> f;
  {
    auto image = Image::load(host(), test::core_kernels());
    f = image->resolve("add_u32");
  }
  Buffer data = Buffer::create(host(), 16);
  data.write<std::uint32_t>([](auto xs) { std::fill(xs.begin(), xs.end(), 1u); });
  auto s = test::one_launch(host(), *f, 24, 0, 1);
  Run run;
  auto b = s.block(0);
  run.threads(b, 4);
  run.set(b, 8, std::uint64_t(4));
  run.set(b, 16, std::uint32_t(2));
  Buffer w[] = {data};
  submit(s, run, {}, w).wait();
  data.read<std::uint32_t>([](auto xs) {
    for (auto x : xs) CHECK(x == 3u);
  });
}

TEST_CASE("a binary the host rejects is a Result error naming the device and the problem") {
  struct Case {
    const char* what;
    std::vector<std::byte> binary;
    const char* says;
  };
  auto arm = kernels_copy();
  arm[18] = std::byte(183);  // e_machine: EM_AARCH64
  arm[19] = std::byte(0);
  auto truncated = kernels_copy();
  truncated.resize(truncated.size() / 2);
  auto relocatable_type = kernels_copy();
  relocatable_type[16] = std::byte(3);  // e_type: ET_DYN
  std::vector<Case> cases;
  cases.push_back({"empty", {}, "not an ELF"});
  cases.push_back({"text", bytes("hello, world"), "not an ELF"});
  cases.push_back({"another machine", arm, "aarch64"});
  cases.push_back({"truncated", truncated, ""});
  cases.push_back({"a shared object", relocatable_type, "ET_DYN"});
  for (const auto& c : cases) {
    CAPTURE(c.what);
    auto image = Image::load(host(), c.binary);
    REQUIRE(!image);
    CHECK(image.error().rfind("CPU: ", 0) == 0);
    CHECK(image.error().find(c.says) != std::string::npos);
  }
  host_still_runs();
}

TEST_CASE("a memory device loads no code, as a Result error") {
  Device m = memory_device("IMG-MEM");
  auto image = Image::load(m, test::core_kernels());
  REQUIRE(!image);
  CHECK(image.error().rfind("IMG-MEM: ", 0) == 0);
  m.close();
}

TEST_CASE("a fault while loading loses the device; a rejected binary does not") {
  auto [opener, control] = fake::opener("IMG-FAKE");
  Device d = *open(opener);
  CHECK(!Image::load(d, bytes("not a fake image")));
  CHECK(!d.lost());
  auto image = Image::load(d, bytes("fake-image\nk 16 64\n"));
  REQUIRE(image);
  auto k = image->resolve("k");
  REQUIRE(k);
  CHECK(k->params() == std::optional<std::size_t>(16));
  CHECK(k->threads() == std::optional<std::size_t>(64));
  control->fail_nth(fake::Call::Entry, control->calls(fake::Call::Entry) + 1, "descriptor unreadable");
  CHECK_THROWS_WITH_AS(image->resolve("k2"), doctest::Contains("descriptor unreadable"), Lost);
  CHECK(d.lost());
}

TEST_CASE("an image unloads once its last handle is gone and the work before it is done") {
  auto [opener, control] = fake::opener("IMG-FAKE2", {.runs_when_asleep = false});
  Device d = *open(opener);
  Point p;
  {
    auto image = Image::load(d, bytes("fake-image\nk 0 64\n"));
    auto k = *image->resolve("k");
    Submission::Part part{"", {}, Submission::Launch{k, 0, {}}};
    control->define("k", [](auto, const rig_launch&) {});
    auto s = Submission::make(d, std::span(&part, 1), 0, 0);
    Run run;
    p = submit(s, run, {}, {});
    CHECK(control->live_images() == 1);
  }
  CHECK(control->live_images() == 1);  // its launch has not run
  control->step();
  d.wait(p.value());
  Buffer kept = Buffer::create(d, 64);  // returns what is due
  CHECK(control->live_images() == 0);
  CHECK(control->violations().empty());
  d.close();
}
