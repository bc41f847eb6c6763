// Where the core tells a profile being taken what it did. Each hook costs one relaxed load
// when no profile is taken.
#pragma once

#include <rig/profile.hpp>

#include <atomic>

namespace rig::detail {
struct DeviceState;
struct SubmissionState;
}  // namespace rig::detail

namespace rig::profile::hooks {

extern std::atomic<bool> on;

// Where the driver writes value v's start and end, and the value's launches noted; null
// once the store is full.
std::uint64_t* value(detail::DeviceState& d, const detail::SubmissionState& s, const Run::Storage& run,
                     std::uint64_t v);
// An allocation, image load or copy of `bytes` on d that began at `start` and ends now.
void event(Record::What what, const detail::DeviceState& d, std::uint64_t bytes, std::uint64_t start,
           std::string name = {});

inline bool taking() { return on.load(std::memory_order_relaxed); }

}  // namespace rig::profile::hooks
