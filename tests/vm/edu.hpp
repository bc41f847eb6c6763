// edu.hpp — QEMU's educational PCI device ("-device edu"): its IDs and BAR0 registers.
//
// Every fact here is from QEMU's docs/specs/edu.rst. Pure constants: the VM tests of vfio/
// and the edu rig driver (tests/vm/edu_driver.*) program the device with them.
#pragma once

#include <cstdint>

namespace rig::edu {

constexpr std::uint16_t vendor_id = 0x1234;
constexpr std::uint16_t device_id = 0x11e8;

// The device drives 28-bit DMA addresses unless QEMU is told otherwise (dma_mask=).
constexpr unsigned dma_bits = 28;

// BAR0 (1 MiB of MMIO). Below 0x80 only 4-byte accesses; 4 or 8 bytes above.
constexpr unsigned bar = 0;
constexpr std::uint32_t identification = 0x00;  // RO: 0xRRrr00ed, RR major and rr minor version
constexpr std::uint32_t identification_mask = 0xff;
constexpr std::uint32_t identification_low = 0xed;
constexpr std::uint32_t liveness = 0x04;        // RW: reads back the bitwise inverse of what was written
constexpr std::uint32_t factorial = 0x08;       // RW
constexpr std::uint32_t status = 0x20;          // RW: bit 0x01 computing, 0x80 interrupt after a factorial
constexpr std::uint32_t interrupt_status = 0x24;  // RO: the values that raised the interrupt, ORed
constexpr std::uint32_t interrupt_raise = 0x60;   // WO: ORs the value into the status and raises
constexpr std::uint32_t interrupt_acknowledge = 0x64;  // WO: clears the value's bits; lowers at 0
constexpr std::uint32_t dma_source = 0x80;      // RW, 8 bytes
constexpr std::uint32_t dma_destination = 0x88; // RW, 8 bytes
constexpr std::uint32_t dma_count = 0x90;       // RW, 8 bytes
constexpr std::uint32_t dma_command = 0x98;     // RW, 8 bytes: the bits below

constexpr std::uint64_t dma_start = 0x01;          // start the transfer; clears when it is done
constexpr std::uint64_t dma_to_ram = 0x02;         // direction: 0 RAM to edu, 1 edu to RAM
constexpr std::uint64_t dma_interrupt = 0x04;      // raise interrupt dma_done_value when done
constexpr std::uint32_t dma_done_value = 0x100;    // the interrupt status value of a finished DMA

// The device's DMA buffer: 4 KiB at this address of the device's own DMA space.
constexpr std::uint64_t buffer_address = 0x40000;
constexpr std::uint64_t buffer_bytes = 4096;
// Debian 12's QEMU (7.2) stops the whole VM ("hardware error: EDU: DMA range
// 0x40000-0x40fff out of bounds") for a transfer that reaches the buffer's last byte, as seen
// in the VM tests: transfers here end 64 bytes short of it, where the edu driver keeps the
// value it stores into the timeline word.
constexpr std::uint64_t largest_transfer = buffer_bytes - 64;
// A transfer runs about 100 ms of the VM's clock after it is started (edu.c's DMA timer, as
// the VM tests measure it).
constexpr double transfer_seconds = 0.1;

}  // namespace rig::edu
