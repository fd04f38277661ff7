// The pack predictor: nearest measured pairs in solo-profile space, either
// order; and its evaluation on the real co-location table.
#include "gandiva/scheduler/pack_prediction.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace gandiva::sched {
namespace {

TEST(PackPredictorTest, NothingKnownMeansTry) {
  PackPredictor p;
  EXPECT_FALSE(p.PredictCombined({0.1, 2}, {0.2, 3}).has_value());
  EXPECT_TRUE(p.WorthTrying({0.1, 2}, {0.2, 3}));
}

// Two regimes: fast, little-speed-up jobs pack well together; slow,
// compute-bound ones do not. A new pair is judged by the regime it is near.
TEST(PackPredictorTest, ANewPairIsJudgedByTheMeasuredPairsNearIt) {
  PackPredictor p(3);
  for (double jitter : {0.9, 1.0, 1.1}) {
    p.Observe({0.01 * jitter, 1.2}, {0.012 * jitter, 1.3}, 1.6);
    p.Observe({0.5 * jitter, 6.0}, {0.4 * jitter, 5.5}, 0.8);
  }
  EXPECT_NEAR(*p.PredictCombined({0.011, 1.25}, {0.011, 1.25}), 1.6, 1e-9);
  EXPECT_TRUE(p.WorthTrying({0.011, 1.25}, {0.011, 1.25}));
  EXPECT_NEAR(*p.PredictCombined({0.45, 5.8}, {0.45, 5.8}), 0.8, 1e-9);
  EXPECT_FALSE(p.WorthTrying({0.45, 5.8}, {0.45, 5.8}));
}

TEST(PackPredictorTest, APairIsTheSameEitherWayRound) {
  PackPredictor p(1);
  p.Observe({0.01, 1.2}, {0.5, 6.0}, 1.3);
  p.Observe({0.01, 1.2}, {0.01, 1.2}, 0.7);
  EXPECT_NEAR(*p.PredictCombined({0.5, 6.0}, {0.01, 1.2}), 1.3, 1e-9);
}

TEST(PackPredictionEvaluationTest, OnTheCoLocationTableEveryPairIsCountedOnce) {
  const std::string table =
      std::string(GANDIVA_SHARED_DATA_DIR) + "/colocation/gavel_simulation_throughputs.json";
  if (!std::filesystem::exists(table)) GTEST_SKIP() << "no " << table;
  auto model = PerfModel::Load(table);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto rows = EvaluatePackPrediction(*model, 7);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  for (const auto& r : *rows) {
    EXPECT_GT(r.pairs, 100) << r.gpu_class;
    EXPECT_EQ(r.true_pos + r.false_pos + r.true_neg + r.false_neg, r.pairs);
    EXPECT_EQ(r.true_pos + r.false_neg, r.pack_well);
    EXPECT_NEAR(r.always_try_accuracy, static_cast<double>(r.pack_well) / r.pairs, 1e-12);
    EXPECT_GT(r.accuracy, 0.5) << r.gpu_class;
  }
}

TEST(PackPredictionEvaluationTest, ANeutralModelHasNoMeasuredPairs) {
  auto rows = EvaluatePackPrediction(PerfModel::Neutral(), 7);
  EXPECT_FALSE(rows.ok());
}

}  // namespace
}  // namespace gandiva::sched
