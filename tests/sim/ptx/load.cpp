// Module::load: the tokenizer, the parser of module and function text, and the decoder of
// instructions into detail::Instr. Everything refused throws Refusal inside, and load()
// turns it into an error naming the module and the line.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>

#include "decoded.hpp"

namespace rig::ptx {
namespace {

using namespace detail;

struct Refusal {
  std::uint32_t line;
  std::string what;
};

// ---------------------------------------------------------------------------------------
// Tokens

enum class Tk : std::uint8_t { ident, number, string, punct, end };

struct Token {
  Tk kind;
  std::string_view text;
  std::uint32_t line;
};

bool ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c == '%' || c == '.';
}
bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
bool digit(char c) { return c >= '0' && c <= '9'; }

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  std::uint32_t line = 1;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') { ++line; ++i; continue; }
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') { ++i; continue; }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const std::uint32_t at = line;
      i += 2;
      while (i + 1 < s.size() && !(s[i] == '*' && s[i + 1] == '/')) { if (s[i] == '\n') ++line; ++i; }
      if (i + 1 >= s.size()) throw Refusal{at, "unterminated comment"};
      i += 2;
      continue;
    }
    const std::size_t start = i;
    if (c == '"') {
      ++i;
      while (i < s.size() && s[i] != '"' && s[i] != '\n') ++i;
      if (i >= s.size() || s[i] != '"') throw Refusal{line, "unterminated string"};
      ++i;
      out.push_back({Tk::string, s.substr(start, i - start), line});
    } else if (ident_start(c)) {
      ++i;
      // '::' joins the parts of a name (shared::cta, L1::evict_last); one ':' ends a label.
      while (i < s.size() && (ident_char(s[i]) || (s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':'))) i += s[i] == ':' ? 2 : 1;
      out.push_back({Tk::ident, s.substr(start, i - start), line});
    } else if (digit(c)) {
      ++i;
      while (i < s.size()) {
        const char d = s[i];
        if (digit(d) || (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '.') { ++i; continue; }
        if ((d == '-' || d == '+') && (s[i - 1] == 'e' || s[i - 1] == 'E') && s.substr(start, 2) != "0x" &&
            s.substr(start, 2) != "0X") { ++i; continue; }
        break;
      }
      out.push_back({Tk::number, s.substr(start, i - start), line});
    } else if (std::strchr(",;:{}[]()+-|!@<>=", c) != nullptr && c != '\0') {
      ++i;
      out.push_back({Tk::punct, s.substr(start, 1), line});
    } else {
      throw Refusal{line, fmt::format("unexpected character 0x{:02x}", static_cast<unsigned char>(c))};
    }
  }
  out.push_back({Tk::end, {}, line});
  return out;
}

// A number token: an integer (decimal, 0x hex, 0b binary, leading-0 octal, optional U
// suffix), a float in hex bits (0fXXXXXXXX, 0dXXXXXXXXXXXXXXXX) or a decimal float.
struct Number {
  enum Kind { integer, f32bits, f64bits, decimal } kind;
  std::uint64_t bits = 0;
  double value = 0;
};

Number parse_number(const Token& t) {
  std::string_view s = t.text;
  auto bad = [&] { return Refusal{t.line, fmt::format("malformed number '{}'", s)}; };
  auto hex = [&](std::string_view h, std::size_t n) {
    if (h.size() != n) throw bad();
    std::uint64_t v = 0;
    auto r = std::from_chars(h.data(), h.data() + h.size(), v, 16);
    if (r.ec != std::errc{} || r.ptr != h.data() + h.size()) throw bad();
    return v;
  };
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'f' || s[1] == 'F')) return {Number::f32bits, hex(s.substr(2), 8)};
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'd' || s[1] == 'D')) return {Number::f64bits, hex(s.substr(2), 16)};
  if (s.find_first_of(".eE") != std::string_view::npos && !(s.size() > 1 && (s[1] == 'x' || s[1] == 'X'))) {
    double v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc{} || r.ptr != s.data() + s.size()) throw bad();
    return {Number::decimal, 0, v};
  }
  if (!s.empty() && (s.back() == 'U' || s.back() == 'u')) s.remove_suffix(1);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) { base = 16; s.remove_prefix(2); }
  else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) { base = 2; s.remove_prefix(2); }
  else if (s.size() > 1 && s[0] == '0') { base = 8; s.remove_prefix(1); }
  std::uint64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || r.ec != std::errc{} || r.ptr != s.data() + s.size()) throw bad();
  return {Number::integer, v};
}

std::optional<T> type_named(std::string_view s) {
  static const std::map<std::string_view, T> kTypes = {
      {"pred", T::pred}, {"b8", T::b8}, {"b16", T::b16}, {"b32", T::b32}, {"b64", T::b64}, {"b128", T::b128},
      {"u8", T::u8}, {"u16", T::u16}, {"u32", T::u32}, {"u64", T::u64}, {"s8", T::s8}, {"s16", T::s16},
      {"s32", T::s32}, {"s64", T::s64}, {"f16", T::f16}, {"f16x2", T::f16x2}, {"bf16", T::bf16},
      {"bf16x2", T::bf16x2}, {"f32", T::f32}, {"f64", T::f64}};
  auto it = kTypes.find(s);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}

std::uint64_t f32_bits(double v) { return std::bit_cast<std::uint32_t>(static_cast<float>(v)); }
std::uint64_t f64_bits(double v) { return std::bit_cast<std::uint64_t>(v); }

// An immediate as the bits of type `t`.
std::uint64_t immediate(const Number& n, T t, bool negative) {
  double v = 0;
  switch (n.kind) {
    case Number::integer:
      if (!is_float(t)) return negative ? std::uint64_t(0) - n.bits : n.bits;
      v = negative ? -static_cast<double>(n.bits) : static_cast<double>(n.bits);
      break;
    case Number::f32bits: v = std::bit_cast<float>(static_cast<std::uint32_t>(n.bits)); break;
    case Number::f64bits: v = std::bit_cast<double>(n.bits); break;
    case Number::decimal: v = n.value; break;
  }
  if (negative && n.kind != Number::integer) v = -v;
  if (t == T::f64) return n.kind == Number::f64bits && !negative ? n.bits : f64_bits(v);
  if (t == T::f32) return n.kind == Number::f32bits && !negative ? n.bits : f32_bits(v);
  if (t == T::f16) return std::bit_cast<std::uint16_t>(static_cast<_Float16>(v));
  if (n.kind == Number::f32bits) return negative ? n.bits ^ 0x80000000u : n.bits;
  if (n.kind == Number::f64bits) return negative ? n.bits ^ (1ull << 63) : n.bits;
  // A float literal for an integer type: its integral value, saturated.
  if (std::isnan(v)) return 0;
  if (v >= 0x1p63) return static_cast<std::uint64_t>(INT64_MAX);
  if (v <= -0x1p63) return static_cast<std::uint64_t>(INT64_MIN);
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
}

const std::map<std::string_view, Sreg>& special_registers() {
  static const std::map<std::string_view, Sreg> kSregs = {
      {"%tid.x", Sreg::tid_x}, {"%tid.y", Sreg::tid_y}, {"%tid.z", Sreg::tid_z},
      {"%ntid.x", Sreg::ntid_x}, {"%ntid.y", Sreg::ntid_y}, {"%ntid.z", Sreg::ntid_z},
      {"%ctaid.x", Sreg::ctaid_x}, {"%ctaid.y", Sreg::ctaid_y}, {"%ctaid.z", Sreg::ctaid_z},
      {"%nctaid.x", Sreg::nctaid_x}, {"%nctaid.y", Sreg::nctaid_y}, {"%nctaid.z", Sreg::nctaid_z},
      {"%laneid", Sreg::laneid}, {"%warpid", Sreg::warpid}, {"%nwarpid", Sreg::nwarpid},
      {"%clock", Sreg::clock}, {"%clock64", Sreg::clock64}, {"%globaltimer", Sreg::globaltimer},
      {"%lanemask_eq", Sreg::lanemask_eq}, {"%lanemask_lt", Sreg::lanemask_lt},
      {"%lanemask_le", Sreg::lanemask_le}, {"%lanemask_gt", Sreg::lanemask_gt},
      {"%lanemask_ge", Sreg::lanemask_ge}, {"%smid", Sreg::smid}, {"%nsmid", Sreg::nsmid},
      {"%gridid", Sreg::gridid}, {"%dynamic_smem_size", Sreg::dynamic_smem_size},
      {"%total_smem_size", Sreg::total_smem_size}};
  return kSregs;
}

// ---------------------------------------------------------------------------------------
// Symbols

struct Symbol {
  Area area = Area::none;  // reg: a register; none with function >= 0: a function
  std::uint32_t slot = 0;  // reg
  unsigned width = 0;      // reg: bits
  std::uint64_t offset = 0;  // shared/local/kparam/tparam offset, var index
  std::uint32_t size = 0;
  std::int64_t function = -1;
};

struct RegRange {
  std::uint32_t base;
  std::uint32_t count;
  unsigned width;
};

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return a ? (v + a - 1) / a * a : v; }

// The modifiers of a mnemonic (its parts after the opcode); each must be taken by the
// decoder, and one left over is refused.
class Mods {
 public:
  Mods(std::string_view mnemonic, std::uint32_t line) : mnemonic_(mnemonic), line_(line) {
    std::size_t at = mnemonic.find('.');
    op_ = mnemonic.substr(0, at);
    while (at != std::string_view::npos) {
      const std::size_t next = mnemonic.find('.', at + 1);
      parts_.push_back(mnemonic.substr(at + 1, next == std::string_view::npos ? next : next - at - 1));
      at = next;
    }
    used_.assign(parts_.size(), false);
  }
  std::string_view op() const { return op_; }
  bool take(std::string_view s) {
    for (std::size_t i = 0; i < parts_.size(); ++i)
      if (!used_[i] && parts_[i] == s) { used_[i] = true; return true; }
    return false;
  }
  template <class V>
  std::optional<V> take_of(const std::map<std::string_view, V>& table) {
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      if (used_[i]) continue;
      auto it = table.find(parts_[i]);
      if (it != table.end()) { used_[i] = true; return it->second; }
    }
    return std::nullopt;
  }
  std::optional<T> type() {
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      if (used_[i]) continue;
      if (auto t = type_named(parts_[i])) { used_[i] = true; return t; }
    }
    return std::nullopt;
  }
  T need_type() {
    auto t = type();
    if (!t) throw Refusal{line_, fmt::format("'{}' needs a type", mnemonic_)};
    return *t;
  }
  // Memory-ordering, scope and cache modifiers: this interpreter runs one thread at a time
  // and every access is sequentially consistent, which each of them allows.
  void take_ordering() {
    static constexpr std::string_view kIgnored[] = {"volatile", "relaxed", "acquire", "release", "acq_rel",
                                                    "sc", "weak", "cta", "gpu", "sys", "ca", "cg", "cs",
                                                    "lu", "cv", "wb", "wt", "nc", "aligned"};
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      if (used_[i]) continue;
      const auto p = parts_[i];
      if (std::find(std::begin(kIgnored), std::end(kIgnored), p) != std::end(kIgnored) || p.starts_with("L1::") ||
          p.starts_with("L2::"))
        used_[i] = true;
    }
  }
  void done() const {
    for (std::size_t i = 0; i < parts_.size(); ++i)
      if (!used_[i])
        throw Refusal{line_, fmt::format("unsupported modifier '.{}' in '{}'", parts_[i], mnemonic_)};
  }
  std::string_view mnemonic() const { return mnemonic_; }

 private:
  std::string_view mnemonic_, op_;
  std::uint32_t line_;
  std::vector<std::string_view> parts_;
  std::vector<bool> used_;
};

const std::map<std::string_view, Rnd> kRnd = {{"rn", Rnd::rn}, {"rz", Rnd::rz}, {"rm", Rnd::rm}, {"rp", Rnd::rp},
                                              {"rni", Rnd::rni}, {"rzi", Rnd::rzi}, {"rmi", Rnd::rmi},
                                              {"rpi", Rnd::rpi}};
const std::map<std::string_view, Cmp> kCmp = {
    {"eq", Cmp::eq}, {"ne", Cmp::ne}, {"lt", Cmp::lt}, {"le", Cmp::le}, {"gt", Cmp::gt}, {"ge", Cmp::ge},
    {"lo", Cmp::lo}, {"ls", Cmp::ls}, {"hi", Cmp::hi}, {"hs", Cmp::hs}, {"equ", Cmp::equ}, {"neu", Cmp::neu},
    {"ltu", Cmp::ltu}, {"leu", Cmp::leu}, {"gtu", Cmp::gtu}, {"geu", Cmp::geu}, {"num", Cmp::num},
    {"nan", Cmp::nan}};
const std::map<std::string_view, Bool> kBool = {{"and", Bool::and_}, {"or", Bool::or_}, {"xor", Bool::xor_}};
const std::map<std::string_view, Mem> kMem = {{"global", Mem::global}, {"shared", Mem::shared},
                                              {"shared::cta", Mem::shared}, {"local", Mem::local},
                                              {"const", Mem::constant}, {"param", Mem::param}};
const std::map<std::string_view, Sub> kAtomOps = {
    {"add", Sub::add}, {"min", Sub::min}, {"max", Sub::max}, {"inc", Sub::inc}, {"dec", Sub::dec},
    {"and", Sub::and_}, {"or", Sub::or_}, {"xor", Sub::xor_}, {"exch", Sub::exch}, {"cas", Sub::cas}};

// ---------------------------------------------------------------------------------------
// The parser

class Parser {
 public:
  Parser(std::string_view text, Module::Impl& m) : source_(text), m_(m), toks_(tokenize(text)) {
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      lines_.push_back(text.substr(start, end - start));
      start = end + 1;
    }
  }

  void module() {
    bool version = false;
    while (peek().kind != Tk::end) {
      const Token& t = next();
      if (t.kind != Tk::ident) throw Refusal{t.line, fmt::format("expected a directive, found '{}'", t.text)};
      const auto d = t.text;
      if (d == ".version") {
        const Token& v = next();
        if (v.kind != Tk::number) throw Refusal{v.line, "'.version' needs a number"};
        version = true;
      } else if (d == ".target") {
        do {
          const Token& v = next();
          if (v.kind != Tk::ident || !(v.text.starts_with("sm_") || v.text == "debug"))
            throw Refusal{v.line, fmt::format("unsupported target '{}' (sm_XX targets are)", v.text)};
        } while (accept(","));
      } else if (d == ".address_size") {
        const Token& v = next();
        if (v.text != "64") throw Refusal{v.line, fmt::format("unsupported .address_size {} (64 is)", v.text)};
      } else if (d == ".file") {
        expect_kind(Tk::number);
        expect_kind(Tk::string);
        while (accept(",")) next();
      } else if (d == ".visible" || d == ".extern" || d == ".weak" || d == ".common") {
        if (!version) throw Refusal{t.line, "'.version' must come first"};
        if (d == ".extern") extern_ = true;
        continue;
      } else if (d == ".entry" || d == ".func") {
        if (!version) throw Refusal{t.line, "'.version' must come first"};
        function(d == ".entry", t.line);
      } else if (d == ".global" || d == ".const" || d == ".shared") {
        if (!version) throw Refusal{t.line, "'.version' must come first"};
        variable(d, t.line, true);
      } else {
        throw Refusal{t.line, fmt::format("unsupported directive '{}'", d)};
      }
      extern_ = false;
    }
    if (!version) throw Refusal{1, "no '.version' directive"};
    for (const auto& f : m_.functions)
      for (auto c : f.callees)
        if (!m_.functions[c].defined)
          throw Refusal{0, fmt::format("'{}' calls '{}', which has no body here", f.name, m_.functions[c].name)};
    recursion_check();
  }

 private:
  const Token& peek(std::size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (t.kind == Tk::end) throw Refusal{t.line, "unexpected end of text"};
    ++pos_;
    return t;
  }
  bool accept(std::string_view p) {
    if (peek().text == p && peek().kind != Tk::string) { ++pos_; return true; }
    return false;
  }
  void expect(std::string_view p) {
    const Token& t = peek();
    if (t.text != p || t.kind == Tk::string)
      throw Refusal{t.line, fmt::format("expected '{}', found '{}'", p, t.kind == Tk::end ? "end of text" : t.text)};
    ++pos_;
  }
  const Token& expect_kind(Tk k) {
    const Token& t = peek();
    if (t.kind != k) throw Refusal{t.line, fmt::format("unexpected '{}'", t.kind == Tk::end ? "end of text" : t.text)};
    return next();
  }
  std::uint64_t expect_int() {
    const Token& t = expect_kind(Tk::number);
    const Number n = parse_number(t);
    if (n.kind != Number::integer) throw Refusal{t.line, fmt::format("expected an integer, found '{}'", t.text)};
    return n.bits;
  }
  std::string_view expect_name() {
    const Token& t = expect_kind(Tk::ident);
    if (t.text.starts_with(".")) throw Refusal{t.line, fmt::format("expected a name, found '{}'", t.text)};
    return t.text;
  }

  // --- declarations ------------------------------------------------------------------

  struct Decl {
    std::uint32_t align = 0;
    T type = T::none;
    unsigned vector = 1;
    std::string_view name;
    std::uint64_t elements = 1;
    bool array = false, unsized = false;
  };

  // [.ptr] [.space] [.align N] [.vN] .type name[[N]...] (after the state space directive)
  Decl declaration() {
    Decl d;
    for (;;) {
      const Token& t = peek();
      if (t.kind != Tk::ident || !t.text.starts_with(".")) break;
      next();
      if (t.text == ".align") {
        d.align = static_cast<std::uint32_t>(expect_int());
        if (d.align == 0 || (d.align & (d.align - 1)) != 0 || d.align > 4096)
          throw Refusal{t.line, fmt::format("bad alignment {}", d.align)};
      } else if (t.text == ".v2" || t.text == ".v4") {
        d.vector = t.text == ".v2" ? 2 : 4;
      } else if (t.text == ".ptr" || t.text == ".global" || t.text == ".shared" || t.text == ".const" ||
                 t.text == ".local") {
      } else if (auto ty = type_named(t.text.substr(1))) {
        d.type = *ty;
      } else {
        throw Refusal{t.line, fmt::format("unsupported attribute '{}'", t.text)};
      }
    }
    if (d.type == T::none) throw Refusal{peek().line, "a declaration needs a type"};
    d.name = expect_name();
    while (accept("[")) {
      d.array = true;
      if (accept("]")) { d.unsized = true; continue; }
      const std::uint64_t n = expect_int();
      if (n == 0 || n > (1ull << 32)) throw Refusal{peek().line, fmt::format("bad array size {}", n)};
      d.elements *= n;
      if (d.elements > (1ull << 32)) throw Refusal{peek().line, "array too large"};
      expect("]");
    }
    return d;
  }
  static std::uint64_t element_size(const Decl& d) { return (d.type == T::pred ? 1 : bits_of(d.type) / 8) * d.vector; }
  static std::uint32_t alignment(const Decl& d) {
    return d.align ? d.align : static_cast<std::uint32_t>(element_size(d));
  }

  // .global/.const/.shared at module or function scope, .local in a function.
  void variable(std::string_view space, std::uint32_t line, bool module_scope) {
    Decl d = declaration();
    const std::uint64_t esize = element_size(d);
    const std::uint64_t size = d.unsized ? 0 : esize * d.elements;
    if (d.unsized && !(space == ".shared" && extern_))
      throw Refusal{line, fmt::format("'{}' has no size (only .extern .shared arrays may)", d.name)};
    std::vector<std::byte> init;
    if (accept("=")) {
      if (space == ".shared" || space == ".local")
        throw Refusal{line, fmt::format("'{}': {} variables cannot have initialisers", d.name, space)};
      initialiser(d, init, line);
    }
    expect(";");
    if (size > (1ull << 31)) throw Refusal{line, fmt::format("'{}' is too large", d.name)};
    Symbol s;
    s.size = static_cast<std::uint32_t>(size);
    if (space == ".shared") {
      s.area = Area::shared;
      if (d.unsized) {
        extern_shared_.push_back(d.name);
        s.offset = UINT32_MAX;  // placed after every static variable, in finish()
        max_extern_align_ = std::max(max_extern_align_, alignment(d));
      } else {
        m_.shared_static = static_cast<std::uint32_t>(align_up(m_.shared_static, alignment(d)));
        s.offset = m_.shared_static;
        m_.shared_static += s.size;
      }
    } else if (space == ".local") {
      s.area = Area::local;
      m_.local_size = static_cast<std::uint32_t>(align_up(m_.local_size, alignment(d)));
      s.offset = m_.local_size;
      m_.local_size += s.size;
    } else {
      if (!module_scope) throw Refusal{line, fmt::format("'{}': {} variables must be at module scope", d.name, space)};
      s.area = Area::var;
      s.offset = m_.variables.size();
      m_.variables.push_back(Variable{std::string(d.name), space == ".global" ? Space::global : Space::constant,
                                      size, alignment(d), std::move(init)});
      m_.addresses.push_back(0);
      m_.placed.push_back(false);
    }
    declare(d.name, s, line, module_scope);
  }

  void initialiser(const Decl& d, std::vector<std::byte>& out, std::uint32_t line) {
    const unsigned esize = static_cast<unsigned>(bits_of(d.type) / 8);
    const std::uint64_t limit = d.elements * d.vector;
    std::uint64_t count = 0;
    auto value = [&] {
      const bool negative = accept("-");
      const Token& t = peek();
      if (t.kind != Tk::number)
        throw Refusal{t.line, fmt::format("'{}': unsupported initialiser '{}' (numbers are)", d.name, t.text)};
      next();
      if (++count > limit) throw Refusal{t.line, fmt::format("'{}': too many initialisers", d.name)};
      const std::uint64_t bits = immediate(parse_number(t), d.type, negative);
      for (unsigned i = 0; i < esize; ++i) out.push_back(static_cast<std::byte>(bits >> (8 * i)));
    };
    int depth = 0;
    if (peek().text != "{") { value(); return; }
    do {
      if (accept("{")) {
        if (++depth > 8) throw Refusal{line, "initialiser nested too deeply"};
        continue;
      }
      if (accept("}")) { --depth; accept(","); continue; }
      value();
      accept(",");
    } while (depth > 0);
  }

  void declare(std::string_view name, const Symbol& s, std::uint32_t line, bool module_scope) {
    auto& scope = module_scope ? globals_ : scopes_.back();
    if (!scope.emplace(std::string(name), s).second) throw Refusal{line, fmt::format("'{}' declared twice", name)};
  }

  const Symbol* find(std::string_view name) const {
    const std::string key(name);
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(key);
      if (f != it->end()) return &f->second;
    }
    auto f = globals_.find(key);
    return f == globals_.end() ? nullptr : &f->second;
  }

  // A register by name: declared singly or in a %name<N> range.
  std::optional<Symbol> reg(std::string_view name) const {
    if (const Symbol* s = find(name); s && s->area == Area::reg) return *s;
    std::size_t d = name.size();
    while (d > 0 && digit(name[d - 1])) --d;
    if (d == name.size() || d == 0 || name.size() - d > 9) return std::nullopt;
    std::uint32_t index = 0;
    std::from_chars(name.data() + d, name.data() + name.size(), index);
    const std::string prefix(name.substr(0, d));
    for (auto it = ranges_.rbegin(); it != ranges_.rend(); ++it) {
      auto f = it->find(prefix);
      if (f != it->end()) {
        if (index >= f->second.count) return std::nullopt;
        Symbol s;
        s.area = Area::reg;
        s.slot = f->second.base + index;
        s.width = f->second.width;
        return s;
      }
    }
    return std::nullopt;
  }

  // (.param .type name, ...) of a signature; `kernel` lays them out in the parameter buffer.
  std::vector<Param> param_list(bool kernel, std::vector<Symbol>& symbols) {
    std::vector<Param> out;
    expect("(");
    if (accept(")")) return out;
    std::uint32_t offset = 0;
    do {
      const Token& t = next();
      if (t.text != ".param") throw Refusal{t.line, fmt::format("expected '.param', found '{}'", t.text)};
      Decl d = declaration();
      if (d.unsized) throw Refusal{t.line, fmt::format("parameter '{}' has no size", d.name)};
      const std::uint64_t size = element_size(d) * d.elements;
      if (size > 32768) throw Refusal{t.line, fmt::format("parameter '{}' is too large", d.name)};
      Param p{std::string(d.name), 0, static_cast<std::uint32_t>(size), alignment(d)};
      Symbol s;
      s.size = p.size;
      if (kernel) {
        offset = static_cast<std::uint32_t>(align_up(offset, p.align));
        p.offset = offset;
        offset += p.size;
        s.area = Area::kparam;
      } else {
        m_.tparam_size = static_cast<std::uint32_t>(align_up(m_.tparam_size, std::max(p.align, 8u)));
        p.offset = m_.tparam_size;
        m_.tparam_size += p.size;
        s.area = Area::tparam;
      }
      s.offset = p.offset;
      symbols.push_back(s);
      out.push_back(std::move(p));
    } while (accept(","));
    expect(")");
    return out;
  }

  void function(bool entry, std::uint32_t line) {
    std::vector<Symbol> ret_symbols, param_symbols;
    std::vector<Param> rets;
    if (!entry && peek().text == "(") rets = param_list(false, ret_symbols);
    const std::string_view name = expect_name();
    std::vector<Param> params;
    if (peek().text == "(") params = param_list(entry, param_symbols);
    // Performance directives: hints to the compiler, which change nothing here.
    for (;;) {
      const Token& t = peek();
      if (t.kind != Tk::ident) break;
      if (t.text == ".maxntid" || t.text == ".reqntid" || t.text == ".minnctapersm" || t.text == ".maxnreg" ||
          t.text == ".maxclusterrank" || t.text == ".reqnctapercluster") {
        next();
        do expect_int(); while (accept(","));
      } else if (t.text == ".noreturn" || t.text == ".explicitcluster") {
        next();
      } else if (t.text == ".pragma") {
        next();
        expect_kind(Tk::string);
        expect(";");
      } else {
        break;
      }
    }
    std::uint32_t index;
    if (auto it = m_.function_index.find(std::string(name)); it != m_.function_index.end()) {
      index = it->second;
      if (m_.functions[index].entry != entry) throw Refusal{line, fmt::format("'{}' declared twice", name)};
    } else {
      index = static_cast<std::uint32_t>(m_.functions.size());
      m_.function_index.emplace(std::string(name), index);
      Function f;
      f.name = std::string(name);
      f.entry = entry;
      m_.functions.push_back(std::move(f));
      Symbol s;
      s.function = index;
      declare(name, s, line, true);
    }
    if (accept(";")) {
      if (m_.functions[index].params.empty()) {
        m_.functions[index].params = params;
        m_.functions[index].rets = rets;
      }
      return;
    }
    if (extern_) throw Refusal{line, fmt::format("'.extern' function '{}' has a body", name)};
    Function& f = m_.functions[index];
    if (f.defined) throw Refusal{line, fmt::format("'{}' defined twice", name)};
    f.defined = true;
    f.params = params;
    f.rets = rets;
    if (entry) {
      std::uint32_t end = 0;
      for (const auto& p : params) end = std::max(end, p.offset + p.size);
      f.params_size = end;
    }
    current_ = index;
    scopes_.clear();
    ranges_.clear();
    scopes_.emplace_back();
    ranges_.emplace_back();
    for (std::size_t i = 0; i < params.size(); ++i) declare(params[i].name, param_symbols[i], line, false);
    for (std::size_t i = 0; i < rets.size(); ++i) declare(rets[i].name, ret_symbols[i], line, false);
    f.start = static_cast<std::uint32_t>(m_.code.size());
    labels_.clear();
    fixups_.clear();
    expect("{");
    body();
    // A kernel or function that runs off its end returns.
    Instr r;
    r.op = Op::ret;
    r.line = peek(0).line;
    push(r, "ret (end of function)");
    for (const auto& [at, label] : fixups_) {
      auto it = labels_.find(label.first);
      if (it == labels_.end()) throw Refusal{label.second, fmt::format("no label '{}'", label.first)};
      m_.code[at].o[0].imm = it->second;
    }
  }

  void push(const Instr& in, std::string_view text) {
    if (m_.code.size() >= (1u << 24)) throw Refusal{in.line, "too many instructions"};
    m_.code.push_back(in);
    m_.text.emplace_back(text);
  }

  void body() {
    int depth = 1;
    while (depth > 0) {
      const Token& t = peek();
      if (t.kind == Tk::end) throw Refusal{t.line, "unexpected end of text in a function body"};
      if (accept("{")) {
        if (++depth > 64) throw Refusal{t.line, "blocks nested too deeply"};
        scopes_.emplace_back();
        ranges_.emplace_back();
        continue;
      }
      if (accept("}")) {
        if (--depth > 0) { scopes_.pop_back(); ranges_.pop_back(); }
        continue;
      }
      if (t.kind == Tk::ident && peek(1).text == ":" && !t.text.starts_with(".") && !t.text.starts_with("%")) {
        next();
        next();
        if (!labels_.emplace(std::string(t.text), static_cast<std::uint32_t>(m_.code.size())).second)
          throw Refusal{t.line, fmt::format("label '{}' defined twice", t.text)};
        continue;
      }
      if (t.text == ".reg") { next(); registers(t.line); continue; }
      if (t.text == ".local" || t.text == ".shared") { next(); variable(t.text, t.line, false); continue; }
      if (t.text == ".param") { next(); call_param(t.line); continue; }
      if (t.text == ".pragma") { next(); expect_kind(Tk::string); expect(";"); continue; }
      if (t.text == ".loc") {
        next();
        while (peek().kind == Tk::number || peek().text == "," || peek().kind == Tk::ident) {
          if (peek().kind == Tk::ident && !peek().text.starts_with("function_name") && !peek().text.starts_with("inlined_at")) break;
          next();
        }
        continue;
      }
      if (t.kind == Tk::ident && t.text.starts_with("."))
        throw Refusal{t.line, fmt::format("unsupported directive '{}' in a function body", t.text)};
      instruction();
    }
  }

  void registers(std::uint32_t line) {
    Decl d;
    for (;;) {
      const Token& t = next();
      if (t.text == ".v2" || t.text == ".v4") throw Refusal{t.line, "vector registers are not supported"};
      if (auto ty = t.text.starts_with(".") ? type_named(t.text.substr(1)) : std::nullopt) { d.type = *ty; break; }
      throw Refusal{t.line, fmt::format("'.reg' needs a type, found '{}'", t.text)};
    }
    const unsigned width = d.type == T::pred ? 1 : bits_of(d.type);
    if (d.type == T::b128) throw Refusal{line, ".b128 registers are not supported"};
    do {
      const Token& n = expect_kind(Tk::ident);
      if (n.text.starts_with(".")) throw Refusal{n.line, fmt::format("expected a register name, found '{}'", n.text)};
      if (accept("<")) {
        const std::uint64_t count = expect_int();
        expect(">");
        if (count > 100000 || m_.slots + count > (1u << 22)) throw Refusal{n.line, "too many registers"};
        if (!ranges_.back().emplace(std::string(n.text), RegRange{m_.slots, static_cast<std::uint32_t>(count), width}).second)
          throw Refusal{n.line, fmt::format("'{}' declared twice", n.text)};
        m_.slots += static_cast<std::uint32_t>(count);
      } else {
        Symbol s;
        s.area = Area::reg;
        s.slot = m_.slots++;
        s.width = width;
        declare(n.text, s, n.line, false);
      }
    } while (accept(","));
    expect(";");
  }

  void call_param(std::uint32_t line) {
    Decl d = declaration();
    expect(";");
    if (d.unsized) throw Refusal{line, fmt::format("parameter '{}' has no size", d.name)};
    Symbol s;
    s.area = Area::tparam;
    s.size = static_cast<std::uint32_t>(element_size(d) * d.elements);
    if (s.size > 32768) throw Refusal{line, "parameter too large"};
    m_.tparam_size = static_cast<std::uint32_t>(align_up(m_.tparam_size, std::max(alignment(d), 8u)));
    s.offset = m_.tparam_size;
    m_.tparam_size += s.size;
    declare(d.name, s, line, false);
  }

  void recursion_check() const {
    std::vector<int> state(m_.functions.size(), 0);
    std::function<void(std::uint32_t)> visit = [&](std::uint32_t f) {
      state[f] = 1;
      for (auto c : m_.functions[f].callees) {
        if (state[c] == 1)
          throw Refusal{0, fmt::format("'{}' is recursive, which is not supported", m_.functions[c].name)};
        if (state[c] == 0) visit(c);
      }
      state[f] = 2;
    };
    for (std::uint32_t f = 0; f < m_.functions.size(); ++f)
      if (state[f] == 0) visit(f);
  }

  // --- operands ----------------------------------------------------------------------

  struct Raw {
    Operand op;
    std::optional<Operand> second;  // a|b
    std::string_view name;          // an unresolved identifier (label or function)
    std::vector<std::string_view> list;  // (a, b) of a call
    std::vector<Operand> vec;
  };

  Operand register_operand(const Token& t) {
    if (auto s = reg(t.text)) {
      Operand o;
      o.kind = K::reg;
      o.slot = s->slot;
      o.wide = s->width == 64;
      return o;
    }
    auto& sr = special_registers();
    if (auto it = sr.find(t.text); it != sr.end()) {
      Operand o;
      o.kind = K::sreg;
      o.imm = static_cast<std::int64_t>(it->second);
      return o;
    }
    throw Refusal{t.line, fmt::format("unknown register '{}'", t.text)};
  }

  Raw operand(T type) {
    Raw r;
    const Token& t = peek();
    if (accept("[")) {
      r.op.kind = K::addr;
      const Token& b = peek();
      if (b.kind == Tk::ident) {
        next();
        if (b.text.starts_with("%") || reg(b.text)) {
          Operand base = register_operand(b);
          if (base.kind != K::reg) throw Refusal{b.line, fmt::format("'{}' cannot be an address", b.text)};
          r.op.area = Area::reg;
          r.op.slot = base.slot;
          r.op.wide = base.wide;
        } else {
          const Symbol* s = find(b.text);
          if (!s || s->function >= 0 || s->area == Area::reg)
            throw Refusal{b.line, fmt::format("unknown variable '{}'", b.text)};
          r.op.area = s->area;
          r.op.slot = static_cast<std::uint32_t>(s->offset);
          if (s->area == Area::shared && s->offset == UINT32_MAX) r.name = b.text;
        }
        if (accept("+")) {
          const bool negative = accept("-");
          const std::uint64_t v = expect_int();
          r.op.imm = negative ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
        } else if (accept("-")) {
          r.op.imm = -static_cast<std::int64_t>(expect_int());
        }
      } else {
        r.op.area = Area::none;
        r.op.imm = static_cast<std::int64_t>(expect_int());
      }
      expect("]");
      return r;
    }
    if (accept("{")) {
      r.op.kind = K::vec;
      do {
        const Token& v = expect_kind(Tk::ident);
        if (v.text == "_") { Operand s; s.kind = K::sink; r.vec.push_back(s); continue; }
        Operand o = register_operand(v);
        if (o.kind != K::reg) throw Refusal{v.line, fmt::format("'{}' cannot be in a vector", v.text)};
        r.vec.push_back(o);
      } while (accept(","));
      expect("}");
      if (r.vec.size() != 2 && r.vec.size() != 4) throw Refusal{t.line, "vectors have 2 or 4 elements"};
      return r;
    }
    if (accept("(")) {
      r.op.kind = K::none;
      if (!accept(")")) {
        do r.list.push_back(expect_name()); while (accept(","));
        expect(")");
      }
      return r;
    }
    if (accept("!")) {
      const Token& p = expect_kind(Tk::ident);
      r.op = register_operand(p);
      if (r.op.kind != K::reg) throw Refusal{p.line, "only predicates can be negated"};
      r.op.neg = true;
      return r;
    }
    bool negative = false;
    if (accept("-")) negative = true;
    const Token& v = next();
    if (v.kind == Tk::number) {
      r.op.kind = K::imm;
      r.op.imm = static_cast<std::int64_t>(immediate(parse_number(v), type, negative));
      return r;
    }
    if (negative || v.kind != Tk::ident) throw Refusal{v.line, fmt::format("unexpected operand '{}'", v.text)};
    if (v.text == "_") { r.op.kind = K::sink; return r; }
    if (v.text.starts_with("%") || reg(v.text)) {
      r.op = register_operand(v);
      if (accept("|")) r.second = register_operand(expect_kind(Tk::ident));
      return r;
    }
    const Symbol* s = find(v.text);
    if (s && s->function < 0 && s->area != Area::reg) {
      r.op.kind = K::sym;
      r.op.area = s->area;
      r.op.slot = static_cast<std::uint32_t>(s->offset);
      if (s->area == Area::shared && s->offset == UINT32_MAX) r.name = v.text;
      return r;
    }
    r.op.kind = K::label;
    r.name = v.text;
    return r;
  }

  // --- instructions ------------------------------------------------------------------

  [[noreturn]] void refuse_op(std::uint32_t line, std::string_view mnemonic) {
    throw Refusal{line, fmt::format("unsupported instruction '{}'", mnemonic)};
  }

  void instruction();
  void decode(Instr& in, Mods& mods, std::vector<Raw>& ops, std::uint32_t line);

 public:
  void finish() {
    // .extern .shared arrays all start after the static variables.
    const auto base = static_cast<std::uint32_t>(align_up(m_.shared_static, std::max(16u, max_extern_align_)));
    for (auto& in : m_.code)
      for (auto& o : in.o)
        if ((o.kind == K::addr || o.kind == K::sym) && o.area == Area::shared && o.slot == UINT32_MAX) o.slot = base;
    m_.shared_static = base;
  }

 private:
  std::string_view source_;
  Module::Impl& m_;
  std::vector<Token> toks_;
  std::vector<std::string_view> lines_;
  std::size_t pos_ = 0;
  bool extern_ = false;
  std::map<std::string, Symbol> globals_;
  std::vector<std::map<std::string, Symbol>> scopes_;
  std::vector<std::map<std::string, RegRange>> ranges_;
  std::map<std::string, std::uint32_t> labels_;
  std::vector<std::pair<std::size_t, std::pair<std::string, std::uint32_t>>> fixups_;
  std::vector<std::string_view> extern_shared_;
  std::uint32_t max_extern_align_ = 16;
  std::uint32_t current_ = 0;
};

void Parser::instruction() {
  Instr in;
  const Token& first = peek();
  in.line = first.line;
  if (accept("@")) {
    const bool neg = accept("!");
    const Token& p = expect_kind(Tk::ident);
    Operand g = register_operand(p);
    if (g.kind != K::reg) throw Refusal{p.line, "a guard must be a predicate register"};
    in.guard = g.slot;
    in.guard_neg = neg;
  }
  const Token& m = expect_kind(Tk::ident);
  if (m.text.starts_with(".") || m.text.starts_with("%"))
    throw Refusal{m.line, fmt::format("expected an instruction, found '{}'", m.text)};
  Mods mods(m.text, m.line);
  // The operands' immediates take the instruction's type; decode() checks each shape.
  T imm_type = T::none;
  {
    Mods probe(m.text, m.line);
    if (auto t = probe.type()) imm_type = *t;
    if (mods.op() == "cvt" || mods.op() == "set" || mods.op() == "slct") imm_type = T::none;
  }
  std::vector<Raw> ops;
  if (peek().text != ";") {
    do {
      if (ops.size() >= 8) throw Refusal{m.line, "too many operands"};
      T t = imm_type;
      // cvt's source, set's and slct's compared operands have the second type.
      if (mods.op() == "cvt" || mods.op() == "set") {
        Mods probe(m.text, m.line);
        auto t1 = probe.type();
        auto t2 = probe.type();
        t = ops.empty() ? t1.value_or(T::none) : t2.value_or(T::none);
      }
      if (mods.op() == "slct") {
        Mods probe(m.text, m.line);
        auto t1 = probe.type();
        auto t2 = probe.type();
        t = ops.size() == 3 ? t2.value_or(T::none) : t1.value_or(T::none);
      }
      // shift amounts, shuffle lanes and masks, bit-field positions are 32-bit integers
      if ((mods.op() == "shl" || mods.op() == "shr") && ops.size() == 2) t = T::u32;
      if ((mods.op() == "shfl" || mods.op() == "vote" || mods.op() == "match" || mods.op() == "redux") &&
          ops.size() >= 2)
        t = T::b32;
      if ((mods.op() == "bfe" && ops.size() >= 2) || (mods.op() == "bfi" && ops.size() >= 3)) t = T::u32;
      if (mods.op() == "selp" && ops.size() == 3) t = T::pred;
      if (mods.op() == "mul" || mods.op() == "mad") {
        Mods probe(m.text, m.line);
        if (probe.take("wide") && (ops.size() == 0 || ops.size() == 3)) t = T::none;
      }
      ops.push_back(operand(t));
    } while (accept(","));
  }
  expect(";");
  if (m.line <= lines_.size()) {
    std::string_view text = lines_[m.line - 1];
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    if (auto c = text.find("//"); c != std::string_view::npos) text = text.substr(0, c);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
    decode(in, mods, ops, m.line);
    push(in, text);
  } else {
    decode(in, mods, ops, m.line);
    push(in, m.text);
  }
}

void Parser::decode(Instr& in, Mods& mods, std::vector<Raw>& ops, std::uint32_t line) {
  const std::string_view op = mods.op();
  const std::string_view mn = mods.mnemonic();
  auto count = [&](std::size_t lo, std::size_t hi) {
    if (ops.size() < lo || ops.size() > hi)
      throw Refusal{line, fmt::format("'{}' takes {} operands, not {}", mn,
                                      lo == hi ? fmt::format("{}", lo) : fmt::format("{} to {}", lo, hi), ops.size())};
  };
  auto value = [&](std::size_t i) {
    const Operand& o = ops[i].op;
    if (o.kind != K::reg && o.kind != K::imm && o.kind != K::sreg)
      throw Refusal{line, fmt::format("operand {} of '{}' must be a register or an immediate", i + 1, mn)};
    if (ops[i].second) throw Refusal{line, fmt::format("operand {} of '{}' cannot be a pair", i + 1, mn)};
    return o;
  };
  auto dest = [&](std::size_t i) {
    const Operand& o = ops[i].op;
    if (o.kind != K::reg && o.kind != K::sink)
      throw Refusal{line, fmt::format("operand {} of '{}' must be a register", i + 1, mn)};
    if (o.neg) throw Refusal{line, fmt::format("a destination of '{}' cannot be negated", mn)};
    return o;
  };
  auto address = [&](std::size_t i) {
    Operand o = ops[i].op;
    if (o.kind != K::addr) throw Refusal{line, fmt::format("operand {} of '{}' must be an address [..]", i + 1, mn)};
    return o;
  };
  auto values = [&](std::size_t from) {
    for (std::size_t i = from; i < ops.size(); ++i) in.o[i] = value(i);
  };
  auto simple = [&](Op o, std::size_t n) {
    in.op = o;
    count(n, n);
    in.o[0] = dest(0);
    values(1);
    in.nops = static_cast<std::uint8_t>(n);
  };
  auto float_mods = [&] {
    if (auto r = mods.take_of(kRnd)) in.rnd = *r;
    if (mods.take("ftz")) in.flags |= kFtz;
    if (mods.take("sat")) in.flags |= kSat;
  };
  auto need_int = [&] {
    if (is_float(in.type) || in.type == T::pred) throw Refusal{line, fmt::format("'{}' needs an integer type", mn)};
  };
  auto need_float = [&] {
    if (in.type != T::f32 && in.type != T::f64) throw Refusal{line, fmt::format("'{}' needs .f32 or .f64", mn)};
  };
  mods.take_ordering();

  if (op == "add" || op == "sub" || op == "mul" || op == "mad" || op == "fma" || op == "div" || op == "rem" ||
      op == "min" || op == "max") {
    if (op == "mul" || op == "mad") {
      if (mods.take("lo")) in.flags |= kLo;
      else if (mods.take("hi")) in.flags |= kHi;
      else if (mods.take("wide")) in.flags |= kWide;
    }
    if (op == "div") {
      if (mods.take("approx")) in.flags |= kApprox;
      if (mods.take("full")) in.flags |= kFull;
    }
    if (mods.take("cc")) throw Refusal{line, fmt::format("carry chains ('{}') are not supported", mn)};
    float_mods();
    in.type = mods.need_type();
    if (in.type == T::f16 || in.type == T::f16x2 || in.type == T::bf16 || in.type == T::bf16x2 || in.type == T::b128 ||
        in.type == T::pred)
      throw Refusal{line, fmt::format("'{}': type not supported", mn)};
    const bool three = op == "mad" || op == "fma";
    static const std::map<std::string_view, Op> kOps = {{"add", Op::add}, {"sub", Op::sub}, {"mul", Op::mul},
                                                        {"mad", Op::mad}, {"fma", Op::fma}, {"div", Op::div},
                                                        {"rem", Op::rem}, {"min", Op::min}, {"max", Op::max}};
    simple(kOps.at(op), three ? 4 : 3);
    if (is_float(in.type)) {
      if (in.flags & (kLo | kHi | kWide)) throw Refusal{line, fmt::format("'{}': .lo/.hi/.wide need integers", mn)};
      if (op == "fma" && in.rnd == Rnd::none) throw Refusal{line, fmt::format("'{}' needs a rounding mode", mn)};
      if (op == "mad" && in.rnd == Rnd::none && in.type == T::f64)
        throw Refusal{line, fmt::format("'{}' needs a rounding mode", mn)};
      if (op == "rem") throw Refusal{line, fmt::format("'{}' needs an integer type", mn)};
      if (op == "div" && in.type == T::f32 && in.rnd == Rnd::none && !(in.flags & (kApprox | kFull)))
        throw Refusal{line, fmt::format("'{}' needs .approx, .full or a rounding mode", mn)};
    } else {
      if (in.rnd != Rnd::none || (in.flags & kFtz)) throw Refusal{line, fmt::format("'{}': rounding needs floats", mn)};
      if ((op == "mul" || op == "mad") && !(in.flags & (kLo | kHi | kWide)))
        throw Refusal{line, fmt::format("'{}' needs .lo, .hi or .wide", mn)};
      if ((in.flags & kSat) && in.type != T::s32) throw Refusal{line, fmt::format("'{}': .sat needs .s32", mn)};
      if (op == "fma") throw Refusal{line, fmt::format("'{}' needs a float type", mn)};
      if ((in.flags & kWide) && bits_of(in.type) == 64) throw Refusal{line, fmt::format("'{}': .wide of 64 bits", mn)};
    }
  } else if (op == "mul24" || op == "mad24") {
    if (!mods.take("lo")) throw Refusal{line, fmt::format("'{}': only .lo is supported", mn)};
    in.type = mods.need_type();
    if (in.type != T::u32 && in.type != T::s32) throw Refusal{line, fmt::format("'{}' needs .u32 or .s32", mn)};
    simple(op == "mul24" ? Op::mul24 : Op::mad24, op == "mul24" ? 3 : 4);
  } else if (op == "abs" || op == "neg" || op == "not" || op == "cnot" || op == "popc" || op == "clz" ||
             op == "brev" || op == "rcp" || op == "sqrt" || op == "rsqrt" || op == "ex2" || op == "lg2" ||
             op == "sin" || op == "cos" || op == "tanh") {
    static const std::map<std::string_view, Op> kOps = {
        {"abs", Op::abs}, {"neg", Op::neg}, {"not", Op::not_}, {"cnot", Op::cnot}, {"popc", Op::popc},
        {"clz", Op::clz}, {"brev", Op::brev}, {"rcp", Op::rcp}, {"sqrt", Op::sqrt}, {"rsqrt", Op::rsqrt},
        {"ex2", Op::ex2}, {"lg2", Op::lg2}, {"sin", Op::sin}, {"cos", Op::cos}, {"tanh", Op::tanh}};
    in.op = kOps.at(op);
    if (mods.take("approx")) in.flags |= kApprox;
    float_mods();
    in.type = mods.need_type();
    simple(in.op, 2);
    const bool transcendental = in.op >= Op::rcp && in.op <= Op::tanh;
    if (transcendental) {
      need_float();
      const bool exact = (in.op == Op::rcp || in.op == Op::sqrt) && in.rnd != Rnd::none;
      if (!exact && !(in.flags & kApprox))
        throw Refusal{line, fmt::format("'{}' needs .approx{}", mn, in.op == Op::rcp || in.op == Op::sqrt ? " or a rounding mode" : "")};
      if (in.type == T::f64 && (in.op == Op::sin || in.op == Op::cos || in.op == Op::ex2 || in.op == Op::lg2 || in.op == Op::tanh))
        throw Refusal{line, fmt::format("'{}': .f64 not supported", mn)};
    } else if (in.op == Op::not_ || in.op == Op::cnot || in.op == Op::popc || in.op == Op::clz || in.op == Op::brev) {
      if (is_float(in.type) || (in.op != Op::not_ && in.type == T::pred)) throw Refusal{line, fmt::format("'{}' needs an integer type", mn)};
    } else if (in.type == T::f16 || in.type == T::bf16 || in.type == T::f16x2 || in.type == T::bf16x2) {
      throw Refusal{line, fmt::format("'{}': type not supported", mn)};
    }
  } else if (op == "and" || op == "or" || op == "xor") {
    in.type = mods.need_type();
    simple(op == "and" ? Op::and_ : op == "or" ? Op::or_ : Op::xor_, 3);
    if (is_float(in.type)) throw Refusal{line, fmt::format("'{}' needs a bit type", mn)};
  } else if (op == "shl" || op == "shr") {
    in.type = mods.need_type();
    simple(op == "shl" ? Op::shl : Op::shr, 3);
    need_int();
  } else if (op == "shf") {
    if (mods.take("l")) in.flags |= kShiftLeft;
    else if (!mods.take("r")) throw Refusal{line, fmt::format("'{}' needs .l or .r", mn)};
    if (mods.take("clamp")) in.flags |= kClamp;
    else if (!mods.take("wrap")) throw Refusal{line, fmt::format("'{}' needs .wrap or .clamp", mn)};
    in.type = mods.need_type();
    if (in.type != T::b32) throw Refusal{line, fmt::format("'{}' needs .b32", mn)};
    simple(Op::shf, 4);
  } else if (op == "bfe" || op == "bfi") {
    in.type = mods.need_type();
    simple(op == "bfe" ? Op::bfe : Op::bfi, op == "bfe" ? 4 : 5);
    need_int();
    if (bits_of(in.type) < 32) throw Refusal{line, fmt::format("'{}' needs 32 or 64 bits", mn)};
  } else if (op == "prmt") {
    in.type = mods.need_type();
    if (in.type != T::b32) throw Refusal{line, fmt::format("'{}' needs .b32", mn)};
    simple(Op::prmt, 4);
  } else if (op == "sad") {
    in.type = mods.need_type();
    need_int();
    simple(Op::sad, 4);
  } else if (op == "copysign") {
    in.type = mods.need_type();
    need_float();
    simple(Op::copysign, 3);
  } else if (op == "testp") {
    static const std::map<std::string_view, Sub> kTests = {{"finite", Sub::add}, {"infinite", Sub::min},
                                                           {"number", Sub::max}, {"notanumber", Sub::inc},
                                                           {"normal", Sub::dec}, {"subnormal", Sub::and_}};
    auto s = mods.take_of(kTests);
    if (!s) throw Refusal{line, fmt::format("'{}' needs a test", mn)};
    in.sub = *s;
    in.type = mods.need_type();
    need_float();
    simple(Op::testp, 2);
  } else if (op == "selp") {
    in.type = mods.need_type();
    simple(Op::selp, 4);
  } else if (op == "slct") {
    if (mods.take("ftz")) in.flags |= kFtz;
    in.type = mods.need_type();
    in.type2 = mods.need_type();
    if (in.type2 != T::s32 && in.type2 != T::f32) throw Refusal{line, fmt::format("'{}': the selector is .s32 or .f32", mn)};
    simple(Op::slct, 4);
  } else if (op == "setp" || op == "set") {
    auto c = mods.take_of(kCmp);
    if (!c) throw Refusal{line, fmt::format("'{}' needs a comparison", mn)};
    in.cmp = *c;
    if (auto b = mods.take_of(kBool)) in.boolop = *b;
    if (mods.take("ftz")) in.flags |= kFtz;
    in.op = op == "setp" ? Op::setp : Op::set;
    if (in.op == Op::set) {
      in.type = mods.need_type();
      in.type2 = mods.need_type();
    } else {
      in.type = in.type2 = mods.need_type();
    }
    const std::size_t n = in.boolop == Bool::none ? 3 : 4;
    count(n, n);
    in.o[0] = dest(0);
    in.o[1] = value(1);
    in.o[2] = value(2);
    if (n == 4) in.o[3] = value(3);
    if (ops[0].second) {
      if (in.op != Op::setp) throw Refusal{line, fmt::format("'{}' has one destination", mn)};
      in.o[5] = *ops[0].second;
      in.flags |= kHi;  // a second destination gets the complement
    }
    in.nops = static_cast<std::uint8_t>(n);
  } else if (op == "mov") {
    in.op = Op::mov;
    in.type = mods.need_type();
    count(2, 2);
    if (ops[0].op.kind == K::vec) {
      // mov.b64 {a, b}, d: unpack
      in.o[0] = ops[0].op;
      for (std::size_t i = 0; i < ops[0].vec.size(); ++i) in.vec[i] = ops[0].vec[i].kind == K::sink ? UINT32_MAX : ops[0].vec[i].slot;
      in.o[0].imm = static_cast<std::int64_t>(ops[0].vec.size());
      in.o[1] = value(1);
    } else {
      in.o[0] = dest(0);
      if (ops[1].op.kind == K::vec) {
        in.o[1] = ops[1].op;
        for (std::size_t i = 0; i < ops[1].vec.size(); ++i) {
          if (ops[1].vec[i].kind == K::sink) throw Refusal{line, "a packed source cannot have '_'"};
          in.vec[i] = ops[1].vec[i].slot;
        }
        in.o[1].imm = static_cast<std::int64_t>(ops[1].vec.size());
      } else if (ops[1].op.kind == K::sym) {
        in.o[1] = ops[1].op;
        if (in.o[1].area == Area::kparam || in.o[1].area == Area::tparam)
          throw Refusal{line, fmt::format("'{}': the address of a parameter is not supported", mn)};
      } else if (ops[1].op.kind == K::label) {
        throw Refusal{line, fmt::format("'{}': unknown symbol '{}'", mn, ops[1].name)};
      } else {
        in.o[1] = value(1);
      }
    }
    if (in.o[0].kind == K::vec || in.o[1].kind == K::vec) {
      const auto n = static_cast<unsigned>((in.o[0].kind == K::vec ? in.o[0] : in.o[1]).imm);
      if (bits_of(in.type) != 32 && bits_of(in.type) != 64) throw Refusal{line, fmt::format("'{}': packing needs .b32 or .b64", mn)};
      if (bits_of(in.type) / n < 8) throw Refusal{line, fmt::format("'{}': elements too small", mn)};
    }
    in.nops = 2;
  } else if (op == "cvt") {
    in.op = Op::cvt;
    float_mods();
    in.type = mods.need_type();
    in.type2 = mods.need_type();
    simple(Op::cvt, 2);
    const bool fd = is_float(in.type), fs = is_float(in.type2);
    if (in.type == T::pred || in.type2 == T::pred || in.type == T::b128 || in.type2 == T::b128 || in.type == T::f16x2 ||
        in.type2 == T::f16x2 || in.type == T::bf16x2 || in.type2 == T::bf16x2)
      throw Refusal{line, fmt::format("'{}': types not supported", mn)};
    const bool integral = in.rnd == Rnd::rni || in.rnd == Rnd::rzi || in.rnd == Rnd::rmi || in.rnd == Rnd::rpi;
    if (fs && !fd && !integral) throw Refusal{line, fmt::format("'{}' needs an integer rounding (.rni, .rzi, .rmi, .rpi)", mn)};
    if (!fs && fd && integral) throw Refusal{line, fmt::format("'{}': integer rounding of an integer", mn)};
    if (!fs && !fd && in.rnd != Rnd::none) throw Refusal{line, fmt::format("'{}': rounding of an integer", mn)};
    if ((in.type == T::f16 || in.type == T::bf16) && in.rnd != Rnd::none && in.rnd != Rnd::rn)
      throw Refusal{line, fmt::format("'{}': conversions to 16-bit floats round to nearest only", mn)};
    if (fs && fd && bits_of(in.type) < bits_of(in.type2) && !integral && in.rnd == Rnd::none)
      throw Refusal{line, fmt::format("'{}' needs a rounding mode", mn)};
  } else if (op == "cvta") {
    in.op = Op::cvta;
    if (mods.take("to")) in.sub = Sub::to;
    auto s = mods.take_of(kMem);
    if (!s || *s == Mem::param) throw Refusal{line, fmt::format("'{}' needs .global, .shared, .local or .const", mn)};
    in.mem = *s;
    in.type = mods.need_type();
    if (bits_of(in.type) != 64 && bits_of(in.type) != 32) throw Refusal{line, fmt::format("'{}' needs .u32 or .u64", mn)};
    count(2, 2);
    in.o[0] = dest(0);
    in.o[1] = ops[1].op.kind == K::sym ? ops[1].op : value(1);
    in.nops = 2;
  } else if (op == "ld" || op == "st" || op == "ldu") {
    in.op = op == "st" ? Op::st : Op::ld;
    if (auto s = mods.take_of(kMem)) in.mem = *s;
    unsigned n = 1;
    if (mods.take("v2")) n = 2;
    else if (mods.take("v4")) n = 4;
    in.type = mods.need_type();
    if (in.type == T::pred || in.type == T::b128) throw Refusal{line, fmt::format("'{}': type not supported", mn)};
    count(2, 2);
    const std::size_t vi = in.op == Op::ld ? 0 : 1, ai = in.op == Op::ld ? 1 : 0;
    in.o[ai] = address(ai);
    if (n > 1) {
      if (ops[vi].op.kind != K::vec || ops[vi].vec.size() != n)
        throw Refusal{line, fmt::format("'{}' needs a vector of {}", mn, n)};
      for (unsigned i = 0; i < n; ++i) in.vec[i] = ops[vi].vec[i].kind == K::sink ? UINT32_MAX : ops[vi].vec[i].slot;
      if (in.op == Op::st)
        for (unsigned i = 0; i < n; ++i)
          if (in.vec[i] == UINT32_MAX) throw Refusal{line, "a stored vector cannot have '_'"};
      in.o[vi].kind = K::vec;
      in.o[vi].imm = n;
    } else {
      in.o[vi] = in.op == Op::ld ? dest(vi) : value(vi);
    }
    if (in.mem == Mem::param && in.o[ai].area != Area::kparam && in.o[ai].area != Area::tparam)
      throw Refusal{line, fmt::format("'{}' needs a parameter name as its address", mn)};
    if (in.mem != Mem::param && (in.o[ai].area == Area::kparam || in.o[ai].area == Area::tparam))
      throw Refusal{line, fmt::format("'{}': a parameter needs ld.param/st.param", mn)};
    if (in.op == Op::st && in.o[ai].area == Area::kparam) throw Refusal{line, "kernel parameters are read-only"};
    if (in.op == Op::st && in.mem == Mem::constant) throw Refusal{line, "constant memory is read-only"};
    in.nops = 2;
  } else if (op == "atom" || op == "red") {
    in.op = op == "atom" ? Op::atom : Op::red;
    if (auto s = mods.take_of(kMem)) in.mem = *s;
    if (in.mem != Mem::generic && in.mem != Mem::global && in.mem != Mem::shared)
      throw Refusal{line, fmt::format("'{}': atomics are on .global, .shared or generic memory", mn)};
    auto s = mods.take_of(kAtomOps);
    if (!s) throw Refusal{line, fmt::format("'{}' needs an operation", mn)};
    in.sub = *s;
    in.type = mods.need_type();
    if (mods.take("ftz")) in.flags |= kFtz;
    if (auto r = mods.take_of(kRnd); r && *r != Rnd::rn) throw Refusal{line, fmt::format("'{}': only .rn", mn)};
    const unsigned b = bits_of(in.type);
    if (b != 32 && b != 64) throw Refusal{line, fmt::format("'{}': 32 or 64 bits", mn)};
    if (is_float(in.type) && in.sub != Sub::add && in.sub != Sub::exch)
      throw Refusal{line, fmt::format("'{}': floats only add", mn)};
    if ((in.sub == Sub::inc || in.sub == Sub::dec) && in.type != T::u32)
      throw Refusal{line, fmt::format("'{}' needs .u32", mn)};
    const std::size_t base = in.op == Op::atom ? 1 : 0;
    const std::size_t n = base + (in.sub == Sub::cas ? 3 : 2);
    if (in.op == Op::red && in.sub == Sub::cas) throw Refusal{line, "red has no .cas"};
    count(n, n);
    if (base) in.o[0] = dest(0);
    in.o[base] = address(base);
    if (in.o[base].area == Area::kparam || in.o[base].area == Area::tparam || in.o[base].area == Area::local)
      throw Refusal{line, fmt::format("'{}': not on this variable's space", mn)};
    for (std::size_t i = base + 1; i < n; ++i) in.o[i] = value(i);
    in.nops = static_cast<std::uint8_t>(n);
  } else if (op == "bar" || op == "barrier") {
    if (mods.take("warp")) {
      if (!mods.take("sync")) throw Refusal{line, fmt::format("'{}': only bar.warp.sync", mn)};
      in.op = Op::bar_warp;
      count(1, 1);
      in.o[0] = value(0);
      in.nops = 1;
    } else {
      if (mods.take("sync")) in.op = Op::bar_sync;
      else if (mods.take("arrive")) in.op = Op::bar_arrive;
      else throw Refusal{line, fmt::format("unsupported instruction '{}'", mn)};
      count(in.op == Op::bar_arrive ? 2 : 1, 2);
      values(0);
      in.nops = static_cast<std::uint8_t>(ops.size());
    }
  } else if (op == "membar" || op == "fence") {
    in.op = Op::membar;
    if (op == "membar") mods.take("gl");
    count(0, 0);
  } else if (op == "bra") {
    in.op = Op::bra;
    if (mods.take("uni")) in.flags |= kUni;
    count(1, 1);
    if (ops[0].op.kind != K::label) throw Refusal{line, fmt::format("'{}' needs a label", mn)};
    in.o[0].kind = K::label;
    fixups_.push_back({m_.code.size(), {std::string(ops[0].name), line}});
    in.nops = 1;
  } else if (op == "call") {
    in.op = Op::call;
    if (mods.take("uni")) in.flags |= kUni;
    // call [(rets),] f [, (args)]
    std::size_t i = 0;
    std::vector<std::string_view> rets, args;
    if (i < ops.size() && ops[i].op.kind == K::none) rets = ops[i++].list;
    if (i >= ops.size() || ops[i].op.kind != K::label) throw Refusal{line, fmt::format("'{}' needs a function name", mn)};
    const std::string_view callee = ops[i++].name;
    if (i < ops.size() && ops[i].op.kind == K::none) args = ops[i++].list;
    if (i != ops.size()) throw Refusal{line, fmt::format("'{}': indirect calls and prototypes are not supported", mn)};
    auto it = m_.function_index.find(std::string(callee));
    if (it == m_.function_index.end() || m_.functions[it->second].entry)
      throw Refusal{line, fmt::format("'{}': no function '{}'", mn, callee)};
    const Function& f = m_.functions[it->second];
    if (args.size() != f.params.size() || rets.size() != f.rets.size())
      throw Refusal{line, fmt::format("'{}': '{}' takes {} parameters and {} return values", mn, callee, f.params.size(), f.rets.size())};
    CallSite site;
    site.function = it->second;
    auto param = [&](std::string_view n) {
      const Symbol* s = find(n);
      if (!s || s->area != Area::tparam) throw Refusal{line, fmt::format("'{}': '{}' is not a .param variable", mn, n)};
      return s;
    };
    for (std::size_t k = 0; k < args.size(); ++k) {
      const Symbol* s = param(args[k]);
      site.args.push_back({static_cast<std::uint32_t>(s->offset), f.params[k].offset});
      site.sizes.push_back(std::min(s->size, f.params[k].size));
    }
    for (std::size_t k = 0; k < rets.size(); ++k) {
      const Symbol* s = param(rets[k]);
      site.rets.push_back({f.rets[k].offset, static_cast<std::uint32_t>(s->offset)});
      site.ret_sizes.push_back(std::min(s->size, f.rets[k].size));
    }
    in.call = static_cast<std::uint32_t>(m_.calls.size());
    m_.calls.push_back(std::move(site));
    auto& callees = m_.functions[current_].callees;
    if (std::find(callees.begin(), callees.end(), it->second) == callees.end()) callees.push_back(it->second);
  } else if (op == "ret" || op == "exit" || op == "trap") {
    in.op = op == "ret" ? Op::ret : op == "exit" ? Op::exit : Op::trap;
    mods.take("uni");
    count(0, 0);
  } else if (op == "shfl") {
    if (!mods.take("sync")) throw Refusal{line, fmt::format("'{}': only shfl.sync is supported", mn)};
    static const std::map<std::string_view, Sub> kModes = {{"up", Sub::up}, {"down", Sub::down},
                                                           {"bfly", Sub::bfly}, {"idx", Sub::idx}};
    auto s = mods.take_of(kModes);
    if (!s) throw Refusal{line, fmt::format("'{}' needs up, down, bfly or idx", mn)};
    in.op = Op::shfl;
    in.sub = *s;
    in.type = mods.need_type();
    if (in.type != T::b32) throw Refusal{line, fmt::format("'{}' needs .b32", mn)};
    count(5, 5);
    in.o[0] = dest(0);
    if (ops[0].second) in.o[5] = *ops[0].second;
    values(1);
    in.nops = 5;
  } else if (op == "vote") {
    if (!mods.take("sync")) throw Refusal{line, fmt::format("'{}': only vote.sync is supported", mn)};
    static const std::map<std::string_view, Sub> kModes = {{"all", Sub::all}, {"any", Sub::any},
                                                           {"uni", Sub::uni}, {"ballot", Sub::ballot}};
    auto s = mods.take_of(kModes);
    if (!s) throw Refusal{line, fmt::format("'{}' needs all, any, uni or ballot", mn)};
    in.op = Op::vote;
    in.sub = *s;
    in.type = mods.need_type();
    if ((in.sub == Sub::ballot) != (in.type == T::b32)) throw Refusal{line, fmt::format("'{}': wrong type", mn)};
    simple(Op::vote, 3);
  } else if (op == "match") {
    if (mods.take("any")) in.sub = Sub::any;
    else if (mods.take("all")) in.sub = Sub::all;
    else throw Refusal{line, fmt::format("'{}' needs any or all", mn)};
    if (!mods.take("sync")) throw Refusal{line, fmt::format("'{}' needs .sync", mn)};
    in.type = mods.need_type();
    if (in.type != T::b32 && in.type != T::b64) throw Refusal{line, fmt::format("'{}' needs .b32 or .b64", mn)};
    simple(Op::match, 3);
    if (ops[0].second) {
      if (in.sub != Sub::all) throw Refusal{line, "only match.all has a predicate"};
      in.o[5] = *ops[0].second;
    }
  } else if (op == "activemask") {
    in.type = mods.need_type();
    simple(Op::activemask, 1);
  } else if (op == "redux") {
    if (!mods.take("sync")) throw Refusal{line, fmt::format("'{}' needs .sync", mn)};
    static const std::map<std::string_view, Sub> kOps = {{"add", Sub::add}, {"min", Sub::min}, {"max", Sub::max},
                                                         {"and", Sub::and_}, {"or", Sub::or_}, {"xor", Sub::xor_}};
    auto s = mods.take_of(kOps);
    if (!s) throw Refusal{line, fmt::format("'{}' needs an operation", mn)};
    in.sub = *s;
    in.type = mods.need_type();
    if (in.type != T::u32 && in.type != T::s32 && in.type != T::b32) throw Refusal{line, fmt::format("'{}': 32-bit integers", mn)};
    simple(Op::redux, 3);
  } else {
    refuse_op(line, mn);
  }
  mods.done();
}

}  // namespace

std::expected<Module, std::string> Module::load(std::string_view text, std::string_view name) {
  auto impl = std::make_shared<Impl>();
  impl->name = std::string(name);
  try {
    Parser p(text, *impl);
    p.module();
    p.finish();
  } catch (const Refusal& r) {
    if (r.line == 0) return std::unexpected(fmt::format("{}: {}", name, r.what));
    return std::unexpected(fmt::format("{}:{}: {}", name, r.line, r.what));
  }
  return Module(std::move(impl));
}

std::vector<std::string> Module::kernels() const {
  std::vector<std::string> out;
  for (const auto& f : impl_->functions)
    if (f.entry && f.defined) out.push_back(f.name);
  return out;
}

std::span<const Variable> Module::variables() const { return impl_->variables; }

namespace {
const detail::Function* kernel_named(const Module::Impl& m, std::string_view name) {
  auto it = m.function_index.find(std::string(name));
  if (it == m.function_index.end()) return nullptr;
  const auto& f = m.functions[it->second];
  return f.entry && f.defined ? &f : nullptr;
}
}  // namespace

std::optional<std::vector<Param>> Module::params(std::string_view kernel) const {
  const auto* f = kernel_named(*impl_, kernel);
  if (!f) return std::nullopt;
  return f->params;
}

std::optional<std::uint32_t> Module::params_size(std::string_view kernel) const {
  const auto* f = kernel_named(*impl_, kernel);
  if (!f) return std::nullopt;
  return f->params_size;
}

std::optional<std::uint32_t> Module::shared_size(std::string_view kernel) const {
  if (!kernel_named(*impl_, kernel)) return std::nullopt;
  return impl_->shared_static;
}

void Module::place(std::string_view name, std::uint64_t address) {
  for (std::size_t i = 0; i < impl_->variables.size(); ++i) {
    if (impl_->variables[i].name == name) {
      impl_->addresses[i] = address;
      impl_->placed[i] = true;
      return;
    }
  }
  throw std::invalid_argument(fmt::format("{}: no .global or .const variable named '{}'", impl_->name, name));
}

}  // namespace rig::ptx
