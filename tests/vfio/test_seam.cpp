// The calls the OS seam gained for VFIO (rig/os.hpp): pread, pwrite, readlink and list, on
// the real system, and their -ENOSYS in a seam that does not implement them.
#include <rig/os.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <fcntl.h>

namespace fs = std::filesystem;

namespace {

struct Folder {
  Folder() {
    char name[] = "/tmp/rig-seam-XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path = name;
  }
  ~Folder() { fs::remove_all(path); }
  fs::path path;
};

// A seam of the first calls only, as the simulators are.
struct Older final : rig::os::Seam {
  int open(const char*, int) override { return -ENOENT; }
  int close(int) override { return -EBADF; }
  int ioctl(int, unsigned long, void*) override { return -ENOTTY; }
  std::expected<void*, int> mmap(void*, std::size_t, int, int, int, off_t) override { return std::unexpected(-ENODEV); }
  int munmap(void*, std::size_t) override { return -EINVAL; }
  int poll(pollfd*, nfds_t, int) override { return 0; }
  ssize_t read(int, void*, std::size_t) override { return -EBADF; }
  int eventfd(unsigned, int) override { return -ENOSYS; }
};

}  // namespace

TEST_CASE("pread and pwrite reach the bytes at their offset and leave the position alone") {
  Folder f;
  auto& seam = rig::os::system();
  std::string file = (f.path / "bytes").string();
  int fd = seam.open(file.c_str(), O_RDWR | O_CREAT);
  REQUIRE(fd >= 0);
  CHECK(seam.pwrite(fd, "abcdef", 6, 10) == 6);
  char back[4] = {};
  CHECK(seam.pread(fd, back, 3, 12) == 3);
  CHECK(std::string(back) == "cde");
  CHECK(seam.read(fd, back, 1) == 1);  // the position is still 0: a hole reads as 0
  CHECK(back[0] == 0);
  CHECK(seam.pread(-1, back, 1, 0) == -EBADF);
  CHECK(seam.close(fd) == 0);
}

TEST_CASE("readlink gives a link's target, and -ENOENT or -EINVAL for no link") {
  Folder f;
  auto& seam = rig::os::system();
  fs::create_symlink("../../kernel/iommu_groups/7", f.path / "iommu_group");
  CHECK(seam.readlink((f.path / "iommu_group").c_str()) == std::string("../../kernel/iommu_groups/7"));
  CHECK(seam.readlink((f.path / "driver").c_str()).error() == -ENOENT);
  CHECK(seam.readlink(f.path.c_str()).error() == -EINVAL);
}

TEST_CASE("list gives a folder's names without . and .., and -ENOENT for no folder") {
  Folder f;
  auto& seam = rig::os::system();
  fs::create_directory(f.path / "0000:00:02.0");
  fs::create_directory(f.path / "0000:00:02.1");
  auto names = seam.list(f.path.c_str());
  REQUIRE(names.has_value());
  std::sort(names->begin(), names->end());
  CHECK(*names == std::vector<std::string>{"0000:00:02.0", "0000:00:02.1"});
  CHECK(seam.list((f.path / "absent").c_str()).error() == -ENOENT);
}

TEST_CASE("a seam that does not implement the later calls answers -ENOSYS") {
  Older seam;
  char byte = 0;
  CHECK(seam.pread(3, &byte, 1, 0) == -ENOSYS);
  CHECK(seam.pwrite(3, &byte, 1, 0) == -ENOSYS);
  CHECK(seam.readlink("/").error() == -ENOSYS);
  CHECK(seam.list("/").error() == -ENOSYS);
}
