// Packing: the slicer with capacity > 1 (pack), lowered back to 1 (slice), and
// memory that does not fit; each job's alone time and rate_vs_alone; auto
// mode's measurement and decision. All driven by a fake clock: no sleeps.
#include <gtest/gtest.h>

#include <memory>

#include "devices/alone_rate.h"
#include "devices/share_mode.h"
#include "devices/slicer.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/units.h"

namespace gandiva::controller {
namespace {

using State = Slicer::JobState;

// Two jobs past their first park, on a slicer of the given capacity.
void StartTwo(Slicer& s, uint64_t now) {
  s.AddJob(1, 1.0);
  s.AddJob(2, 1.0);
  s.Tick(now);
  s.OnParked(1, now);
  s.OnParked(2, now);
  s.Tick(now);
}

TEST(PackTest, CapacityTwoRunsBothAndNeitherIsEverSuspended) {
  Slicer s(100 * kMs, 2);
  StartTwo(s, 0);
  EXPECT_EQ(s.Running(), (std::vector<uint64_t>{1, 2}));
  for (uint64_t t = 1; t <= 50; ++t) EXPECT_TRUE(s.Tick(t * 100 * kMs).empty());
  EXPECT_FALSE(s.RunsAlone(1) || s.RunsAlone(2));  // neither runs alone
}

TEST(PackTest, LoweringTheCapacitySuspendsOneAndTheyTakeTurns) {
  Slicer s(100 * kMs, 2);
  StartTwo(s, 0);
  s.SetCapacity(1);
  auto actions = s.Tick(10 * kMs);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, SliceAction::kSuspend);
  const uint64_t stopped = actions[0].job, other = stopped == 1 ? 2 : 1;
  EXPECT_EQ(s.state(other), State::kRunning);
  EXPECT_FALSE(s.RunsAlone(other));  // the stopping one still runs until its boundary
  s.OnParked(stopped, 12 * kMs);
  EXPECT_TRUE(s.Tick(12 * kMs).empty());  // no room: it waits its turn
  EXPECT_TRUE(s.RunsAlone(other));
  // The running job's slice ends; the other comes back: time slicing again.
  actions = s.Tick(110 * kMs);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].job, other);
  s.OnParked(other, 111 * kMs);
  actions = s.Tick(111 * kMs);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, SliceAction::kResume);
  EXPECT_EQ(actions[0].job, stopped);
  // Raised again: the waiting one joins at once.
  s.SetCapacity(2);
  actions = s.Tick(120 * kMs);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, SliceAction::kResume);
  EXPECT_EQ(s.Running().size(), 2u);
}

TEST(PackTest, JobsWhoseMemoryDoesNotFitTogetherTakeTurns) {
  Slicer s(100 * kMs, 2);
  s.SetMemoryLimit(10 << 20);
  s.AddJob(1, 1.0);
  s.AddJob(2, 1.0);
  s.SetFootprint(1, 6 << 20);
  s.SetFootprint(2, 6 << 20);
  EXPECT_FALSE(s.FitTogether({1, 2}));
  s.Tick(0);
  s.OnParked(1, 0);
  s.OnParked(2, 0);
  s.Tick(0);
  EXPECT_EQ(s.Running().size(), 1u);  // 12 MiB do not fit in 10: one waits
  const uint64_t first = s.Running().front();
  auto actions = s.Tick(100 * kMs);  // slice up, the other waits: turns
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].job, first);
  s.OnParked(first, 101 * kMs);
  s.Tick(101 * kMs);
  EXPECT_EQ(s.Running().size(), 1u);
  EXPECT_NE(s.Running().front(), first);
  // Smaller now: they fit, and both run.
  s.SetFootprint(first, 1 << 20);
  s.Tick(102 * kMs);
  EXPECT_EQ(s.Running().size(), 2u);
}

// Capped jobs (`gandiva run --gpu-memory`) may grow to their caps, so packing counts
// each at its cap, however little it holds yet: caps summing above the device's
// memory take turns; caps that fit run together.
TEST(PackTest, JobsWhoseCapsDoNotFitTogetherTakeTurnsThoughTheyHoldLittleYet) {
  Slicer s(100 * kMs, 2);
  s.SetMemoryLimit(10 << 20);
  s.AddJob(1, 1.0);
  s.AddJob(2, 1.0);
  s.SetFootprint(1, 1 << 20);
  s.SetFootprint(2, 1 << 20);
  s.SetMemoryCap(1, 6 << 20);
  s.SetMemoryCap(2, 6 << 20);
  EXPECT_FALSE(s.FitTogether({1, 2}));  // 2 MiB held, 12 MiB of caps in 10
  s.Tick(0);
  s.OnParked(1, 0);
  s.OnParked(2, 0);
  s.Tick(0);
  EXPECT_EQ(s.Running().size(), 1u);
  const uint64_t first = s.Running().front();
  auto actions = s.Tick(100 * kMs);  // slice up: the other's turn
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].job, first);
  s.OnParked(first, 101 * kMs);
  s.Tick(101 * kMs);
  ASSERT_EQ(s.Running().size(), 1u);
  EXPECT_NE(s.Running().front(), first);
  // A smaller cap for one: 6 + 4 MiB fit in 10, and both run.
  s.SetMemoryCap(first, 4 << 20);
  EXPECT_TRUE(s.FitTogether({1, 2}));
  s.Tick(102 * kMs);
  EXPECT_EQ(s.Running().size(), 2u);
}

TEST(PackTest, AJobBeyondItsCapCountsAtWhatItHolds) {
  Slicer s(100 * kMs, 2);
  s.SetMemoryLimit(10 << 20);
  s.AddJob(1, 1.0);
  s.AddJob(2, 1.0);
  s.SetMemoryCap(1, 2 << 20);
  s.SetFootprint(1, 7 << 20);  // no shim enforcing it (a CPU job, --no-shim): what it holds
  s.SetFootprint(2, 4 << 20);
  EXPECT_FALSE(s.FitTogether({1, 2}));
  s.SetMemoryCap(1, 0);  // an uncapped job counts at its footprint, as before
  EXPECT_FALSE(s.FitTogether({1, 2}));
  s.SetFootprint(1, 5 << 20);
  EXPECT_TRUE(s.FitTogether({1, 2}));
}

TEST(PackTest, AHeldJobIsNeverPackedBackIn) {
  Slicer s(100 * kMs, 2);
  StartTwo(s, 0);
  s.Hold(2);
  s.Tick(1 * kMs);
  s.OnParked(2, 2 * kMs);
  s.Tick(2 * kMs);
  EXPECT_EQ(s.state(2), State::kHeld);
  for (uint64_t t = 3; t < 50; ++t) s.Tick(t * 100 * kMs);
  EXPECT_EQ(s.state(2), State::kHeld);
  EXPECT_TRUE(s.RunsAlone(1));
  s.Release(2);
  s.Tick(5000 * kMs);
  EXPECT_EQ(s.Running().size(), 2u);
}

TEST(PackTest, ANewJobStartingBesideARunningOneMeansNoOneIsAlone) {
  Slicer s(100 * kMs, 1);
  s.AddJob(1, 1.0);
  s.Tick(0);
  s.OnParked(1, 0);
  s.Tick(0);
  EXPECT_TRUE(s.RunsAlone(1));
  s.AddJob(2, 1.0);  // importing, building its model: it uses the device too
  EXPECT_FALSE(s.RunsAlone(1));
}

// A job's profile ring, written as the job's boundaries would.
struct ProfiledJob {
  std::unique_ptr<runtime::ProfileRing> ring = std::make_unique<runtime::ProfileRing>();
  ProfiledJob() {
    ring->iterations = 0;
    for (auto& r : ring->ring_ns) r = 0;
  }
  void Iterate(uint64_t ns, int n = 1) {
    for (int i = 0; i < n; ++i) {
      const uint64_t it = ring->iterations.load();
      ring->ring_ns[it % runtime::kProfileRingSize] = ns;
      ring->iterations = it + 1;
    }
  }
};

TEST(AloneRateTest, LearnsOnlyFromIterationsRunAloneAfterTheFirstTwo) {
  ProfiledJob job;
  AloneRate rate;
  rate.Observe(0, false, *job.ring);
  job.Iterate(50 * kMs, 5);  // beside another job: slow, not alone
  rate.Observe(kSec, true, *job.ring);
  EXPECT_FALSE(rate.AloneNs());
  job.Iterate(30 * kMs);  // straddles the change
  job.Iterate(25 * kMs);  // warm-up
  job.Iterate(10 * kMs, 2);
  rate.Observe(2 * kSec, true, *job.ring);
  EXPECT_FALSE(rate.AloneNs());  // 2 samples < kMinSamples
  job.Iterate(10 * kMs);
  rate.Observe(3 * kSec, false, *job.ring);  // the samples up to here were alone
  ASSERT_TRUE(rate.AloneNs());
  EXPECT_EQ(*rate.AloneNs(), 10 * kMs);
  EXPECT_EQ(rate.samples().size(), 3u);
  job.Iterate(80 * kMs, 10);  // not alone: ignored
  rate.Observe(4 * kSec, false, *job.ring);
  EXPECT_EQ(*rate.AloneNs(), 10 * kMs);
}

TEST(AloneRateTest, TheMedianIgnoresAnOutlier) {
  ProfiledJob job;
  AloneRate rate;
  rate.Observe(0, true, *job.ring);
  job.Iterate(99 * kMs, 2);  // skipped
  job.Iterate(10 * kMs, 4);
  job.Iterate(500 * kMs);  // a hiccup (another engineer's build)
  rate.Observe(kSec, true, *job.ring);
  EXPECT_EQ(*rate.AloneNs(), 10 * kMs);
}

TEST(AloneRateTest, RateIsThroughputOverWallTimeAgainstAlone) {
  ProfiledJob job;
  AloneRate rate;
  FakeClock clock(0);
  // Alone: 10 ms iterations, 100 per second.
  rate.Observe(clock.NowNs(), true, *job.ring);
  for (int i = 0; i < 40; ++i) {
    clock.Advance(100 * kMs);
    job.Iterate(10 * kMs, 10);
    rate.Observe(clock.NowNs(), true, *job.ring);
  }
  ASSERT_TRUE(rate.RateVsAlone(clock.NowNs(), job.ring->iterations));
  EXPECT_NEAR(*rate.RateVsAlone(clock.NowNs(), job.ring->iterations), 1.0, 0.05);
  // Sliced with one other: 100 ms running (10 iterations), 100 ms parked.
  for (int i = 0; i < 40; ++i) {
    clock.Advance(100 * kMs);
    if (i % 2 == 0) job.Iterate(10 * kMs, 10);
    rate.Observe(clock.NowNs(), i % 2 == 0, *job.ring);
  }
  EXPECT_NEAR(*rate.RateVsAlone(clock.NowNs(), job.ring->iterations), 0.5, 0.05);
  // Packed, 1.6x slower per iteration and never alone: about 0.62.
  for (int i = 0; i < 40; ++i) {
    clock.Advance(160 * kMs);
    job.Iterate(16 * kMs, 10);
    rate.Observe(clock.NowNs(), false, *job.ring);
  }
  EXPECT_NEAR(*rate.RateVsAlone(clock.NowNs(), job.ring->iterations), 1 / 1.6, 0.05);
  EXPECT_EQ(*rate.AloneNs(), 10 * kMs);  // unchanged by packing
}

TEST(AloneRateTest, TheTimeBeforeTheFirstIterationIsNotInTheWindow) {
  ProfiledJob job;
  AloneRate rate;
  FakeClock clock(0);
  for (int i = 0; i < 50; ++i) {  // 5 s of imports and model building
    clock.Advance(100 * kMs);
    rate.Observe(clock.NowNs(), true, *job.ring);
  }
  for (int i = 0; i < 15; ++i) {
    clock.Advance(100 * kMs);
    job.Iterate(10 * kMs, 10);
    rate.Observe(clock.NowNs(), true, *job.ring);
  }
  ASSERT_TRUE(rate.RateVsAlone(clock.NowNs(), job.ring->iterations));
  EXPECT_NEAR(*rate.RateVsAlone(clock.NowNs(), job.ring->iterations), 1.0, 0.1);
}

TEST(AloneRateTest, NoRateUntilTheAloneTimeAndAWindowAreKnown) {
  ProfiledJob job;
  AloneRate rate;
  rate.Observe(0, false, *job.ring);
  job.Iterate(10 * kMs, 100);
  rate.Observe(5 * kSec, false, *job.ring);
  EXPECT_FALSE(rate.RateVsAlone(5 * kSec, job.ring->iterations));  // never alone
}

// Plays a device for the chooser: jobs progress at the rates of the mode it asks for.
struct AutoDevice {
  ShareChooser chooser{1000 * kMs};
  FakeClock clock{0};
  std::vector<ShareCandidate> jobs{{1, 1.0, 0, 10 * kMs}, {2, 1.0, 0, 20 * kMs}};
  bool pack = false;
  // Per job and mode, iterations per 100 ms.
  uint64_t sliced[2] = {5, 2}, packed[2] = {8, 4};
  void Run(uint64_t ms, bool fit = true) {
    for (uint64_t t = 0; t < ms; t += 100) {
      clock.Advance(100 * kMs);
      for (size_t i = 0; i < jobs.size(); ++i) jobs[i].iterations += (pack ? packed : sliced)[i];
      pack = chooser.Tick(clock.NowNs(), jobs, fit);
    }
  }
};

TEST(ShareChooserTest, MeasuresSliceThenPackAndKeepsTheBetter) {
  AutoDevice d;
  d.pack = d.chooser.Tick(d.clock.NowNs(), d.jobs, true);
  EXPECT_FALSE(d.pack);
  EXPECT_EQ(d.chooser.phase(), ShareChooser::Phase::kSlice);
  d.Run(1300);
  EXPECT_EQ(d.chooser.phase(), ShareChooser::Phase::kPack);
  EXPECT_TRUE(d.pack);
  d.Run(1300);
  ASSERT_EQ(d.chooser.phase(), ShareChooser::Phase::kDecided);
  const ShareDecision& dec = *d.chooser.decision();
  EXPECT_EQ(dec.chosen, ShareMode::kPack);
  EXPECT_EQ(dec.reason, "measured");
  // Sliced: (5 x 10 ms + 2 x 20 ms) per 100 ms = 0.9; packed: (8 x 10 + 4 x 20) / 100 = 1.6.
  EXPECT_NEAR(*dec.slice_rate, 0.9, 0.1);
  EXPECT_NEAR(*dec.pack_rate, 1.6, 0.17);
  EXPECT_FALSE(dec.alone_estimated);
  EXPECT_TRUE(d.pack);
}

TEST(ShareChooserTest, KeepsSlicingWhenPackingIsWorse) {
  AutoDevice d;
  d.packed[0] = 2;
  d.packed[1] = 1;
  d.Run(3000);
  ASSERT_EQ(d.chooser.phase(), ShareChooser::Phase::kDecided);
  EXPECT_EQ(d.chooser.decision()->chosen, ShareMode::kSlice);
  EXPECT_LT(*d.chooser.decision()->pack_rate, *d.chooser.decision()->slice_rate);
  EXPECT_FALSE(d.pack);
}

TEST(ShareChooserTest, APackingGainWithinTheMarginKeepsSlicing) {
  AutoDevice d;
  d.sliced[0] = d.packed[0] = 5;
  d.sliced[1] = 2;
  d.packed[1] = 2;  // a tie
  d.Run(3000);
  ASSERT_EQ(d.chooser.phase(), ShareChooser::Phase::kDecided);
  EXPECT_EQ(d.chooser.decision()->chosen, ShareMode::kSlice);
  EXPECT_NEAR(*d.chooser.decision()->pack_rate, *d.chooser.decision()->slice_rate, 0.1);
}

TEST(ShareChooserTest, MeasuresAgainWhenAJobLeavesOrJoinsAndAfterAWhile) {
  AutoDevice d;
  d.Run(3000);
  ASSERT_EQ(d.chooser.phase(), ShareChooser::Phase::kDecided);
  const uint64_t first = d.chooser.decision()->at_ns;
  d.jobs.push_back({3, 1.0, 0, std::nullopt});
  d.pack = d.chooser.Tick(d.clock.NowNs(), d.jobs, true);
  EXPECT_EQ(d.chooser.phase(), ShareChooser::Phase::kSlice);
  d.jobs.pop_back();
  d.Run(3000);
  ASSERT_EQ(d.chooser.phase(), ShareChooser::Phase::kDecided);
  EXPECT_GT(d.chooser.decision()->at_ns, first);
  d.jobs.pop_back();  // alone: nothing to share
  EXPECT_FALSE(d.chooser.Tick(d.clock.NowNs(), d.jobs, true));
  EXPECT_EQ(d.chooser.phase(), ShareChooser::Phase::kIdle);
  // Periodic re-check.
  AutoDevice e;
  e.Run(3000);
  const uint64_t at = e.chooser.decision()->at_ns;
  e.clock.Advance(ShareChooser::kRecheckNs);
  e.chooser.Tick(e.clock.NowNs(), e.jobs, true);
  EXPECT_EQ(e.chooser.phase(), ShareChooser::Phase::kSlice);
  e.Run(3000);
  EXPECT_GT(e.chooser.decision()->at_ns, at);
}

TEST(ShareChooserTest, SlicesWithoutMeasuringForWeightsAndMemory) {
  AutoDevice d;
  d.jobs[1].weight = 2.0;
  EXPECT_FALSE(d.chooser.Tick(d.clock.NowNs(), d.jobs, true));
  EXPECT_EQ(d.chooser.decision()->reason, "weights differ");
  AutoDevice e;
  EXPECT_FALSE(e.chooser.Tick(e.clock.NowNs(), e.jobs, false));
  EXPECT_EQ(e.chooser.decision()->reason, "memory does not fit");
  EXPECT_FALSE(e.chooser.decision()->pack_rate);
}

TEST(ShareChooserTest, EstimatesAnUnknownAloneTimeFromTheSlicedWindow) {
  AutoDevice d;
  d.jobs[0].alone_ns.reset();
  d.jobs[1].alone_ns.reset();
  d.Run(3000);
  ASSERT_EQ(d.chooser.phase(), ShareChooser::Phase::kDecided);
  const ShareDecision& dec = *d.chooser.decision();
  EXPECT_TRUE(dec.alone_estimated);
  EXPECT_NEAR(*dec.slice_rate, 1.0, 1e-9);  // by construction
  EXPECT_NEAR(*dec.pack_rate, (8.0 / 5 + 4.0 / 2) / 2, 0.2);
  EXPECT_EQ(dec.chosen, ShareMode::kPack);
}

}  // namespace
}  // namespace gandiva::controller
