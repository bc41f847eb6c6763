// A registry of kernels that holds none, for the engine's tests until the kernels registry
// (code.cpp) is built: every registration and every lookup is refused, naming the reason.
#include <fmt/format.h>

#include "code.hpp"

namespace rig::sim::nv {

struct Code::Impl {};

Code::Code() : impl_(std::make_unique<Impl>()) {}
Code::~Code() = default;
Code::Code(Code&&) noexcept = default;
Code& Code::operator=(Code&&) noexcept = default;

std::expected<std::size_t, std::string> Code::add_fatbin(std::span<const std::byte>, unsigned, std::string_view name) {
  return std::unexpected(fmt::format("{}: this build's registry of kernels takes none", name));
}

std::expected<std::size_t, std::string> Code::add(std::span<const std::byte>, std::string_view, std::string_view name) {
  return std::unexpected(fmt::format("{}: this build's registry of kernels takes none", name));
}

std::expected<const Kernel*, std::string> Code::find(std::uint64_t address, ptx::Memory&) const {
  return std::unexpected(fmt::format("no registered kernel's code is at {:#x}: none are registered", address));
}

std::expected<ptx::Stats, std::string> Code::run(const Kernel& kernel, const ptx::Launch&, ptx::Memory&,
                                                 std::span<const Placement>) const {
  return std::unexpected(fmt::format("kernel {}: none are registered", kernel.name));
}

}  // namespace rig::sim::nv
