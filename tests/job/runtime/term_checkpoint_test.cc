// GANDIVA_CHECKPOINT_ON_TERM in real child processes: SIGTERM saves the job's
// registered state at its next boundary (at once when parked) and ends the job
// by SIGTERM; a job started with GANDIVA_RESTORE from that directory continues
// from exactly the iteration it stopped at.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "gandiva/checkpoint/registry.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/shared_control_block.h"
#include "gandiva/runtime/job_runtime.h"

namespace gandiva::runtime {
namespace {

namespace fs = std::filesystem;

// What the child reports through an anonymous shared mapping.
struct TermShared {
  std::atomic<uint64_t> steps{0};        // the job's step counter after its last step
  std::atomic<int64_t> restored_at{-1};  // its counter right after the first boundary
};

class TermCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("term_checkpoint_test." + std::to_string(getpid()));
    fs::remove_all(dir_);
    shared_ = static_cast<TermShared*>(mmap(nullptr, sizeof(TermShared), PROT_READ | PROT_WRITE,
                                            MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  }
  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
    }
    if (block_) SharedControlBlock::Remove(block_name_);
    munmap(shared_, sizeof(TermShared));
    fs::remove_all(dir_);
  }

  // A training loop whose whole state is a step counter, registered for
  // checkpoints; ~0.2 ms a step. `env` is set before the runtime attaches.
  void StartJob(const std::vector<std::pair<std::string, std::string>>& env) {
    new (shared_) TermShared();
    child_ = fork();
    ASSERT_GE(child_, 0);
    if (child_ != 0) return;
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    static uint64_t steps = 0;
    (void)checkpoint::RegisterState(
        "steps", [](checkpoint::SectionWriter& w) { return w.Write(&steps, sizeof(steps)); },
        [](checkpoint::SectionReader& r) {
          return r.Read(&steps, sizeof(steps)) == sizeof(steps) ? Status::Ok()
                                                                : DataLoss("short section");
        });
    JobRuntime& rt = JobRuntime::Get();
    for (;;) {
      rt.Boundary();
      if (shared_->restored_at.load() < 0) shared_->restored_at.store(static_cast<int64_t>(steps));
      ++steps;
      shared_->steps.store(steps);
      const uint64_t until = MonotonicNowNs() + 200'000;
      while (MonotonicNowNs() < until) {
      }
    }
  }
  void WaitForSteps(uint64_t n) {
    const uint64_t deadline = MonotonicNowNs() + 10'000 * kMs;
    while (shared_->steps.load() < n && MonotonicNowNs() < deadline) usleep(1000);
    ASSERT_GE(shared_->steps.load(), n);
  }
  // SIGTERM, then how it ended.
  int TermAndWait() {
    kill(child_, SIGTERM);
    int status = 0;
    waitpid(child_, &status, 0);
    child_ = -1;
    return status;
  }
  std::pair<std::string, std::string> OnTerm() {
    return {checkpoint::kEnvCheckpointOnTerm, dir_.string()};
  }

  fs::path dir_;
  TermShared* shared_ = nullptr;
  pid_t child_ = -1;
  std::string block_name_;
  std::unique_ptr<SharedControlBlock> block_;
};

TEST_F(TermCheckpointTest, ARunningJobSavesAtItsNextBoundaryEndsBySigtermAndRestoresThere) {
  StartJob({OnTerm()});
  WaitForSteps(100);
  const int status = TermAndWait();
  ASSERT_TRUE(WIFSIGNALED(status)) << "exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  ASSERT_TRUE(fs::exists(dir_ / checkpoint::kCheckpointFileName));
  const uint64_t stopped_at = shared_->steps.load();

  StartJob({{checkpoint::kEnvRestore, dir_.string()}});
  WaitForSteps(stopped_at + 10);
  EXPECT_EQ(shared_->restored_at.load(), static_cast<int64_t>(stopped_at))
      << "no step lost, none done twice";
}

TEST_F(TermCheckpointTest, AParkedJobSavesAtOnce) {
  block_name_ = "/gandiva.termtest." + std::to_string(getpid());
  auto block = SharedControlBlock::Create(block_name_, 9, 60'000 * kMs, "t");
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  block_ = std::move(block).value();
  ControlBlock* cb = block_->get();
  Heartbeat(cb, MonotonicNowNs());
  StartJob({OnTerm(), {kEnvControlBlock, block_name_}});
  WaitForSteps(20);
  RequestSuspend(cb);
  ASSERT_TRUE(WaitForPhase(cb, kPhaseParked, 5'000 * kMs));
  const uint64_t parked_at = shared_->steps.load();
  const int status = TermAndWait();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  ASSERT_TRUE(fs::exists(dir_ / checkpoint::kCheckpointFileName)) << "saved while parked";

  StartJob({{checkpoint::kEnvRestore, dir_.string()}});
  WaitForSteps(parked_at + 10);
  EXPECT_EQ(shared_->restored_at.load(), static_cast<int64_t>(parked_at));
}

TEST_F(TermCheckpointTest, WithoutTheVariableSigtermEndsTheJobAndWritesNothing) {
  StartJob({});
  WaitForSteps(20);
  const int status = TermAndWait();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(dir_));
}

// A SIGKILL during a save (Slurm's grace time ran out) leaves the earlier
// checkpoint whole: saves go to a temporary file that is renamed when complete.
TEST_F(TermCheckpointTest, ALaterRunThatCouldNotSaveLeavesTheEarlierCheckpointUsable) {
  StartJob({OnTerm()});
  WaitForSteps(50);
  ASSERT_TRUE(WIFSIGNALED(TermAndWait()));
  const uint64_t first_stop = shared_->steps.load();
  StartJob({OnTerm(), {checkpoint::kEnvRestore, dir_.string()}});
  WaitForSteps(first_stop + 50);
  kill(child_, SIGKILL);  // no chance to save
  waitpid(child_, nullptr, 0);
  child_ = -1;
  StartJob({{checkpoint::kEnvRestore, dir_.string()}});
  WaitForSteps(first_stop + 1);
  EXPECT_EQ(shared_->restored_at.load(), static_cast<int64_t>(first_stop));
}

}  // namespace
}  // namespace gandiva::runtime
