// nv_abi.hpp — what compiled code reads of a device of rig's NVIDIA driver (its ABI record)
// and the queue context a Fill part's function is called with on its queues.
//
// A device opened by rig's NVIDIA driver (rig/nv.hpp) declares an Abi under kAbi
// (Device::capability). A Fill part's function (Submission::Fill) is called during the
// hand-over with a FillQueue: it writes methods of its channel's classes (the host class on
// subchannel 0, and the compute class on subchannel 1 on "COMPUTE:0", the copy class on
// subchannel 4 on "COPY:0") as push-buffer words, which the driver places on the channel after
// the value's earlier parts.
#pragma once

#include <rig/edge.hpp>

#include <cstdint>
#include <string>

namespace rig::nv {

// What compiled code needs from an NVIDIA device.
struct Abi {
  std::string arch;                     // the SM: "sm_90" (Hopper), "sm_80" (Ampere)
  std::uint32_t sm_count = 0;           // SMs, as RM's GR_GET_INFO counts them (GPCs x TPCs x SMs)
  std::uint32_t shared_per_sm = 0;      // bytes of shared memory an SM has
  std::uint32_t shared_per_block = 0;   // bytes a launch's block may use (the SM's less 1 KiB reserved)
  std::uint64_t timeline_word = 0;      // the device's timeline word, as its channels address it
  std::uint32_t compute_subchannel = 1; // where COMPUTE:0's compute class is bound
  std::uint32_t copy_subchannel = 4;    // where COPY:0's copy class is bound
};

// The key an NVIDIA device declares its Abi under.
inline const edge::Key<Abi> kAbi{"rig.nv.abi"};

// The `queue` argument of a Fill function on an NVIDIA device: the words of the value being
// encoded on the part's channel. It writes at most `room` words from words[0] on, sets `count`
// to the number it wrote, and returns 0 (another value fails the submit, and more than `room`
// words too). `room` is the part's ring_units, or 4096 where it gives 0.
struct FillQueue {
  std::uint32_t* words;
  std::uint32_t room;
  std::uint32_t count;
  std::uint32_t subchannel;  // where the channel's engine is bound: 1 compute, 4 copy
};

}  // namespace rig::nv
