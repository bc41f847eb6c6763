// heap_count.hpp — the heap allocations a program makes, counted by replacing the global
// operator new (heap_count.cpp), so that benches and tests can show that a hot path makes
// none. Link the rig_heap_count library into the program; it must be the only replacement.
#pragma once

#include <cstdint>

namespace rig::heap_count {

// Every thread's heap allocations since the program started.
std::uint64_t process();
// The calling thread's, since it started: what a test counts while other threads (worker
// or library threads) allocate on their own.
std::uint64_t this_thread();

}  // namespace rig::heap_count
