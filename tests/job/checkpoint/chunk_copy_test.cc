// Chunks copied on two threads (chunk_copy.h): every byte where it belongs,
// nothing written around the copies, and each checksum the chunk's own, at
// sizes and alignments on both sides of the streamed-store path's edges.
#include "chunk_copy.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "crc32c.h"

namespace gandiva::checkpoint {
namespace {

TEST(ChunkCopyTest, EveryChunkLandsWholeWithItsChecksumAndNothingAround) {
  std::mt19937 rng(3);
  const std::vector<size_t> sizes = {
      0, 1, 63, (64u << 10) - 1, 64u << 10, (64u << 10) + 65, (1u << 20) + 37, 4u << 20};
  size_t total = 0;
  for (size_t n : sizes) total += n + 200;
  std::vector<uint8_t> src(total), dst(total);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  for (bool checksum : {false, true}) {
    std::fill(dst.begin(), dst.end(), 0xee);
    std::vector<ChunkCopy> copies;
    size_t at = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      // Source and destination each at their own odd offset, 100 bytes apart.
      copies.push_back({{src.data() + at + k % 7, sizes[k]}, dst.data() + at + 100 + k % 5, 0});
      at += sizes[k] + 200;
    }
    if (checksum) {
      CopyAndChecksum(copies);
    } else {
      CopyInParallel(copies);
    }
    std::vector<bool> written(dst.size(), false);
    for (const ChunkCopy& c : copies) {
      ASSERT_TRUE(std::equal(c.from.begin(), c.from.end(), c.to)) << c.from.size();
      if (checksum) {
        EXPECT_EQ(c.crc, Crc32c(c.from.data(), c.from.size())) << c.from.size();
      }
      for (size_t i = 0; i < c.from.size(); ++i) written[c.to - dst.data() + i] = true;
    }
    for (size_t i = 0; i < dst.size(); ++i) {
      if (!written[i]) {
        ASSERT_EQ(dst[i], 0xee) << "byte " << i << " outside every copy";
      }
    }
  }
}

}  // namespace
}  // namespace gandiva::checkpoint
