// forwarding_driver.hpp — a driver that forwards every call to another: the base of the
// test drivers that change or count one thing about a driver and leave the rest as it is.
#pragma once

#include <rig/edge.hpp>

#include <memory>
#include <utility>

namespace rig::test {

class Forwarding : public edge::Driver {
 public:
  explicit Forwarding(std::unique_ptr<edge::Driver> inner) : inner_(std::move(inner)) {}

  edge::Facts facts() override { return inner_->facts(); }
  std::optional<edge::Region> alloc(Memory memory, std::size_t bytes) override { return inner_->alloc(memory, bytes); }
  void free(edge::Region r) override { inner_->free(r); }
  edge::Location locate(edge::Region r) override { return inner_->locate(r); }
  edge::Mapping map_host(std::uintptr_t host, std::size_t bytes) override { return inner_->map_host(host, bytes); }
  edge::Mapping map_peer(const edge::Location& peer, std::size_t bytes) override {
    return inner_->map_peer(peer, bytes);
  }
  Result<edge::Code> image(std::span<const std::byte> binary) override { return inner_->image(binary); }
  edge::EntryAnswer entry(edge::ImageId image, std::string_view name) override { return inner_->entry(image, name); }
  void unload(edge::ImageId image) override { inner_->unload(image); }
  edge::GrowAnswer grow() override { return inner_->grow(); }
  std::uint64_t signaled() override { return inner_->signaled(); }
  void sleep(std::uint64_t v, std::chrono::nanoseconds most) override { inner_->sleep(v, most); }
  void stop(std::string_view why) override { inner_->stop(why); }
  Result<edge::Dma> dma(edge::Region region, std::string_view pci_function) override {
    return inner_->dma(region, pci_function);
  }

 private:
  std::unique_ptr<edge::Driver> inner_;
};

}  // namespace rig::test
