// edu_driver.hpp — a rig driver over VFIO for QEMU's edu device: the skeleton of a driverless
// GPU driver, not a product.
//
// Memory: the device's memory is host memory mapped into the IOMMU (vfio::Device::map_dma);
// a region's device address is its IOVA, below edu's 28-bit mask. Its one queue, "COPY:0",
// runs Copy parts (copies and byte fills) through edu's DMA engine: every byte a copy moves
// goes RAM -> edu's buffer -> RAM, at most edu::largest_transfer bytes a transfer. After a
// value's copies the device itself writes the value into the timeline word by DMA (the value
// goes RAM -> edu -> the word's IOVA; the first leg carries seven consecutive values at once,
// so that a run of values costs one transfer each), asking for an interrupt; the interrupt (MSI, through an
// eventfd) wakes the queue's thread, which wakes the threads sleeping in Driver::sleep. edu
// has one DMA engine: the driver's thread programs it transfer by transfer, as a GPU's
// command processor would walk a ring. The queue holds `ring_transfers` transfers; room
// answers RIG_LATER while they are taken and RIG_NEVER for one submission that needs more.
//
// dma: Bus for edu's own PCI address, the region's IOVAs (one page-aligned range, as
// vfio::Device::map_dma placed it); Error naming the function for any other, which is in
// another IOMMU domain.
//
// Facts: no processor (arch ""), Completion::Store, no in-queue waits (rig waits on the host
// for other devices), a word of its own (in IOMMU-mapped memory, read through signaled), the
// function's PCI address as `bus`. A transfer that does not finish in a second, or a copy
// outside the device's memory, loses the device with the reason.
//
// Every device the opener makes shares one vfio::Device (a group opens once per process)
// and its DMA engine, taken one transfer at a time.
#pragma once

#include <rig/edge.hpp>

#include <vfio.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace rig::edu {

struct DriverOptions {
  std::size_t budget = 128 << 20;     // bytes of IOMMU-mapped memory it hands out (rig's staging takes 32 MiB)
  std::uint32_t ring_transfers = 1024;  // transfers its queue holds
};

// An opener of edu devices named `name` on the function at `address` ("0000:01:00.0"),
// which must be bound to vfio-pci. make gives an Error naming the function and the reason
// where vfio::Device::open refuses it.
edge::Opener<> opener(std::string name, std::string address, DriverOptions options = {});

// For a test that programs edu itself: calls `f` with the vfio::Device and BAR0 that the
// devices open on `address` share, holding their DMA engine, so that none of their transfers
// runs meanwhile (f must leave no interrupt pending: transfers without dma_interrupt). Error
// where no device is open on `address`.
Result<void> with_engine(const std::string& address, const std::function<void(vfio::Device&, const vfio::Mmio&)>& f);

}  // namespace rig::edu
