// Node: the job table on disk, and taking the jobs it lists back after a
// restart (crash, SIGKILL or a plain stop and start); see node.h.
//
// A job is re-adopted when its process still runs (the same process: pid and
// start time, in this boot) and its control block is still there: it is
// listed again under its id, heartbeat and watch resume, it queues on its
// device again with its weight, its suspension by its user and its device
// figures. Its own figures (iterations, iteration times) live in its control
// block and simply continue. A job that ended meanwhile is recorded as ended
// then; one that cannot be re-adopted is released to run on and says why.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "gandiva/common/clock.h"
#include "gandiva/common/log.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/environment.h"
#include "jobs/process_identity.h"
#include "node.h"

namespace gandiva::controller {

namespace {

namespace fs = std::filesystem;

constexpr const char* kStoreFile = "jobs.db";
constexpr const char* kLockFile = "gandivad.lock";

// A gang's rank blocks, named after its leader's (gang.h).
std::vector<std::string> RankBlockNames(const std::string& leader, uint32_t ranks) {
  std::vector<std::string> names;
  for (uint32_t k = 0; ranks > 1 && k < ranks; ++k)
    names.push_back(leader + runtime::kRankBlockSuffix + std::to_string(k));
  return names;
}

// Lets every process behind a job that will not be managed again run on for good.
void ReleaseBlocksForever(const std::string& leader, uint32_t ranks) {
  std::vector<std::string> names = RankBlockNames(leader, ranks);
  names.push_back(leader);
  for (const auto& name : names) {
    if (auto block = runtime::SharedControlBlock::Open(name); block.ok())
      runtime::ReleaseForever((*block)->get());
    runtime::SharedControlBlock::Remove(name);
  }
}

}  // namespace

Status Node::OpenStore() {
  if (options_.state_dir.empty()) return Status::Ok();  // nothing to keep it in (tests)
  // One gandivad per state directory: two would manage, and release, the same jobs.
  const std::string lock_path = options_.state_dir + "/" + kLockFile;
  state_lock_.Reset(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!state_lock_.valid())
    return Unavailable("cannot open " + lock_path + ": " + std::strerror(errno));
  if (flock(state_lock_.get(), LOCK_EX | LOCK_NB) != 0)
    return FailedPrecondition("another gandivad uses the state directory " + options_.state_dir +
                              " (it holds " + lock_path + ")");
  const std::string path = options_.state_dir + "/" + kStoreFile;
  auto store = JobStore::Open(path);
  if (!store.ok() && store.status().code() == StatusCode::kDataLoss) {
    // A table that cannot be read must not keep the node from serving: keep the
    // file for whoever wants to look, and start with none.
    const std::string aside = path + ".unreadable." + std::to_string(time(nullptr));
    std::error_code ec;
    fs::rename(path, aside, ec);
    fs::remove(path + "-wal", ec);
    fs::remove(path + "-shm", ec);
    GD_LOG(kError, "%s; moved to %s, starting with no jobs", store.status().ToString().c_str(),
           aside.c_str());
    store = JobStore::Open(path);
  }
  if (!store.ok()) return store.status();
  store_ = std::move(store).value();
  return Status::Ok();
}

void Node::Readopt() {
  if (!store_) return;
  auto stored = store_->LoadAll();
  auto boot = store_->Boot();
  if (!stored.ok() || !boot.ok()) {
    GD_LOG(kError, "%s: cannot read the jobs back: %s", store_->path().c_str(),
           (stored.ok() ? boot.status() : stored.status()).ToString().c_str());
    return;
  }
  const std::string this_boot = BootId();
  const bool same_boot = !this_boot.empty() && *boot == this_boot;
  if (Status s = store_->SetBoot(this_boot); !s.ok())
    GD_LOG(kWarn, "%s: %s", store_->path().c_str(), s.ToString().c_str());
  jobs_.SetStore(store_.get());
  int adopted = 0, ended = 0;
  // Jobs this node had handed to another whose migrate_start was not answered:
  // the state waits there, held, and this node sends it again (migration_stage.h).
  std::vector<std::pair<uint64_t, std::string>> handing_over;
  for (const StoredJob& s : *stored)
    if (s.job.departure == DepartureStage::kCommitted)
      handing_over.emplace_back(s.job.id, s.job.migrated_to);
  for (StoredJob& s : *stored) {
    if (s.job.ended) {
      if (s.job.launched) logs_.Add(s.job.id, s.job.stdout_log, s.job.stderr_log);
      jobs_.Restore(std::move(s.job), UniqueFd());
      continue;
    }
    if (ReadoptOne(std::move(s), same_boot))
      ++adopted;
    else
      ++ended;
  }
  if (adopted || ended)
    GD_LOG(kInfo, "re-adopted %d job(s) from %s; %d ended while gandivad was away", adopted,
           store_->path().c_str(), ended);
  for (const auto& [id, to] : handing_over) migrator_.ResumeHandOver(id, to);
}

bool Node::ReadoptOne(StoredJob stored, bool same_boot) {
  Job job = std::move(stored.job);
  const uint64_t id = job.id;
  if (job.launched) logs_.Add(id, job.stdout_log, job.stderr_log);
  // What stands in the way, in the order it is found; "" once all is well.
  std::string why_not;
  UniqueFd pidfd;
  if (!same_boot) why_not = "the machine restarted";
  if (why_not.empty()) {
    auto opened = runtime::SharedControlBlock::Open(stored.block_name);
    if (opened.ok() && (*opened)->get()->job_id == id)
      job.block = std::move(opened).value();  // kept also if the job ended: its figures
    else
      why_not = "its control block " + stored.block_name + " is gone";
  }
  runtime::ControlBlock* cb = job.cb();
  // A job reported to no gandivad yet may have attached already: its block
  // names its process. The block is the job's user's, so that pid is taken only
  // for a process the user could signal (OpenProcessOf), as job_started's is.
  const bool pid_from_block = cb && job.pid <= 0;
  if (pid_from_block) job.pid = cb->pid.load();
  if (why_not.empty()) {
    // The pidfd first: once open it pins the process, so the start time read
    // after it is that process's.
    StatusOr<UniqueFd> held = OpenProcessOf(job.pid, pid_from_block ? job.owner_uid : -1);
    UniqueFd fd = held.ok() ? std::move(held).value() : UniqueFd();
    const auto started = ProcessStartTicks(job.pid);
    if (held.status().code() == StatusCode::kPermissionDenied)
      why_not = "its block names process " + std::to_string(job.pid) +
                ", which is not its user's: " + held.status().message();
    else if (!fd.valid())
      why_not = job.pid > 0 ? "its process " + std::to_string(job.pid) + " ended"
                            : "it never reported a process";
    else if (job.process_start && started != job.process_start)
      why_not = "its process ended (pid " + std::to_string(job.pid) + " is another one now)";
    else
      pidfd = std::move(fd);
  }
  if (why_not.empty() && cb->controller_gone.load()) why_not = "a gandivad released it for good";
  // Never two copies of one job training: a migration's copy whose state had not
  // arrived exits once released (exit_if_orphaned), and a job that had moved on
  // to another node, but whose process this node had not ended yet, is ended now.
  // A copy whose state had loaded is the job (its source may have ended its
  // own): taken back held, until its source's migrate_start (migration_stage.h).
  const bool loaded_copy = job.arrival == ArrivalStage::kLoaded;
  if (why_not.empty() && !loaded_copy && cb->exit_if_orphaned.load())
    why_not = "it was a migration's copy whose state had not arrived";
  const bool moved_on = why_not.empty() && job.migrated();
  if (moved_on) {
    SignalProcess(pidfd, SIGKILL);
    // As Gang::KillAll: a rank that detached is not signalled, and a rank's
    // pid (from its user's block) only if the user could signal it.
    for (const std::string& name : RankBlockNames(stored.block_name, job.ranks))
      if (auto rank = runtime::SharedControlBlock::Open(name); rank.ok())
        if (const int pid = (*rank)->get()->pid.load();
            pid > 0 && (*rank)->get()->phase.load() != runtime::kPhaseExited)
          if (auto held = OpenProcessOf(pid, job.owner_uid); held.ok())
            SignalProcess(*held, SIGKILL);
    why_not = "it had moved to another node";
  }
  std::unique_ptr<Gang> gang;
  if (why_not.empty() && job.ranks > 1) {
    auto adopted = Gang::Adopt(job.block, job.ranks, options_.rank_timeout_ms * kMs, job.owner_uid);
    if (adopted.ok())
      gang = std::move(adopted).value();
    else
      why_not = adopted.status().message();
  }
  // Its devices, sliced together again if it spans several. Devices this node
  // no longer has: as many others as it had, the least loaded.
  DeviceLoop* dev = nullptr;
  if (why_not.empty()) {
    if (job.devices.empty()) job.devices = {job.device};
    auto loop = LoopFor(job.devices);
    if (!loop.ok()) {
      const std::string before = DeviceListText(job.devices);
      const std::string why = loop.status().ToString();  // not the second try's
      job.devices = PickDevices(job.devices.size(), "");
      job.device = job.devices.front();
      loop = LoopFor(job.devices);
      GD_LOG(kWarn, "job %llu: its devices %s cannot be had (%s); it goes on %s",
             static_cast<unsigned long long>(id), before.c_str(), why.c_str(),
             DeviceListText(job.devices).c_str());
    }
    if (loop.ok())
      dev = *loop;
    else
      why_not = "its devices cannot be had: " + loop.status().message();
  }

  if (!why_not.empty()) {
    // Ended while gandivad was away, or left to run on unmanaged: recorded as ended.
    const bool alive = pidfd.valid();
    const bool detached = cb && cb->phase.load() == runtime::kPhaseExited;
    ReleaseBlocksForever(stored.block_name, job.ranks);
    job.ended = true;
    job.failed = !detached && !moved_on;
    job.ended_ns = MonotonicNowNs();
    job.usage_at_end = stored.usage;
    job.FreezeFigures();
    const bool copy = cb && cb->exit_if_orphaned.load();  // released, it exits by itself
    std::string detail;
    if (moved_on)
      detail = "it continues on another node; its process here was ended";
    else if (alive)
      detail = "not re-adopted after gandivad restarted (" + why_not + "); its process " +
               std::to_string(job.pid) + (copy ? " exits" : " runs on unmanaged");
    else if (detached)
      detail = "it ended while gandivad was away, after detaching (exit status unknown)";
    else
      detail = "it ended while gandivad was away (" + why_not + ")";
    job.end = {moved_on ? protocol::ExitReason::kMigrated : protocol::ExitReason::kLost, 0,
               std::move(detail)};
    if (alive)
      GD_LOG(kWarn, "job %llu (%s): %s", static_cast<unsigned long long>(id), job.name.c_str(),
             job.end.detail.c_str());
    else
      GD_LOG(kInfo, "job %llu (%s): %s", static_cast<unsigned long long>(id), job.name.c_str(),
             job.end.detail.c_str());
    MemoryCgroups::Remove(job.cgroup_dir);
    jobs_.Restore(std::move(job), UniqueFd());
    return false;
  }

  // Managed again: it parks at its next boundary (at once if it is parked, or
  // held at its first) and queues on its device. If it ran unmanaged after its
  // lease ran out, the fresh heartbeat brings it back (job_runtime.cc).
  job.spawned = false;  // its parent was the old gandivad: its exit status is not ours to reap
  runtime::Heartbeat(cb, MonotonicNowNs());
  runtime::RequestSuspend(cb);
  // Its state is here, recorded before the old gandivad cleared this (if it did).
  if (loaded_copy) cb->exit_if_orphaned.store(0);
  const bool held = stored.held || loaded_copy;
  const std::string migrated_from = job.migrated_from;
  const int fd = pidfd.get();
  jobs_.Restore(job, std::move(pidfd));  // the table owns the fd from here
  monitor_.WatchFd(id, fd);  // after: an exit that came first is seen now, with the job listed
  if (gang) {
    gang->SetLauncher(job.pid);
    gang->Start();
    std::lock_guard lock(mu_);
    gangs_[id] = std::move(gang);
  }
  dev->AddJob(id, job.SharedCb(), job.weight, held, stored.usage, MaskOn(*dev, job.devices));
  dev->SetMemoryCap(id, job.GpuMemoryCap());
  dev->SetProcess(id, job.pid);
  if (stored.held) store_->PutHeld(id, true);
  if (loaded_copy) migrator_.AdoptLoadedArrival(id, job.SharedCb(), migrated_from);
  GD_LOG(kInfo, "job %llu (%s) re-adopted: pid %d on %s%s", static_cast<unsigned long long>(id),
         job.name.c_str(), job.pid, DeviceListText(job.devices).c_str(),
         loaded_copy ? (", its state loaded from " + migrated_from +
                        ": held until its source sends migrate_start")
                           .c_str()
         : stored.held ? ", suspended"
                       : "");
  return true;
}

void Node::SetUserHeld(uint64_t id, bool held) {
  SetHeld(id, held);
  if (store_) store_->PutHeld(id, held);
}

void Node::FlushUsage() {
  if (!store_) return;
  std::vector<std::pair<uint64_t, DeviceUsage>> usage;
  const uint64_t now = MonotonicNowNs();
  for (const Job& job : jobs_.LiveJobs()) {
    DeviceUsage u = UsageOf(job);
    u.device_time_ns = u.DeviceTimeAt(now);
    u.running_since_ns = 0;
    usage.emplace_back(job.id, u);
  }
  store_->PutUsage(usage);
}

}  // namespace gandiva::controller
