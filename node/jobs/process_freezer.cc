// SIGSTOP / SIGCONT of parked jobs' process trees; see process_freezer.h.
#include "jobs/process_freezer.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "gandiva/common/log.h"
#include "jobs/process_identity.h"

namespace gandiva::controller {

std::vector<int32_t> ParseChildrenList(const std::string& text) {
  std::vector<int32_t> pids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    const long v = std::strtol(word.c_str(), &end, 10);
    if (*end == '\0' && v > 0 && v <= INT32_MAX) pids.push_back(static_cast<int32_t>(v));
  }
  return pids;
}

namespace {
// Children of every thread of `pid` (a child belongs to the thread that forked it).
std::vector<int32_t> ChildrenOf(int32_t pid) {
  std::vector<int32_t> children;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = opendir(tasks.c_str());
  if (!dir) return children;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(tasks + "/" + e->d_name + "/children");
    std::stringstream text;
    text << f.rdbuf();
    for (int32_t c : ParseChildrenList(text.str())) children.push_back(c);
  }
  closedir(dir);
  return children;
}
}  // namespace

ProcessFreezer::ProcessFreezer(bool enabled) {
  if (!enabled) return;
  auto guardian = FreezerGuardian::Start();
  if (!guardian.ok()) {
    GD_LOG(kWarn, "parked jobs will not be stopped: %s", guardian.status().ToString().c_str());
    return;
  }
  guardian_ = std::move(guardian).value();
}

ProcessFreezer::~ProcessFreezer() { ThawAll(); }

Status ProcessFreezer::Freeze(uint64_t job, int32_t pid) {
  std::lock_guard lock(mu_);
  if (!guardian_) return FailedPrecondition("freezing parked jobs is off");
  if (pid <= 0) return InvalidArgument("no process to stop");
  if (frozen_.count(job)) return Status::Ok();
  const std::optional<int64_t> user = ProcessRealUid(pid);
  if (!user) return NotFound("process " + std::to_string(pid) + " is gone");
  // Stop the root first, so that it forks no more while its tree is read; then
  // each child as it is found (a child forked meanwhile is found by the walk).
  std::vector<Stopped> stopped;
  std::vector<int32_t> queue{pid};
  std::set<int32_t> seen{pid};
  for (size_t i = 0; i < queue.size(); ++i) {
    const int32_t p = queue[i];
    if (stopped_count_ + stopped.size() >= FreezerGuardian::kCapacity) break;
    StatusOr<UniqueFd> held = OpenProcessOf(p, *user);
    if (!held.ok()) continue;  // gone meanwhile, or not the job's user's to stop
    if (!guardian_->WillStop({p})) {
      for (const Stopped& s : stopped) SignalProcess(s.pidfd, SIGCONT);
      GuardianLost();
      return Internal("the freezer guardian is gone");
    }
    if (!SignalProcess(*held, SIGSTOP)) {
      guardian_->Continued({p});
      continue;  // gone meanwhile
    }
    stopped.push_back({p, std::move(held).value()});
    for (int32_t c : ChildrenOf(p))
      if (seen.insert(c).second) queue.push_back(c);
  }
  if (stopped.empty()) return NotFound("process " + std::to_string(pid) + " is gone");
  stopped_count_ += stopped.size();
  frozen_[job] = std::move(stopped);
  ++freezes_;
  return Status::Ok();
}

void ProcessFreezer::Thaw(uint64_t job) {
  std::lock_guard lock(mu_);
  ThawLocked(job);
}

void ProcessFreezer::ThawLocked(uint64_t job) {
  auto it = frozen_.find(job);
  if (it == frozen_.end()) return;
  std::vector<int32_t> pids;
  for (const Stopped& s : it->second) {
    SignalProcess(s.pidfd, SIGCONT);  // gone meanwhile: nothing to do
    pids.push_back(s.pid);
  }
  const bool told = guardian_ && guardian_->Continued(pids);
  stopped_count_ -= it->second.size();
  frozen_.erase(it);
  if (guardian_ && !told) GuardianLost();
}

// Without a guardian nothing would continue a stopped job should gandivad die:
// continue them all now, and stop none from here on.
void ProcessFreezer::GuardianLost() {
  GD_LOG(kError, "the freezer guardian is gone; parked jobs are not stopped any more");
  guardian_.reset();
  while (!frozen_.empty()) ThawLocked(frozen_.begin()->first);
}

bool ProcessFreezer::IsFrozen(uint64_t job) const {
  std::lock_guard lock(mu_);
  return frozen_.count(job) != 0;
}

void ProcessFreezer::ThawAll() {
  std::lock_guard lock(mu_);
  while (!frozen_.empty()) ThawLocked(frozen_.begin()->first);
}

uint64_t ProcessFreezer::freezes() const {
  std::lock_guard lock(mu_);
  return freezes_;
}

pid_t ProcessFreezer::guardian_pid() const {
  std::lock_guard lock(mu_);
  return guardian_ ? guardian_->pid() : -1;
}

}  // namespace gandiva::controller
