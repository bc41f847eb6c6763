// Buffer::dma on a real kernel: the host device's dma-buf made by the 6.12 kernel's built-in
// /dev/udmabuf, and (where the program is built with libibverbs) the same memory registered
// with RDMA verbs on soft RoCE (rdma_rxe over the VM's NIC) and written by another queue pair.
// It runs inside the VM that run_vm.py boots; outside one it fails saying what is missing.
#include <rig/rig.hpp>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstring>
#include <string>
#include <variant>

#include <sys/mman.h>
#include <unistd.h>

using namespace rig;

namespace {

constexpr std::size_t kBytes = std::size_t(1) << 20;

// The byte a pattern puts at `i`, different for each `seed`.
std::uint8_t pattern(std::size_t i, unsigned seed) { return std::uint8_t((i * 131 + seed * 7 + (i >> 9)) & 0xff); }

// A host buffer of kBytes holding pattern(seed).
Buffer patterned(unsigned seed) {
  Buffer b = Buffer::create(host(), kBytes);
  b.write<std::uint8_t>([&](std::span<std::uint8_t> x) {
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = pattern(i, seed);
  });
  return b;
}

// b's dma-buf: its descriptor and offset (REQUIREs that the host device gave one).
edge::Dmabuf dmabuf_of(const Buffer& b) {
  REQUIRE_MESSAGE(access("/dev/udmabuf", R_OK | W_OK) == 0,
                  "no /dev/udmabuf: this program runs inside the VM of tests/vm/run_vm.py (kernel 6.12)");
  auto dma = b.dma("0000:00:02.0");
  REQUIRE_MESSAGE(dma.has_value(), (dma ? std::string() : dma.error()));
  REQUIRE(std::holds_alternative<edge::Dmabuf>(*dma));
  return std::get<edge::Dmabuf>(*dma);
}

// A mapping of a dma-buf's pages.
struct Mapped {
  Mapped(int fd, std::size_t bytes, int prot) : bytes(bytes) {
    void* p = mmap(nullptr, bytes, prot, MAP_SHARED, fd, 0);
    REQUIRE_MESSAGE(p != MAP_FAILED, fmt::format("mmap of the dma-buf: {}", std::strerror(errno)));
    base = static_cast<std::uint8_t*>(p);
  }
  ~Mapped() { munmap(base, bytes); }
  std::size_t bytes;
  std::uint8_t* base = nullptr;
};

}  // namespace

TEST_CASE("a host buffer's dma-buf from /dev/udmabuf maps and reads back byte for byte") {
  Buffer b = patterned(1);
  edge::Dmabuf buf = dmabuf_of(b.view(4096, 64));  // a view's answer is its whole allocation's
  CHECK(buf.offset == 0);
  CHECK(lseek(buf.fd, 0, SEEK_END) == off_t(kBytes));
  {
    Mapped view(buf.fd, kBytes, PROT_READ);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < kBytes; ++i) wrong += view.base[i] != pattern(i, 1);
    CHECK(wrong == 0);
  }
  close(buf.fd);
}

TEST_CASE("bytes written through the dma-buf are the buffer's once the writes are done") {
  Buffer b = patterned(2);
  edge::Dmabuf buf = dmabuf_of(b);
  {
    Mapped view(buf.fd, kBytes, PROT_READ | PROT_WRITE);
    for (std::size_t i = 0; i < kBytes; ++i) view.base[i] = pattern(i, 3);
  }
  close(buf.fd);
  // The writer is done (its mapping is gone): rig reads its bytes, not the old ones.
  std::size_t wrong = 0;
  b.read<std::uint8_t>([&](std::span<const std::uint8_t> x) {
    for (std::size_t i = 0; i < x.size(); ++i) wrong += x[i] != pattern(i, 3);
  });
  CHECK(wrong == 0);
}

TEST_CASE("the dma-buf keeps the memory after the buffer is gone") {
  int fd = -1;
  {
    Buffer b = patterned(4);
    fd = dmabuf_of(b).fd;
  }
  host().free_cache();
  Mapped view(fd, kBytes, PROT_READ);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kBytes; ++i) wrong += view.base[i] != pattern(i, 4);
  CHECK(wrong == 0);
  close(fd);
}
