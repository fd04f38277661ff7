// Features of a job at submission and the online refit schedule of the tree.
#include "gandiva/scheduler/tree_duration_predictor.h"

#include <cmath>

namespace gandiva::sched {
namespace {

constexpr int kRecent = 8;  // last run times kept per group

// Features, in this order. Philly rows carry only VC and GPUs; user and job
// type are kept for traces that have them (Philly's type is drawn from the
// seed, so it carries no information there and the tree should ignore it).
const std::vector<FeatureKind> kKinds = {
    FeatureKind::kCategorical,  // 0 VC
    FeatureKind::kCategorical,  // 1 user
    FeatureKind::kNumeric,      // 2 GPUs
    FeatureKind::kCategorical,  // 3 job type
    FeatureKind::kNumeric,      // 4 log back-off group mean (all history)
    FeatureKind::kNumeric,      // 5 log last run time of the (VC, user, GPUs) group; -1 none
    FeatureKind::kNumeric,      // 6 mean log of its last kRecent run times; -1 none
    FeatureKind::kNumeric,      // 7 how many of those there are (0..kRecent)
};

uint64_t GroupKey(const JobInfo& j) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(j.vc)) << 40) ^
         (static_cast<uint64_t>(static_cast<uint32_t>(j.user)) << 12) ^
         static_cast<uint64_t>(static_cast<uint32_t>(j.num_gpus));
}

double Log(double seconds) { return std::log(std::max(seconds, 1.0)); }

}  // namespace

TreeDurationPredictor::TreeDurationPredictor(TreePredictorOptions options) : options_(options) {}

std::vector<double> TreeDurationPredictor::Features(const JobInfo& job) const {
  std::vector<double> x = {static_cast<double>(job.vc),
                           static_cast<double>(job.user),
                           static_cast<double>(job.num_gpus),
                           static_cast<double>(job.job_type),
                           Log(backoff_.Predict(job)),
                           -1,
                           -1,
                           0};
  auto it = recent_.find(GroupKey(job));
  if (it != recent_.end() && !it->second.empty()) {
    const auto& runs = it->second;
    x[5] = runs.back();
    double sum = 0;
    for (double l : runs) sum += l;
    x[6] = sum / static_cast<double>(runs.size());
    x[7] = static_cast<double>(runs.size());
  }
  return x;
}

double TreeDurationPredictor::PredictAtSubmit(const JobInfo& job) {
  std::vector<double> x = Features(job);
  double prediction = tree_ ? std::exp(tree_->Predict(x)) : backoff_.Predict(job);
  pending_features_[job.id] = std::move(x);
  return prediction;
}

void TreeDurationPredictor::Observe(const JobInfo& job, double seconds) {
  double l = Log(seconds);
  auto it = pending_features_.find(job.id);
  // A job never predicted (it arrived before the predictor existed) gets
  // today's features: the best approximation of what was known.
  std::vector<double> x = it != pending_features_.end() ? std::move(it->second) : Features(job);
  if (it != pending_features_.end()) pending_features_.erase(it);
  window_.push_back({std::move(x), l});
  if (static_cast<int>(window_.size()) > options_.window) window_.pop_front();

  backoff_.Observe(job, seconds);
  auto& runs = recent_[GroupKey(job)];
  runs.push_back(l);
  if (static_cast<int>(runs.size()) > kRecent) runs.pop_front();

  ++since_fit_;
  bool first_fit_due = !tree_ && static_cast<int>(window_.size()) >= options_.min_train;
  if (first_fit_due || (tree_ && since_fit_ >= options_.retrain_every)) Refit();
}

void TreeDurationPredictor::Refit() {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  x.reserve(window_.size());
  y.reserve(window_.size());
  for (const auto& s : window_) {
    x.push_back(s.x);
    y.push_back(s.log_seconds);
  }
  auto fitted = RegressionTree::Fit(kKinds, x, y, options_.tree);
  if (fitted.ok()) {
    tree_ = std::move(*fitted);
    ++fits_;
  }
  since_fit_ = 0;
}

}  // namespace gandiva::sched
