// ParseByteSize: the forms `--gpu-memory` accepts, and what it refuses.
#include "gandiva/common/byte_size.h"

#include <gtest/gtest.h>

namespace gandiva {
namespace {

TEST(ByteSizeTest, ReadsBinaryUnitsAndPlainBytes) {
  EXPECT_EQ(*ParseByteSize("4GiB"), 4ull << 30);
  EXPECT_EQ(*ParseByteSize("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseByteSize("64KiB"), 64ull << 10);
  EXPECT_EQ(*ParseByteSize("1TiB"), 1ull << 40);
  EXPECT_EQ(*ParseByteSize("1048576"), 1ull << 20);
  EXPECT_EQ(*ParseByteSize("1048576B"), 1ull << 20);
}

TEST(ByteSizeTest, RefusesWhatItWouldHaveToGuess) {
  for (const char* text : {"", "0", "0GiB", "GiB", "4GB", "4gib", "4 GiB", "-1", "1.5GiB", "4GiBs",
                           "16777216TiB", "99999999999999999999"}) {
    auto parsed = ParseByteSize(text);
    EXPECT_FALSE(parsed.ok()) << text;
    if (!parsed.ok()) {
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << text;
      EXPECT_NE(parsed.status().message().find("512MiB"), std::string::npos) << text;
    }
  }
}

}  // namespace
}  // namespace gandiva
