// IovaSpace's promises (iova.hpp): the IOVAs handed out stay in the usable ranges and below
// the mask, never overlap, never start at 0, and come back when given back.
#include <iova.hpp>

#include <doctest/doctest.h>

#include <stdexcept>

using rig::vfio::IovaSpace;

TEST_CASE("the lowest free IOVA is picked, never page 0") {
  IovaSpace space({}, 28, 4096);
  CHECK(space.pick(4096) == 4096);
  space.take(4096, 8192);
  CHECK(space.pick(4096) == 3 * 4096);
  space.take(5 * 4096, 4096);
  CHECK(space.pick(8192) == 3 * 4096);   // the gap between the two fits it
  CHECK(space.pick(3 * 4096) == 6 * 4096);  // it does not fit three pages
}

TEST_CASE("nothing is picked past the DMA mask") {
  IovaSpace space({}, 16, 4096);  // 64 KiB: pages 1..15
  CHECK(space.pick(15 * 4096) == 4096);
  CHECK_FALSE(space.pick(16 * 4096).has_value());
  space.take(4096, 15 * 4096);
  CHECK_FALSE(space.pick(4096).has_value());
  CHECK(space.refuse(std::uint64_t(1) << 16, 4096)->find("outside the device's 16-bit DMA mask") != std::string::npos);
}

TEST_CASE("only the IOMMU's usable ranges are given out, aligned inward") {
  IovaSpace space({{0x1800, 0x4fff}, {0x10000, 0x1ffff}}, 32, 4096);
  CHECK(space.pick(4096) == 0x2000);    // 0x1800 rounds up to 0x2000
  CHECK(space.pick(0x3000) == 0x2000);   // 0x2000..0x4fff holds three pages
  CHECK(space.pick(0x4000) == 0x10000);  // but not four
  space.take(0x2000, 0x3000);
  CHECK(space.pick(4096) == 0x10000);
  CHECK(space.refuse(0x5000, 4096)->find("not in a range the IOMMU lets") != std::string::npos);
}

TEST_CASE("refusals say why: empty, unaligned, overlapping, wrapping") {
  IovaSpace space({}, 64, 4096);
  CHECK(space.refuse(0x1000, 0) == "an empty range");
  CHECK(space.refuse(0x1800, 4096)->find("not aligned") != std::string::npos);
  space.take(0x10000, 0x2000);
  CHECK(space.refuse(0xf000, 0x2000)->find("overlaps the mapping at 0x10000 + 0x2000") != std::string::npos);
  CHECK_FALSE(space.refuse(0x12000, 0x1000).has_value());
  CHECK(space.refuse(~std::uint64_t(0xfff), 0x2000)->find("wraps around") != std::string::npos);
}

TEST_CASE("a range given back is free again; one not taken changes nothing") {
  IovaSpace space({}, 28, 4096);
  space.take(0x1000, 0x1000);
  CHECK_FALSE(space.give_back(0x2000).has_value());
  CHECK(space.give_back(0x1000) == 0x1000);
  CHECK(space.taken().empty());
  CHECK(space.pick(4096) == 0x1000);
}

TEST_CASE("a mask or page size that cannot be throws") {
  CHECK_THROWS_AS(IovaSpace({}, 11, 4096), std::invalid_argument);
  CHECK_THROWS_AS(IovaSpace({}, 65, 4096), std::invalid_argument);
  CHECK_THROWS_AS(IovaSpace({}, 28, 3000), std::invalid_argument);
}
