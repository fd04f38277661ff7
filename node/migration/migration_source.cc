// The source side of a migration; see migration_source.h.
#include "migration/migration_source.h"

#include <unistd.h>

#include <algorithm>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "migration/unix_socket.h"

namespace gandiva::controller {

using runtime::ControlBlock;

namespace {

// The operation's step while the source is in each state (kDone: none).
OperationStep StepOf(MigrationSource::State state) {
  constexpr OperationStep kSteps[] = {OperationStep::kPreparing, OperationStep::kWarming,
                                      OperationStep::kParking,   OperationStep::kStreaming,
                                      OperationStep::kRestoring, OperationStep::kSwitching,
                                      OperationStep::kNone};
  return kSteps[static_cast<size_t>(state)];
}
// The job connects once it starts writing its state. A job whose save fails
// before that (it registered no state, a section refused) never connects: stop
// waiting as soon as it says so, with its reason.
StatusOr<UniqueFd> AcceptFromJob(UnixListener& listener, ControlBlock* cb, int timeout_ms) {
  constexpr int kPollMs = 50;
  for (int waited = 0;; waited += kPollMs) {
    StatusOr<UniqueFd> conn = listener.Accept(std::min(kPollMs, std::max(1, timeout_ms - waited)));
    if (conn.ok() || conn.status().code() != StatusCode::kDeadlineExceeded) return conn;
    if (cb->transfer_state.load(std::memory_order_acquire) == runtime::kTransferFailed)
      return FailedPrecondition("the job could not write its state: " + runtime::TransferError(cb));
    if (waited + kPollMs >= timeout_ms)
      return DeadlineExceeded("the job did not connect to " + listener.path() + " within " +
                              std::to_string(timeout_ms) + " ms");
  }
}
}  // namespace

StatusOr<uint64_t> HoldAndPark(JobHost& host, const MovableJob& job, uint64_t timeout_ns,
                               const std::atomic<bool>& stopping) {
  const uint64_t asked = MonotonicNowNs();
  host.SetHeld(job.id, true);
  ControlBlock* cb = job.cb.get();
  const uint64_t deadline = asked + timeout_ns;
  for (;;) {
    const uint32_t phase = cb->phase.load(std::memory_order_acquire);
    if (phase == runtime::kPhaseParked) break;
    if (phase == runtime::kPhaseExited) return FailedPrecondition("the job exited");
    if (stopping) return Unavailable("the controller is stopping");
    const uint64_t now = MonotonicNowNs();
    if (now >= deadline) return DeadlineExceeded("the job reached no iteration boundary in time");
    runtime::FutexWait(&cb->phase, phase, std::min<uint64_t>(deadline - now, 100 * kMs));
  }
  // Downtime starts when the job stopped training for us, not earlier if it was queued.
  return std::max(cb->parked_at_ns.load(std::memory_order_relaxed), asked);
}

Status StartUntilAnswered(Peer& peer, uint64_t remote_job, const MigrationTimeouts& timeouts,
                          const std::atomic<bool>& stopping, uint32_t* tries) {
  const uint64_t deadline = MonotonicNowNs() + timeouts.start_retry_ns;
  for (*tries = 1;; ++*tries) {
    const uint64_t sent = MonotonicNowNs();
    Status started = peer.Start(remote_job);
    const bool unanswered = started.code() == StatusCode::kUnavailable ||
                            started.code() == StatusCode::kDeadlineExceeded;
    if (!unanswered || stopping || MonotonicNowNs() >= deadline) return started;
    GD_LOG(kWarn, "migrate_start of job %llu on %s had no answer (%s); sending it again",
           (unsigned long long)remote_job, peer.name().c_str(), started.ToString().c_str());
    // One try a poll period, however long an unanswered one took.
    const uint64_t next = sent + timeouts.start_retry_poll_ns;
    for (uint64_t now = MonotonicNowNs(); now < next && !stopping; now = MonotonicNowNs())
      usleep(static_cast<useconds_t>(std::min<uint64_t>(next - now, 50 * kMs) / 1000));
    if (stopping) return started;
  }
}

Status StartFailed(const std::string& peer, uint64_t remote_job, uint32_t tries,
                   const Status& why) {
  return Status(why.code(), "the state is on " + peer + " (job " + std::to_string(remote_job) +
                                ", parked) but it did not start (migrate_start sent " +
                                std::to_string(tries) + (tries == 1 ? " time" : " times") +
                                "): " + why.message());
}

MigrationSource::MigrationSource(Context context, uint64_t job, std::string device)
    : ctx_(std::move(context)), job_(job), device_(std::move(device)) {}

Status MigrationSource::Run() {
  for (State state = State::kPreparing; state != State::kDone;) {
    ctx_.update([step = StepOf(state)](Operation& op) { op.step = step; });
    StatusOr<State> next = RunStep(state);
    if (!next.ok()) return Fail(state, next.status());
    state = *next;
  }
  return Status::Ok();
}

StatusOr<MigrationSource::State> MigrationSource::RunStep(State state) {
  using Step = StatusOr<State> (MigrationSource::*)();
  constexpr Step kSteps[] = {&MigrationSource::Prepare, &MigrationSource::Warm,
                             &MigrationSource::Park,    &MigrationSource::Stream,
                             &MigrationSource::Restore, &MigrationSource::Switch};
  return (this->*kSteps[static_cast<size_t>(state)])();
}

Status MigrationSource::Fail(State state, const Status& why) {
  if (state >= State::kSwitching) return why;  // the source is gone; the state is there
  if (remote_job_ != 0) {
    Status aborted = ctx_.peer->Abort(remote_job_);
    if (!aborted.ok())
      GD_LOG(kWarn, "could not tell %s to drop job %llu: %s", ctx_.peer->name().c_str(),
             (unsigned long long)remote_job_, aborted.ToString().c_str());
  }
  if (held_) ctx_.host->SetHeld(job_, false);  // the job trains on here, from where it stopped
  return why;
}

// 1. The destination starts the job and lets it warm up to its first boundary.
StatusOr<MigrationSource::State> MigrationSource::Prepare() {
  auto job = ctx_.host->LiveJob(static_cast<int64_t>(job_));
  if (!job.ok()) return FailedPrecondition("the job ended");
  source_ = std::move(*job);
  Json env = Json::object();
  for (const auto& [k, v] : source_.env) env[k] = v;
  Json prepare = {{"name", source_.name}, {"command", source_.command}, {"cwd", source_.cwd},
                  {"env", env},           {"weight", source_.weight},   {"source_node", ctx_.node},
                  {"source_job", job_}};
  if (!device_.empty()) prepare["device"] = device_;
  // Its copy runs as the same user there (the destination checks that uid).
  if (source_.owner_uid >= 0 && source_.owner_uid != static_cast<int64_t>(geteuid()))
    prepare["uid"] = source_.owner_uid;
  GD_ASSIGN_OR_RETURN(remote_job_, ctx_.peer->Prepare(prepare));
  ctx_.update([rid = remote_job_](Operation& op) { op.to_job = rid; });
  return State::kWarming;
}

StatusOr<MigrationSource::State> MigrationSource::Warm() {
  for (const uint64_t deadline = MonotonicNowNs() + ctx_.timeouts->warm_ns;;) {
    GD_ASSIGN_OR_RETURN(JobState state, ctx_.peer->JobStateOf(remote_job_));
    if (state == JobState::kSuspended) return State::kParking;
    if (state == JobState::kDetached || protocol::HasEnded(state))
      return FailedPrecondition("the job's copy on " + ctx_.peer->name() + " " +
                                std::string(protocol::ToString(state)) + " while starting");
    if (*ctx_.stopping || MonotonicNowNs() > deadline)
      return DeadlineExceeded("the destination did not warm up");
    usleep(ctx_.timeouts->warm_poll_ns / 1000);
  }
}

// 2. Park the source at a boundary: downtime starts here.
StatusOr<MigrationSource::State> MigrationSource::Park() {
  held_ = true;
  GD_ASSIGN_OR_RETURN(parked_at_ns_,
                      HoldAndPark(*ctx_.host, source_, ctx_.timeouts->park_ns, *ctx_.stopping));
  return State::kStreaming;
}

// 3. The source job writes its state straight into the bulk connection to the
//    destination job, which we hand it; we only wait until it has written all.
StatusOr<MigrationSource::State> MigrationSource::Stream() {
  GD_ASSIGN_OR_RETURN(auto listener, UnixListener::Listen(ctx_.socket_path(), source_.owner_uid));
  ControlBlock* cb = source_.cb.get();
  const std::string target = "sealed:" + listener->path();
  GD_RETURN_IF_ERROR(ctx_.host->RequestTransfer(job_, runtime::kRequestCheckpoint, target));
  GD_RETURN_IF_ERROR(ctx_.peer->Begin(remote_job_));
  GD_ASSIGN_OR_RETURN(UniqueFd conn, AcceptFromJob(*listener, cb, ctx_.timeouts->stream_ms));
  GD_RETURN_IF_ERROR(ctx_.peer->HandOver(conn.get(), 0));
  const auto written = runtime::WaitForTransfer(cb, ctx_.timeouts->written_ns,
                                                [this] { return ctx_.stopping->load(); });
  if (written != runtime::kTransferDone && written != runtime::kTransferFailed)
    return *ctx_.stopping ? Unavailable("the controller is stopping")
                          : DeadlineExceeded("the job did not finish writing its state");
  if (written != runtime::kTransferDone) return WriteFailed();
  ctx_.update([bytes = cb->transfer_bytes.load()](Operation& op) { op.bytes = bytes; });
  return State::kRestoring;
}

// The job's write failed. Most often the destination's copy rejected a frame
// and closed the connection, so the job here saw only the break: the reason
// that matters is the copy's, which migrate_commit reports at once now that
// neither end of the stream is open.
Status MigrationSource::WriteFailed() {
  const std::string here = runtime::TransferError(source_.cb.get());
  ctx_.peer->EndBulk();
  StatusOr<uint64_t> there = ctx_.peer->Commit(remote_job_);
  if (there.ok()) return Internal("the job could not write its state: " + here);
  return Status(
      there.status().code(),
      there.status().message() + " (and so the job here could not write its state: " + here + ")");
}

// 4. The destination verifies every chunk and loads the state into the warm job.
StatusOr<MigrationSource::State> MigrationSource::Restore() {
  GD_RETURN_IF_ERROR(ctx_.peer->Commit(remote_job_).status());
  return State::kSwitching;
}

// 5. The state is safe there: end the source, then let the destination run.
//    Never both running: the source is gone before the copy starts.
StatusOr<MigrationSource::State> MigrationSource::Switch() {
  // Before the kill, so that its exit reads as the move it is, and on disk, so
  // that a restarted node still sends migrate_start.
  ctx_.host->MarkMigrated(job_, ctx_.peer->name() + "/" + std::to_string(remote_job_));
  // SIGKILL takes a parked, held process with it before it could run another
  // instruction of training, so the destination may start at once; the source's
  // teardown (~0.1 s for a large job) is off the downtime.
  (void)ctx_.host->KillJob(job_);  // gone already is fine
  uint32_t tries = 0;
  Status started =
      StartUntilAnswered(*ctx_.peer, remote_job_, *ctx_.timeouts, *ctx_.stopping, &tries);
  const double downtime_ms = (MonotonicNowNs() - parked_at_ns_) / 1e6;
  ctx_.host->EndMigrated(job_);
  ctx_.update([tries](Operation& op) { op.start_tries = tries; });
  if (!started.ok()) return StartFailed(ctx_.peer->name(), remote_job_, tries, started);
  ctx_.host->MarkHandedOver(job_);
  ctx_.update([downtime_ms](Operation& op) { op.downtime_ms = downtime_ms; });
  return State::kDone;
}

}  // namespace gandiva::controller
