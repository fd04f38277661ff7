// The destination side of a migration; see arrival_session.h.
#include "migration/arrival_session.h"

#include <sys/socket.h>

#include <algorithm>
#include <optional>

#include "gandiva/common/clock.h"
#include "gandiva/common/log.h"
#include "migration/unix_socket.h"

namespace gandiva::controller {

using protocol::MessageType;

ArrivalSession::ArrivalSession(JobHost* host, const MigrationTimeouts& timeouts,
                               std::string bulk_host,
                               std::function<std::string(uint64_t job)> socket_path)
    : host_(host),
      timeouts_(timeouts),
      bulk_host_(std::move(bulk_host)),
      socket_path_(std::move(socket_path)) {
  thread_ = std::thread([this] { Loop(); });
}

ArrivalSession::ArrivalSession(JobHost* host, const MigrationTimeouts& timeouts, Loaded loaded)
    : host_(host), timeouts_(timeouts) {
  state_ = State::kLoaded;
  job_ = loaded.job;
  cb_ = std::move(loaded.cb);
  migrated_from_ = std::move(loaded.migrated_from);
  thread_ = std::thread([this] { Loop(); });  // after the fields it reads
}

Json StartedReply(const runtime::ControlBlock& cb) {
  return Json{{"state", cb.phase.load() == runtime::kPhaseRunning
                            ? protocol::MigrateStartState::kRunning
                            : protocol::MigrateStartState::kQueued}};
}

ArrivalSession::~ArrivalSession() {
  Cancel();
  // The last reference may be a finished step's reply, dropped on the session's own thread.
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach();
  else if (thread_.joinable())
    thread_.join();
}

void ArrivalSession::Post(Call call, Reply reply) {
  {
    std::lock_guard lock(mu_);
    if (!finished_) {
      queue_.push_back({std::move(call), std::move(reply)});
      wake_.notify_all();
      return;
    }
  }
  reply(FailedPrecondition("job is not receiving state"));
}

void ArrivalSession::Cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  wake_.notify_all();
}

bool ArrivalSession::Cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

ArrivalSession::State ArrivalSession::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

bool ArrivalSession::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

void ArrivalSession::SetState(State state) {
  std::lock_guard lock(mu_);
  state_ = state;
}

Status ArrivalSession::Expect(State state, const char* why) const {
  std::lock_guard lock(mu_);
  return state_ == state ? Status::Ok() : FailedPrecondition(why);
}

void ArrivalSession::Loop() {
  last_step_ns_ = MonotonicNowNs();
  for (;;) {
    std::optional<Step> step;
    {
      std::unique_lock lock(mu_);
      // A stream being received is watched closely: a rejected one is closed
      // within milliseconds, while its source's job may still be writing.
      const auto period = state_ == State::kReceiving && connection_.valid()
                              ? std::chrono::milliseconds(10)
                              : std::chrono::milliseconds(1000);
      wake_.wait_for(lock, period,
                     [this] { return !queue_.empty() || cancelled_ || state_ == State::kFailed; });
      if (cancelled_ || state_ == State::kRunning || state_ == State::kFailed) break;
      if (!queue_.empty()) {
        step.emplace(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (step) {
      step->reply(RunStep(step->call));
      if (bulk_) received_ = Receive();  // the source sends right after Begin's reply
      last_step_ns_ = MonotonicNowNs();
    } else {
      Watch();
    }
  }
  std::deque<Step> left;
  {
    std::lock_guard lock(mu_);
    finished_ = true;
    if (cancelled_) state_ = State::kAborted;
    left.swap(queue_);
  }
  for (Step& s : left) s.reply(FailedPrecondition("the migration of this job has ended"));
  incoming_.Reset();
  CloseConnection();
}

void ArrivalSession::Watch() {
  if (job_ == 0) return;
  if (!host_->LiveJob(static_cast<int64_t>(job_)).ok()) {
    SetState(State::kFailed);  // the copy died, or was killed by an abort
    return;
  }
  const State now = state();
  if (now == State::kReceiving && connection_.valid() &&
      cb_->transfer_state.load(std::memory_order_acquire) == runtime::kTransferFailed) {
    // The copy loads nothing more; its reason waits for migrate_commit.
    const std::string why = runtime::TransferError(cb_.get());
    GD_LOG(kWarn, "job %llu rejected the arriving stream (%s); its bulk connection is closed",
           (unsigned long long)job_, why.c_str());
    CloseConnection();
    return;
  }
  if (connection_.valid()) {
    // The stream arriving counts as the source speaking: a large state takes
    // longer to send than the silence allowed between two steps. Read from the
    // kernel (the job, which reads the stream, could write any count of its own).
    const uint64_t bytes = BytesReceived(connection_.get());
    if (bytes != bytes_seen_) {
      bytes_seen_ = bytes;
      last_step_ns_ = MonotonicNowNs();
    }
  }
  const uint64_t silent_ns = MonotonicNowNs() - last_step_ns_;
  if (now < State::kLoaded && silent_ns > timeouts_.arrival_silence_ns) {
    GD_LOG(kWarn,
           "job %llu: its source (%s) sent no step of the migration nor any of its state for %llu "
           "ms and its state has not loaded: the copy is dropped",
           (unsigned long long)job_, migrated_from_.c_str(), (unsigned long long)(silent_ns / kMs));
    CloseConnection();
    (void)host_->KillJob(job_);  // gone already is fine
    SetState(State::kFailed);
  }
}

void ArrivalSession::CloseConnection() {
  if (!connection_.valid()) return;
  shutdown(connection_.get(), SHUT_RDWR);  // a job still reading stops at once
  // Closed with linger 0 the connection is reset, not ended in order: the
  // source's job fails its next write rather than fill the send buffer first.
  const struct linger reset = {1, 0};
  (void)setsockopt(connection_.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  connection_.Reset();
}

Status ArrivalSession::MayResume() const {
  std::lock_guard lock(mu_);
  switch (state_) {
    case State::kRunning:
      return Status::Ok();
    case State::kLoaded:
      return FailedPrecondition(
          "holds its arrived state, but its source has not handed the job over (migrate_start, "
          "which the source sends until it is answered): released now, the job could train on "
          "both nodes");
    case State::kFailed:
    case State::kAborted:
      return FailedPrecondition("is a migration's copy whose migration failed: it holds no state");
    default:
      return FailedPrecondition(
          "is arriving by migration and its state has not loaded: released now, it would train "
          "from scratch");
  }
}

StatusOr<Json> ArrivalSession::RunStep(const Call& call) {
  if (call.request.type == MessageType::kMigratePrepare) return Prepare(call.body());
  // Every later step is about a job that must still be alive.
  GD_RETURN_IF_ERROR(host_->LiveJob(static_cast<int64_t>(job_)).status());
  switch (call.request.type) {
    case MessageType::kMigrateBegin:
      return Begin(call.body());
    case MessageType::kMigrateCommit:
      return Commit();
    case MessageType::kMigrateStart:
      return Start();
    default:
      return Unimplemented("not a step of a migration");
  }
}

StatusOr<Json> ArrivalSession::Prepare(const Json& req) {
  ArrivingJob job;
  job.name = req.at("name").get<std::string>();
  job.command = req.at("command").get<std::vector<std::string>>();
  job.cwd = req.at("cwd").get<std::string>();
  job.device = req.value("device", "");
  if (req.contains("weight")) job.weight = req["weight"].get<double>();
  job.migrated_from = req.at("source_node").get<std::string>() + "/" +
                      std::to_string(req.at("source_job").get<uint64_t>());
  auto env = protocol::EnvFromRequest(req);
  if (env.ok()) job.env = std::move(*env);
  Status ok = env.status();
  if (req.contains("uid")) {
    // The user it ran as on its source; never root, whatever a peer says.
    job.owner_uid = req["uid"].get<int64_t>();
    if (ok.ok() && (job.owner_uid <= 0 || job.owner_uid > 0xfffffffe))
      ok = PermissionDenied("an arriving job runs as a user of this node, never as root (uid " +
                            std::to_string(job.owner_uid) + ")");
  }
  StatusOr<Arrival> arrival = ok.ok() ? host_->StartArrival(job) : StatusOr<Arrival>(ok);
  if (!arrival.ok()) {
    SetState(State::kFailed);
    return arrival.status();
  }
  job_ = arrival->job;
  cb_ = arrival->cb;
  migrated_from_ = job.migrated_from;
  owner_uid_ = job.owner_uid;
  SetState(State::kWarm);
  return Json{{"job", job_}, {"log", arrival->log}};
}

StatusOr<Json> ArrivalSession::Begin(const Json& req) {
  if (state() == State::kReceiving) return FailedPrecondition("job is already receiving state");
  if (state() != State::kWarm || !host_->IsHeld(job_))
    return FailedPrecondition("job is not arriving by migration");
  if (cb_->phase.load() != runtime::kPhaseParked) return FailedPrecondition("job is not warm yet");
  GD_ASSIGN_OR_RETURN(BulkKey key, sealed::BulkKeyFromHex(req.at("bulk_key").get<std::string>()));
  GD_ASSIGN_OR_RETURN(auto bulk, BulkListener::Listen(bulk_host_));
  GD_ASSIGN_OR_RETURN(auto listener, UnixListener::Listen(socket_path_(job_), owner_uid_));
  const std::string target = "sealed:" + listener->path();
  GD_RETURN_IF_ERROR(host_->RequestTransfer(job_, runtime::kRequestRestore, target));
  GD_ASSIGN_OR_RETURN(incoming_, listener->Accept(timeouts_.receive_accept_ms));
  bulk_ = std::move(bulk);
  bulk_key_ = key;
  SetState(State::kReceiving);
  return Json{{"bulk_port", bulk_->port()}};
}

// Right after Begin's reply: the source connects; its connection goes to the job.
Status ArrivalSession::Receive() {
  const std::unique_ptr<BulkListener> listener = std::move(bulk_);
  auto cancelled = [this] { return Cancelled(); };
  Status received = [&]() -> Status {
    GD_ASSIGN_OR_RETURN(auto source,
                        listener->Accept(bulk_key_, job_, timeouts_.receive_accept_ms, cancelled));
    GD_RETURN_IF_ERROR(
        sealed::SendHandoff(incoming_.get(), source->fd(), bulk_key_, source->next_seq(), 0));
    connection_ = source->Release();  // kept to shut it down should the migration end early
    return Status::Ok();
  }();
  if (!received.ok())
    GD_LOG(kWarn, "job %llu: its state did not arrive: %s", (unsigned long long)job_,
           received.ToString().c_str());
  incoming_.Reset();  // the job has the connection, or sees none and loads nothing
  return received;
}

StatusOr<Json> ArrivalSession::Commit() {
  GD_RETURN_IF_ERROR(Expect(State::kReceiving, "job is not receiving state"));
  GD_RETURN_IF_ERROR(received_);
  SetState(State::kLoading);
  runtime::ControlBlock* cb = cb_.get();
  const auto transfer =
      runtime::WaitForTransfer(cb, timeouts_.load_ns, [this] { return Cancelled(); });
  if (transfer != runtime::kTransferDone && transfer != runtime::kTransferFailed && Cancelled()) {
    shutdown(connection_.get(), SHUT_RDWR);  // the job stops reading at once
    return Unavailable("the migration was aborted");
  }
  if (transfer == runtime::kTransferDone) {
    // Its source ends its own process once this replies: the copy is the job
    // from here. On disk first, so that a restarted gandivad holds it for its
    // source's migrate_start; then it no longer exits should this node go.
    GD_RETURN_IF_ERROR(host_->MarkLoaded(job_));
    cb->exit_if_orphaned.store(0);
    SetState(State::kLoaded);
    GD_LOG(kInfo,
           "job %llu: its state from %s has loaded; held until its source sends "
           "migrate_start",
           (unsigned long long)job_, migrated_from_.c_str());
    return Json{{"bytes", cb->transfer_bytes.load()}};
  }
  if (transfer == runtime::kTransferFailed)
    return DataLoss("the job could not load the state: " + runtime::TransferError(cb));
  return DeadlineExceeded("the job did not finish loading its state");
}

StatusOr<Json> ArrivalSession::Start() {
  GD_RETURN_IF_ERROR(Expect(State::kLoaded,
                            "job's state has not loaded here (migrate_commit): started now, it "
                            "would train from scratch"));
  host_->MarkStarted(job_);  // on disk before it runs: a restarted gandivad lets it run
  host_->SetHeld(job_, false);
  // Reply once it runs (or has queued behind the device's other jobs).
  runtime::WaitForPhase(cb_.get(), runtime::kPhaseRunning, timeouts_.start_ns);
  SetState(State::kRunning);
  return StartedReply(*cb_);
}

}  // namespace gandiva::controller
