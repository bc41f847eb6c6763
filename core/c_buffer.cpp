// rig.h: C access to buffers.
#include <rig/rig.h>

#include "state.hpp"

namespace {
const rig::Buffer& of(const rig_buffer* b) { return *reinterpret_cast<const rig::Buffer*>(b); }
}  // namespace

extern "C" {

void* rig_buffer_host(const rig_buffer* b) {
  auto h = of(b).host_address();
  return h ? reinterpret_cast<void*>(*h) : nullptr;
}

size_t rig_buffer_bytes(const rig_buffer* b) { return of(b).length(); }

int rig_buffer_span(const rig_buffer* b, size_t* first, size_t* total) {
  const auto& buffer = of(b);
  if (first) *first = buffer.offset();
  if (total) *total = buffer.allocation()->bytes;
  return buffer.spans() ? 1 : 0;
}

const char* rig_buffer_why(const rig_buffer* b) {
  const auto& buffer = of(b);
  if (buffer.borrowed() && buffer.borrowed()->dead) return buffer.borrowed()->dead->c_str();
  auto& a = *buffer.allocation();
  std::lock_guard g(a.lock);
  return a.dead ? a.dead->c_str() : nullptr;
}

int rig_buffer_claim(const rig_buffer* b) {
  try {
    rig::claim::read(of(b));
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}

void rig_buffer_release(const rig_buffer* b) {
  try {
    rig::claim::release(of(b));
  } catch (const std::exception&) {
  }
}

int rig_buffer_wait(const rig_buffer* b, int write) {
  try {
    of(b).wait(write ? rig::Access::ReadWrite : rig::Access::Read);
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}
}
