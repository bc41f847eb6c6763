// amd_abi.hpp — what compiled code reads of an AMD device (its ABI record) and the queue
// context a Fill part is called with on an AMD device's queues.
//
// A device opened by rig's AMD driver declares an Abi under kAbi (Device::capability). A
// Fill part's function (Submission::Fill) is called during the hand-over with a FillQueue:
// it appends packets of its queue's format (PM4 on "COMPUTE:0", SDMA on "COPY:0") at
// words[count..capacity) and advances count; the driver places them on the queue after the
// value's earlier parts. It may write at most `capacity` dwords (the part's ring_units, or
// kFillDefaultUnits when ring_units is 0); more fails the submit.
#pragma once

#include <rig/edge.hpp>

#include <cstdint>
#include <string>

namespace rig::amd {

// What compiled code needs from an AMD device.
struct Abi {
  std::string arch;                  // the processor: "gfx1100"
  std::uint32_t wave_size = 32;      // lanes of the waves rig launches (32 on gfx10+, 64 on gfx9)
  std::uint32_t compute_units = 0;   // from the topology's simd_count / simd_per_cu
  std::uint32_t xccs = 1;            // the topology's num_xcc: compute dies reading the queues
  std::uint32_t lds_bytes = 0;       // group-shared memory a group may use
  std::uint64_t timeline_word = 0;   // the device's timeline word, as its queues address it
};

// The key an AMD device declares its Abi under.
inline const edge::Key<Abi> kAbi{"rig.amd.abi"};

// Engines a FillQueue writes for.
constexpr std::uint32_t kEnginePm4 = 0;   // PM4 type-3 packets for the compute queue
constexpr std::uint32_t kEngineSdma = 1;  // SDMA packets for the copy queue
// The dwords a fill may write when its part gives no ring_units.
constexpr std::uint32_t kFillDefaultUnits = 1024;

// The `queue` argument of a Fill function on an AMD device.
struct FillQueue {
  std::uint32_t* words;    // where the fill writes its packets
  std::uint32_t capacity;  // the dwords it may write
  std::uint32_t count;     // dwords written so far (0 at the call); the fill advances it
  std::uint32_t engine;    // kEnginePm4 or kEngineSdma
  std::uint32_t reserved;
  std::uint64_t value;     // the timeline value the work completes
};

}  // namespace rig::amd
