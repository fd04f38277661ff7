// The gang's thread: the leader's requests carried out on every rank; see gang.h.
#include "jobs/gang.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/environment.h"
#include "jobs/gang_transfer.h"
#include "jobs/process_identity.h"

namespace gandiva::controller {

using runtime::ControlBlock;
using runtime::FutexWait;
using runtime::FutexWakeAll;

namespace {
// Settling a park or a resume: look at the ranks this often.
constexpr uint64_t kBusyPollNs = 1 * kMs;
// Otherwise (running, or parked): heartbeats and rank deaths are seen this often.
constexpr uint64_t kIdlePollNs = 20 * kMs;

// How a process that died reads in /proc while it is a zombie (its parent, the
// launcher, has not reaped it yet): "was killed by signal 9", "exited with code 1".
std::string HowItDied(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return "died";
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return "died";
  std::istringstream fields(line.substr(paren + 2));
  std::string f;
  // After the command: field 3 (state) ... field 52 (exit_code, the wait status).
  for (int i = 3; i <= 52 && fields >> f; ++i) {
    if (i == 52) {
      const int status = std::atoi(f.c_str());
      if (status & 0x7f) return "was killed by signal " + std::to_string(status & 0x7f);
      return "exited with code " + std::to_string((status >> 8) & 0xff);
    }
  }
  return "died";
}

}  // namespace

StatusOr<std::unique_ptr<Gang>> Gang::Create(std::shared_ptr<runtime::SharedControlBlock> leader,
                                             uint32_t ranks, uint64_t register_timeout_ns,
                                             int64_t owner_uid) {
  ControlBlock* cb = leader->get();
  std::vector<std::unique_ptr<runtime::SharedControlBlock>> blocks;
  for (uint32_t k = 0; k < ranks; ++k) {
    const std::string name = leader->name() + runtime::kRankBlockSuffix + std::to_string(k);
    auto block =
        runtime::SharedControlBlock::Create(name, cb->job_id, cb->lease_ns, cb->node, owner_uid);
    if (!block.ok()) {
      for (auto& b : blocks) runtime::SharedControlBlock::Remove(b->name());
      return block.status();
    }
    ControlBlock* r = (*block)->get();
    r->gang_rank = k;
    r->gang_size = ranks;
    r->heartbeat_ns.store(cb->heartbeat_ns.load());
    runtime::RequestSuspend(r);  // every rank parks at its first boundary (target 0)
    blocks.push_back(std::move(block).value());
  }
  cb->gang_rank = runtime::kGangLeader;
  cb->gang_size = ranks;
  return std::unique_ptr<Gang>(
      new Gang(std::move(leader), std::move(blocks), register_timeout_ns, owner_uid));
}

StatusOr<std::unique_ptr<Gang>> Gang::Adopt(std::shared_ptr<runtime::SharedControlBlock> leader,
                                            uint32_t ranks, uint64_t register_timeout_ns,
                                            int64_t owner_uid) {
  std::vector<std::unique_ptr<runtime::SharedControlBlock>> blocks;
  for (uint32_t k = 0; k < ranks; ++k) {
    const std::string name = leader->name() + runtime::kRankBlockSuffix + std::to_string(k);
    auto block = runtime::SharedControlBlock::Open(name);
    if (!block.ok() || (*block)->get()->gang_rank != k || (*block)->get()->gang_size != ranks)
      return NotFound("rank " + std::to_string(k) + "'s control block " + name + " is gone");
    blocks.push_back(std::move(block).value());
  }
  // Ranks that ended meanwhile show as gone when the thread first looks: the gang fails.
  std::unique_ptr<Gang> gang(
      new Gang(std::move(leader), std::move(blocks), register_timeout_ns, owner_uid));
  // The ranks may be running (released, or resumed on their lease): the next
  // suspend is a new one, parking them all at one iteration.
  gang->resumed_ = true;
  return gang;
}

Gang::Gang(std::shared_ptr<runtime::SharedControlBlock> leader,
           std::vector<std::unique_ptr<runtime::SharedControlBlock>> ranks, uint64_t timeout_ns,
           int64_t owner_uid)
    : leader_block_(std::move(leader)),
      leader_(leader_block_->get()),
      ranks_(std::move(ranks)),
      register_timeout_ns_(timeout_ns),
      register_deadline_ns_(MonotonicNowNs() + timeout_ns),
      owner_uid_(owner_uid),
      pidfds_(ranks_.size()),
      gone_(ranks_.size(), false),
      pids_(ranks_.size(), 0),
      kill_fds_(ranks_.size()) {}

Gang::~Gang() {
  stopping_.store(true);
  Join();
}

void Gang::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void Gang::Finish() {
  if (stopping_.exchange(true)) return;
  FutexWakeAll(&leader_->request);
  for (auto& r : ranks_) runtime::SharedControlBlock::Remove(r->name());
  if (!AllExited()) KillAll();  // failed, killed or migrated: no rank runs on alone
}

void Gang::ReleaseForever() {
  release_.store(true);
  stopping_.store(true);
  FutexWakeAll(&leader_->request);
  Join();
  for (auto& r : ranks_) {
    runtime::ReleaseForever(r->get());
    runtime::SharedControlBlock::Remove(r->name());
  }
}

void Gang::ReleaseUntilAdopted() {
  stopping_.store(true);
  FutexWakeAll(&leader_->request);
  Join();
  for (auto& r : ranks_) runtime::RequestResume(r->get());
}

void Gang::Join() {
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  if (transfer_.joinable()) transfer_.join();
}

void Gang::SetLauncher(int pid) {
  UniqueFd fd = OpenPidfd(pid);
  std::lock_guard lock(mu_);
  launcher_ = std::move(fd);
}

void Gang::KillAll() {
  killed_.store(true);
  std::lock_guard lock(mu_);
  for (size_t k = 0; k < ranks_.size(); ++k)
    if (rank(k)->phase.load() != runtime::kPhaseExited) SignalProcess(kill_fds_[k], SIGKILL);
  SignalProcess(launcher_, SIGTERM);
}

std::string Gang::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

bool Gang::AllExited() const {
  for (size_t k = 0; k < ranks_.size(); ++k)
    if (rank(k)->phase.load(std::memory_order_acquire) != runtime::kPhaseExited) return false;
  return true;
}

std::vector<RankView> Gang::Views() const {
  std::vector<RankView> views(ranks_.size());
  for (size_t k = 0; k < ranks_.size(); ++k) {
    const uint32_t phase = rank(k)->phase.load(std::memory_order_acquire);  // then the count
    views[k].count = rank(k)->profile.iterations.load(std::memory_order_relaxed);
    views[k].state = phase == runtime::kPhaseRunning  ? RankView::kRunning
                     : phase == runtime::kPhaseParked ? RankView::kParked
                     : phase == runtime::kPhaseExited ? RankView::kExited
                                                      : RankView::kStarting;
  }
  return views;
}

void Gang::Loop() {
  while (!stopping_.load()) {
    Forward();
    WatchRanks();
    if (!killed_.load()) Drive();
    MirrorProfile();
    const uint32_t request = leader_->request.load(std::memory_order_acquire);
    const uint32_t phase = leader_->phase.load();
    const bool busy = transfer_.joinable() || (request == runtime::kRequestRun) != resumed_ ||
                      (request != runtime::kRequestRun && !settled_) ||
                      (request == runtime::kRequestRun && phase != runtime::kPhaseRunning &&
                       phase != runtime::kPhaseExited);
    // RequestSuspend and RequestResume on a leader wake us; so does Finish.
    FutexWait(&leader_->request, request, busy ? kBusyPollNs : kIdlePollNs);
  }
}

void Gang::Forward() {
  const uint64_t beat = leader_->heartbeat_ns.load(std::memory_order_acquire);
  const uint32_t orphan = leader_->exit_if_orphaned.load(std::memory_order_acquire);
  for (size_t k = 0; k < ranks_.size(); ++k) {
    rank(k)->heartbeat_ns.store(beat, std::memory_order_release);
    rank(k)->exit_if_orphaned.store(orphan, std::memory_order_release);
  }
}

void Gang::WatchRanks() {
  for (size_t k = 0; k < ranks_.size(); ++k) {
    ControlBlock* r = rank(k);
    if (gone_[k]) continue;
    if (ranks_[k]->cut_short()) {  // by its user: nothing in it can be trusted again
      gone_[k] = true;
      Fail("rank " + std::to_string(k) + "'s control block was cut short by its user");
      continue;
    }
    if (!pidfds_[k].valid()) {
      const int pid = r->pid.load(std::memory_order_acquire);
      if (pid <= 0) continue;  // not registered yet
      pids_[k] = pid;
      // The rank's block is its user's: the pid in it is taken only for a
      // process that user could signal, and held by a pidfd from here on.
      StatusOr<UniqueFd> held = OpenProcessOf(pid, owner_uid_);
      if (held.status().code() == StatusCode::kPermissionDenied) {
        gone_[k] = true;
        Fail("rank " + std::to_string(k) + " reported pid " + std::to_string(pid) +
             ", which is not its user's: " + held.status().message());
        continue;
      }
      if (!held.ok()) {  // gone already
        gone_[k] = true;
        if (r->phase.load() != runtime::kPhaseExited)
          Fail("rank " + std::to_string(k) + " (pid " + std::to_string(pid) + ") died");
        continue;
      }
      pidfds_[k] = std::move(held).value();
      UniqueFd copy(fcntl(pidfds_[k].get(), F_DUPFD_CLOEXEC, 0));
      std::lock_guard lock(mu_);
      kill_fds_[k] = std::move(copy);
    }
    pollfd p{pidfds_[k].get(), POLLIN, 0};
    if (poll(&p, 1, 0) != 1) continue;
    gone_[k] = true;
    pidfds_[k].Reset();
    // Detached (phase exited) at exit; a crash after that (an uncaught exception
    // runs the atexit handler too) still shows in the exit code.
    const std::string how = HowItDied(pids_[k]);
    const bool detached = r->phase.load() == runtime::kPhaseExited;
    const bool clean = detached && (how == "died" || how == "exited with code 0");
    if (!clean)
      Fail("rank " + std::to_string(k) + " (pid " + std::to_string(pids_[k]) + ") " +
           (how == "died" ? "died without detaching" : how));
  }
  if (MonotonicNowNs() < register_deadline_ns_) return;
  for (size_t k = 0; k < ranks_.size(); ++k) {
    if (rank(k)->pid.load() != 0) continue;
    Fail("rank " + std::to_string(k) + " of job " + std::to_string(leader_->job_id) +
         " never registered within " + std::to_string(register_timeout_ns_ / kSec) + " s");
    return;
  }
}

void Gang::Drive() {
  const uint32_t request = leader_->request.load(std::memory_order_acquire);
  if (transfer_.joinable()) {
    if (transfer_done_.load()) FinishTransfer();
    return;  // parked at one iteration until the transfer is over
  }
  if (request == runtime::kRequestRun) {
    Resume();
    return;
  }
  Suspend();
  if (settled_ && (request == runtime::kRequestCheckpoint || request == runtime::kRequestRestore))
    StartTransfer(request);
}

void Gang::Resume() {
  if (!resumed_) {
    for (auto& r : ranks_) runtime::RequestResume(r->get());
    resumed_ = true;
    settled_ = false;
  }
  // The leader runs once every rank has left its park (or started).
  if (leader_->phase.load() == runtime::kPhaseRunning) return;
  uint64_t resumed_at = 0;
  for (size_t k = 0; k < ranks_.size(); ++k) {
    const uint32_t phase = rank(k)->phase.load(std::memory_order_acquire);
    if (phase != runtime::kPhaseRunning && phase != runtime::kPhaseExited) return;
    resumed_at = std::max(resumed_at, rank(k)->resumed_at_ns.load());
  }
  if (leader_->phase.load() == runtime::kPhaseParked) {
    leader_->resumed_at_ns.store(resumed_at);
    const uint64_t parked_at = leader_->parked_at_ns.load();
    if (resumed_at > parked_at) leader_->parked_total_ns.fetch_add(resumed_at - parked_at);
  }
  leader_->phase.store(runtime::kPhaseRunning, std::memory_order_release);
  FutexWakeAll(&leader_->phase);
}

void Gang::Suspend() {
  std::vector<RankView> views = Views();
  if (resumed_) {  // a new suspend: every rank parks one boundary past the furthest one
    resumed_ = false;
    target_ = FirstParkTarget(views);
    for (auto& r : ranks_) r->get()->park_at_boundary.store(target_, std::memory_order_release);
    for (auto& r : ranks_) runtime::RequestSuspend(r->get());
  }
  if (settled_) return;
  const GangParkDecision d = DecideGangPark(views, target_);
  if (d.kind == GangParkDecision::kRaise) {
    GD_LOG(kDebug,
           "job %llu: a rank passed boundary %llu before it saw the suspend; parking at %llu",
           static_cast<unsigned long long>(leader_->job_id),
           static_cast<unsigned long long>(target_), static_cast<unsigned long long>(d.target));
    target_ = d.target;
    for (auto& r : ranks_) r->get()->park_at_boundary.store(target_, std::memory_order_release);
  }
  if (d.kind != GangParkDecision::kParked) {
    // Parked below the target: wake them to run up to it (again, each look: a
    // rank may have checked the target just before it moved, then slept).
    for (size_t k = 0; k < ranks_.size(); ++k)
      if (views[k].state == RankView::kParked && views[k].count < target_)
        FutexWakeAll(&rank(k)->request);
    return;
  }
  settled_ = true;
  uint64_t parked_at = 0;
  for (size_t k = 0; k < ranks_.size(); ++k)
    parked_at = std::max(parked_at, rank(k)->parked_at_ns.load());
  leader_->parked_at_ns.store(parked_at, std::memory_order_relaxed);
  leader_->park_count.fetch_add(1, std::memory_order_relaxed);
  leader_->phase.store(runtime::kPhaseParked, std::memory_order_release);
  FutexWakeAll(&leader_->phase);  // the device loop or the migrator waits for the park
}

void Gang::StartTransfer(uint32_t kind) {
  const std::string target(leader_->transfer_target,
                           strnlen(leader_->transfer_target, runtime::kTransferTargetSize));
  leader_->transfer_state.store(runtime::kTransferBusy, std::memory_order_release);
  transfer_kind_ = kind;
  transfer_done_.store(false);
  transfer_started_ns_ = MonotonicNowNs();
  std::vector<ControlBlock*> ranks;
  for (auto& r : ranks_) ranks.push_back(r->get());
  transfer_ = std::thread([this, kind, target, ranks] {
    transfer_status_ = GangTransfer(kind, target, ranks, owner_uid_, stopping_, &transfer_bytes_);
    transfer_done_.store(true);
    FutexWakeAll(&leader_->request);
  });
}

// Reported on the leader as a job reports its own transfer (JobRuntime::Transfer).
void Gang::FinishTransfer() {
  transfer_.join();
  const Status& s = transfer_status_;
  leader_->transfer_bytes.store(transfer_bytes_, std::memory_order_relaxed);
  leader_->transfer_ns.store(MonotonicNowNs() - transfer_started_ns_, std::memory_order_relaxed);
  std::snprintf(leader_->transfer_error, runtime::kTransferErrorSize, "%s",
                s.ok() ? "" : s.ToString().c_str());
  uint32_t expected = transfer_kind_;
  leader_->request.compare_exchange_strong(expected, runtime::kRequestSuspend);
  leader_->transfers.fetch_add(1, std::memory_order_relaxed);
  leader_->transfer_state.store(s.ok() ? runtime::kTransferDone : runtime::kTransferFailed,
                                std::memory_order_release);
  FutexWakeAll(&leader_->transfer_state);
}

// The leader's profile is rank 0's (the ranks run in lockstep), and its
// fail-open flag any rank's.
void Gang::MirrorProfile() {
  const runtime::ProfileRing& from = rank(0)->profile;
  runtime::ProfileRing& to = leader_->profile;
  const uint64_t n = from.iterations.load(std::memory_order_relaxed);
  for (uint64_t i =
           std::max(mirrored_, n > runtime::kProfileRingSize ? n - runtime::kProfileRingSize : 0);
       i < n; ++i)
    to.ring_ns[i % runtime::kProfileRingSize].store(
        from.ring_ns[i % runtime::kProfileRingSize].load(std::memory_order_relaxed),
        std::memory_order_relaxed);
  mirrored_ = n;
  to.ewma_ns.store(from.ewma_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  to.total_ns.store(from.total_ns.load(std::memory_order_relaxed), std::memory_order_relaxed);
  to.last_boundary_ns.store(from.last_boundary_ns.load(std::memory_order_relaxed),
                            std::memory_order_relaxed);
  to.iterations.store(n, std::memory_order_relaxed);
  // What every rank registered: the migrator refuses a job that registered nothing.
  uint32_t registered = UINT32_MAX;
  for (size_t k = 0; k < ranks_.size(); ++k) {
    if (rank(k)->fail_open.load()) leader_->fail_open.store(1);
    registered = std::min(registered, rank(k)->registered_states.load(std::memory_order_relaxed));
  }
  leader_->registered_states.store(registered, std::memory_order_relaxed);
  if (leader_->phase.load() != runtime::kPhaseExited && AllExited()) {
    leader_->phase.store(runtime::kPhaseExited, std::memory_order_release);
    FutexWakeAll(&leader_->phase);
  }
}

void Gang::Fail(const std::string& why) {
  if (killed_.load()) return;  // killed on purpose (a migration, a failure seen already)
  {
    std::lock_guard lock(mu_);
    if (!error_.empty()) return;
    error_ = why;
  }
  GD_LOG(kWarn, "job %llu: %s; the gang fails (its other ranks are killed)",
         static_cast<unsigned long long>(leader_->job_id), why.c_str());
  KillAll();
}

}  // namespace gandiva::controller
