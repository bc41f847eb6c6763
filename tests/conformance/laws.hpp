// laws.hpp — the laws, one function each (law.hpp has what they share). Internal.
#pragma once

#include "law.hpp"

namespace rig::conformance::detail {

// laws_memory.cpp
void facts_are_well_formed(Context&);
void refusals_leave_the_device_usable(Context&);
void copies_are_the_identity(Context&);
void a_reader_sees_the_last_writer(Context&);
void memory_returns_once_its_stamps_allow(Context&);
void no_room_is_not_a_fault(Context&);

// laws_order.cpp
void device_order(Context&);
void prefix_order(Context&);
void work_completes_with_no_further_call(Context&);
void it_waits_for_other_devices_values(Context&);
void other_devices_wait_for_its_values(Context&);
void the_word_never_moves_backwards(Context&);

// laws_loss.cpp
void a_failed_part_loses_the_device_and_nothing_else(Context&);
void an_injected_fault_loses_the_device_and_nothing_else(Context&);
void a_loss_leaves_other_devices_copies_alone(Context&);
void a_lost_devices_memory_raises_lost(Context&);
void a_lost_devices_memory_returns(Context&);
void a_wait_on_a_lost_producer_loses_the_waiting_device(Context&);
void a_wait_interrupted_by_a_loss_raises_lost(Context&);
void close_of_an_idle_device(Context&);
void close_of_a_busy_device_waits_for_its_work(Context&);
void long_work_is_not_a_hang(Context&);
void a_stall_past_hang_ms_is_a_hang(Context&);

// laws_io.cpp: the laws of io devices
void io_facts_are_well_formed(Context&);
void io_copies_are_the_identity(Context&);
void io_fills_and_blits_write_exactly_their_bytes(Context&);
void io_read_only_memory_refuses_writes(Context&);
void io_a_reader_sees_the_last_writer(Context&);
void io_concurrent_copies_keep_every_byte(Context&);
void io_a_borrow_is_its_pages(Context&);
void io_close_loses_it_and_returns_its_memory(Context&);
void io_memory_returns_once_its_buffers_go(Context&);

}  // namespace rig::conformance::detail
