// nv.hpp — rig's own NVIDIA driver over the kernel driver's resource manager (RM) and UVM,
// for rig::open.
//
// A device "NV:i" is the i-th GPU the kernel driver lists (CARD_INFO). Everything the
// driver asks of the operating system goes through the os::Seam it is given: os::system()
// on a machine with the NVIDIA kernel driver, the simulator of tests/sim/nv in the tests.
//
// Opening: the driver opens /dev/nvidiactl, /dev/nvidia<minor> and /dev/nvidia-uvm (twice),
// checks the kernel driver's version (CHECK_VERSION_STR, else the legacy GET_BUILD_VERSION
// control), and makes a client, the device and its subdevice, the usermode page (the
// doorbell), a VA space registered with UVM, a channel group with a compute channel and a
// copy channel (their GPFIFO rings and USERD in video memory, their error notifier), reads
// their work-submit tokens, registers both channels with UVM (UVM_REGISTER_CHANNEL, each with
// a 64 MiB range of the VA space) and schedules the group. The GPU's work addresses memory only
// through UVM external ranges, which gVisor's nvproxy allows.
// make returns Error, naming the device, the reason and what to do, when /dev/nvidiactl or
// /dev/nvidia-uvm is missing, the GPU is not listed, the kernel driver's version is not one
// whose layouts the driver knows (580; the environment variable RIG_NV_DRIVER_VERSION_OK=1
// opens another anyway, for experiments), the GPU offers neither Hopper's classes (arch
// "sm_90") nor Ampere's ("sm_80"), or RM refuses a step (naming the step and RM's status).
//
// The device:
// - Memory: every region is RM memory mapped in the GPU's VA space at an address of the
//   driver's choosing (alignment 4096; not the host's address, host_addresses is false):
//   Device is video memory, Mapped video memory with a CPU mapping, Pinned system memory
//   with a CPU mapping. The budget is the video memory CARD_INFO lists.
//   Regions lie in [2^32, 2^40) of the GPU's VA space. map_host maps page-aligned host memory
//   as OS-descriptor memory at the GPU address that is its own host address (Never for memory
//   inside [2^32, 2^40 + 8 GiB), where the regions and the kernels' shared and local memory
//   windows lie).
// - Queues: "COPY:0" {Copy, Fill}, the copy channel, and "COMPUTE:0" {Words, Fill, Launch},
//   the compute channel. Copy parts copy boxes (rows up to 2^32 - 1 bytes wide and apart) or
//   fill them with a byte on the copy engine; Words parts place their words on the compute
//   channel's push buffer as they are (methods of the host and compute classes, compute bound
//   to subchannel 1). A Fill part's function writes words onto its channel's push buffer
//   through a FillQueue (rig/nv_abi.hpp): at most its ring_units words, or 4096 where it gives 0.
//   Launch parts run a kernel of a loaded image over a grid (below).
//   A part that follows a part of the other queue starts after it (the channels release and
//   acquire 64-bit sequence words). A value's part of each push buffer is at most 512 KiB;
//   room answers NEVER past that, LATER while values in flight hold the room.
// - Completion: Store. Every value ends on the compute channel with a 64-bit semaphore
//   release of v into the timeline word and a non-stall interrupt. submit rings the
//   doorbells itself, so it always commits.
// - Waits: the queues wait (64-bit semaphore acquires) for Store and Host producers whose
//   words lie in rig_words or on the page of the device's own word, which the driver maps for
//   the GPU below 2^40 when it opens; a wait on another word fails the submit.
// - Code: Image::load takes a fatbin (the cubin for the GPU's SM is picked from it) or a cubin
//   of the GPU's SM, and places each kernel's code, the module's constant banks and its globals
//   in video memory of the driver's own, relocated; unloading frees it. Error, naming the
//   device and the reason, for a binary that is neither, a truncated or malformed one, a cubin
//   of another SM, a fatbin without SASS for the GPU's SM (rig does not JIT PTX without
//   libcuda), an unsupported relocation, or no video memory for it. The device goes on.
//   resolve answers a kernel with its parameter bytes (PARAM_CBANK's size) and most threads
//   (MAX_THREADS or REQNTID, else 1024).
// - Launches on COMPUTE:0: constant bank 0 (the driver's slots: block and grid sizes, the
//   memory windows, the stack base, the dynamic shared size, the SM count; then the parameters
//   at the kernel's PARAM_CBANK offset) and a QMD (V04_00 on Hopper, V03_00 on Ampere) are
//   written into a launch ring of 1 MiB that the timeline word reclaims, then SEND_PCAS and a
//   WFI, so that the next part starts after the grid. room answers NEVER, naming the part, the
//   limit and the value, for an empty dimension, a block over 1024x1024x64 or 1024 threads or
//   the kernel's most, a grid over 2^31-1 x 65535 x 65535, shared memory (the kernel's static
//   and the launch's) over the SM's (228 KiB on sm_90, 164 KiB on sm_80), and launches of one
//   value over half the launch ring; LATER while values in flight hold it. A launch alone, of
//   the kernel and geometry of the one before, copies the words built for it and patches the
//   QMD's address and v: it allocates nothing.
// - Times: while a profile is taken, a value's work is stamped by the GPU at its start (on
//   the compute channel, once its waits are met and the values before it are done; a first
//   part on the copy channel starts after it) and at its end (before the release of v), each a
//   semaphore release with RELEASE_TIMESTAMP: the GPU's timer in ns. settle converts them to
//   rig_now_ns with an offset read at open and again each second (TIMER_GET_TIME between two
//   host readings: exact to half that call's span); a value whose stamp slot a later submit
//   takes first gets its times from that submit. settle fails (losing the device) for a stamp
//   the GPU did not write, naming the value.
// - Sleep polls an OS event the compute engine's non-stall interrupt (which ends every value)
//   makes readable. Faults: a channel that stops writes its error notifier and raises the
//   RC-error event; sleep then raises edge::Fault, which loses the device, naming the Xid, the
//   queue, the value it stopped in and, where the channel's entry of that value holds one
//   part, the part ("an MMU fault (Xid 31) in COPY:0, value 12 part 1"). Other devices go on.
// - Hangs: hang_ms from Options (default 10 s); a value that never completes (an acquire of a
//   word nothing raises) loses the device once its word has not moved for hang_ms, with rig's
//   reason "no progress for n ms" (the contract fixes it; the driver's stop gets it).
// - Stopping unregisters the channels from UVM (UVM_UNREGISTER_CHANNEL), tears them down and makes the word show the last submitted value; the
//   regions stay until rig frees them, and with the last of them (or the driver's destruction)
//   every RM object and UVM range the device made is freed and its files are closed.
#pragma once

#include <rig/edge.hpp>
#include <rig/nv_abi.hpp>
#include <rig/os.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace rig::nv {

// A GPU the kernel driver lists.
struct GpuInfo {
  int index = 0;                   // its device name is "NV:<index>"
  std::uint32_t gpu_id = 0;        // RM's id of it
  std::uint32_t minor = 0;         // /dev/nvidia<minor>
  std::uint64_t vram_bytes = 0;    // its video memory
  std::uint16_t pci_device = 0;    // its PCI device id
  std::string bus;                 // its PCI function, "0000:41:00.0"
};
// The GPUs CARD_INFO lists through `seam`, in order; Error if /dev/nvidiactl cannot be opened
// or the ioctl fails.
Result<std::vector<GpuInfo>> gpus(os::Seam& seam = os::system());

// The NVIDIA kernel driver's version ("580.142"), as the driver reads it when it opens a GPU;
// Error if /dev/nvidiactl cannot be opened or neither way of asking answers.
Result<std::string> driver_version(os::Seam& seam = os::system());

// A seam that passes every call to `inner` and notes each: opens, closes, maps, and each ioctl
// with what it is (the RM escape and what it names, or the UVM ioctl) and the answer, RM's or
// UVM's status by name ("ioctl 5 (/dev/nvidiactl) RM_CONTROL 0x20800403 on 0xc1d00002 (8 bytes):
// NV_OK (0x0) -> 0"). Each line is appended to the file at `path` as it is noted (none where
// the file cannot be opened), so a trace survives a crash; lines() gives the last 4096. Polls,
// reads and eventfds pass unnoted. For `rig devices` and the device check (RIG_NV_TRACE).
class TracingSeam final : public os::Seam {
 public:
  TracingSeam(os::Seam& inner, const std::string& path);
  ~TracingSeam() override;
  int open(const char* path, int flags) override;
  int close(int fd) override;
  int ioctl(int fd, unsigned long request, void* arg) override;
  std::expected<void*, int> mmap(void* addr, std::size_t length, int prot, int flags, int fd, off_t offset) override;
  int munmap(void* addr, std::size_t length) override;
  int poll(pollfd* fds, nfds_t count, int timeout_ms) override;
  ssize_t read(int fd, void* buffer, std::size_t n) override;
  int eventfd(unsigned initial, int flags) override;
  std::vector<std::string> lines() const;

 private:
  static constexpr std::size_t kKept = 4096;
  std::string describe(int fd, unsigned long request, const void* arg, int result) const;
  void note(const std::string& line);
  os::Seam& inner_;
  int out_;
  mutable std::mutex lock_;
  std::map<int, std::string> paths_;
  std::vector<std::string> lines_;
};

struct Options {
  std::optional<int> hang_ms = 10'000;  // the facts' hang_ms
};

// An opener of "NV:<index>", talking to the kernel driver through `seam`.
edge::Opener<> opener(int index, os::Seam& seam = os::system(), Options options = {});

// The RM handles of a device an opener of this file made, for reading what its GPU sees (the
// simulator's read_gpu takes them): its client and its VA space. Error if `driver` is another
// driver's or closed.
struct Objects {
  std::uint32_t client = 0, vaspace = 0;
};
Result<Objects> objects_of(edge::Driver& driver);

// What a device an opener of this file made has written on COMPUTE:0, for the submit bench's
// floor (bench/nv_submit.cpp), which copies the same bytes: the push buffer and the launch
// ring (their CPU mappings and sizes), and the bytes ever taken of each, those skipped at
// their ends included. Error if `driver` is another driver's or closed.
struct ComputeRings {
  const std::byte* push = nullptr;
  std::uint64_t push_bytes = 0, push_taken = 0;
  const std::byte* launches = nullptr;  // null until a kernel is resolved
  std::uint64_t launch_bytes = 0, launch_taken = 0;
};
Result<ComputeRings> compute_rings_of(edge::Driver& driver);

}  // namespace rig::nv
