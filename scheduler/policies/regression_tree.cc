// CART: greedy binary splits that most reduce the squared error, grown depth
// first. Categorical features use the classic exact trick for regression:
// ordering the categories by their mean target makes the best two-set
// partition one of the prefixes of that order (Breiman et al., 1984).
#include "gandiva/scheduler/regression_tree.h"

#include <algorithm>
#include <map>
#include <utility>

namespace gandiva::sched {
namespace {

struct Split {
  double gain = 0;
  int feature = -1;
  double threshold = 0;
  std::vector<int> left_ids, right_ids;
};

// SSE reduction of splitting (sum, n) into (sl, nl) and the rest.
double Gain(double sum, double n, double sl, double nl) {
  double sr = sum - sl, nr = n - nl;
  return sl * sl / nl + sr * sr / nr - sum * sum / n;
}

void BestNumericSplit(int f, const std::vector<std::vector<double>>& x,
                      const std::vector<double>& y, std::vector<int> rows, double sum, int min_leaf,
                      Split* best) {
  // Ties in value broken by row index so the order, and the tree, is fixed.
  std::sort(rows.begin(), rows.end(),
            [&](int a, int b) { return x[a][f] != x[b][f] ? x[a][f] < x[b][f] : a < b; });
  const double n = static_cast<double>(rows.size());
  double sl = 0;
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    sl += y[rows[i]];
    int nl = static_cast<int>(i + 1);
    double here = x[rows[i]][f], next = x[rows[i + 1]][f];
    if (nl < min_leaf || static_cast<int>(rows.size()) - nl < min_leaf || here == next) continue;
    double g = Gain(sum, n, sl, nl);
    if (g > best->gain) {
      best->gain = g;
      best->feature = f;
      best->threshold = here + (next - here) / 2;
      best->left_ids.clear();
      best->right_ids.clear();
    }
  }
}

void BestCategoricalSplit(int f, const std::vector<std::vector<double>>& x,
                          const std::vector<double>& y, const std::vector<int>& rows, double sum,
                          int min_leaf, Split* best) {
  std::map<int, std::pair<double, int>> by_id;  // id -> (sum, count); ordered by id
  for (int r : rows) {
    auto& s = by_id[static_cast<int>(x[r][f])];
    s.first += y[r];
    ++s.second;
  }
  if (by_id.size() < 2) return;
  struct Cat {
    double mean;
    int id;
    double sum;
    int count;
  };
  std::vector<Cat> cats;
  for (const auto& [id, s] : by_id) cats.push_back({s.first / s.second, id, s.first, s.second});
  std::sort(cats.begin(), cats.end(), [](const Cat& a, const Cat& b) {
    return a.mean != b.mean ? a.mean < b.mean : a.id < b.id;
  });
  const double n = static_cast<double>(rows.size());
  double sl = 0;
  int nl = 0;
  for (size_t k = 0; k + 1 < cats.size(); ++k) {
    sl += cats[k].sum;
    nl += cats[k].count;
    if (nl < min_leaf || static_cast<int>(rows.size()) - nl < min_leaf) continue;
    double g = Gain(sum, n, sl, nl);
    if (g > best->gain) {
      best->gain = g;
      best->feature = f;
      best->threshold = 0;
      best->left_ids.clear();
      best->right_ids.clear();
      for (size_t i = 0; i < cats.size(); ++i)
        (i <= k ? best->left_ids : best->right_ids).push_back(cats[i].id);
      std::sort(best->left_ids.begin(), best->left_ids.end());
      std::sort(best->right_ids.begin(), best->right_ids.end());
    }
  }
}

bool Contains(const std::vector<int>& sorted, int id) {
  return std::binary_search(sorted.begin(), sorted.end(), id);
}

}  // namespace

StatusOr<RegressionTree> RegressionTree::Fit(const std::vector<FeatureKind>& kinds,
                                             const std::vector<std::vector<double>>& x,
                                             const std::vector<double>& y,
                                             const TreeOptions& options) {
  if (x.empty() || x.size() != y.size())
    return InvalidArgument("regression tree: need as many targets as rows, and at least one");
  for (const auto& row : x)
    if (row.size() != kinds.size())
      return InvalidArgument("regression tree: every row needs one value per feature");
  RegressionTree tree;
  tree.options_ = options;
  tree.options_.min_leaf = std::max(1, options.min_leaf);
  tree.feature_kinds_ = kinds;
  tree.kinds_ = &kinds;
  tree.x_ = &x;
  std::vector<int> rows(x.size());
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<int>(i);
  tree.Grow(y, rows, 0);
  tree.kinds_ = nullptr;
  tree.x_ = nullptr;
  return tree;
}

int RegressionTree::Grow(const std::vector<double>& y, std::vector<int>& rows, int depth) {
  double sum = 0;
  for (int r : rows) sum += y[r];
  int index = static_cast<int>(nodes_.size());
  nodes_.push_back({});
  nodes_[index].mean = sum / static_cast<double>(rows.size());
  if (depth >= options_.max_depth || static_cast<int>(rows.size()) < 2 * options_.min_leaf)
    return index;

  Split best;
  best.gain = options_.min_gain;
  for (int f = 0; f < static_cast<int>(kinds_->size()); ++f) {
    if ((*kinds_)[f] == FeatureKind::kNumeric)
      BestNumericSplit(f, *x_, y, rows, sum, options_.min_leaf, &best);
    else
      BestCategoricalSplit(f, *x_, y, rows, sum, options_.min_leaf, &best);
  }
  if (best.feature < 0) return index;

  std::vector<int> left, right;
  for (int r : rows) {
    double v = (*x_)[r][best.feature];
    bool goes_left = (*kinds_)[best.feature] == FeatureKind::kNumeric
                         ? v <= best.threshold
                         : Contains(best.left_ids, static_cast<int>(v));
    (goes_left ? left : right).push_back(r);
  }
  rows.clear();
  rows.shrink_to_fit();  // the children's copies replace this one
  nodes_[index].feature = best.feature;
  nodes_[index].threshold = best.threshold;
  nodes_[index].left_ids = std::move(best.left_ids);
  nodes_[index].right_ids = std::move(best.right_ids);
  int l = Grow(y, left, depth + 1);
  int r = Grow(y, right, depth + 1);
  nodes_[index].left = l;  // nodes_ may have moved: index, not a reference
  nodes_[index].right = r;
  return index;
}

double RegressionTree::Predict(const std::vector<double>& x) const {
  if (nodes_.empty()) return 0;
  int i = 0;
  while (nodes_[i].feature >= 0) {
    const Node& node = nodes_[i];
    double v = node.feature < static_cast<int>(x.size()) ? x[node.feature] : 0;
    if (feature_kinds_[node.feature] == FeatureKind::kNumeric) {
      i = v <= node.threshold ? node.left : node.right;
    } else {
      int id = static_cast<int>(v);
      if (Contains(node.left_ids, id))
        i = node.left;
      else if (Contains(node.right_ids, id))
        i = node.right;
      else
        return node.mean;  // never seen here: the split says nothing about it
    }
  }
  return nodes_[i].mean;
}

int RegressionTree::depth() const {
  // Nodes are stored parent before children; depth by one forward pass.
  std::vector<int> d(nodes_.size(), 0);
  int deepest = 0;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    deepest = std::max(deepest, d[i]);
    if (nodes_[i].feature >= 0) d[nodes_[i].left] = d[nodes_[i].right] = d[i] + 1;
  }
  return deepest;
}

}  // namespace gandiva::sched
