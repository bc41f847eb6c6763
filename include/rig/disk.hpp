// disk.hpp — the DISK io device: files as device memory, read and written through io_uring.
//
// A region of the device is a file's bytes, from its first byte to its length when it
// opened (open_file) or was created (create_file). rig copies to and from it through
// edge::Io::read and edge::Io::write, which this library runs as batches of io_uring
// requests (chunks of Options::chunk_bytes, up to queue_depth in flight per call), O_DIRECT
// for the 4 KiB-aligned middle of a transfer whose memory is 512-aligned (unless a read finds
// its bytes in the page cache), buffered I/O for the rest, and pread/pwrite where io_uring is unavailable or Options::force_pread asks.
// docs/disk.md describes the device, its options and its errors.
#pragma once

#include <rig/edge.hpp>
#include <rig/rig.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace rig::disk {

struct Options {
  bool force_pread = false;           // use pread/pwrite even where io_uring works
  std::size_t max_open_files = 256;   // descriptors held at once (two per file at most)
  unsigned queue_depth = 64;          // requests in flight per read or write call
  std::size_t chunk_bytes = 1 << 20;  // the most bytes of one request
  bool direct = true;                 // O_DIRECT for aligned transfers
  bool register_buffers = true;       // register the memory of large direct transfers
  bool probe_cache = true;            // read through the page cache where it holds the bytes
  std::filesystem::path temp_dir = "/tmp";  // where alloc makes its anonymous files
  bool simulate_short = false;        // tests: count each request as moving half its bytes
};

// What the device did so far.
struct Stats {
  std::uint64_t requests = 0;        // reads and writes handed to the kernel
  std::uint64_t resubmits = 0;       // requests handed again: short, EINTR, EAGAIN
  std::uint64_t direct_bytes = 0;    // bytes moved with O_DIRECT
  std::uint64_t buffered_bytes = 0;  // bytes moved through the page cache
  std::uint64_t registered = 0;      // transfers whose memory was registered with the ring
  std::uint64_t opens = 0;           // descriptors opened, reopens included
  std::uint64_t evictions = 0;       // files whose descriptors were closed for the cap
  std::uint64_t cache_hits = 0;      // reads that found their bytes cached and skipped O_DIRECT
};

class Disk final : public edge::Io {
 public:
  explicit Disk(Options options = {}, std::string name = "DISK");
  ~Disk() override;
  Disk(const Disk&) = delete;
  Disk& operator=(const Disk&) = delete;

  // --- edge::Io ---------------------------------------------------------------------
  const void* region_key() const override;
  // An anonymous file (O_TMPFILE in temp_dir) of n bytes; invalid_argument if it cannot.
  edge::IoRegion alloc(std::size_t n) override;
  void free(edge::IoRegion) override;
  // Raise std::system_error (errno and a message naming the file) for an OS error, such
  // as ENOSPC, EFBIG or EBADF (a write to a file opened read-only), std::runtime_error for
  // a read that meets the file's end (a file cut short), and std::out_of_range for bytes
  // past the region's length.
  void read(edge::IoRegion, std::uint64_t at, std::span<std::byte> into) override;
  void write(edge::IoRegion, std::uint64_t at, std::span<const std::byte> from) override;
  // The file mapped: MAP_PRIVATE and read-only for a region opened Read, MAP_SHARED for
  // one opened ReadWrite or created. Mapped at the first call, until the region is freed.
  // Raises std::system_error if mmap fails. Bytes past a later truncation raise SIGBUS.
  std::optional<std::span<std::byte>> pages(edge::IoRegion) override;
  // posix_fadvise(WILLNEED) over the bytes.
  void prefetch(edge::IoRegion, std::uint64_t at, std::size_t n) override;
  void stop(std::string_view why) override;

  // --- Files ------------------------------------------------------------------------
  // The file at `path`, opened for `access`: Error "disk: open of PATH: reason" if it
  // cannot be opened or is not a regular file.
  Result<edge::IoRegion> open_file(const std::filesystem::path& path, Access access);
  // A new file of `bytes` zero bytes at `path` (replacing one there), opened ReadWrite.
  Result<edge::IoRegion> create_file(const std::filesystem::path& path, std::size_t bytes);
  // fsync: returns once the region's written bytes are on the disk. system_error if not.
  void barrier(edge::IoRegion);

  // The region's length (the file's at open), path and access; invalid_argument if unknown.
  std::size_t size(edge::IoRegion) const;
  std::filesystem::path path(edge::IoRegion) const;
  Access access(edge::IoRegion) const;

  // True iff reads and writes go through io_uring; otherwise why not.
  bool uring() const;
  std::string fallback_reason() const;
  std::size_t open_descriptors() const;
  // The regions made or opened and not freed, and their bytes: what rig has yet to return.
  std::size_t regions() const;
  std::size_t region_bytes() const;
  Stats stats() const;
  const Options& options() const;
  std::string_view name() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// An opener of a DISK device named `name` ("DISK" by default; open several with different
// options under different names).
edge::IoOpener<Disk> opener(Options options = {}, std::string name = "DISK");

// The Disk behind an open disk device, or nullptr where the device is no disk device.
Disk* of(const Device& device);

// A buffer over the whole file at `path` (Buffer::of_io), or Error if `device` is no disk
// device or the file cannot be opened.
Result<Buffer> file(const Device& device, const std::filesystem::path& path, Access access);
// A buffer over a new file of `bytes` bytes at `path`, admitting ReadWrite.
Result<Buffer> create(const Device& device, const std::filesystem::path& path, std::size_t bytes);

}  // namespace rig::disk
