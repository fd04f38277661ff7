// CRC32C: known answers, and the hardware paths agree with the portable one
// on every alignment and on lengths around their block sizes.
#include "crc32c.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "crc32c_fold.h"

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
      const uint32_t portable = Crc32cPortable(data.data() + offset, n, 17);
      ASSERT_EQ(Crc32c(data.data() + offset, n, 17), portable)
          << "offset " << offset << " length " << n;
      if (Crc32cIsHardware()) {  // the interleaved crc32 streams, which Crc32c() may bypass
        ASSERT_EQ(Crc32cSse42(data.data() + offset, n, 17), portable)
            << "offset " << offset << " length " << n;
      }
    }
  }
}

// Every fold (256, 192, 128, 64, 48, 32 and 16 bytes on) and the tail after
// it: lengths 0..1100 cover each loop's entry and exit, at every alignment
// of a 64-byte line, with a prior CRC that must enter as the first bytes.
// Copying and checksumming in one pass gives the bytes and the checksum of a
// memcpy and a Crc32c, at every alignment of either side and at the lengths
// around its block sizes, without touching a byte past the end.
TEST(Crc32cTest, CopyingMatchesMemcpyThenCrc) {
  std::mt19937 rng(11);
  std::vector<unsigned char> src((1u << 20) + 512);
  for (auto& c : src) c = static_cast<unsigned char>(rng());
  std::vector<unsigned char> dst(src.size() + 128);
  for (size_t n :
       {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{300}, size_t{1100}, size_t{65535},
        size_t{65536}, size_t{65536 + 255}, size_t{65536 + 256 + 64 + 7}, size_t{1} << 20}) {
    for (size_t from : {0, 1, 8, 63}) {
      for (size_t to : {0, 5, 16, 64 - 1}) {
        std::fill(dst.begin(), dst.end(), 0xee);
        const uint32_t crc = Crc32cCopy(dst.data() + to, src.data() + from, n, 23);
        ASSERT_EQ(crc, Crc32c(src.data() + from, n, 23)) << n << " " << from << " " << to;
        ASSERT_TRUE(std::equal(src.begin() + from, src.begin() + from + n, dst.begin() + to))
            << n << " " << from << " " << to;
        for (size_t i = 0; i < to; ++i) ASSERT_EQ(dst[i], 0xee);
        for (size_t i = to + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xee) << i;
      }
    }
  }
}

TEST(Crc32cTest, FoldingMatchesPortable) {
  if (!Crc32cCanFold()) GTEST_SKIP() << "this CPU has no AVX-512 VPCLMULQDQ";
  std::mt19937 rng(11);
  std::vector<unsigned char> data(5u << 20);
  for (auto& c : data) c = static_cast<unsigned char>(rng());
  for (size_t offset = 0; offset < 64; offset += 7) {
    for (size_t n = 0; n <= 1100; ++n) {
      const uint32_t prior = static_cast<uint32_t>(rng());
      ASSERT_EQ(Crc32cFold(data.data() + offset, n, prior),
                Crc32cPortable(data.data() + offset, n, prior))
          << "offset " << offset << " length " << n;
    }
  }
  // A whole chunk, and one that ends mid-line.
  for (size_t n : {size_t{4} << 20, (size_t{4} << 20) + 37})
    ASSERT_EQ(Crc32cFold(data.data() + 3, n, 0), Crc32cPortable(data.data() + 3, n, 0));
  // Extending in pieces equals one pass.
  const uint32_t whole = Crc32cFold(data.data(), 100000, 0);
  EXPECT_EQ(Crc32cFold(data.data() + 777, 100000 - 777, Crc32cFold(data.data(), 777, 0)), whole);
}

}  // namespace
}  // namespace gandiva::checkpoint
