// Predicting, before trying it, whether two jobs pack well on one device
// (issue 16, item 5), from each job's measured solo profile: its iteration
// time alone, and how much faster it runs on the fastest GPU class than on the
// slowest (a compute-bound job gains much, one limited by memory or the host
// little). gandivad measures the first for every job it runs alone; the second
// is what a cluster that has run the job on two classes knows.
//
// The predictor is the k nearest pairs already measured packed, in the space of
// the two jobs' (log) profiles, either order; a pair "packs well" when the two
// jobs' speeds packed, each relative to alone, sum above 1 (more work done than
// taking turns). EvaluatePackPrediction measures it on the co-location table,
// leaving each job type out in turn, against always trying.
#ifndef GANDIVA_SCHED_PACK_PREDICTION_H_
#define GANDIVA_SCHED_PACK_PREDICTION_H_

#include <optional>
#include <string>
#include <vector>

#include "gandiva/scheduler/perf_model.h"
#include "gandiva/status.h"

namespace gandiva::sched {

struct SoloProfile {
  double iteration_s = 0;    // one iteration alone on this device (> 0)
  double class_speedup = 1;  // speed on the fastest GPU class over the slowest (> 0)
};

class PackPredictor {
 public:
  explicit PackPredictor(int neighbours = 7) : neighbours_(neighbours) {}

  // A pair measured packed: their combined speed (sum of each one's speed
  // packed relative to alone).
  void Observe(const SoloProfile& a, const SoloProfile& b, double combined);
  // The predicted combined speed; nullopt before any observation.
  std::optional<double> PredictCombined(const SoloProfile& a, const SoloProfile& b) const;
  // Whether to try the pack: predicted above 1, or nothing known yet (try).
  bool WorthTrying(const SoloProfile& a, const SoloProfile& b) const;
  size_t observations() const { return seen_.size(); }

 private:
  struct Seen {
    double a[2], b[2];  // log iteration time, log class speedup
    double combined;
  };
  int neighbours_;
  std::vector<Seen> seen_;
};

// One GPU class of the co-location table, jobs of one GPU, leave-one-type-out.
struct PackPredictionRow {
  std::string gpu_class;
  int pairs = 0;      // measured pairs (both orders of two types count once each)
  int pack_well = 0;  // of them, combined > 1
  int true_pos = 0, false_pos = 0, true_neg = 0, false_neg = 0;
  double accuracy = 0;             // predicted right / pairs
  double always_try_accuracy = 0;  // pack_well / pairs
};

StatusOr<std::vector<PackPredictionRow>> EvaluatePackPrediction(const PerfModel& model,
                                                                int neighbours);
std::string FormatPackPredictionTable(const std::vector<PackPredictionRow>& rows, int neighbours);
std::string PackPredictionToJson(const std::vector<PackPredictionRow>& rows, int neighbours);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_PACK_PREDICTION_H_
