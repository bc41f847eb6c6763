// host_driver.hpp — the drivers of the devices whose memory is this process's memory.
//
// The host device ("CPU") runs ELF kernels (see rig/host_kernel.h) on worker threads;
// memory devices are host memory with a timeline of their own, whose copies and fills run
// inside submit. Both implement rig::edge::Driver and the C functions of rig_edge.h.
#pragma once

#include <rig/edge.hpp>
#include <rig/os.hpp>

#include <cstdint>
#include <memory>

// The entry points live in rig::cpu: rig.hpp declares the function rig::host() (the host
// device), so no translation unit that includes it can also name a namespace rig::host.
// The drivers' internals (host/*.cpp, the ELF loader) stay in rig::host.
namespace rig::cpu {

// The host device's driver: this process's memory, ELF kernels run on worker threads.
//
// Facts: arch "x86_64" or "aarch64"; budget the machine's physical memory; one queue
// {"COMPUTE:0", {Launch, Fill, Copy}}, which is also the copy engine; completion Host; its
// queue waits for every producer (it polls their words); may_block false; hang_ms none;
// maps_host and host_addresses; alignment 16; cache_bytes the last-level cache sysfs
// states for cpu0, if any; counters "instructions" and "cycles" per launch where
// perf_event_open lets this process count them (none elsewhere, and measures is then
// NULL); word = `word`; edge = its C state.
//
// Memory (Device or Mapped) is plain host memory: a region starts on a page when it is at
// least 64 KiB and 4 pages, on 128 bytes from 128 bytes, on 16 otherwise, and holds whole
// 4-byte words. Its address, host address and handle are the pointer. alloc throws
// std::invalid_argument for Pinned memory, and answers nullopt only when the operating
// system refuses. map_host is the identity mapping. dma describes a region of its own pages
// as a dma-buf made by /dev/udmabuf, and gives Error, saying why, for any other memory, where
// /dev/udmabuf is absent or refused, and gives bus addresses only for locked pages whose frames
// the process reads, for a function whose IOMMU does not translate (HostMemory::dma).
//
// image loads a relocatable ELF object (rig::host::ElfImage) and gives Error with the
// loader's message when it cannot. entry answers Absent unless the name is a function the
// object defines; it gives the function's address as code, its params from the uint32
// symbol rig_params_NAME and its threads from rig_threads_NAME when they exist.
//
// submit copies the work into a ring (no heap allocation once warm) and returns
// RIG_COMMITTED; a dispatcher thread runs the values in order, and stores each into the
// word once its work has completed. A launch calls the kernel once per group; groups of a
// launch run on the dispatcher and on cores - 1 helper threads. A fill is called with the
// device's C state as its queue context; a non-zero return fails the device ("fill
// returned 3 at value 12"): later submits and commits return RIG_FAILED with that message,
// sleep throws edge::Fault with it, and no later value runs. Threads spin for tens of
// microseconds when idle, then park on futexes.
//
// stop drops the values not yet done (the word never shows them) and joins the threads; the
// destructor stops a driver that was not stopped.
std::unique_ptr<rig::edge::Driver> make_host_driver(volatile std::uint64_t* word);

// What the host device's dispatcher does beside spinning while it waits for its next value:
// a program that receives the device's work over a connection (a remote agent) polls that
// connection there, so that a value it receives is run, and reported, by the thread that
// received it, with no hand-off between threads. All three are called on the dispatcher
// thread: begin, then round once or more, then end, for each wait; a wait follows each
// value the dispatcher completes (so a round reports it at once) and its start, which may
// come before make_host_driver_idling returns.
struct DispatcherIdle {
  void* context = nullptr;
  // The dispatcher begins a wait. May be null.
  void (*begin)(void* context) = nullptr;
  // One round of the wait: true if it did something (the dispatcher's spin then starts
  // afresh). It may submit to and commit this device, and stop it (the dispatcher then ends
  // once the round returns), but it must not wait for the device's values nor destroy the
  // driver. Null: no hook at all.
  bool (*round)(void* context) = nullptr;
  // The wait ends: with `parking`, the dispatcher's spin is spent and it sleeps until a
  // submit rings it; without, it goes to run a value (or ends, the device stopped). May be
  // null.
  void (*end)(void* context, bool parking) = nullptr;
};
// The host device's driver whose dispatcher calls `idle` while it waits.
std::unique_ptr<rig::edge::Driver> make_host_driver_idling(volatile std::uint64_t* word, DispatcherIdle idle);
// The same, reaching /dev/udmabuf through `seam` (which outlives the driver).
std::unique_ptr<rig::edge::Driver> make_host_driver_with(rig::os::Seam& seam, volatile std::uint64_t* word);

// A memory device's driver: host memory with its own timeline; runs copies and fills
// inside submit.
//
// Facts: arch ""; budget the machine's physical memory; one queue {"COPY:0", {Copy,
// Fill}}, its copy engine; completion Host; its queue waits for no producer; may_block
// false; hang_ms none; maps_host and host_addresses; alignment 16; no cache_bytes; no
// counters; word = `word`; edge = its C state. Memory and dma are as the host device's. It loads
// no code: image gives Error "a memory device loads no code".
//
// submit runs the parts in order before it returns (a fill is called with a null queue
// context), then stores the value into the word and returns RIG_COMMITTED. A fill that
// returns non-zero makes that submit and every later one return RIG_FAILED ("fill returned
// 3 at value 12"), leaving the word where it was.
std::unique_ptr<rig::edge::Driver> make_memory_driver(volatile std::uint64_t* word);
// The same, reaching /dev/udmabuf through `seam` (which outlives the driver).
std::unique_ptr<rig::edge::Driver> make_memory_driver_with(rig::os::Seam& seam, volatile std::uint64_t* word);

}  // namespace rig::cpu
