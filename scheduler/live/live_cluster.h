// LiveCluster: the Cluster interface over real gandivad nodes, so the
// simulator's policies run unchanged on a real cluster.
//
// Each device of each node is one "GPU" of the topology (a node is a machine);
// jobs on the same devices form a group (its id: its first device's). A job
// of --gpus N takes N devices of one node, run as one job across them
// (launch with `devices`: gandivad slices them together). The policy's
// actions become node calls at once:
//   Start    a queued job: launch on the devices (from its latest checkpoint
//            when it has one); a suspended job: resume it where it is parked,
//            assign_device on the same node, or migrate it to another node
//            (a job across devices resumes only where it is parked).
//   Suspend  park the job in memory on its devices (suspend); it holds its
//            memory there but no time on them.
//   Migrate  assign_device (same node) or migrate (node to node); one device.
//   Resize   a restartable job alone on its devices, to more or fewer devices
//            of its node: it is parked and checkpointed, and once that is
//            complete its run is stopped and it is launched again on the new
//            devices from that checkpoint (reconcile.cc). The policy sees it
//            on the new devices at once, at rate 0 until it runs there.
//   SetShareMode  set_share_mode on the devices (slice or pack).
// What a policy reads (attained service, run time, rate) is what the nodes'
// profilers measured, refreshed by Refresh() from list_jobs.
//
// Every change to a job is written to the JobStore before the node is asked
// (state "starting" with the node and attempt), so a scheduler killed at any
// moment finds, on restart, what it may have started and adopts it instead of
// starting it again (the launch name carries the job id and attempt). A
// migration is recorded (JobRecord::move) and made durable, even in the middle
// of a pass, before the source node is asked: a restarted scheduler finishes
// the move from what the nodes report (moves.cc) and never resumes the copy
// that is arriving on the destination.
//
// Threading: single-threaded (the scheduler's loop, under its lock).
#ifndef GANDIVA_SCHEDULER_LIVE_LIVE_CLUSTER_H_
#define GANDIVA_SCHEDULER_LIVE_LIVE_CLUSTER_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gandiva/scheduler/cluster.h"
#include "gandiva/scheduler/free_index.h"
#include "gandiva/scheduler/topology.h"
#include "live/exit_class.h"
#include "live/job_store.h"
#include "live/node_runs.h"
#include "live/node_set.h"
#include "live/retry_policy.h"

namespace gandiva::sched::live {

struct LiveDevice {
  int node = 0;
  std::string name;          // on its node: "cpu0", "gpu1"
  int64_t memory_bytes = 0;  // its memory, as the node lists it; 0: not known (a CPU device)
};

// The topology of the nodes' devices, from each node's list_devices. A node
// that does not answer is left out (named in `missing`).
struct LiveTopology {
  Topology topology;
  std::vector<LiveDevice> devices;  // by GpuId
  std::vector<std::string> missing;
};
StatusOr<LiveTopology> DiscoverTopology(NodeApi& nodes);

// Errors by which a node that answered says the job cannot run there (unlike
// unavailable or deadline_exceeded, which say nothing about the job).
bool NodeRefusedTheJob(StatusCode code);

// What Refresh reports to the scheduler loop, which tells the policy.
// Only jobs the policy was told of (TakeArrivals, Recover) are reported.
struct ClusterEvents {
  // Ended (done, failed or cancelled), or back in the queue to wait for a
  // retry (it arrives again through TakeArrivals when its wait is over): OnFinish.
  std::vector<JobId> finished;
  std::vector<JobId> requeued;  // its migration failed: OnFinish, then OnArrival
};

struct LiveClusterOptions {
  std::string checkpoint_root;    // DIR/job-<id>/<n>: the periodic checkpoints
  double checkpoint_every_s = 0;  // restartable jobs; 0: never
  // A restartable job parked (suspended) this long is checkpointed and
  // stopped: its node gets its memory back, and the job restarts from that
  // checkpoint wherever the policy starts it next. 0: parked jobs stay parked.
  double stop_parked_after_s = 0;
  double node_dead_after_s = 5;      // a node silent this long: its jobs go back to the queue
  int pack_capacity = 2;             // jobs at once on a device a policy packs
  std::function<double()> wall_now;  // unix seconds (injected for tests)
  // Failures (exit_class.h): infrastructure failures and preemptions are
  // retried under `retry`; the job's own errors end it at once.
  RetryOptions retry;
  // Pre-run validation: a new job first runs until it has done this many
  // iterations (or ran validate_timeout_s without ending: a job that reports
  // no iterations) as a guest on a device, at validate_weight of a full share,
  // and only then queues for the policy. 0: jobs queue at once.
  int validate_iterations = 0;
  double validate_timeout_s = 120;
  double validate_weight = 0.25;
};

class LiveCluster final : public Cluster {
 public:
  // `nodes` and `store` must outlive the cluster.
  LiveCluster(NodeApi* nodes, JobStore* store, LiveTopology topo, LiveClusterOptions options,
              double epoch);

  // ---- The scheduler loop's side ----
  // Loads every job from the store (after a restart) and reconciles the ones
  // that were starting, running, suspended or validating with what their
  // nodes report. Returns the suspended jobs, which the policy must be told
  // arrived; the queued ones come through TakeArrivals.
  StatusOr<std::vector<JobId>> Recover();
  // A job the store just took; returns its id here (store id - 1). A queued
  // one arrives through TakeArrivals; a validating one after its validation.
  JobId Admit(const JobRecord& record);
  // The queued jobs the policy has not been told of and may run now (new,
  // validated, or done waiting for a retry), in the order they queued: OnArrival.
  std::vector<JobId> TakeArrivals();
  // Starts the validation runs of jobs that wait for one (--validate). Outside
  // a store batch: each launch is recorded durably before the node is asked.
  void ValidatePending();
  // Every node's list_jobs, in node order. Only reads the node set, which is
  // thread-safe: the scheduler calls it without its lock, so a node that does
  // not answer holds up no client of the scheduler.
  using NodeReports = std::vector<StatusOr<protocol::Json>>;
  NodeReports PollNodes() const;
  // Takes in what PollNodes found: exits, finished migrations and checkpoints;
  // takes periodic checkpoints, and requeues the jobs of nodes that died.
  ClusterEvents Refresh(const NodeReports& reports);
  ClusterEvents Refresh() { return Refresh(PollNodes()); }
  // Asks a job to end: a queued one is cancelled at once (true: tell the
  // policy it finished); a running one is killed and ends at its next Refresh.
  StatusOr<bool> Cancel(JobId job);
  // Sends the launches a pass planned (Start inside a store batch), once the
  // batch is committed: see Launch.
  void LaunchPlanned();
  // The batch did not commit: the planned launches are not sent; their jobs
  // are queued again (TakeRequeuedByActions).
  void DropPlanned(const std::string& why);
  // Jobs an action ended (a launch the node refused), for the policy's OnFinish.
  std::vector<JobId> TakeEndedByActions() { return std::exchange(ended_by_actions_, {}); }
  // Jobs whose planned launch did not reach their node: queued again (the
  // policy saw them start: OnFinish, then OnArrival).
  std::vector<JobId> TakeRequeuedByActions() { return std::exchange(requeued_by_actions_, {}); }
  const JobRecord& record(JobId job) const { return jobs_[job].record; }
  int num_jobs() const { return static_cast<int>(jobs_.size()); }
  const LiveDevice& device(GpuId gpu) const { return devices_[gpu]; }
  // The kind (`submit --kind`) a JobInfo::job_type stands for; "?" for -1.
  std::string KindName(int job_type) const;
  bool node_up(int node) const { return node_up_[node]; }
  double next_wake() const { return next_wake_; }
  void clear_wake() { next_wake_ = -1; }
  // Counters for the report: actions taken on nodes.
  struct Counters {
    int64_t launches = 0, resumes = 0, suspends = 0, migrations = 0, assigns = 0;
    int64_t share_changes = 0, checkpoints = 0, requeues = 0, failed_actions = 0;
    // Parked jobs checkpointed and stopped (Preemption::kStop, stop_parked_after_s).
    int64_t stops = 0;
    int64_t packs = 0, unpacks = 0;  // share_changes by the mode asked for
    int64_t retries = 0;             // failed runs queued again (infrastructure, preempted)
    int64_t validations = 0;         // validation runs launched
    int64_t resizes = 0;             // jobs relaunched on more or fewer devices
    int64_t validated = 0, failed_validation = 0;  // jobs through validation, and ended in it
  };
  const Counters& counters() const { return counters_; }

  // ---- Cluster ----
  double Now() const override;
  const Topology& topology() const override { return topology_; }
  const FreeIndex& free_gpus() const override { return free_; }
  const JobInfo& info(JobId job) const override { return jobs_[job].info; }
  JobState state(JobId job) const override;
  std::span<const GpuId> gpus(JobId job) const override;
  int group_of(JobId job) const override;
  GroupView group(int group) const override;
  int group_of_gpu(GpuId gpu) const override;
  double Attained(JobId job) const override;
  double RunTime(JobId job) const override;
  double MeasuredRate(JobId job) const override;
  bool RateMeasured(JobId job) const override;
  // Its node's warning that it marks no iteration boundaries (queue's detail), or "".
  const std::string& BoundaryWarning(JobId job) const { return jobs_[job].boundary_warning; }
  double PendingSince(JobId job) const override { return jobs_[job].pending_since; }
  // From the device memory each job was measured holding (its node's
  // device_bytes, the most seen; for a job not measured yet, the most any job
  // of its kind was seen holding) against the memory of the device one of
  // them is on; true while either is unknown or the device lists none.
  bool PairFitsMemory(JobId a, JobId b) const override;
  std::optional<double> OracleRemaining(JobId) const override { return std::nullopt; }
  Status Start(JobId job, std::span<const GpuId> gpus) override;
  // kPark: suspend (parked at its next boundary, its memory kept on the
  // node). kStop: parked, then checkpointed, then stopped once that is
  // complete (StopParked): it waits in the queue and restarts from the
  // checkpoint wherever it starts next.
  Status Suspend(JobId job, Preemption how) override;
  Status Migrate(JobId job, std::span<const GpuId> gpus) override;
  Status Resize(JobId job, std::span<const GpuId> gpus) override;
  Status SetShareMode(int group, ShareMode mode) override;
  void WakeAt(double t) override;

  // How long a stop checkpoint the node refused (or failed) waits to be asked again.
  static constexpr double kStopRetrySeconds = 5;

 private:
  // What the cluster knows of a job beyond its durable record.
  struct Job {
    // What Refresh reads or writes for every job each pass comes first, and
    // the record's own such fields lead it (job_store.h): a pass walks every
    // live job, a cache line or two each instead of half a dozen.
    std::vector<GpuId> gpus;              // the devices it holds (running), none otherwise
    bool stop_when_checkpointed = false;  // that checkpoint is to stop the parked job
    // The policy stopped it (Preemption::kStop) and its stop checkpoint is not
    // under way yet: one of another purpose was (periodic, a resize), or the
    // node refused or failed it. Asked as soon as none is under way
    // (MaybeCheckpoint), so a stop never ends as a park that holds the device.
    bool stop_wanted = false;
    double stop_refused_at = -1e18;  // wall(): when its stop checkpoint was last refused
    // Resize under way: parked and checkpointing on its old devices; launched
    // on `gpus` (which it holds already) once the checkpoint is complete.
    bool resizing = false;
    // The policy was told it arrived (OnArrival), and not yet that it finished.
    bool offered = false;
    // From the node's profiler for the current attempt.
    double device_time_s = 0, wall_time_s = 0;
    std::optional<double> rate;
    double base_alone_ms = 0;      // its iteration time alone on info.num_gpus devices (RestartOn)
    bool gave_kind_alone = false;  // its alone time went into kind_alone_ms_ (ReadRate)
    int64_t device_bytes = 0;      // the most device memory its node saw it hold (PairFitsMemory)
    std::string checkpointing;     // the dir of a checkpoint under way
    // Its node's "no iteration boundaries seen: ..." while it runs unmanaged, else "".
    std::string boundary_warning;
    JobRecord record;
    JobInfo info;
    double pending_since = 0;
    double last_checkpoint_asked = 0;
  };

  // Placement bookkeeping (no node calls): a job joins the group on exactly
  // its devices, or makes a new one on free devices.
  void Place(JobId job, std::span<const GpuId> gpus);
  void Unplace(JobId job);
  Status Persist(JobId job);                              // logs a failure too
  void SaveBestEffort(JobId job) { (void)Persist(job); }  // where nothing can be undone
  void KillBestEffort(int node, int64_t node_job);
  // The devices a record names ("cpu0" or "cpu0,cpu1" on its node); empty if
  // one is not in the cluster.
  std::vector<GpuId> GpusOf(const std::string& node, const std::string& devices) const;
  std::string DeviceText(std::span<const GpuId> gpus) const;  // "cpu0,cpu1"
  size_t JobsOnDevice(GpuId gpu) const;                       // the jobs of its group, if any
  // The devices its current run was launched on (a resized job's differ from
  // the number it asked for, record.gpus); info.num_gpus while it has no run.
  static int RunDevices(const Job& j);
  // Checks a placement the policy asks for: as many devices as the job
  // takes (CheckPlacement), all known, distinct, on one node that is up
  // (CheckDevices).
  Status CheckPlacement(JobId job, std::span<const GpuId> gpus) const;
  Status CheckDevices(std::span<const GpuId> gpus) const;
  // The current run's service goes into the record (attained, run time) and
  // the next run's figures start at zero.
  void KeepRunService(JobId job);
  int NodeIndex(const std::string& name) const;  // -1 for a node not in the set
  // Node calls behind Start.
  Status Launch(JobId job, std::span<const GpuId> gpus);
  Status SendLaunch(JobId job, bool planned);
  // A launch of the job's current attempt on `gpus` (its command, cwd, env, name).
  protocol::Json LaunchRequest(const Job& job, std::span<const GpuId> gpus) const;
  Status ResumeOn(JobId job, std::span<const GpuId> gpus);
  // The parked job restarts on `gpus` from a checkpoint taken now (Resize,
  // or resuming a job across devices elsewhere); Relaunch, once the
  // checkpoint is complete, stops the parked run and launches it there.
  Status RestartOn(JobId job, std::span<const GpuId> gpus);
  void Relaunch(JobId job);
  Status MoveTo(JobId job, GpuId gpu);  // assign_device or migrate; the job runs there after
  // Refresh, one node at a time; see reconcile.cc.
  void RefreshNode(int node, const protocol::Json& jobs, const std::vector<JobId>& ours,
                   const NodeReports& reports, ClusterEvents& events);
  // Moves (moves.cc). A job with a move is followed on its source node `node`
  // (`runs`: its report) until the move ends: done (EndMove), failed or never
  // begun (MoveBack), or ended on the source first.
  static bool Moving(const Job& j) { return j.record.move.has_value(); }
  void RefreshMove(JobId job, int node, const NodeRuns& runs, const NodeReports& reports,
                   ClusterEvents& events);
  // The job is its copy on the destination (id `to_job` there): the move is over.
  void EndMove(JobId job, int64_t to_job);
  // The move did not happen: the job is its run on the source, parked there
  // and back with the policy as a parked job (killed and queued again if it
  // cannot be parked).
  void MoveBack(JobId job, int node, const std::string& why, ClusterEvents& events);
  // The destination's copy of a moving job in `node_jobs` (its id, or 0), by
  // its launch name and migrated_from (where the source no longer says it).
  int64_t FindCopy(const Job& job, const protocol::Json& node_jobs) const;
  // Recover: a job stored mid-move is placed on its destination again, moving;
  // the next Refresh finishes the move from the nodes' reports.
  void AdoptMove(JobId job);
  void TakeInJob(JobId job, const NodeRun& run, ClusterEvents& events);
  // Its run ended (running, parked or validating): the job ends as it did,
  // or is retried (Fail).
  void TakeInEnd(JobId job, const protocol::Json& node_job, ClusterEvents& events);
  void Finish(JobId job, LiveJobState state, int exit_code, const std::string& detail);
  // Adds `job` to an event list for the policy if it was offered to it.
  void Report(JobId job, std::vector<JobId>& out);
  // Failures (failures.cc): a run that ended badly is classified from its
  // node's report and output, then retried (Retry) or ended (Finish).
  Classified ClassifyEnd(JobId job, const protocol::Json& node_job);
  std::string OutputTail(int node, int64_t node_job) const;
  void Fail(JobId job, const Classified& why, int exit_code, ClusterEvents& events);
  void Retry(JobId job, const std::string& why, ClusterEvents& events);
  // Validation (validation.cc).
  Status LaunchValidation(JobId job);
  GpuId ValidationDevice();
  void TakeInValidation(JobId job, const NodeRun& run, ClusterEvents& events);
  void EndValidation(JobId job, const std::string& how);  // it queues for the policy
  void AdoptValidation(JobId job, const protocol::Json& node_jobs, bool node_answered);
  void ClearRun(JobId job);  // forgets where its run was (node, device, node id)
  void NodeDown(int node, ClusterEvents& events);
  void NodeUp(int node);
  void MaybeCheckpoint(JobId job);
  // Takes in the end of a checkpoint this scheduler asked for (`op`, the job's
  // operation on its node): a complete one becomes the job's latest. True once
  // it ended, done or failed.
  bool TakeInCheckpoint(JobId job, const protocol::Json& op);
  bool RequestCheckpoint(JobId job);  // false if the node refused
  // The checkpoint that stops a job the policy stopped (stop_wanted); a
  // refusal is tried again after kStopRetrySeconds.
  void RequestStopCheckpoint(JobId job);
  void StopParked(JobId job);  // its stop checkpoint is complete
  void AdoptOrRequeue(JobId job, const protocol::Json& node_jobs, bool node_answered);
  // Its run in a list_jobs reply: by id once known, else by launch name.
  const protocol::Json* FindRun(const Job& job, const protocol::Json& node_jobs) const;
  void Requeue(JobId job, const std::string& why);
  void ToQueue(JobId job, const std::string& detail);  // Requeue's and StopParked's common part
  std::string LaunchName(const Job& job) const;
  double wall() const { return options_.wall_now(); }

  NodeApi* nodes_;
  JobStore* store_;
  Topology topology_;
  std::vector<LiveDevice> devices_;
  FreeIndex free_;
  LiveClusterOptions options_;
  double epoch_;  // unix seconds of the scheduler's time 0 (kept in the store)
  std::vector<Job> jobs_;
  // Groups by id (their first device's GpuId): the jobs, the devices, the mode.
  std::vector<std::vector<JobId>> members_;
  std::vector<std::vector<GpuId>> group_gpus_;
  std::vector<ShareMode> modes_;
  std::vector<int> gpu_group_;  // by GpuId: the group the device is in, or kNoGroup
  std::unordered_map<std::string, int> node_index_;
  // Job kinds as the policies' job_type numbers, in order of first sight: a
  // number means something only within one scheduler run, like a JobId.
  std::unordered_map<std::string, int> kind_types_;
  std::unordered_map<int, int64_t> kind_device_bytes_;  // job_type -> the most a job of it held
  int64_t DeviceBytes(const Job& j) const;              // measured, else its kind's
  // A job's iteration time alone, as its node learned it, by its kind, the
  // type of its devices and their number: the speed a packed job that never
  // ran alone (a guest packed on arrival) is measured against (ReadRate).
  // Each job's first known alone time replaces its kind's: the latest is the
  // likeliest to have run under today's conditions.
  std::map<std::tuple<int, int, int>, double> kind_alone_ms_;
  void ReadRate(JobId id, const protocol::Json& nj);
  std::vector<bool> node_up_;
  std::vector<double> node_last_seen_;
  double next_wake_ = -1;
  std::vector<JobId> ended_by_actions_;
  std::vector<JobId> requeued_by_actions_;
  std::vector<JobId> planned_;  // launches waiting for the pass's batch to commit
  std::vector<JobId> waiting_;  // queued, not yet offered to the policy (TakeArrivals)
  // The jobs not ended, in id order: what Refresh walks (it drops the ones
  // that ended since), not every job ever submitted.
  std::vector<JobId> live_;
  // The jobs admitted in validation, in id order: the only ones that ever
  // validate (a job enters validation only at its submission), so that
  // ValidatePending walks them, not every job (it drops those past it).
  std::vector<JobId> validating_;
  size_t validate_cursor_ = 0;  // where ValidationDevice's search starts: spreads ties
  Counters counters_;
};

}  // namespace gandiva::sched::live

#endif  // GANDIVA_SCHEDULER_LIVE_LIVE_CLUSTER_H_
