// The DISK device's conformance targets: the io laws on files, through io_uring ("DISK") and
// through pread/pwrite ("DISK-PREAD"). Each region is a new file in a directory of the
// process's own under the temporary directory, removed at exit.
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include <unistd.h>

#include "conformance.hpp"
#include <rig/disk.hpp>

namespace {

namespace fs = std::filesystem;
using namespace rig;

// The directory the regions' files live in, made at the first region.
class Files {
 public:
  fs::path next() {
    std::lock_guard g(mutex_);
    if (dir_.empty()) {
      std::string pattern = (fs::temp_directory_path() / "rig-conform-disk-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr)
        throw std::system_error(errno, std::generic_category(), "cannot make a directory for the DISK target");
      dir_ = pattern;
    }
    return dir_ / fmt::format("region-{}", n_++);
  }
  ~Files() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

 private:
  std::mutex mutex_;
  fs::path dir_;
  int n_ = 0;
};

Files& files() {
  static Files f;
  return f;
}

conformance::Target disk_target(std::string name, bool pread) {
  conformance::Target t;
  t.name = name;
  t.about = pread ? "the disk device on files through pread/pwrite (its fallback)"
                  : "the disk device on files through io_uring (O_DIRECT where aligned)";
  t.open = [name, pread](const conformance::Wrap&) {
    static std::atomic<int> n{0};
    disk::Options options;
    options.force_pread = pread;
    auto d = open_io(disk::opener(options, fmt::format("{}~{}", name, n++)));
    if (!d) throw std::runtime_error(fmt::format("cannot open: {}", d.error()));
    disk::Disk* io = disk::of(*d);
    conformance::Opened o(*d);
    o.live_bytes = [io] { return io->region_bytes(); };  // rig holds the handle while o does
    return o;
  };
  t.io_region = [](const Device& d, std::span<const std::byte> contents, Access access) {
    const fs::path path = files().next();
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(contents.data()), std::streamsize(contents.size()));
      if (!out) throw std::runtime_error(fmt::format("cannot write {}", path.string()));
    }
    auto b = disk::file(d, path, access);
    if (!b) throw std::runtime_error(b.error());
    return *b;
  };
  return t;
}

conformance::Registration disk_targets{"disk", [] {
  return std::vector<conformance::Target>{disk_target("DISK", false), disk_target("DISK-PREAD", true)};
}};

}  // namespace
