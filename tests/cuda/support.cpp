// The CUDA tests' shared helpers (support.hpp).
#include "support.hpp"

#include <dlfcn.h>
#include <stdexcept>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

extern const unsigned char rig_cuda_host_kernels[];
extern const std::size_t rig_cuda_host_kernels_size;

namespace rig::cuda::test {

namespace {

// A broken premise of a test: an exception, which the test reports with its message.
void must(bool ok, const std::string& why) {
  if (!ok) throw std::runtime_error(why);
}

std::vector<std::byte> bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::vector<std::byte> read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  must(bool(in), std::string("cannot read ") + what + "=" + path);
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(data.size());
  std::memcpy(out.data(), data.data(), data.size());
  return out;
}

}  // namespace

Fake fake(const std::string& path) {
  std::string which = path;
  if (which.empty()) {
    const char* env = std::getenv("RIG_LIBCUDA");
    if (!env) return {};
    which = env;
  }
  void* handle = dlopen(which.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return {};
  Fake f;
  f.fail = reinterpret_cast<decltype(f.fail)>(dlsym(handle, "fakecuda_fail"));
  f.fault = reinterpret_cast<decltype(f.fault)>(dlsym(handle, "fakecuda_fault"));
  f.set = reinterpret_cast<decltype(f.set)>(dlsym(handle, "fakecuda_set"));
  f.count = reinterpret_cast<decltype(f.count)>(dlsym(handle, "fakecuda_count"));
  return f;
}

std::vector<std::byte> kernels_image() {
  if (const char* cubin = std::getenv("RIG_CUDA_TEST_CUBIN")) return read_file(cubin, "RIG_CUDA_TEST_CUBIN");
  return committed("kernels.sm_90.fatbin");
}

std::vector<std::byte> committed(std::string_view file) {
  return read_file(std::string(RIG_CUDA_KERNELS) + "/" + std::string(file), "a committed kernel file");
}

std::vector<std::byte> bad_ptx() {
  return bytes(".version 7.0\n.target sm_50\n.address_size 64\n\n.visible .entry broken()\n{\n  garbage;\n}\n");
}

std::span<const std::byte> host_kernels() {
  return {reinterpret_cast<const std::byte*>(rig_cuda_host_kernels), rig_cuda_host_kernels_size};
}

Device open_gpu(int ordinal) {
  auto d = rig::open(opener(ordinal));
  must(d.has_value(), d ? std::string() : d.error());
  return *d;
}

int gpus() {
  auto n = device_count();
  return n ? *n : 0;
}

Function kernel(const Device& d, std::string_view name) {
  auto image = Image::load(d, kernels_image());
  must(image.has_value(), image ? std::string() : image.error());
  auto f = image->resolve(name);
  must(f.has_value(), std::string("the tests' image has no kernel ") + std::string(name));
  return *f;
}

namespace {
void copy_between(const Buffer& from, const Buffer& to) {
  Submission::Part part{"", {}, Submission::Copy{{from, 0}, {to, 0}, {Box::row(from.length())}, {}}};
  auto s = Submission::make(to.device(), std::span(&part, 1), 0, 0, std::vector{std::pair{from, Access::Read},
                                                                                 std::pair{to, Access::ReadWrite}});
  Run run;
  submit(s, run, {}, {}).wait();
}
}  // namespace

void upload(const Buffer& to, std::span<const std::uint32_t> from) {
  Buffer staging = Buffer::create(to.device(), from.size_bytes(), Memory::Pinned);
  staging.write<std::uint32_t>([&](std::span<std::uint32_t> xs) { std::copy(from.begin(), from.end(), xs.begin()); });
  copy_between(staging, to);
}

std::vector<std::uint32_t> download(const Buffer& from) {
  Buffer staging = Buffer::create(from.device(), from.length(), Memory::Pinned);
  copy_between(from, staging);
  return staging.read<std::uint32_t>(
      [](std::span<const std::uint32_t> xs) { return std::vector<std::uint32_t>(xs.begin(), xs.end()); });
}

Submission one_launch(const Device& d, const Function& f, std::uint32_t params, int reads, int writes) {
  Submission::Launch launch{f, params, {}};
  for (int i = 0; i < reads + writes; ++i)
    launch.refs.push_back({std::uint32_t(8 * i), Submission::Ref::What::Buffer, std::uint32_t(i), {}});
  Submission::Part part{"", {}, launch};
  return Submission::make(d, std::span(&part, 1), reads, writes);
}

void elements(Run& run, const Submission::Block& b, std::uint64_t n) {
  run.threads(b, 256);
  run.groups(b, std::uint32_t((n + 255) / 256));
}

const cuda_abi::Record& record(const Device& d) {
  const auto* r = d.capability(cuda_abi::key);
  must(r != nullptr, std::string(d.name()) + " declares no Rig_cuda_abi record");
  return *r;
}

Env::Env(const char* name, const std::string& value) : name_(name) {
  if (const char* old = std::getenv(name)) old_ = old;
  setenv(name, value.c_str(), 1);
}
Env::~Env() {
  if (old_) setenv(name_.c_str(), old_->c_str(), 1);
  else unsetenv(name_.c_str());
}

}  // namespace rig::cuda::test
