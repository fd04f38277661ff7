// MPS can only run on a GPU node: here, the "why not" paths and the command and
// environment gandivad builds for it (mps_daemon.h).
#include "devices/mps_daemon.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace gandiva::controller {
namespace {

TEST(MpsTest, SaysWhyNotWithoutAGpuOrTheBinary) {
  auto no_gpu = PlanMps(false, "/usr/bin:/bin", "/tmp/x");
  ASSERT_FALSE(no_gpu.ok());
  EXPECT_EQ(no_gpu.status().message(), "no GPU device on this node");
  auto no_binary = PlanMps(true, "/nonexistent:/also/not", "/tmp/x");
  ASSERT_FALSE(no_binary.ok());
  EXPECT_EQ(no_binary.status().message(), "no nvidia-cuda-mps-control on PATH");
  MpsDaemon d;
  d.Start(no_binary);
  EXPECT_EQ(d.Status(), "off: no nvidia-cuda-mps-control on PATH");
  EXPECT_TRUE(d.JobEnvironment().empty());
}

TEST(MpsTest, BuildsTheCommandAndTheJobsEnvironment) {
  // A stand-in executable named like the real binary, found on PATH.
  const auto dir = std::filesystem::temp_directory_path() / ("mps_test." + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto bin = dir / kMpsControlBinary;
  std::ofstream(bin) << "#!/bin/sh\nexit 0\n";
  chmod(bin.c_str(), 0755);
  auto plan = PlanMps(true, "/nonexistent:" + dir.string(), "/state");
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->binary, bin.string());
  EXPECT_EQ(MpsStartCommand(*plan), (std::vector<std::string>{bin.string(), "-f"}));
  const auto env = MpsEnvironment(*plan);
  EXPECT_EQ(env.at("CUDA_MPS_PIPE_DIRECTORY"), "/state/mps/pipe");
  EXPECT_EQ(env.at("CUDA_MPS_LOG_DIRECTORY"), "/state/mps/log");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gandiva::controller
