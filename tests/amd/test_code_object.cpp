// The code-object reader (amdgpu/abi/code_object.hpp) against two other readings of the
// same files, made at build time: llvm-readelf-19 --notes --symbols (the metadata note and
// the symbols) and clang-19 -S (the assembler's .amdhsa_* directives, which the assembler
// encodes into each kernel descriptor). The code objects are tests/amd/kernels/amd_kernels.c
// built by clang-19 for gfx1100, gfx1201, gfx942 and gfx90a.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>

#include "build_outputs.hpp"
#include "code_object.hpp"
#include "readelf_notes.hpp"

using namespace rig::amd;

using rig::test::amd::slurp;

namespace {

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
  REQUIRE(object->kernels.size() == 6);
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
    if (arch == "gfx942" || arch == "gfx90a") {  // RSRC3's AccVGPR offset and TG_SPLIT
      CHECK(kd.accum_offset() == d.at(".amdhsa_accum_offset"));
      CHECK(kd.tg_split() == bool(d.at(".amdhsa_tg_split")));
      CHECK((kd.compute_pgm_rsrc3 & ~(0x3fu | 1u << 16)) == 0);
    }
  }
  // Its kernels run on the processor it is for.
  auto runs = check_for(*object, arch);
  const std::string why = runs.has_value() ? std::string() : runs.error();
  INFO(why);
  CHECK(runs.has_value());
}

// A copy of `elf` with its ELF header's e_flags (bytes 48..51 of an ELF64 header) set.
std::string with_flags(std::string elf, std::uint32_t flags) {
  std::memcpy(elf.data() + 48, &flags, 4);
  return elf;
}

}  // namespace

TEST_CASE("the reader agrees with llvm-readelf and the assembler on gfx1100 code objects") { check_arch("gfx1100"); }
TEST_CASE("the reader agrees with llvm-readelf and the assembler on gfx1201 code objects") { check_arch("gfx1201"); }
TEST_CASE("the reader agrees with llvm-readelf and the assembler on gfx942 code objects") { check_arch("gfx942"); }
TEST_CASE("the reader agrees with llvm-readelf and the assembler on gfx90a code objects") { check_arch("gfx90a"); }

TEST_CASE("the ELF header's flags name the processor and its xnack and sramecc settings") {
  // llvm-readelf-19 -h: 0x54C gfx942, xnack, sramecc; 0x53F gfx90a, xnack, sramecc; 0x41 gfx1100.
  auto gfx942 = read_code_object(bytes(slurp(file("gfx942", "co"))));
  REQUIRE(gfx942);
  CHECK(gfx942->mach == kMachGfx942);
  CHECK(gfx942->xnack == Feature::Any);
  CHECK(gfx942->sramecc == Feature::Any);
  auto gfx90a = read_code_object(bytes(slurp(file("gfx90a", "co"))));
  REQUIRE(gfx90a);
  CHECK(gfx90a->mach == kMachGfx90a);
  CHECK((gfx90a->xnack == Feature::Any && gfx90a->sramecc == Feature::Any));
  auto gfx1100 = read_code_object(bytes(slurp(file("gfx1100", "co"))));
  REQUIRE(gfx1100);
  CHECK(gfx1100->mach == kMachGfx1100);
  CHECK((gfx1100->xnack == Feature::Unsupported && gfx1100->sramecc == Feature::Unsupported));
  CHECK(processor_of_mach(kMachGfx942) == "gfx942");
  CHECK(processor_of_mach(0x2c).empty());  // gfx900: not one of rig's
  // xnack on, sramecc off: read as they are.
  auto settings = read_code_object(bytes(with_flags(slurp(file("gfx942", "co")), kMachGfx942 | 0x300 | 0x800)));
  REQUIRE(settings);
  CHECK((settings->xnack == Feature::On && settings->sramecc == Feature::Off));
}

TEST_CASE("a code object whose ELF header names another processor than its metadata is refused") {
  auto r = read_code_object(bytes(with_flags(slurp(file("gfx942", "co")), kMachGfx90a | 0x500)));
  REQUIRE(!r);
  CHECK(r.error() == "the ELF header names gfx90a (EF_AMDGPU_MACH 0x3f) but the metadata's target is "
                     "amdgcn-amd-amdhsa--gfx942");
}

TEST_CASE("gfx90a and gfx942 run wave64 kernels with 64 KiB of LDS and 131056 bytes of scratch per lane") {
  for (const char* p : {"gfx90a", "gfx942"}) {
    auto l = limits_of(p);
    REQUIRE(l);
    CHECK(l->wave_size == 64);
    CHECK(l->lds_bytes == 64 * 1024);
    CHECK(l->private_bytes == 131056);
  }
  auto gfx11 = limits_of("gfx1100");
  REQUIRE(gfx11);
  CHECK((gfx11->wave_size == 32 && gfx11->lds_bytes == 64 * 1024 && gfx11->private_bytes == 262136));
  CHECK(!limits_of("gfx906"));
}

TEST_CASE("a code object is refused for another processor, and a kernel past the processor's limits by name") {
  auto object = read_code_object(bytes(slurp(file("gfx942", "co"))));
  REQUIRE(object);
  CHECK(check_for(*object, "gfx942").has_value());
  auto other = check_for(*object, "gfx90a");
  REQUIRE(!other);
  CHECK(other.error() == "a code object for gfx942, not gfx90a");
  // A wave32 kernel (gfx1100's) on gfx9, and a wave64 one on gfx11.
  auto wave32 = read_code_object(bytes(slurp(file("gfx1100", "co"))));
  REQUIRE(wave32);
  wave32->arch = "gfx942";
  auto w32 = check_for(*wave32, "gfx942");
  REQUIRE(!w32);
  CHECK(w32.error() == fmt::format("kernel {} is wave32, and gfx942 runs wave64 kernels only", wave32->kernels[0].name));
  auto wave64 = *object;
  wave64.arch = "gfx1100";
  auto w64 = check_for(wave64, "gfx1100");
  REQUIRE(!w64);
  CHECK(w64.error().find("is wave64, and gfx1100 runs wave32 kernels only") != std::string::npos);
  // Group-shared memory: 64 KiB is the limit, a byte more is refused.
  auto lds = *object;
  lds.kernels[1].group_segment_fixed_size = 64 * 1024;
  CHECK(check_for(lds, "gfx942").has_value());
  lds.kernels[1].group_segment_fixed_size = 64 * 1024 + 1;
  auto over = check_for(lds, "gfx942");
  REQUIRE(!over);
  CHECK(over.error() == fmt::format("kernel {} uses 65537 bytes of group-shared memory, over gfx942's 65536 per group",
                                    lds.kernels[1].name));
  // Private memory: 131056 bytes per lane at most.
  auto scratch = *object;
  scratch.kernels[2].private_segment_fixed_size = 131056;
  CHECK(check_for(scratch, "gfx942").has_value());
  scratch.kernels[2].private_segment_fixed_size = 131057;
  auto deep = check_for(scratch, "gfx942");
  REQUIRE(!deep);
  CHECK(deep.error() == fmt::format("kernel {} uses 131057 bytes of private memory per lane, over gfx942's 131056",
                                    scratch.kernels[2].name));
  auto unknown = *object;
  unknown.arch = "gfx906";
  auto none = check_for(unknown, "gfx906");
  REQUIRE(!none);
  CHECK(none.error() == "no kernel limits are known for gfx906");
}

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
