// MPS can only run on a GPU node: here, the "why not" paths and the command and
// environment gandivad builds for it (mps_daemon.h).
#include "devices/mps_daemon.h"

#include <gtest/gtest.h>
#include <signal.h>
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
  const auto dir =
      std::filesystem::temp_directory_path() / ("mps_test." + std::to_string(getpid()));
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

// A stand-in for the real binary (a test double: the real one needs a GPU). With
// -f it records its pid in the pipe directory it was given and sleeps; without,
// it reads a command from stdin and, on "quit", ends the recorded process.
TEST(MpsTest, StartsSupervisesAndStopsTheControlDaemon) {
  const auto dir = std::filesystem::temp_directory_path() / ("mps_run." + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "bin");
  const auto bin = dir / "bin" / kMpsControlBinary;
  std::ofstream(bin)
      << "#!/bin/sh\n"
         "if [ \"$1\" = -f ]; then echo $$ > \"$CUDA_MPS_PIPE_DIRECTORY/pid\"; "
         "exec sleep 30; fi\n"
         "read cmd; [ \"$cmd\" = quit ] && kill $(cat \"$CUDA_MPS_PIPE_DIRECTORY/pid\")\n";
  chmod(bin.c_str(), 0755);
  auto plan = PlanMps(true, (dir / "bin").string(), (dir / "state").string());
  ASSERT_TRUE(plan.ok());
  const auto pid_file = dir / "state" / "mps" / "pipe" / "pid";
  auto read_pid = [&] {
    for (int i = 0; i < 200; ++i) {
      int pid = 0;
      std::ifstream(pid_file) >> pid;
      if (pid > 0) return pid;
      usleep(10'000);
    }
    return 0;
  };
  {
    MpsDaemon mps;
    mps.Start(plan);
    EXPECT_EQ(mps.Status(), "running");
    EXPECT_EQ(mps.JobEnvironment().at("CUDA_MPS_PIPE_DIRECTORY"), plan->pipe_dir);
    const int first = read_pid();
    ASSERT_GT(first, 0);
    // It dies: the supervisor starts another.
    std::filesystem::remove(pid_file);
    kill(first, SIGKILL);
    const int second = read_pid();
    ASSERT_GT(second, 0);
    EXPECT_NE(second, first);
    EXPECT_EQ(mps.Status(), "running");
    mps.Stop();  // `quit` through the stand-in's stdin ends it
    EXPECT_NE(kill(second, 0), 0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gandiva::controller
