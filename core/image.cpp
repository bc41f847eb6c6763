// Images and their functions.
#include <fmt/format.h>

#include <cstring>

#include "profile_hooks.hpp"
#include "state.hpp"

namespace rig {
namespace detail {

ImageState::~ImageState() {
  auto d = device;
  auto id = this->id;
  auto memory = std::move(code);
  // Unload once the work submitted before the last handle went is done.
  d->defer({pack(d->index, d->submitted.load())}, [d, id, memory] {
    std::lock_guard g(d->calls);
    {
      std::lock_guard l(d->loss_mutex);
      if (!d->may_free()) return;
    }
    d->driver->unload(id);
  });
}

}  // namespace detail

namespace {
Result<Image> load_image(const Device& device, std::span<const std::byte> binary);
}

Result<Image> Image::load(const Device& device, std::span<const std::byte> binary) {
  if (!profile::hooks::taking()) return load_image(device, binary);
  std::uint64_t start = rig_now_ns();
  auto image = load_image(device, binary);
  if (image) profile::hooks::event(profile::Record::What::Load, device.state(), binary.size(), start, "image");
  return image;
}

namespace {
Result<Image> load_image(const Device& device, std::span<const std::byte> binary) {
  auto d = detail::shared_device_at(device.state().index);
  d->check_live();
  if (!d->computes) d->refuse("an io device loads no code");
  Result<edge::Code> code;
  std::string fault;
  {
    std::lock_guard g(d->calls);
    d->check_live();
    try {
      code = d->driver->image(binary);
    } catch (const edge::Fault& e) {
      fault = e.what();
    }
  }
  if (!fault.empty()) {
    d->lose(fmt::format("fault while loading an image: {}", fault));
    d->throw_lost();
  }
  if (!code) return std::unexpected(fmt::format("{}: {}", d->name, code.error()));
  auto image = std::make_shared<detail::ImageState>();
  image->device = d;
  if (auto* loaded = std::get_if<edge::Loaded>(&*code)) {
    image->id = loaded->image;
    return Image(std::move(image));
  }
  auto& place = std::get<edge::Place>(*code);
  if (!d->facts.host_addresses)
    d->refuse("its driver places code in memory the host does not address; placing it through "
              "the copy engine is not built yet");
  Buffer memory = Buffer::create(device, place.bytes, Memory::Device);
  std::pair<edge::ImageId, std::string> placed;
  {
    std::lock_guard g(d->calls);
    placed = place.place(*memory.allocation()->region);
  }
  if (placed.second.size() > place.bytes)
    d->refuse("its driver placed {} bytes of code in {} bytes", placed.second.size(), place.bytes);
  void* at = reinterpret_cast<void*>(*memory.host_address());
  std::memcpy(at, placed.second.data(), placed.second.size());
  rig_code_sync(at, placed.second.size());
  image->id = placed.first;
  image->code = memory.allocation();
  return Image(std::move(image));
}
}  // namespace

Device Image::device() const { return Device(state_->device); }

std::optional<Function> Image::resolve(std::string_view name) const {
  auto& d = *state_->device;
  d.check_live();
  std::lock_guard g(state_->mutex);
  for (auto& w : state_->functions)
    if (auto f = w.lock(); f && f->name == name) return Function(std::move(f));
  for (int round = 0;; ++round) {
    edge::EntryAnswer answer;
    std::string fault;
    {
      std::lock_guard c(d.calls);
      d.check_live();
      try {
        answer = d.driver->entry(state_->id, name);
      } catch (const edge::Fault& e) {
        fault = e.what();
      }
    }
    if (!fault.empty()) {
      d.lose(fmt::format("fault while resolving {}: {}", name, fault));
      d.throw_lost();
    }
    if (std::holds_alternative<edge::Absent>(answer)) return std::nullopt;
    if (auto* short_of = std::get_if<edge::NoMemory>(&answer)) {
      if (round == 0) {
        d.drain();
        continue;
      }
      throw OutOfMemory(d.name, short_of->bytes, fmt::format("for the launches of {}", name));
    }
    auto f = std::make_shared<detail::FunctionState>();
    f->image = state_;
    f->name = std::string(name);
    f->entry = std::get<edge::Entry>(answer);
    std::erase_if(state_->functions, [](auto& w) { return w.expired(); });
    state_->functions.push_back(f);
    return Function(std::move(f));
  }
}

void Image::prepare(std::string_view) const { state_->device->check_live(); }

std::string_view Function::name() const { return state_->name; }
Image Function::image() const { return Image(state_->image); }
std::optional<std::size_t> Function::params() const { return state_->entry.params; }
std::optional<std::size_t> Function::threads() const { return state_->entry.threads; }
std::uintptr_t Function::entry() const { return std::uintptr_t(state_->entry.code); }

}  // namespace rig
