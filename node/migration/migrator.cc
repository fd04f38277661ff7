// Checkpoint and migration requests, their operations and workers; see migrator.h.
#include "migration/migrator.h"

#include <unistd.h>

#include <cstdlib>

#include "gandiva/common/clock.h"
#include "gandiva/common/log.h"
#include "migration/arrival_session.h"
#include "migration/migration_source.h"

namespace gandiva::controller {

using protocol::MessageType;
using runtime::ControlBlock;

Migrator::Migrator(JobHost* host, MigratorOptions options)
    : host_(host), options_(std::move(options)) {}

Migrator::~Migrator() { Stop(); }

void Migrator::RegisterHandlers(Dispatcher& d) {
  d.OnSync(MessageType::kCheckpoint, [this](const Call& c) { return Checkpoint(c.body()); });
  d.OnSync(MessageType::kMigrate, [this](const Call& c) { return Migrate(c.body()); });
  d.On(MessageType::kMigratePrepare, [this](Call c, Reply r) { MigratePrepare(std::move(c), r); });
  for (auto type :
       {MessageType::kMigrateBegin, MessageType::kMigrateCommit, MessageType::kMigrateStart})
    d.On(type, [this](Call c, Reply r) { MigrateStep(std::move(c), r); });
  d.OnSync(MessageType::kMigrateAbort, [this](const Call& c) { return MigrateAbort(c.body()); });
}

void Migrator::Stop() {
  // Operations give up on `stopping_` within their waits; each releases its job.
  stopping_ = true;
  std::vector<std::shared_ptr<ArrivalSession>> sessions;
  {
    std::lock_guard lock(mu_);
    sessions.swap(sessions_);
    arrivals_.clear();
  }
  for (auto& s : sessions) s->Cancel();
  sessions.clear();  // joins each session's thread
  workers_.JoinAll();
}

std::optional<Operation> Migrator::OperationOf(uint64_t job) const {
  std::lock_guard lock(mu_);
  auto it = operations_.find(job);
  if (it == operations_.end()) return std::nullopt;
  return it->second;
}

bool Migrator::Busy(uint64_t job) const {
  auto op = OperationOf(job);
  return op && op->state == OperationState::kRunning;
}

Status Migrator::MayResume(uint64_t job) const {
  const std::string name = "job " + std::to_string(job);
  if (auto op = OperationOf(job); op && op->state == OperationState::kRunning)
    return FailedPrecondition(name + " is in a " + std::string(protocol::ToString(op->kind)) +
                              "; it resumes when that ends");
  if (auto session = FindArrival(job)) {
    Status may = session->MayResume();
    return may.ok() ? may : FailedPrecondition(name + " " + may.message());
  }
  // A copy this migrator does not know (before migrate_prepare replied, or
  // after this gandivad restarted) still says so in its control block until it
  // is handed over.
  auto live = host_->LiveJob(static_cast<int64_t>(job));
  if (live.ok() && live->cb && live->cb->exit_if_orphaned.load(std::memory_order_acquire) != 0)
    return FailedPrecondition(name +
                              " is a migration's copy that was never handed over: it holds no "
                              "state of its own to train on");
  return Status::Ok();
}

Status Migrator::BeginOperation(uint64_t job, OperationKind kind, OperationStep step,
                                std::string target) {
  std::lock_guard lock(mu_);
  auto it = operations_.find(job);
  if (it != operations_.end() && it->second.state == OperationState::kRunning)
    return FailedPrecondition("job " + std::to_string(job) +
                              " is busy: " + std::string(protocol::ToString(it->second.kind)));
  Operation op;
  op.kind = kind;
  op.step = step;
  op.target = std::move(target);
  op.started_ns = MonotonicNowNs();
  operations_[job] = op;
  return Status::Ok();
}

void Migrator::Update(uint64_t job, const std::function<void(Operation&)>& update) {
  std::lock_guard lock(mu_);
  auto it = operations_.find(job);
  if (it != operations_.end()) update(it->second);
}

void Migrator::Finish(uint64_t job, const Status& result) {
  Update(job, [&](Operation& op) {
    op.state = result.ok() ? OperationState::kDone : OperationState::kFailed;
    op.step = OperationStep::kNone;
    op.error = result.ok() ? "" : result.ToString();
    op.finished_ns = MonotonicNowNs();
  });
}

std::string Migrator::TransferSocketPath(const char* role, uint64_t job) {
  std::lock_guard lock(mu_);
  return options_.state_dir + "/xfer-" + role + "-" + std::to_string(job) + "-" +
         std::to_string(++transfer_seq_) + ".sock";
}

// ------------------------------------------------------------ checkpoint

StatusOr<Json> Migrator::Checkpoint(const Json& req) {
  const std::string dir = req.at("dir").get<std::string>();
  if (dir.empty() || dir[0] != '/')
    return InvalidArgument("checkpoint dir must be an absolute path");
  if (dir.size() > runtime::kTransferTargetSize - 32)
    return InvalidArgument("checkpoint dir path too long");
  GD_ASSIGN_OR_RETURN(MovableJob job, host_->LiveJob(req.at("job").get<int64_t>()));
  GD_RETURN_IF_ERROR(
      BeginOperation(job.id, OperationKind::kCheckpoint, OperationStep::kParking, dir));
  workers_.Start([this, id = job.id, dir] { RunCheckpoint(id, dir); });
  return Json::object();
}

void Migrator::RunCheckpoint(uint64_t id, std::string dir) {
  Status s = Status::Ok();
  uint64_t bytes = 0;
  auto job = host_->LiveJob(static_cast<int64_t>(id));
  const bool held_by_user = job.ok() && host_->IsHeld(id);  // stays held after the checkpoint
  auto parked =
      job.ok() ? HoldAndPark(*host_, *job, options_.timeouts.park_ns, stopping_)
               : StatusOr<uint64_t>(FailedPrecondition("job " + std::to_string(id) + " has ended"));
  if (parked.ok()) {
    Update(id, [](Operation& op) { op.step = OperationStep::kWriting; });
    ControlBlock* cb = job->cb.get();
    const std::string target = "file:" + dir + "/state.gdck";
    s = host_->RequestTransfer(id, runtime::kRequestCheckpoint, target);
    const auto state = s.ok() ? runtime::WaitForTransfer(cb, options_.timeouts.checkpoint_ns)
                              : runtime::kTransferIdle;
    if (s.ok())
      s = state == runtime::kTransferDone ? Status::Ok()
          : state == runtime::kTransferFailed
              ? Internal(runtime::TransferError(cb))
              : DeadlineExceeded("the job did not finish its checkpoint");
    bytes = cb->transfer_bytes.load();
  } else {
    s = parked.status();
  }
  if (!held_by_user) host_->SetHeld(id, false);
  Update(id, [&](Operation& op) { op.bytes = bytes; });
  Finish(id, s);
  if (s.ok())
    GD_LOG(kInfo, "job %llu checkpointed to %s (%llu bytes)", (unsigned long long)id, dir.c_str(),
           (unsigned long long)bytes);
  else
    GD_LOG(kWarn, "checkpoint of job %llu failed: %s", (unsigned long long)id,
           s.ToString().c_str());
}

// ------------------------------------------------------------ migration, source side

StatusOr<Json> Migrator::Migrate(const Json& req) {
  const std::string to = req.at("to").get<std::string>();
  GD_ASSIGN_OR_RETURN(MovableJob job, host_->LiveJob(req.at("job").get<int64_t>()));
  if (!job.managed_by.empty())
    return FailedPrecondition("job " + std::to_string(job.id) + " is managed by " + job.managed_by +
                              ", which owns its processes: it cannot be migrated (preempt or "
                              "requeue it there; with a checkpoint it continues where it stopped)");
  // Its destination would start the container's command, cwd and environment
  // with gandivad's launch, outside any container.
  if (job.in_container)
    return FailedPrecondition(
        "job " + std::to_string(job.id) +
        " runs in a container, which a migration cannot move: checkpoint it (gandiva "
        "checkpoint) and restore it in a container on the other node (docs/containers.md)");
  auto peer = options_.peers.find(to);
  if (peer == options_.peers.end()) return NotFound("no peer node '" + to + "' (see --peers)");
  if (!options_.has_key)
    return FailedPrecondition("this node has no key (--key): it cannot authenticate to peers");
  if (job.pid <= 0)
    return FailedPrecondition("job " + std::to_string(job.id) + " has no process yet");
  // Known once the job passed its first boundary: a job that registered no state
  // would arrive with nothing and start over there, losing its progress.
  if (job.cb->phase.load(std::memory_order_acquire) != runtime::kPhaseStarting &&
      job.cb->registered_states.load(std::memory_order_relaxed) == 0)
    return FailedPrecondition("job " + std::to_string(job.id) +
                              " registered no state: call gandiva.torch.register(model, "
                              "optimizer, ...) or gandiva.register_state() / "
                              "gd_register_state() before its first boundary");
  GD_RETURN_IF_ERROR(
      BeginOperation(job.id, OperationKind::kMigrate, OperationStep::kPreparing, to));
  workers_.Start([this, id = job.id, p = peer->second, device = req.value("device", "")] {
    RunMigration(id, p, device);
  });
  return Json::object();
}

void Migrator::RunMigration(uint64_t id, PeerInfo peer, std::string device) {
  MigrationSource::Context ctx{
      host_,
      options_.connect(peer),
      options_.node,
      &options_.timeouts,
      &stopping_,
      [this, id] { return TransferSocketPath("out", id); },
      [this, id](const std::function<void(Operation&)>& update) { Update(id, update); }};
  MigrationSource source(std::move(ctx), id, std::move(device));
  Status s = source.Run();
  Finish(id, s);
  const uint64_t remote = OperationOf(id).value_or(Operation{}).to_job;
  if (s.ok()) {
    GD_LOG(kInfo, "job %llu migrated to %s as job %llu", (unsigned long long)id, peer.name.c_str(),
           (unsigned long long)remote);
  } else {
    GD_LOG(kWarn, "migration of job %llu to %s failed: %s", (unsigned long long)id,
           peer.name.c_str(), s.ToString().c_str());
  }
}

// ------------------------------------------------------------ migration, destination side

std::shared_ptr<ArrivalSession> Migrator::FindArrival(uint64_t job) const {
  std::lock_guard lock(mu_);
  auto it = arrivals_.find(job);
  return it == arrivals_.end() ? nullptr : it->second;
}

void Migrator::MigratePrepare(Call call, Reply reply) {
  auto session = std::make_shared<ArrivalSession>(
      host_, options_.timeouts, options_.bulk_host,
      [this](uint64_t job) { return TransferSocketPath("in", job); });
  std::vector<std::shared_ptr<ArrivalSession>> finished;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return reply(Unavailable("the node is stopping"));
    // Sessions whose thread has ended are joined here, off the lock.
    auto done = std::stable_partition(sessions_.begin(), sessions_.end(),
                                      [](const auto& s) { return !s->finished(); });
    finished.assign(done, sessions_.end());
    sessions_.erase(done, sessions_.end());
    sessions_.push_back(session);
  }
  // The job's id is known once it is registered; later steps find the session by it.
  session->Post(std::move(call), Reply([this, session, reply](const StatusOr<Json>& r) {
                  if (r.ok()) {
                    std::lock_guard lock(mu_);
                    arrivals_[(*r)["job"].get<uint64_t>()] = session;
                  }
                  reply(r);
                }));
}

void Migrator::MigrateStep(Call call, Reply reply) {
  const int64_t id = call.body().at("job").get<int64_t>();
  auto live = host_->LiveJob(id);
  if (!live.ok()) return reply(live.status());
  // migrate_start is idempotent: a source that heard no answer (a lost reply,
  // or this node restarting) sends it again, and a copy released already
  // answers as one, whether or not this gandivad still has its session.
  if (call.request.type == MessageType::kMigrateStart &&
      host_->ArrivalStageOf(static_cast<uint64_t>(id)) == ArrivalStage::kStarted)
    return reply(StartedReply(*live->cb));
  std::shared_ptr<ArrivalSession> session = FindArrival(static_cast<uint64_t>(id));
  if (!session)
    return reply(FailedPrecondition(call.request.type == MessageType::kMigrateStart
                                        ? "job did not arrive by migration"
                                        : "job is not arriving by migration"));
  session->Post(std::move(call), std::move(reply));
}

void Migrator::AdoptLoadedArrival(uint64_t job, std::shared_ptr<ControlBlock> cb,
                                  std::string migrated_from) {
  auto session = std::make_shared<ArrivalSession>(
      host_, options_.timeouts,
      ArrivalSession::Loaded{job, std::move(cb), std::move(migrated_from)});
  std::lock_guard lock(mu_);
  sessions_.push_back(session);
  arrivals_[job] = session;
}

// ------------------------------------------------------------ hand-over after a restart

void Migrator::ResumeHandOver(uint64_t job, const std::string& to) {
  const size_t slash = to.rfind('/');
  const std::string node = to.substr(0, slash == std::string::npos ? 0 : slash);
  const uint64_t remote =
      slash == std::string::npos ? 0 : std::strtoull(to.c_str() + slash + 1, nullptr, 10);
  auto peer = options_.peers.find(node);
  if (remote == 0 || peer == options_.peers.end()) {
    GD_LOG(kError,
           "job %llu had moved to %s, whose migrate_start was not answered, but %s is no peer "
           "now (--peers): its state waits there, parked, until migrate_start is sent to it",
           (unsigned long long)job, to.c_str(), node.c_str());
    return;
  }
  if (!BeginOperation(job, OperationKind::kMigrate, OperationStep::kSwitching, node).ok()) return;
  Update(job, [remote](Operation& op) { op.to_job = remote; });
  GD_LOG(kInfo, "job %llu had moved to %s before this gandivad stopped; sending migrate_start",
         (unsigned long long)job, to.c_str());
  workers_.Start([this, job, p = peer->second, remote] { RunHandOver(job, p, remote); });
}

void Migrator::RunHandOver(uint64_t job, PeerInfo peer, uint64_t remote_job) {
  std::unique_ptr<Peer> link = options_.connect(peer);
  uint32_t tries = 0;
  Status s = StartUntilAnswered(*link, remote_job, options_.timeouts, stopping_, &tries);
  Update(job, [tries](Operation& op) { op.start_tries = tries; });
  if (s.ok()) host_->MarkHandedOver(job);
  if (!s.ok()) s = StartFailed(peer.name, remote_job, tries, s);
  Finish(job, s);
  if (s.ok())
    GD_LOG(kInfo, "job %llu handed over to %s as job %llu", (unsigned long long)job,
           peer.name.c_str(), (unsigned long long)remote_job);
  else
    GD_LOG(kWarn, "job %llu: %s", (unsigned long long)job, s.ToString().c_str());
}

StatusOr<Json> Migrator::MigrateAbort(const Json& req) {
  const uint64_t id = req.at("job").get<uint64_t>();
  if (auto session = FindArrival(id)) session->Cancel();
  if (Status killed = host_->KillJob(id); !killed.ok())
    return NotFound("no job " + req.at("job").dump());
  GD_LOG(kInfo, "migration of job %llu aborted by its source", (unsigned long long)id);
  return Json::object();
}

}  // namespace gandiva::controller
