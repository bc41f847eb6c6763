// The remote protocol as pure code (remote/wire.hpp): each message travels as itself, and
// every malformed message is refused with the reason, never read past its end.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "wire.hpp"

using namespace rig::remote::wire;

namespace {

std::vector<std::byte> bytes(std::string_view s) {
  auto b = std::as_bytes(std::span(s.data(), s.size()));
  return {b.begin(), b.end()};
}

Part launch_part() {
  Part p;
  p.queue = 0;
  p.kind = 4;
  p.after = {1, 2};
  p.entry = 7;
  p.groups[0] = 64;
  p.threads[1] = 2;
  p.shared = 128;
  p.params = bytes("0123456789abcdef");
  p.refs = {0, 8};
  return p;
}

Part copy_part() {
  Part p;
  p.kind = 3;
  p.src = 0x1000;
  p.dst = 0x2000;
  p.src_region = 3;
  p.dst_region = 4;
  p.boxes = {Box{0, 16, 64, 2, 64, 128}};
  return p;
}

Submit a_submit() {
  Submit s;
  s.device = 2;
  s.value = 41;
  s.parts = {launch_part(), copy_part()};
  s.uploads = {Range{3, 8, 512}};
  s.downloads = {Range{4, 0, 4096}};
  return s;
}

template <class T>
T round_trip(const T& m) {
  auto decoded = decode(encode(Message{m}));
  REQUIRE_MESSAGE(decoded.has_value(), decoded.error());
  REQUIRE(std::holds_alternative<T>(*decoded));
  return std::get<T>(*decoded);
}

// Writes a little-endian u32 at `at`.
void put_u32(std::vector<std::byte>& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = std::byte(std::uint8_t(v >> (8 * i)));
}

}  // namespace

TEST_CASE("every message decodes to what was encoded") {
  CHECK(round_trip(Hello{kVersion, "secret"}).token == "secret");
  CHECK(round_trip(Open{5, "CPU"}).device == "CPU");
  auto alloc = round_trip(Alloc{6, 1, 0, 1 << 20});
  CHECK((alloc.request == 6 && alloc.device == 1 && alloc.bytes == 1 << 20));
  CHECK(round_trip(Free{1, 9}).region == 9);
  auto map = round_trip(MapHost{7, 1, 8192, 0x7f0000001000});
  CHECK((map.bytes == 8192 && map.address == 0x7f0000001000));
  auto data = round_trip(Data{2, 11, 5, 4096, 8192});
  CHECK((data.device == 2 && data.value == 11 && data.region == 5 && data.offset == 4096 && data.length == 8192));
  CHECK(round_trip(Image{8, 1, bytes("\x7f" "ELF")}).binary == bytes("\x7f" "ELF"));
  CHECK(round_trip(Entry{9, 1, 3, "saxpy"}).name == "saxpy");
  CHECK(round_trip(Unload{1, 3}).image == 3);
  auto room = round_trip(Room{10, 1, 2, {launch_part()}});
  CHECK((room.waits == 2 && room.parts == std::vector<Part>{launch_part()}));
  auto submit = round_trip(a_submit());
  CHECK_FALSE(submit.timed);
  CHECK(submit.parts == a_submit().parts);
  CHECK(submit.uploads == a_submit().uploads);
  CHECK(submit.downloads == a_submit().downloads);
  CHECK(submit.value == 41);
  CHECK(round_trip(Commit{1, 41}).value == 41);
  CHECK(round_trip(Grow{11, 1}).request == 11);
  CHECK(round_trip(Stop{14, 1, "closed"}).why == "closed");
  CHECK(round_trip(Close{3}).device == 3);
  CHECK(round_trip(Clock{15}).request == 15);
  auto welcome = round_trip(Welcome{true, "", {"CPU", "MEM"}, 123456789});
  CHECK((welcome.admitted && welcome.devices == std::vector<std::string>{"CPU", "MEM"} && welcome.now == 123456789));
  Opened opened{12, true, "", 3, "x86_64", 1 << 30, {Queue{"COMPUTE:0", {4, 2, 3}}}, 0, -1, 16, 1 << 20, 5};
  auto o = round_trip(opened);
  CHECK((o.queues == opened.queues && o.arch == "x86_64" && o.word == 5 && o.hang_ms == -1));
  auto reply = round_trip(Reply{13, kError, 1, 2, 3, 4, "no"});
  CHECK((reply.status == kError && reply.d == 4 && reply.why == "no"));
  auto reached = round_trip(Reached{2, 40, 41, {Timing{41, 1000, 2500}}});
  CHECK((reached.device == 2 && reached.from == 40 && reached.to == 41));
  CHECK(reached.times == std::vector<Timing>{Timing{41, 1000, 2500}});
  CHECK(round_trip(Lost{2, "fill returned 3"}).why == "fill returned 3");
}

TEST_CASE("encoding into a vector that held another message leaves exactly the new one") {
  // Senders encode each message into the same vector: what a longer one left there must not
  // trail a shorter one, and a longer one must grow past what a shorter one left.
  std::vector<std::byte> out;
  encode(Image{1, 1, std::vector<std::byte>(5000, std::byte{7})}, out);
  encode(Commit{1, 2}, out);
  CHECK(out == encode(Message{Commit{1, 2}}));
  REQUIRE(decode(out).has_value());
  CHECK(std::get<Commit>(*decode(out)).value == 2);
  encode(a_submit(), out);
  CHECK(out == encode(Message{a_submit()}));
  encode(Image{3, 1, bytes("abcd")}, out);
  CHECK(out == encode(Message{Image{3, 1, bytes("abcd")}}));
}

TEST_CASE("a message whose declared body length is not what follows is refused") {
  auto b = encode(Message{Commit{1, 2}});
  put_u32(b, 8, std::uint32_t(b.size()));  // more than follows
  auto m = decode(b);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error() == "a commit message declares a body of 24 bytes, but 12 follow");
  b = encode(Message{Commit{1, 2}});
  b.push_back(std::byte{0});  // a byte after the declared body
  CHECK_FALSE(decode(b).has_value());
}

TEST_CASE("a count that runs past the message's end is refused, naming the field") {
  auto b = encode(Message{Image{1, 1, bytes("abcd")}});
  // The binary's length follows the request (8) and the device (4): claim 2^40 bytes.
  b[kHeaderBytes + 12 + 5] = std::byte{1};
  auto m = decode(b);
  REQUIRE_FALSE(m.has_value());
  CHECK(m.error() == "a image message declares 1099511627780 binary, but 4 bytes remain");
}

TEST_CASE("every truncation of a message is refused, never read past its end") {
  const auto whole = encode(Message{a_submit()});
  for (std::size_t n = 0; n < whole.size(); ++n) {
    std::vector<std::byte> cut(whole.begin(), whole.begin() + std::ptrdiff_t(n));
    if (n >= kHeaderBytes) put_u32(cut, 8, std::uint32_t(n - kHeaderBytes));  // a header that agrees
    auto m = decode(cut);
    CAPTURE(n);
    CHECK_FALSE(m.has_value());
  }
}

TEST_CASE("a message of another protocol version, magic or type is refused") {
  auto b = encode(Message{Commit{1, 2}});
  b[4] = std::byte{1};
  REQUIRE_FALSE(decode(b).has_value());
  CHECK(decode(b).error() == "a message of protocol version 1; this rig speaks version 3");
  b = encode(Message{Commit{1, 2}});
  b[0] = std::byte{'X'};
  CHECK(decode(b).error().starts_with("a message whose magic is"));
  b = encode(Message{Commit{1, 2}});
  b[6] = std::byte{99};
  REQUIRE_FALSE(decode(b).has_value());
  CHECK(decode(b).error() == "a message of type 99, which protocol version 3 does not have");
  CHECK(decode({}).error() == "a message of 0 bytes, shorter than the 12-byte header");
}

TEST_CASE("a flag that is neither 0 nor 1 and a token over the limit are refused") {
  auto b = encode(Message{Welcome{true, "", {}}});
  b[kHeaderBytes] = std::byte{2};
  CHECK(decode(b).error() == "a welcome message: admitted is 2, neither 0 nor 1");
  auto long_token = decode(encode(Message{Hello{kVersion, std::string(kTokenMax + 1, 'x')}}));
  REQUIRE_FALSE(long_token.has_value());
  CHECK(long_token.error() == "a hello message declares 4097 bytes of token, over the most, 4096");
}
