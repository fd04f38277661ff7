// The per-device time slicer, driven by a fake clock: no sleeps.
#include "devices/slicer.h"

#include <gtest/gtest.h>

#include <map>

#include "gandiva/common/clock.h"
#include "gandiva/common/units.h"

namespace gandiva::controller {
namespace {

using State = Slicer::JobState;

// Plays the jobs' side: a job asked to suspend parks `park_delay` later (its
// next boundary); resumed jobs run. Records every resume in order.
class SlicerTest : public ::testing::Test {
 protected:
  Slicer slicer_{100 * kMs, 1};
  FakeClock clock_{0};
  std::vector<uint64_t> resumes_;
  std::map<uint64_t, int> suspends_;

  void Apply(const std::vector<SliceAction>& actions) {
    for (const auto& a : actions) {
      if (a.kind == SliceAction::kResume)
        resumes_.push_back(a.job);
      else
        ++suspends_[a.job];
    }
  }
  void Tick() { Apply(slicer_.Tick(clock_.NowNs())); }
  // Every stopping job reaches its boundary and parks now.
  void ParkAllStopping() {
    for (uint64_t id : slicer_.Stopping()) slicer_.OnParked(id, clock_.NowNs());
    Tick();
  }
  // Runs the device for `ms`, in 1 ms steps, with jobs parking `park_delay_ms` after being asked.
  void Run(uint64_t ms, uint64_t park_delay_ms = 2) {
    std::map<uint64_t, uint64_t> asked_at;
    for (uint64_t t = 0; t < ms; ++t) {
      clock_.Advance(kMs);
      Tick();
      for (uint64_t id : slicer_.Stopping()) {
        if (!asked_at.count(id)) asked_at[id] = clock_.NowNs();
        if (clock_.NowNs() - asked_at[id] >= park_delay_ms * kMs) {
          slicer_.OnParked(id, clock_.NowNs());
          asked_at.erase(id);
          Tick();
        }
      }
    }
  }
};

TEST_F(SlicerTest, NewJobsAreAskedToParkAtTheirFirstBoundaryThenRun) {
  slicer_.AddJob(1, 1.0);
  Tick();
  EXPECT_EQ(suspends_[1], 1);
  EXPECT_TRUE(resumes_.empty());
  ParkAllStopping();
  EXPECT_EQ(resumes_, std::vector<uint64_t>{1});
  EXPECT_EQ(slicer_.state(1), State::kRunning);
}

TEST_F(SlicerTest, AJobAloneKeepsRunningPastItsSlice) {
  slicer_.AddJob(1, 1.0);
  Tick();
  ParkAllStopping();
  Run(1000);
  EXPECT_EQ(resumes_.size(), 1u);
  EXPECT_EQ(suspends_[1], 1);  // only the initial park
  EXPECT_EQ(slicer_.NextDeadline(), UINT64_MAX);
}

TEST_F(SlicerTest, TwoJobsAlternateRoundRobinAtSliceEnds) {
  slicer_.AddJob(1, 1.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  ParkAllStopping();
  ASSERT_EQ(resumes_, std::vector<uint64_t>{1});
  EXPECT_EQ(slicer_.NextDeadline(), clock_.NowNs() + 100 * kMs);
  Run(1000);
  // ~1000 ms / (100 ms + 2 ms to reach a boundary) hand-overs, alternating.
  ASSERT_GE(resumes_.size(), 9u);
  ASSERT_LE(resumes_.size(), 11u);
  for (size_t i = 1; i < resumes_.size(); ++i) EXPECT_NE(resumes_[i], resumes_[i - 1]);
  EXPECT_LE(slicer_.Running().size(), 1u);
}

TEST_F(SlicerTest, TheSliceEndsAtTheNextBoundaryNotBefore) {
  slicer_.AddJob(1, 1.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  ParkAllStopping();  // 1 runs
  clock_.Advance(99 * kMs);
  Tick();
  EXPECT_EQ(slicer_.state(1), State::kRunning);
  clock_.Advance(1 * kMs);
  Tick();
  EXPECT_EQ(slicer_.state(1), State::kStopping);  // asked; still running until it parks
  EXPECT_EQ(slicer_.state(2), State::kWaiting);
  clock_.Advance(30 * kMs);  // a long iteration: 2 must not start meanwhile
  Tick();
  EXPECT_EQ(slicer_.state(2), State::kWaiting);
  ParkAllStopping();
  EXPECT_EQ(slicer_.state(2), State::kRunning);
  EXPECT_EQ(slicer_.state(1), State::kWaiting);
}

TEST_F(SlicerTest, WeightsScaleTheSlice) {
  slicer_.AddJob(1, 3.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  ParkAllStopping();
  EXPECT_EQ(slicer_.NextDeadline(), clock_.NowNs() + 300 * kMs);
  // Over a long run job 1 gets about 3x the time of job 2.
  std::map<uint64_t, uint64_t> time;
  uint64_t running = 1, since = clock_.NowNs();
  for (int t = 0; t < 8000; ++t) {
    clock_.Advance(kMs);
    Tick();
    for (uint64_t id : slicer_.Stopping()) {
      slicer_.OnParked(id, clock_.NowNs());
      time[running] += clock_.NowNs() - since;
      Tick();
      running = slicer_.Running().front();
      since = clock_.NowNs();
    }
  }
  const double ratio = static_cast<double>(time[1]) / time[2];
  EXPECT_NEAR(ratio, 3.0, 0.2);
}

TEST_F(SlicerTest, CapacityTwoRunsTwoOfThree) {
  Slicer s(100 * kMs, 2);
  for (uint64_t id : {1, 2, 3}) s.AddJob(id, 1.0);
  s.Tick(0);
  for (uint64_t id : {1, 2, 3}) s.OnParked(id, 0);
  s.Tick(0);
  EXPECT_EQ(s.Running().size(), 2u);
  auto actions = s.Tick(100 * kMs);
  int suspends = 0;
  for (auto& a : actions) suspends += a.kind == SliceAction::kSuspend;
  EXPECT_EQ(suspends, 1);  // only as many as there are waiting jobs
}

TEST_F(SlicerTest, HeldJobsStayParkedUntilReleased) {
  slicer_.AddJob(1, 1.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  ParkAllStopping();  // 1 runs, 2 waits
  slicer_.Hold(1);
  Tick();
  EXPECT_EQ(slicer_.state(1), State::kStopping);
  ParkAllStopping();
  EXPECT_EQ(slicer_.state(1), State::kHeld);
  EXPECT_EQ(slicer_.state(2), State::kRunning);
  Run(500);
  EXPECT_EQ(slicer_.state(1), State::kHeld) << "a held job was resumed";
  EXPECT_EQ(slicer_.state(2), State::kRunning);
  slicer_.Release(1);
  Run(150);
  EXPECT_EQ(slicer_.state(1), State::kRunning);
}

// A job that never marks a boundary (an unmodified program gandiva cannot see
// iterate) must not keep the jobs that came after it waiting for its park.
TEST_F(SlicerTest, AJobWithNoBoundaryHoldsItsDeviceOnlyUntilItIsUnmanaged) {
  slicer_.AddJob(1, 1.0);  // never parks
  Tick();
  slicer_.AddJob(2, 1.0);
  Tick();
  slicer_.OnParked(2, clock_.NowNs());  // 2 reaches its first boundary at once
  for (int t = 0; t < 500; ++t) {       // 1 never does
    clock_.Advance(kMs);
    Tick();
  }
  EXPECT_EQ(slicer_.state(2), State::kWaiting) << "2 started beside a job still asked to park";
  EXPECT_TRUE(slicer_.Unmanage(1));
  EXPECT_EQ(slicer_.state(1), State::kUnmanaged);
  Tick();
  EXPECT_EQ(slicer_.state(2), State::kRunning);
  EXPECT_EQ(slicer_.Stopping(), std::vector<uint64_t>{});
  EXPECT_EQ(slicer_.Unmanaged(), std::vector<uint64_t>{1});
  EXPECT_FALSE(slicer_.RunsAlone(2)) << "the unmanaged job runs beside it";
  EXPECT_FALSE(slicer_.Unmanage(1)) << "unmanaged once";
}

TEST_F(SlicerTest, AnUnmanagedJobThatMarksALateFirstBoundaryJoinsTheRotation) {
  slicer_.AddJob(1, 1.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  slicer_.OnParked(2, clock_.NowNs());
  ASSERT_TRUE(slicer_.Unmanage(1));
  Tick();
  ASSERT_EQ(slicer_.state(2), State::kRunning);
  slicer_.OnParked(1, clock_.NowNs());  // its first boundary, late: it parks there
  EXPECT_EQ(slicer_.state(1), State::kWaiting);
  Run(1000);
  // From now on the two take turns as any two jobs do.
  std::map<uint64_t, int> turns;
  for (uint64_t id : resumes_) ++turns[id];
  EXPECT_GE(turns[1], 4);
  EXPECT_GE(turns[2], 4);
  for (size_t i = 1; i < resumes_.size(); ++i) EXPECT_NE(resumes_[i], resumes_[i - 1]);
}

TEST_F(SlicerTest, OnlyAJobThatNeverParkedIsUnmanaged) {
  slicer_.AddJob(1, 1.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  ParkAllStopping();  // 1 runs, 2 waits
  clock_.Advance(100 * kMs);
  Tick();
  ASSERT_EQ(slicer_.state(1), State::kStopping);  // its slice is up: it parks at its next boundary
  EXPECT_FALSE(slicer_.Unmanage(1)) << "a job that has parked before has boundaries";
  EXPECT_FALSE(slicer_.Unmanage(2)) << "a waiting job is parked";
  EXPECT_FALSE(slicer_.Unmanage(7)) << "no such job";
}

TEST_F(SlicerTest, AHoldOnAnUnmanagedJobTakesEffectWhenItParks) {
  slicer_.AddJob(1, 1.0);
  Tick();
  ASSERT_TRUE(slicer_.Unmanage(1));
  slicer_.Hold(1);
  EXPECT_TRUE(slicer_.IsHeld(1));
  slicer_.OnParked(1, clock_.NowNs());
  Tick();
  EXPECT_EQ(slicer_.state(1), State::kHeld);
  slicer_.Release(1);
  Tick();
  EXPECT_EQ(slicer_.state(1), State::kRunning);
}

TEST_F(SlicerTest, AMinimumSliceLengthensEverySliceAndGoesAwayAtZero) {
  slicer_.AddJob(1, 2.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  ParkAllStopping();  // 1 runs
  slicer_.SetMinSlice(500 * kMs);
  EXPECT_EQ(slicer_.SliceNow(), 500 * kMs);
  EXPECT_EQ(slicer_.slice_ns(), 100 * kMs) << "the slice as set is kept";
  EXPECT_EQ(slicer_.NextDeadline(), clock_.NowNs() + 1000 * kMs) << "weights scale it";
  clock_.Advance(999 * kMs);
  Tick();
  EXPECT_EQ(slicer_.state(1), State::kRunning);
  slicer_.SetMinSlice(50 * kMs);  // shorter than the slice: the slice rules
  EXPECT_EQ(slicer_.SliceNow(), 100 * kMs);
  slicer_.SetMinSlice(0);
  EXPECT_EQ(slicer_.SliceNow(), 100 * kMs);
  Tick();
  EXPECT_EQ(slicer_.state(1), State::kStopping) << "its 200 ms are long up";
}

TEST_F(SlicerTest, RemovingTheRunningJobStartsTheNext) {
  slicer_.AddJob(1, 1.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  ParkAllStopping();
  slicer_.RemoveJob(1);
  Tick();
  EXPECT_EQ(slicer_.state(2), State::kRunning);
  EXPECT_FALSE(slicer_.HasJob(1));
}

TEST_F(SlicerTest, ChangingTheSliceTakesEffectAtTheNextSlice) {
  slicer_.AddJob(1, 1.0);
  slicer_.AddJob(2, 1.0);
  Tick();
  ParkAllStopping();
  slicer_.SetSlice(250 * kMs);
  EXPECT_EQ(slicer_.NextDeadline(), clock_.NowNs() + 250 * kMs);
}

// ---- Several devices in one slicer: a job across devices is sliced as a gang ----

// Runs the devices for `ms` in 1 ms steps (as Run), and checks at every step
// that no device holds more running jobs than its capacity and that the gang
// (`gang`, on devices 0 and 1) never runs on one device while a single-device
// job runs on the other (jobs stopping are on their way to park, not counted): its devices switch
// together. Counts each job's running ms.
std::map<uint64_t, int> RunDevices(Slicer& slicer, FakeClock& clock, uint64_t ms, uint64_t gang) {
  std::map<uint64_t, int> ran_ms;
  std::map<uint64_t, uint64_t> asked_at;
  for (uint64_t t = 0; t < ms; ++t) {
    clock.Advance(kMs);
    slicer.Tick(clock.NowNs());
    for (uint64_t id : slicer.Stopping()) {
      if (!asked_at.count(id)) asked_at[id] = clock.NowNs();
      if (clock.NowNs() - asked_at[id] >= 2 * kMs) {
        slicer.OnParked(id, clock.NowNs());
        asked_at.erase(id);
        slicer.Tick(clock.NowNs());
      }
    }
    std::map<int, int> per_device;
    for (uint64_t id : slicer.Running()) {
      ++ran_ms[id];
      for (int d = 0; d < 2; ++d)
        if (slicer.DevicesOf(id) >> d & 1) ++per_device[d];
    }
    EXPECT_LE(per_device[0], slicer.capacity()) << "at " << t << " ms";
    EXPECT_LE(per_device[1], slicer.capacity()) << "at " << t << " ms";
    if (slicer.state(gang) == State::kRunning) {
      EXPECT_EQ(slicer.Running().size(), 1u) << "the gang runs beside a job at " << t << " ms";
    }
  }
  return ran_ms;
}

// Jobs (id, device mask) on a slicer of two devices, job 3 across both, for `ms`.
std::map<uint64_t, int> RunJobs(const std::vector<std::pair<uint64_t, uint64_t>>& jobs,
                                uint64_t ms) {
  Slicer slicer(100 * kMs, 1);
  FakeClock clock{0};
  for (const auto& [id, devices] : jobs) slicer.AddJob(id, 1.0, devices);
  return RunDevices(slicer, clock, ms, 3);
}

TEST(SlicerDevicesTest, AJobAcrossTwoDevicesTakesTurnsWithAJobOnEach) {
  // Job 1 on device 0, job 2 on device 1, job 3 across both.
  const std::map<uint64_t, int> ran = RunJobs({{1, 0b01}, {2, 0b10}, {3, 0b11}}, 3000);
  // Jobs 1 and 2 run together (different devices), then the gang alone: each
  // gets about half of the time, the gang is not starved.
  EXPECT_GT(ran.at(3), 1200);
  EXPECT_GT(ran.at(1), 1200);
  EXPECT_GT(ran.at(2), 1200);
}

TEST(SlicerDevicesTest, SingleDeviceJobsDoNotSlipPastAWaitingGang) {
  // Device 0 has two jobs of its own; device 1 one. Were the gang passed over
  // whenever one of its devices is busy, it would never find both free at once.
  const std::map<uint64_t, int> ran = RunJobs({{1, 0b01}, {2, 0b01}, {4, 0b10}, {3, 0b11}}, 4000);
  EXPECT_GT(ran.at(3), 800) << "the gang was starved";
  EXPECT_GT(ran.at(1), 800);
  EXPECT_GT(ran.at(2), 800);
}

TEST(SlicerDevicesTest, JobsOnDifferentDevicesNeverEndEachOthersSlices) {
  Slicer slicer(100 * kMs, 1);
  FakeClock clock{0};
  slicer.AddJob(1, 1.0, 0b01);
  slicer.AddJob(2, 1.0, 0b10);
  slicer.Tick(0);
  slicer.OnParked(1, 0);
  slicer.OnParked(2, 0);
  slicer.Tick(0);
  EXPECT_EQ(slicer.Running(), (std::vector<uint64_t>{1, 2}));
  EXPECT_TRUE(slicer.RunsAlone(1));  // alone on its device, though not on the node
  EXPECT_EQ(slicer.NextDeadline(), UINT64_MAX);
  for (uint64_t t = 1; t <= 20; ++t) EXPECT_TRUE(slicer.Tick(t * 100 * kMs).empty());
}

TEST(SlicerDevicesTest, TheGangParksOnBothDevicesAtOnceWhenASingleJobWaits) {
  Slicer slicer(100 * kMs, 1);
  slicer.AddJob(3, 1.0, 0b11);
  slicer.Tick(0);
  slicer.OnParked(3, 0);
  slicer.Tick(0);
  EXPECT_EQ(slicer.Running(), (std::vector<uint64_t>{3}));
  slicer.AddJob(1, 1.0, 0b10);  // waits for device 1 only
  slicer.Tick(1 * kMs);
  slicer.OnParked(1, 2 * kMs);
  slicer.Tick(2 * kMs);
  EXPECT_EQ(slicer.state(1), State::kWaiting);
  EXPECT_EQ(slicer.NextDeadline(), 100 * kMs);
  const std::vector<SliceAction> actions = slicer.Tick(100 * kMs);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, SliceAction::kSuspend);
  EXPECT_EQ(actions[0].job, 3u);
  slicer.OnParked(3, 103 * kMs);
  const std::vector<SliceAction> next = slicer.Tick(103 * kMs);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].job, 1u);  // device 0 stays idle until the gang's turn: it is one job
}

}  // namespace
}  // namespace gandiva::controller
