// `rig bench load`: Image::load of the demo's relocatable ELF object on the host device, a
// resolve of one of its functions, and the image's unload, beside the system's dynamic
// loader doing the same for the same C built as a shared object: dlopen (RTLD_NOW), dlsym
// and dlclose. Both start from bytes in memory: the shared object lies in a memfd.
#include <rig/rig.hpp>

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bench.hpp"

extern const unsigned char rig_demo_object[];
extern const std::size_t rig_demo_object_size;
extern const unsigned char rig_demo_shared[];
extern const std::size_t rig_demo_shared_size;

namespace rig::bench {
namespace {

// The function each load resolves.
constexpr const char* kFunction = "demo_saxpy";

// The demo's shared object in a memfd, for dlopen by its /proc path.
class SharedObject {
 public:
  SharedObject() {
    fd_ = memfd_create("rig-demo.so", MFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error(fmt::format("memfd_create: {}", std::strerror(errno)));
    const auto* p = rig_demo_shared;
    std::size_t left = rig_demo_shared_size;
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error(fmt::format("writing the shared object: {}", std::strerror(errno)));
      p += n;
      left -= std::size_t(n);
    }
    path_ = fmt::format("/proc/self/fd/{}", fd_);
  }
  ~SharedObject() { ::close(fd_); }
  SharedObject(const SharedObject&) = delete;
  SharedObject& operator=(const SharedObject&) = delete;

  // dlopen, dlsym, dlclose; raises with dlerror's words where one fails.
  void load_resolve_unload() const {
    void* h = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) throw std::runtime_error(fmt::format("dlopen: {}", dlerror()));
    void* f = dlsym(h, kFunction);
    if (dlclose(h) != 0 || !f) throw std::runtime_error(fmt::format("dlsym/dlclose: {}", dlerror()));
  }
  // True iff no handle keeps the object loaded, so each dlopen maps and relocates it anew.
  bool unloaded() const {
    void* h = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (h) dlclose(h);
    return h == nullptr;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace

// Only the host device loads the demo's object (refuses_launch), so the figure needs no
// device in its name.
std::vector<Figure> load(const Options& o) {
  const Device d = o.device.value_or(host());
  if (auto why = refuses_launch(d)) throw std::invalid_argument(*why);
  const std::span bytes(reinterpret_cast<const std::byte*>(rig_demo_object), rig_demo_object_size);
  const std::uint64_t n = 2000;
  Spread rig = measure(o.repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) {
      auto image = Image::load(d, bytes);
      if (!image) throw std::runtime_error(image.error());
      if (!image->resolve(kFunction)) throw std::runtime_error(fmt::format("no {} in the demo object", kFunction));
    }
  });
  const std::string note = fmt::format("load of the demo's ELF object ({} bytes) + resolve + unload on {}",
                                       rig_demo_object_size, d.name());
  SharedObject so;
  so.load_resolve_unload();
  if (!so.unloaded())
    return {make_figure("load", rig, "ns", {}, "dlopen unavailable: dlclose keeps the object loaded", note)};
  Spread floor = measure(o.repeats, n, [&](std::uint64_t k) {
    for (std::uint64_t i = 0; i < k; ++i) so.load_resolve_unload();
  });
  return {make_figure("load", rig, "ns", floor,
                      fmt::format("dlopen + dlsym + dlclose of the same C as a shared object ({} bytes)",
                                  rig_demo_shared_size),
                      note)};
}

}  // namespace rig::bench
