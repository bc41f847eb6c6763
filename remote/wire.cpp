// wire.cpp — encoding and bounds-checked decoding of the remote protocol's messages.
#include "wire.hpp"

#include <fmt/format.h>

#include <cstring>
#include <type_traits>

namespace rig::remote::wire {
namespace {

// The most parts, boxes, spans or words a message may declare: far above what rig makes,
// and small enough that a count times an element's size cannot overflow.
constexpr std::uint64_t kCountMax = std::uint64_t(1) << 32;

// The reason a message is malformed.
struct Malformed {
  std::string why;
};

class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : out_(out) {}
  template <class T>
  void put(T v) {
    static_assert(std::is_integral_v<T>);
    using U = std::make_unsigned_t<T>;
    U u = U(v);
    for (std::size_t i = 0; i < sizeof(T); ++i) out_.push_back(std::byte(std::uint8_t(u >> (8 * i))));
  }
  void bytes(std::span<const std::byte> b) {
    put<std::uint64_t>(b.size());
    out_.insert(out_.end(), b.begin(), b.end());
  }
  void text(const std::string& s) { bytes(std::as_bytes(std::span(s.data(), s.size()))); }
  void u32s(const std::vector<std::uint32_t>& v) {
    put<std::uint64_t>(v.size());
    for (auto x : v) put(x);
  }

 private:
  std::vector<std::byte>& out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> in, const char* what) : in_(in), what_(what) {}
  template <class T>
  T get(const char* field) {
    static_assert(std::is_integral_v<T>);
    need(sizeof(T), field);
    std::make_unsigned_t<T> u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) u |= std::make_unsigned_t<T>(std::uint8_t(in_[at_ + i])) << (8 * i);
    at_ += sizeof(T);
    return T(u);
  }
  // A count of elements of `each` bytes that must all fit in what remains.
  std::uint64_t count(const char* field, std::size_t each) {
    const auto n = get<std::uint64_t>(field);
    if (n > kCountMax || n * each > left())
      throw Malformed{fmt::format("{} declares {} {}, but {} bytes remain", what_, n, field, left())};
    return n;
  }
  std::vector<std::byte> bytes(const char* field, std::size_t most = ~std::size_t(0)) {
    const auto n = count(field, 1);
    if (n > most) throw Malformed{fmt::format("{} declares {} bytes of {}, over the most, {}", what_, n, field, most)};
    std::vector<std::byte> b(in_.begin() + std::ptrdiff_t(at_), in_.begin() + std::ptrdiff_t(at_ + n));
    at_ += n;
    return b;
  }
  std::string text(const char* field, std::size_t most = kTextMax) {
    auto b = bytes(field, most);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  std::vector<std::uint32_t> u32s(const char* field) {
    const auto n = count(field, 4);
    std::vector<std::uint32_t> v(n);
    for (auto& x : v) x = get<std::uint32_t>(field);
    return v;
  }
  bool get_bool(const char* field) {
    const auto b = get<std::uint8_t>(field);
    if (b > 1) throw Malformed{fmt::format("{}: {} is {}, neither 0 nor 1", what_, field, b)};
    return b == 1;
  }
  std::size_t left() const { return in_.size() - at_; }
  void end() const {
    if (left() != 0) throw Malformed{fmt::format("{} has {} bytes after its last field", what_, left())};
  }

 private:
  void need(std::size_t n, const char* field) const {
    if (left() < n) throw Malformed{fmt::format("{} ends inside {} ({} bytes remain of the {} it needs)", what_, field, left(), n)};
  }
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
  const char* what_;
};

constexpr std::size_t kPartBytesMin = 4 + 4 + 8;  // queue, kind, the count of after
constexpr std::size_t kSpanBytesMin = 8 + 8 + 8;

void put_part(Writer& w, const Part& p) {
  w.put(p.queue);
  w.put(p.kind);
  w.u32s(p.after);
  w.u32s(p.words);
  w.put(p.src);
  w.put(p.dst);
  w.put(p.src_region);
  w.put(p.dst_region);
  w.put(p.src_offset);
  w.put(p.dst_offset);
  w.put(p.fill);
  w.put<std::uint64_t>(p.boxes.size());
  for (const Box& b : p.boxes) {
    w.put(b.src_offset);
    w.put(b.dst_offset);
    w.put(b.width);
    w.put(b.rows);
    w.put(b.src_pitch);
    w.put(b.dst_pitch);
  }
  w.put(p.entry);
  for (auto g : p.groups) w.put(g);
  for (auto t : p.threads) w.put(t);
  w.put(p.shared);
  w.bytes(p.params);
  w.u32s(p.refs);
}

Part get_part(Reader& r) {
  Part p;
  p.queue = r.get<std::uint32_t>("queue");
  p.kind = r.get<std::uint32_t>("kind");
  p.after = r.u32s("after");
  p.words = r.u32s("words");
  p.src = r.get<std::uint64_t>("src");
  p.dst = r.get<std::uint64_t>("dst");
  p.src_region = r.get<std::uint64_t>("src_region");
  p.dst_region = r.get<std::uint64_t>("dst_region");
  p.src_offset = r.get<std::uint64_t>("src_offset");
  p.dst_offset = r.get<std::uint64_t>("dst_offset");
  p.fill = r.get<std::int32_t>("fill");
  const auto boxes = r.count("boxes", 48);
  p.boxes.resize(boxes);
  for (Box& b : p.boxes) {
    b.src_offset = r.get<std::uint64_t>("box");
    b.dst_offset = r.get<std::uint64_t>("box");
    b.width = r.get<std::uint64_t>("box");
    b.rows = r.get<std::uint64_t>("box");
    b.src_pitch = r.get<std::uint64_t>("box");
    b.dst_pitch = r.get<std::uint64_t>("box");
  }
  p.entry = r.get<std::uint64_t>("entry");
  for (auto& g : p.groups) g = r.get<std::uint32_t>("groups");
  for (auto& t : p.threads) t = r.get<std::uint32_t>("threads");
  p.shared = r.get<std::uint32_t>("shared");
  p.params = r.bytes("params", 4096);
  p.refs = r.u32s("refs");
  return p;
}

void put_parts(Writer& w, const std::vector<Part>& parts) {
  w.put<std::uint64_t>(parts.size());
  for (const Part& p : parts) put_part(w, p);
}
std::vector<Part> get_parts(Reader& r) {
  std::vector<Part> parts(r.count("parts", kPartBytesMin));
  for (Part& p : parts) p = get_part(r);
  return parts;
}

void put_spans(Writer& w, const std::vector<Span>& spans) {
  w.put<std::uint64_t>(spans.size());
  for (const Span& s : spans) {
    w.put(s.region);
    w.put(s.offset);
    w.bytes(s.bytes);
  }
}
std::vector<Span> get_spans(Reader& r) {
  std::vector<Span> spans(r.count("spans", kSpanBytesMin));
  for (Span& s : spans) {
    s.region = r.get<std::uint64_t>("span region");
    s.offset = r.get<std::uint64_t>("span offset");
    s.bytes = r.bytes("span bytes");
  }
  return spans;
}

// Each message's type: its index in Message is its place in this list.
constexpr Type kTypes[] = {Type::Hello,   Type::Open,   Type::Alloc,  Type::Free,  Type::MapHost, Type::Image,
                           Type::Entry,   Type::Unload, Type::Room,   Type::Submit, Type::Commit, Type::Grow,
                           Type::Stop,    Type::Close,  Type::Welcome, Type::Opened, Type::Reply, Type::Reached, Type::Lost};
static_assert(std::size(kTypes) == std::variant_size_v<Message>);

template <class T, std::size_t I = 0>
constexpr Type type_of() {
  if constexpr (std::is_same_v<T, std::variant_alternative_t<I, Message>>)
    return kTypes[I];
  else
    return type_of<T, I + 1>();
}

template <class T>
void put_body(Writer& w, const T& x) {
  {
    {
        if constexpr (std::is_same_v<T, Hello>) {
          w.put(x.version);
          w.text(x.token);
        } else if constexpr (std::is_same_v<T, Open>) {
          w.put(x.request);
          w.text(x.device);
        } else if constexpr (std::is_same_v<T, Alloc>) {
          w.put(x.request);
          w.put(x.device);
          w.put(x.memory);
          w.put(x.bytes);
        } else if constexpr (std::is_same_v<T, Free>) {
          w.put(x.device);
          w.put(x.region);
        } else if constexpr (std::is_same_v<T, MapHost>) {
          w.put(x.request);
          w.put(x.device);
          w.put(x.bytes);
        } else if constexpr (std::is_same_v<T, Image>) {
          w.put(x.request);
          w.put(x.device);
          w.bytes(x.binary);
        } else if constexpr (std::is_same_v<T, Entry>) {
          w.put(x.request);
          w.put(x.device);
          w.put(x.image);
          w.text(x.name);
        } else if constexpr (std::is_same_v<T, Unload>) {
          w.put(x.device);
          w.put(x.image);
        } else if constexpr (std::is_same_v<T, Room>) {
          w.put(x.request);
          w.put(x.device);
          w.put(x.waits);
          put_parts(w, x.parts);
        } else if constexpr (std::is_same_v<T, Submit>) {
          w.put(x.device);
          w.put(x.value);
          put_parts(w, x.parts);
          put_spans(w, x.uploads);
          w.put<std::uint64_t>(x.downloads.size());
          for (const Range& d : x.downloads) {
            w.put(d.region);
            w.put(d.offset);
            w.put(d.length);
          }
        } else if constexpr (std::is_same_v<T, Commit>) {
          w.put(x.device);
          w.put(x.value);
        } else if constexpr (std::is_same_v<T, Grow>) {
          w.put(x.request);
          w.put(x.device);
        } else if constexpr (std::is_same_v<T, Stop>) {
          w.put(x.request);
          w.put(x.device);
          w.text(x.why);
        } else if constexpr (std::is_same_v<T, Close>) {
          w.put(x.device);
        } else if constexpr (std::is_same_v<T, Welcome>) {
          w.put<std::uint8_t>(x.admitted);
          w.text(x.why);
          w.put<std::uint64_t>(x.devices.size());
          for (const auto& d : x.devices) w.text(d);
        } else if constexpr (std::is_same_v<T, Opened>) {
          w.put(x.request);
          w.put<std::uint8_t>(x.ok);
          w.text(x.why);
          w.put(x.device);
          w.text(x.arch);
          w.put(x.budget);
          w.put<std::uint64_t>(x.queues.size());
          for (const auto& q : x.queues) {
            w.text(q.name);
            w.u32s(q.runs);
          }
          w.put(x.copy_engine);
          w.put(x.hang_ms);
          w.put(x.alignment);
          w.put(x.cache_bytes);
          w.put(x.word);
        } else if constexpr (std::is_same_v<T, Reply>) {
          w.put(x.request);
          w.put(x.status);
          w.put(x.a);
          w.put(x.b);
          w.put(x.c);
          w.put(x.d);
          w.text(x.why);
        } else if constexpr (std::is_same_v<T, Reached>) {
          w.put(x.device);
          w.put(x.from);
          w.put(x.to);
          put_spans(w, x.downloads);
        } else if constexpr (std::is_same_v<T, Lost>) {
          w.put(x.device);
          w.text(x.why);
        }
    }
  }
}

Message get_body(Type type, Reader& r) {
  switch (type) {
    case Type::Hello: {
      Hello x;
      x.version = r.get<std::uint16_t>("version");
      x.token = r.text("token", kTokenMax);
      return x;
    }
    case Type::Open: {
      Open x;
      x.request = r.get<std::uint64_t>("request");
      x.device = r.text("device");
      return x;
    }
    case Type::Alloc: {
      Alloc x;
      x.request = r.get<std::uint64_t>("request");
      x.device = r.get<std::uint32_t>("device");
      x.memory = r.get<std::uint32_t>("memory");
      x.bytes = r.get<std::uint64_t>("bytes");
      return x;
    }
    case Type::Free: {
      Free x;
      x.device = r.get<std::uint32_t>("device");
      x.region = r.get<std::uint64_t>("region");
      return x;
    }
    case Type::MapHost: {
      MapHost x;
      x.request = r.get<std::uint64_t>("request");
      x.device = r.get<std::uint32_t>("device");
      x.bytes = r.get<std::uint64_t>("bytes");
      return x;
    }
    case Type::Image: {
      Image x;
      x.request = r.get<std::uint64_t>("request");
      x.device = r.get<std::uint32_t>("device");
      x.binary = r.bytes("binary");
      return x;
    }
    case Type::Entry: {
      Entry x;
      x.request = r.get<std::uint64_t>("request");
      x.device = r.get<std::uint32_t>("device");
      x.image = r.get<std::uint64_t>("image");
      x.name = r.text("name");
      return x;
    }
    case Type::Unload: {
      Unload x;
      x.device = r.get<std::uint32_t>("device");
      x.image = r.get<std::uint64_t>("image");
      return x;
    }
    case Type::Room: {
      Room x;
      x.request = r.get<std::uint64_t>("request");
      x.device = r.get<std::uint32_t>("device");
      x.waits = r.get<std::uint32_t>("waits");
      x.parts = get_parts(r);
      return x;
    }
    case Type::Submit: {
      Submit x;
      x.device = r.get<std::uint32_t>("device");
      x.value = r.get<std::uint64_t>("value");
      x.parts = get_parts(r);
      x.uploads = get_spans(r);
      x.downloads.resize(r.count("downloads", 24));
      for (Range& d : x.downloads) {
        d.region = r.get<std::uint64_t>("download region");
        d.offset = r.get<std::uint64_t>("download offset");
        d.length = r.get<std::uint64_t>("download length");
      }
      return x;
    }
    case Type::Commit: {
      Commit x;
      x.device = r.get<std::uint32_t>("device");
      x.value = r.get<std::uint64_t>("value");
      return x;
    }
    case Type::Grow: {
      Grow x;
      x.request = r.get<std::uint64_t>("request");
      x.device = r.get<std::uint32_t>("device");
      return x;
    }
    case Type::Stop: {
      Stop x;
      x.request = r.get<std::uint64_t>("request");
      x.device = r.get<std::uint32_t>("device");
      x.why = r.text("why");
      return x;
    }
    case Type::Close: {
      Close x;
      x.device = r.get<std::uint32_t>("device");
      return x;
    }
    case Type::Welcome: {
      Welcome x;
      x.admitted = r.get_bool("admitted");
      x.why = r.text("why");
      x.devices.resize(r.count("devices", 8));
      for (auto& d : x.devices) d = r.text("device name");
      return x;
    }
    case Type::Opened: {
      Opened x;
      x.request = r.get<std::uint64_t>("request");
      x.ok = r.get_bool("ok");
      x.why = r.text("why");
      x.device = r.get<std::uint32_t>("device");
      x.arch = r.text("arch");
      x.budget = r.get<std::uint64_t>("budget");
      x.queues.resize(r.count("queues", 16));
      for (auto& q : x.queues) {
        q.name = r.text("queue name");
        q.runs = r.u32s("queue runs");
      }
      x.copy_engine = r.get<std::int32_t>("copy_engine");
      x.hang_ms = r.get<std::int32_t>("hang_ms");
      x.alignment = r.get<std::uint64_t>("alignment");
      x.cache_bytes = r.get<std::uint64_t>("cache_bytes");
      x.word = r.get<std::uint64_t>("word");
      return x;
    }
    case Type::Reply: {
      Reply x;
      x.request = r.get<std::uint64_t>("request");
      x.status = r.get<std::uint32_t>("status");
      x.a = r.get<std::uint64_t>("a");
      x.b = r.get<std::uint64_t>("b");
      x.c = r.get<std::uint64_t>("c");
      x.d = r.get<std::uint64_t>("d");
      x.why = r.text("why");
      return x;
    }
    case Type::Reached: {
      Reached x;
      x.device = r.get<std::uint32_t>("device");
      x.from = r.get<std::uint64_t>("from");
      x.to = r.get<std::uint64_t>("to");
      x.downloads = get_spans(r);
      return x;
    }
    case Type::Lost: {
      Lost x;
      x.device = r.get<std::uint32_t>("device");
      x.why = r.text("why");
      return x;
    }
  }
  throw Malformed{fmt::format("a message of type {}, which protocol version {} does not have", unsigned(type), kVersion)};
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
    case Type::Welcome: return "welcome";
    case Type::Opened: return "opened";
    case Type::Reply: return "reply";
    case Type::Reached: return "reached";
    case Type::Lost: return "lost";
  }
  return "unknown";
}

template <class T>
void encode(const T& m, std::vector<std::byte>& out) {
  out.clear();
  Writer w(out);
  w.put(kMagic);
  w.put(kVersion);
  w.put(std::uint16_t(type_of<T>()));
  w.put<std::uint32_t>(0);  // the body's length, written below
  put_body(w, m);
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
RIG_WIRE_ENCODE(Welcome)
RIG_WIRE_ENCODE(Opened)
RIG_WIRE_ENCODE(Reply)
RIG_WIRE_ENCODE(Reached)
RIG_WIRE_ENCODE(Lost)
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
    Reader h(bytes, "a message");
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
    const std::string what = fmt::format("a {} message", type_name(type));
    Reader r(bytes.subspan(kHeaderBytes), what.c_str());
    Message m = get_body(Type(type), r);
    r.end();
    return m;
  } catch (const Malformed& e) {
    return std::unexpected(e.why);
  }
}

}  // namespace rig::remote::wire
