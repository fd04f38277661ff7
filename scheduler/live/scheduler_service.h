// SchedulerService: the live cluster scheduler. It takes jobs (submit, durable
// in its SQLite store before the reply), runs one of the simulator's policies
// over the nodes (LiveCluster) in a loop, and answers queue, cancel and
// read_log. On start it reloads the store and reconciles with the nodes, so a
// scheduler killed at any moment loses no job and starts none twice.
//
// Threading: the API thread calls the handlers, the loop thread runs passes;
// one lock (mu_) covers the store, the cluster and the policy. A pass holds it
// while it calls nodes, so a reply may wait up to a node call's timeout.
#ifndef GANDIVA_SCHEDULER_LIVE_SCHEDULER_SERVICE_H_
#define GANDIVA_SCHEDULER_LIVE_SCHEDULER_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/protocol/dispatcher.h"
#include "gandiva/scheduler/policy.h"
#include "live/access.h"
#include "live/job_store.h"
#include "live/live_cluster.h"
#include "live/node_set.h"

namespace gandiva::sched::live {

struct SchedulerOptions {
  std::string state_dir;   // scheduler.db and checkpoints/
  std::string nodes_file;  // NAME ENDPOINT [PUBLIC_KEY] lines
  std::string policy = "gandiva";
  PolicyOptions policy_options;
  std::optional<protocol::CurveKeyPair> keys;  // to call tcp:// nodes
  double pass_every_s = 0.5;                   // the loop's period
  double checkpoint_every_s = 0;               // restartable jobs; 0: never
  double stop_parked_after_s = 0;              // see LiveClusterOptions; 0: never
  double node_dead_after_s = 5;
  int node_timeout_ms = 2000;
  RetryOptions retry;           // infrastructure failures and preemptions
  int validate_iterations = 0;  // --validate N: 0 queues new jobs at once
  double validate_timeout_s = 120;
  std::optional<gid_t> admin_group;  // --admin-group: its members act on every job
};

class SchedulerService {
 public:
  // Opens the store, finds the nodes' devices, recovers the jobs. Errors: the
  // policy is unknown or needs an oracle (srtf), the nodes file is bad, no
  // node answers, the database is not one of ours or is corrupt.
  static StatusOr<std::unique_ptr<SchedulerService>> Create(SchedulerOptions options);
  // The same over given nodes (options.nodes_file unused): a benchmark's
  // simulated cluster.
  static StatusOr<std::unique_ptr<SchedulerService>> Create(SchedulerOptions options,
                                                            std::unique_ptr<NodeApi> nodes,
                                                            std::function<double()> wall_now);

  void Register(protocol::Dispatcher& dispatcher);
  // Passes until `stop`; then logs the actions it took (LogCounters).
  void Run(const std::atomic<bool>& stop);
  // One pass: refresh from the nodes, tell the policy, let it act.
  void Pass() { Pass(Poll()); }
  // Its two halves: what the nodes report (no lock held), and the rest.
  LiveCluster::NodeReports Poll() const { return cluster_->PollNodes(); }
  void Pass(const LiveCluster::NodeReports& reports);
  std::string Describe() const;  // for the start-up log line

  // The API's handlers (Register hands them to a dispatcher): a request's
  // fields, checked against the schema already, and the reply's. The caller
  // decides whose a submitted job is and which jobs it may act on (access.h);
  // the default is the scheduler's own (an admin).
  StatusOr<protocol::Json> Submit(const protocol::Json& req, const protocol::Caller& caller = {});
  StatusOr<protocol::Json> Queue(const protocol::Json& req);
  StatusOr<protocol::Json> CancelJob(const protocol::Json& req,
                                     const protocol::Caller& caller = {});
  StatusOr<protocol::Json> ReadLog(const protocol::Json& req, const protocol::Caller& caller = {});

 private:
  explicit SchedulerService(SchedulerOptions options)
      : options_(std::move(options)), access_(options_.admin_group) {}
  protocol::Json JobJson(JobId id) const;
  void LogCounters() const;
  void LogNewPackTrials();      // the policy's pack trials decided since the last call
  bool Batch(const Status& s);  // logs a failed Begin/Commit; true when it worked

  SchedulerOptions options_;
  SchedulerAccess access_;
  UniqueFd lock_fd_;  // flock on STATE/scheduler.lock, held while it runs
  mutable std::mutex mu_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<NodeApi> nodes_;
  std::unique_ptr<LiveCluster> cluster_;
  std::unique_ptr<Policy> policy_;
  std::vector<JobId> arrived_;   // recovered parked jobs, for the first pass
  std::vector<JobId> finished_;  // cancelled while queued since the last pass
  double last_schedule_ = -1;
  size_t pack_trials_logged_ = 0;
};

}  // namespace gandiva::sched::live

#endif  // GANDIVA_SCHEDULER_LIVE_SCHEDULER_SERVICE_H_
