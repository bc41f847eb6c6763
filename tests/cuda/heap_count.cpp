// heap_count.cpp — counts the heap allocations a test's thread makes while it counts
// (support.hpp: counting, allocations), by replacing the global operator new. Allocations
// of other threads (the fake libcuda's stream threads) are not counted. Under AddressSanitizer,
// which owns operator new and delete, nothing is replaced and nothing is counted.
#include <cstdlib>
#include <new>

#include "support.hpp"

namespace rig::cuda::test {
thread_local bool counting = false;
thread_local std::uint64_t allocations = 0;
}  // namespace rig::cuda::test

#if !defined(__SANITIZE_ADDRESS__)
namespace {
void* allocate(std::size_t n, std::size_t align = 0) {
  if (rig::cuda::test::counting) ++rig::cuda::test::allocations;
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, std::size_t(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif
