// The DISK io device (rig/disk.hpp): files read and written through io_uring, or pread/pwrite.
#include <rig/disk.hpp>

#include <fmt/format.h>
#include <liburing.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <unordered_map>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

namespace rig::disk {
namespace {

constexpr std::uint64_t kBlock = 4096;    // offsets and lengths of O_DIRECT transfers
constexpr std::uintptr_t kMemAlign = 512; // their memory
constexpr std::size_t kRegisterAtLeast = std::size_t(4) << 20;
constexpr int kMostRings = 8;

int region_key_object = 0;

std::mutex registry_mutex;
std::map<std::string, Disk*, std::less<>>& registry() {
  static auto* r = new std::map<std::string, Disk*, std::less<>>;
  return *r;
}

std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

// A file behind a region.
struct File {
  std::uintptr_t id = 0;
  std::string path;
  Access access = Access::Read;
  bool temp = false;  // anonymous: its descriptors are never closed for the cap
  std::size_t size = 0;
  int fd = -1;        // buffered
  int dfd = -1;       // O_DIRECT
  std::atomic<bool> direct_ok{true};
  int users = 0;
  bool in_lru = false;
  std::list<std::uintptr_t>::iterator lru;
  void* map = nullptr;
  std::size_t map_len = 0;
};

// One piece of a transfer.
struct Op {
  int fd;
  bool direct;
  std::uint64_t off;
  std::byte* p;
  std::size_t n;
};

struct Ring {
  io_uring ring{};
  bool live = false;
  bool broken = false;  // refused a submission: never reused
  ~Ring() {
    if (live) io_uring_queue_exit(&ring);
  }
};

}  // namespace

struct Disk::Impl {
  Options options;
  std::string name;
  bool use_uring = false;
  std::string fallback;

  mutable std::mutex m;
  std::unordered_map<std::uintptr_t, std::shared_ptr<File>> files;
  std::list<std::uintptr_t> lru;  // files with descriptors, most recent first
  std::size_t open_fds = 0;
  std::uintptr_t next = 1;
  bool stopped = false;
  std::string why;

  std::mutex ring_m;
  std::condition_variable ring_cv;
  std::vector<std::unique_ptr<Ring>> idle;
  int rings = 0;

  std::atomic<std::uint64_t> requests{0}, resubmits{0}, direct_bytes{0}, buffered_bytes{0}, registered{0},
      opens{0}, evictions{0}, cache_hits{0};

  std::shared_ptr<File> find(std::uintptr_t id) const {
    auto it = files.find(id);
    if (it == files.end()) throw std::invalid_argument(fmt::format("{}: no region {}", name, id));
    return it->second;
  }

  void close_fds(File& f) {
    if (f.fd >= 0) ::close(f.fd), --open_fds;
    if (f.dfd >= 0) ::close(f.dfd), --open_fds;
    f.fd = f.dfd = -1;
    if (f.in_lru) lru.erase(f.lru), f.in_lru = false;
  }

  // Closes the least recently used files' descriptors until k more fit under the cap.
  void make_room(std::size_t k, const File* keep) {
    auto it = lru.end();
    while (open_fds + k > options.max_open_files && it != lru.begin()) {
      --it;
      auto& f = *files.at(*it);
      if (&f == keep || f.users > 0 || f.temp) continue;
      ++it;  // close_fds erases f's entry, which `it` now follows
      close_fds(f);
      ++evictions;
    }
  }

  int open_flags(const File& f) const { return (f.access == Access::Read ? O_RDONLY : O_RDWR) | O_CLOEXEC; }

  // The file's descriptors, (re)opened under the cap; the caller holds m.
  void ensure(File& f, bool want_direct) {
    if (f.fd < 0) {
      make_room(1, &f);
      int fd = ::open(f.path.c_str(), open_flags(f));
      if (fd < 0) {
        int e = errno;
        throw std::system_error(e, std::generic_category(), fmt::format("{}: reopen of {}", name, f.path));
      }
      f.fd = fd, ++open_fds, ++opens;
    }
    if (want_direct && f.dfd < 0 && f.direct_ok.load()) {
      make_room(1, &f);
      std::string p = f.temp ? fmt::format("/proc/self/fd/{}", f.fd) : f.path;
      int fd = ::open(p.c_str(), open_flags(f) | O_DIRECT);
      if (fd < 0)
        f.direct_ok = false;
      else
        f.dfd = fd, ++open_fds, ++opens;
    }
    if (f.in_lru) lru.erase(f.lru);
    lru.push_front(f.id);
    f.lru = lru.begin();
    f.in_lru = true;
  }

  std::uintptr_t add(std::shared_ptr<File> f) {
    std::uintptr_t id = next++;
    f->id = id;
    files.emplace(id, f);
    if (f->fd >= 0) {
      ++open_fds, ++opens;
      lru.push_front(id);
      f->lru = lru.begin();
      f->in_lru = true;
    }
    return id;
  }

  // A ring of the pool, or null for pread/pwrite.
  std::unique_ptr<Ring> take_ring() {
    if (!use_uring) return nullptr;
    std::unique_lock g(ring_m);
    for (;;) {
      if (!idle.empty()) {
        auto r = std::move(idle.back());
        idle.pop_back();
        return r;
      }
      if (rings < kMostRings) {
        auto r = std::make_unique<Ring>();
        if (io_uring_queue_init(options.queue_depth, &r->ring, 0) < 0) return nullptr;
        r->live = true;
        ++rings;
        return r;
      }
      ring_cv.wait(g);
    }
  }
  void give_ring(std::unique_ptr<Ring> r) {
    if (!r) return;
    std::lock_guard g(ring_m);
    if (r->broken) {
      --rings;
      r.reset();
      ring_cv.notify_one();
      return;
    }
    idle.push_back(std::move(r));
    ring_cv.notify_one();
  }

  // True iff the first and last bytes of [a, b) are in the page cache: a read of them that
  // must not wait (RWF_NOWAIT) moves them all. It reads them into `p`, which the transfer
  // then overwrites with the same bytes.
  static bool cached(int fd, std::uint64_t a, std::uint64_t b, std::byte* p) {
    constexpr std::uint64_t probe = 64 << 10;
    for (std::uint64_t at : {a, b - std::min(probe, b - a)}) {
      std::uint64_t n = std::min(probe, b - at);
      iovec iov{p + (at - a), n};
      if (::preadv2(fd, &iov, 1, off_t(at), RWF_NOWAIT) != ssize_t(n)) return false;
    }
    return true;
  }

  void transfer(edge::IoRegion r, std::uint64_t at, std::byte* p, std::size_t n, bool writing);
  void run_pread(const File& f, std::deque<Op>& ops, bool writing, int buffered_fd);
  void run_uring(Ring& ring, const File& f, std::deque<Op>& ops, bool writing, int buffered_fd, bool fixed);
  [[noreturn]] void fail(const File& f, const Op& op, bool writing, int e);
};

void Disk::Impl::fail(const File& f, const Op& op, bool writing, int e) {
  if (e == 0 && !writing)
    throw std::runtime_error(fmt::format(
        "{}: read of {} bytes at {} from {}: the file ends before them (cut short while in use?)", name, op.n,
        op.off, f.path));
  if (e == 0) e = ENOSPC;  // a write that moved nothing
  std::string what = writing ? fmt::format("{}: write of {} bytes at {} to {}", name, op.n, op.off, f.path)
                             : fmt::format("{}: read of {} bytes at {} from {}", name, op.n, op.off, f.path);
  if (e == ENOSPC) what += " (the disk is full)";
  if (e == EFBIG) what += " (past the largest file allowed)";
  if (e == EBADF && writing) what += " (opened read-only)";
  throw std::system_error(e, std::generic_category(), what);
}

void Disk::Impl::run_pread(const File& f, std::deque<Op>& ops, bool writing, int buffered_fd) {
  while (!ops.empty()) {
    Op op = ops.front();
    ++requests;
    ssize_t got = writing ? ::pwrite(op.fd, op.p, op.n, off_t(op.off)) : ::pread(op.fd, op.p, op.n, off_t(op.off));
    if (got < 0) {
      int e = errno;
      if (e == EINTR || e == EAGAIN) {
        ++resubmits;
        continue;
      }
      if (e == EINVAL && op.direct) {  // the file system refuses this O_DIRECT transfer
        const_cast<File&>(f).direct_ok = false;
        ops.front().fd = buffered_fd, ops.front().direct = false;
        ++resubmits;
        continue;
      }
      fail(f, op, writing, e);
    }
    if (got == 0) fail(f, op, writing, 0);
    if (options.simulate_short && got > 1) got /= 2;
    (op.direct ? direct_bytes : buffered_bytes) += std::uint64_t(got);
    if (std::size_t(got) < op.n) {
      Op& rest = ops.front();
      rest.off += std::uint64_t(got), rest.p += got, rest.n -= std::size_t(got);
      if (rest.direct && (std::uint64_t(got) % kBlock)) rest.fd = buffered_fd, rest.direct = false;
      ++resubmits;
      continue;
    }
    ops.pop_front();
  }
}

void Disk::Impl::run_uring(Ring& ring, const File& f, std::deque<Op>& ops, bool writing, int buffered_fd,
                           bool fixed) {
  unsigned depth = std::max(1u, options.queue_depth);
  std::vector<Op> slots(depth);
  std::vector<unsigned> free_slots;
  for (unsigned i = depth; i-- > 0;) free_slots.push_back(i);
  unsigned inflight = 0;
  int error = -1;  // errno of the first failure (0: the file's end)
  Op failed{};
  while (inflight > 0 || (error < 0 && !ops.empty())) {
    while (error < 0 && !ops.empty() && !free_slots.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring.ring);
      if (!sqe) break;
      Op op = ops.front();
      ops.pop_front();
      unsigned slot = free_slots.back();
      free_slots.pop_back();
      slots[slot] = op;
      if (fixed && op.direct) {
        if (writing)
          io_uring_prep_write_fixed(sqe, op.fd, op.p, unsigned(op.n), op.off, 0);
        else
          io_uring_prep_read_fixed(sqe, op.fd, op.p, unsigned(op.n), op.off, 0);
      } else if (writing) {
        io_uring_prep_write(sqe, op.fd, op.p, unsigned(op.n), op.off);
      } else {
        io_uring_prep_read(sqe, op.fd, op.p, unsigned(op.n), op.off);
      }
      io_uring_sqe_set_data64(sqe, slot);
      ++inflight;
      ++requests;
    }
    if (inflight == 0) break;
    int s = io_uring_submit_and_wait(&ring.ring, 1);
    if (s < 0 && s != -EINTR && s != -EAGAIN && s != -EBUSY) {
      // The ring refuses the submission: drop the ring, whose queue still holds requests.
      ring.broken = true;
      throw std::system_error(-s, std::generic_category(),
                              fmt::format("{}: io_uring submission for {}", name, f.path));
    }
    io_uring_cqe* cqe = nullptr;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring.ring, head, cqe) {
      ++seen;
      unsigned slot = unsigned(io_uring_cqe_get_data64(cqe));
      Op op = slots[slot];
      int res = cqe->res;
      free_slots.push_back(slot);
      --inflight;
      if (res == -EINTR || res == -EAGAIN) {
        ops.push_front(op);
        ++resubmits;
      } else if (res == -EINVAL && op.direct) {
        const_cast<File&>(f).direct_ok = false;
        op.fd = buffered_fd, op.direct = false;
        ops.push_front(op);
        ++resubmits;
      } else if (res <= 0) {
        if (error < 0) error = -res, failed = op;
      } else {
        if (options.simulate_short && res > 1) res /= 2;
        (op.direct ? direct_bytes : buffered_bytes) += std::uint64_t(res);
        if (std::size_t(res) < op.n) {
          op.off += std::uint64_t(res), op.p += res, op.n -= std::size_t(res);
          if (op.direct && (std::uint64_t(res) % kBlock)) op.fd = buffered_fd, op.direct = false;
          ops.push_front(op);
          ++resubmits;
        }
      }
    }
    io_uring_cq_advance(&ring.ring, seen);
  }
  if (error >= 0) fail(f, failed, writing, error);
}

void Disk::Impl::transfer(edge::IoRegion r, std::uint64_t at, std::byte* p, std::size_t n, bool writing) {
  std::shared_ptr<File> f;
  int fd = -1, dfd = -1;
  {
    std::lock_guard g(m);
    if (stopped) throw std::runtime_error(fmt::format("{} stopped: {}", name, why));
    f = find(r.id);
    if (at > f->size || n > f->size - at)
      throw std::out_of_range(fmt::format("{}: {} of {} bytes at {} lies past the end of {} ({} bytes)", name,
                                          writing ? "write" : "read", n, at, f->path, f->size));
    if (n == 0) return;
    bool want_direct = options.direct && n >= kBlock && f->direct_ok.load();
    ensure(*f, want_direct);
    fd = f->fd, dfd = f->dfd;
    ++f->users;
  }
  struct Release {
    Impl* impl;
    File* f;
    ~Release() {
      std::lock_guard g(impl->m);
      --f->users;
    }
  } release{this, f.get()};

  // The O_DIRECT middle: whole blocks, memory on 512 bytes.
  std::uint64_t a = at, b = at;
  if (dfd >= 0 && f->direct_ok.load()) {
    a = (at + kBlock - 1) / kBlock * kBlock;
    b = (at + n) / kBlock * kBlock;
    if (b <= a || (reinterpret_cast<std::uintptr_t>(p + (a - at)) % kMemAlign) != 0) a = b = at;
    if (!writing && b > a && options.probe_cache && cached(fd, a, b, p + (a - at))) a = b = at, ++cache_hits;
  }
  std::deque<Op> ops;
  std::size_t chunk = std::max<std::size_t>(options.chunk_bytes / kBlock * kBlock, kBlock);
  auto add = [&](int use, bool direct, std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t o = from; o < to; o += chunk)
      ops.push_back(Op{use, direct, o, p + (o - at), std::size_t(std::min<std::uint64_t>(chunk, to - o))});
  };
  if (a == b) {
    add(fd, false, at, at + n);
  } else {
    add(fd, false, at, a);
    add(dfd, true, a, b);
    add(fd, false, b, at + n);
  }
  auto ring = take_ring();
  if (!ring) {
    run_pread(*f, ops, writing, fd);
    return;
  }
  struct Back {
    Impl* impl;
    std::unique_ptr<Ring>& ring;
    bool registered = false;
    ~Back() {
      if (registered) io_uring_unregister_buffers(&ring->ring);
      impl->give_ring(std::move(ring));
    }
  } back{this, ring};
  bool fixed = false;
  if (options.register_buffers && b - a >= kRegisterAtLeast) {
    iovec iov{p, n};
    if (io_uring_register_buffers(&ring->ring, &iov, 1) == 0) fixed = back.registered = true, ++registered;
  }
  run_uring(*ring, *f, ops, writing, fd, fixed);
}

Disk::Disk(Options options, std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->name = std::move(name);
  if (impl_->options.max_open_files < 2) impl_->options.max_open_files = 2;
  if (impl_->options.queue_depth < 1) impl_->options.queue_depth = 1;
  if (impl_->options.force_pread) {
    impl_->fallback = "force_pread";
    return;
  }
  auto r = std::make_unique<Ring>();
  int e = io_uring_queue_init(impl_->options.queue_depth, &r->ring, 0);
  if (e < 0) {
    impl_->fallback = fmt::format("io_uring_queue_init: {}", errno_text(-e));
    return;
  }
  r->live = true;
  impl_->use_uring = true;
  impl_->rings = 1;
  impl_->idle.push_back(std::move(r));
}

Disk::~Disk() {
  {
    std::lock_guard g(registry_mutex);
    auto it = registry().find(impl_->name);
    if (it != registry().end() && it->second == this) registry().erase(it);
  }
  std::lock_guard g(impl_->m);
  for (auto& [id, f] : impl_->files) {
    if (f->map) ::munmap(f->map, f->map_len);
    impl_->close_fds(*f);
  }
}

const void* Disk::region_key() const { return &region_key_object; }

edge::IoRegion Disk::alloc(std::size_t n) {
  auto f = std::make_shared<File>();
  f->access = Access::ReadWrite;
  f->temp = true;
  f->size = n;
  f->path = fmt::format("(anonymous file in {})", impl_->options.temp_dir.string());
  std::lock_guard g(impl_->m);
  if (impl_->stopped) throw std::invalid_argument(fmt::format("{} stopped: {}", impl_->name, impl_->why));
  impl_->make_room(1, nullptr);
  int fd = ::open(impl_->options.temp_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::invalid_argument(fmt::format("{}: alloc of {} bytes: O_TMPFILE in {}: {}", impl_->name, n,
                                            impl_->options.temp_dir.string(), errno_text(errno)));
  if (::ftruncate(fd, off_t(n)) != 0) {
    int e = errno;
    ::close(fd);
    throw std::invalid_argument(fmt::format("{}: alloc of {} bytes: {}", impl_->name, n, errno_text(e)));
  }
  f->fd = fd;
  return {impl_->add(f)};
}

void Disk::free(edge::IoRegion r) {
  std::lock_guard g(impl_->m);
  auto it = impl_->files.find(r.id);
  if (it == impl_->files.end()) return;
  auto& f = *it->second;
  if (f.map) ::munmap(f.map, f.map_len), f.map = nullptr;
  impl_->close_fds(f);
  impl_->files.erase(it);
}

void Disk::read(edge::IoRegion r, std::uint64_t at, std::span<std::byte> into) {
  impl_->transfer(r, at, into.data(), into.size(), false);
}

void Disk::write(edge::IoRegion r, std::uint64_t at, std::span<const std::byte> from) {
  impl_->transfer(r, at, const_cast<std::byte*>(from.data()), from.size(), true);
}

std::optional<std::span<std::byte>> Disk::pages(edge::IoRegion r) {
  std::lock_guard g(impl_->m);
  if (impl_->stopped) throw std::runtime_error(fmt::format("{} stopped: {}", impl_->name, impl_->why));
  auto f = impl_->find(r.id);
  if (f->map) return std::span(static_cast<std::byte*>(f->map), f->map_len);
  if (f->size == 0) return std::span<std::byte>();
  impl_->ensure(*f, false);
  bool rw = f->access == Access::ReadWrite;
  void* p = ::mmap(nullptr, f->size, rw ? PROT_READ | PROT_WRITE : PROT_READ, rw ? MAP_SHARED : MAP_PRIVATE, f->fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    throw std::system_error(e, std::generic_category(), fmt::format("{}: mmap of {}", impl_->name, f->path));
  }
  f->map = p, f->map_len = f->size;
  return std::span(static_cast<std::byte*>(p), f->size);
}

void Disk::prefetch(edge::IoRegion r, std::uint64_t at, std::size_t n) {
  std::lock_guard g(impl_->m);
  if (impl_->stopped) return;
  auto f = impl_->find(r.id);
  impl_->ensure(*f, false);
  (void)::posix_fadvise(f->fd, off_t(at), off_t(n), POSIX_FADV_WILLNEED);
}

void Disk::stop(std::string_view why) {
  {
    std::lock_guard g(registry_mutex);
    auto it = registry().find(impl_->name);
    if (it != registry().end() && it->second == this) registry().erase(it);
  }
  std::lock_guard g(impl_->m);
  impl_->stopped = true;
  impl_->why = std::string(why);
  // The pages stay mapped until each region's free: work of other devices that borrowed
  // them may still read them, and rig frees a region only once that work is done.
  for (auto& [id, f] : impl_->files) impl_->close_fds(*f);
}

Result<edge::IoRegion> Disk::open_file(const std::filesystem::path& path, Access access) {
  auto fail = [&](std::string why) -> Result<edge::IoRegion> {
    return std::unexpected(fmt::format("{}: open of {}: {}", impl_->name, path.string(), why));
  };
  std::lock_guard g(impl_->m);
  if (impl_->stopped) return fail("the device stopped: " + impl_->why);
  impl_->make_room(1, nullptr);
  int fd = ::open(path.c_str(), (access == Access::Read ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (fd < 0) return fail(errno_text(errno));
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail("not a regular file");
  }
  auto f = std::make_shared<File>();
  f->path = path.string();
  f->access = access;
  f->size = std::size_t(st.st_size);
  f->fd = fd;
  return edge::IoRegion{impl_->add(f)};
}

Result<edge::IoRegion> Disk::create_file(const std::filesystem::path& path, std::size_t bytes) {
  auto fail = [&](std::string why) -> Result<edge::IoRegion> {
    return std::unexpected(fmt::format("{}: create of {} ({} bytes): {}", impl_->name, path.string(), bytes, why));
  };
  std::lock_guard g(impl_->m);
  if (impl_->stopped) return fail("the device stopped: " + impl_->why);
  impl_->make_room(1, nullptr);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errno_text(errno));
  if (::ftruncate(fd, off_t(bytes)) != 0) {
    int e = errno;
    ::close(fd);
    return fail(errno_text(e));
  }
  auto f = std::make_shared<File>();
  f->path = path.string();
  f->access = Access::ReadWrite;
  f->size = bytes;
  f->fd = fd;
  return edge::IoRegion{impl_->add(f)};
}

void Disk::barrier(edge::IoRegion r) {
  std::shared_ptr<File> f;
  int fd;
  {
    std::lock_guard g(impl_->m);
    if (impl_->stopped) throw std::runtime_error(fmt::format("{} stopped: {}", impl_->name, impl_->why));
    f = impl_->find(r.id);
    impl_->ensure(*f, false);
    fd = f->fd;
    ++f->users;
  }
  int rc;
  do rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  int e = errno;
  {
    std::lock_guard g(impl_->m);
    --f->users;
  }
  if (rc != 0) throw std::system_error(e, std::generic_category(), fmt::format("{}: fsync of {}", impl_->name, f->path));
}

std::size_t Disk::size(edge::IoRegion r) const {
  std::lock_guard g(impl_->m);
  return impl_->find(r.id)->size;
}
std::filesystem::path Disk::path(edge::IoRegion r) const {
  std::lock_guard g(impl_->m);
  return impl_->find(r.id)->path;
}
Access Disk::access(edge::IoRegion r) const {
  std::lock_guard g(impl_->m);
  return impl_->find(r.id)->access;
}
bool Disk::uring() const { return impl_->use_uring; }
std::string Disk::fallback_reason() const { return impl_->fallback; }
std::size_t Disk::open_descriptors() const {
  std::lock_guard g(impl_->m);
  return impl_->open_fds;
}
std::size_t Disk::regions() const {
  std::lock_guard g(impl_->m);
  return impl_->files.size();
}
std::size_t Disk::region_bytes() const {
  std::lock_guard g(impl_->m);
  std::size_t n = 0;
  for (const auto& [id, f] : impl_->files) n += f->size;
  return n;
}
Stats Disk::stats() const {
  return Stats{impl_->requests.load(), impl_->resubmits.load(), impl_->direct_bytes.load(),
               impl_->buffered_bytes.load(), impl_->registered.load(), impl_->opens.load(),
               impl_->evictions.load(), impl_->cache_hits.load()};
}
const Options& Disk::options() const { return impl_->options; }
std::string_view Disk::name() const { return impl_->name; }

edge::IoOpener<Disk> opener(Options options, std::string name) {
  return edge::IoOpener<Disk>{name, [options, name]() -> Result<std::unique_ptr<Disk>> {
                                auto d = std::make_unique<Disk>(options, name);
                                std::lock_guard g(registry_mutex);
                                registry()[name] = d.get();
                                return d;
                              }};
}

Disk* of(const Device& device) {
  std::lock_guard g(registry_mutex);
  auto it = registry().find(device.name());
  return it == registry().end() ? nullptr : it->second;
}

namespace {
Result<Buffer> wrap(const Device& device, Disk& d, Result<edge::IoRegion> r, Access access) {
  if (!r) return std::unexpected(r.error());
  try {
    return Buffer::of_io(device, *r, access, d.size(*r));
  } catch (...) {
    d.free(*r);
    throw;
  }
}
}  // namespace

Result<Buffer> file(const Device& device, const std::filesystem::path& path, Access access) {
  Disk* d = of(device);
  if (!d) return std::unexpected(fmt::format("{} is no open disk device", device.name()));
  return wrap(device, *d, d->open_file(path, access), access);
}

Result<Buffer> create(const Device& device, const std::filesystem::path& path, std::size_t bytes) {
  Disk* d = of(device);
  if (!d) return std::unexpected(fmt::format("{} is no open disk device", device.name()));
  return wrap(device, *d, d->create_file(path, bytes), Access::ReadWrite);
}

}  // namespace rig::disk
