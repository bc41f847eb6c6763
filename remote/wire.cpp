// wire.cpp — encoding and bounds-checked decoding of the remote protocol's messages.
#include "wire.hpp"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <type_traits>

namespace rig::remote::wire {
namespace {

// The most parts, boxes, spans or words a message may declare: far above what rig makes,
// and small enough that a count times an element's size cannot overflow.
constexpr std::uint64_t kCountMax = std::uint64_t(1) << 32;
// The most parameter bytes of a launch (RIG_PARAMS_MAX).
constexpr std::size_t kParamsMax = 4096;

// The reason a message is malformed.
struct Malformed {
  std::string why;
};

// Each message's fields, in their order on the wire, given to `io` (a Writer, which puts
// them, or a Reader, which gets them): one list serves both ways.
template <class IO, class M> void fields(IO& io, M& x);

template <class IO, class B>
void box_fields(IO& io, B& b) {
  io(b.src_offset, "box");
  io(b.dst_offset, "box");
  io(b.width, "box");
  io(b.rows, "box");
  io(b.src_pitch, "box");
  io(b.dst_pitch, "box");
}

template <class IO, class P>
void part_fields(IO& io, P& p) {
  io(p.queue, "queue");
  io(p.kind, "kind");
  io(p.after, "after");
  io(p.words, "words");
  io(p.src, "src");
  io(p.dst, "dst");
  io(p.src_region, "src_region");
  io(p.dst_region, "dst_region");
  io(p.src_offset, "src_offset");
  io(p.dst_offset, "dst_offset");
  io(p.fill, "fill");
  io(p.boxes, "boxes");
  io(p.entry, "entry");
  for (auto& g : p.groups) io(g, "groups");
  for (auto& t : p.threads) io(t, "threads");
  io(p.shared, "shared");
  io.bytes(p.params, "params", kParamsMax);
  io(p.refs, "refs");
}

template <class IO, class R>
void range_fields(IO& io, R& r) {
  io(r.region, "range region");
  io(r.offset, "range offset");
  io(r.length, "range length");
}

template <class IO, class T>
void timing_fields(IO& io, T& t) {
  io(t.value, "timing value");
  io(t.start, "timing start");
  io(t.end, "timing end");
}

template <class IO, class Q>
void queue_fields(IO& io, Q& q) {
  io.text(q.name, "queue name", kTextMax);
  io(q.runs, "queue runs");
}

// The fewest bytes an element of a list takes on the wire, so that a count is checked
// against what remains before anything is made for it.
template <class T> constexpr std::size_t kLeast = sizeof(T);
template <> constexpr std::size_t kLeast<std::string> = 8;
template <> constexpr std::size_t kLeast<Box> = 48;
template <> constexpr std::size_t kLeast<Part> = 4 + 4 + 8;
template <> constexpr std::size_t kLeast<Range> = 24;
template <> constexpr std::size_t kLeast<Timing> = 24;
template <> constexpr std::size_t kLeast<Queue> = 16;

class Writer {
 public:
  // Writes from out's start, over what it holds; `finish` trims it to what was written. The
  // vector grows a doubling at a time and is cut once at the end, rather than resized field
  // by field (a resize for each of a launch's forty fields was a fifth of a microsecond of
  // each Submit).
  explicit Writer(std::vector<std::byte>& out) : out_(out) {}
  void finish() { out_.resize(at_); }
  template <class T>
  void put(T v) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    U u = U(v);
    std::byte* at = room(sizeof(T));
    // Little-endian on the wire: a copy of the value on such hosts, a byte at a time on others
    // (a byte at a time everywhere took 0.4 µs of a launch's Submit).
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(at, &u, sizeof(T));
    } else {
      for (std::size_t i = 0; i < sizeof(T); ++i) at[i] = std::byte(std::uint8_t(u >> (8 * i)));
    }
  }
  template <class T>
  void operator()(const T& v, const char*) {
    if constexpr (std::is_same_v<T, bool>) {
      put<std::uint8_t>(v);
    } else if constexpr (std::is_integral_v<T>) {
      put(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      text(v, "", 0);
    } else if constexpr (std::is_same_v<T, Box>) {
      box_fields(*this, v);
    } else if constexpr (std::is_same_v<T, Part>) {
      part_fields(*this, v);
    } else if constexpr (std::is_same_v<T, Range>) {
      range_fields(*this, v);
    } else if constexpr (std::is_same_v<T, Timing>) {
      timing_fields(*this, v);
    } else if constexpr (std::is_same_v<T, Queue>) {
      queue_fields(*this, v);
    } else {  // a list
      put<std::uint64_t>(v.size());
      for (const auto& e : v) (*this)(e, "");
    }
  }
  void bytes(const std::vector<std::byte>& b, const char*, std::size_t) {
    put<std::uint64_t>(b.size());
    if (!b.empty()) std::memcpy(room(b.size()), b.data(), b.size());
  }
  void text(const std::string& s, const char*, std::size_t) {
    put<std::uint64_t>(s.size());
    if (!s.empty()) std::memcpy(room(s.size()), s.data(), s.size());
  }

 private:
  // The next n bytes to write, the vector grown where it is too short.
  std::byte* room(std::size_t n) {
    if (out_.size() - at_ < n) out_.resize(std::max(out_.size() * 2, at_ + n + 256));
    std::byte* p = out_.data() + at_;
    at_ += n;
    return p;
  }
  std::vector<std::byte>& out_;
  std::size_t at_ = 0;
};

class Reader {
 public:
  // `kind`: the message's type name for a body's reader ("a submit message: ..."), none for
  // the header's ("a message: ..."). The words are put together only for a refusal.
  Reader(std::span<const std::byte> in, const char* kind = nullptr) : in_(in), kind_(kind) {}
  template <class T>
  T get(const char* field) {
    static_assert(std::is_integral_v<T>);
    need(sizeof(T), field);
    std::make_unsigned_t<T> u = 0;
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(&u, in_.data() + at_, sizeof(T));
    } else {
      for (std::size_t i = 0; i < sizeof(T); ++i) u |= std::make_unsigned_t<T>(std::uint8_t(in_[at_ + i])) << (8 * i);
    }
    at_ += sizeof(T);
    return T(u);
  }
  template <class T>
  void operator()(T& v, const char* field) {
    if constexpr (std::is_same_v<T, bool>) {
      const auto b = get<std::uint8_t>(field);
      if (b > 1) throw Malformed{fmt::format("{}: {} is {}, neither 0 nor 1", what(), field, b)};
      v = b == 1;
    } else if constexpr (std::is_integral_v<T>) {
      v = get<T>(field);
    } else if constexpr (std::is_same_v<T, std::string>) {
      text(v, field, kTextMax);
    } else if constexpr (std::is_same_v<T, Box>) {
      box_fields(*this, v);
    } else if constexpr (std::is_same_v<T, Part>) {
      part_fields(*this, v);
    } else if constexpr (std::is_same_v<T, Range>) {
      range_fields(*this, v);
    } else if constexpr (std::is_same_v<T, Timing>) {
      timing_fields(*this, v);
    } else if constexpr (std::is_same_v<T, Queue>) {
      queue_fields(*this, v);
    } else {  // a list
      v.resize(count(field, kLeast<typename T::value_type>));
      for (auto& e : v) (*this)(e, field);
    }
  }
  void bytes(std::vector<std::byte>& b, const char* field, std::size_t most) {
    const auto n = count(field, 1);
    if (n > most) throw Malformed{fmt::format("{} declares {} bytes of {}, over the most, {}", what(), n, field, most)};
    b.assign(in_.begin() + std::ptrdiff_t(at_), in_.begin() + std::ptrdiff_t(at_ + n));
    at_ += n;
  }
  void text(std::string& s, const char* field, std::size_t most) {
    std::vector<std::byte> b;
    bytes(b, field, most);
    s.assign(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void end() const {
    if (left() != 0) throw Malformed{fmt::format("{} has {} bytes after its last field", what(), left())};
  }

 private:
  // A count of elements of at least `each` bytes that must all fit in what remains.
  std::uint64_t count(const char* field, std::size_t each) {
    const auto n = get<std::uint64_t>(field);
    if (n > kCountMax || n * each > left())
      throw Malformed{fmt::format("{} declares {} {}, but {} bytes remain", what(), n, field, left())};
    return n;
  }
  std::size_t left() const { return in_.size() - at_; }
  void need(std::size_t n, const char* field) const {
    if (left() < n)
      throw Malformed{fmt::format("{} ends inside {} ({} bytes remain of the {} it needs)", what(), field, left(), n)};
  }
  std::string what() const { return kind_ ? fmt::format("a {} message", kind_) : std::string("a message"); }
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
  const char* kind_;
};

template <class IO, class M>
void fields(IO& io, M& x) {
  using T = std::remove_const_t<M>;
  if constexpr (std::is_same_v<T, Hello>) {
    io(x.version, "version");
    io.text(x.token, "token", kTokenMax);
  } else if constexpr (std::is_same_v<T, Open>) {
    io(x.request, "request");
    io(x.device, "device");
  } else if constexpr (std::is_same_v<T, Alloc>) {
    io(x.request, "request");
    io(x.device, "device");
    io(x.memory, "memory");
    io(x.bytes, "bytes");
  } else if constexpr (std::is_same_v<T, Free>) {
    io(x.device, "device");
    io(x.region, "region");
  } else if constexpr (std::is_same_v<T, MapHost>) {
    io(x.request, "request");
    io(x.device, "device");
    io(x.bytes, "bytes");
    io(x.address, "address");
  } else if constexpr (std::is_same_v<T, Image>) {
    io(x.request, "request");
    io(x.device, "device");
    io.bytes(x.binary, "binary", ~std::size_t(0));
  } else if constexpr (std::is_same_v<T, Entry>) {
    io(x.request, "request");
    io(x.device, "device");
    io(x.image, "image");
    io(x.name, "name");
  } else if constexpr (std::is_same_v<T, Unload>) {
    io(x.device, "device");
    io(x.image, "image");
  } else if constexpr (std::is_same_v<T, Room>) {
    io(x.request, "request");
    io(x.device, "device");
    io(x.waits, "waits");
    io(x.parts, "parts");
  } else if constexpr (std::is_same_v<T, Submit>) {
    io(x.device, "device");
    io(x.value, "value");
    io(x.parts, "parts");
    io(x.uploads, "uploads");
    io(x.downloads, "downloads");
    io(x.timed, "timed");
  } else if constexpr (std::is_same_v<T, Commit>) {
    io(x.device, "device");
    io(x.value, "value");
  } else if constexpr (std::is_same_v<T, Grow>) {
    io(x.request, "request");
    io(x.device, "device");
  } else if constexpr (std::is_same_v<T, Stop>) {
    io(x.request, "request");
    io(x.device, "device");
    io(x.why, "why");
  } else if constexpr (std::is_same_v<T, Close>) {
    io(x.device, "device");
  } else if constexpr (std::is_same_v<T, Clock>) {
    io(x.request, "request");
  } else if constexpr (std::is_same_v<T, Welcome>) {
    io(x.admitted, "admitted");
    io(x.why, "why");
    io(x.devices, "devices");
    io(x.now, "now");
  } else if constexpr (std::is_same_v<T, Opened>) {
    io(x.request, "request");
    io(x.ok, "ok");
    io(x.why, "why");
    io(x.device, "device");
    io(x.arch, "arch");
    io(x.budget, "budget");
    io(x.queues, "queues");
    io(x.copy_engine, "copy_engine");
    io(x.hang_ms, "hang_ms");
    io(x.alignment, "alignment");
    io(x.cache_bytes, "cache_bytes");
    io(x.word, "word");
  } else if constexpr (std::is_same_v<T, Reply>) {
    io(x.request, "request");
    io(x.status, "status");
    io(x.a, "a");
    io(x.b, "b");
    io(x.c, "c");
    io(x.d, "d");
    io(x.why, "why");
  } else if constexpr (std::is_same_v<T, Reached>) {
    io(x.device, "device");
    io(x.from, "from");
    io(x.to, "to");
    io(x.times, "times");
  } else if constexpr (std::is_same_v<T, Lost>) {
    io(x.device, "device");
    io(x.why, "why");
  } else if constexpr (std::is_same_v<T, Data>) {
    io(x.device, "device");
    io(x.value, "value");
    io(x.region, "region");
    io(x.offset, "offset");
    io(x.length, "length");
  }
}

// Each message's type: its index in Message is its place in this list.
constexpr Type kTypes[] = {Type::Hello,  Type::Open,   Type::Alloc,   Type::Free,   Type::MapHost, Type::Image,
                           Type::Entry,  Type::Unload, Type::Room,    Type::Submit, Type::Commit,  Type::Grow,
                           Type::Stop,   Type::Close,  Type::Clock,   Type::Welcome, Type::Opened, Type::Reply,
                           Type::Reached, Type::Lost, Type::Data};
static_assert(std::size(kTypes) == std::variant_size_v<Message>);

template <class T, std::size_t I = 0>
constexpr Type type_of() {
  if constexpr (std::is_same_v<T, std::variant_alternative_t<I, Message>>)
    return kTypes[I];
  else
    return type_of<T, I + 1>();
}

// The message of type `type` read from r.
template <std::size_t I = 0>
Message get_body(std::uint16_t type, Reader& r) {
  if constexpr (I == std::variant_size_v<Message>) {
    throw Malformed{fmt::format("a message of type {}, which protocol version {} does not have", type, kVersion)};
  } else {
    if (std::uint16_t(kTypes[I]) != type) return get_body<I + 1>(type, r);
    std::variant_alternative_t<I, Message> x;
    fields(r, x);
    return x;
  }
}

}  // namespace

const char* type_name(std::uint16_t type) {
  switch (Type(type)) {
    case Type::Hello: return "hello";
    case Type::Open: return "open";
    case Type::Alloc: return "alloc";
    case Type::Free: return "free";
    case Type::MapHost: return "map_host";
    case Type::Image: return "image";
    case Type::Entry: return "entry";
    case Type::Unload: return "unload";
    case Type::Room: return "room";
    case Type::Submit: return "submit";
    case Type::Commit: return "commit";
    case Type::Grow: return "grow";
    case Type::Stop: return "stop";
    case Type::Close: return "close";
    case Type::Clock: return "clock";
    case Type::Welcome: return "welcome";
    case Type::Opened: return "opened";
    case Type::Reply: return "reply";
    case Type::Reached: return "reached";
    case Type::Lost: return "lost";
    case Type::Data: return "data";
  }
  return "unknown";
}

template <class T>
void encode(const T& m, std::vector<std::byte>& out) {
  Writer w(out);  // over what out holds, trimmed at the end
  w.put(kMagic);
  w.put(kVersion);
  w.put(std::uint16_t(type_of<T>()));
  w.put<std::uint32_t>(0);  // the body's length, written below
  fields(w, m);
  w.finish();
  const auto body = std::uint32_t(out.size() - kHeaderBytes);
  for (std::size_t i = 0; i < 4; ++i) out[8 + i] = std::byte(std::uint8_t(body >> (8 * i)));
}

#define RIG_WIRE_ENCODE(T) template void encode<T>(const T&, std::vector<std::byte>&);
RIG_WIRE_ENCODE(Hello)
RIG_WIRE_ENCODE(Open)
RIG_WIRE_ENCODE(Alloc)
RIG_WIRE_ENCODE(Free)
RIG_WIRE_ENCODE(MapHost)
RIG_WIRE_ENCODE(Image)
RIG_WIRE_ENCODE(Entry)
RIG_WIRE_ENCODE(Unload)
RIG_WIRE_ENCODE(Room)
RIG_WIRE_ENCODE(Submit)
RIG_WIRE_ENCODE(Commit)
RIG_WIRE_ENCODE(Grow)
RIG_WIRE_ENCODE(Stop)
RIG_WIRE_ENCODE(Close)
RIG_WIRE_ENCODE(Clock)
RIG_WIRE_ENCODE(Welcome)
RIG_WIRE_ENCODE(Opened)
RIG_WIRE_ENCODE(Reply)
RIG_WIRE_ENCODE(Reached)
RIG_WIRE_ENCODE(Lost)
RIG_WIRE_ENCODE(Data)
#undef RIG_WIRE_ENCODE

void encode(const Message& m, std::vector<std::byte>& out) {
  std::visit([&](const auto& x) { encode(x, out); }, m);
}

std::vector<std::byte> encode(const Message& m) {
  std::vector<std::byte> out;
  encode(m, out);
  return out;
}

std::expected<Message, std::string> decode(std::span<const std::byte> bytes) {
  try {
    Reader h(bytes);
    if (bytes.size() < kHeaderBytes)
      return std::unexpected(fmt::format("a message of {} bytes, shorter than the {}-byte header", bytes.size(),
                                         kHeaderBytes));
    const auto magic = h.get<std::uint32_t>("magic");
    if (magic != kMagic) return std::unexpected(fmt::format("a message whose magic is {:#010x}, not rig's", magic));
    const auto version = h.get<std::uint16_t>("version");
    if (version != kVersion)
      return std::unexpected(fmt::format("a message of protocol version {}; this rig speaks version {}", version,
                                         kVersion));
    const auto type = h.get<std::uint16_t>("type");
    const auto length = h.get<std::uint32_t>("length");
    if (length != bytes.size() - kHeaderBytes)
      return std::unexpected(fmt::format("a {} message declares a body of {} bytes, but {} follow", type_name(type),
                                         length, bytes.size() - kHeaderBytes));
    Reader r(bytes.subspan(kHeaderBytes), type_name(type));
    Message m = get_body(type, r);
    r.end();
    return m;
  } catch (const Malformed& e) {
    return std::unexpected(e.why);
  }
}

}  // namespace rig::remote::wire
