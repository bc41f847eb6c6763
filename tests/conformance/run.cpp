// run.cpp — the table of laws, running them on a target, and JUnit XML.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <optional>
#include <mutex>
#include <thread>

#include "laws.hpp"

namespace rig::conformance {
namespace {

using namespace detail;

struct Entry {
  Law law;
  void (*run)(Context&);
};

// The laws, in the order they run. A core gap names what the core does not yet do that the
// law needs; its failure is then reported as a skip naming that gap.
const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = {
      {{"facts are well formed", ""}, facts_are_well_formed},
      {{"refusals are refusals, and each leaves the device usable", ""}, refusals_leave_the_device_usable},
      {{"copies are the identity across every memory kind", ""}, copies_are_the_identity},
      {{"a reader sees the last writer", ""}, a_reader_sees_the_last_writer},
      {{"device order: a value starts after the previous one completed, on every queue", ""}, device_order},
      {{"prefix order: each queue runs its parts in the order they were handed", ""}, prefix_order},
      {{"work completes with no further call: the driver commits on its own within k values", ""},
       work_completes_with_no_further_call},
      {{"its work waits for other devices' values, in its queue or on the host", ""},
       it_waits_for_other_devices_values},
      {{"other devices' work waits for its values", ""}, other_devices_wait_for_its_values},
      {{"the timeline word never moves backwards (a model run from two threads)", ""},
       the_word_never_moves_backwards},
      {{"memory returns to its driver once its stamps allow, and not before", ""},
       memory_returns_once_its_stamps_allow},
      {{"no room is not a fault: rig reclaims and asks again", ""}, no_room_is_not_a_fault},
      {{"a failed part loses the device and nothing else", ""}, a_failed_part_loses_the_device_and_nothing_else},
      {{"an injected fault in any call of its driver loses the device and nothing else", ""},
       an_injected_fault_loses_the_device_and_nothing_else},
      {{"every use of a lost device's memory raises Lost", ""}, a_lost_devices_memory_raises_lost},
      {{"a lost device's memory returns to its driver once its word shows its last value", ""},
       a_lost_devices_memory_returns},
      {{"a wait on a lost producer's unreached value loses the waiting device", ""},
       a_wait_on_a_lost_producer_loses_the_waiting_device},
      {{"a wait blocked on a device that is lost meanwhile raises Lost", ""}, a_wait_interrupted_by_a_loss_raises_lost},
      {{"close of an idle device loses it with reason \"closed\"", ""}, close_of_an_idle_device},
      {{"close of a busy device waits for its work", ""}, close_of_a_busy_device_waits_for_its_work},
      {{"long work that progresses is not a hang", ""}, long_work_is_not_a_hang},
      {{"a stall past hang_ms loses the device with \"no progress for n ms\"", ""}, a_stall_past_hang_ms_is_a_hang},
      // Last: a failure of this law may leave staging unusable for the laws after it.
      {{"a loss leaves the other devices' copies through staging alone", ""},
       a_loss_leaves_other_devices_copies_alone},
  };
  return entries;
}

// The laws of io devices, which run on io targets (Target::io_region) instead.
const std::vector<Entry>& io_table() {
  static const std::vector<Entry> entries = {
      {{"io: it computes nothing, and refuses what only devices that compute do", ""}, io_facts_are_well_formed},
      {{"io: copies are the identity between its memory and every memory kind", ""}, io_copies_are_the_identity},
      {{"io: fills and blits write exactly their bytes", ""}, io_fills_and_blits_write_exactly_their_bytes},
      {{"io: read-only memory refuses every write and keeps its bytes", ""}, io_read_only_memory_refuses_writes},
      {{"io: a reader sees the last writer, across devices", ""}, io_a_reader_sees_the_last_writer},
      {{"io: concurrent copies on one region keep every byte", ""}, io_concurrent_copies_keep_every_byte},
      {{"io: a borrow of its memory is its pages, in place", ""}, io_a_borrow_is_its_pages},
      {{"io: close loses it with reason \"closed\", and its memory raises Lost", ""},
       io_close_loses_it_and_returns_its_memory},
      {{"io: its memory returns to it once its buffers are gone", ""}, io_memory_returns_once_its_buffers_go},
  };
  return entries;
}

const std::vector<Entry>& table_for(const Target& target) { return target.io_region ? io_table() : table(); }

std::atomic<bool> any_hang{false};

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "; ") + l;
  return out;
}

// Runs one law on the target, on the calling thread.
Outcome run_one(const Target& target, const Entry& e) {
  Outcome out;
  out.law = e.law.name;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> notes;
  {
    Context c(target);
    try {
      e.run(c);
      out.status = Status::Passed;
    } catch (const Skip& s) {
      out.status = Status::Skipped;
      out.message = s.why;
    } catch (const Failure& f) {
      out.status = Status::Failed;
      out.message = f.what();
    } catch (const Lost& l) {
      out.status = Status::Failed;
      out.message = fmt::format("unexpected Lost: {}", l.what());
    } catch (const std::invalid_argument& x) {
      out.status = Status::Failed;
      out.message = fmt::format("unexpected invalid_argument: {}", x.what());
    } catch (const OutOfMemory& x) {
      out.status = Status::Failed;
      out.message = fmt::format("unexpected OutOfMemory: {}", x.what());
    } catch (const std::exception& x) {
      out.status = Status::Failed;
      out.message = fmt::format("unexpected exception: {}", x.what());
    }
    auto problems = c.finish();
    if (!problems.empty() && out.status != Status::Failed) {
      out.status = Status::Failed;
      out.message = joined(problems);
    } else if (!problems.empty()) {
      out.message += "; " + joined(problems);
    }
    notes = c.notes;
  }
  if (out.status == Status::Passed && !notes.empty()) out.message = joined(notes);
  if (out.status == Status::Failed && !e.law.core_gap.empty()) {
    out.status = Status::Skipped;
    out.message = fmt::format("core gap: {} (the law fails now: {})", e.law.core_gap, out.message);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace

const std::vector<Law>& laws() {
  static const std::vector<Law> all = [] {
    std::vector<Law> out;
    for (const auto& e : table()) out.push_back(e.law);
    for (const auto& e : io_table()) out.push_back(e.law);
    return out;
  }();
  return all;
}

std::string_view status_name(Status s) {
  switch (s) {
    case Status::Passed: return "pass";
    case Status::Failed: return "FAIL";
    case Status::Skipped: return "skip";
  }
  return "?";
}

bool hung() { return any_hang.load(); }

bool sanitized() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  return true;
#endif
#endif
  return false;
}

double scale() {
  if (const char* s = std::getenv("RIG_CONFORMANCE_SCALE")) {
    char* end = nullptr;
    double v = std::strtod(s, &end);
    if (end != s && v > 0) return v;
  }
  return sanitized() ? 0.25 : 1.0;
}

int slowdown() { return sanitized() ? 4 : 1; }

std::vector<std::string> law_names(const Target& target) {
  std::vector<std::string> names;
  for (const auto& e : table_for(target)) names.push_back(e.law.name);
  return names;
}

std::vector<Outcome> run(const Target& target, const RunOptions& options) {
  std::vector<Outcome> outcomes;
  std::string hung_law;
  auto shared_target = std::make_shared<Target>(target);
  for (const auto& e : table_for(target)) {
    if (!options.only.empty() && std::find(options.only.begin(), options.only.end(), e.law.name) == options.only.end())
      continue;
    Outcome out;
    if (!hung_law.empty()) {
      out = Outcome{e.law.name, Status::Skipped, fmt::format("not run: the law \"{}\" hung on this target", hung_law), 0};
    } else {
      // Each law runs on a thread of its own, so that a hang is reported rather than waited for.
      struct Slot {
        std::mutex m;
        std::condition_variable cv;
        std::optional<Outcome> out;
      };
      auto slot = std::make_shared<Slot>();
      const Entry* entry = &e;
      std::thread([slot, shared_target, entry] {
        Outcome o = run_one(*shared_target, *entry);
        std::lock_guard g(slot->m);
        slot->out = std::move(o);
        slot->cv.notify_all();
      }).detach();
      std::unique_lock l(slot->m);
      if (slot->cv.wait_for(l, options.timeout, [&] { return slot->out.has_value(); })) {
        out = std::move(*slot->out);
      } else {
        any_hang = true;
        hung_law = e.law.name;
        out = Outcome{e.law.name, Status::Failed,
                      fmt::format("did not finish within {} s: a hang", options.timeout.count()),
                      double(options.timeout.count())};
      }
    }
    if (options.on_outcome) options.on_outcome(out);
    outcomes.push_back(std::move(out));
  }
  return outcomes;
}

namespace {

// Text for an XML attribute or element: escaped, with characters XML 1.0 forbids dropped.
std::string xml(std::string_view s) {
  std::string out;
  for (unsigned char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\n': out += "&#10;"; break;
      case '\t': out += "&#9;"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (ch >= 0x20) out += char(ch);
    }
  }
  return out;
}

}  // namespace

std::string junit(const std::vector<Suite>& suites) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  int tests = 0, failures = 0, skipped = 0;
  double seconds = 0;
  for (const auto& s : suites)
    for (const auto& o : s.outcomes) {
      ++tests;
      failures += o.status == Status::Failed;
      skipped += o.status == Status::Skipped;
      seconds += o.seconds;
    }
  out += fmt::format("<testsuites name=\"rig conformance\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\" "
                     "time=\"{:.3f}\">\n",
                     tests, failures, skipped, seconds);
  for (const auto& s : suites) {
    int f = 0, k = 0;
    double t = 0;
    for (const auto& o : s.outcomes) f += o.status == Status::Failed, k += o.status == Status::Skipped, t += o.seconds;
    out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\" "
                       "time=\"{:.3f}\">\n",
                       xml(s.target), s.outcomes.size(), f, k, t);
    for (const auto& o : s.outcomes) {
      out += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3f}\"", xml(s.target), xml(o.law),
                         o.seconds);
      switch (o.status) {
        case Status::Passed:
          if (o.message.empty()) {
            out += "/>\n";
          } else {
            out += fmt::format(">\n      <system-out>{}</system-out>\n    </testcase>\n", xml(o.message));
          }
          break;
        case Status::Failed:
          out += fmt::format(">\n      <failure message=\"{}\" type=\"law\">{}</failure>\n    </testcase>\n",
                             xml(o.message), xml(o.message));
          break;
        case Status::Skipped:
          out += fmt::format(">\n      <skipped message=\"{}\"/>\n    </testcase>\n", xml(o.message));
          break;
      }
    }
    out += "  </testsuite>\n";
  }
  out += "</testsuites>\n";
  return out;
}

}  // namespace rig::conformance
