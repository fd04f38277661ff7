// Unit tests of the shim's iteration-period detector (pure: driven by hand here).
#include "boundary/period_detector.h"

#include <gtest/gtest.h>

#include <vector>

namespace gandiva::shim {
namespace {

// One iteration: for each segment, its launch tokens then a sync of `kind`.
// Tokens from kCopy up are copies (no kernel work), as the shim's Issue hooks feed them.
constexpr uint64_t kCopy = 0x155e00000000ull;
struct Segment {
  std::vector<uint64_t> launches;
  uint32_t kind;
};

// Feeds `iterations` copies of `loop`; returns how many syncs were boundaries.
int Feed(PeriodDetector* d, const std::vector<Segment>& loop, int iterations,
         std::vector<int>* at = nullptr) {
  int fired = 0;
  for (int it = 0; it < iterations; ++it) {
    for (size_t s = 0; s < loop.size(); ++s) {
      for (uint64_t t : loop[s].launches) d->OnLaunch(t, t >= kCopy ? 0 : 1);
      if (d->OnSync(loop[s].kind)) {
        ++fired;
        if (at) at->push_back(static_cast<int>(s));
      }
    }
  }
  return fired;
}

TEST(PeriodDetectorTest, OneSyncPerIterationCountsEveryIteration) {
  PeriodDetector d;
  Feed(&d, {{{1, 2, 3, 2, 1}, 7}}, 20);
  EXPECT_TRUE(d.locked());
  EXPECT_EQ(d.period(), 1);
  EXPECT_EQ(d.boundaries(), 20u);  // the first ones are recognised when it locks
  EXPECT_EQ(d.launches_per_period(), 5u);
  EXPECT_EQ(d.confidence_pct(), 100u);
}

TEST(PeriodDetectorTest, SeveralSyncsPerIterationOneBoundaryEach) {
  PeriodDetector d;
  // Forward+backward (heavy), a metric read-back, an optimizer step + loss read-back.
  const std::vector<Segment> loop = {{{10, 11, 12, 13, 14, 15}, 1}, {{}, 2}, {{20, 21}, 3}};
  std::vector<int> at;
  Feed(&d, loop, 12, &at);
  EXPECT_EQ(d.period(), 3);
  EXPECT_EQ(d.boundaries(), 12u);
  // The boundary is the sync that opens the period's heaviest segment: the last one.
  for (int s : at) EXPECT_EQ(s, 2);
}

TEST(PeriodDetectorTest, WarmupIsNotCounted) {
  PeriodDetector d;
  Feed(&d, {{{99, 98}, 5}, {{97}, 6}}, 1);  // start-up: different kernels
  Feed(&d, {{{1, 2, 3}, 7}}, 10);
  EXPECT_EQ(d.boundaries(), 10u);
}

TEST(PeriodDetectorTest, NeedsThreeRepeatsToLock) {
  PeriodDetector d;
  Feed(&d, {{{1, 2}, 7}, {{3}, 8}}, 2);
  EXPECT_FALSE(d.locked());
  EXPECT_EQ(d.confidence_pct(), 0u);
  Feed(&d, {{{1, 2}, 7}, {{3}, 8}}, 1);
  EXPECT_TRUE(d.locked());
}

TEST(PeriodDetectorTest, ConfidenceRampsUpAndDropsOnDisruption) {
  PeriodDetector d;
  const std::vector<Segment> loop = {{{1, 2, 3}, 7}};
  Feed(&d, loop, 3);
  EXPECT_LT(d.confidence_pct(), 100u);
  Feed(&d, loop, 10);
  EXPECT_EQ(d.confidence_pct(), 100u);
  // One odd iteration (an extra sync): that period is not clean.
  d.OnLaunch(42);
  d.OnSync(9);
  Feed(&d, loop, 2);
  EXPECT_LT(d.confidence_pct(), 100u);
  EXPECT_GT(d.confidence_pct(), 50u);
}

TEST(PeriodDetectorTest, RelocksOnANewLoopWithoutDoubleCounting) {
  PeriodDetector d;
  Feed(&d, {{{1, 2, 3}, 7}}, 10);
  EXPECT_EQ(d.boundaries(), 10u);
  Feed(&d, {{{5, 6}, 7}, {{8}, 9}}, 10);  // evaluation loop: different period
  EXPECT_TRUE(d.locked());
  EXPECT_EQ(d.period(), 2);
  EXPECT_EQ(d.boundaries(), 20u);
}

// H100, finding 5: a framework loading a model copies each weight to the device and
// waits for it (torch's .cuda(): a copy, a stream sync). ~100 identical periods of
// one copy each are no iterations: the count must be the training loop's alone.
TEST(PeriodDetectorTest, WeightCopiesAtStartupAreNoIterations) {
  PeriodDetector d;
  Feed(&d, {{{kCopy | 1}, 3}}, 100);
  EXPECT_FALSE(d.locked());
  EXPECT_EQ(d.boundaries(), 0u);
  Feed(&d, {{{1, 2, 3, 4}, 7}, {{kCopy | 2}, 5}}, 60);
  EXPECT_EQ(d.period(), 2);
  EXPECT_EQ(d.boundaries(), 60u);
}

// The same with a small initialisation kernel after every 8th copy: one kernel per
// 8 segments is still start-up, and so is any multiple of that pattern.
TEST(PeriodDetectorTest, StartupWithAKernelNowAndThenIsNoLoop) {
  PeriodDetector d;
  std::vector<Segment> startup(8, Segment{{kCopy | 1}, 3});
  startup[0].launches.insert(startup[0].launches.begin(), 99);
  Feed(&d, startup, 12);
  EXPECT_FALSE(d.locked());
  EXPECT_EQ(d.boundaries(), 0u);
  Feed(&d, {{{1, 2, 3}, 7}}, 40);
  EXPECT_EQ(d.boundaries(), 40u);
}

// A CUDA-graph training step is one launch per iteration, but a heavy one.
TEST(PeriodDetectorTest, OneGraphLaunchPerIterationIsALoop) {
  PeriodDetector d;
  for (int it = 0; it < 20; ++it) {
    d.OnLaunch(kCopy | 1, 0);  // the batch, copied in
    d.OnLaunch(0x6a, PeriodDetector::kGraphWork);
    d.OnSync(7);
  }
  EXPECT_TRUE(d.locked());
  EXPECT_EQ(d.boundaries(), 20u);
}

TEST(PeriodDetectorTest, NoPeriodNoBoundaries) {
  PeriodDetector d;
  for (uint64_t i = 0; i < 500; ++i) {
    d.OnLaunch(i * 7919);
    EXPECT_FALSE(d.OnSync(static_cast<uint32_t>(i)));
  }
  EXPECT_FALSE(d.locked());
  EXPECT_EQ(d.boundaries(), 0u);
}

TEST(PeriodDetectorTest, PhaseDoesNotDependOnWhereObservationStarts) {
  const std::vector<Segment> loop = {{{1}, 1}, {{2, 3, 4}, 2}, {{5, 6}, 3}};
  PeriodDetector a, b;
  std::vector<int> at_a, at_b;
  Feed(&a, loop, 8, &at_a);
  // b starts mid-iteration.
  b.OnLaunch(5);
  b.OnLaunch(6);
  b.OnSync(3);
  Feed(&b, loop, 8, &at_b);
  ASSERT_FALSE(at_a.empty());
  ASSERT_FALSE(at_b.empty());
  EXPECT_EQ(at_a.back(), at_b.back());
  EXPECT_EQ(at_a.back(), 0);  // the sync before the heaviest segment
}

}  // namespace
}  // namespace gandiva::shim
