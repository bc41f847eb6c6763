// The cubin and fatbin reader's promises (nvgpu/abi/cubin.hpp) on the committed nvcc-built
// kernels: each kernel's facts, its parameters laid out as its PTX declares them, relocations
// applied as S + A, the fatbin's entry for an SM picked, and every kind of bad input refused by
// name. (Sections and relocations are compared with readelf by check_readelf.py.)
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <sstream>

#include "cubin.hpp"
#include "kernel_files.hpp"

using namespace rig::nv;
using namespace nvgpu_test;

namespace {

Cubin cubin(const std::string& base) {
  auto c = read_cubin(kernel_file(base + ".cubin"), base);
  REQUIRE_MESSAGE(c, (c ? std::string() : c.error()));
  return std::move(*c);
}

// Each .entry's parameters as the PTX declares them: (offset, size), each aligned to its size.
std::vector<std::pair<std::string, std::vector<Cubin_param>>> ptx_params(const std::string& text) {
  std::vector<std::pair<std::string, std::vector<Cubin_param>>> out;
  const std::regex entry(R"(\.entry\s+(\w+)\s*\()"), param(R"(^\s*\.param\s+\.(\w)(\d+)\s+(?:\.ptr\s+\S+\s+)?\w+_param_(\d+))");
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  std::uint32_t at = 0;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      out.push_back({m[1], {}});
      inside = true;
      at = 0;
    } else if (inside && std::regex_search(line, m, param)) {
      const std::uint32_t size = std::stoul(m[2]) / 8;
      at = (at + size - 1) / size * size;
      out.back().second.push_back({static_cast<std::uint32_t>(std::stoul(m[3])), at, size});
      at += size;
    } else if (inside && line.find(')') != std::string::npos) {
      inside = false;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("every committed cubin reads, its SM taken from e_flags") {
  for (const char* k : kernel_sources)
    for (unsigned sm : kernel_sms) {
      const auto c = cubin(fmt::format("{}.sm_{}", k, sm));
      CHECK(c.sm == sm);
      CHECK(!c.kernels.empty());
      for (const auto& kernel : c.kernels) {
        CAPTURE(kernel.name);
        CHECK(!c.bytes(kernel.text_section).empty());
        CHECK(kernel.registers > 0);
        CHECK(!kernel.exit_offsets.empty());
      }
    }
}

TEST_CASE("each kernel's parameters lie where its PTX lays them out") {
  for (const char* k : kernel_sources)
    for (unsigned sm : kernel_sms) {
      const std::string base = fmt::format("{}.sm_{}", k, sm);
      CAPTURE(base);
      const auto c = cubin(base);
      const auto entries = ptx_params(kernel_text(base + ".ptx"));
      REQUIRE(entries.size() == c.kernels.size());
      for (const auto& [name, params] : entries) {
        CAPTURE(name);
        const auto* kernel = c.kernel(name);
        REQUIRE(kernel);
        REQUIRE(kernel->params.size() == params.size());
        std::uint32_t end = 0;
        for (std::size_t i = 0; i < params.size(); ++i) {
          CHECK(kernel->params[i].ordinal == params[i].ordinal);
          CHECK(kernel->params[i].offset == params[i].offset);
          CHECK(kernel->params[i].size == params[i].size);
          end = std::max(end, params[i].offset + params[i].size);
        }
        CHECK(kernel->param_size == end);
        CHECK(kernel->cbank_param_size == end);
        // Parameters start at 0x210 of bank 0 on sm_90 and at 0x160 before Hopper.
        CHECK(kernel->param_offset == (sm == 90 ? 0x210u : 0x160u));
      }
    }
}

TEST_CASE("a kernel's registers, barriers, threads, shared memory and banks are those its cubin records") {
  const auto r = cubin("reduce.sm_80");
  const auto* k = r.kernel("reduce_sum");
  REQUIRE(k);
  CHECK(k->registers == 14);  // REGCOUNT, also .text sh_info 31:24 before sm_90
  CHECK((r.sections[k->text_section].info >> 24) == 14);
  CHECK(k->barriers == 1);    // NUM_BARRIERS
  CHECK(k->max_threads == std::array<std::uint32_t, 3>{256, 1, 1});
  CHECK(k->static_shared == 128);
  CHECK(k->exit_offsets == std::vector<std::uint32_t>{0x1c0, 0x2c0, 0x310});
  REQUIRE(k->banks.size() >= 1);
  CHECK(k->banks[0].first == 0);
  CHECK(r.sections[k->banks[0].second].name == ".nv.constant0.reduce_sum");
  const auto s = cubin("saxpy.sm_90");
  const auto* sx = s.kernel("saxpy");
  REQUIRE(sx);
  CHECK(sx->registers == 10);  // sm_90 leaves sh_info 31:24 at 0: REGCOUNT gives it
  CHECK(sx->barriers == 0);
  CHECK(sx->max_threads == std::array<std::uint32_t, 3>{0, 0, 0});
  CHECK(s.bytes(sx->text_section).size() == 512);
}

TEST_CASE("module-wide banks and globals are found") {
  const auto g = cubin("globals.sm_90");
  std::vector<std::uint32_t> banks;
  for (const auto& [bank, index] : g.banks) banks.push_back(bank);
  std::sort(banks.begin(), banks.end());
  CHECK(banks == std::vector<std::uint32_t>{3, 4});
  REQUIRE(g.global);
  CHECK(g.sections[*g.global].name == ".nv.global");
  CHECK(g.kernel("scale_by_constants"));
  CHECK(g.kernel("read_launched"));
}

TEST_CASE("relocations write S + A into the image, REL taking A from the field") {
  for (unsigned sm : kernel_sms) {
    const auto g = cubin(fmt::format("globals.sm_{}", sm));
    const auto bank4 = g.section_index(".nv.constant4");
    REQUIRE(bank4);
    std::vector<std::byte> image(g.bytes(*bank4).begin(), g.bytes(*bank4).end());
    std::vector<std::uint64_t> at(g.sections.size(), 0);
    at[*g.global] = 0x7000'0000;
    REQUIRE(relocate(g, *bank4, image, at));
    const Cubin_relocation* r = nullptr;
    for (const auto& x : g.relocations)
      if (x.section == *bank4) r = &x;
    REQUIRE(r);
    CHECK(r->type == r_cuda::R_CUDA_64);
    const auto& sym = g.symbols[r->symbol];
    CHECK(sym.name == "launched");
    std::uint64_t written;
    std::memcpy(&written, image.data() + r->offset, 8);
    CHECK(written == 0x7000'0000 + sym.value + static_cast<std::uint64_t>(r->addend));
    // A symbol whose section has no address is refused.
    at[*g.global] = 0;
    const auto none = relocate(g, *bank4, image, at);
    REQUIRE(!none);
    CHECK(none.error().find("launched lies in a section with no GPU address") != std::string::npos);
    // So is an image that is not the section's size.
    image.push_back(std::byte{0});
    CHECK(!relocate(g, *bank4, image, at));
  }
}

TEST_CASE("the ABS32 and ABS47 relocations write their bits of S + A and leave the others") {
  // The first relocation of globals.sm_90 (R_CUDA_64 at offset 0 of .nv.constant4) retyped.
  const auto base = kernel_file("globals.sm_90.cubin");
  const auto g = cubin("globals.sm_90");
  const auto table = *g.section_index(".rela.nv.constant4");
  struct Case {
    std::uint32_t type;
    std::uint64_t expect;  // the 8 bytes at offset 0 after relocation, from all-ones
  };
  const std::uint64_t s = 0x1234'5678'9abc'0000;  // the section address; `launched` is at + 0
  const Case cases[] = {
      {r_cuda::R_CUDA_ABS32_LO_32, (s << 32) | 0xffff'ffffu},
      {r_cuda::R_CUDA_ABS32_HI_32, (s & 0xffff'ffff'0000'0000u) | 0xffff'ffffu},
      {r_cuda::R_CUDA_ABS47_34, ((s & ((1ull << 47) - 1)) << 34) | ((1ull << 34) - 1)},
  };
  for (const auto& c : cases) {
    CAPTURE(c.type);
    auto bytes = base;
    bytes[g.sections[table].offset + 8] = std::byte(c.type);
    auto patched = read_cubin(bytes, "patched");
    REQUIRE(patched);
    const auto bank4 = *patched->section_index(".nv.constant4");
    std::vector<std::byte> image(patched->sections[bank4].size, std::byte{0xff});
    std::vector<std::uint64_t> at(patched->sections.size(), 0);
    at[*patched->global] = s;
    const auto r = relocate(*patched, bank4, image, at);
    if (c.type == r_cuda::R_CUDA_ABS47_34) {
      // .nv.constant4 has 8 bytes, the field needs 11: refused, not written past the image.
      REQUIRE(!r);
      CHECK(r.error().find("its 11-byte field runs past the section's 8 bytes") != std::string::npos);
      // Pointed at the 20-byte .nv.constant3 instead (the table's sh_info), it writes bits 80:34.
      std::uint64_t shoff;
      std::memcpy(&shoff, bytes.data() + 40, 8);
      const auto bank3 = *g.section_index(".nv.constant3");
      const auto info = static_cast<std::uint32_t>(bank3);
      std::memcpy(bytes.data() + shoff + 64 * table + 44, &info, 4);
      auto moved = read_cubin(bytes, "moved");
      REQUIRE(moved);
      std::vector<std::byte> wide(moved->sections[bank3].size, std::byte{0xff});
      REQUIRE(relocate(*moved, bank3, wide, at));
      std::uint64_t low, high = 0;
      std::memcpy(&low, wide.data(), 8);
      std::memcpy(&high, wide.data() + 8, 3);
      CHECK(low == c.expect);
      CHECK(high == ((((s & ((1ull << 47) - 1)) >> 30) & 0x1ffff) | 0xfe0000));  // bits 80:64, then ones
      continue;
    }
    REQUIRE_MESSAGE(r, (r ? std::string() : r.error()));
    std::uint64_t got;
    std::memcpy(&got, image.data(), 8);
    CHECK(got == c.expect);
  }
}

TEST_CASE("an unsupported relocation type is refused by its number") {
  auto bytes = kernel_file("globals.sm_90.cubin");
  auto g = cubin("globals.sm_90");
  const auto table = g.section_index(".rela.nv.constant4");
  REQUIRE(table);
  bytes[g.sections[*table].offset + 8] = std::byte{0x41};  // ELF64_R_TYPE of the first entry
  auto c = read_cubin(bytes, "patched");
  REQUIRE(c);
  const auto bank4 = *c->section_index(".nv.constant4");
  std::vector<std::byte> image(c->bytes(bank4).begin(), c->bytes(bank4).end());
  std::vector<std::uint64_t> at(c->sections.size(), 0x1000);
  const auto r = relocate(*c, bank4, image, at);
  REQUIRE(!r);
  CHECK(r.error() == "cubin patched: relocation at .nv.constant4+0x0: unsupported relocation type 0x41");
}

TEST_CASE("a truncated cubin is refused naming the image, never read past its end") {
  const auto bytes = kernel_file("saxpy.sm_90.cubin");
  std::uint64_t shoff;
  std::uint16_t shnum;
  std::memcpy(&shoff, bytes.data() + 40, 8);
  std::memcpy(&shnum, bytes.data() + 60, 2);
  const std::size_t table_end = shoff + 64 * shnum;
  for (std::size_t n : {std::size_t{0}, std::size_t{10}, std::size_t{63}, std::size_t{64}, std::size_t{0x700},
                        table_end - 1}) {
    CAPTURE(n);
    const auto c = read_cubin(std::span(bytes).first(n), "short");
    REQUIRE(!c);
    CHECK(c.error().starts_with("cubin short: "));
  }
  CHECK(read_cubin(std::span(bytes).first(10), "short").error().find("shorter than an ELF header") != std::string::npos);
  CHECK(read_cubin(std::span(bytes).first(table_end - 1), "short").error().find("section table") != std::string::npos);
}

TEST_CASE("a file that is not a CUDA ELF is refused") {
  auto bytes = kernel_file("saxpy.sm_90.cubin");
  auto x86 = bytes;
  x86[18] = std::byte{62};  // EM_X86_64
  CHECK(read_cubin(x86, "x").error() == "cubin x: e_machine 62 is not EM_CUDA (190)");
  auto text = bytes;
  text[0] = std::byte{'#'};
  CHECK(read_cubin(text, "t").error() == "cubin t: not an ELF file");
  auto elf32 = bytes;
  elf32[4] = std::byte{1};
  CHECK(read_cubin(elf32, "e").error().find("64-bit little-endian") != std::string::npos);
}

TEST_CASE("a bad .nv.info record is refused naming the section and the attribute") {
  const auto bytes = kernel_file("saxpy.sm_90.cubin");
  const auto c = cubin("saxpy.sm_90");
  const auto& info = *c.section(".nv.info.saxpy");
  // The first record is CUDA_API_VERSION (SVAL, 4 bytes): claim more bytes than the section holds.
  auto longer = bytes;
  longer[info.offset + 2] = std::byte{0xff};
  auto r = read_cubin(longer, "long");
  REQUIRE(!r);
  CHECK(r.error().find(".nv.info.saxpy: attribute 0x37 at 0x0 claims 255 bytes past the section's end") != std::string::npos);
  auto format = bytes;
  format[info.offset] = std::byte{9};
  r = read_cubin(format, "fmt");
  REQUIRE(!r);
  CHECK(r.error().find("format 9") != std::string::npos);
  // PARAM_CBANK (0x0a) with 4 bytes where 8 are due: rename the 4-byte CUDA_API_VERSION record.
  auto cbank = bytes;
  cbank[info.offset + 1] = std::byte{0x0a};
  r = read_cubin(cbank, "cbank");
  REQUIRE(!r);
  CHECK(r.error().find("attribute 0x0a has 4 bytes where 8 are due") != std::string::npos);
}

TEST_CASE("a fatbin's entries are read by kind and SM, zstd entries decompressed") {
  for (unsigned sm : kernel_sms) {
    const std::string base = fmt::format("saxpy.sm_{}", sm);
    auto entries = read_fatbin(kernel_file(base + ".fatbin"), base);
    REQUIRE_MESSAGE(entries, (entries ? std::string() : entries.error()));
    REQUIRE(entries->size() == 2);
    const auto elf = std::find_if(entries->begin(), entries->end(), [](const Fatbin_entry& e) { return !e.ptx; });
    const auto ptx = std::find_if(entries->begin(), entries->end(), [](const Fatbin_entry& e) { return e.ptx; });
    REQUIRE(elf != entries->end());
    REQUIRE(ptx != entries->end());
    CHECK(elf->sm == sm);
    CHECK(ptx->sm == sm);
    CHECK(ptx->was_compressed);
    const std::string text(reinterpret_cast<const char*>(ptx->payload.data()), ptx->payload.size());
    CHECK(text.find(".entry saxpy") != std::string::npos);
    // On sm_90 the fatbin's ELF is the cubin nvcc -cubin writes, byte for byte.
    if (sm == 90) CHECK(elf->payload == kernel_file(base + ".cubin"));
    auto c = cubin_for_sm(kernel_file(base + ".fatbin"), sm, base);
    REQUIRE_MESSAGE(c, (c ? std::string() : c.error()));
    CHECK(c->kernel("saxpy"));
  }
}

TEST_CASE("a fatbin without SASS for the GPU's SM is refused, naming what it holds") {
  const auto c = cubin_for_sm(kernel_file("saxpy.sm_80.fatbin"), 90, "saxpy.sm_80.fatbin");
  REQUIRE(!c);
  CHECK(c.error() ==
        "fatbin saxpy.sm_80.fatbin: no SASS for sm_90 in the fatbin (it holds sm_80, compute_80 PTX); rig does not JIT PTX "
        "without libcuda");
}

TEST_CASE("a bad fatbin is refused: magic, truncation, entry kind, compression") {
  const auto bytes = kernel_file("saxpy.sm_90.fatbin");
  auto magic = bytes;
  magic[0] = std::byte{0};
  CHECK(read_fatbin(magic, "m").error().find("magic 0xba55ed00") != std::string::npos);
  for (std::size_t n : {std::size_t{8}, std::size_t{40}, bytes.size() - 1}) {
    const auto r = read_fatbin(std::span(bytes).first(n), "short");
    REQUIRE(!r);
    CHECK(r.error().starts_with("fatbin short: "));
  }
  auto kind = bytes;
  kind[16] = std::byte{7};
  CHECK(read_fatbin(kind, "k").error().find("kind 7") != std::string::npos);
  // The PTX entry (second) comes after the ELF entry's header and payload.
  const std::size_t ptx = 16 + 64 + 3848;
  auto lz4 = bytes;
  lz4[ptx + 41] |= std::byte{0x20};  // flags bit 0x2000
  CHECK(read_fatbin(lz4, "l").error().find("LZ4") != std::string::npos);
  auto claims = bytes;
  claims[ptx + 58] = std::byte{0x10};  // uncompressed size 1 MiB + the frame's
  CHECK(read_fatbin(claims, "c").error().find("its zstd frame 0x337") != std::string::npos);
  auto broken = bytes;
  broken[ptx + 80 + 10] ^= std::byte{0xff};
  CHECK(read_fatbin(broken, "z").error().find("does not decompress") != std::string::npos);
}
