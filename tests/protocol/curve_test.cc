// Key files (curve.h): what gandivad reads at start-up must fail with a status,
// never an exception, whatever path it is given.
#include "gandiva/protocol/curve.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace gandiva::protocol {
namespace {

constexpr char kKey[] = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";

std::string TempPath(const char* tag) {
  return ::testing::TempDir() + "/curve_test_" + tag + "_" + std::to_string(getpid());
}

TEST(CurveTest, ReadsAuthorizedKeysSkippingCommentsAndBlankLines) {
  const std::string path = TempPath("keys");
  std::ofstream(path) << "# ops\n\n  " << kKey << "  \n";
  auto keys = ReadAuthorizedKeys(path);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->size(), 1u);
  EXPECT_TRUE(keys->count(kKey));
  EXPECT_EQ(keys->at(kKey), "key rq:rM>}U") << "unnamed: named by its first characters";
  std::remove(path.c_str());
}

TEST(CurveTest, AKeyMayBeNamed) {
  const std::string path = TempPath("named");
  std::ofstream(path) << kKey << "   alice's laptop \n";
  auto keys = ReadAuthorizedKeys(path);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->at(kKey), "alice's laptop");
  std::ofstream(path) << kKey << " " << std::string(65, 'n') << "\n";
  EXPECT_EQ(ReadAuthorizedKeys(path).status().code(), StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

// A directory opens as an ifstream and then throws from the first read
// (found by fuzz/fuzz_key_files); a device would be read forever.
TEST(CurveTest, KeyFilesThatAreNotRegularFilesAreNotFound) {
  for (const char* path : {"/", "/dev/zero"}) {
    EXPECT_EQ(ReadAuthorizedKeys(path).status().code(), StatusCode::kNotFound) << path;
    EXPECT_EQ(ReadCurvePublicKey(path).status().code(), StatusCode::kNotFound) << path;
    EXPECT_EQ(ReadCurveKeyPair(path).status().code(), StatusCode::kNotFound) << path;
  }
}

}  // namespace
}  // namespace gandiva::protocol
