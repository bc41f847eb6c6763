// profile.hpp — profiles: what each value, launch, allocation, image load and copy did, on
// the host clock (rig_now_ns).
//
// While a profile is taken (profile::take), every submit asks its driver for the value's
// start and end, and every launch's counters (the device's `counters` fact); allocations,
// image loads and copies are recorded with their sizes and times. Records are kept in a
// store of fixed size: once it is full, later records are dropped and one Overwritten
// record says how many. Taking no profile costs a submit one relaxed load.
#pragma once

#include <rig/rig.hpp>

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace rig::profile {

struct Record {
  enum class What {
    Value,        // a value's work on its device: start..end
    Launch,       // one launch of a value, with its counters where measured
    Allocation,   // bytes allocated on a device (start..end: the call)
    Load,         // an image loaded (bytes: its binary)
    Copy,         // a copy rig routed (bytes moved; start..end: until it returned)
    Overwritten,  // the store filled: `dropped` records were lost
  };
  What what = What::Value;
  std::string device;  // "CPU", "AMD:0", …
  std::string queue;   // the queue's name, for values and launches
  std::uint64_t value = 0;
  std::uint64_t start_ns = 0, end_ns = 0;  // host clock; 0 where not measured
  std::string name;                        // a launch's function
  std::uint32_t part = 0;                  // a launch's part index in its submission
  std::uint32_t groups[3] = {0, 0, 0};
  std::uint32_t threads[3] = {0, 0, 0};
  std::uint64_t bytes = 0;
  bool measured = false;  // a launch's counters and times were measured by the device
  std::vector<std::pair<std::string, std::uint64_t>> counters;
  std::uint64_t dropped = 0;
};

// The records of the work `work` submits: runs work(), waits for every value it submitted
// on every device, and returns what was recorded, values in timeline order per device.
// Profiles do not nest: raises invalid_argument if one is already being taken.
template <class F>
std::vector<Record> take(F&& work);

// Starts and stops a profile by hand (take uses them); stop waits for the values.
void start(std::size_t capacity = 1 << 20);
std::vector<Record> stop();
bool active();

// A Chrome / Perfetto trace (JSON Trace Event Format): one process per device, one track
// per queue, a slice per value and per launch (counters as args), instants for
// allocations, loads and copies.
void write_chrome_trace(std::span<const Record> records, std::ostream& out);
// One row per launch: device, queue, value, function, groups, threads, start, end, the
// duration, then each counter.
void write_csv(std::span<const Record> records, std::ostream& out);

// The host clock, rig_now_ns.
std::uint64_t now_ns();

template <class F>
std::vector<Record> take(F&& work) {
  start();
  try {
    work();
  } catch (...) {
    stop();
    throw;
  }
  return stop();
}

}  // namespace rig::profile
