// amd.hpp — rig's AMD driver over the KFD (/dev/kfd and a render node), for rig::open.
//
// A device "AMD:i" is the i-th GPU node of the KFD topology. Everything the driver asks of
// the operating system goes through the os::Seam it is given: os::system() on a machine with
// an AMD GPU, the simulator of tests/sim/amd in the tests.
//
// The device:
// - Memory: every region is one KFD buffer that the host and the GPU address at the same
//   address (host_addresses, alignment 4096): Device and Mapped memory are host-visible VRAM
//   (which needs a resizable BAR on real hardware), Pinned memory is GTT. map_host maps
//   page-aligned host memory as a userptr at its own address; a range the process's other
//   devices on the GPU map already (rig_words, the same host memory) is shared with them,
//   since the GPU's VM takes it once. map_peer maps nothing yet.
//   The budget is the VRAM the topology lists.
// - Queues: "COMPUTE:0" {Words, Fill, Launch}, a PM4 compute queue, and "COPY:0" {Words,
//   Copy, Fill}, an SDMA queue and the copy engine. Words and fills give packets of the
//   queue's own format (rig/amd_abi.hpp). A part that follows a part of the other queue
//   waits for it in the queue (32-bit sequence words each queue writes). A submission has
//   at most 64 parts, and room answers NEVER (never GROW) for what the rings cannot hold.
// - Completion: Store. Each value ends on the compute queue with a RELEASE_MEM that writes
//   the timeline word at end of pipe, then one that raises an interrupt for sleepers.
//   submit rings the doorbells itself, so it always commits (k = 1).
// - Waits: the queues wait for Store and Host producers whose words lie in rig_words
//   (WAIT_REG_MEM64 >= value); rig_words is mapped for the GPU when the device opens.
// - Code: code objects (HSA ELF shared objects) for the device's processor, placed in the
//   device's memory (edge::Place); a function's code value is its kernel descriptor's
//   address. A code object for another processor, or with a kernel the processor cannot run
//   (wave32 on gfx9, wave64 on gfx10+, LDS or scratch past its limits), is an Error at load
//   naming the reason and the kernel. Launches pass parameters as the kernel's explicit arguments and fill its hidden
//   ones (block counts, group sizes, grid dims, dynamic LDS size; others zero).
// - Hangs: hang_ms from Options (default 10 s). Faults: a GPU page fault or a hardware
//   exception that KFD reports loses the device, naming the address and the queue's packet.
// - Profiles: timed values are stamped with the GPU clock (assumed 100 MHz) at start and end
//   and converted in settle against AMDKFD_IOC_GET_CLOCK_COUNTERS. No counters (measures
//   is NULL).
// make opens a new device handle even while an earlier one is not stopped.
#pragma once

#include <rig/edge.hpp>
#include <rig/os.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rig::amd {

struct Options {
  std::optional<int> hang_ms = 10'000;       // the facts' hang_ms
  std::uint32_t compute_ring_bytes = 256 << 10;  // power of two, at least 4 KiB
  std::uint32_t copy_ring_bytes = 64 << 10;      // power of two, at least 4 KiB
  std::uint32_t kernarg_bytes = 1 << 20;         // the ring of kernel arguments
  // The internal 32-bit sequence words are reset (with the queues idle) before reaching this.
  std::uint32_t sequence_limit = 1u << 30;
};

// A GPU the KFD topology lists.
struct GpuInfo {
  int index = 0;            // its device name is "AMD:<index>"
  std::string arch;         // "gfx1100"
  std::uint32_t gpu_id = 0;
  std::uint64_t vram_bytes = 0;
  std::optional<std::string> bus;
  std::uint64_t compute_units = 0;  // simd_count / simd_per_cu
  std::uint32_t xccs = 1;           // num_xcc: the compute dies (8 on MI300X, 6 on MI300A)
};

// The GPUs of the topology read through `seam`, in order; Error if there is no KFD topology.
Result<std::vector<GpuInfo>> gpus(os::Seam& seam = os::system());

// An opener of "AMD:<index>". Its make returns Error when the GPU is missing, KFD refuses
// it, or its processor is not one the driver builds packets for (gfx90a, gfx942, gfx11 and
// gfx12). On a GPU of several XCCs (gfx942 in SPX mode) the device's compute queue is a PM4
// queue per XCC over one ring: a launch's grid is shared among every XCC, and the timeline
// word is stored once per value, after every XCC's share (docs/amd.md, "Several XCCs").
// invalid_argument if an Options size is not a power of two of at least 4 KiB.
edge::Opener<> opener(int index, os::Seam& seam = os::system(), Options options = {});

// A queue's ring as the driver writes it, for measuring what submissions write: `dwords`
// dwords at `words`, of which the driver has written `written` in all (the next one goes to
// words[written % dwords]; SDMA's are counted in dwords too).
// With it, the kernel-argument area launches write: `kernarg_bytes` bytes at `kernargs`,
// of which launches have taken `kernargs_taken` in all (a launch's arguments that would
// straddle its end start again at its start, the bytes skipped counted as taken).
struct RingView {
  const std::uint32_t* words = nullptr;
  std::uint64_t dwords = 0;
  std::uint64_t written = 0;
  const std::byte* kernargs = nullptr;
  std::uint64_t kernarg_bytes = 0, kernargs_taken = 0;
};
// The ring of queue `queue` (0: COMPUTE:0, 1: COPY:0) of `driver`, which an opener of this
// file made; read it between the driver's calls. Error if `driver` is another driver's or
// it has no such queue.
Result<RingView> ring_of(edge::Driver& driver, int queue);

}  // namespace rig::amd
