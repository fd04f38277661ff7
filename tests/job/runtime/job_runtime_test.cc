// The job side in a real child process: parks at a boundary when asked, makes no
// progress while parked, gates other threads, resumes, and fails open when the
// controller's lease expires or it says it is gone.
#include "gandiva/runtime/job_runtime.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gandiva/checkpoint/registry.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/shared_control_block.h"

namespace gandiva::runtime {
namespace {

// Counters shared with the child through an anonymous shared mapping.
struct Shared {
  std::atomic<uint64_t> gated_calls;  // calls through GateWait() by a second thread
  std::atomic<uint32_t> managed;
  int64_t register_at = -1;  // the iteration before which the child registers a state (-1: never)
};

class JobRuntimeTest : public ::testing::Test {
 protected:
  void StartJob(uint64_t lease_ns, int64_t register_at = -1) {
    name_ = "/gandiva.test." + std::to_string(getpid()) + "." + std::to_string(++counter_);
    auto block = SharedControlBlock::Create(name_, 7, lease_ns, "t");
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    block_ = std::move(block).value();
    Heartbeat(cb(), MonotonicNowNs());
    shared_ = static_cast<Shared*>(
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (shared_) Shared();
    shared_->register_at = register_at;
    child_ = fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) RunChild();
  }

  // The training job: a loop of ~0.2 ms iterations, plus a thread that issues
  // "launches" through the gate.
  [[noreturn]] void RunChild() {
    setenv(kEnvControlBlock, name_.c_str(), 1);
    JobRuntime& rt = JobRuntime::Get();
    shared_->managed.store(rt.managed() ? 1 : 2);
    std::thread launcher([&] {
      for (;;) {
        rt.GateWait();
        shared_->gated_calls.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    });
    launcher.detach();
    for (int i = 0; i < 200000; ++i) {
      if (i == shared_->register_at)
        (void)checkpoint::RegisterState(
            "counter", [](checkpoint::SectionWriter&) { return Status::Ok(); },
            [](checkpoint::SectionReader&) { return Status::Ok(); });
      rt.Boundary();
      const uint64_t until = MonotonicNowNs() + 200'000;
      while (MonotonicNowNs() < until) {
      }
    }
    _exit(0);
  }

  // Also between two jobs of one test: leaves nothing to end twice.
  void TearDown() override {
    if (child_ > 0) {
      kill(child_, SIGKILL);
      waitpid(child_, nullptr, 0);
      child_ = -1;
    }
    if (block_) SharedControlBlock::Remove(name_);
    block_.reset();
    if (shared_) munmap(shared_, sizeof(Shared));
    shared_ = nullptr;
  }

  ControlBlock* cb() { return block_->get(); }
  uint64_t Iterations() { return cb()->profile.iterations.load(); }
  void WaitForIterations(uint64_t n) {
    const uint64_t deadline = MonotonicNowNs() + 10'000 * kMs;
    while (Iterations() < n && MonotonicNowNs() < deadline) usleep(1000);
    ASSERT_GE(Iterations(), n);
  }

  static inline int counter_ = 0;
  std::string name_;
  std::unique_ptr<SharedControlBlock> block_;
  Shared* shared_ = nullptr;
  pid_t child_ = -1;
};

TEST_F(JobRuntimeTest, ParksAtABoundaryMakesNoProgressAndResumes) {
  StartJob(60'000 * kMs);
  WaitForIterations(20);
  EXPECT_EQ(shared_->managed.load(), 1u);
  RequestSuspend(cb());
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseParked, 5'000 * kMs));
  const uint64_t parked_iterations = Iterations();
  usleep(2000);  // let a gated call already past the gate finish
  const uint64_t parked_calls = shared_->gated_calls.load();
  usleep(100'000);
  EXPECT_EQ(Iterations(), parked_iterations) << "a parked job made progress";
  EXPECT_EQ(shared_->gated_calls.load(), parked_calls) << "a gated thread issued work while parked";
  EXPECT_EQ(cb()->park_count.load(), 1u);

  RequestResume(cb());
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseRunning, 5'000 * kMs));
  WaitForIterations(parked_iterations + 20);
  // The gated thread runs again too, though a loaded machine (or a sanitizer)
  // may schedule it some time after the training loop.
  for (const uint64_t until = MonotonicNowNs() + 5'000 * kMs;
       shared_->gated_calls.load() <= parked_calls && MonotonicNowNs() < until;)
    usleep(1000);
  EXPECT_GT(shared_->gated_calls.load(), parked_calls);
  EXPECT_GE(cb()->resumed_at_ns.load(), cb()->parked_at_ns.load());
  // Time parked is not counted as iteration time.
  EXPECT_LT(ReadIterationStats(cb()->profile).p99_ms, 50.0);
}

// The controller cannot see the job's registry: it reads how many sections the
// job registered in the control block, as of the first boundary and each park.
TEST_F(JobRuntimeTest, PublishesItsRegisteredStatesAtTheFirstBoundaryAndAtParks) {
  StartJob(60'000 * kMs, /*register_at=*/0);
  WaitForIterations(5);
  EXPECT_EQ(cb()->registered_states.load(), 1u);
  TearDown();

  StartJob(60'000 * kMs, /*register_at=*/200);
  WaitForIterations(5);
  EXPECT_EQ(cb()->registered_states.load(), 0u) << "nothing registered at the first boundary";
  WaitForIterations(250);
  RequestSuspend(cb());
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseParked, 5'000 * kMs));
  EXPECT_EQ(cb()->registered_states.load(), 1u) << "registered later, published at the park";
}

TEST_F(JobRuntimeTest, ResumesItselfWhenTheLeaseExpires) {
  StartJob(300 * kMs);
  WaitForIterations(5);
  // Keep the lease alive until parked, then fall silent like a dead controller.
  RequestSuspend(cb());
  Heartbeat(cb(), MonotonicNowNs());
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseParked, 5'000 * kMs));
  const uint64_t parked_at = MonotonicNowNs();
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseRunning, 5'000 * kMs));
  const uint64_t waited = MonotonicNowNs() - parked_at;
  EXPECT_GT(waited, 100 * kMs);
  EXPECT_LT(waited, 2'000 * kMs);
  EXPECT_EQ(cb()->fail_open.load(), 1u);
  const uint64_t n = Iterations();
  WaitForIterations(n + 20);  // and keeps training, never parking again
  EXPECT_EQ(cb()->park_count.load(), 1u);
}

// A gandivad started again re-adopts the job (node_readopt.cc): its heartbeat
// on the same block brings the job back under management, and it parks again.
TEST_F(JobRuntimeTest, IsManagedAgainWhenTheHeartbeatReturnsAfterItFailedOpen) {
  StartJob(300 * kMs);
  WaitForIterations(5);
  RequestSuspend(cb());
  Heartbeat(cb(), MonotonicNowNs());
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseParked, 5'000 * kMs));
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseRunning, 5'000 * kMs));  // the lease ran out
  ASSERT_EQ(cb()->fail_open.load(), 1u);
  WaitForIterations(Iterations() + 20);  // unmanaged for a while, the suspend still asked

  Heartbeat(cb(), MonotonicNowNs());  // a controller again
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseParked, 5'000 * kMs));
  EXPECT_EQ(cb()->fail_open.load(), 0u);
  EXPECT_EQ(cb()->park_count.load(), 2u);
  const uint64_t n = Iterations();
  for (int i = 0; i < 5; ++i) Heartbeat(cb(), MonotonicNowNs());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Iterations(), n) << "parked again: no progress";
  RequestResume(cb());
  WaitForIterations(n + 20);
}

TEST_F(JobRuntimeTest, ResumesAtOnceWhenTheControllerSaysItIsGone) {
  StartJob(60'000 * kMs);
  WaitForIterations(5);
  RequestSuspend(cb());
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseParked, 5'000 * kMs));
  ReleaseForever(cb());
  ASSERT_TRUE(WaitForPhase(cb(), kPhaseRunning, 1'000 * kMs));
  EXPECT_EQ(cb()->fail_open.load(), 1u);
  // Released for good: a heartbeat does not bring it back.
  RequestSuspend(cb());
  Heartbeat(cb(), MonotonicNowNs());
  const uint64_t n = Iterations();
  WaitForIterations(n + 50);
  EXPECT_EQ(cb()->park_count.load(), 1u);
}

TEST(JobRuntimeUnmanagedTest, WithoutAControllerItMeasuresButNeverParks) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    unsetenv(kEnvControlBlock);
    JobRuntime& rt = JobRuntime::Get();
    RequestSuspend(rt.control_block());  // nobody may park an unmanaged job
    for (int i = 0; i < 11; ++i) rt.Boundary();
    bool ok = !rt.managed() && rt.job_id() == 0 && rt.Stats().iterations == 10 &&
              rt.control_block()->park_count.load() == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace gandiva::runtime
