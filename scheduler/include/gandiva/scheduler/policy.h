// Policy: decides where and when jobs run, from the cluster's state and each
// job's measured progress. No wall clock, no I/O, no randomness except a
// seeded generator: the same trace and seed give the same decisions.
#ifndef GANDIVA_SCHED_POLICY_H_
#define GANDIVA_SCHED_POLICY_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gandiva/scheduler/cluster.h"
#include "gandiva/status.h"

namespace gandiva::sched {

// A duration predicted for a job when it was queued, beside the run time it
// then had; policies that predict keep one per finished job.
struct PredictionRecord {
  double predicted = 0;  // seconds
  double actual = 0;     // seconds the job ran (what the predictor learns from)
};

// A pack trial's outcome: the two jobs' measured rates (against alone) after
// an interval packed, and whether the pair was kept.
struct PackTrialRecord {
  int guest_type = -1, resident_type = -1;  // JobInfo::job_type
  int gpus = 1;
  double guest_rate = 0, resident_rate = 0;
  bool kept = false;
};

// Counters a policy keeps about its own decisions (the cluster counts the rest).
struct PolicyStats {
  int64_t packs = 0;        // groups switched to (or started in) pack mode
  int64_t unpacks = 0;      // pack trials undone because they measured worse
  int64_t time_slices = 0;  // jobs started onto busy GPUs in slice mode
  int64_t grows = 0;
  int64_t shrinks = 0;
  std::vector<PredictionRecord> predictions;  // sjf-predicted, sjf-tree
  std::vector<PackTrialRecord> pack_trials;   // gandiva: one per pair of types measured
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual const char* name() const = 0;
  // Events, delivered in time order before the Schedule call for that instant.
  virtual void OnArrival(Cluster& cluster, JobId job) = 0;
  virtual void OnFinish(Cluster& cluster, JobId job) = 0;
  // Called once after every instant at which something happened (arrivals,
  // finishes, stall ends, wake-ups). The policy acts on the cluster here.
  virtual void Schedule(Cluster& cluster) = 0;
  const PolicyStats& stats() const { return stats_; }

 protected:
  PolicyStats stats_;
};

// Locality of gang placement.
enum class Locality {
  kBestEffort,  // consolidated if possible, else spread at once
  kStrict,      // wait for a consolidated placement
  kRelaxed,     // Philly: wait up to locality_delay, then accept spread
};

struct PolicyOptions {
  uint64_t seed = 1;
  Locality locality = Locality::kBestEffort;
  double locality_delay = 300;  // seconds, kRelaxed only
  // Tiresias 2D-LAS: attained-service queue thresholds, GPU-seconds.
  std::vector<double> las_thresholds = {3600, 36000};
  // Tiresias starvation guard: a pending job waiting longer than this many times
  // its executed time goes back to the top queue (0 = off).
  double las_starve_factor = 0;
  // Gandiva. Its priority is attained service like LAS (las_thresholds are its
  // levels too): without knowing durations, the jobs that have run least are
  // the likeliest to finish soon, which is what average JCT rewards.
  double gandiva_interval = 60;  // seconds between introspection rounds (measuring a trial)
  // Jobs sharing one GPU set. 2 lets a waiting job be packed onto a running
  // one; 1 turns packing off.
  int gandiva_max_share = 2;
  // Keep a pack only if the pair's summed measured rate (1 = one job alone)
  // beats this: below it, running one of them alone is about as good and
  // avoids slowing the running job down.
  double pack_gain = 1.05;
  // ...and only if the running job keeps at least this much of its speed: a
  // waiting job ranks below the running one and should not hold it back much.
  double pack_min_partner_rate = 0.5;
  // Starvation guard: a waiting job that has waited longer than this many
  // times the time it has run goes back to the top level, bounding how long
  // newcomers can keep a long job waiting (finish-time fairness). 0 = off.
  double gandiva_starve_factor = 0;
  // A gang waits this long (seconds) for GPUs on the fewest machines, made by
  // moving single-GPU jobs or suspending lower-level ones, before it accepts
  // GPUs spread over more machines: a spread gang runs every step slower
  // (--spread-factor) for as long as it runs, and big gangs run for days, so
  // waiting hours for locality pays; the delay still bounds the wait.
  double gandiva_spread_delay = 43200;
  double grow_gain = 1.2;  // keep a grow only if the rate rises by this factor
  bool gandiva_grow = true;
  bool gandiva_migrate = true;
  // Reserve-and-pack: jobs with at least this many GPUs go to high-end machines.
  int reserve_min_gpus = 4;
};

// Names: fifo, srtf, las, gandiva, reserve-pack, sjf-predicted, sjf-tree, philly.
// Errors: invalid_argument for an unknown name.
StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name, const PolicyOptions& options);
const std::vector<std::string>& PolicyNames();

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_POLICY_H_
