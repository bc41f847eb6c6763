// The NVIDIA driver's sleeping and faults (device.hpp): the compute engine's non-stall
// interrupt wakes sleepers through an OS event; a channel that stops writes its error
// notifier and raises the RC-error event, which loses the device.
#include "device.hpp"

#include <algorithm>
#include <cstring>

#include <poll.h>

namespace rig::nv::driver {

namespace {
// What an Xid says (NVIDIA's Xid catalogue).
const char* xid_name(std::uint32_t xid) {
  switch (xid) {
    case 13: return "a graphics engine exception";
    case 31: return "an MMU fault";
    case 43: return "a channel stopped by its application";
    case 45: return "a channel stopped by the driver";
    case 69: return "a graphics engine class error";
  }
  return "a channel error";
}
}  // namespace

std::string Device::notified_fault() const {
  for (int i = 0; i < 2; ++i) {
    if (!notifier_page_[i]) continue;
    // The GPU writes the status last: once it is seen (acquired), the rest is there.
    const auto* status_at = reinterpret_cast<const std::uint16_t*>(notifier_page_[i] + kNotifierStatus);
    if (__atomic_load_n(status_at, __ATOMIC_ACQUIRE) == 0) continue;
    std::uint32_t info32;
    std::memcpy(&info32, notifier_page_[i] + kNotifierInfo32, 4);
    return fmt::format("{} (Xid {}) in {}{}", xid_name(info32), info32, i == 0 ? "COMPUTE:0" : "COPY:0",
                       fault_place(i));
  }
  return "";
}

std::string Device::fault_place(int ch) const {
  const std::uint64_t done = __atomic_load_n(word_, __ATOMIC_ACQUIRE);
  constexpr std::uint64_t kValueMask = (1ull << 48) - 1;
  std::uint64_t first = 0;
  std::uint32_t entry = 0;
  for (std::uint32_t i = 0; i < kGpEntries; ++i) {
    const std::uint64_t t = entry_tags_[ch][i].load(std::memory_order_relaxed);
    const std::uint64_t v = t & kValueMask;
    if (v > done && (first == 0 || v < (first & kValueMask))) first = t, entry = i;
  }
  if (first == 0) return "";
  const std::uint64_t part = first >> 48;
  if (part == kSeveralParts) return fmt::format(", value {}", first & kValueMask);
  std::string name = ch == 0 ? kernel_name(entry_kernels_[entry].load(std::memory_order_relaxed)) : "";
  return fmt::format(", value {} part {}{}", first & kValueMask, part, name.empty() ? "" : " (kernel " + name + ")");
}

std::string Device::kernel_name(const Kernel* k) const {
  if (!k) return "";
  std::lock_guard lock(memory_lock_);
  for (const auto& [id, image] : images_)
    for (const auto& [name, kernel] : image.kernels)
      if (kernel.get() == k) return name;
  return "";
}

void Device::sleep(std::uint64_t v, std::chrono::nanoseconds most) {
  {
    std::lock_guard g(fault_lock_);
    if (fault_.empty()) fault_ = notified_fault();
    if (!fault_.empty()) throw edge::Fault(fault_);
  }
  if (__atomic_load_n(word_, __ATOMIC_ACQUIRE) >= v || event_fd_ < 0) return;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(most).count();
  pollfd p{event_fd_, POLLIN, 0};
  const int r = rm_.seam().poll(&p, 1, int(std::clamp<long long>(ms, 1, 100)));
  if (r <= 0) return;
  // Take every event that fired: the non-stall ones only wake, an RC error loses the device.
  std::lock_guard g(fault_lock_);
  for (int i = 0; i < 64; ++i) {
    EventRecord e{};
    EventDataParams d{reinterpret_cast<std::uint64_t>(&e), 0, ~0u};
    if (!rm_.escape(event_fd_, kEscEventData, &d, sizeof d, "GET_EVENT_DATA") || d.status != kOk) break;
    if (e.hObject == rc_event_ && fault_.empty()) {
      fault_ = notified_fault();
      if (fault_.empty()) fault_ = fmt::format("{} (Xid {})", xid_name(e.info32), e.info32);
    }
    if (!d.MoreEvents) break;
  }
  if (!fault_.empty()) throw edge::Fault(fault_);
}

}  // namespace rig::nv::driver
