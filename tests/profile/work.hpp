// work.hpp — the work the profile tests and their program profile: launches of the host
// kernels of kernels.c, which spin for a given time.
#pragma once

#include <rig/rig.hpp>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

extern const unsigned char rig_profile_kernels[];
extern const std::size_t rig_profile_kernels_size;

namespace rig::test {

// Launches of one spinning kernel of kernels.c on the host device; each group spins for the
// nanoseconds given, then counts itself in `groups`.
class Spinner {
 public:
  explicit Spinner(const std::string& kernel)
      : image_(load()), function_(resolve(image_, kernel)), submission_(make(function_)),
        groups_(Buffer::create(host(), 4096)) {
    groups_.fill(std::byte{0});
  }

  // Submits one launch of `groups` groups spinning `ns` each; returns its point.
  Point launch(std::uint64_t ns, std::uint32_t groups) {
    const auto block = submission_.block(0);
    run_.groups(block, groups);
    run_.set(block, 0, ns);
    run_.set(block, 8, std::uint64_t(0));  // the ref's offset into the buffer
    Buffer writes[] = {groups_};
    return submit(submission_, run_, {}, writes);
  }

  // The groups that ran so far.
  std::uint32_t ran() const {
    return groups_.read<std::uint32_t>([](std::span<const std::uint32_t> g) { return g[0]; });
  }

 private:
  static Image load() {
    auto image = Image::load(host(), std::span(reinterpret_cast<const std::byte*>(rig_profile_kernels),
                                               rig_profile_kernels_size));
    if (!image) throw std::runtime_error("the profile tests' kernels do not load: " + image.error());
    return *image;
  }
  static Function resolve(const Image& image, const std::string& name) {
    auto f = image.resolve(name);
    if (!f) throw std::runtime_error("the profile tests' kernels have no " + name);
    return *f;
  }
  static Submission make(const Function& f) {
    Submission::Launch launch{f, 16, {{8, Submission::Ref::What::Buffer, 0, {}}}};
    Submission::Part part{"", {}, launch};
    return Submission::make(host(), std::span(&part, 1), 0, 1);
  }

  Image image_;
  Function function_;
  Submission submission_;
  Buffer groups_;
  Run run_;
};

}  // namespace rig::test
