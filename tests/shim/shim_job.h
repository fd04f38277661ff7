// The shim's integration-test fixture: one job under the real shim (LD_PRELOAD) with
// the stand-in libcuda.so.1 first on LD_LIBRARY_PATH. The test plays the controller:
// it creates the control block, heartbeats it, suspends, swaps, and reads the
// stand-in's counters (shared through a file, so programs started with the same
// file share one device's memory).
#ifndef GANDIVA_TESTS_SHIM_SHIM_JOB_H_
#define GANDIVA_TESTS_SHIM_SHIM_JOB_H_

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
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gandiva/common/clock.h"
#include "gandiva/contract/control_block.h"
#include "gandiva/contract/shared_control_block.h"

namespace gandiva::shim {

using runtime::ControlBlock;
using runtime::SharedControlBlock;

inline std::map<std::string, uint64_t> ReadKeyValues(const std::string& path) {
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

// One job under the shim: its control block (heartbeated), the stand-in's counters.
class ShimJob : public ::testing::Test {
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
        if (ControlBlock* other = other_cb_.load()) runtime::Heartbeat(other, MonotonicNowNs());
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
    if (other_holder_) SharedControlBlock::Remove(other_name_);
    munmap(counters_, 4096);
  }

  // Runs argv under the shim and the stand-in, attached to this test's control block
  // (unless `managed` is false), with `extra_env` added.
  void StartProgram(std::vector<std::string> argv, std::vector<std::string> extra_env = {},
                    bool managed = true, const std::string& cb_name = "") {
    std::vector<std::string> env = {
        "LD_PRELOAD=" GD_SHIM_LIB,
        "LD_LIBRARY_PATH=" GD_STANDIN_DIR,
        "GANDIVA_CONTROL_BLOCK=" + (cb_name.empty() ? cb_name_ : cb_name),
        "GANDIVA_SHIM_REPORT=" + dir_ + ".shim",
        "GANDIVA_SHIM_SWAP_VERIFY=full",
        "GANDIVA_LOG=warn",
        "GD_STANDIN_COUNTERS=" + counters_path_,
        "GD_STANDIN_KERNEL_NS=2000",
    };
    if (!managed) env.erase(env.begin() + 2);
    // extra_env overrides: getenv() returns the first of two equal names.
    for (const std::string& e : extra_env) {
      const std::string key = e.substr(0, e.find('=') + 1);
      std::erase_if(env, [&](const std::string& d) { return d.rfind(key, 0) == 0; });
    }
    env.insert(env.end(), extra_env.begin(), extra_env.end());
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

  // A second job's control block (heartbeated too), for a process that continues the first.
  ControlBlock* OtherControlBlock() {
    other_name_ = cb_name_ + ".other";
    auto created = SharedControlBlock::Create(other_name_, 8, 5'000'000'000ull, "test");
    if (!created.ok()) return nullptr;
    other_holder_ = std::move(created).value();
    runtime::Heartbeat(other_holder_->get(), MonotonicNowNs());
    other_cb_.store(other_holder_->get());
    return other_holder_->get();
  }

  std::map<std::string, uint64_t> AppReport() { return ReadKeyValues(dir_ + ".app"); }
  std::map<std::string, uint64_t> ShimReport() { return ReadKeyValues(dir_ + ".shim"); }

  std::string dir_, cb_name_, counters_path_;
  std::unique_ptr<SharedControlBlock> cb_holder_, other_holder_;
  ControlBlock* cb_ = nullptr;
  std::string other_name_;
  std::atomic<ControlBlock*> other_cb_{nullptr};
  StandinCounters* counters_ = nullptr;
  std::thread heartbeat_;
  std::atomic<bool> stop_{false};
  pid_t pid_ = -1;
  // One swap cycle as the controller runs it: suspend with a swap-out, check that the
  // device memory went back to the driver and nothing launches, swap in, resume.
  void SwapCycle() {
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
  }

  static inline int counter_ = 0;
};

}  // namespace gandiva::shim

#endif  // GANDIVA_TESTS_SHIM_SHIM_JOB_H_
