// What the core's tests share: the host kernels' image, one-launch submissions, and a
// driver wrapper that changes another driver's facts or answers.
#pragma once

#include <rig/rig.hpp>

#include <functional>
#include <span>

#include "../support/forwarding_driver.hpp"

extern const unsigned char rig_core_kernels[];
extern const std::size_t rig_core_kernels_size;

namespace rig::test {

inline std::span<const std::byte> core_kernels() {
  return {reinterpret_cast<const std::byte*>(rig_core_kernels), rig_core_kernels_size};
}

// The host image of tests/kernels/core_kernels.c, loaded once.
inline Image& core_image() {
  static Image image = *Image::load(host(), core_kernels());
  return image;
}

inline Function kernel(std::string_view name) { return *core_image().resolve(name); }

// A submission of one launch of `f` whose first reads + writes 8-byte parameters are the
// addresses of the run's buffers, in slot order.
inline Submission one_launch(const Device& d, const Function& f, std::uint32_t params, int reads,
                             int writes) {
  Submission::Launch launch{f, params, {}};
  for (int i = 0; i < reads + writes; ++i)
    launch.refs.push_back({std::uint32_t(8 * i), Submission::Ref::What::Buffer, std::uint32_t(i), {}});
  Submission::Part part{"", {}, launch};
  return Submission::make(d, std::span(&part, 1), reads, writes);
}

// A submission of one part of two 32-bit words for d's queue (the fake driver runs it).
inline Submission words(const Device& d) {
  Submission::Part part{"", {}, Submission::Words{Buffer::of_string(std::string(8, '\0'))}};
  return Submission::make(d, std::span(&part, 1), 0, 0);
}

// A driver that forwards to another and lets a test change its facts.
class Twisted : public Forwarding {
 public:
  Twisted(std::unique_ptr<edge::Driver> inner, std::function<void(edge::Facts&)> twist)
      : Forwarding(std::move(inner)), twist_(std::move(twist)) {}
  edge::Facts facts() override {
    auto f = Forwarding::facts();
    twist_(f);
    return f;
  }

 private:
  std::function<void(edge::Facts&)> twist_;
};

// An opener named `name` over `inner`'s drivers, with their facts twisted.
inline edge::Opener<> twisted(std::string name, edge::Opener<> inner, std::function<void(edge::Facts&)> twist) {
  return {std::move(name), [inner, twist](volatile std::uint64_t* word) -> Result<std::unique_ptr<edge::Driver>> {
            auto made = inner.make(word);
            if (!made) return std::unexpected(made.error());
            return std::make_unique<Twisted>(std::move(*made), twist);
          }};
}

}  // namespace rig::test
