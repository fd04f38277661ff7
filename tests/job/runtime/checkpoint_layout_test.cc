// Which checkpoint directories a job of N ranks may restore, checked before it starts.
#include "gandiva/contract/checkpoint_layout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gandiva::checkpoint {
namespace {

namespace fs = std::filesystem;

class CheckpointLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gandiva-layout-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Touch(const fs::path& file) {
    fs::create_directories(file.parent_path());
    std::ofstream(file) << "x";
  }
  void MakeGang(int ranks) {
    for (int k = 0; k < ranks; ++k) Touch(dir_ / ("rank-" + std::to_string(k)) / "state.gdck");
    Touch(dir_ / "gang");
  }
  fs::path dir_;
};

TEST_F(CheckpointLayoutTest, OneProcessNeedsItsStateFile) {
  EXPECT_EQ(CheckRestoreDir(dir_.string(), 1).code(), StatusCode::kNotFound);
  Touch(dir_ / "state.gdck");
  EXPECT_TRUE(CheckRestoreDir(dir_.string(), 1).ok());
  EXPECT_EQ(CheckRestoreDir((dir_ / "missing").string(), 1).code(), StatusCode::kNotFound);
}

TEST_F(CheckpointLayoutTest, AGangRestoresOnlyIntoAsManyRanks) {
  MakeGang(2);
  EXPECT_TRUE(CheckRestoreDir(dir_.string(), 2).ok());
  const Status three = CheckRestoreDir(dir_.string(), 3);
  EXPECT_EQ(three.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(three.message().find("checkpoint of 2 rank(s)"), std::string::npos) << three.message();
  EXPECT_EQ(CheckRestoreDir(dir_.string(), 1).code(), StatusCode::kInvalidArgument);
}

TEST_F(CheckpointLayoutTest, RankPartsWithoutTheManifestAreNotAGangCheckpoint) {
  MakeGang(2);
  fs::remove(dir_ / "gang");
  EXPECT_EQ(CheckRestoreDir(dir_.string(), 2).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gandiva::checkpoint
