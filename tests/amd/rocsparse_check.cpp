// rocsparse_check — the code-object reader against llvm-readelf on real code objects: those
// inside Debian's librocsparse0 (ROCm 5.3, built by AMD's compiler for gfx803 .. gfx1030).
//
// The library's .hip_fatbin section holds clang offload bundles: "__CLANG_OFFLOAD_BUNDLE__",
// a 64-bit entry count, then per entry its 64-bit offset (from the bundle's start), 64-bit
// size, 64-bit triple length and the triple; the entries of triple hipv4-amdgcn-amd-amdhsa--*
// are code objects. Each one checked is written to a scratch folder, read by
// rig::amd::read_code_object, and read by `llvm-readelf-19 --notes` (many files per call);
// every kernel's name, symbol, kernarg size, group and private segment sizes, wavefront
// size and arguments (offset, size, kind) must agree, and no code object may be refused.
//
// usage: rocsparse_check LIBRARY READELF [--every=N] [--all]
//   --every=N checks every N-th code object (default 10, a fixed sample);
//   --all checks every one (777 code objects in Debian 12's librocsparse0; about 15 s).
#include <fmt/format.h>

#include <llvm/BinaryFormat/ELF.h>
#include <llvm/Object/ELF.h>
#include <llvm/Support/Error.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "code_object.hpp"
#include "readelf_notes.hpp"

namespace {

struct Entry {
  std::string triple;
  std::uint64_t offset, size;  // in the library file
};

std::vector<Entry> bundles(std::string_view lib, std::uint64_t start, std::uint64_t end) {
  static constexpr std::string_view kMagic = "__CLANG_OFFLOAD_BUNDLE__";
  std::vector<Entry> out;
  std::uint64_t at = start;
  auto u64 = [&](std::uint64_t p) {
    std::uint64_t v;
    std::memcpy(&v, lib.data() + p, 8);
    return v;
  };
  while (at + kMagic.size() + 8 <= end) {
    auto found = lib.substr(0, end).find(kMagic, at);
    if (found == std::string_view::npos) break;
    std::uint64_t base = found, p = found + kMagic.size();
    std::uint64_t count = u64(p), bundle_end = p + 8;
    p += 8;
    for (std::uint64_t i = 0; i < count && p + 24 <= end; ++i) {
      std::uint64_t offset = u64(p), size = u64(p + 8), length = u64(p + 16);
      p += 24;
      if (p + length > end) break;
      std::string triple(lib.substr(p, length));
      p += length;
      if (size && triple.find("amdgcn") != std::string::npos && base + offset + size <= end)
        out.push_back({triple, base + offset, size});
      bundle_end = std::max(bundle_end, base + offset + size);
    }
    at = std::max(bundle_end, p);
  }
  return out;
}

// llvm-readelf's output for many files, split per file ("File: PATH" starts each).
std::map<std::string, std::string> readelf(const std::string& tool, const std::vector<std::string>& files) {
  std::string command = tool + " --notes";
  for (auto& f : files) command += " '" + f + "'";
  std::string text;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + tool);
  char buffer[1 << 16];
  for (std::size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  if (pclose(pipe) != 0) throw std::runtime_error(tool + " failed");
  std::map<std::string, std::string> out;
  if (files.size() == 1) return {{files[0], text}};
  std::size_t pos = 0;
  while ((pos = text.find("File: ", pos)) != std::string::npos) {
    auto eol = text.find('\n', pos);
    std::string name = text.substr(pos + 6, eol - pos - 6);
    auto next = text.find("\nFile: ", eol);
    out[name] = text.substr(eol, next == std::string::npos ? std::string::npos : next - eol);
    pos = next == std::string::npos ? text.size() : next + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: {} LIBRARY READELF [--every=N] [--all]\n", argv[0]);
    return 2;
  }
  std::string library = argv[1], tool = argv[2];
  std::uint64_t every = 10;
  for (int i = 3; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--all") every = 1;
    else if (a.starts_with("--every=")) every = std::max<std::uint64_t>(1, std::stoull(std::string(a.substr(8))));
  }
  int fd = ::open(library.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {  // meson counts 77 as a skip
    fmt::print(stderr, "{} is absent: install Debian's librocsparse0 to check the reader on its code objects\n",
               library);
    return 77;
  }
  struct stat st{};
  if (fd < 0 || fstat(fd, &st) != 0) {
    fmt::print(stderr, "cannot open {}\n", library);
    return 1;
  }
  void* map = ::mmap(nullptr, std::size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return fmt::print(stderr, "cannot map {}\n", library), 1;
  std::string_view lib(static_cast<const char*>(map), std::size_t(st.st_size));

  auto elf = llvm::object::ELF64LEFile::create(llvm::StringRef(lib.data(), lib.size()));
  if (!elf) return fmt::print(stderr, "{}: not an ELF64 file\n", library), 1;
  auto sections = elf->sections();
  if (!sections) return fmt::print(stderr, "{}: bad sections\n", library), 1;
  std::uint64_t start = 0, end = 0;
  for (auto& sh : *sections) {
    auto name = elf->getSectionName(sh);
    if (name && *name == ".hip_fatbin") start = sh.sh_offset, end = sh.sh_offset + sh.sh_size;
  }
  if (!end) return fmt::print(stderr, "{}: no .hip_fatbin section\n", library), 1;

  auto entries = bundles(lib, start, end);
  auto scratch = std::filesystem::temp_directory_path() / fmt::format("rig_rocsparse_{}", getpid());
  std::filesystem::create_directories(scratch);
  std::size_t objects = 0, kernels = 0, failures = 0;
  std::set<std::string> archs;
  std::vector<std::pair<std::string, rig::amd::CodeObject>> batch;
  auto fail = [&](std::string what) {
    if (++failures <= 20) fmt::print(stderr, "MISMATCH: {}\n", what);
  };
  auto check_batch = [&] {
    if (batch.empty()) return;
    std::vector<std::string> files;
    for (auto& [f, o] : batch) files.push_back(f);
    auto texts = readelf(tool, files);
    for (auto& [f, object] : batch) {
      auto noted = rig::test::amd::parse_readelf_notes(texts[f]);
      if (noted.size() != 1) {
        fail(fmt::format("{}: llvm-readelf printed {} metadata notes", f, noted.size()));
        continue;
      }
      auto& n = noted[0];
      if (n.kernels.size() != object.kernels.size())
        fail(fmt::format("{}: {} kernels, llvm-readelf {}", f, object.kernels.size(), n.kernels.size()));
      for (std::size_t i = 0; i < std::min(n.kernels.size(), object.kernels.size()); ++i) {
        auto& k = object.kernels[i];
        auto& nk = n.kernels[i];
        auto same = [&](const char* what, std::uint64_t mine, std::uint64_t theirs) {
          if (mine != theirs) fail(fmt::format("{} {}: {} {} vs llvm-readelf {}", f, k.name, what, mine, theirs));
        };
        if (k.name != nk.fields[".name"]) fail(fmt::format("{}: kernel {} vs {}", f, k.name, nk.fields[".name"]));
        if (k.symbol != nk.fields[".symbol"]) fail(fmt::format("{}: symbol {} vs {}", f, k.symbol, nk.fields[".symbol"]));
        same("kernarg size", k.kernarg_segment_size, nk.number(".kernarg_segment_size"));
        same("group segment", k.group_segment_fixed_size, nk.number(".group_segment_fixed_size"));
        same("private segment", k.private_segment_fixed_size, nk.number(".private_segment_fixed_size"));
        same("wavefront size", k.wavefront_size, nk.number(".wavefront_size"));
        same("arguments", k.args.size(), nk.args.size());
        for (std::size_t j = 0; j < std::min(k.args.size(), nk.args.size()); ++j) {
          same("argument offset", k.args[j].offset, nk.args[j].offset);
          same("argument size", k.args[j].size, nk.args[j].size);
          if (k.args[j].value_kind != nk.args[j].value_kind)
            fail(fmt::format("{} {}: argument {} kind {} vs {}", f, k.name, j, k.args[j].value_kind, nk.args[j].value_kind));
        }
        // The descriptor agrees with the metadata it was made with.
        same("descriptor kernarg size", k.descriptor.kernarg_size, k.kernarg_segment_size);
        same("descriptor group segment", k.descriptor.group_segment_fixed_size, k.group_segment_fixed_size);
        same("descriptor wave32", k.descriptor.wave32(), k.wavefront_size == 32);
        ++kernels;
      }
      std::filesystem::remove(f);
    }
    batch.clear();
  };
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i % every != 0 && i + 1 != entries.size()) continue;
    auto& e = entries[i];
    auto bytes = std::as_bytes(std::span(lib.data() + e.offset, e.size));
    auto object = rig::amd::read_code_object(bytes);
    ++objects;
    if (!object) {
      fail(fmt::format("entry {} ({}): refused: {}", i, e.triple, object.error()));
      continue;
    }
    archs.insert(object->arch);
    auto path = (scratch / fmt::format("{}_{}.co", i, object->arch)).string();
    std::ofstream(path, std::ios::binary).write(lib.data() + e.offset, std::streamsize(e.size));
    batch.emplace_back(path, std::move(*object));
    if (batch.size() == 16) check_batch();
  }
  check_batch();
  std::filesystem::remove_all(scratch);
  std::string arch_list;
  for (auto& a : archs) arch_list += (arch_list.empty() ? "" : " ") + a;
  fmt::print("checked {} of {} code objects (every {}), {} kernels, processors {}: {} mismatches\n", objects,
             entries.size(), every, kernels, arch_list, failures);
  return failures || objects == 0 ? 1 : 0;
}
