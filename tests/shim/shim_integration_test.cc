// Integration tests: the nvcc-kernel test programs run under LD_PRELOAD of the real
// shim, with the stand-in libcuda.so.1 found first on LD_LIBRARY_PATH, on both paths
// (directly linked symbols; dlopen + cuGetProcAddress as cudart does). The test plays
// the controller: it creates the control block, heartbeats it, suspends, swaps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "gandiva/common/clock.h"
#include "gandiva/contract/control_block.h"
#include "gandiva/contract/shared_control_block.h"

namespace gandiva::shim {
namespace {

using runtime::ControlBlock;
using runtime::SharedControlBlock;

std::map<std::string, uint64_t> ReadKeyValues(const std::string& path) {
  std::map<std::string, uint64_t> out;
  std::ifstream in(path);
  std::string key;
  uint64_t value;
  while (in >> key >> value) out[key] = value;
  return out;
}

struct StandinCounters {  // layout of the stand-in's GD_STANDIN_COUNTERS file
  std::atomic<uint64_t> launches;
  std::atomic<uint64_t> device_bytes;
  std::atomic<uint64_t> physical_live;
};

class ShimRun : public ::testing::TestWithParam<bool> {  // param: cuGetProcAddress path
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "gd_shim_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(dir_.begin() + ::testing::TempDir().size(), dir_.end(), '/', '_');
    cb_name_ = "/gd_shim_test." + std::to_string(getpid()) + "." + std::to_string(counter_++);
    auto created = SharedControlBlock::Create(cb_name_, 7, 5'000'000'000ull, "test");
    ASSERT_TRUE(created.ok());
    cb_holder_ = std::move(created).value();
    cb_ = cb_holder_->get();
    runtime::Heartbeat(cb_, MonotonicNowNs());
    heartbeat_ = std::thread([this] {
      while (!stop_.load()) {
        runtime::Heartbeat(cb_, MonotonicNowNs());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    // The stand-in's counters, shared through a file.
    counters_path_ = dir_ + ".counters";
    int fd = open(counters_path_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    counters_ = static_cast<StandinCounters*>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    close(fd);
    ASSERT_NE(counters_, MAP_FAILED);
  }

  void TearDown() override {
    stop_.store(true);
    if (heartbeat_.joinable()) heartbeat_.join();
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    SharedControlBlock::Remove(cb_name_);
    munmap(counters_, 4096);
  }

  void Start(std::vector<std::string> args) {
    const bool procaddr = GetParam();
    std::vector<std::string> argv = {procaddr ? GD_PROCADDR_APP : GD_DIRECT_APP, "--image",
                                     procaddr ? GD_FATBIN : GD_CUBIN, "--report", dir_ + ".app"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env = {
        "LD_PRELOAD=" GD_SHIM_LIB,
        "LD_LIBRARY_PATH=" GD_STANDIN_DIR,
        "GANDIVA_CONTROL_BLOCK=" + cb_name_,
        "GANDIVA_SHIM_REPORT=" + dir_ + ".shim",
        "GANDIVA_SHIM_SWAP_VERIFY=full",
        "GANDIVA_LOG=warn",
        "GD_STANDIN_COUNTERS=" + counters_path_,
        "GD_STANDIN_KERNEL_NS=2000",
    };
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::vector<char*> a, e;
      for (auto& s : argv) a.push_back(s.data());
      a.push_back(nullptr);
      for (auto& s : env) e.push_back(s.data());
      e.push_back(nullptr);
      execve(a[0], a.data(), e.data());
      _exit(127);
    }
  }

  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Polls `done` for up to `ms`.
  template <typename F>
  static bool WaitFor(F done, int ms = 10000) {
    for (int i = 0; i < ms; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return done();
  }

  std::map<std::string, uint64_t> AppReport() { return ReadKeyValues(dir_ + ".app"); }
  std::map<std::string, uint64_t> ShimReport() { return ReadKeyValues(dir_ + ".shim"); }

  std::string dir_, cb_name_, counters_path_;
  std::unique_ptr<SharedControlBlock> cb_holder_;
  ControlBlock* cb_ = nullptr;
  StandinCounters* counters_ = nullptr;
  std::thread heartbeat_;
  std::atomic<bool> stop_{false};
  pid_t pid_ = -1;
  static inline int counter_ = 0;
};

// Every hooked call the program made is seen by the shim (the program counts its own
// calls by versioned name); iteration boundaries are found without gd_boundary().
TEST_P(ShimRun, SeesEveryHookedCallAndFindsEveryIteration) {
  constexpr int kIterations = 40;
  Start({"--iterations", std::to_string(kIterations), "--threads", "2", "--graph"});
  ASSERT_EQ(Wait(), 0);
  auto app = AppReport();
  auto shim = ShimReport();
  int compared = 0;
  for (const auto& [key, count] : app) {
    if (key.rfind("calls.", 0) != 0 || !shim.count("calls.cuInit")) continue;
    const bool hooked = shim.count(key) > 0 || key == "calls.cuCtxSetCurrent" ||
                        key == "calls.cuDeviceGet" || key.find("Module") != std::string::npos ||
                        key.find("Event") != std::string::npos ||
                        key.find("Stream") != std::string::npos ||
                        key.find("Graph") != std::string::npos || key == "calls.cuMemSetAccess";
    ASSERT_TRUE(hooked) << key;
    if (shim.count(key)) {
      EXPECT_EQ(shim[key], count) << key;
      ++compared;
    }
  }
  // The hooked entry points the workload uses, on either path.
  for (const char* k :
       {"calls.cuLaunchKernel", "calls.cuLaunchKernel_ptsz", "calls.cuLaunchKernelEx",
        "calls.cuGraphLaunch", "calls.cuStreamBeginCapture_v2", "calls.cuMemAlloc_v2",
        "calls.cuMemFree_v2", "calls.cuMemcpyDtoH_v2", "calls.cuMemcpyDtoH_v2_ptds",
        "calls.cuStreamSynchronize", "calls.cuEventSynchronize", "calls.cuMemCreate",
        "calls.cuMemAllocAsync", "calls.cuMemAllocPitch_v2"}) {
    EXPECT_GT(shim[k], 0u) << k;
    EXPECT_EQ(shim[k], app[k]) << k;
  }
  EXPECT_GE(compared, 25);
  if (GetParam()) {
    EXPECT_GT(shim["calls.cuGetProcAddress_v2"], 30u);
  }
  // Automatic boundaries: exactly one per iteration, confidently, reported to the controller.
  EXPECT_EQ(shim["boundaries"], static_cast<uint64_t>(kIterations));
  EXPECT_EQ(cb_->auto_boundaries.load(), static_cast<uint64_t>(kIterations));
  EXPECT_GE(cb_->auto_boundary_confidence_pct.load(), 90u);
  EXPECT_EQ(cb_->boundary_source.load(), 2u);
  EXPECT_GE(cb_->profile.iterations.load(), static_cast<uint64_t>(kIterations - 5));
  EXPECT_EQ(shim["explicit"], 0u);
  // Everything freed at the end, and the table agrees.
  EXPECT_EQ(shim["device_bytes"], 0u);
  EXPECT_EQ(cb_->device_bytes.load(), 0u);
}

// Suspend parks every issuing thread (main and workers): the stand-in sees no launch
// while parked. The memory table is exact while the job runs.
TEST_P(ShimRun, SuspendParksEveryIssuingThread) {
  Start({"--iterations", "400", "--threads", "3", "--sleep-us", "1000"});
  ASSERT_TRUE(WaitFor([&] { return cb_->profile.iterations.load() >= 5; }));
  runtime::RequestSuspend(cb_);
  ASSERT_TRUE(runtime::WaitForPhase(cb_, runtime::kPhaseParked, 5'000'000'000ull));
  auto app = AppReport();
  EXPECT_EQ(cb_->device_bytes.load(), app["expected_device_bytes"]);
  EXPECT_EQ(cb_->device_allocations.load(), app["expected_allocations"]);
  std::this_thread::sleep_for(
      std::chrono::milliseconds(30));  // launches already past the gate land
  const uint64_t before = counters_->launches.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(counters_->launches.load(), before) << "a thread launched while the job was parked";
  runtime::RequestResume(cb_);
  ASSERT_TRUE(WaitFor([&] { return counters_->launches.load() > before + 20; }));
  ASSERT_EQ(Wait(), 0);
  EXPECT_EQ(cb_->park_count.load(), 1u);
}

// Swap-out releases the device memory while keeping the addresses; swap-in maps it
// back at the same addresses with byte-identical contents (the program checks every
// byte it wrote, through its original pointers, after the swap).
TEST_P(ShimRun, SwapKeepsAddressesAndContents) {
  Start({"--iterations", "300", "--threads", "2", "--sleep-us", "1000", "--buffers", "5"});
  ASSERT_TRUE(WaitFor([&] { return cb_->profile.iterations.load() >= 5; }));
  const uint64_t device_before = counters_->device_bytes.load();
  cb_->swap_request.store(runtime::kSwapOut);
  runtime::RequestSuspend(cb_);
  ASSERT_TRUE(runtime::WaitForPhase(cb_, runtime::kPhaseParked, 5'000'000'000ull));
  ASSERT_TRUE(WaitFor([&] { return cb_->swap_state.load() != runtime::kSwapResident; }));
  ASSERT_EQ(cb_->swap_state.load(), runtime::kSwapSwappedOut);
  auto app = AppReport();
  EXPECT_EQ(cb_->swapped_bytes.load(), app["expected_vmm_bytes"]);
  EXPECT_EQ(cb_->device_bytes.load(), app["expected_device_bytes"] - app["expected_vmm_bytes"]);
  // The driver really got the memory back (granularity-rounded), not just our books.
  EXPECT_GE(device_before - counters_->device_bytes.load(), app["expected_vmm_bytes"]);
  const uint64_t launches = counters_->launches.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(counters_->launches.load(), launches);

  cb_->swap_request.store(runtime::kSwapIn);
  runtime::RequestResume(cb_);
  ASSERT_TRUE(WaitFor([&] { return cb_->swap_state.load() == runtime::kSwapResident; }));
  EXPECT_EQ(cb_->swapped_bytes.load(), 0u);
  EXPECT_EQ(cb_->device_bytes.load(), app["expected_device_bytes"]);
  EXPECT_EQ(counters_->device_bytes.load(), device_before);
  ASSERT_EQ(Wait(), 0) << "device memory contents differ after swap (exit 3) or a call failed (2)";
  EXPECT_EQ(AppReport()["content_errors"], 0u);
}

INSTANTIATE_TEST_SUITE_P(Paths, ShimRun, ::testing::Values(false, true), [](const auto& info) {
  return info.param ? "ProcAddress" : "DirectLink";
});

}  // namespace
}  // namespace gandiva::shim
