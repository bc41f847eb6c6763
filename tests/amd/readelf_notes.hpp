// readelf_notes.hpp — reads what `llvm-readelf-19 --notes` prints of AMDGPU metadata (its
// YAML rendering of the NT_AMDGPU_METADATA note) into the fields the code-object tests
// compare: each kernel's name, symbol, sizes, wavefront size and arguments. A second,
// independent reading of the same note: llvm-readelf decodes the MessagePack itself.
#pragma once

#include <charconv>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace rig::test::amd {

struct NotedArgument {
  std::uint64_t offset = 0, size = 0;
  std::string value_kind;
};

struct NotedKernel {
  std::map<std::string, std::string> fields;  // ".name" -> "vector_add", ...
  std::vector<NotedArgument> args;
  std::uint64_t number(const std::string& key) const {
    auto it = fields.find(key);
    if (it == fields.end()) return ~0ull;
    std::uint64_t v = 0;
    std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
    return v;
  }
};

// One file's metadata, as llvm-readelf printed it (files in order when it was given many).
struct NotedFile {
  std::string target;
  std::vector<NotedKernel> kernels;
};

inline std::vector<NotedFile> parse_readelf_notes(std::string_view text) {
  std::vector<NotedFile> files;
  std::istringstream in{std::string(text)};
  std::string line;
  bool in_kernels = false, in_args = false;
  auto indent = [](const std::string& l) { return l.find_first_not_of(' '); };
  auto split = [](std::string_view s, std::string& key, std::string& value) {
    auto colon = s.find(':');
    key = std::string(s.substr(0, colon));
    value.clear();
    if (colon == std::string_view::npos) return;
    auto rest = s.substr(colon + 1);
    auto first = rest.find_first_not_of(' ');
    if (first != std::string_view::npos) value = std::string(rest.substr(first));
    if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'') value = value.substr(1, value.size() - 2);
  };
  while (std::getline(in, line)) {
    if (line.starts_with("amdhsa.kernels:")) {
      files.emplace_back();
      in_kernels = true, in_args = false;
      continue;
    }
    if (line.starts_with("amdhsa.target:")) {
      std::string k, v;
      split(line, k, v);
      if (!files.empty()) files.back().target = v;
      in_kernels = false;
      continue;
    }
    if (!in_kernels || line.empty()) continue;
    auto at = indent(line);
    if (at == std::string::npos) continue;
    if (at == 0) {  // another top-level key
      in_kernels = false;
      continue;
    }
    std::string key, value;
    if (at == 2 && line.compare(2, 2, "- ") == 0) {  // a new kernel; its first key follows
      files.back().kernels.emplace_back();
      in_args = false;
      split(std::string_view(line).substr(4), key, value);
    } else if (at == 4) {
      split(std::string_view(line).substr(4), key, value);
    } else if (at == 6 && in_args && line.compare(6, 2, "- ") == 0) {  // a new argument
      files.back().kernels.back().args.emplace_back();
      split(std::string_view(line).substr(8), key, value);
      goto argument;
    } else if (at == 8 && in_args) {
      split(std::string_view(line).substr(8), key, value);
      goto argument;
    } else {
      continue;
    }
    if (files.back().kernels.empty()) continue;
    in_args = key == ".args";
    if (!in_args) files.back().kernels.back().fields[key] = value;
    continue;
  argument: {
    auto& a = files.back().kernels.back().args.back();
    if (key == ".offset") a.offset = std::stoull(value);
    if (key == ".size") a.size = std::stoull(value);
    if (key == ".value_kind") a.value_kind = value;
  }
  }
  return files;
}

}  // namespace rig::test::amd
