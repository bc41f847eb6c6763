// wire.hpp — the messages between a client and a `rig serve` agent (docs/remote.md,
// "Protocol"), as pure code: structs in, bytes out, and bytes in, a message or the reason it
// is malformed out. Nothing here touches UCX or a device.
//
// Every message is one UCX active message whose data is a header and a body:
//
//   u32 magic "RIGW"   u16 version   u16 type   u32 body bytes   body
//
// all little-endian. decode() checks the magic, the version, that the declared body length
// is exactly what follows, and every count and length inside the body against the bytes
// that remain, before it reads them: a message that lies about a length is refused, never
// read past its end. What a message names (devices, regions, images, entries) is checked by
// the agent against its own state, not here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace rig::remote::wire {

// "RIGW" read as a little-endian u32.
inline constexpr std::uint32_t kMagic = 0x57474952;
// The protocol's version: an agent answers a Hello of another version with a refusal.
// Version 3: the bytes of mapped host memory travel as Data messages beside Submit and
// Reached (the active message's data, by rendezvous), not by RMA through a key MapHost sent.
inline constexpr std::uint16_t kVersion = 3;
// Bytes of the header before the body.
inline constexpr std::size_t kHeaderBytes = 12;
// The most bytes of a token a Hello carries.
inline constexpr std::size_t kTokenMax = 4096;
// The most bytes of a name or a reason a message carries.
inline constexpr std::size_t kTextMax = 4096;

enum class Type : std::uint16_t {
  // client → agent
  Hello = 1,    // the token, before anything else
  Open = 2,     // open a device of the agent's: replied Opened
  Alloc = 3,    // replied Reply (region, address, handle)
  Free = 4,     // no reply
  MapHost = 5,  // the client's host memory, mirrored by a window on the agent: replied Reply (region, address, handle)
  Image = 6,    // a binary: replied Reply (image) or an error
  Entry = 7,    // a function of an image: replied Reply (entry, code, params, threads) or absent
  Unload = 8,   // no reply
  Room = 9,     // whether parts fit: replied Reply (answer, why)
  Submit = 10,  // one value's parts, with the ranges of mapped host memory they read and write; no reply
  Commit = 11,  // no reply
  Grow = 12,    // replied Reply
  Stop = 13,    // replied Reply (the word's last value)
  Close = 14,   // the client is done with the device: the agent frees what it held; no reply
  Clock = 15,   // replied Reply (a: the agent's clock, rig_now_ns)
  // agent → client
  Welcome = 20,  // the answer to Hello
  Opened = 21,   // a device's facts, or why it did not open
  Reply = 22,    // the answer to a request, by its number
  Reached = 23,  // a device's word moved (what its work wrote to mapped host memory is there)
  Lost = 24,     // a device was lost on the agent's side
  // both ways
  Data = 25,  // bytes of mapped host memory beside it: the client's before a Submit, the agent's before a Reached
};

// The name of a type ("submit"), or "unknown".
const char* type_name(std::uint16_t type);

// --- client → agent ---

struct Hello {
  std::uint16_t version = kVersion;  // repeated in the body: the version the client speaks
  std::string token;
};

struct Open {
  std::uint64_t request = 0;
  std::string device;  // the agent's name for it: "CPU", "MEM"
};

struct Alloc {
  std::uint64_t request = 0;
  std::uint32_t device = 0;
  std::uint32_t memory = 0;  // rig::Memory as a number
  std::uint64_t bytes = 0;
};

struct Free {
  std::uint32_t device = 0;
  std::uint64_t region = 0;
};

// `bytes` of the client's host memory from `address`: the agent keeps a window of as many
// bytes, which its device maps, and the two sides send each other the ranges of it that
// values read and write (Data).
struct MapHost {
  std::uint64_t request = 0;
  std::uint32_t device = 0;
  std::uint64_t bytes = 0;
  std::uint64_t address = 0;
};

struct Image {
  std::uint64_t request = 0;
  std::uint32_t device = 0;
  std::vector<std::byte> binary;
};

struct Entry {
  std::uint64_t request = 0;
  std::uint32_t device = 0;
  std::uint64_t image = 0;
  std::string name;
};

struct Unload {
  std::uint32_t device = 0;
  std::uint64_t image = 0;
};

// A box of a copy, as rig_box.
struct Box {
  std::uint64_t src_offset = 0, dst_offset = 0, width = 0, rows = 0, src_pitch = 0, dst_pitch = 0;
  bool operator==(const Box&) const = default;
};

// A part of a submission as it travels: addresses are the agent's (the client's locate gave
// them), handles the agent's regions, a launch names the agent's entry.
struct Part {
  std::uint32_t queue = 0;
  std::uint32_t kind = 0;  // enum rig_kind
  std::vector<std::uint32_t> after;
  // Words
  std::vector<std::uint32_t> words;
  // Copy
  std::uint64_t src = 0, dst = 0, src_region = 0, dst_region = 0, src_offset = 0, dst_offset = 0;
  std::int32_t fill = -1;
  std::vector<Box> boxes;
  // Launch
  std::uint64_t entry = 0;
  std::uint32_t groups[3] = {1, 1, 1};
  std::uint32_t threads[3] = {1, 1, 1};
  std::uint32_t shared = 0;
  std::vector<std::byte> params;
  std::vector<std::uint32_t> refs;
  bool operator==(const Part&) const = default;
};

// A range of mapped host memory that a submission's parts read or write.
struct Range {
  std::uint64_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool operator==(const Range&) const = default;
};

struct Room {
  std::uint64_t request = 0;
  std::uint32_t device = 0;
  std::uint32_t waits = 0;
  std::vector<Part> parts;
};

struct Submit {
  std::uint32_t device = 0;
  std::uint64_t value = 0;
  std::vector<Part> parts;
  std::vector<Range> uploads;    // what the parts read of it: each sent as Data before this
  std::vector<Range> downloads;  // what the parts write there: sent back as Data before Reached
  bool timed = false;            // a profile is taken: Reached brings the value's times
};

struct Commit {
  std::uint32_t device = 0;
  std::uint64_t value = 0;
};

struct Grow {
  std::uint64_t request = 0;
  std::uint32_t device = 0;
};

// Replied once the device stopped, with the value its word showed then (a).
struct Stop {
  std::uint64_t request = 0;
  std::uint32_t device = 0;
  std::string why;
};

struct Close {
  std::uint32_t device = 0;
};

// A reading of the agent's clock, by which the client shifts the agent's times to its own.
struct Clock {
  std::uint64_t request = 0;
};

// --- agent → client ---

struct Welcome {
  bool admitted = false;
  std::string why;                   // the refusal's reason
  std::vector<std::string> devices;  // the names of the devices it serves
  std::uint64_t now = 0;             // the agent's clock (rig_now_ns) as it sent this
};

// A device's facts as they travel (edge::Facts without what has meaning only on the agent).
struct Queue {
  std::string name;
  std::vector<std::uint32_t> runs;  // enum rig_kind
  bool operator==(const Queue&) const = default;
};
struct Opened {
  std::uint64_t request = 0;
  bool ok = false;
  std::string why;  // why it did not open
  std::uint32_t device = 0;
  std::string arch;
  std::uint64_t budget = 0;
  std::vector<Queue> queues;
  std::int32_t copy_engine = -1;
  std::int32_t hang_ms = -1;
  std::uint64_t alignment = 1;
  std::uint64_t cache_bytes = 0;  // 0: unknown
  std::uint64_t word = 0;         // the value its word shows now
};

// The answer to a request: status 0 with up to four numbers, or an error with its reason.
struct Reply {
  std::uint64_t request = 0;
  std::uint32_t status = 0;  // kOk, kNone, kError
  std::uint64_t a = 0, b = 0, c = 0, d = 0;
  std::string why;
};
inline constexpr std::uint32_t kOk = 0;
inline constexpr std::uint32_t kNone = 1;   // nothing to give: no room, absent
inline constexpr std::uint32_t kError = 2;  // refused, with why
inline constexpr std::uint32_t kNoMemory = 3;  // an entry's launches need `a` bytes the device lacks now

// Device `device`'s word moved from `from` to `to`; what its work of those values wrote to
// mapped host memory reached the client's memory (Data) before. Messages of a device are numbered by
// `from`: the client applies one only once the word shows `from`.
// A timed value's work on the agent's device, on the agent's clock (rig_now_ns).
struct Timing {
  std::uint64_t value = 0, start = 0, end = 0;
  bool operator==(const Timing&) const = default;
};
struct Reached {
  std::uint32_t device = 0;
  std::uint64_t from = 0, to = 0;
  std::vector<Timing> times;  // of the timed values from+1 … to
};

struct Lost {
  std::uint32_t device = 0;
  std::string why;
};

// --- both ways ---

// Bytes [offset, offset + length) of mapped host memory `region` of device `device`, for
// value `value`. The bytes are not in the message: they are the data of the active message
// whose header it is, sent by rendezvous, so that the receiver takes them straight into
// their place (zero-copy where the transport can). Client → agent: a range value's parts
// read, sent before its Submit, taken into the window before the value is handed to the
// device. Agent → client: a range value's parts wrote, sent once the device reached it and
// taken into the client's memory before the agent sends the Reached that shows it.
struct Data {
  std::uint32_t device = 0;
  std::uint64_t value = 0;
  std::uint64_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

using Message = std::variant<Hello, Open, Alloc, Free, MapHost, Image, Entry, Unload, Room, Submit, Commit, Grow,
                             Stop, Close, Clock, Welcome, Opened, Reply, Reached, Lost, Data>;

// The message's bytes, in `out` (cleared first). Encoding into a vector that has room
// allocates nothing. T is one of Message's alternatives.
template <class T>
void encode(const T& m, std::vector<std::byte>& out);
void encode(const Message& m, std::vector<std::byte>& out);
std::vector<std::byte> encode(const Message& m);

// The message in `bytes`, or why it is malformed: "a submit message: part 2 declares 4096
// words, but 12 bytes remain".
std::expected<Message, std::string> decode(std::span<const std::byte> bytes);

}  // namespace rig::remote::wire
