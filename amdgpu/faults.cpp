// The AMD driver's sleeping and faults (device.hpp): KFD events, and naming the work a
// stopped queue was running.
#include "device.hpp"

namespace rig::amd::driver {

std::string Device::describe_stop(int queue) const {
  const Ring& r = queue == 0 ? compute_ : copy_;
  std::uint64_t reported = load(r.rptr_memory);
  // The write pointer as the doorbell published it: a submit on another thread may be moving
  // the ring's own, and the words before the published one are written.
  std::uint64_t written = load(r.wptr_memory);
  if (r.bytes) reported /= 4, written /= 4;
  // The engine may report its read pointer within the ring or counted from the start: either
  // way it lies at most a ring behind the write pointer.
  std::uint64_t behind = (written % r.dwords + r.dwords - reported % r.dwords) % r.dwords;
  std::uint64_t rptr = written - behind;
  std::uint32_t header = r.words[rptr % r.dwords];
  std::string packet = queue == 0 ? fmt::format("PM4 header {:#010x} (opcode {:#04x})", header, (header >> 8) & 0xff)
                                  : fmt::format("SDMA header {:#010x} (opcode {})", header, header & 0xff);
  std::string where;
  // The last mark at or before rptr, read whole: again if a mark was written meanwhile (a
  // submit on another thread), a few times at most.
  constexpr auto relaxed = std::memory_order_relaxed;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint64_t sequence = marks_sequence_.load(std::memory_order_acquire);
    if (sequence % 2) continue;
    const std::uint64_t count = sequence / 2;
    bool found = false;
    std::uint64_t best_position = 0, value = 0;
    std::uint32_t part = 0;
    const char* what = "";
    for (std::uint64_t i = count > kMarks ? count - kMarks : 0; i < count; ++i) {
      const auto& m = marks_[i % kMarks];
      const std::uint64_t position = m.position.load(relaxed);
      if (int(m.queue.load(relaxed)) == queue && position <= rptr && (!found || position >= best_position)) {
        found = true, best_position = position;
        value = m.value.load(relaxed), part = m.part.load(relaxed), what = m.what.load(relaxed);
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (marks_sequence_.load(relaxed) != sequence) continue;
    if (found) where = fmt::format(" in {} (value {} part {})", what, value, part);
    break;
  }
  return fmt::format("{} stopped at ring dword {:#x}, {}{}", queue == 0 ? "COMPUTE:0" : "COPY:0", rptr, packet, where);
}

void Device::sleep(std::uint64_t v, std::chrono::nanoseconds most) {
  if (faulted_.load()) {
    std::lock_guard g(fault_mutex_);
    throw edge::Fault(fault_);
  }
  if (load(word_) >= v) return;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(most).count();
  std::array<kfd_event_data, 3> events{};
  events[0].event_id = signal_event_, events[1].event_id = memory_event_, events[2].event_id = hw_event_;
  auto r = kfd_.wait_events(events, std::uint32_t(std::clamp<long long>(ms, 1, 1000)));
  if (!r) throw edge::Fault(r.error().what);
  std::string why;
  const auto& mem = events[1].memory_exception_data;
  const auto& hw = events[2].hw_exception_data;
  // A queue is busy while its engine's read pointer is short of the write pointer the
  // doorbell published (submit, on another thread, may be moving the ring's own).
  auto busy = [](const Ring& r) {
    std::uint64_t unit = r.bytes ? 4 : 1;
    return load(r.rptr_memory) / unit % r.dwords != load(r.wptr_memory) / unit % r.dwords;
  };
  const bool busy_compute = (mem.gpu_id || hw.gpu_id) && busy(compute_);
  const bool busy_copy = (mem.gpu_id || hw.gpu_id) && busy(copy_);
  if (mem.gpu_id) {
    std::string kind = mem.failure.ReadOnly ? "write to a read-only page" : mem.failure.NoExecute ? "execute" : "page not present";
    why = fmt::format("page fault at {:#x} ({})", std::uint64_t(mem.va), kind);
    if (busy_compute) why += "; " + describe_stop(0);
    if (busy_copy) why += "; " + describe_stop(1);
  } else if (hw.gpu_id) {
    why = fmt::format("the GPU reported a hardware exception ({}{})",
                      hw.reset_cause == KFD_HW_EXCEPTION_ECC ? "ECC error" : "queue hang",
                      hw.memory_lost ? ", memory lost" : "");
    if (busy_compute) why += "; " + describe_stop(0);
    if (busy_copy) why += "; " + describe_stop(1);
  } else {
    return;
  }
  {
    std::lock_guard g(fault_mutex_);
    if (fault_.empty()) fault_ = why;
    why = fault_;
  }
  faulted_ = true;
  throw edge::Fault(why);
}


}  // namespace rig::amd::driver
