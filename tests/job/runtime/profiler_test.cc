// The iteration profiler: ring, EWMA, percentiles.
#include "gandiva/contract/profiler.h"

#include <gtest/gtest.h>

#include <memory>

#include "gandiva/common/units.h"

namespace gandiva::runtime {
namespace {

class ProfilerTest : public ::testing::Test {
 protected:
  std::unique_ptr<ControlBlock> cb_ = [] {
    auto cb = std::make_unique<ControlBlock>();
    InitControlBlock(cb.get(), 1, 0, "t");
    return cb;
  }();
  ProfileRing* ring() { return &cb_->profile; }
};

TEST_F(ProfilerTest, EmptyProfileReadsZero) {
  IterationStats s = ReadIterationStats(*ring());
  EXPECT_EQ(s.iterations, 0u);
  EXPECT_EQ(s.p99_ms, 0);
}

TEST_F(ProfilerTest, MeanPercentilesAndRate) {
  // 98 iterations of 10 ms and two of 100 ms.
  for (int i = 0; i < 98; ++i) RecordIteration(ring(), 10 * kMs, i);
  RecordIteration(ring(), 100 * kMs, 99);
  RecordIteration(ring(), 100 * kMs, 100);
  IterationStats s = ReadIterationStats(*ring());
  EXPECT_EQ(s.iterations, 100u);
  EXPECT_NEAR(s.mean_ms, 11.8, 1e-9);
  EXPECT_NEAR(s.p50_ms, 10.0, 1e-9);
  EXPECT_NEAR(s.p99_ms, 100.0, 1e-9);  // nearest rank: the 99th of 100 sorted samples
  EXPECT_EQ(s.last_boundary_ns, 100u);
}

TEST_F(ProfilerTest, EwmaSeedsWithFirstSampleAndMovesByAnEighth) {
  RecordIteration(ring(), 80 * kMs, 1);
  EXPECT_NEAR(ReadIterationStats(*ring()).ewma_ms, 80.0, 1e-9);
  RecordIteration(ring(), 0, 2);
  EXPECT_NEAR(ReadIterationStats(*ring()).ewma_ms, 70.0, 1e-9);
  EXPECT_NEAR(ReadIterationStats(*ring()).iterations_per_s, 1000.0 / 70.0, 1e-9);
}

TEST_F(ProfilerTest, PercentilesCoverOnlyTheLastRingfulOfIterations) {
  // Old slow iterations fall out of the window; the mean still counts them.
  for (size_t i = 0; i < kProfileRingSize; ++i) RecordIteration(ring(), 50 * kMs, i);
  for (size_t i = 0; i < kProfileRingSize; ++i) RecordIteration(ring(), 5 * kMs, i);
  IterationStats s = ReadIterationStats(*ring());
  EXPECT_EQ(s.iterations, 2 * kProfileRingSize);
  EXPECT_NEAR(s.p99_ms, 5.0, 1e-9);
  EXPECT_NEAR(s.mean_ms, 27.5, 1e-9);
}

}  // namespace
}  // namespace gandiva::runtime
