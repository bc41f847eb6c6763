// Tests of the ELF loader, over objects compiled from tests/kernels/elf_*.c at build time.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "elf_loader.hpp"
#include "maps.hpp"

#ifndef RIG_ELF_OBJECT_DIR
#error "RIG_ELF_OBJECT_DIR must name the folder of the test objects"
#endif

using rig::host::ElfImage;

namespace {

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

std::vector<std::byte> object_bytes(const std::string& name) {
  return read_file(std::string(RIG_ELF_OBJECT_DIR) + "/" + name);
}

std::unique_ptr<ElfImage> load_ok(const std::string& name, ElfImage::Resolver resolve = {}) {
  const auto bytes = object_bytes(name);
  auto image = ElfImage::load(bytes, std::move(resolve));
  REQUIRE_MESSAGE(image.has_value(), name << ": " << (image ? "" : image.error()));
  return std::move(*image);
}

std::string load_error(std::span<const std::byte> bytes, ElfImage::Resolver resolve = {}) {
  auto image = ElfImage::load(bytes, std::move(resolve));
  REQUIRE_MESSAGE(!image.has_value(), "the object loaded but should have been refused");
  return image.error();
}

template <class Fn>
Fn function(const ElfImage& image, const char* name) {
  void* address = image.symbol(name);
  REQUIRE_MESSAGE(address != nullptr, "no symbol " << name);
  return reinterpret_cast<Fn>(address);
}

// The loaders' test objects: the same kernel built in every way the loader must handle.
std::vector<std::string> kernel_variants() {
  std::vector<std::string> names{"kernels_o2.o",    "kernels_o0.o",       "kernels_pic.o",
                                 "kernels_nopic.o", "kernels_debug.o",    "kernels_sections.o",
                                 "kernels_common.o", "kernels_noplt.o",    "kernels_lto_fat.o"};
#if defined(__x86_64__)
  names.push_back("kernels_large.o");
  names.push_back("kernels_large_pic.o");
#endif
  return names;
}

// A minimal reader of our own (trusted) test objects, to corrupt them on purpose.
struct Sections {
  Elf64_Ehdr header;
  std::vector<Elf64_Shdr> headers;
  std::vector<std::string> names;

  explicit Sections(const std::vector<std::byte>& bytes) {
    std::memcpy(&header, bytes.data(), sizeof header);
    headers.resize(header.e_shnum);
    std::memcpy(headers.data(), bytes.data() + header.e_shoff, header.e_shnum * sizeof(Elf64_Shdr));
    const auto& names_section = headers[header.e_shstrndx];
    for (const auto& section : headers) {
      names.emplace_back(reinterpret_cast<const char*>(bytes.data()) + names_section.sh_offset +
                         section.sh_name);
    }
  }

  std::size_t index_of(std::string_view name) const {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return i;
    }
    FAIL("no section " << name);
    return 0;
  }

  std::size_t header_offset(std::size_t index) const {
    return header.e_shoff + index * sizeof(Elf64_Shdr);
  }
};

template <class T>
void poke(std::vector<std::byte>& bytes, std::size_t offset, T value) {
  REQUIRE(offset + sizeof(T) <= bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

template <class T>
T peek(const std::vector<std::byte>& bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// The permissions ("r-xp"...) of the mapping holding `address`, from /proc/self/maps.
std::string permissions_of(const void* address) {
  const std::string line = rig::test::mapping_of(reinterpret_cast<std::uintptr_t>(address));
  if (line.empty()) return "unmapped";
  std::istringstream fields(line);
  std::string range, permissions;
  fields >> range >> permissions;
  return permissions;
}

// A page mapped far (terabytes) from anything else: at one of `starts`.
class FarPage {
 public:
  FarPage(int protection_after_fill, std::span<const std::uint8_t> contents,
          std::initializer_list<std::uintptr_t> starts) {
    for (const std::uintptr_t hint : starts) {
      void* page = mmap(reinterpret_cast<void*>(hint), page_bytes(), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (page != MAP_FAILED) {
        page_ = page;
        break;
      }
    }
    REQUIRE(page_ != nullptr);
    std::memcpy(page_, contents.data(), contents.size());
    REQUIRE(mprotect(page_, page_bytes(), protection_after_fill) == 0);
  }
  ~FarPage() { munmap(page_, page_bytes()); }
  void* address() const { return page_; }

 private:
  static std::size_t page_bytes() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
  void* page_ = nullptr;
};

std::uint64_t distance(const void* a, const void* b) {
  const auto x = reinterpret_cast<std::uintptr_t>(a);
  const auto y = reinterpret_cast<std::uintptr_t>(b);
  return x > y ? x - y : y - x;
}

#if defined(__x86_64__)
constexpr std::uint16_t kOtherMachine = EM_AARCH64;
constexpr const char* kMachineRefusal = "ELF for aarch64, this machine is x86_64";
constexpr std::uint32_t kCopyRelocation = R_X86_64_COPY;
constexpr const char* kCopyRelocationName = "R_X86_64_COPY";
// lea eax, [rdi + 100]; ret
constexpr std::uint8_t kFarFunctionCode[] = {0x8d, 0x47, 0x64, 0xc3};
#elif defined(__aarch64__)
constexpr std::uint16_t kOtherMachine = EM_X86_64;
constexpr const char* kMachineRefusal = "ELF for x86_64, this machine is aarch64";
constexpr std::uint32_t kCopyRelocation = R_AARCH64_COPY;
constexpr const char* kCopyRelocationName = "R_AARCH64_COPY";
// add w0, w0, #100; ret
constexpr std::uint8_t kFarFunctionCode[] = {0x00, 0x90, 0x01, 0x11, 0xc0, 0x03, 0x5f, 0xd6};
#endif

}  // namespace

TEST_CASE("a kernel that writes an array runs through a function pointer") {
  for (const auto& variant : kernel_variants()) {
    CAPTURE(variant);
    const auto image = load_ok(variant);
    const auto fill = function<void (*)(int*, int)>(*image, "fill_squares");
    const auto calls = function<int (*)()>(*image, "fill_calls");
    int values[32] = {};
    fill(values, 32);
    for (int i = 0; i < 32; ++i) CHECK(values[i] == i * i);
    fill(values, 4);
    CHECK(calls() == 2);

    const auto scale = function<void (*)(float*, int, float)>(*image, "scale");
    float floats[5] = {1, 2, 3, 4, 5};
    scale(floats, 5, 2.0f);
    CHECK(floats[0] == doctest::Approx(2.5));
    CHECK(floats[4] == doctest::Approx(10.5));
  }
}

TEST_CASE("static data, read-only tables and bss are laid out and initialised") {
  for (const auto& variant : kernel_variants()) {
    CAPTURE(variant);
    const auto image = load_ok(variant);
    const auto prime_at = function<int (*)(int)>(*image, "prime_at");
    CHECK(prime_at(0) == 2);
    CHECK(prime_at(5) == 13);
    CHECK(prime_at(15) == 53);

    const auto bump = function<int (*)(int)>(*image, "bump_seeded");
    CHECK(bump(1) == 21);
    CHECK(bump(1) == 22);
    CHECK(bump(3) == 41);

    const auto scratch_sum = function<int (*)(int)>(*image, "scratch_sum");
    CHECK(scratch_sum(10) == 3 * 45);  // bss starts zeroed
    CHECK(scratch_sum(10) == 6 * 45);

    const auto* squares = static_cast<const int*>(image->symbol("kSquares"));
    REQUIRE(squares != nullptr);
    CHECK(squares[7] == 49);
    CHECK(std::string(static_cast<const char*>(image->symbol("greeting"))) ==
          "hello from an ELF kernel");
  }
}

TEST_CASE("a global referenced from two functions is one variable") {
  for (const auto& variant : kernel_variants()) {
    CAPTURE(variant);
    const auto image = load_ok(variant);
    const auto add = function<void (*)(int)>(*image, "add_to_total");
    const auto get = function<int (*)()>(*image, "get_total");
    auto* total = static_cast<int*>(image->symbol("shared_total"));
    REQUIRE(total != nullptr);
    CHECK(*total == 0);
    add(5);
    add(37);
    CHECK(get() == 42);
    CHECK(*total == 42);
    *total = 7;
    CHECK(get() == 7);
  }
}

TEST_CASE("calls between functions in the object, direct and through a table") {
  for (const auto& variant : kernel_variants()) {
    CAPTURE(variant);
    const auto image = load_ok(variant);
    const auto sum_cubes = function<int (*)(int)>(*image, "sum_cubes");
    CHECK(sum_cubes(5) == 0 + 1 + 8 + 27 + 64);
    const auto apply = function<int (*)(int, int)>(*image, "apply_operation");
    CHECK(apply(0, 3) == 27);
    CHECK(apply(1, 3) == -3);
    const auto cube = function<int (*)(int)>(*image, "cube");
    CHECK(cube(-2) == -8);
  }
}

TEST_CASE("libc functions are reached through stubs") {
  for (const auto& variant : kernel_variants()) {
    CAPTURE(variant);
    const auto image = load_ok(variant);
    const auto measure = function<std::size_t (*)(const char*)>(*image, "measure");
    CHECK(measure("twelve chars") == 12);
    const auto copy = function<std::size_t (*)(char*, std::size_t)>(*image, "copy_greeting");
    char buffer[64];
    CHECK(copy(buffer, sizeof buffer) == 24);
    CHECK(std::string(buffer) == "hello from an ELF kernel");
    CHECK(copy(buffer, 6) == 5);
    CHECK(std::string(buffer) == "hello");
    const auto fill = function<void (*)(void*, int, std::size_t)>(*image, "fill_bytes");
    unsigned char bytes[100] = {};
    fill(bytes + 1, 0xab, 98);
    CHECK(bytes[0] == 0);
    CHECK(bytes[1] == 0xab);
    CHECK(bytes[98] == 0xab);
    CHECK(bytes[99] == 0);
  }
}

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer reserves most of the address space for its shadow and refuses mappings
// there; its application range from 4 KiB to 512 GiB still holds pages far from
// everything else (the binary and the libraries live near 0x55.. and 0x7f..).
constexpr std::initializer_list<std::uintptr_t> kFarStarts{0x1000000000ull, 0x1800000000ull};
constexpr std::initializer_list<std::uintptr_t> kNearbyFarStarts{0x1000100000ull, 0x1800100000ull};
constexpr std::initializer_list<std::uintptr_t> kOtherFarStarts{0x6000000000ull, 0x7000000000ull};
#else
constexpr std::initializer_list<std::uintptr_t> kFarStarts{0x200000000000ull, 0x210000000000ull};
constexpr std::initializer_list<std::uintptr_t> kNearbyFarStarts{0x200000100000ull, 0x210000100000ull};
constexpr std::initializer_list<std::uintptr_t> kOtherFarStarts{0x500000000000ull, 0x510000000000ull};
#endif

TEST_CASE("a call to a far external function goes through a stub") {
  const FarPage far_code(PROT_READ | PROT_EXEC, kFarFunctionCode, kFarStarts);
  std::vector<std::string> asked;
  const auto image = load_ok("far_call.o", [&](std::string_view name) -> void* {
    asked.emplace_back(name);
    return name == "far_function" ? far_code.address() : nullptr;
  });
  CHECK(distance(image->symbol("call_far"), far_code.address()) > (std::uint64_t{1} << 32));
  CHECK(asked == std::vector<std::string>{"far_function"});
  CHECK(function<int (*)(int)>(*image, "call_far")(1) == 102);
#if defined(__x86_64__)
  CHECK(function<int (*)(int)>(*image, "call_far_pc32")(5) == 105);
#endif
}

std::span<const std::uint8_t> bytes_of(const int& value) {
  return {reinterpret_cast<const std::uint8_t*>(&value), sizeof value};
}

TEST_CASE("an image is placed within reach of the far data it references PC-relatively") {
  const int value = 1234, other = 5678;
  const FarPage far_data(PROT_READ, bytes_of(value), kFarStarts);
  const FarPage far_data_other(PROT_READ, bytes_of(other), kNearbyFarStarts);
  const auto image = load_ok("far_data_nopic.o", [&](std::string_view name) -> void* {
    return name == "far_data" ? far_data.address() : name == "far_data_other" ? far_data_other.address() : nullptr;
  });
  CHECK(distance(image->symbol("read_far_data"), far_data.address()) < (std::uint64_t{1} << 31));
  CHECK(function<int (*)()>(*image, "read_far_data")() == 1234);
  CHECK(function<int (*)()>(*image, "read_far_data_other")() == 5678);
}

TEST_CASE("a PC-relative data reference out of reach is refused, with -fPIC it goes through the GOT") {
  const int value = 1234, other = 5678;
  const FarPage far_data(PROT_READ, bytes_of(value), kFarStarts);
  const FarPage far_data_other(PROT_READ, bytes_of(other), kOtherFarStarts);  // hundreds of GiB apart
  const auto resolve = [&](std::string_view name) -> void* {
    return name == "far_data" ? far_data.address() : name == "far_data_other" ? far_data_other.address() : nullptr;
  };
#if defined(__x86_64__)
  const auto error = load_error(object_bytes("far_data_nopic.o"), resolve);
  CHECK(error.starts_with("relocation R_X86_64_PC32 at .text+0x"));
  CHECK(error.find("against far_data") != std::string::npos);
  CHECK(error.find("2 GiB") != std::string::npos);
  CHECK(error.find("compile with -fPIC") != std::string::npos);
#endif
  const auto image = load_ok("far_data_pic.o", resolve);
  CHECK(function<int (*)()>(*image, "read_far_data")() == 1234);
  CHECK(function<int (*)()>(*image, "read_far_data_other")() == 5678);
}

int host_scale(int x) { return 3 * x; }
int host_bias = 1000;

TEST_CASE("a custom resolver resolves the object's undefined symbols") {
  std::set<std::string> asked;
  const auto image = load_ok("resolve.o", [&](std::string_view name) -> void* {
    asked.emplace(name);
    if (name == "host_scale") return reinterpret_cast<void*>(&host_scale);
    if (name == "host_bias") return &host_bias;
    return nullptr;
  });
  CHECK(asked == std::set<std::string>{"host_bias", "host_scale"});
  const auto scaled = function<int (*)(int)>(*image, "scaled_plus_bias");
  CHECK(scaled(7) == 1021);
  host_bias = 2000;
  CHECK(scaled(1) == 2003);
}

TEST_CASE("the object's own globals are not asked of the resolver") {
  std::vector<std::string> asked;
  const auto image = load_ok("kernels_pic.o", [&](std::string_view name) -> void* {
    asked.emplace_back(name);
    static const std::set<std::string_view> libc{"memcpy", "memset", "strlen"};
    if (!libc.contains(name)) return nullptr;
    return dlsym(RTLD_DEFAULT, std::string(name).c_str());
  });
  for (const auto& name : asked) CHECK_MESSAGE(image->symbol(name) == nullptr, name);
}

TEST_CASE("an undefined symbol is refused, naming it") {
  const auto bytes = object_bytes("undefined.o");
  CHECK(load_error(bytes) == "undefined symbol rig_test_missing_symbol");
  CHECK(load_error(bytes, [](std::string_view) { return nullptr; }) ==
        "undefined symbol rig_test_missing_symbol");
}

TEST_CASE("a weak undefined symbol resolves to null") {
  const auto image = load_ok("weak.o");
  CHECK(function<int (*)()>(*image, "has_weak")() == 0);
}

TEST_CASE("symbols, sizes and function names come from the symbol table") {
  const auto image = load_ok("kernels_o2.o");
  CHECK(image->symbol_size("kSquares") == 8 * sizeof(int));
  CHECK(image->symbol_size("shared_total") == sizeof(int));
  CHECK(image->symbol_size("greeting") == 25);
  CHECK(image->symbol_size("fill_squares") > 0);
  CHECK(image->symbol("no_such_symbol") == nullptr);
  CHECK(image->symbol_size("no_such_symbol") == 0);
  CHECK(image->symbol("square") == nullptr);   // static: not exported
  CHECK(image->symbol("kPrimes") == nullptr);  // static: not exported

  const auto functions = image->functions();
  const std::vector<std::string> names(functions.begin(), functions.end());
  const std::set<std::string> expected{"cube",        "negate",          "fill_squares",
                                       "fill_calls",  "prime_at",        "bump_seeded",
                                       "scratch_sum", "add_to_total",    "get_total",
                                       "sum_cubes",   "apply_operation", "measure",
                                       "copy_greeting", "fill_bytes",    "scale"};
  CHECK(std::set<std::string>(names.begin(), names.end()) == expected);
  CHECK(names.size() == expected.size());
  for (const auto& name : names) CHECK(image->symbol(name) != nullptr);
}

TEST_CASE("COMMON symbols are allocated and zeroed") {
  const auto bytes = object_bytes("kernels_common.o");
  const Sections sections(bytes);
  bool has_common = false;
  const auto& symtab = sections.headers[sections.index_of(".symtab")];
  for (std::size_t at = symtab.sh_offset; at < symtab.sh_offset + symtab.sh_size; at += sizeof(Elf64_Sym)) {
    has_common = has_common || peek<Elf64_Sym>(bytes, at).st_shndx == SHN_COMMON;
  }
  CHECK(has_common);
  const auto image = load_ok("kernels_common.o");
  auto* total = static_cast<int*>(image->symbol("shared_total"));
  REQUIRE(total != nullptr);
  CHECK(*total == 0);
  CHECK(image->symbol_size("shared_total") == sizeof(int));
  function<void (*)(int)>(*image, "add_to_total")(9);
  CHECK(*total == 9);
}

TEST_CASE("debug sections and their relocations are ignored") {
  const auto bytes = object_bytes("kernels_debug.o");
  const Sections sections(bytes);
  CHECK(sections.index_of(".rela.debug_info") > 0);
  const auto image = load_ok("kernels_debug.o");
  CHECK(function<int (*)(int)>(*image, "sum_cubes")(3) == 9);
}

TEST_CASE("images are independent: each load has its own data") {
  const auto first = load_ok("kernels_o2.o");
  const auto second = load_ok("kernels_o2.o");
  function<void (*)(int)>(*first, "add_to_total")(3);
  CHECK(function<int (*)()>(*first, "get_total")() == 3);
  CHECK(function<int (*)()>(*second, "get_total")() == 0);
}

TEST_CASE("code is mapped W^X: text read+exec, rodata read-only, data read-write") {
  for (const auto& variant : kernel_variants()) {
    CAPTURE(variant);
    const auto image = load_ok(variant);
    CHECK(permissions_of(image->symbol("fill_squares")) == "r-xp");
    CHECK(permissions_of(image->symbol("kSquares")) == "r--p");
    CHECK(permissions_of(image->symbol("shared_total")) == "rw-p");
  }
}

TEST_CASE("the image occupies whole pages, and is unmapped with it") {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  void* code = nullptr;
  {
    const auto image = load_ok("kernels_o2.o");
    CHECK(image->mapped_bytes() >= 3 * page);  // text, rodata and data
    CHECK(image->mapped_bytes() % page == 0);
    code = image->symbol("fill_squares");
    CHECK(permissions_of(code) == "r-xp");
  }
  CHECK(permissions_of(code) != "r-xp");
}

TEST_CASE("an empty span is refused") {
  CHECK(load_error({}) == "not an ELF file");
}

TEST_CASE("bytes that are not ELF are refused") {
  const std::string text = "#!/bin/sh\necho not an object\n";
  CHECK(load_error(std::as_bytes(std::span(text))) == "not an ELF file");
}

TEST_CASE("an object of GCC LTO bytecode only (-flto, slim) is refused, saying what to do") {
  CHECK(load_error(object_bytes("kernels_lto_slim.o")) ==
        "the object holds only GCC LTO bytecode (sections .gnu.lto_*), no machine code: compile it without "
        "-flto, or with -ffat-lto-objects");
}

TEST_CASE("a fat LTO object (-flto -ffat-lto-objects) loads its machine code") {
  const auto image = load_ok("kernels_lto_fat.o");
  int values[8] = {};
  function<void (*)(int*, int)>(*image, "fill_squares")(values, 8);
  CHECK(values[7] == 49);
}

TEST_CASE("LLVM bitcode, raw or wrapped, is refused as such") {
  for (std::array<unsigned char, 8> magic : {std::array<unsigned char, 8>{'B', 'C', 0xC0, 0xDE, 0x35, 0x14, 0, 0},
                                             std::array<unsigned char, 8>{0xDE, 0xC0, 0x17, 0x0B, 0, 0, 0, 0}}) {
    CHECK(load_error(std::as_bytes(std::span(magic))) ==
          "an LLVM bitcode file (clang -flto), not an ELF object: it holds no machine code; compile it without "
          "-flto");
  }
}

TEST_CASE("an ELF object of LLVM bitcode only (section .llvm.lto) is refused") {
  // The slim GCC object with its LTO sections renamed: what matters is an .llvm.lto section
  // and no allocated section with bytes.
  auto bytes = object_bytes("kernels_lto_slim.o");
  const auto& header = *reinterpret_cast<const Elf64_Ehdr*>(bytes.data());
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(bytes.data() + header.e_shoff);
  auto* names = reinterpret_cast<char*>(bytes.data() + sections[header.e_shstrndx].sh_offset);
  bool renamed = false;
  for (std::size_t i = 1; i < header.e_shnum; ++i) {
    char* name = names + sections[i].sh_name;
    if (std::strncmp(name, ".gnu.lto_", 9) == 0) std::memcpy(name, ".llvm.lto", 10), renamed = true;
  }
  REQUIRE(renamed);
  CHECK(load_error(bytes) ==
        "the object holds only LLVM bitcode (section .llvm.lto), no machine code: compile it without -flto, or "
        "with -ffat-lto-objects");
}

TEST_CASE("every prefix of a real object gives an error or an image, never a crash") {
  for (const char* name : {"kernels_o2.o", "resolve.o"}) {
    CAPTURE(name);
    const auto bytes = object_bytes(name);
    std::size_t refused = 0;
    for (std::size_t length = 0; length < bytes.size(); ++length) {
      const auto image = ElfImage::load(std::span(bytes).first(length));
      if (!image) {
        ++refused;
        CHECK(!image.error().empty());
      }
    }
    CHECK(refused > 0);
    CHECK(load_error(std::span(bytes).first(10)) == "truncated: the ELF header runs past the end of the file");
    CHECK(load_error(std::span(bytes).first(bytes.size() - 1)).starts_with("truncated:"));
  }
}

TEST_CASE("a section running past the end of the file is refused as truncated") {
  auto bytes = object_bytes("kernels_o2.o");
  const Sections sections(bytes);
  const auto text = sections.index_of(".text");
  poke<Elf64_Off>(bytes, sections.header_offset(text) + offsetof(Elf64_Shdr, sh_offset), bytes.size() - 4);
  CHECK(load_error(bytes) == "truncated: section " + std::to_string(text) + " runs past the end of the file");
}

TEST_CASE("a corrupt section header is refused") {
  const auto original = object_bytes("kernels_o2.o");
  const Sections sections(original);

  SUBCASE("wrong entry size") {
    auto bytes = original;
    poke<Elf64_Half>(bytes, offsetof(Elf64_Ehdr, e_shentsize), 40);
    CHECK(load_error(bytes) == "section header size 40 is not 64");
  }
  SUBCASE("table beyond the file") {
    auto bytes = original;
    poke<Elf64_Off>(bytes, offsetof(Elf64_Ehdr, e_shoff), bytes.size() - 10);
    CHECK(load_error(bytes) == "truncated: the section header table runs past the end of the file");
  }
  SUBCASE("offset overflowing") {
    auto bytes = original;
    poke<Elf64_Off>(bytes, offsetof(Elf64_Ehdr, e_shoff), ~Elf64_Off{0} - 8);
    CHECK(load_error(bytes).starts_with("truncated:"));
  }
  SUBCASE("section size overflowing") {
    auto bytes = original;
    const auto text = sections.index_of(".text");
    poke<Elf64_Xword>(bytes, sections.header_offset(text) + offsetof(Elf64_Shdr, sh_size), ~Elf64_Xword{0});
    CHECK(load_error(bytes).starts_with("truncated:"));
  }
  SUBCASE("name outside the name table") {
    auto bytes = original;
    poke<Elf64_Word>(bytes, sections.header_offset(1) + offsetof(Elf64_Shdr, sh_name), 0xfffffff0);
    CHECK(load_error(bytes) == "section 1: its name lies outside the section name table");
  }
  SUBCASE("name table index out of range") {
    auto bytes = original;
    poke<Elf64_Half>(bytes, offsetof(Elf64_Ehdr, e_shstrndx), 5000);
    CHECK(load_error(bytes) == "section name table index 5000 is out of range");
  }
  SUBCASE("alignment not a power of two") {
    auto bytes = original;
    const auto text = sections.index_of(".text");
    poke<Elf64_Xword>(bytes, sections.header_offset(text) + offsetof(Elf64_Shdr, sh_addralign), 24);
    CHECK(load_error(bytes) == "section .text: alignment 24 is not a power of two");
  }
  SUBCASE("huge alignment") {
    auto bytes = original;
    const auto data = sections.index_of(".data");
    poke<Elf64_Xword>(bytes, sections.header_offset(data) + offsetof(Elf64_Shdr, sh_addralign), Elf64_Xword{1} << 40);
    CHECK(load_error(bytes).find("larger than a page") != std::string::npos);
  }
  SUBCASE("huge bss") {
    auto bytes = original;
    const auto bss = sections.index_of(".bss");
    poke<Elf64_Xword>(bytes, sections.header_offset(bss) + offsetof(Elf64_Shdr, sh_size), Elf64_Xword{1} << 62);
    CHECK(load_error(bytes).find("too large") != std::string::npos);
  }
  SUBCASE("symbol table with a wrong entry size") {
    auto bytes = original;
    const auto symtab = sections.index_of(".symtab");
    poke<Elf64_Xword>(bytes, sections.header_offset(symtab) + offsetof(Elf64_Shdr, sh_entsize), 16);
    CHECK(load_error(bytes) == "symbol table entry size 16 is not 24");
  }
  SUBCASE("relocations against a section that does not exist") {
    auto bytes = original;
    const auto rela = sections.index_of(".rela.text");
    poke<Elf64_Word>(bytes, sections.header_offset(rela) + offsetof(Elf64_Shdr, sh_info), 999);
    CHECK(load_error(bytes).find("which does not exist") != std::string::npos);
  }
}

TEST_CASE("a shared object (ET_DYN) and an executable (ET_EXEC) are refused") {
  CHECK(load_error(object_bytes("shared.so")) == "not a relocatable object (ET_DYN)");
  auto bytes = object_bytes("kernels_o2.o");
  poke<Elf64_Half>(bytes, offsetof(Elf64_Ehdr, e_type), ET_EXEC);
  CHECK(load_error(bytes) == "not a relocatable object (ET_EXEC)");
  poke<Elf64_Half>(bytes, offsetof(Elf64_Ehdr, e_type), ET_CORE);
  CHECK(load_error(bytes) == "not a relocatable object (ET_CORE)");
}

TEST_CASE("an object for another machine is refused") {
  auto bytes = object_bytes("kernels_o2.o");
  poke<Elf64_Half>(bytes, offsetof(Elf64_Ehdr, e_machine), kOtherMachine);
  CHECK(load_error(bytes) == kMachineRefusal);
  poke<Elf64_Half>(bytes, offsetof(Elf64_Ehdr, e_machine), EM_RISCV);
  CHECK(load_error(bytes).starts_with("ELF for riscv, this machine is"));
}

TEST_CASE("32-bit and big-endian ELF are refused") {
  auto bytes = object_bytes("kernels_o2.o");
  bytes[EI_CLASS] = std::byte{ELFCLASS32};
  CHECK(load_error(bytes) == "32-bit ELF is not supported");
  bytes[EI_CLASS] = std::byte{ELFCLASS64};
  bytes[EI_DATA] = std::byte{ELFDATA2MSB};
  CHECK(load_error(bytes) == "big-endian ELF is not supported");
}

TEST_CASE("an unsupported relocation is refused, naming it and its section") {
  auto bytes = object_bytes("kernels_o2.o");
  const Sections sections(bytes);
  const auto rela = sections.headers[sections.index_of(".rela.text")];
  const auto info_offset = rela.sh_offset + offsetof(Elf64_Rela, r_info);
  const auto info = peek<Elf64_Xword>(bytes, info_offset);
  poke<Elf64_Xword>(bytes, info_offset, ELF64_R_INFO(ELF64_R_SYM(info), kCopyRelocation));
  CHECK(load_error(bytes) == std::string("unsupported relocation ") + kCopyRelocationName + " in .text");
  poke<Elf64_Xword>(bytes, info_offset, ELF64_R_INFO(ELF64_R_SYM(info), 250));
  CHECK(load_error(bytes) == "unsupported relocation type 250 in .text");
}

TEST_CASE("a relocation outside its section or with a bad symbol is refused") {
  const auto original = object_bytes("kernels_o2.o");
  const Sections sections(original);
  const auto rela = sections.headers[sections.index_of(".rela.text")];
  const auto text_size = sections.headers[sections.index_of(".text")].sh_size;

  auto bytes = original;
  poke<Elf64_Addr>(bytes, rela.sh_offset + offsetof(Elf64_Rela, r_offset), text_size - 2);
  CHECK(load_error(bytes).find("lies outside the section") != std::string::npos);
  poke<Elf64_Addr>(bytes, rela.sh_offset + offsetof(Elf64_Rela, r_offset), ~Elf64_Addr{0} - 1);
  CHECK(load_error(bytes).find("lies outside the section") != std::string::npos);

  bytes = original;
  const auto info = peek<Elf64_Xword>(bytes, rela.sh_offset + offsetof(Elf64_Rela, r_info));
  poke<Elf64_Xword>(bytes, rela.sh_offset + offsetof(Elf64_Rela, r_info),
                    ELF64_R_INFO(0x7fffffff, ELF64_R_TYPE(info)));
  CHECK(load_error(bytes).find("which does not exist") != std::string::npos);
}

TEST_CASE("thread-local variables are refused") {
  CHECK(load_error(object_bytes("tls.o")) == "thread-local storage is not supported (section .tbss)");
  const auto error = load_error(object_bytes("tls_extern.o"));
  CHECK(error.starts_with("thread-local storage is not supported (relocation "));
  CHECK(error.find("in .text") != std::string::npos);
}

TEST_CASE("constructors are refused") {
  CHECK(load_error(object_bytes("ctor.o")) == "constructors are not supported (section .init_array)");
}

TEST_CASE("random corruption of a real object never crashes the loader") {
  const auto original = object_bytes("kernels_o2.o");
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const Sections sections(original);
  const std::size_t headers_begin = sections.header.e_shoff;
  std::size_t loaded = 0;
  for (int round = 0; round < 3000; ++round) {
    auto bytes = original;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int i = 0; i < flips; ++i) {
      // Mostly the headers, where a flip changes how everything else is read.
      const std::size_t region = next() % 3;
      const std::size_t at = region == 0   ? next() % sizeof(Elf64_Ehdr)
                             : region == 1 ? headers_begin + next() % (bytes.size() - headers_begin)
                                           : next() % bytes.size();
      bytes[at] ^= static_cast<std::byte>(1u << (next() % 8));
    }
    // Every undefined symbol resolves, so that corrupt relocations get applied too.
    static char anything[64];
    const auto image = ElfImage::load(bytes, [](std::string_view) -> void* { return anything; });
    if (image) ++loaded;
  }
  MESSAGE("corrupted objects that still loaded: " << loaded << " of 3000");
}
