// CRC32C: known answers, and the hardware path agrees with the portable one
// on every alignment and on lengths around the interleaving block sizes.
#include "crc32c.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace gandiva::checkpoint {
namespace {

TEST(Crc32cTest, KnownAnswers) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32cPortable("123456789", 9), 0xe3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // Extending in two pieces equals one pass.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xe3069283u);
}

TEST(Crc32cTest, HardwareMatchesPortable) {
  std::mt19937 rng(7);
  std::vector<unsigned char> data(3 * 8192 * 2 + 4096);
  for (auto& c : data) c = static_cast<unsigned char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t n : {0, 1, 7, 8, 255, 767, 768, 769, 24575, 24576, 24577, 40000, 49152}) {
      ASSERT_EQ(Crc32c(data.data() + offset, n, 17), Crc32cPortable(data.data() + offset, n, 17))
          << "offset " << offset << " length " << n;
    }
  }
}

}  // namespace
}  // namespace gandiva::checkpoint
