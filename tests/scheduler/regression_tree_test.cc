// The CART tree and the tree duration predictor: the tree recovers a known
// piecewise rule, answers an unseen category with the mean of the node that
// cannot place it, and the same data always give the same tree.
#include "gandiva/scheduler/regression_tree.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "gandiva/scheduler/tree_duration_predictor.h"

namespace gandiva::sched {
namespace {

// A fixed pseudo-random stream (no <random>: the distributions differ between
// standard libraries, and the test must not).
class Lcg {
 public:
  explicit Lcg(uint64_t seed) : s_(seed) {}
  double Uniform() {
    s_ = s_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(s_ >> 11) / static_cast<double>(1ULL << 53);
  }
  int Below(int n) { return static_cast<int>(Uniform() * n); }

 private:
  uint64_t s_;
};

const std::vector<FeatureKind> kKinds = {FeatureKind::kCategorical, FeatureKind::kNumeric,
                                         FeatureKind::kNumeric};

// y = 5 for categories {0, 2}; else 1 if gpus <= 4, 3 above; feature 2 noise.
double Rule(int category, double gpus) {
  if (category == 0 || category == 2) return 5;
  return gpus <= 4 ? 1 : 3;
}

void Synthetic(uint64_t seed, int n, std::vector<std::vector<double>>* x, std::vector<double>* y,
               double noise) {
  Lcg rng(seed);
  for (int i = 0; i < n; ++i) {
    int category = rng.Below(4);
    double gpus = 1 + rng.Below(8);
    double junk = rng.Uniform();
    x->push_back({static_cast<double>(category), gpus, junk});
    y->push_back(Rule(category, gpus) + noise * (rng.Uniform() - 0.5));
  }
}

TEST(RegressionTreeTest, RecoversAPiecewiseRule) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  Synthetic(7, 2000, &x, &y, /*noise=*/0.2);
  auto tree = RegressionTree::Fit(kKinds, x, y, {/*max_depth=*/4, /*min_leaf=*/20, 1e-6});
  ASSERT_TRUE(tree.ok()) << tree.status().message();
  for (int category = 0; category < 4; ++category)
    for (int gpus = 1; gpus <= 8; ++gpus)
      for (double junk : {0.1, 0.9})
        EXPECT_NEAR(tree->Predict({static_cast<double>(category), static_cast<double>(gpus), junk}),
                    Rule(category, gpus), 0.05)
            << "category " << category << " gpus " << gpus;
}

TEST(RegressionTreeTest, StopsAtMinLeafAndMaxDepth) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  Synthetic(3, 500, &x, &y, 0.5);
  auto stump = RegressionTree::Fit(kKinds, x, y, {/*max_depth=*/1, /*min_leaf=*/1, 0});
  ASSERT_TRUE(stump.ok());
  EXPECT_EQ(stump->num_nodes(), 3);
  EXPECT_EQ(stump->depth(), 1);
  auto leaf = RegressionTree::Fit(kKinds, x, y, {/*max_depth=*/8, /*min_leaf=*/400, 0});
  ASSERT_TRUE(leaf.ok());
  EXPECT_EQ(leaf->num_nodes(), 1);  // no split leaves 400 on both sides of 500
}

TEST(RegressionTreeTest, UnseenCategoryGetsTheMeanOfTheNodeThatCannotPlaceIt) {
  // Category 0 -> 10, category 1 -> 20, equal counts: the root mean is 15.
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (int i = 0; i < 100; ++i) {
    x.push_back({static_cast<double>(i % 2)});
    y.push_back(i % 2 ? 20 : 10);
  }
  auto tree = RegressionTree::Fit({FeatureKind::kCategorical}, x, y, {4, 5, 1e-9});
  ASSERT_TRUE(tree.ok());
  EXPECT_DOUBLE_EQ(tree->Predict({0}), 10);
  EXPECT_DOUBLE_EQ(tree->Predict({1}), 20);
  EXPECT_DOUBLE_EQ(tree->Predict({7}), 15);  // unseen: root mean, not either side

  // Deeper: the root splits on GPUs, the unseen category stops one level down
  // at that child's mean.
  x.clear();
  y.clear();
  for (int i = 0; i < 200; ++i) {
    double gpus = i < 100 ? 1 : 8;
    int category = i % 2;
    x.push_back({static_cast<double>(category), gpus});
    y.push_back(gpus == 1 ? (category ? 2 : 0) : 100);
  }
  tree =
      RegressionTree::Fit({FeatureKind::kCategorical, FeatureKind::kNumeric}, x, y, {4, 5, 1e-9});
  ASSERT_TRUE(tree.ok());
  EXPECT_DOUBLE_EQ(tree->Predict({9, 1}), 1);    // mean of the 1-GPU child
  EXPECT_DOUBLE_EQ(tree->Predict({9, 8}), 100);  // the 8-GPU side never split on it
}

TEST(RegressionTreeTest, SameDataSameTree) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  Synthetic(11, 3000, &x, &y, 2.0);  // noisy: many near-tied splits
  auto a = RegressionTree::Fit(kKinds, x, y, {8, 10, 0});
  auto b = RegressionTree::Fit(kKinds, x, y, {8, 10, 0});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->num_nodes(), b->num_nodes());
  Lcg rng(99);
  for (int i = 0; i < 500; ++i) {
    std::vector<double> q = {static_cast<double>(rng.Below(5)), 1.0 + rng.Below(9), rng.Uniform()};
    EXPECT_EQ(a->Predict(q), b->Predict(q));  // bit for bit
  }
}

TEST(RegressionTreeTest, RejectsEmptyAndRaggedSamples) {
  EXPECT_EQ(RegressionTree::Fit(kKinds, {}, {}, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RegressionTree::Fit(kKinds, {{0, 1}}, {1}, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RegressionTree::Fit(kKinds, {{0, 1, 2}}, {1, 2}, {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(TreeDurationPredictorTest, LearnsPerVcDurationsOnlineAndRefits) {
  TreePredictorOptions options;
  options.retrain_every = 50;
  options.min_train = 100;
  options.tree = {6, 5, 1e-9};
  TreeDurationPredictor p(options);
  JobId next = 0;
  auto job = [&](int vc, int gpus) {
    JobInfo j;
    j.id = next++;
    j.vc = vc;
    j.num_gpus = gpus;
    return j;
  };
  // VC 1 runs 60 s jobs, VC 2 runs 6 h jobs, at 1 and 8 GPUs.
  for (int i = 0; i < 200; ++i) {
    JobInfo j = job(1 + i % 2, i % 3 ? 1 : 8);
    p.PredictAtSubmit(j);
    p.Observe(j, j.vc == 1 ? 60 : 21600);
  }
  EXPECT_GE(p.fits(), 2);
  EXPECT_NEAR(p.PredictAtSubmit(job(1, 1)), 60, 1);
  EXPECT_NEAR(p.PredictAtSubmit(job(2, 8)), 21600, 300);
}

}  // namespace
}  // namespace gandiva::sched
