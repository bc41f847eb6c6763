// The simulator's kernels: the fatbin and cubin reader (cubin.hpp) on the committed nvcc
// builds of kernels/*.cu and on broken copies of them, and Code (code.hpp) registering,
// finding and running them as the compute engine does.
#include <doctest/doctest.h>

#include <code.hpp>
#include <cubin.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace nv = rig::sim::nv;
namespace cb = rig::sim::nv::cubin;

namespace {

std::vector<std::byte> read_bytes(const std::string& file) {
  std::ifstream in(std::string(RIG_NV_KERNELS) + "/" + file, std::ios::binary);
  REQUIRE_MESSAGE(in, "no committed kernel file " << file);
  const std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}
std::string read_text(const std::string& file) {
  const auto b = read_bytes(file);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// PTX without its comments, each run of white space one space: nvcc's fatbin holds the PTX
// of `nvcc -ptx` in this form.
std::string squeezed(std::string_view ptx) {
  std::string out;
  bool space = false;
  for (std::size_t i = 0; i < ptx.size(); ++i) {
    if (ptx.substr(i, 2) == "//") {
      while (i < ptx.size() && ptx[i] != '\n') ++i;
      space = true;
      continue;
    }
    const char c = ptx[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out += ' ';
    space = false;
    out += c;
  }
  return out;
}

template <class T>
void put(std::vector<std::byte>& b, std::size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

// A copy of `cubin` whose (empty) section `rela` holds one RELA entry of `type` at `offset`
// of the section it patches, appended at the end of the file.
std::vector<std::byte> with_relocation(std::vector<std::byte> cubin, const std::string& rela, std::uint64_t offset,
                                       std::uint32_t type) {
  const auto get64 = [&](std::size_t at) {
    std::uint64_t v;
    std::memcpy(&v, cubin.data() + at, 8);
    return v;
  };
  const auto get32 = [&](std::size_t at) {
    std::uint32_t v;
    std::memcpy(&v, cubin.data() + at, 4);
    return v;
  };
  std::uint16_t shnum, shstrndx;
  std::memcpy(&shnum, cubin.data() + 60, 2);
  std::memcpy(&shstrndx, cubin.data() + 62, 2);
  const std::uint64_t shoff = get64(40), strtab = get64(shoff + 64 * shstrndx + 24);
  for (std::size_t i = 0; i < shnum; ++i) {
    const std::size_t header = shoff + 64 * i;
    if (reinterpret_cast<const char*>(cubin.data()) + strtab + get32(header) != rela) continue;
    const std::size_t at = cubin.size();
    cubin.resize(at + 24);
    put<std::uint64_t>(cubin, at, offset);
    put<std::uint64_t>(cubin, at + 8, type);  // symbol 0
    put<std::int64_t>(cubin, at + 16, 0);
    put<std::uint64_t>(cubin, header + 24, at);
    put<std::uint64_t>(cubin, header + 32, 24);
    return cubin;
  }
  FAIL("no section " << rela);
  return {};
}

const cb::Kernel_info& kernel(const cb::Cubin& c, const std::string& name) {
  const auto it = std::find_if(c.kernels.begin(), c.kernels.end(), [&](const auto& k) { return k.name == name; });
  REQUIRE_MESSAGE(it != c.kernels.end(), "no kernel " << name);
  return *it;
}

// GPU memory as the engine sees it: buffers at chosen addresses.
struct Memory : rig::ptx::Memory {
  std::map<std::uint64_t, std::vector<std::byte>> buffers;
  std::uint64_t put_bytes(std::uint64_t at, std::span<const std::byte> bytes) {
    buffers[at].assign(bytes.begin(), bytes.end());
    return at;
  }
  template <class T>
  std::uint64_t put_vector(std::uint64_t at, const std::vector<T>& v) {
    return put_bytes(at, std::as_bytes(std::span(v)));
  }
  template <class T>
  std::vector<T> get(std::uint64_t at, std::size_t n) {
    std::vector<T> v(n);
    std::memcpy(v.data(), buffers.at(at).data(), n * sizeof(T));
    return v;
  }
  std::optional<rig::ptx::Mapping> map(std::uint64_t address, std::uint64_t size, bool) override {
    auto it = buffers.upper_bound(address);
    if (it == buffers.begin()) return std::nullopt;
    --it;
    if (address - it->first > it->second.size() || size > it->second.size() - (address - it->first)) return std::nullopt;
    return rig::ptx::Mapping{it->first, it->second.size(), it->second.data()};
  }
};

// A parameter buffer of `size` bytes with each (offset, value) written.
template <class... Args>
std::vector<std::byte> params(std::uint32_t size, std::pair<std::uint32_t, Args>... fields) {
  std::vector<std::byte> b(size);
  (put(b, fields.first, fields.second), ...);
  return b;
}

}  // namespace

// ---- The reader.

TEST_CASE("a fatbin's entries are its cubin as nvcc -cubin writes it and its PTX, decompressed") {
  // The PTX entry is nvcc -ptx's text without comments and with white space squeezed.
  for (const std::string sm : {"90", "80"}) {
    CAPTURE(sm);
    const auto entries = cb::read_fatbin(read_bytes("saxpy.sm_" + sm + ".fatbin"), "saxpy.fatbin");
    REQUIRE_MESSAGE(entries, (entries ? std::string() : entries.error()));
    REQUIRE(entries->size() == 2);
    const auto& elf = (*entries)[0].kind == cb::Entry_kind::elf ? (*entries)[0] : (*entries)[1];
    const auto& ptx = (*entries)[0].kind == cb::Entry_kind::ptx ? (*entries)[0] : (*entries)[1];
    CHECK(elf.kind == cb::Entry_kind::elf);
    CHECK(ptx.kind == cb::Entry_kind::ptx);
    CHECK(elf.sm == unsigned(std::stoi(sm)));
    CHECK(ptx.sm == unsigned(std::stoi(sm)));
    CHECK(elf.payload == read_bytes("saxpy.sm_" + sm + ".cubin"));
    CHECK(ptx.compressed);
    const std::string_view text(reinterpret_cast<const char*>(ptx.payload.data()), ptx.payload.size());
    CHECK(squeezed(text) == squeezed(read_text("saxpy.sm_" + sm + ".ptx")));
    CHECK(text.find("saxpy_param_3") != std::string_view::npos);
  }
}

TEST_CASE("a compressed entry that decompresses to another size than its header declares is refused") {
  auto bytes = read_bytes("saxpy.sm_90.fatbin");
  const auto entries = cb::read_fatbin(bytes);
  REQUIRE(entries);
  // The PTX entry follows the ELF entry: header 16, ELF entry header and payload.
  std::uint32_t elf_header;
  std::uint64_t elf_size, declared;
  std::memcpy(&elf_header, bytes.data() + 16 + 4, 4);
  std::memcpy(&elf_size, bytes.data() + 16 + 8, 8);
  const std::size_t ptx_entry = 16 + elf_header + elf_size;
  std::memcpy(&declared, bytes.data() + ptx_entry + 56, 8);
  put<std::uint64_t>(bytes, ptx_entry + 56, declared + 1);
  auto r = cb::read_fatbin(bytes, "saxpy.sm_90.fatbin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("saxpy.sm_90.fatbin") != std::string::npos);
  CHECK(r.error().find("decompresses to " + std::to_string(declared)) != std::string::npos);
  put<std::uint64_t>(bytes, ptx_entry + 56, 1ull << 40);
  r = cb::read_fatbin(bytes, "saxpy.sm_90.fatbin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("more than the") != std::string::npos);
}

TEST_CASE("a fatbin cut short, or without the magic, is refused naming the file and the reason") {
  auto bytes = read_bytes("saxpy.sm_90.fatbin");
  auto cut = bytes;
  cut.resize(cut.size() - 100);
  auto r = cb::read_fatbin(cut, "cut.fatbin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("cut.fatbin") != std::string::npos);
  CHECK(r.error().find("past the end") != std::string::npos);
  r = cb::read_fatbin(std::span(bytes).first(8), "tiny.fatbin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("too short") != std::string::npos);
  bytes[0] = std::byte{0};
  r = cb::read_fatbin(bytes, "nomagic.fatbin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("no fatbin magic") != std::string::npos);
}

TEST_CASE("a cubin gives each kernel's SM, parameter bank, parameters and registers") {
  for (const auto& [sm, bank_offset] : {std::pair{90u, 0x210u}, std::pair{80u, 0x160u}}) {
    CAPTURE(sm);
    const auto c = cb::read_cubin(read_bytes("saxpy.sm_" + std::to_string(sm) + ".cubin"));
    REQUIRE_MESSAGE(c, (c ? std::string() : c.error()));
    CHECK(c->sm == sm);
    REQUIRE(c->kernels.size() == 1);
    const auto& k = kernel(*c, "saxpy");
    CHECK(k.param_offset == bank_offset);
    CHECK(k.param_size == 28);  // float a, two pointers, unsigned n
    REQUIRE(k.params.size() == 4);
    CHECK(k.params[0].offset == 0);
    CHECK(k.params[0].size == 4);
    CHECK(k.params[1].offset == 8);
    CHECK(k.params[1].size == 8);
    CHECK(k.params[3].offset == 24);
    CHECK(k.params[3].size == 4);
    CHECK(k.registers > 0);
    CHECK(k.registers < 64);
    CHECK(k.text.size() % 16 == 0);
    CHECK(k.max_threads == 0);
  }
}

TEST_CASE("a cubin gives a kernel's static shared size and its launch bounds") {
  const auto c = cb::read_cubin(read_bytes("reduce.sm_90.cubin"));
  REQUIRE_MESSAGE(c, (c ? std::string() : c.error()));
  const auto& k = kernel(*c, "reduce_sum");
  CHECK(k.static_shared == 32 * 4 + 1024);  // warp_sums and sm_90's reserved 1 KiB
  CHECK(k.max_threads == 256);
  const auto d = cb::read_cubin(read_bytes("dynshared.sm_90.cubin"));
  REQUIRE(d);
  CHECK(kernel(*d, "reverse_block").static_shared == 1024);  // only the reserved block
}

TEST_CASE("a cubin gives its __constant__ variables in bank 3 and its __device__ globals' bank-4 relocations") {
  for (const std::string sm : {"90", "80"}) {
    CAPTURE(sm);
    const auto c = cb::read_cubin(read_bytes("globals.sm_" + sm + ".cubin"));
    REQUIRE_MESSAGE(c, (c ? std::string() : c.error()));
    CHECK(c->kernels.size() == 2);
    std::map<std::string, cb::Variable> vars;
    for (const auto& v : c->variables) vars[v.name] = v;
    REQUIRE(vars.count("coefficients"));
    REQUIRE(vars.count("bias"));
    REQUIRE(vars.count("launched"));
    CHECK(vars["coefficients"].bank == 3);
    CHECK(vars["coefficients"].size == 16);
    CHECK_FALSE(vars["coefficients"].global);
    CHECK(vars["launched"].global);
    CHECK(vars["launched"].size == 4);
    const auto& bank3 = c->constant_data[3];
    REQUIRE(bank3.size() >= vars["bias"].offset + 4);
    std::int32_t values[4], bias;
    std::memcpy(values, bank3.data() + vars["coefficients"].offset, 16);
    std::memcpy(&bias, bank3.data() + vars["bias"].offset, 4);
    CHECK(values[0] == 1);
    CHECK(values[3] == 4);
    CHECK(bias == 100);
    REQUIRE(c->bank_relocs.size() == 1);
    CHECK(c->bank_relocs[0].bank == 4);
    CHECK(c->bank_relocs[0].type == cb::kRelocCuda64);
    CHECK(c->bank_relocs[0].symbol == "launched");
    CHECK(c->bank_relocs[0].offset + 8 <= c->constant_data[4].size());
  }
}

TEST_CASE("a file that is no CUDA ELF, or whose sections lie outside it, is refused naming the file") {
  auto bytes = read_bytes("saxpy.sm_90.cubin");
  auto r = cb::read_cubin(read_bytes("saxpy.sm_90.ptx"), "saxpy.ptx");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("saxpy.ptx") != std::string::npos);
  CHECK(r.error().find("not an ELF") != std::string::npos);
  auto machine = bytes;
  put<std::uint16_t>(machine, 18, 62);  // EM_X86_64
  r = cb::read_cubin(machine, "x86.o");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("not EM_CUDA") != std::string::npos);
  auto headers = bytes;
  put<std::uint64_t>(headers, 40, bytes.size() - 10);  // e_shoff near the end
  r = cb::read_cubin(headers, "shoff.cubin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("section header") != std::string::npos);
  CHECK(r.error().find("runs past the end") != std::string::npos);
  r = cb::read_cubin(std::span(bytes).first(40), "short.cubin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("too short") != std::string::npos);
}

// ---- Code.

TEST_CASE("add_fatbin registers every kernel of the fatbin's cubin for the SM") {
  nv::Code code;
  const auto n = code.add_fatbin(read_bytes("globals.sm_90.fatbin"), 90, "globals.fatbin");
  REQUIRE_MESSAGE(n, (n ? std::string() : n.error()));
  CHECK(*n == 2);
  const auto m = code.add_fatbin(read_bytes("reduce.sm_80.fatbin"), 80, "reduce.fatbin");
  REQUIRE_MESSAGE(m, (m ? std::string() : m.error()));
  CHECK(*m == 1);
}

TEST_CASE("add_fatbin refuses a fatbin without a cubin for the SM, or that is no fatbin") {
  nv::Code code;
  auto r = code.add_fatbin(read_bytes("saxpy.sm_80.fatbin"), 90, "saxpy.sm_80.fatbin");
  REQUIRE_FALSE(r);
  CHECK(r.error() == "saxpy.sm_80.fatbin: no cubin for sm_90 (it has sm_80)");
  r = code.add_fatbin(read_bytes("saxpy.sm_90.cubin"), 90, "saxpy.cubin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("saxpy.cubin: not a fatbin") == 0);
}

TEST_CASE("add refuses a cubin whose kernel its PTX lacks, and PTX the interpreter refuses") {
  nv::Code code;
  auto r = code.add(read_bytes("saxpy.sm_90.cubin"), read_text("reduce.sm_90.ptx"), "mixed");
  REQUIRE_FALSE(r);
  CHECK(r.error() == "mixed: the cubin's kernel saxpy is not in its PTX");
  r = code.add(read_bytes("saxpy.sm_90.cubin"), ".version 8.0\n.target sm_90\nbogus;\n", "bad");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("bad: its PTX does not load") == 0);
}

TEST_CASE("find gives the kernel whose SASS lies at the address, with its cubin's attributes") {
  nv::Code code;
  REQUIRE(code.add_fatbin(read_bytes("saxpy.sm_90.fatbin"), 90, "saxpy"));
  REQUIRE(code.add_fatbin(read_bytes("reduce.sm_90.fatbin"), 90, "reduce"));
  const auto saxpy = cb::read_cubin(read_bytes("saxpy.sm_90.cubin"));
  const auto reduce = cb::read_cubin(read_bytes("reduce.sm_90.cubin"));
  REQUIRE(saxpy);
  REQUIRE(reduce);
  Memory memory;
  memory.put_bytes(0x10000, kernel(*saxpy, "saxpy").text);
  memory.put_bytes(0x20000, kernel(*reduce, "reduce_sum").text);
  const auto a = code.find(0x10000, memory);
  REQUIRE_MESSAGE(a, (a ? std::string() : a.error()));
  CHECK((*a)->name == "saxpy");
  CHECK((*a)->sm == 90);
  CHECK((*a)->param_offset == 0x210);
  CHECK((*a)->param_size == 28);
  CHECK((*a)->sass_size == kernel(*saxpy, "saxpy").text.size());
  const auto b = code.find(0x20000, memory);
  REQUIRE_MESSAGE(b, (b ? std::string() : b.error()));
  CHECK((*b)->name == "reduce_sum");
  CHECK((*b)->static_shared == 1152);
  CHECK((*b)->max_threads == 256);
  CHECK((*b)->registers == kernel(*reduce, "reduce_sum").registers);
}

TEST_CASE("find refuses an address where nothing is mapped, or whose bytes are no kernel's") {
  nv::Code code;
  REQUIRE(code.add_fatbin(read_bytes("saxpy.sm_90.fatbin"), 90, "saxpy"));
  const auto saxpy = cb::read_cubin(read_bytes("saxpy.sm_90.cubin"));
  REQUIRE(saxpy);
  Memory memory;
  auto text = kernel(*saxpy, "saxpy").text;
  text[text.size() - 20] ^= std::byte{1};  // one bit of the last instructions
  memory.put_bytes(0x10000, text);
  auto r = code.find(0x10000, memory);
  REQUIRE_FALSE(r);
  CHECK(r.error() == "no kernel at 0x10000: its bytes are no registered kernel's SASS");
  r = code.find(0x90000, memory);
  REQUIRE_FALSE(r);
  CHECK(r.error() == "no kernel at 0x90000: nothing is mapped there");
  // The SASS cut short by the end of its mapping is no kernel either.
  memory.put_bytes(0x10000, std::span(kernel(*saxpy, "saxpy").text).first(64));
  r = code.find(0x10000, memory);
  REQUIRE_FALSE(r);
  CHECK(r.error().find("no registered kernel's SASS") != std::string::npos);
}

TEST_CASE("find leaves out of the comparison the instruction a relocation in .text fills") {
  // nvcc fills no .text relocation in whole-program cubins: one is added to the empty
  // .rela.text.reduce_sum, an R_CUDA_ABS32_LO_32 (0x38) into the instruction at 0x40.
  const auto cubin = with_relocation(read_bytes("reduce.sm_90.cubin"), ".rela.text.reduce_sum", 0x44, 0x38);
  const auto c = cb::read_cubin(cubin);
  REQUIRE_MESSAGE(c, (c ? std::string() : c.error()));
  REQUIRE(kernel(*c, "reduce_sum").text_relocs.size() == 1);
  CHECK(kernel(*c, "reduce_sum").text_relocs[0].type == 0x38);
  nv::Code code;
  REQUIRE(code.add(cubin, read_text("reduce.sm_90.ptx"), "reduce"));
  Memory memory;
  auto text = kernel(*c, "reduce_sum").text;
  for (std::size_t i = 0x40; i < 0x50; ++i) text[i] = std::byte{0xa5};  // what a loader filled in
  memory.put_bytes(0x10000, text);
  auto found = code.find(0x10000, memory);
  REQUIRE_MESSAGE(found, (found ? std::string() : found.error()));
  CHECK((*found)->name == "reduce_sum");
  text[0x50] ^= std::byte{0x10};  // the next instruction is compared
  memory.put_bytes(0x10000, text);
  CHECK_FALSE(code.find(0x10000, memory));
  // In the first bytes, which the index hashes, too.
  text = kernel(*c, "reduce_sum").text;
  const auto early = with_relocation(read_bytes("reduce.sm_90.cubin"), ".rela.text.reduce_sum", 0x10, 0x38);
  nv::Code other;
  REQUIRE(other.add(early, read_text("reduce.sm_90.ptx"), "reduce"));
  text[0x18] ^= std::byte{0xff};
  memory.put_bytes(0x10000, text);
  CHECK(other.find(0x10000, memory));
  CHECK_FALSE(code.find(0x10000, memory));
}

TEST_CASE("a relocation past its section's bytes is refused naming the section") {
  const auto cubin = with_relocation(read_bytes("reduce.sm_90.cubin"), ".rela.text.reduce_sum", 0x100000, 0x38);
  const auto r = cb::read_cubin(cubin, "far.cubin");
  REQUIRE_FALSE(r);
  CHECK(r.error().find("far.cubin: ") == 0);
  CHECK(r.error().find(".text.reduce_sum at 0x100000 lies past its") != std::string::npos);
}

TEST_CASE("run runs the kernel's PTX over the grid on the engine's memory") {
  nv::Code code;
  REQUIRE(code.add_fatbin(read_bytes("saxpy.sm_90.fatbin"), 90, "saxpy"));
  const auto c = cb::read_cubin(read_bytes("saxpy.sm_90.cubin"));
  REQUIRE(c);
  Memory memory;
  memory.put_bytes(0x10000, kernel(*c, "saxpy").text);
  const unsigned n = 300;
  std::vector<float> x(n), y(n);
  for (unsigned i = 0; i < n; ++i) x[i] = float(i), y[i] = 1.0f;
  memory.put_vector(0x100000, x);
  memory.put_vector(0x200000, y);
  const auto k = code.find(0x10000, memory);
  REQUIRE(k);
  const auto p = params(28, std::pair{0u, 2.0f}, std::pair{8u, std::uint64_t{0x100000}},
                        std::pair{16u, std::uint64_t{0x200000}}, std::pair{24u, n});
  rig::ptx::Launch launch;
  launch.grid = {3, 1, 1};
  launch.block = {128, 1, 1};
  launch.params = p;
  const auto r = code.run(**k, launch, memory, {});
  REQUIRE_MESSAGE(r, (r ? std::string() : r.error()));
  CHECK(r->instructions > 0);
  const auto out = memory.get<float>(0x200000, n);
  for (unsigned i = 0; i < n; ++i) REQUIRE(out[i] == 2.0f * float(i) + 1.0f);
}

TEST_CASE("run places module variables where the kernel's Symbols say the cubin put them") {
  nv::Code code;
  REQUIRE(code.add_fatbin(read_bytes("globals.sm_90.fatbin"), 90, "globals"));
  const auto c = cb::read_cubin(read_bytes("globals.sm_90.cubin"));
  REQUIRE(c);
  Memory memory;
  memory.put_bytes(0x10000, kernel(*c, "scale_by_constants").text);
  memory.put_bytes(0x20000, kernel(*c, "read_launched").text);
  // What a driver does with the cubin: bank 3 holds .nv.constant3, .nv.global gets memory
  // and bank 4 its address where the R_CUDA_64 relocation says.
  const std::uint64_t bank3 = 0x30000, bank4 = 0x40000, global = 0x50000, out = 0x60000;
  memory.put_bytes(bank3, c->constant_data[3]);
  auto bank4_bytes = c->constant_data[4];
  put<std::uint64_t>(bank4_bytes, c->bank_relocs[0].offset, global);
  memory.put_bytes(bank4, bank4_bytes);
  memory.put_vector(global, std::vector<std::uint32_t>{0});
  memory.put_vector(out, std::vector<std::int32_t>(64, -1));
  const auto scale = code.find(0x10000, memory);
  REQUIRE(scale);
  std::vector<nv::Placement> placements;
  for (const auto& s : (*scale)->symbols) {
    // As the engine does: the bank's address from the QMD, then the symbol's rule.
    const std::uint64_t bank = s.bank == 3 ? bank3 : bank4;
    std::uint64_t address = bank + s.offset;
    if (s.kind == nv::Symbol::Kind::address_in_bank) address = memory.get<std::uint64_t>(bank4, 1)[0];
    placements.push_back({s.name, address});
  }
  CHECK(placements.size() == 3);
  const auto p = params(12, std::pair{0u, out}, std::pair{8u, 50u});
  rig::ptx::Launch launch;
  launch.grid = {2, 1, 1};
  launch.block = {32, 1, 1};
  launch.params = p;
  const auto r = code.run(**scale, launch, memory, placements);
  REQUIRE_MESSAGE(r, (r ? std::string() : r.error()));
  const auto got = memory.get<std::int32_t>(out, 64);
  for (int i = 0; i < 50; ++i) REQUIRE(got[i] == (i % 4 + 1) * i + 100);
  CHECK(got[50] == -1);
  CHECK(memory.get<std::uint32_t>(global, 1)[0] == 50);
}

TEST_CASE("run refuses a placement of a variable the module does not have, and a kernel of another Code") {
  nv::Code code, other;
  REQUIRE(code.add_fatbin(read_bytes("saxpy.sm_90.fatbin"), 90, "saxpy"));
  REQUIRE(other.add_fatbin(read_bytes("saxpy.sm_90.fatbin"), 90, "saxpy"));
  const auto c = cb::read_cubin(read_bytes("saxpy.sm_90.cubin"));
  REQUIRE(c);
  Memory memory;
  memory.put_bytes(0x10000, kernel(*c, "saxpy").text);
  const auto k = code.find(0x10000, memory);
  REQUIRE(k);
  const std::vector<std::byte> p(28);
  rig::ptx::Launch launch;
  launch.params = p;
  const nv::Placement nowhere[] = {{"nowhere", 0x1000}};
  auto r = code.run(**k, launch, memory, nowhere);
  REQUIRE_FALSE(r);
  CHECK(r.error() == "kernel saxpy (saxpy): no module variable nowhere to place at 0x1000");
  r = other.run(**k, launch, memory, {});
  REQUIRE_FALSE(r);
  CHECK(r.error() == "kernel saxpy is not one of this GPU's registered kernels");
}
