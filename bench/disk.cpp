// `rig bench disk`: a file read into host memory through the DISK io device, cold and warm,
// and written with a barrier, each beside fio (io_uring, O_DIRECT) on the same file in the
// same run. 1 GiB, or 256 MiB with --repeats 1.
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "../disk/disk.hpp"
#include "bench.hpp"

namespace rig::bench {

std::vector<Figure> disk(const Options& o);

namespace {

// Drops the file's pages from the page cache (after writing back its dirty ones).
void drop_pages(const std::filesystem::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

// Reads the file once through the page cache, so its pages are resident.
void warm_pages(const std::filesystem::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::vector<char> chunk(std::size_t(4) << 20);
  while (::read(fd, chunk.data(), chunk.size()) > 0) {
  }
  ::close(fd);
}

Spread spread(std::vector<double> rates) {
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], rates.front(), rates.back()};
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// fio's bandwidth in GB/s for `rw` ("read" or "write") over the file, or the reason it has none.
struct Fio {
  std::optional<double> gbps;
  std::string why;
};
Fio fio(const std::filesystem::path& p, std::size_t bytes, const char* rw) {
  std::string cmd = fmt::format(
      "fio --name=rig-floor --filename='{}' --rw={} --bs=1M --iodepth=64 --ioengine=io_uring --direct=1 "
      "--size={} {} --output-format=json 2>&1",
      p.string(), rw, bytes, std::strcmp(rw, "write") == 0 ? "--end_fsync=1" : "");
  if (std::system("command -v fio >/dev/null 2>&1") != 0) return {std::nullopt, "fio is not installed (apt-get install fio)"};
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return {std::nullopt, "popen of fio failed"};
  std::string out;
  char buf[4096];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, got);
  int rc = ::pclose(f);
  if (rc != 0) return {std::nullopt, fmt::format("fio failed: {}", out.substr(0, 200))};
  // The job's section for rw, then its bw_bytes (bytes per second).
  auto section = out.find(fmt::format("\"{}\" : {{", rw));
  if (section == std::string::npos) return {std::nullopt, "fio printed no " + std::string(rw) + " section"};
  auto at = out.find("\"bw_bytes\"", section);
  if (at == std::string::npos) return {std::nullopt, "fio printed no bw_bytes"};
  at = out.find(':', at);
  double bw = std::strtod(out.c_str() + at + 1, nullptr);
  if (bw <= 0) return {std::nullopt, "fio reported no bandwidth"};
  return {bw / 1e9, ""};
}

Figure figure(std::string name, Spread rig, const Fio& floor, std::string floor_name, std::string note) {
  Spread f{floor.gbps.value_or(0), floor.gbps.value_or(0), floor.gbps.value_or(0)};
  Figure out = make_figure(std::move(name), rig, "GB/s", f, floor.gbps ? std::move(floor_name) : "unavailable: " + floor.why,
                           std::move(note));
  out.ratio = out.floor > 0 ? out.value / out.floor : 0;  // a fraction of fio's rate
  return out;
}

}  // namespace

std::vector<Figure> disk(const Options& o) {
  const std::size_t bytes = o.repeats <= 1 ? std::size_t(256) << 20 : std::size_t(1) << 30;
  const int repeats = std::clamp(o.repeats, 1, 3);
  char name[] = "/tmp/rig-bench-disk-XXXXXX";
  if (!::mkdtemp(name)) throw std::runtime_error("rig bench disk: mkdtemp in /tmp failed");
  std::filesystem::path dir = name, path = dir / "data";
  struct Remove {
    std::filesystem::path dir;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove{dir};

  Device d = *open_io(rig::disk::opener({}, "BENCH-DISK"));
  rig::disk::Disk* io = rig::disk::of(d);
  Buffer h = Buffer::create(host(), bytes);
  std::memset(reinterpret_cast<void*>(*h.host_address()), 0x3C, bytes);
  std::string engine = io->uring() ? "io_uring" : "pread (" + io->fallback_reason() + ")";
  std::vector<Figure> out;

  // Writes: a new file each time, the host's bytes into it, then a barrier.
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    Buffer f = *rig::disk::create(d, path, bytes);
    Buffer::copy(h, f);
    io->barrier(*f.io(io->region_key()));
    rates.push_back(double(bytes) / seconds_since(t0) / 1e9);
  }
  Spread write = spread(rates);
  Fio fio_write = fio(path, bytes, "write");

  Buffer f = *rig::disk::file(d, path, Access::Read);
  rates.clear();
  for (int r = 0; r < repeats; ++r) {
    drop_pages(path);
    auto t0 = std::chrono::steady_clock::now();
    Buffer::copy(f, h);
    rates.push_back(double(bytes) / seconds_since(t0) / 1e9);
  }
  Spread cold = spread(rates);
  drop_pages(path);
  Fio fio_read = fio(path, bytes, "read");

  warm_pages(path);
  rates.clear();
  for (int r = 0; r < repeats; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    Buffer::copy(f, h);
    rates.push_back(double(bytes) / seconds_since(t0) / 1e9);
  }
  Spread warm = spread(rates);

  std::string mib = fmt::format("{} MiB", bytes >> 20);
  std::string fio_name = "fio io_uring O_DIRECT, bs 1M, iodepth 64, same file";
  out.push_back(figure("disk-read-cold", cold, fio_read, fio_name,
                       fmt::format("Buffer::copy of a {} file into host memory, its pages dropped first ({})", mib, engine)));
  out.push_back(figure("disk-read-warm", warm, fio_read, fio_name + " (cold: O_DIRECT skips the cache)",
                       fmt::format("Buffer::copy of a {} file into host memory, its pages resident ({})", mib, engine)));
  out.push_back(figure("disk-write", write, fio_write, fio_name + ", end_fsync (its bandwidth excludes the fsync)",
                       fmt::format("create_file, Buffer::copy of {} from host memory, barrier ({})", mib, engine)));
  d.close();
  return out;
}

}  // namespace rig::bench
