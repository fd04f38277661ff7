// Job throughput alone and packed in pairs, from the measured co-location table
// (gavel_simulation_throughputs.json). The simulator's ground truth for speeds;
// policies learn it only by measuring (except memory fit, which is declared).
#ifndef GANDIVA_SCHED_PERF_MODEL_H_
#define GANDIVA_SCHED_PERF_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::sched {

class PerfModel {
 public:
  // The table's GPU classes, in column order.
  static constexpr int kNumClasses = 3;                  // k80, p100, v100
  static int ClassIndex(const std::string& perf_class);  // -1 if unknown

  // Parses the JSON table. Errors: not_found (file), data_loss (malformed).
  static StatusOr<PerfModel> Load(const std::string& path);
  // A model with no measurements: every job runs at speed 1 and packing is
  // neutral (each packed job at 0.5). Used when no table is given.
  static PerfModel Neutral();

  // Model names ("ResNet-50 (batch size 32)"); a job type is an index here.
  const std::vector<std::string>& type_names() const { return names_; }
  int FindType(const std::string& name) const;  // -1 if absent

  // Deterministic job type for a job of n GPUs: a hash of (seed, job id) over
  // the types that have a measurement for n's size bucket.
  int AssignType(uint64_t seed, int64_t job_id, int num_gpus) const;

  // Steps/s alone, or 0 when not measured.
  double Alone(int cls, int type, int num_gpus) const;
  // Speed of `type` packed with `partner` on the same GPUs, relative to alone
  // (1 = no slowdown). 0 means the pair does not fit in memory.
  double PackedFactor(int cls, int type, int partner, int num_gpus) const;
  // Whether the table measured `type` packed with `partner` (and `type` alone).
  bool PairMeasured(int cls, int type, int partner, int num_gpus) const;
  // Speed of `type` on class `cls` relative to class `ref_cls` (1 if unmeasured).
  double ClassSpeed(int cls, int ref_cls, int type, int num_gpus) const;
  // Throughput at m GPUs relative to n GPUs, capped at linear; 1 if unmeasured.
  double ScaleFactor(int cls, int type, int from_gpus, int to_gpus) const;

  static int Bucket(int num_gpus);  // 1,2,3-4,5+ -> 0,1,2,3

 private:
  double& AloneRef(int cls, int type, int b) {
    return alone_[(cls * 4 + b) * names_.size() + type];
  }
  size_t PairIndex(int cls, int b, int type, int partner) const {
    return ((static_cast<size_t>(cls) * 4 + b) * names_.size() + type) * names_.size() + partner;
  }

  bool neutral_ = false;
  std::vector<std::string> names_;
  std::vector<double> alone_;  // [cls][bucket][type]
  std::vector<float> packed_;  // [cls][bucket][type][partner]: my steps/s packed
  std::vector<std::vector<int>> types_by_bucket_;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_PERF_MODEL_H_
