// Cluster: carries out a Policy's decisions and reports what it measures.
// SimCluster implements it over a trace; a live one will talk to gandivad.
//
// Threading: single-threaded; a policy is called only from inside the cluster's
// event loop and acts on it synchronously.
#ifndef GANDIVA_SCHED_CLUSTER_H_
#define GANDIVA_SCHED_CLUSTER_H_

#include <optional>
#include <span>
#include <vector>

#include "gandiva/scheduler/free_index.h"
#include "gandiva/scheduler/topology.h"
#include "gandiva/scheduler/types.h"
#include "gandiva/status.h"

namespace gandiva::sched {

class PerfModel;

// Jobs that occupy the same GPU set share it; the group is the unit of sharing.
// A GPU belongs to at most one group; a job to at most one group.
struct GroupView {
  std::span<const GpuId> gpus;
  std::span<const JobId> members;
  ShareMode mode = ShareMode::kSlice;
};

class Cluster {
 public:
  virtual ~Cluster() = default;

  // ---- Time, topology, jobs (read-only) ----
  // The injected clock: simulated seconds, or the live scheduler's clock.
  virtual double Now() const = 0;
  virtual const Topology& topology() const = 0;
  virtual const FreeIndex& free_gpus() const = 0;
  virtual const JobInfo& info(JobId job) const = 0;
  virtual JobState state(JobId job) const = 0;
  virtual std::span<const GpuId> gpus(JobId job) const = 0;  // empty unless running
  virtual int group_of(JobId job) const = 0;                 // kNoGroup unless running
  virtual GroupView group(int group) const = 0;
  virtual int group_of_gpu(GpuId gpu) const = 0;  // kNoGroup if free

  // ---- Measured progress (what gandivad's profiler reports) ----
  // GPU-seconds of service received: GPUs x time actually executing.
  virtual double Attained(JobId job) const = 0;
  // Seconds the job has held GPUs, including stalls and time-slice waits.
  virtual double RunTime(JobId job) const = 0;
  // Current progress rate relative to running alone on consolidated GPUs of
  // its kind (1.0); 0 while stalled on suspend/resume or migration.
  virtual double MeasuredRate(JobId job) const = 0;
  // Whether MeasuredRate is a measurement of the job's current run rather
  // than an assumption: a live job's speed is known only once its node has
  // timed some of its iterations (until then MeasuredRate takes it as 1.0).
  // Decisions that compare speeds (does growing pay?) wait for it.
  virtual bool RateMeasured(JobId job) const = 0;
  // When the job last became pending (submit or suspend).
  virtual double PendingSince(JobId job) const = 0;
  // Declared knowledge a real scheduler also has: whether two job types fit
  // in GPU memory together (not their speed).
  virtual bool PairFitsMemory(JobId a, JobId b) const = 0;
  // Oracle remaining seconds alone; only a simulator knows it (SRTF baseline).
  virtual std::optional<double> OracleRemaining(JobId job) const = 0;

  // ---- Actions ----
  // Starts a pending job on `gpus` (exactly num_gpus of them). Either all are
  // free (a new group), or they are exactly one existing group's GPUs (join it;
  // the group keeps its mode). Errors: failed_precondition, invalid_argument.
  virtual Status Start(JobId job, std::span<const GpuId> gpus) = 0;
  // Preempts a running job back to pending, parked or stopped (it pays that
  // one's cost when it starts again). kStop needs info(job).restartable.
  virtual Status Suspend(JobId job, Preemption how) = 0;
  // Moves a running job (leaving its group) to free GPUs; it stalls for the
  // migration cost. Same size only.
  virtual Status Migrate(JobId job, std::span<const GpuId> gpus) = 0;
  // Grows or shrinks a running job that is alone in its group to `gpus`
  // (which must be its own GPUs plus free ones, or a subset of its own).
  virtual Status Resize(JobId job, std::span<const GpuId> gpus) = 0;
  virtual Status SetShareMode(int group, ShareMode mode) = 0;
  // Asks for a Policy::Schedule call at time t (>= Now()).
  virtual void WakeAt(double t) = 0;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_CLUSTER_H_
