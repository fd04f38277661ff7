// Gandiva's events, its attained-service priority and the scheduling pass
// (see gandiva_policy.h).
#include "policies/gandiva_policy.h"

#include "policies/policies.h"

namespace gandiva::sched {
namespace {
constexpr int kBackfillScan = 64;  // pending jobs looked at per pass after the head blocks
}  // namespace

void GandivaPolicy::Know(JobId j) {
  EnsureSize(key_, j);
  EnsureSize(where_, j, char{0});
  EnsureSize(filed_, j);
  EnsureSize(level_, j, 0);
  EnsureSize(epoch_, j, 0u);
}

void GandivaPolicy::OnArrival(Cluster& c, JobId j) {
  Know(j);
  const JobInfo& info = c.info(j);
  if (info.job_type >= 0 && examples_.try_emplace({info.job_type, info.num_gpus}, j).second)
    candidates_.clear();  // a new kind of job: new pairs to consider
  Refile(c, j);
}

void GandivaPolicy::OnFinish(Cluster& c, JobId j) {
  Know(j);  // indexing its tables unsized crashed a restarted live scheduler
  share_.OnLeft(c, j);
  solo_.OnLeft(c, j);
  spread_.erase(j);
  if (auto it = grown_.find(j); it != grown_.end()) ForgetGrowth(it);
  Refile(c, j);
}

void GandivaPolicy::Schedule(Cluster& c) {
  Demote(c);
  if (opt_.gandiva_starve_factor > 0) GuardStarving(c);
  if (c.Now() >= spread_wake_) {
    dirty_ = true;
    spread_wake_ = std::numeric_limits<double>::infinity();
  }
  if (dirty_) SchedulePending(c);
  if (c.Now() >= next_introspect_) {
    Introspect(c);
    next_introspect_ = c.Now() + opt_.gandiva_interval;
  }
  if (NeedsIntrospection(c)) c.WakeAt(next_introspect_);
  if (!crossings_.empty()) c.WakeAt(std::get<0>(crossings_.top()));
}

// ---- Priority ----

GandivaPolicy::Key GandivaPolicy::KeyOf(const Cluster& c, JobId j) const {
  return {level_[j], c.info(j).submit_time, j};
}

void GandivaPolicy::Refile(Cluster& c, JobId j) {
  if (where_[j] == 1) pending_.erase(filed_[j]);
  if (where_[j] == 2) running_.erase(filed_[j]);
  key_[j] = KeyOf(c, j);
  switch (c.state(j)) {
    case JobState::kPending:
      filed_[j] = pending_.insert(key_[j]).first;
      where_[j] = 1;
      break;
    case JobState::kRunning:
      filed_[j] = running_.insert(key_[j]).first;
      where_[j] = 2;
      break;
    default:
      where_[j] = 0;
  }
  dirty_ = true;
}

// When running job j will reach its level's threshold if it keeps its pace.
void GandivaPolicy::PushCrossing(Cluster& c, JobId j) {
  const auto& th = opt_.las_thresholds;
  if (level_[j] >= static_cast<int>(th.size())) return;
  double left = th[level_[j]] - c.Attained(j);
  crossings_.push({c.Now() + std::max(0.0, left) / c.info(j).num_gpus, j, epoch_[j]});
}

void GandivaPolicy::Demote(Cluster& c) {
  const auto& th = opt_.las_thresholds;
  while (!crossings_.empty() && std::get<0>(crossings_.top()) <= c.Now()) {
    auto [t, j, epoch] = crossings_.top();
    crossings_.pop();
    if (c.state(j) != JobState::kRunning || epoch != epoch_[j]) continue;  // stale
    int level = level_[j];
    double attained = c.Attained(j);
    while (level < static_cast<int>(th.size()) && attained >= th[level] - 1e-6) ++level;
    if (level != level_[j]) {
      level_[j] = level;
      Refile(c, j);
    }
    PushCrossing(c, j);  // the next threshold, or the same one later if it was slowed down
  }
}

// A job waiting longer than factor x the time it has run goes back to the top
// level, so that no job waits unboundedly behind a stream of newcomers.
void GandivaPolicy::GuardStarving(Cluster& c) {
  std::vector<JobId> promote;
  for (const auto& [level, submit, j] : pending_)
    if (level > 0 && c.Now() - c.PendingSince(j) >= opt_.gandiva_starve_factor * c.RunTime(j))
      promote.push_back(j);
  for (JobId j : promote) {
    level_[j] = 0;
    Refile(c, j);
  }
}

// ---- The pass ----

void GandivaPolicy::Placed(Cluster& c, JobId j) {
  share_.OnPlaced(c, j);
  solo_.OnPlaced(c, j);
  if (IsSpread(c, c.gpus(j)))
    spread_.insert(j);
  else
    spread_.erase(j);
}

bool GandivaPolicy::StartOn(Cluster& c, JobId j, std::span<const GpuId> gpus) {
  if (!c.Start(j, gpus).ok()) return false;
  ++epoch_[j];  // crossings armed before it stopped are stale
  Placed(c, j);
  Refile(c, j);
  PushCrossing(c, j);
  return true;
}

void GandivaPolicy::SuspendJob(Cluster& c, JobId j, JobId taker) {
  if (grown_.count(j)) Shrink(c, j);
  if (!c.Suspend(j, PreemptionFor(c, j, taker)).ok()) return;
  share_.OnLeft(c, j);
  solo_.OnLeft(c, j);
  spread_.erase(j);
  Refile(c, j);
}

void GandivaPolicy::SchedulePending(Cluster& c) {
  dirty_ = false;
  cannot_consolidate_.clear();
  no_room_.clear();
  while (!pending_.empty()) {
    JobId p = std::get<2>(*pending_.begin());
    if (!StartOrPreemptFor(c, p)) break;
  }
  // The head waits: later jobs take free GPUs that fit them, or are packed
  // onto running jobs where the pair pays.
  std::vector<JobId> waiting;
  for (auto it = pending_.begin(); it != pending_.end() && waiting.size() < kBackfillScan; ++it)
    waiting.push_back(std::get<2>(*it));
  for (JobId j : waiting) {
    if (c.state(j) != JobState::kPending || c.info(j).num_gpus > c.free_gpus().total_free())
      continue;
    if (auto gpus = PlaceGang(c, j)) StartOn(c, j, *gpus);
  }
  PackWaiting(c);
  if (!pending_.empty() && opt_.locality != Locality::kBestEffort) dirty_ = true;
}

// Starts p on free GPUs, shrinking grown jobs or suspending lower-priority
// ones if that makes room. False if p must wait.
bool GandivaPolicy::StartOrPreemptFor(Cluster& c, JobId p) {
  if (auto gpus = PlaceGang(c, p)) return StartOn(c, p, *gpus);
  if (!grown_.empty()) {
    ShrinkAll(c);  // grown jobs give back their extra GPUs first
    if (auto gpus = PlaceGang(c, p)) return StartOn(c, p, *gpus);
  }
  std::vector<JobId> victims = VictimsFor(c, p);
  if (victims.empty()) return false;  // not enough GPUs held by lower-ranked jobs anywhere
  // Within a pass, a gang of the same size and level fails to find room again.
  std::tuple<int, uint64_t, int> like{c.info(p).num_gpus, JobMask(c, p, kAllGpuTypes), level_[p]};
  if (c.info(p).num_gpus > 1 && !no_room_.count(like)) {
    if (auto gpus = MakeRoom(c, p)) return StartOn(c, p, *gpus);
    no_room_.insert(like);
  }
  if (!MaySpread(c, p)) return false;
  for (JobId v : victims) SuspendJob(c, v, p);
  if (auto gpus = PlaceGang(c, p)) return StartOn(c, p, *gpus);
  return false;
}

// The lowest-priority running jobs, all below p, whose GPU sets together free
// enough GPUs for p; a shared set counts only when all its members go. Empty
// if there are not enough.
std::vector<JobId> GandivaPolicy::VictimsFor(Cluster& c, JobId p) {
  const int n = c.info(p).num_gpus;
  const uint64_t mask = JobMask(c, p, kAllGpuTypes);
  int freed = c.free_gpus().total_free();
  std::vector<JobId> chosen;
  std::map<int, int> taken;  // group -> members chosen
  for (auto it = running_.rbegin(); it != running_.rend() && freed < n; ++it) {
    if (!(key_[p] < *it)) break;
    JobId v = std::get<2>(*it);
    int g = c.group_of(v);
    GroupView view = c.group(g);
    if (!((mask >> c.topology().gpu_type_of(view.gpus[0])) & 1)) continue;
    chosen.push_back(v);
    if (++taken[g] == static_cast<int>(view.members.size()))
      freed += static_cast<int>(view.gpus.size());
  }
  if (freed < n) return {};
  std::vector<JobId> victims;  // members of sets that are freed whole
  for (JobId v : chosen) {
    int g = c.group_of(v);
    if (taken[g] == static_cast<int>(c.group(g).members.size())) victims.push_back(v);
  }
  return victims;
}

std::unique_ptr<Policy> MakeGandivaPolicy(const PolicyOptions& o) {
  return std::make_unique<GandivaPolicy>(o);
}

}  // namespace gandiva::sched
