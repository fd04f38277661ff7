// A CART regression tree (squared error) over numeric and categorical
// features, small enough to retrain online inside a scheduling policy.
#ifndef GANDIVA_SCHED_REGRESSION_TREE_H_
#define GANDIVA_SCHED_REGRESSION_TREE_H_

#include <vector>

#include "gandiva/status.h"

namespace gandiva::sched {

enum class FeatureKind {
  kNumeric,      // ordered: split by a threshold
  kCategorical,  // an integer id: split into two sets of ids
};

struct TreeOptions {
  int max_depth = 8;
  int min_leaf = 20;       // samples on each side of a split
  double min_gain = 1e-9;  // SSE reduction a split must bring
};

class RegressionTree {
 public:
  // Fits the tree to rows x (one value per feature; categorical values are
  // integer ids stored as doubles) and targets y. Errors: invalid_argument on
  // an empty or ragged sample. Deterministic: the same sample gives the same
  // tree (ties go to the lower feature index, then the lower threshold).
  static StatusOr<RegressionTree> Fit(const std::vector<FeatureKind>& kinds,
                                      const std::vector<std::vector<double>>& x,
                                      const std::vector<double>& y, const TreeOptions& options);

  // The mean of the leaf x falls into. A categorical value that no training
  // sample at a split carried (an unseen user, VC, ...) stops the descent
  // there: the answer is that node's mean, the best guess without it.
  double Predict(const std::vector<double>& x) const;
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  int depth() const;

 private:
  struct Node {
    double mean = 0;
    int feature = -1;                      // -1: a leaf
    double threshold = 0;                  // numeric: x <= threshold goes left
    std::vector<int> left_ids, right_ids;  // categorical, sorted
    int left = -1, right = -1;
  };
  int Grow(const std::vector<double>& y, std::vector<int>& rows, int depth);
  const std::vector<FeatureKind>* kinds_ = nullptr;  // during Fit only
  const std::vector<std::vector<double>>* x_ = nullptr;
  TreeOptions options_;
  std::vector<FeatureKind> feature_kinds_;
  std::vector<Node> nodes_;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_REGRESSION_TREE_H_
