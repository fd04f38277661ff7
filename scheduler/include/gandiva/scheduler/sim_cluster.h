// SimCluster: a discrete-event simulation of a GPU cluster replaying a trace.
// Jobs progress as fluids: each running job has a rate (1 = alone on
// consolidated GPUs), set by locality, GPU class, time-slicing and packing;
// an event fires only when something changes, so cost grows with the number
// of jobs and decisions, never with simulated time.
#ifndef GANDIVA_SCHED_SIM_CLUSTER_H_
#define GANDIVA_SCHED_SIM_CLUSTER_H_

#include <cstdint>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "gandiva/scheduler/cluster.h"
#include "gandiva/scheduler/perf_model.h"
#include "gandiva/scheduler/policy.h"
#include "gandiva/scheduler/trace.h"

namespace gandiva::sched {

struct SimConfig {
  uint64_t seed = 1;            // job types for jobs whose trace has none
  double spread_factor = 0.75;  // rate of a gang spread over more machines than needed
  double slice_seconds = 60;    // time-slice length when jobs take turns
  double switch_seconds = 0.5;  // suspend+resume at a slice boundary (memory stays resident)
  double preempt_seconds = 10;  // stall on restart after a stop (checkpoint + restore)
  // Stall on resume after a park (Preemption::kPark); unset: preempt_seconds,
  // which is how the published replays priced every preemption.
  std::optional<double> park_seconds;
  double migrate_fixed_seconds = 2;     // warm-up + control round trips of a migration
  double state_gb_per_gpu = 4;          // checkpoint size per GPU of the job
  double migrate_gb_per_second = 1.25;  // network bandwidth for checkpoint transfer
  std::string ref_perf_class = "p100";  // class on which trace durations were measured
  int max_util_points = 1000;           // utilisation series is coarsened to stay below this
  bool check_invariants = false;        // verify the allocation after every instant (tests)
  double max_sim_seconds = 1e10;        // stop (error) if simulated time passes this
};

// One job's life, for the report.
struct JobRecord {
  double submit = 0, first_start = -1, finish = -1;
  double duration = 0;  // alone, consolidated, reference class
  int num_gpus = 0;
  int preemptions = 0, migrations = 0;
};

struct UtilPoint {
  double time = 0;       // bucket start
  double allocated = 0;  // fraction of GPUs held by some job, time-averaged over the bucket
  double effective = 0;  // useful work rate x GPUs / total GPUs (packing may exceed allocated)
};

struct SimResult {
  std::vector<JobRecord> jobs;
  std::vector<UtilPoint> util;
  double util_bucket_seconds = 0;
  double allocated_gpu_seconds = 0, effective_gpu_seconds = 0;
  // The same, from the first to the last submission only: the busy window,
  // where a long tail of a few jobs does not dilute the averages.
  double window_seconds = 0, window_allocated_gpu_seconds = 0, window_effective_gpu_seconds = 0;
  int total_gpus = 0;
  int64_t events = 0;  // events processed (arrivals, finishes, stall ends, wake-ups)
  int64_t schedule_calls = 0;
  int64_t preemptions = 0, migrations = 0, resizes = 0;
  // A running hash of every action the policy took that the cluster carried
  // out (time, what, job, GPUs): equal only if the decision logs are equal.
  uint64_t actions_digest = 0xcbf29ce484222325ULL;
  PolicyStats policy;
};

// A trace job with its names resolved against the topology and perf model.
struct SimJobSpec {
  JobInfo info;
  double duration = 0;
};
// Interns vc/user, resolves job_type (or assigns one from seed) and gpu_type.
// Errors: invalid_argument naming the job for an unknown job type / GPU type.
StatusOr<std::vector<SimJobSpec>> BuildJobs(const Trace& trace, const Topology& topo,
                                            const PerfModel& perf, uint64_t seed);

class SimCluster : public Cluster {
 public:
  // `perf` must outlive the cluster; `jobs` is copied.
  SimCluster(Topology topo, const PerfModel* perf, std::span<const SimJobSpec> jobs,
             SimConfig config);

  // Replays the whole trace under `policy`. Errors: failed_precondition if the
  // policy leaves jobs unfinished with nothing left to happen (a deadlock),
  // or an invariant breaks (check_invariants), deadline_exceeded past max_sim_seconds.
  StatusOr<SimResult> Run(Policy& policy);

  // Cluster interface.
  double Now() const override { return now_; }
  const Topology& topology() const override { return topo_; }
  const FreeIndex& free_gpus() const override { return free_; }
  const JobInfo& info(JobId j) const override { return jobs_[j].info; }
  JobState state(JobId j) const override { return jobs_[j].state; }
  std::span<const GpuId> gpus(JobId j) const override;
  int group_of(JobId j) const override { return jobs_[j].group; }
  GroupView group(int g) const override;
  int group_of_gpu(GpuId gpu) const override { return gpu_group_[gpu]; }
  double Attained(JobId j) const override;
  double RunTime(JobId j) const override;
  double MeasuredRate(JobId j) const override;
  bool RateMeasured(JobId j) const override;
  double PendingSince(JobId j) const override { return jobs_[j].pending_since; }
  bool PairFitsMemory(JobId a, JobId b) const override;
  std::optional<double> OracleRemaining(JobId j) const override;
  Status Start(JobId j, std::span<const GpuId> gpus) override;
  Status Suspend(JobId j, Preemption how) override;
  Status Migrate(JobId j, std::span<const GpuId> gpus) override;
  Status Resize(JobId j, std::span<const GpuId> gpus) override;
  Status SetShareMode(int g, ShareMode mode) override;
  void WakeAt(double t) override;

  // Checks that no GPU is over-allocated and the free index agrees (tests).
  Status CheckInvariants() const;
  int num_jobs() const { return static_cast<int>(jobs_.size()); }

 private:
  struct Job {
    JobInfo info;
    double work = 0;  // seconds of progress needed at rate 1
    double done = 0;  // progress as of last_update
    double last_update = 0;
    double rate = 0;        // progress per second once any stall is over
    double time_share = 0;  // fraction of wall time executing (slicing)
    double base_rate = 1;   // locality x GPU class x size scaling
    double stall_until = 0;
    double attained = 0, run_time = 0;  // as of last_update
    double pending_since = 0;
    double resume_stall = 0;  // seconds its next start stalls (it was parked or stopped)
    JobState state = JobState::kNotSubmitted;
    int group = kNoGroup;
    uint32_t version = 0;
    std::vector<GpuId> gpus;
    // The rest of its JobRecord (submit, duration and GPUs are above).
    double first_start = -1, finish = -1;
    int preemptions = 0, migrations = 0;
  };
  struct Group {
    std::vector<GpuId> gpus;
    std::vector<JobId> members;
    ShareMode mode = ShareMode::kSlice;
  };
  enum EventKind : uint8_t { kFinish = 0, kStallEnd = 1, kArrival = 2, kWake = 3 };
  struct Event {
    double time;
    EventKind kind;
    JobId job;
    uint32_t version;
    bool operator>(const Event& o) const {
      if (time != o.time) return time > o.time;
      if (kind != o.kind) return kind > o.kind;
      return job > o.job;
    }
  };

  void Advance(Job& job);    // brings progress up to now_
  void Reschedule(JobId j);  // recompute rate, push finish/stall events
  void RecomputeGroup(int g);
  double ComputeBaseRate(const Job& job, std::span<const GpuId> gpus) const;
  double PackedFactor(const Job& job, const Group& group) const;
  int NewGroup(std::span<const GpuId> gpus);
  void LeaveGroup(JobId j);  // frees the group's GPUs when it empties
  void SetContribution(JobId j, double value);
  void AccumulateUtil(double t);
  void Push(double t, EventKind kind, JobId j, uint32_t version);
  Status CheckRunning(JobId j) const;  // failed_precondition unless j is running
  // Adds a carried-out action to result_.actions_digest.
  void LogAction(uint64_t what, int64_t subject, std::span<const GpuId> gpus);

  // One instant of Run, in order: stale events dropped, then finishes and
  // stall ends (they free GPUs), arrivals, wake-ups.
  void DropStaleEvents();
  void FinishesAndStallEnds(Policy& policy);
  void Arrivals(Policy& policy);
  void Wakes();
  SimResult TakeResult(const Policy& policy);  // after the last instant

  Topology topo_;
  const PerfModel* perf_;
  SimConfig config_;
  int ref_class_ = 1;
  std::vector<int> type_class_;  // topology GPU type -> perf class
  std::vector<Job> jobs_;
  std::vector<Group> groups_;
  std::vector<int> free_groups_;
  std::vector<int> gpu_group_;
  FreeIndex free_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::set<double> wakes_;
  double now_ = 0;
  size_t next_arrival_ = 0;  // jobs_ are in submit order
  int unfinished_ = 0;
  // Utilisation accounting.
  std::vector<double> contribution_;  // effective GPUs per job right now
  double allocated_now_ = 0, effective_now_ = 0, util_last_ = 0;
  std::vector<UtilPoint> util_;
  double bucket_seconds_ = 3600;
  SimResult result_;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_SIM_CLUSTER_H_
