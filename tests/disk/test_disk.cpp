// The DISK io device: files as device memory, through io_uring and through pread/pwrite.
// Every test runs on both engines: "DISK" (io_uring where it works) and "DISK-PREAD".
#include <doctest/doctest.h>

#include <rig/disk.hpp>

#include <rig/rig.hpp>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <system_error>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace rig;
namespace fs = std::filesystem;

namespace {

// A directory under /tmp, removed with its files.
struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/rig-disk-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const char* f) const { return path / f; }
};

struct Engine {
  const char* name;
  bool pread;
};
constexpr Engine kEngines[] = {{"DISK", false}, {"DISK-PREAD", true}};

struct Opened {
  Device device;
  disk::Disk* disk;
};

Opened open_disk(const Engine& e, disk::Options o = {}) {
  o.force_pread = e.pread;
  auto d = open_io(disk::opener(o, e.name));
  REQUIRE(d.has_value());
  disk::Disk* io = disk::of(*d);
  REQUIRE(io != nullptr);
  CHECK(io->uring() == !e.pread);  // io_uring works on the machines these tests run on
  return {*d, io};
}

std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = std::byte(rng());
  return out;
}

void write_file(const fs::path& p, std::span<const std::byte> bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  REQUIRE(f.good());
}

std::vector<std::byte> read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  std::memcpy(out.data(), c.data(), c.size());
  return out;
}

std::span<std::byte> host_bytes(const Buffer& b) {
  return {reinterpret_cast<std::byte*>(*b.host_address()), b.length()};
}

// A size biased to the edges that matter: block multiples, a byte off them, small and large.
std::size_t pick(std::mt19937_64& rng, std::size_t most) {
  std::size_t n;
  switch (rng() % 5) {
    case 0: n = (rng() % 64 + 1) * 4096; break;            // whole blocks
    case 1: n = (rng() % 64 + 1) * 4096 + (rng() % 2 ? 1 : 4095); break;
    case 2: n = rng() % 5000; break;                       // small
    case 3: n = rng() % (std::size_t(3) << 20); break;     // up to 3 MiB, several chunks
    default: n = rng() % 100000; break;
  }
  return std::min(n, most);
}
std::size_t place(std::mt19937_64& rng, std::size_t room) {
  if (room == 0) return 0;
  std::size_t at = rng() % (room + 1);
  switch (rng() % 3) {
    case 0: return at / 4096 * 4096;  // on a block
    case 1: return at / 512 * 512;
    default: return at;
  }
}

}  // namespace

TEST_CASE("random copies between a file and host and memory-device buffers keep every byte") {
  for (const Engine& e : kEngines) {
    for (int mode : {0, 1, 2}) {  // 0: as is; 1: every transfer short; 2: reads skip the cache
      bool shorts = mode == 1;
      CAPTURE(e.name);
      CAPTURE(mode);
      TempDir dir;
      disk::Options o;
      o.simulate_short = shorts;
      o.probe_cache = mode != 2;
      auto [d, io] = open_disk(e, o);
      const std::size_t n = (std::size_t(8) << 20) + 123;  // not a whole number of blocks
      std::mt19937_64 rng(shorts ? 7 : 42);
      auto model = random_bytes(rng, n);
      fs::path p = dir / "data";
      write_file(p, model);
      if (mode == 2) {  // its pages out of the cache, so reads go O_DIRECT to the disk
        int fd = ::open(p.c_str(), O_RDONLY);
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
      }
      Buffer f = *disk::file(d, p, Access::ReadWrite);
      CHECK(f.length() == n);
      CHECK(f.io(io->region_key()));
      Buffer h = Buffer::create(host(), n + 8192);
      Device mem = memory_device(std::string("DISK-MEM-") + e.name);
      Buffer m = Buffer::create(mem, n);
      int rounds = shorts ? 40 : 150;
      for (int i = 0; i < rounds; ++i) {
        std::size_t len = pick(rng, n);
        std::size_t at = place(rng, n - len);
        bool to_memory = rng() % 4 == 0;
        Buffer& other = to_memory ? m : h;
        std::size_t oat = place(rng, other.length() - len);
        auto ob = host_bytes(other);
        if (rng() % 2) {  // into the file
          auto bytes = random_bytes(rng, len);
          std::memcpy(ob.data() + oat, bytes.data(), len);
          Box b = Box::row(len, oat, at);
          Buffer::submit_copy(other, f, std::span(&b, 1)).wait();
          std::memcpy(model.data() + at, bytes.data(), len);
        } else {  // out of it
          Box b = Box::row(len, at, oat);
          Buffer::submit_copy(f, other, std::span(&b, 1)).wait();
          REQUIRE(std::memcmp(ob.data() + oat, model.data() + at, len) == 0);
        }
      }
      // A box of several rows each way.
      Box rows{100, 5, 3000, 50, 70001, 4096};
      Buffer::submit_copy(f, h, std::span(&rows, 1)).wait();
      for (std::size_t r = 0; r < rows.rows; ++r)
        REQUIRE(std::memcmp(host_bytes(h).data() + 5 + r * 4096, model.data() + 100 + r * 70001, 3000) == 0);
      Box back{5, 777, 3000, 50, 4096, 70001};
      Buffer::submit_copy(h, f, std::span(&back, 1)).wait();
      for (std::size_t r = 0; r < back.rows; ++r)
        std::memcpy(model.data() + 777 + r * 70001, host_bytes(h).data() + 5 + r * 4096, 3000);
      // The whole file, each way, and as the file system sees it.
      Buffer::copy(f, h.view(4096, n));
      CHECK(std::memcmp(host_bytes(h).data() + 4096, model.data(), n) == 0);
      Buffer::copy(f, m);
      Buffer::copy(m, f);
      CHECK(fs::file_size(p) == n);
      CHECK(read_file(p) == model);
      if (shorts) CHECK(io->stats().resubmits > 0);
      if (!e.pread && !shorts) CHECK(io->stats().direct_bytes > 0);
      if (!e.pread && !shorts) CHECK(io->stats().registered > 0);
      if (!e.pread && mode == 0) CHECK(io->stats().cache_hits > 0);
      if (!e.pread && mode == 2) CHECK(io->stats().cache_hits == 0);
      CHECK(io->stats().buffered_bytes > 0);
      mem.close();
      d.close();
    }
  }
}

TEST_CASE("writes touch only the bytes asked for, and never grow the file") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    TempDir dir;
    auto [d, io] = open_disk(e);
    const std::size_t n = 256 << 10;
    std::vector<std::byte> model(n, std::byte{0xAA});
    fs::path p = dir / "fenced";
    write_file(p, model);
    Buffer f = *disk::file(d, p, Access::ReadWrite);
    std::mt19937_64 rng(3);
    struct Piece {
      std::size_t at, len;
    } pieces[] = {{4000, 100}, {4096, 8192}, {4095, 4098}, {0, 1}, {n - 1, 1}, {n - 8192, 8192}, {12345, 100000}};
    Buffer h = Buffer::create(host(), n);
    for (auto [at, len] : pieces) {
      auto bytes = random_bytes(rng, len);
      f.blit_from(bytes, at);
      std::memcpy(model.data() + at, bytes.data(), len);
      CHECK(fs::file_size(p) == n);
      CHECK(read_file(p) == model);
    }
    // A box past the buffer's end is refused before any byte moves.
    Box past = Box::row(10, 0, n - 5);
    CHECK_THROWS_AS(Buffer::submit_copy(h, f, std::span(&past, 1)), std::invalid_argument);
    // The library itself refuses bytes past the region.
    auto r = *f.io(io->region_key());
    std::byte one[8]{};
    CHECK_THROWS_AS(io->write(r, n - 4, one), std::out_of_range);
    CHECK(fs::file_size(p) == n);
    CHECK(read_file(p) == model);
    d.close();
  }
}

TEST_CASE("four threads copy to and from one file at once") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    TempDir dir;
    auto [d, io] = open_disk(e);
    const std::size_t quarter = 4 << 20, n = 4 * quarter;
    fs::path p = dir / "shared";
    Buffer f = *disk::create(d, p, n);
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(100 + t);
        Buffer mine = f.view(t * quarter, quarter);
        std::vector<std::byte> model(quarter, std::byte{0});
        Buffer h = Buffer::create(host(), quarter);
        for (int i = 0; i < 30; ++i) {
          std::size_t len = pick(rng, quarter);
          std::size_t at = place(rng, quarter - len);
          if (i % 2 == 0) {
            auto bytes = random_bytes(rng, len);
            mine.blit_from(bytes, at);
            std::memcpy(model.data() + at, bytes.data(), len);
          } else {
            Box b = Box::row(len, at, at);
            Buffer::submit_copy(mine, h, std::span(&b, 1)).wait();
            if (std::memcmp(host_bytes(h).data() + at, model.data() + at, len) != 0) ++bad;
          }
        }
        Buffer::copy(mine, h);
        if (std::memcmp(host_bytes(h).data(), model.data(), quarter) != 0) ++bad;
      });
    }
    for (auto& t : threads) t.join();
    CHECK(bad.load() == 0);
    CHECK(fs::file_size(p) == n);
    d.close();
  }
}

TEST_CASE("a file cut short while in use raises at a read past its new end") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    TempDir dir;
    auto [d, io] = open_disk(e);
    std::mt19937_64 rng(5);
    const std::size_t n = 1 << 20;
    auto model = random_bytes(rng, n);
    fs::path p = dir / "cut";
    write_file(p, model);
    Buffer f = *disk::file(d, p, Access::Read);
    Buffer h = Buffer::create(host(), n);
    Buffer::copy(f, h);
    CHECK(std::memcmp(host_bytes(h).data(), model.data(), n) == 0);
    const std::size_t kept = (256 << 10) + 100;
    REQUIRE(::truncate(p.c_str(), off_t(kept)) == 0);
    // Bytes before the cut still read.
    Box before = Box::row(kept, 0, 0);
    Buffer::submit_copy(f, h, std::span(&before, 1)).wait();
    CHECK(std::memcmp(host_bytes(h).data(), model.data(), kept) == 0);
    // A read across the cut, and one wholly past it.
    CHECK_THROWS_WITH_AS(Buffer::copy(f, h), doctest::Contains("cut short"), std::runtime_error);
    CHECK_THROWS_WITH_AS(Buffer::copy(f, h), doctest::Contains(p.c_str()), std::runtime_error);
    Box past = Box::row(4096, n - 4096, 0);
    CHECK_THROWS_WITH_AS(Buffer::submit_copy(f, h, std::span(&past, 1)), doctest::Contains("ends before"),
                         std::runtime_error);
    d.close();
  }
}

TEST_CASE("a full disk raises EFBIG or ENOSPC naming the file") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    TempDir dir;
    auto [d, io] = open_disk(e);
    fs::path p = dir / "full";
    const std::size_t n = 4 << 20, limit = 1 << 20;
    Buffer f = *disk::create(d, p, n);
    Buffer h = Buffer::create(host(), n);
    std::memset(host_bytes(h).data(), 0x5A, n);
    // A file-size limit on this process, with SIGXFSZ ignored so a write past it fails.
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    rlimit small = old;
    small.rlim_cur = limit;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    bool raised = false;
    std::string what;
    int code = 0;
    try {
      Buffer::copy(h, f);
    } catch (const std::system_error& x) {
      raised = true;
      what = x.what();
      code = x.code().value();
    }
    auto made = io->create_file(dir / "too-big", 2 * limit);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &old) == 0);
    std::signal(SIGXFSZ, old_handler);
    CHECK(raised);
    CHECK((code == EFBIG || code == ENOSPC));
    CHECK(what.find(p.string()) != std::string::npos);
    CHECK(what.find("largest file") != std::string::npos);
    CHECK(!made.has_value());
    if (!made) CHECK(made.error().find("too-big") != std::string::npos);
    // Below the limit, the bytes arrived; the file kept its length.
    auto on_disk = read_file(p);
    CHECK(on_disk.size() == n);
    CHECK(std::all_of(on_disk.begin(), on_disk.begin() + std::ptrdiff_t(limit),
                      [](std::byte b) { return b == std::byte{0x5A}; }));
    // And the device goes on working once there is room.
    Buffer::copy(h, f);
    CHECK(read_file(p) == std::vector<std::byte>(n, std::byte{0x5A}));
    d.close();
  }
}

TEST_CASE("a read-only file refuses writes, and a path that cannot open is an Error") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    TempDir dir;
    auto [d, io] = open_disk(e);
    fs::path p = dir / "ro";
    write_file(p, std::vector<std::byte>(8192, std::byte{1}));
    Buffer f = *disk::file(d, p, Access::Read);
    CHECK(f.access() == Access::Read);
    CHECK_THROWS_WITH_AS(f.fill(std::byte{2}), doctest::Contains("admits only Read"), std::invalid_argument);
    std::vector<std::byte> bytes(8192, std::byte{3});
    auto r = *f.io(io->region_key());
    try {
      io->write(r, 0, bytes);
      FAIL("a write to a read-only file went through");
    } catch (const std::system_error& x) {
      CHECK(x.code().value() == EBADF);
      CHECK(std::string(x.what()).find(p.string()) != std::string::npos);
    }
    CHECK(read_file(p) == std::vector<std::byte>(8192, std::byte{1}));

    auto missing = disk::file(d, dir / "missing" / "file", Access::Read);
    REQUIRE(!missing);
    CHECK(missing.error().find("missing/file") != std::string::npos);
    CHECK(missing.error().find("No such file") != std::string::npos);
    auto directory = disk::file(d, dir.path, Access::Read);
    REQUIRE(!directory);
    CHECK(directory.error().find("not a regular file") != std::string::npos);
    auto nowhere = disk::create(d, dir / "missing" / "new", 10);
    CHECK(!nowhere);
    CHECK(!disk::file(host(), p, Access::Read));  // not a disk device
    d.close();
    CHECK_THROWS_AS(Buffer::copy(f, Buffer::create(host(), 8192)), Lost);
  }
}

TEST_CASE("a cap on descriptors closes the least recently used files and reopens them") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    TempDir dir;
    disk::Options o;
    o.max_open_files = 4;
    auto [d, io] = open_disk(e, o);
    std::vector<Buffer> files;
    std::vector<std::vector<std::byte>> models;
    std::mt19937_64 rng(9);
    for (int i = 0; i < 10; ++i) {
      fs::path p = dir.path / ("f" + std::to_string(i));
      models.push_back(random_bytes(rng, 20000 + i * 4096));
      write_file(p, models.back());
      files.push_back(*disk::file(d, p, i % 2 ? Access::Read : Access::ReadWrite));
      CHECK(io->open_descriptors() <= 4);
    }
    for (int round = 0; round < 3; ++round)
      for (int i = 0; i < 10; ++i) {
        Buffer h = Buffer::create(host(), files[i].length());
        Buffer::copy(files[i], h);
        CHECK(std::memcmp(host_bytes(h).data(), models[i].data(), models[i].size()) == 0);
        if (i % 2 == 0) {
          auto bytes = random_bytes(rng, 4096);
          files[i].blit_from(bytes, 8192);
          std::memcpy(models[i].data() + 8192, bytes.data(), 4096);
        }
        CHECK(io->open_descriptors() <= 4);
      }
    for (int i = 0; i < 10; ++i) CHECK(read_file(dir.path / ("f" + std::to_string(i))) == models[i]);
    CHECK(io->stats().evictions > 0);
    CHECK(io->stats().opens > 10);
    // A file closed for the cap and then deleted cannot come back.
    for (int i = 5; i < 10; ++i) {  // touch the others, so file 0 is evicted
      std::byte one[1];
      files[i].blit_to(0, one);
    }
    fs::remove(dir.path / "f0");
    std::byte some[16];
    CHECK_THROWS_WITH_AS(files[0].blit_to(0, some), doctest::Contains("reopen of"), std::system_error);
    files.clear();  // the regions return: their descriptors close
    CHECK(io->open_descriptors() == 0);
    d.close();
  }
}

TEST_CASE("pages map a file, private when read-only and shared when created") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    TempDir dir;
    auto [d, io] = open_disk(e);
    fs::path p = dir / "mapped";
    Buffer f = *disk::create(d, p, 3 * 4096 + 10);
    std::string text = "the quick brown fox";
    f.blit_from(std::as_bytes(std::span(text)), 5000);
    auto r = *f.io(io->region_key());
    auto pages = io->pages(r);
    REQUIRE(pages);
    REQUIRE(pages->size() == 3 * 4096 + 10);
    CHECK(std::memcmp(pages->data() + 5000, text.data(), text.size()) == 0);
    std::memcpy(pages->data() + 100, "XYZ", 3);  // shared: the file sees it
    char back[3];
    f.blit_to(100, std::as_writable_bytes(std::span(back)));
    CHECK(std::string(back, 3) == "XYZ");
    CHECK(io->pages(r)->data() == pages->data());  // mapped once
    io->barrier(r);
    io->prefetch(r, 0, 4096);

    Buffer ro = *disk::file(d, p, Access::Read);
    auto rr = *ro.io(io->region_key());
    auto rop = io->pages(rr);
    REQUIRE(rop);
    CHECK(std::memcmp(rop->data() + 100, "XYZ", 3) == 0);
    CHECK(std::memcmp(rop->data() + 5000, text.data(), text.size()) == 0);

    Buffer empty = *disk::create(d, dir / "empty", 0);
    auto ep = io->pages(*empty.io(io->region_key()));
    REQUIRE(ep);
    CHECK(ep->empty());
    d.close();
  }
}

TEST_CASE("a borrow of a file is its pages: the host and a memory device reach the bytes in place") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    TempDir dir;
    auto [d, io] = open_disk(e);
    std::mt19937_64 rng(7);
    const auto bytes = random_bytes(rng, 3 * 4096 + 10);
    write_file(dir / "in", bytes);
    Buffer f = *disk::file(d, dir / "in", Access::Read);
    auto on_host = Buffer::borrow(host(), f);
    REQUIRE(on_host);
    on_host->read<std::byte>([&](auto got) {
      REQUIRE(got.size() == bytes.size());
      CHECK(std::equal(got.begin(), got.end(), bytes.begin()));
    });
    CHECK_THROWS_WITH_AS(on_host->write<std::byte>([](auto) {}), doctest::Contains("read-only"),
                         std::invalid_argument);
    Device m = memory_device(std::string(e.name) + "-MEM");
    auto on_memory_device = Buffer::borrow(m, f);
    REQUIRE(on_memory_device);
    CHECK(on_memory_device->address() == *on_host->host_address());

    // A created file's pages are shared: a write in place reaches the file.
    Buffer c = *disk::create(d, dir / "out", 8192);
    auto out = *Buffer::borrow(host(), c);
    out.view(4096, 5).write<char>([](auto b) { std::memcpy(b.data(), "hello", 5); });
    io->barrier(*c.io(io->region_key()));
    const auto written = read_file(dir / "out");
    REQUIRE(written.size() == 8192);
    CHECK(std::memcmp(written.data() + 4096, "hello", 5) == 0);
    CHECK(written[0] == std::byte{0});
    m.close();
    d.close();
  }
}

TEST_CASE("alloc makes an anonymous file region") {
  for (const Engine& e : kEngines) {
    CAPTURE(e.name);
    auto [d, io] = open_disk(e);
    const std::size_t n = (1 << 20) + 7;
    Buffer a = Buffer::of_io(d, io->alloc(n), Access::ReadWrite, n);
    std::mt19937_64 rng(11);
    auto bytes = random_bytes(rng, n);
    a.blit_from(bytes, 0);
    std::vector<std::byte> back(n);
    a.blit_to(0, back);
    CHECK(back == bytes);
    CHECK_THROWS_AS(Buffer::create(d, 16), std::invalid_argument);
    d.close();
  }
}
