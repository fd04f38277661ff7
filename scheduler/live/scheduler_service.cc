// See scheduler_service.h.
#include "live/scheduler_service.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "gandiva/common/log.h"
#include "gandiva/common/users.h"

namespace gandiva::sched::live {

using protocol::Json;
using protocol::MessageType;

namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A job's kind when the submitter named none: the program and the first word
// after it that is not an option ("python3 train_cnn.py" for
// `python3 -u /x/train_cnn.py --lr 0.1`), so trials of one script, which
// differ in their options, are one kind.
std::string DefaultKind(const std::vector<std::string>& command) {
  std::string kind = BaseName(command[0]);
  for (size_t i = 1; i < command.size(); ++i) {
    if (!command[i].empty() && command[i][0] != '-') return kind + " " + BaseName(command[i]);
  }
  return kind;
}

StatusOr<int64_t> JobIdField(const Json& req) {
  const int64_t id = req["job"].get<int64_t>();
  if (id < 1) return InvalidArgument("job ids start at 1");
  return id;
}

}  // namespace

StatusOr<std::unique_ptr<SchedulerService>> SchedulerService::Create(SchedulerOptions options) {
  GD_ASSIGN_OR_RETURN(auto addresses, ReadNodesFile(options.nodes_file));
  auto nodes =
      std::make_unique<NodeSet>(std::move(addresses), options.keys, options.node_timeout_ms);
  return Create(std::move(options), std::move(nodes), UnixNow);
}

StatusOr<std::unique_ptr<SchedulerService>> SchedulerService::Create(
    SchedulerOptions options, std::unique_ptr<NodeApi> nodes, std::function<double()> wall_now) {
  if (options.policy == "srtf")
    return InvalidArgument(
        "srtf needs every job's remaining time, which only a simulator knows; live policies: "
        "fifo, las, gandiva, reserve-pack, sjf-predicted, philly");
  std::unique_ptr<SchedulerService> s(new SchedulerService(std::move(options)));
  SchedulerOptions& o = s->options_;
  GD_ASSIGN_OR_RETURN(s->policy_, MakePolicy(o.policy, o.policy_options));
  std::error_code ec;
  std::filesystem::create_directories(o.state_dir + "/checkpoints", ec);
  if (ec) return FailedPrecondition("cannot create " + o.state_dir + ": " + ec.message());
  // One scheduler per state directory: two would both start its jobs.
  const std::string lock_path = o.state_dir + "/scheduler.lock";
  s->lock_fd_ = UniqueFd(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (s->lock_fd_.get() < 0)
    return FailedPrecondition("cannot open " + lock_path + ": " + strerror(errno));
  if (flock(s->lock_fd_.get(), LOCK_EX | LOCK_NB) != 0)
    return FailedPrecondition("another scheduler is running on " + o.state_dir);
  GD_ASSIGN_OR_RETURN(s->store_, JobStore::Open(o.state_dir + "/scheduler.db"));
  // The scheduler's clock starts at its first start and runs on across restarts.
  GD_ASSIGN_OR_RETURN(auto epoch_text, s->store_->GetMeta("epoch"));
  double epoch = wall_now();
  if (epoch_text) {
    epoch = std::stod(*epoch_text);
  } else {
    GD_RETURN_IF_ERROR(s->store_->SetMeta("epoch", std::to_string(epoch)));
  }
  s->nodes_ = std::move(nodes);
  GD_ASSIGN_OR_RETURN(LiveTopology topo, DiscoverTopology(*s->nodes_));
  for (const std::string& why : topo.missing)
    GD_LOG(kWarn, "left out until the scheduler restarts: %s", why.c_str());
  LiveClusterOptions copts;
  copts.checkpoint_root = o.state_dir + "/checkpoints";
  copts.checkpoint_every_s = o.checkpoint_every_s;
  copts.stop_parked_after_s = o.stop_parked_after_s;
  copts.node_dead_after_s = o.node_dead_after_s;
  copts.pack_capacity = std::max(2, o.policy_options.gandiva_max_share);
  copts.wall_now = std::move(wall_now);
  copts.retry = o.retry;
  copts.validate_iterations = o.validate_iterations;
  copts.validate_timeout_s = o.validate_timeout_s;
  s->cluster_ = std::make_unique<LiveCluster>(s->nodes_.get(), s->store_.get(), std::move(topo),
                                              std::move(copts), epoch);
  GD_ASSIGN_OR_RETURN(s->arrived_, s->cluster_->Recover());
  return s;
}

std::string SchedulerService::Describe() const {
  std::lock_guard lock(mu_);
  return "policy " + options_.policy + ", " + std::to_string(nodes_->size()) + " nodes, " +
         std::to_string(cluster_->topology().num_gpus()) + " devices, " +
         std::to_string(cluster_->num_jobs()) + " jobs in " + options_.state_dir +
         "/scheduler.db (" + std::to_string(arrived_.size()) + " waiting)";
}

void SchedulerService::Run(const std::atomic<bool>& stop) {
  const auto period = std::chrono::duration<double>(options_.pass_every_s);
  while (!stop.load()) {
    const auto start = std::chrono::steady_clock::now();
    Pass();
    // At least one nap between passes, so the API thread gets the lock.
    do {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (!stop.load() && std::chrono::steady_clock::now() - start < period);
  }
  LogCounters();
}

// One line per pair of job kinds the policy measured packed: what it learned
// and did (bench/scheduler/live_vs_sim.py gives these rates to the simulator).
void SchedulerService::LogNewPackTrials() {
  const std::vector<PackTrialRecord>& trials = policy_->stats().pack_trials;
  for (; pack_trials_logged_ < trials.size(); ++pack_trials_logged_) {
    const PackTrialRecord& t = trials[pack_trials_logged_];
    GD_LOG(kInfo, "pack trial: %s %.3f beside %s %.3f on %d device(s): %s",
           cluster_->KindName(t.guest_type).c_str(), t.guest_rate,
           cluster_->KindName(t.resident_type).c_str(), t.resident_rate, t.gpus,
           t.kept ? "kept" : "undone");
  }
}

// One line at exit with every action taken on the nodes since this start (not
// kept across restarts): what bench/scheduler/live_vs_sim.py reports.
void SchedulerService::LogCounters() const {
  std::lock_guard lock(mu_);
  const LiveCluster::Counters& c = cluster_->counters();
  GD_LOG(kInfo,
         "actions: launches %lld resumes %lld suspends %lld migrations %lld assigns %lld "
         "packs %lld unpacks %lld checkpoints %lld requeues %lld failed %lld stops %lld "
         "retries %lld validations %lld validated %lld failed_validation %lld resizes %lld",
         static_cast<long long>(c.launches), static_cast<long long>(c.resumes),
         static_cast<long long>(c.suspends), static_cast<long long>(c.migrations),
         static_cast<long long>(c.assigns), static_cast<long long>(c.packs),
         static_cast<long long>(c.unpacks), static_cast<long long>(c.checkpoints),
         static_cast<long long>(c.requeues), static_cast<long long>(c.failed_actions),
         static_cast<long long>(c.stops), static_cast<long long>(c.retries),
         static_cast<long long>(c.validations), static_cast<long long>(c.validated),
         static_cast<long long>(c.failed_validation), static_cast<long long>(c.resizes));
}

// The nodes are polled without the lock (Poll: a dead one takes its whole
// timeout to say so); only the loop's thread starts jobs, so the reports are
// not older than anything this pass acts on.
void SchedulerService::Pass(const LiveCluster::NodeReports& reports) {
  std::lock_guard lock(mu_);
  // The pass's writes go in one transaction (one flush instead of one per job);
  // the launches it planned go out once that is durable, their outcomes in a
  // second one. Without a batch (the store refused) every write is its own.
  const bool batched = Batch(store_->Begin());
  const ClusterEvents events = cluster_->Refresh(reports);
  for (JobId j : events.finished) policy_->OnFinish(*cluster_, j);
  for (JobId j : finished_) policy_->OnFinish(*cluster_, j);
  finished_.clear();
  for (JobId j : cluster_->TakeEndedByActions()) policy_->OnFinish(*cluster_, j);
  // A job lost with its node, or whose launch did not reach it, ends for the
  // policy and arrives again.
  std::vector<JobId> requeued = events.requeued;
  for (JobId j : cluster_->TakeRequeuedByActions()) requeued.push_back(j);
  for (JobId j : requeued) {
    policy_->OnFinish(*cluster_, j);
    policy_->OnArrival(*cluster_, j);
  }
  for (JobId j : arrived_) policy_->OnArrival(*cluster_, j);
  arrived_.clear();
  for (JobId j : cluster_->TakeArrivals()) policy_->OnArrival(*cluster_, j);
  // Every pass: the policies keep their own clocks (introspection rounds, LAS
  // queue crossings) and act only when something is due.
  cluster_->clear_wake();
  policy_->Schedule(*cluster_);
  LogNewPackTrials();
  if (batched && !Batch(store_->Commit())) {
    cluster_->DropPlanned("the scheduler's database could not record its start");
    return;
  }
  const bool launches_batched = Batch(store_->Begin());
  cluster_->LaunchPlanned();
  if (launches_batched) Batch(store_->Commit());
  cluster_->ValidatePending();
}

bool SchedulerService::Batch(const Status& s) {
  if (!s.ok()) GD_LOG(kError, "scheduler database: %s", s.ToString().c_str());
  return s.ok();
}

void SchedulerService::Register(protocol::Dispatcher& d) {
  d.OnSync(MessageType::kSubmit,
           [this](const protocol::Call& c) { return Submit(c.body(), c.caller); });
  d.OnSync(MessageType::kQueue, [this](const protocol::Call& c) { return Queue(c.body()); });
  d.OnSync(MessageType::kCancel,
           [this](const protocol::Call& c) { return CancelJob(c.body(), c.caller); });
  d.OnSync(MessageType::kReadLog,
           [this](const protocol::Call& c) { return ReadLog(c.body(), c.caller); });
}

StatusOr<Json> SchedulerService::Submit(const Json& req, const protocol::Caller& caller) {
  JobRecord r;
  GD_ASSIGN_OR_RETURN(r.uid, access_.SubmitUid(caller, req));
  r.command = req["command"].get<std::vector<std::string>>();
  if (r.command.empty() || r.command[0].empty()) return InvalidArgument("the command is empty");
  r.cwd = req["cwd"].get<std::string>();
  if (r.cwd.empty() || r.cwd[0] != '/') return InvalidArgument("cwd must be an absolute path");
  if (req.contains("env")) {
    GD_ASSIGN_OR_RETURN(r.env, protocol::EnvFromRequest(req));
  }
  r.name = req.value("name", BaseName(r.command[0]));
  r.user = req.value("user", std::string());
  // A user's jobs carry their own name, whatever label they sent.
  if (!access_.IsAdmin(caller)) {
    if (auto who = CredentialsOf(r.uid); who.ok()) r.user = who->name;
  }
  r.vc = req.value("vc", std::string());
  r.kind = req.value("kind", DefaultKind(r.command));
  if (r.kind.empty())
    return InvalidArgument("a job kind must be non-empty (leave it out for the default)");
  r.gpus = req.value("gpus", 1);
  r.ranks = req.value("ranks", 1);
  r.restartable = req.value("restartable", false);
  if (r.ranks < 1 || r.ranks > 64) return InvalidArgument("ranks must be 1..64");
  if (r.name.empty() || r.name.find('/') != std::string::npos)
    return InvalidArgument("a job name must be non-empty and without '/'");
  std::lock_guard lock(mu_);
  const int largest = cluster_->topology().max_gpus_per_machine();
  if (r.gpus < 1) return InvalidArgument("gpus must be at least 1");
  if (r.gpus > largest)
    return InvalidArgument("the job asks for " + std::to_string(r.gpus) +
                           " devices; the largest node has " + std::to_string(largest));
  r.submit_time = UnixNow();
  if (options_.validate_iterations > 0) r.state = LiveJobState::kValidating;
  GD_ASSIGN_OR_RETURN(r.id, store_->Add(r));  // durable before the reply
  cluster_->Admit(r);  // the policy hears of it in the next pass (or once validated)
  return Json{{"job", r.id}, {"name", r.name}};
}

Json SchedulerService::JobJson(JobId id) const {
  const JobRecord& r = cluster_->record(id);
  // Measured, 0 while it moves or restarts elsewhere, else not known yet
  // (not the 1.0 the policies take it as).
  Json rate = nullptr;
  if (cluster_->state(id) == JobState::kRunning) {
    const double measured = cluster_->MeasuredRate(id);
    if (cluster_->RateMeasured(id) || measured == 0) rate = measured;
  }
  return {{"id", r.id},
          {"name", r.name},
          {"user", r.user},
          {"uid", r.uid},
          {"vc", r.vc},
          {"kind", r.kind},
          {"state", LiveJobStateName(r.state)},
          {"gpus", r.gpus},
          {"ranks", r.ranks},
          {"restartable", r.restartable},
          {"command", r.command},
          {"node", r.node},
          {"device", r.device},
          {"node_job", r.node_job},
          {"attempt", r.attempt},
          {"submit_time", r.submit_time},
          {"start_time", r.start_time},
          {"end_time", r.end_time},
          {"attained_s", cluster_->Attained(id)},
          {"run_time_s", cluster_->RunTime(id)},
          {"rate", rate},
          {"checkpoint_dir", r.checkpoint_dir},
          {"exit_code", r.exit_code},
          // A running job its node cannot manage says so (its own detail is about its end).
          {"detail", r.detail.empty() && cluster_->state(id) == JobState::kRunning
                         ? cluster_->BoundaryWarning(id)
                         : r.detail},
          {"failure", FailureClassName(r.failure)},
          {"retries", r.retries},
          {"not_before", r.not_before}};
}

StatusOr<Json> SchedulerService::Queue(const Json& req) {
  std::lock_guard lock(mu_);
  Json jobs = Json::array();
  const bool all = req.value("all", false);
  if (req.contains("job")) {
    GD_ASSIGN_OR_RETURN(int64_t id, JobIdField(req));
    if (id > cluster_->num_jobs() || cluster_->record(id - 1).id == 0)
      return NotFound("no job " + std::to_string(id));
    jobs.push_back(JobJson(static_cast<JobId>(id - 1)));
  } else {
    for (JobId j = 0; j < cluster_->num_jobs(); ++j)
      if (cluster_->record(j).id != 0 && (all || cluster_->state(j) != JobState::kFinished))
        jobs.push_back(JobJson(j));
  }
  Json nodes = Json::array();
  for (int n = 0; n < nodes_->size(); ++n) {
    std::vector<std::string> devices;
    for (GpuId g = 0; g < cluster_->topology().num_gpus(); ++g)
      if (cluster_->device(g).node == n) devices.push_back(cluster_->device(g).name);
    nodes.push_back(
        {{"name", nodes_->address(n).name}, {"up", cluster_->node_up(n)}, {"devices", devices}});
  }
  return Json{
      {"jobs", jobs}, {"policy", options_.policy}, {"now_s", cluster_->Now()}, {"nodes", nodes}};
}

StatusOr<Json> SchedulerService::CancelJob(const Json& req, const protocol::Caller& caller) {
  GD_ASSIGN_OR_RETURN(int64_t id, JobIdField(req));
  std::lock_guard lock(mu_);
  if (id > cluster_->num_jobs() || cluster_->record(id - 1).id == 0)
    return NotFound("no job " + std::to_string(id));
  GD_RETURN_IF_ERROR(access_.MayActOn(caller, id, cluster_->record(id - 1).uid, "cancel"));
  GD_ASSIGN_OR_RETURN(bool ended_now, cluster_->Cancel(static_cast<JobId>(id - 1)));
  if (ended_now) finished_.push_back(static_cast<JobId>(id - 1));
  return Json{{"state", LiveJobStateName(cluster_->record(id - 1).state)}};
}

StatusOr<Json> SchedulerService::ReadLog(const Json& req, const protocol::Caller& caller) {
  GD_ASSIGN_OR_RETURN(int64_t id, JobIdField(req));
  std::lock_guard lock(mu_);
  if (id > cluster_->num_jobs() || cluster_->record(id - 1).id == 0)
    return NotFound("no job " + std::to_string(id));
  const JobRecord& r = cluster_->record(id - 1);
  GD_RETURN_IF_ERROR(access_.MayActOn(caller, id, r.uid, "read the output of"));
  const int n = nodes_->Find(r.node);
  if (n < 0 || r.node_job == 0)
    return FailedPrecondition("job " + std::to_string(id) + " is " + LiveJobStateName(r.state) +
                              ": it has no output on a node now");
  Json fwd = req;
  fwd["job"] = r.node_job;
  fwd.erase("v");
  fwd.erase("type");
  return nodes_->Call(n, MessageType::kReadLog, fwd);
}

}  // namespace gandiva::sched::live
