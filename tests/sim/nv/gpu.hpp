// gpu.hpp — what the simulated NVIDIA GPU's engines see of the resource manager's world, and
// what the resource manager (sim.cpp) hands each engine.
//
// The simulator has two halves that meet here. The resource-manager half (sim.hpp) owns
// clients, memory, VA spaces, channels and OS events, as the kernel driver does. The engine
// half (engine.hpp) is one GPFIFO engine per channel, on a thread of its own as a PBDMA and
// its engine are on hardware: it reads the channel's ring and executes what it finds, seeing
// the GPU's memory only through a Space and reporting only through a Channel_setup's hooks.
#pragma once

#include <ptx.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace rig::sim::nv {

class Code;

// One GPU virtual address space (a FERMI_VASPACE_A and what UVM mapped into it). map()
// (ptx::Memory's) gives the host bytes backing [address, address + size) when all of it lies
// in one mapping, or nullopt when any of it is unmapped, or read-only for a write. It may be
// called from any engine thread at any time; the resource manager keeps a mapping's bytes
// alive while a call that returned them may still use them (until the engine's current
// method ends).
class Space : public ptx::Memory {};

// A channel's kind, from the engine type it was allocated with.
enum class Engine_kind : std::uint8_t { compute, copy };

// One channel, as the resource manager set it up.
struct Channel_setup {
  std::string name;                 // for messages: "channel 3 (compute)"
  Engine_kind kind = Engine_kind::compute;
  std::uint32_t channel_class = 0;  // 0xC86F HOPPER_CHANNEL_GPFIFO_A, 0xC56F AMPERE_CHANNEL_GPFIFO_A
  Space* space = nullptr;           // the channel's VA space
  std::byte* userd = nullptr;       // host bytes of the channel's USERD (GPGet 0x88, GPPut 0x8C)
  std::uint64_t gpfifo_va = 0;      // GPU address of the ring of GP entries (8 bytes each)
  std::uint32_t gpfifo_entries = 0;
  std::byte* error_notifier = nullptr;  // host bytes of the NvNotification the channel's
                                        // hObjectError names (index 0), or null
  const Code* code = nullptr;       // the kernels a launch may run
  std::uint32_t sm_count = 0;       // the SMs a local memory backing store must cover (0: unchecked)
  // A NON_STALL_INTERRUPT method executed: the OS events bound to the channel's engine fire.
  std::function<void()> nonstall;
  // The channel stopped on an error: `xid` is the RC code a real GPU reports (13 GR
  // exception, 31 MMU fault, 32 PBDMA error, 69 illegal class or method ...), `why` words
  // naming the channel, the method or kernel and the reason. The engine has already written
  // the error notifier; the hook fires the RC-error events.
  std::function<void(std::uint32_t xid, const std::string& why)> stopped;
  // The GPU's clock in nanoseconds (%globaltimer, semaphore timestamps).
  std::function<std::uint64_t()> clock_ns;
};

}  // namespace rig::sim::nv
