// targets.cpp — the built-in targets (the host device, a memory device, the fake driver in
// each of its configurations) and the registry of the targets drivers add.
#include <algorithm>
#include <atomic>
#include <map>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "../../host/host_driver.hpp"
#include "forwarding_driver.hpp"
#include "law.hpp"

extern const unsigned char rig_conformance_kernels[];
extern const std::size_t rig_conformance_kernels_size;

namespace rig::conformance {

std::vector<std::byte> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path));
  const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

namespace {

using detail::unique;

std::vector<std::byte> bytes_of(std::string_view s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

Opened open_or_throw(const edge::Opener<>& opener) {
  auto d = open(opener);
  if (!d) throw std::runtime_error(fmt::format("cannot open: {}", d.error()));
  return Opened(*d);
}

// The fake's image: a function that does nothing.
constexpr std::string_view kFakeImage = "fake-image\nconf_nothing 0 -\n";

// The values a clocked fake runs slowly, by value, with how long each takes.
struct Durations {
  std::mutex mutex;
  std::map<std::uint64_t, std::chrono::milliseconds> slow;
};

// A fake configuration. `clocked`: its work runs on its own, as hardware's does, stepped by a
// thread of the target's until the device stops; otherwise it runs when rig sleeps in the
// driver, or when a law steps it.
Target fake_target(std::string name, std::string about, fake::Options options, std::uint64_t k,
                   bool clocked = false) {
  Target t;
  t.name = name;
  t.about = std::move(about);
  t.commit_bound = k;
  t.image = bytes_of(kFakeImage);
  t.function = "conf_nothing";
  t.open = [name, options, clocked](const Wrap& wrap) -> Opened {
    auto [opener, control] = fake::opener(unique(name), options);
    control->define("conf_nothing", [](std::span<const std::byte>, const rig_launch&) {});
    Opened o = open_or_throw(wrap ? wrap(opener) : opener);
    o.live_bytes = [control = control] { return control->live_bytes(); };
    o.violations = [control = control] { return control->violations(); };
    if (clocked) {
      // Its hardware: a thread that runs each value as soon as it is committed, except that a
      // slow value takes the time it was given.
      auto durations = std::make_shared<Durations>();
      const volatile std::uint64_t* word = o.device.facts().word;
      std::thread([control = control, durations, word] {
        while (!control->stopped()) {
          std::optional<std::chrono::milliseconds> slow;
          if (control->pending() > 0) {
            std::lock_guard g(durations->mutex);
            auto it = durations->slow.find(__atomic_load_n(word, __ATOMIC_ACQUIRE) + 1);
            if (it != durations->slow.end()) slow = it->second, durations->slow.erase(it);
          }
          if (slow) std::this_thread::sleep_for(*slow);
          if (control->step(1) == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }).detach();
      auto words = std::make_shared<std::optional<Submission>>();
      o.slow = [d = o.device, durations, words](std::chrono::milliseconds ms) {
        if (!*words) {
          Submission::Part part{"", {}, Submission::Words{Buffer::of_string(std::string(8, '\0'))}};
          *words = Submission::make(d, std::span(&part, 1), 0, 0);
        }
        {
          std::lock_guard g(durations->mutex);
          durations->slow[d.submitted() + 1] = ms;
        }
        Run run;
        return submit(**words, run, {}, {});
      };
      return o;
    }
    o.step = [control = control](std::size_t n) { return control->step(n); };
    return o;
  };
  return t;
}

edge::Opener<> host_driver_opener() {
  return {unique("CPU"), [](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
            return cpu::make_host_driver(word);
          }};
}

edge::Opener<> memory_driver_opener() {
  return {unique("MEM"), [](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
            return cpu::make_memory_driver(word);
          }};
}

// The bytes of the memory a driver allocated for rig (alloc) that rig has not freed: a driver
// that forwards every call to the inner one and counts, as the fake driver counts its own.
// Mappings of memory the driver does not own (map_host, map_peer) are not counted: rig keeps
// its staging memory mapped on each device that copied through it. The C functions are the
// inner driver's own, which rig reaches through the facts' edge.
class Counted final : public test::Forwarding {
 public:
  struct Count {
    std::mutex mutex;
    std::map<std::uintptr_t, std::size_t> regions;
    std::size_t bytes = 0;
  };
  Counted(std::unique_ptr<edge::Driver> inner, std::shared_ptr<Count> count)
      : Forwarding(std::move(inner)), count_(std::move(count)) {}

  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override {
    auto r = Forwarding::alloc(memory, bytes);
    if (r) {
      std::lock_guard g(count_->mutex);
      count_->regions[r->id] = bytes;
      count_->bytes += bytes;
    }
    return r;
  }
  void free(edge::Region r) override {
    Forwarding::free(r);
    std::lock_guard g(count_->mutex);
    if (auto it = count_->regions.find(r.id); it != count_->regions.end())
      count_->bytes -= it->second, count_->regions.erase(it);
  }

 private:
  std::shared_ptr<Count> count_;
};

struct Source {
  std::string name;
  std::function<std::vector<Target>()> make;
};
struct Registry {
  std::mutex mutex;
  std::vector<Source> sources;
};
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

Target driver_target(std::string name, std::function<edge::Opener<>()> make, std::optional<std::uint64_t> commit_bound,
                     std::string about) {
  Target t;
  t.about = about.empty() ? fmt::format("devices of the driver registered as {}", name) : std::move(about);
  t.commit_bound = commit_bound;
  t.open = [name, make = std::move(make)](const Wrap& wrap) {
    edge::Opener<> opener = make();
    opener.name = unique(name);
    // Counted inside the wrap: what a fault-injecting wrapper fails never reaches the driver.
    auto count = std::make_shared<Counted::Count>();
    opener.make = [inner = std::move(opener.make), count](volatile std::uint64_t* word)
        -> Result<std::unique_ptr<edge::Driver>> {
      auto driver = inner(word);
      if (!driver) return std::unexpected(driver.error());
      return std::make_unique<Counted>(std::move(*driver), count);
    };
    Opened o = open_or_throw(wrap ? wrap(opener) : opener);
    o.live_bytes = [count] {
      std::lock_guard g(count->mutex);
      return count->bytes;
    };
    return o;
  };
  t.name = std::move(name);
  return t;
}

std::vector<Target> builtin_targets() {
  std::vector<Target> out;
  {
    Target t;
    t.name = "CPU";
    t.about = "the host device (laws that lose, close or wrap a device use another instance of its driver)";
    t.shared = [] { return Opened(host()); };
    t.open = [](const Wrap& wrap) {
      auto opener = host_driver_opener();
      return open_or_throw(wrap ? wrap(opener) : opener);
    };
    t.commit_bound = 1;  // its submit always returns RIG_COMMITTED
    t.image.assign(reinterpret_cast<const std::byte*>(rig_conformance_kernels),
                   reinterpret_cast<const std::byte*>(rig_conformance_kernels) + rig_conformance_kernels_size);
    t.function = "conf_nothing";
    out.push_back(std::move(t));
  }
  {
    Target t;
    t.name = "MEM";
    t.about = "a memory device (wrapped: its driver opened through rig::open)";
    t.open = [](const Wrap& wrap) {
      if (!wrap) return Opened(memory_device(unique("MEM")));
      return open_or_throw(wrap(memory_driver_opener()));
    };
    t.commit_bound = 1;
    out.push_back(std::move(t));
  }
  out.push_back(fake_target("FAKE", "the fake driver, defaults: commits every value, runs while rig sleeps in it", {}, 1));
  out.push_back(fake_target("FAKE/commit_every=8", "the fake driver committing on its own every 8 values",
                            {.commit_every = 8}, 8));
  out.push_back(fake_target("FAKE/own_word", "the fake driver with a word of its own, read through signaled",
                            {.own_word = true}, 1));
  out.push_back(fake_target("FAKE/waits=none", "the fake driver whose queues wait for no producer (the host waits)",
                            {.waits = {false, false}}, 1));
  out.push_back(fake_target("FAKE/completion=Host", "the fake driver whose word the host writes",
                            {.completion = edge::Completion::Host}, 1));
  out.push_back(fake_target("FAKE/hang_ms=60",
                            "the fake driver with hang_ms 60 whose work runs on its own, as hardware's does",
                            {.hang_ms = 60, .runs_when_asleep = false}, 1, true));
  out.push_back(fake_target("FAKE/host_addresses=false",
                            "the fake driver whose memory the host does not address (copies stage)",
                            {.host_addresses = false}, 1));
  out.push_back(fake_target("FAKE/maps_host_cheaply",
                            "the fake driver whose memory the host does not address, mapping host memory cheaply "
                            "(large copies with host memory borrow it; small ones stage)",
                            {.host_addresses = false, .maps_host_cheaply = true}, 1));
  out.push_back(fake_target("FAKE/maps_host=false",
                            "the fake driver that maps no host memory (copies stage through its Pinned memory)",
                            {.budget = 256 << 20, .host_addresses = false, .maps_host = false}, 1));
  out.push_back(memory_io_target());
  return out;
}

void add_targets(std::string source, std::function<std::vector<Target>()> make) {
  auto& r = registry();
  std::lock_guard g(r.mutex);
  r.sources.push_back({std::move(source), std::move(make)});
}

std::vector<Target> targets() {
  // The host's devices, then the registered ones, then the fake driver's configurations.
  std::vector<Target> builtin = builtin_targets();
  std::vector<Target> out(std::make_move_iterator(builtin.begin()), std::make_move_iterator(builtin.begin() + 2));
  std::vector<Source> sources;
  {
    auto& r = registry();
    std::lock_guard g(r.mutex);
    sources = r.sources;
  }
  for (auto& s : sources) {
    try {
      for (auto& t : s.make()) out.push_back(std::move(t));
    } catch (const std::exception& e) {
      // A source that cannot list its targets shows as a target whose every law fails.
      Target t;
      t.name = s.name;
      t.about = fmt::format("the targets registered as {}, which could not be listed", s.name);
      std::string why = e.what();
      t.open = [why](const Wrap&) -> Opened { throw std::runtime_error("its targets could not be listed: " + why); };
      out.push_back(std::move(t));
    }
  }
  out.insert(out.end(), std::make_move_iterator(builtin.begin() + 2), std::make_move_iterator(builtin.end()));
  return out;
}

Point submit_flag_wait(const Device& device, std::span<const std::uint32_t> words, Memory memory,
                       const Buffer& flag, std::uint64_t n, std::size_t width, std::chrono::milliseconds ms) {
  if (width != 4 && width != 8) throw std::invalid_argument("submit_flag_wait: a flag is 4 or 8 bytes");
  Buffer buffer = Buffer::create(device, words.size_bytes(), memory);
  buffer.write<std::uint32_t>([&](std::span<std::uint32_t> x) { std::copy(words.begin(), words.end(), x.begin()); });
  Submission::Part part{"COMPUTE:0", {}, Submission::Words{buffer}};
  Run run;
  Point p = rig::submit(Submission::make(device, std::span(&part, 1), 0, 0), run, {}, {});
  std::thread([d = device, flag, n, width, before = p.value() - 1, ms] {
    const volatile std::uint64_t* word = d.facts().word;
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < before) {
      if (d.lost()) return;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    std::this_thread::sleep_for(ms);
    void* at = reinterpret_cast<void*>(*flag.host_address());
    if (width == 4)
      __atomic_store_n(static_cast<std::uint32_t*>(at), std::uint32_t(n), __ATOMIC_RELEASE);
    else
      __atomic_store_n(static_cast<std::uint64_t*>(at), n, __ATOMIC_RELEASE);
  }).detach();
  return p;
}

}  // namespace rig::conformance
