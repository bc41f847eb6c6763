// The code-object reader (amdgpu/abi/code_object.hpp) against two other readings of the
// same files, made at build time: llvm-readelf-19 --notes --symbols (the metadata note and
// the symbols) and clang-19 -S (the assembler's .amdhsa_* directives, which the assembler
// encodes into each kernel descriptor). The code objects are tests/amd/kernels/amd_kernels.c
// built by clang-19 for gfx1100, gfx1201 and gfx942.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include "code_object.hpp"
#include "readelf_notes.hpp"

using namespace rig::amd;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "missing build output ", path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::span<const std::byte> bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string file(const std::string& arch, const char* ext) {
  return fmt::format("{}/amd_kernels_{}.{}", RIG_AMD_KERNEL_DIR, arch, ext);
}

// The assembler's directives per kernel: ".amdhsa_user_sgpr_count" -> 15, ...
std::map<std::string, std::map<std::string, std::uint64_t>> directives(const std::string& asm_text) {
  std::map<std::string, std::map<std::string, std::uint64_t>> out;
  std::istringstream in(asm_text);
  std::string line, kernel;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key;
    words >> key;
    if (key == ".amdhsa_kernel") words >> kernel;
    else if (key == ".end_amdhsa_kernel") kernel.clear();
    else if (!kernel.empty() && key.starts_with(".amdhsa_")) {
      std::uint64_t v = 0;
      if (words >> v) out[kernel][key] = v;
    }
  }
  return out;
}

// Symbol values from llvm-readelf --symbols: name -> value.
std::map<std::string, std::uint64_t> symbols(const std::string& text) {
  std::map<std::string, std::uint64_t> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream w(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!(w >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if (num.empty() || num.back() != ':' || value.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
    out[name] = std::stoull(value, nullptr, 16);
  }
  return out;
}

void check_arch(const std::string& arch) {
  CAPTURE(arch);
  std::string elf = slurp(file(arch, "co"));
  std::string notes = slurp(file(arch, "notes"));
  auto dirs = directives(slurp(file(arch, "s")));
  auto syms = symbols(notes);
  auto object = read_code_object(bytes(elf));
  REQUIRE_MESSAGE(object.has_value(), object.error());
  auto noted = rig::test::amd::parse_readelf_notes(notes);
  REQUIRE(noted.size() == 1);
  CHECK(object->target == noted[0].target);
  CHECK(object->arch == arch);
  REQUIRE(object->kernels.size() == noted[0].kernels.size());
  REQUIRE(object->kernels.size() == 5);
  for (auto& n : noted[0].kernels) {
    const Kernel* k = object->find(n.fields.at(".name"));
    REQUIRE(k);
    CAPTURE(k->name);
    // Against the metadata as llvm-readelf reads it.
    CHECK(k->symbol == n.fields.at(".symbol"));
    CHECK(k->kernarg_segment_size == n.number(".kernarg_segment_size"));
    CHECK(k->kernarg_segment_align == n.number(".kernarg_segment_align"));
    CHECK(k->group_segment_fixed_size == n.number(".group_segment_fixed_size"));
    CHECK(k->private_segment_fixed_size == n.number(".private_segment_fixed_size"));
    CHECK(k->wavefront_size == n.number(".wavefront_size"));
    CHECK(k->max_flat_workgroup_size == n.number(".max_flat_workgroup_size"));
    CHECK(k->sgpr_count == n.number(".sgpr_count"));
    CHECK(k->vgpr_count == n.number(".vgpr_count"));
    REQUIRE(k->args.size() == n.args.size());
    for (std::size_t i = 0; i < k->args.size(); ++i) {
      CHECK(k->args[i].offset == n.args[i].offset);
      CHECK(k->args[i].size == n.args[i].size);
      CHECK(k->args[i].value_kind == n.args[i].value_kind);
    }
    // Against the symbols: the descriptor is NAME.kd, and its entry is the function NAME.
    CHECK(k->descriptor_address == syms.at(k->symbol));
    CHECK(k->code_address() == syms.at(k->name));
    // Against the directives the assembler encoded into the descriptor.
    auto& d = dirs.at(k->name);
    const auto& kd = k->descriptor;
    CHECK(kd.group_segment_fixed_size == d.at(".amdhsa_group_segment_fixed_size"));
    CHECK(kd.private_segment_fixed_size == d.at(".amdhsa_private_segment_fixed_size"));
    CHECK(kd.kernarg_size == d.at(".amdhsa_kernarg_size"));
    CHECK(kd.user_sgpr_count() == d.at(".amdhsa_user_sgpr_count"));
    CHECK(bool(kd.kernel_code_properties & KernelDescriptor::kKernargSegmentPtr) ==
          bool(d.at(".amdhsa_user_sgpr_kernarg_segment_ptr")));
    CHECK(bool(kd.kernel_code_properties & KernelDescriptor::kDispatchPtr) ==
          bool(d.at(".amdhsa_user_sgpr_dispatch_ptr")));
    CHECK(bool((kd.compute_pgm_rsrc2 >> 7) & 1) == bool(d.at(".amdhsa_system_sgpr_workgroup_id_x")));
    CHECK(((kd.compute_pgm_rsrc2 >> 11) & 3) == d.at(".amdhsa_system_vgpr_workitem_id"));
    if (d.count(".amdhsa_wavefront_size32")) CHECK(kd.wave32() == bool(d.at(".amdhsa_wavefront_size32")));
    else CHECK(!kd.wave32());
    CHECK(kd.wave32() == (k->wavefront_size == 32));
  }
}

}  // namespace

TEST_CASE("the reader agrees with llvm-readelf and the assembler on gfx1100 code objects") { check_arch("gfx1100"); }
TEST_CASE("the reader agrees with llvm-readelf and the assembler on gfx1201 code objects") { check_arch("gfx1201"); }
TEST_CASE("the reader agrees with llvm-readelf and the assembler on gfx942 code objects") { check_arch("gfx942"); }

TEST_CASE("a kernel's arguments give offsets, sizes and kinds, hidden ones included") {
  std::string elf = slurp(file("gfx1100", "co"));
  auto object = read_code_object(bytes(elf));
  REQUIRE(object);
  const Kernel* add = object->find("vector_add");
  REQUIRE(add);
  REQUIRE(add->args.size() >= 5);
  CHECK(add->args[0].value_kind == "global_buffer");
  CHECK(add->args[0].size == 8);
  CHECK(add->args[3].value_kind == "by_value");
  CHECK(add->args[3].offset == 24);
  bool hidden = false;  // workgroup_size_x reads the hidden group size (code object v5)
  for (auto& a : add->args) hidden |= a.value_kind == "hidden_group_size_x";
  CHECK(hidden);
  CHECK(object->version == std::vector<std::uint32_t>{1, 2});
  const Kernel* reduce = object->find("reduce_sum");
  REQUIRE(reduce);
  CHECK(reduce->group_segment_fixed_size == 256);  // 64 uint32_t in LDS
}

TEST_CASE("place lays the segments out and applies the relative relocation") {
  std::string elf = slurp(file("gfx1100", "co"));
  auto object = read_code_object(bytes(elf));
  REQUIRE(object);
  REQUIRE(object->relocations.size() == 1);
  auto& r = object->relocations[0];
  CHECK(r.type == kRelocRelative64);
  const std::uint64_t base = 0x7f1234560000;
  auto image = place(*object, bytes(elf), base);
  REQUIRE(image);
  CHECK(image->size() == object->image_bytes);
  std::uint64_t patched;
  std::memcpy(&patched, image->data() + r.offset, 8);
  CHECK(patched == base + std::uint64_t(r.addend));
  // The table the pointer names holds the squares.
  std::uint32_t table[8];
  std::memcpy(table, image->data() + r.addend, sizeof table);
  CHECK(table[3] == 9);
  // A descriptor lies where its symbol says, as read.
  auto& k = *object->find("saxpy");
  auto kd = KernelDescriptor::decode(bytes(*image).subspan(k.descriptor_address, 64));
  REQUIRE(kd);
  CHECK(kd->compute_pgm_rsrc2 == k.descriptor.compute_pgm_rsrc2);
}

TEST_CASE("the reader refuses what is not an AMDGPU code object, saying why") {
  std::string junk = "not an elf at all";
  auto r = read_code_object(bytes(junk));
  REQUIRE(!r);
  CHECK(r.error().find("not an ELF") != std::string::npos);
  std::string elf = slurp(file("gfx1100", "co"));
  elf[18] = 62;  // e_machine: x86-64
  r = read_code_object(bytes(elf));
  REQUIRE(!r);
  CHECK(r.error().find("not an AMDGPU object") != std::string::npos);
  std::string object_file = slurp(fmt::format("{}/amd_kernels_gfx1100.o", RIG_AMD_KERNEL_DIR));
  r = read_code_object(bytes(object_file));
  REQUIRE(!r);
  CHECK(r.error().find("not a shared object") != std::string::npos);
}

TEST_CASE("processor_of drops the triple and the features") {
  CHECK(processor_of("amdgcn-amd-amdhsa--gfx90a:xnack+") == "gfx90a");
  CHECK(processor_of("amdgcn-amd-amdhsa--gfx1100") == "gfx1100");
  CHECK(processor_of("hipv4-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack-") == "gfx906");
}
