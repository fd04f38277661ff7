// The job side of a gang, in real processes: each rank takes its own block by
// LOCAL_RANK, parks only at a boundary at or past its park target, and a
// parked rank whose target is raised leaves its park and runs up to it. The
// ranks here run in lockstep like DDP ranks (finishing iteration c+1 takes
// every rank past boundary c), so the test also shows the deadlock the target
// exists to undo.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/shared_control_block.h"
#include "gandiva/runtime/job_runtime.h"

namespace gandiva::runtime {
namespace {

constexpr int kRanks = 2;

// What the ranks share: how far each got, like the allreduce knows.
struct Lockstep {
  // Boundaries passed and left (the profile count once Boundary() returned):
  // the rank has started the next iteration.
  std::atomic<uint64_t> count[kRanks];
  std::atomic<uint32_t> attached_rank[kRanks];
};

class GangRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = "/gandiva.gangtest." + std::to_string(getpid());
    for (int k = 0; k < kRanks; ++k) {
      auto b = SharedControlBlock::Create(base_ + kRankBlockSuffix + std::to_string(k), 9, 0, "t");
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      blocks_[k] = std::move(b).value();
      cb(k)->gang_rank = k;
      cb(k)->gang_size = kRanks;
    }
    shared_ = static_cast<Lockstep*>(
        mmap(nullptr, sizeof(Lockstep), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    new (shared_) Lockstep();
    for (int k = 0; k < kRanks; ++k) {
      pids_[k] = fork();
      ASSERT_GE(pids_[k], 0);
      if (pids_[k] == 0) RunRank(k);
    }
    for (int k = 0; k < kRanks; ++k)
      ASSERT_TRUE(WaitFor([&] { return shared_->count[k].load() >= 3; })) << "rank " << k;
  }

  void TearDown() override {
    for (pid_t pid : pids_)
      if (pid > 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
    for (auto& b : blocks_)
      if (b) SharedControlBlock::Remove(b->name());
  }

  [[noreturn]] void RunRank(int k) {
    setenv(kEnvControlBlock, base_.c_str(), 1);
    setenv(kEnvRanks, std::to_string(kRanks).c_str(), 1);
    setenv(kEnvLocalRank, std::to_string(k).c_str(), 1);
    JobRuntime& rt = JobRuntime::Get();
    shared_->attached_rank[k].store(rt.managed() ? rt.control_block()->gang_rank + 1 : 0);
    rt.Boundary();  // the first boundary
    for (;;) {
      // The "allreduce" of this iteration: every other rank must have started
      // it (left the boundary this rank left last).
      const uint64_t mine = rt.control_block()->profile.iterations.load();
      for (bool blocked = true; blocked;) {
        blocked = false;
        for (int j = 0; j < kRanks; ++j)
          if (j != k && shared_->count[j].load() < mine) blocked = true;
        if (blocked) std::this_thread::yield();
      }
      const uint64_t until = MonotonicNowNs() + 100'000;
      while (MonotonicNowNs() < until) {
      }
      rt.Boundary();  // a park, if any, happens inside
      shared_->count[k].store(rt.control_block()->profile.iterations.load());
    }
  }

  template <typename F>
  bool WaitFor(F f, uint64_t timeout_ns = 10 * kSec) {
    for (const uint64_t end = MonotonicNowNs() + timeout_ns; MonotonicNowNs() < end;)
      if (f())
        return true;
      else
        usleep(200);
    return false;
  }

  ControlBlock* cb(int k) { return blocks_[k]->get(); }
  uint64_t count(int k) { return cb(k)->profile.iterations.load(); }
  bool parked(int k) { return cb(k)->phase.load() == kPhaseParked; }

  std::string base_;
  std::unique_ptr<SharedControlBlock> blocks_[kRanks];
  Lockstep* shared_ = nullptr;
  pid_t pids_[kRanks] = {};
};

TEST_F(GangRankTest, EachRankTakesTheBlockOfItsLocalRank) {
  for (int k = 0; k < kRanks; ++k) {
    EXPECT_EQ(shared_->attached_rank[k].load(), static_cast<uint32_t>(k + 1));
    EXPECT_EQ(cb(k)->pid.load(), pids_[k]);
  }
}

TEST_F(GangRankTest, RanksParkAtTheTargetAndNotBefore) {
  const uint64_t target = std::max(count(0), count(1)) +
                          200;  // far enough ahead that the ranks cannot pass it while it is set
  for (int k = 0; k < kRanks; ++k) cb(k)->park_at_boundary.store(target);
  for (int k = 0; k < kRanks; ++k) RequestSuspend(cb(k));
  ASSERT_TRUE(WaitFor([&] { return parked(0) && parked(1); }));
  EXPECT_EQ(count(0), target);
  EXPECT_EQ(count(1), target);
  for (int k = 0; k < kRanks; ++k) RequestResume(cb(k));
  EXPECT_TRUE(WaitFor([&] { return count(0) > target + 5 && count(1) > target + 5; }));
}

TEST_F(GangRankTest, ARaisedTargetUndoesTheDeadlockOfARankThatParkedEarly) {
  // Rank 0 alone is asked to park: it parks at the first boundary at or past
  // the target, T; rank 1, not asked yet, runs to T and then waits for rank 0
  // in the next iteration's allreduce. T is read from rank 0 once parked: the
  // ranks keep running while the target is set (slowly, under a sanitizer),
  // so T may lie past the target.
  const uint64_t target = std::max(count(0), count(1)) + 1;
  for (int k = 0; k < kRanks; ++k) cb(k)->park_at_boundary.store(target);
  RequestSuspend(cb(0));
  ASSERT_TRUE(WaitFor([&] { return parked(0); }));
  const uint64_t parked_at = count(0);
  EXPECT_GE(parked_at, target);
  ASSERT_TRUE(WaitFor([&] { return count(1) == parked_at; })) << "rank 1 at " << count(1);
  RequestSuspend(cb(1));  // too late: rank 1 passed its target
  usleep(200'000);
  EXPECT_EQ(count(0), parked_at);
  EXPECT_EQ(count(1), parked_at) << "rank 1 cannot finish an iteration without rank 0";
  EXPECT_FALSE(parked(1)) << "deadlocked in the allreduce, not parked";
  // The controller's remedy: raise the target past the furthest rank, wake the parked.
  for (int k = 0; k < kRanks; ++k) cb(k)->park_at_boundary.store(parked_at + 1);
  FutexWakeAll(&cb(0)->request);
  ASSERT_TRUE(WaitFor([&] { return parked(0) && parked(1) && count(0) == parked_at + 1; }));
  EXPECT_EQ(count(1), parked_at + 1);
  usleep(50'000);
  EXPECT_EQ(count(0), parked_at + 1) << "stays parked: at its target";
  for (int k = 0; k < kRanks; ++k) RequestResume(cb(k));
  EXPECT_TRUE(WaitFor([&] { return count(0) > parked_at + 5 && count(1) > parked_at + 5; }));
}

}  // namespace
}  // namespace gandiva::runtime
