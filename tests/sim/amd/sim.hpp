// sim.hpp — an AMD GPU simulated at the OS seam: a fake /dev/kfd, render node and KFD
// topology, implementing the kernel interface of linux/kfd_ioctl.h in process.
//
// Pass a Simulator as the os::Seam of rig::amd::opener and the AMD driver runs unchanged on
// it. The simulator:
// - lists one GPU (Config::arch, gfx1100 by default) after a CPU node in the topology, with
//   Config::vram_bytes of frame buffer, in sysfs files read through the seam; a gfx9 GPU
//   (gfx90a, gfx942) as KFD's kfd_topology.c prints one: 4 SIMDs per CU, wave64, num_xcc
//   Config::xccs, and its command processor reads gfx9's PM4 (ACQUIRE_MEM, cache actions);
// - implements the KFD ioctls the driver issues (version, ACQUIRE_VM, apertures, alloc/map/
//   unmap/free of VRAM, GTT and userptr memory, queues, events, clock counters), checking
//   each argument as the kernel does and answering -errno otherwise; "device memory" is host
//   memory (memfd), mapped for the process at the address the driver asks for;
// - runs each queue on its own thread, as hardware does: a command processor (on a GPU of
//   several XCCs, that of the XCC the queue's queue_percentage bits 8..15 name; queues of
//   several XCCs over one ring each read all of it) that decodes PM4
//   (tests/sim/amd/decode.hpp) and an SDMA engine that decodes SDMA packets, from the
//   ring up to the doorbell's write pointer, validating every field and faulting the queue
//   (a KFD hardware-exception event) on anything malformed; GPU addresses outside mapped
//   memory fault the queue with a KFD memory event naming the address;
// - keeps a 100 MHz GPU clock (RELEASE_MEM/COPY_DATA/SDMA timestamps, clock counters);
// - signals KFD events on RELEASE_MEM and SDMA TRAP interrupts, for sleepers;
// - runs dispatches on a gfx11 (RDNA3, wave32) interpreter, or on gfx9 GPUs on the CDNA
//   (wave64) interpreter of gfx9.hpp, one wave at a time.
// Faults are also kept as text (faults()) for tests. Other paths and anonymous mappings go to
// the real system (os::system()).
#pragma once

#include <rig/os.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace rig::sim::amd {

struct Config {
  std::string arch = "gfx1100";            // the GPU's processor: gfx11 runs dispatches
  std::uint64_t vram_bytes = 256ull << 20;  // frame buffer the topology lists and alloc gives
  std::uint32_t compute_units = 4;          // simd_count is this times simd_per_cu (2 on gfx11, 4 on gfx9)
  std::uint32_t xccs = 1;                   // num_xcc: the compute dies (XCCs) of the GPU
  std::uint32_t gpu_id = 0x5a5a;            // KFD's id of the GPU
  std::uint32_t render_minor = 128;         // /dev/dri/renderD<minor>
  bool gpu_present = true;                  // false: the topology lists only the CPU node
  std::uint32_t kfd_minor = 12;             // AMDKFD_IOC_GET_VERSION's minor: 12 and on export dma-bufs

  // Parts as the topology lists them (AMD's CDNA2/CDNA3 data sheets; KFD's num_xcc is the
  // XCC count in SPX mode): MI300X is gfx942 with 304 CUs on 8 XCCs, MI300A gfx942 with 228
  // CUs on 6 XCCs, and one GCD of MI250X gfx90a with 110 CUs on one.
  static Config mi300x() { return {.arch = "gfx942", .compute_units = 304, .xccs = 8}; }
  static Config mi300a() { return {.arch = "gfx942", .compute_units = 228, .xccs = 6}; }
  static Config mi250x() { return {.arch = "gfx90a", .compute_units = 110, .xccs = 1}; }
};

class Simulator final : public os::Seam {
 public:
  explicit Simulator(Config config = {});
  ~Simulator() override;
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  int open(const char* path, int flags) override;
  int close(int fd) override;
  int ioctl(int fd, unsigned long request, void* arg) override;
  std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags, int fd,
                                 off_t offset) override;
  int munmap(void* addr, std::size_t length) override;
  int poll(pollfd* fds, nfds_t count, int timeout_ms) override;
  ssize_t read(int fd, void* buffer, std::size_t n) override;
  int eventfd(unsigned initial, int flags) override;

  // ---- For tests.
  const Config& config() const;
  // Every queue fault so far, as text: "COMPUTE queue 1: PM4 RELEASE_MEM: data_sel 7 ...".
  std::vector<std::string> faults() const;
  // The 100 MHz GPU clock now.
  std::uint64_t clock() const;
  // Buffers allocated and not freed, queues and events alive, open descriptors.
  std::size_t live_buffers() const;
  std::size_t live_queues() const;
  // The XCCs the live compute queues run on, in the order they were created.
  std::vector<std::uint32_t> compute_queue_xccs() const;
  // RELEASE_MEM stores (of data or a clock) to `address` so far, by every engine.
  std::uint64_t stores_to(std::uint64_t address) const;
  std::size_t live_events() const;
  std::size_t live_doorbell_maps() const;  // mappings of the doorbell page not unmapped
  std::size_t open_files() const;
  // Dispatches run and instructions interpreted so far; packets decoded per engine.
  std::uint64_t dispatches() const;
  std::uint64_t instructions() const;
  std::uint64_t pm4_packets() const;
  std::uint64_t sdma_packets() const;
  // While held, the engines take no new packets and read nothing, their doorbells included
  // (a queue that stops making progress), and sleep. hold(true) returns once every engine
  // has finished the packet it was in, or after a second of one that does not.
  void hold(bool held);
  // Dma-bufs AMDKFD_IOC_EXPORT_DMABUF made so far.
  std::size_t dmabuf_exports() const;
  // Fails the next call of ioctl `request` with `negative_errno` (once).
  void fail_next_ioctl(unsigned long request, int negative_errno);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace rig::sim::amd
