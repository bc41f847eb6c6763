// Buffer::dma on a real kernel: the host device's dma-buf made by the 6.12 kernel's built-in
// /dev/udmabuf, and (where the program is built with libibverbs) the same memory registered
// with RDMA verbs on soft RoCE (rdma_rxe over the VM's NIC) and written by another queue pair.
// It runs inside the VM that run_vm.py boots; outside one it fails saying what is missing.
#include <rig/rig.hpp>

#include <pci_bus.hpp>

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

#if RIG_VM_VERBS
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdlib>
#include <memory>

namespace {

// The soft-RoCE device the VM's init made over its NIC (rdma link add rxe0 type rxe netdev
// eth0), opened, with a protection domain.
struct Rxe {
  ibv_context* context = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr port{};
  ibv_gid gid{};
  int gid_index = -1;

  Rxe() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    REQUIRE_MESSAGE(list != nullptr, fmt::format("ibv_get_device_list: {}", std::strerror(errno)));
    for (int i = 0; i < n && !context; ++i)
      if (std::string_view(ibv_get_device_name(list[i])) == "rxe0") context = ibv_open_device(list[i]);
    ibv_free_device_list(list);
    REQUIRE_MESSAGE(context != nullptr, "no RDMA device rxe0: the VM's init makes it with rdma_rxe over eth0");
    pd = ibv_alloc_pd(context);
    REQUIRE(pd != nullptr);
    REQUIRE(ibv_query_port(context, 1, &port) == 0);
    REQUIRE_MESSAGE(port.state == IBV_PORT_ACTIVE, "rxe0's port is not active: is eth0 up?");
    // The GID of eth0's IPv4 address (::ffff:a.b.c.d; rxe's GIDs are all RoCE v2): a queue
    // pair reaches its own machine's address through the local route, where the link-local
    // IPv6 GID may still be tentative.
    for (int i = 0; i < port.gid_tbl_len && gid_index < 0; ++i) {
      ibv_gid g{};
      static constexpr std::uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
      if (ibv_query_gid(context, 1, i, &g) == 0 && std::memcmp(g.raw, v4_mapped, 12) == 0) gid = g, gid_index = i;
    }
    REQUIRE_MESSAGE(gid_index >= 0, "rxe0 has no IPv4 GID: eth0 has no IPv4 address");
  }
  ~Rxe() {
    ibv_dealloc_pd(pd);
    ibv_close_device(context);
  }
};

// A reliable-connected queue pair with a completion queue of its own.
struct Pair {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  explicit Pair(Rxe& rxe) {
    cq = ibv_create_cq(rxe.context, 4, nullptr, nullptr, 0);
    REQUIRE(cq != nullptr);
    ibv_qp_init_attr init{};
    init.send_cq = init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 4;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    qp = ibv_create_qp(rxe.pd, &init);
    REQUIRE_MESSAGE(qp != nullptr, fmt::format("ibv_create_qp: {}", std::strerror(errno)));
  }
  ~Pair() {
    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
  }
  // Through INIT, RTR and RTS, connected to queue pair `peer` at the port's own GID.
  void connect(const Rxe& rxe, std::uint32_t peer) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = rxe.port.active_mtu;
    a.dest_qp_num = peer;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = rxe.gid;
    a.ah_attr.grh.sgid_index = std::uint8_t(rxe.gid_index);
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    REQUIRE(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0);
  }
};

}  // namespace

TEST_CASE("the dma-buf's memory, registered on rdma_rxe, takes another queue pair's RDMA write, which rig then reads") {
  Rxe rxe;
  Buffer target = patterned(5);
  edge::Dmabuf buf = dmabuf_of(target);
  Mapped view(buf.fd, kBytes, PROT_READ | PROT_WRITE);
  constexpr int rights = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  // rxe has no ibv_reg_dmabuf_mr: it registers memory by its user mapping, the dma-buf's.
  // Where the kernel will not pin that mapping's pages (a VM_PFNMAP mapping), the buffer's own
  // mapping of the same memfd pages is registered instead.
  ibv_mr* mr = ibv_reg_mr(rxe.pd, view.base, kBytes, rights);
  void* registered = view.base;
  if (!mr) {
    const std::string why = std::strerror(errno);
    MESSAGE((std::string("ibv_reg_mr of the dma-buf's mapping: ") + why + "; registering the buffer's own mapping of its pages"));
    registered = reinterpret_cast<void*>(*target.host_address());
    mr = ibv_reg_mr(rxe.pd, registered, kBytes, rights);
  }
  REQUIRE_MESSAGE(mr != nullptr, fmt::format("ibv_reg_mr: {}", std::strerror(errno)));

  auto* source = static_cast<std::uint8_t*>(std::aligned_alloc(4096, kBytes));
  for (std::size_t i = 0; i < kBytes; ++i) source[i] = pattern(i, 6);
  ibv_mr* source_mr = ibv_reg_mr(rxe.pd, source, kBytes, IBV_ACCESS_LOCAL_WRITE);
  REQUIRE(source_mr != nullptr);

  Pair writer(rxe), reader(rxe);
  writer.connect(rxe, reader.qp->qp_num);
  reader.connect(rxe, writer.qp->qp_num);
  ibv_sge sge{reinterpret_cast<std::uint64_t>(source), std::uint32_t(kBytes), source_mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<std::uint64_t>(registered);
  wr.wr.rdma.rkey = mr->rkey;
  REQUIRE(ibv_post_send(writer.qp, &wr, &bad) == 0);
  // The write is done once its completion arrives; only then may rig's work or reads use it.
  ibv_wc wc{};
  int got = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((got = ibv_poll_cq(writer.cq, 1, &wc)) == 0 && std::chrono::steady_clock::now() < until) {
  }
  REQUIRE_MESSAGE(got == 1, "the RDMA write did not complete");
  REQUIRE_MESSAGE(wc.status == IBV_WC_SUCCESS, ibv_wc_status_str(wc.status));
  std::size_t wrong = 0, through_dmabuf = 0;
  target.read<std::uint8_t>([&](std::span<const std::uint8_t> x) {
    for (std::size_t i = 0; i < x.size(); ++i) wrong += x[i] != pattern(i, 6);
  });
  for (std::size_t i = 0; i < kBytes; ++i) through_dmabuf += view.base[i] != pattern(i, 6);
  CHECK(wrong == 0);
  CHECK(through_dmabuf == 0);

  ibv_dereg_mr(source_mr);
  ibv_dereg_mr(mr);
  std::free(source);
  close(buf.fd);
}
#endif

TEST_CASE("the host device gives the virtio NIC no bus addresses under intel-iommu, naming its translating group") {
  // QEMU's virtio-net-pci (transitional: 1af4:1000), there where the program runs verbs.
  const auto started = std::chrono::steady_clock::now();
  const auto nics = pci::find("/sys/bus/pci", 0x1af4, 0x1000);
  REQUIRE_MESSAGE(!nics.empty(), "no virtio NIC: run_vm.py gives one to programs built with libibverbs");
  // Locked pages whose frames root reads, too big for one udmabuf (64 MiB): only the IOMMU
  // stands between them and bus addresses.
  constexpr std::size_t kBig = std::size_t(96) << 20;  // a size class of its own: the allocation is the buffer
  Buffer big = Buffer::create(host(), kBig);
  std::uint8_t* pages = nullptr;
  big.write<std::uint8_t>([&](std::span<std::uint8_t> x) { pages = x.data(); });
  REQUIRE(mlock(pages, kBig) == 0);
  auto dma = big.dma(nics.front());
  munlock(pages, kBig);
  REQUIRE_FALSE(dma.has_value());
  CHECK(dma.error().find("UDMABUF_CREATE refused it") != std::string::npos);
  CHECK(dma.error().find(fmt::format("no bus addresses: {}'s IOMMU group ", nics.front())) != std::string::npos);
  CHECK(dma.error().find(" translates (type DMA") != std::string::npos);
  CHECK(dma.error().find("not locked") == std::string::npos);
  CHECK(dma.error().find("CAP_SYS_ADMIN") == std::string::npos);
  fmt::print("vm: the host device for {} ({:.0f} ms of the VM's clock): {}\n", nics.front(),
             std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count(), dma.error());
}
