// `rig bench disk`: a file read into host memory through the DISK io device, cold (its
// pages dropped with posix_fadvise) and warm (its pages resident), and written over with a
// barrier, each beside fio (io_uring, O_DIRECT) on the same file in the same run, the two
// taking turns in each repetition. 1 GiB, or RIG_BENCH_DISK_BYTES; the file lies in
// $TMPDIR (default /tmp). Where fio is missing or fails, the floors say why and rig's
// figures are still given.
#include <rig/rig.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include <rig/disk.hpp>
#include "bench.hpp"

namespace rig::bench {
namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// fio on one file: its rates for each state measured, or why it has none.
class Fio {
 public:
  Fio(std::filesystem::path file, std::filesystem::path errors, std::size_t bytes)
      : file_(std::move(file)), errors_(std::move(errors)), bytes_(bytes) {
    installed_ = std::system("command -v fio >/dev/null 2>&1") == 0;
    if (!installed_) why_ = "fio is not installed (apt-get install fio)";
  }

  // fio's bandwidth in GB/s for `rw` ("read" or "write") over the whole file, with its
  // bandwidth as fio reports it (for a write, its time includes the final fsync); nullopt,
  // with the reason kept, if it has none.
  std::optional<double> run(const char* rw) {
    if (!installed_) return std::nullopt;
    const bool write = std::strcmp(rw, "write") == 0;
    std::string cmd = fmt::format(
        "fio --name=rig-floor --filename='{}' --rw={} --bs=1M --iodepth=64 --ioengine=io_uring --direct=1 "
        "--size={} {}--output-format=json 2>'{}'",
        file_.string(), rw, bytes_, write ? "--end_fsync=1 " : "", errors_.string());
    FILE* f = ::popen(cmd.c_str(), "r");
    if (!f) return fail("popen of fio failed");
    std::string out;
    char buf[4096];
    std::size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, got);
    const int rc = ::pclose(f);
    if (rc != 0) {
      std::ifstream in(errors_);
      std::stringstream err;
      err << in.rdbuf();
      std::string text = err.str().empty() ? out : err.str();
      text = text.substr(0, text.find('\n'));
      return fail(fmt::format("fio failed (status {}): {}", rc, text.substr(0, 200)));
    }
    // The job's section for rw, then its bw_bytes (bytes per second).
    const auto section = out.find(fmt::format("\"{}\" : {{", rw));
    if (section == std::string::npos) return fail(fmt::format("fio printed no {} section", rw));
    auto at = out.find("\"bw_bytes\"", section);
    if (at == std::string::npos) return fail("fio printed no bw_bytes");
    at = out.find(':', at);
    const double bw = std::strtod(out.c_str() + at + 1, nullptr);
    if (bw <= 0) return fail("fio reported no bandwidth");
    return bw / 1e9;
  }

  // Why a run gave no rate; empty if every run gave one.
  const std::string& why() const { return why_; }

 private:
  std::optional<double> fail(std::string why) {
    why_ = std::move(why);
    return std::nullopt;
  }

  std::filesystem::path file_, errors_;
  std::size_t bytes_;
  bool installed_ = false;
  std::string why_;
};

// A rate figure: rig's beside fio's, the ratio a fraction of fio's rate.
Figure figure(std::string name, const std::vector<double>& rig, const std::vector<double>& fio, const Fio& runner,
              std::string floor_name, std::string note) {
  if (fio.empty()) floor_name = "unavailable: " + runner.why();
  return make_figure(std::move(name), spread_of(rig), "GB/s", spread_of(fio), std::move(floor_name), std::move(note));
}

}  // namespace

std::size_t disk_bytes() {
  const char* text = std::getenv("RIG_BENCH_DISK_BYTES");
  if (!text || !*text) return std::size_t(1) << 30;
  const std::string s = text;
  std::size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  std::size_t unit = 1;
  const std::string suffix = s.substr(digits);
  if (suffix == "K" || suffix == "k") unit = std::size_t(1) << 10;
  else if (suffix == "M" || suffix == "m") unit = kMiB;
  else if (suffix == "G" || suffix == "g") unit = std::size_t(1) << 30;
  else if (!suffix.empty()) digits = 0;
  const std::size_t count = digits == 0 || digits > 12 ? 0 : std::stoull(s.substr(0, digits));
  const std::size_t bytes = count * unit;
  if (bytes < kMiB || bytes % kMiB != 0)
    throw std::invalid_argument(fmt::format(
        "RIG_BENCH_DISK_BYTES={}: the disk bench takes a whole number of MiB, at least 1 MiB (bytes, or with a "
        "suffix K, M or G: \"16M\")",
        s));
  return bytes;
}

std::vector<Figure> disk(const Options& o) {
  const std::size_t bytes = disk_bytes();
  const int repeats = std::clamp(o.repeats, 1, 3);
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = (std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / "rig-bench-disk-XXXXXX").string();
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error(fmt::format("rig bench disk: mkdtemp {} failed: {}", pattern, std::strerror(errno)));
  const std::filesystem::path dir = pattern, path = dir / "data";
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
  const std::string engine = io->uring() ? "io_uring" : "pread (" + io->fallback_reason() + ")";
  Fio fio(path, dir / "fio.err", bytes);

  // The file, made and written once, untimed.
  {
    Buffer f = *rig::disk::create(d, path, bytes);
    Buffer::copy(h, f);
    io->barrier(*f.io(io->region_key()));
  }

  // Writes over the file's bytes from host memory, then a barrier; fio writes over them
  // too, with an fsync at its end.
  std::vector<double> rig_write, fio_write;
  {
    Buffer f = *rig::disk::file(d, path, Access::ReadWrite);
    for (int r = 0; r < repeats; ++r) {
      drop_pages(path);
      auto t0 = std::chrono::steady_clock::now();
      Buffer::copy(h, f);
      io->barrier(*f.io(io->region_key()));
      rig_write.push_back(double(bytes) / seconds_since(t0) / 1e9);
      drop_pages(path);
      if (auto rate = fio.run("write")) fio_write.push_back(*rate);
    }
  }

  // Reads of the whole file into host memory, its pages dropped first, then resident.
  std::vector<double> rig_cold, fio_cold, rig_warm, fio_warm;
  Buffer f = *rig::disk::file(d, path, Access::Read);
  for (int r = 0; r < repeats; ++r) {
    drop_pages(path);
    auto t0 = std::chrono::steady_clock::now();
    Buffer::copy(f, h);
    rig_cold.push_back(double(bytes) / seconds_since(t0) / 1e9);
    drop_pages(path);
    if (auto rate = fio.run("read")) fio_cold.push_back(*rate);
  }
  for (int r = 0; r < repeats; ++r) {
    warm_pages(path);
    auto t0 = std::chrono::steady_clock::now();
    Buffer::copy(f, h);
    rig_warm.push_back(double(bytes) / seconds_since(t0) / 1e9);
    warm_pages(path);
    if (auto rate = fio.run("read")) fio_warm.push_back(*rate);
  }

  const std::string size = fmt::format("{} MiB", bytes / kMiB);
  const std::string fio_name = "fio io_uring O_DIRECT, bs 1M, iodepth 64, same file";
  std::vector<Figure> out;
  out.push_back(figure("disk-read-cold", rig_cold, fio_cold, fio, fio_name + ", pages dropped",
                       fmt::format("Buffer::copy of a {} file into host memory, its pages dropped first ({})", size,
                                   engine)));
  out.push_back(figure("disk-read-warm", rig_warm, fio_warm, fio,
                       fio_name + ", pages resident (O_DIRECT reads the disk all the same)",
                       fmt::format("Buffer::copy of a {} file into host memory, its pages resident ({})", size,
                                   engine)));
  out.push_back(figure("disk-write", rig_write, fio_write, fio, fio_name + ", end_fsync (timed in its bandwidth)",
                       fmt::format("Buffer::copy of {} from host memory over the file's bytes, then a barrier "
                                   "(fsync) ({})",
                                   size, engine)));
  d.close();
  return out;
}

}  // namespace rig::bench
