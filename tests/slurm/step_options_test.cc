// The Slurm plugin's rules: its plugstack.conf arguments, --gandiva's weight,
// --gandiva-checkpoint's directory, and what a (re)started step restores.
#include "step_options.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gandiva/contract/environment.h"

namespace gandiva::slurm {
namespace {

namespace fs = std::filesystem;

TEST(PluginArgsTest, DefaultsAndEveryArgument) {
  auto none = ParsePluginArgs({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->endpoint, "ipc:///run/gandiva/gandivad.sock");
  auto all = ParsePluginArgs(
      {"endpoint=ipc:///tmp/x/%n/gd.sock", "shim=/opt/g/lib/s.so", "timeout_ms=500"});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->endpoint, "ipc:///tmp/x/%n/gd.sock");
  EXPECT_EQ(all->shim, "/opt/g/lib/s.so");
  EXPECT_EQ(all->timeout_ms, 500);
}

TEST(PluginArgsTest, AWrongArgumentIsNamed) {
  auto unknown = ParsePluginArgs({"endpont=ipc:///x"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("endpont"), std::string::npos);
  EXPECT_FALSE(ParsePluginArgs({"endpoint=/run/gd.sock"}).ok()) << "not a URL";
  EXPECT_FALSE(ParsePluginArgs({"timeout_ms=0"}).ok());
  EXPECT_FALSE(ParsePluginArgs({"timeout_ms=5s"}).ok());
}

TEST(WeightTest, AbsentMeansNotGivenAndOnlyZeroToSixteenIsAccepted) {
  EXPECT_FALSE(ParseWeight(nullptr)->has_value());
  EXPECT_FALSE(ParseWeight("")->has_value());
  EXPECT_FALSE(ParseWeight("(null)")->has_value())
      << "sbatch --gandiva, seen by an srun in the job";
  EXPECT_DOUBLE_EQ(**ParseWeight("2.5"), 2.5);
  EXPECT_DOUBLE_EQ(**ParseWeight("16"), 16);
  for (const char* bad : {"0", "-1", "17", "two", "2x", "nan", "inf"}) {
    auto w = ParseWeight(bad);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_NE(w.status().message().find(bad), std::string::npos);
  }
}

TEST(WeightTest, AGivenWeightWinsElseShardsElseOne) {
  EXPECT_DOUBLE_EQ(StepWeight(3.0, "2"), 3.0);
  EXPECT_DOUBLE_EQ(StepWeight(std::nullopt, "2"), 2.0);
  EXPECT_DOUBLE_EQ(StepWeight(std::nullopt, "40"), 16.0) << "gandivad's limit";
  EXPECT_DOUBLE_EQ(StepWeight(std::nullopt, nullptr), 1.0);
  EXPECT_DOUBLE_EQ(StepWeight(std::nullopt, "x"), 1.0);
}

TEST(NodeNameTest, PercentNIsTheNodeName) {
  EXPECT_EQ(ExpandNodeName("ipc:///tmp/c/%n/gd.sock", "n2"), "ipc:///tmp/c/n2/gd.sock");
  EXPECT_EQ(ExpandNodeName("ipc:///run/gandiva/gandivad.sock", "n2"),
            "ipc:///run/gandiva/gandivad.sock");
  EXPECT_EQ(ExpandNodeName("ipc:///x/100%%/%n", "a"), "ipc:///x/100%/a");
}

TEST(DeviceTest, TheFirstOfTheStepsGpus) {
  EXPECT_EQ(DeviceOfSlurmGpus("2"), "gpu2");
  EXPECT_EQ(DeviceOfSlurmGpus("1,3"), "gpu1");
  EXPECT_FALSE(DeviceOfSlurmGpus(nullptr).has_value());
  EXPECT_FALSE(DeviceOfSlurmGpus("").has_value());
  EXPECT_FALSE(DeviceOfSlurmGpus("gpu:1").has_value());
}

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("slurm_spank_test." + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override {
    fs::permissions(root_, fs::perms::owner_all);
    fs::remove_all(root_);
  }
  void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  fs::path root_;
};

TEST_F(CheckpointDirTest, AbsoluteAndWritableOrCreatable) {
  EXPECT_TRUE(CheckCheckpointDir(root_.string()).ok());
  EXPECT_TRUE(CheckCheckpointDir((root_ / "a" / "b").string()).ok()) << "created on demand";
  EXPECT_FALSE(CheckCheckpointDir("ckpt/run1").ok()) << "relative";
  EXPECT_FALSE(CheckCheckpointDir("").ok());
  Write(root_ / "file", "x");
  EXPECT_FALSE(CheckCheckpointDir((root_ / "file").string()).ok());
  EXPECT_FALSE(CheckCheckpointDir((root_ / "file" / "sub").string()).ok());
}

TEST_F(CheckpointDirTest, ANonWritableDirectoryIsRefusedForAnOrdinaryUser) {
  if (geteuid() == 0) GTEST_SKIP() << "root may write anywhere (the Slurm test covers a user)";
  fs::create_directories(root_ / "ro");
  fs::permissions(root_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  auto s = CheckCheckpointDir((root_ / "ro").string());
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  EXPECT_FALSE(CheckCheckpointDir((root_ / "ro" / "new").string()).ok());
  fs::permissions(root_ / "ro", fs::perms::owner_all);
}

TEST_F(CheckpointDirTest, AFirstStartWithNothingSaysNothing) {
  const RestorePlan plan = PlanRestore((root_ / "none").string(), 0);
  EXPECT_FALSE(plan.restore);
  EXPECT_EQ(plan.message, "");
}

TEST_F(CheckpointDirTest, ARestartWithoutACheckpointSaysItStartsOver) {
  const RestorePlan plan = PlanRestore(root_.string(), 1);
  EXPECT_FALSE(plan.restore);
  EXPECT_NE(plan.message.find("starting from the beginning"), std::string::npos) << plan.message;
}

TEST_F(CheckpointDirTest, ACheckpointIsRestoredAndAnIncompleteSaveIsNamedAndRemoved) {
  Write(root_ / checkpoint::kCheckpointFileName, "saved");
  RestorePlan plan = PlanRestore(root_.string(), 1);
  EXPECT_TRUE(plan.restore);
  EXPECT_NE(plan.message.find("restoring from"), std::string::npos) << plan.message;
  EXPECT_EQ(plan.message.find("killed"), std::string::npos) << plan.message;

  const fs::path left = root_ / (std::string(".") + checkpoint::kCheckpointFileName + ".tmp.42");
  Write(left, "half");
  plan = PlanRestore(root_.string(), 2);
  EXPECT_TRUE(plan.restore);
  EXPECT_NE(plan.message.find("killed before its save"), std::string::npos) << plan.message;
  EXPECT_NE(plan.message.find("the checkpoint before it"), std::string::npos) << plan.message;
  EXPECT_FALSE(fs::exists(left));
}

}  // namespace
}  // namespace gandiva::slurm
