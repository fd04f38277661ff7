// Gandiva's packing: a job that has to wait runs packed with a running job when
// their pair of job types measured faster together than one at a time; a pair
// not measured yet is tried once and undone if it is slower (see gandiva_policy.h).
#include <algorithm>

#include "policies/gandiva_policy.h"

namespace gandiva::sched {
namespace {
constexpr int kPackScan = 4096;  // pending jobs looked at per pass (bounds a pass's cost)
}  // namespace

// ---- SoloIndex ----

void SoloIndex::Reindex(const Cluster& c, int g) {
  if (g < 0) return;
  if (static_cast<size_t>(g) >= key_.size()) key_.resize(g + 1, {0, 0});
  auto [size, type] = key_[g];
  if (size > 0) by_size_[size][type].erase(g);
  key_[g] = {0, 0};
  GroupView v = c.group(g);
  if (v.members.size() != 1) return;
  const JobInfo& info = c.info(v.members[0]);
  size = static_cast<int>(v.gpus.size());
  if (info.job_type < 0 || info.num_gpus != size) return;  // unknown type, or grown
  if (static_cast<size_t>(size) >= by_size_.size()) by_size_.resize(size + 1);
  if (static_cast<size_t>(info.job_type) >= by_size_[size].size())
    by_size_[size].resize(info.job_type + 1);
  by_size_[size][info.job_type].insert(g);
  key_[g] = {size, info.job_type};
}

void SoloIndex::OnPlaced(const Cluster& c, JobId j) {
  EnsureSize(job_group_, j, kNoGroup);
  int old = job_group_[j];
  job_group_[j] = c.group_of(j);
  if (old != kNoGroup && old != job_group_[j]) Reindex(c, old);
  Reindex(c, job_group_[j]);
}

void SoloIndex::OnLeft(const Cluster& c, JobId j) {
  EnsureSize(job_group_, j, kNoGroup);
  int old = job_group_[j];
  job_group_[j] = kNoGroup;
  Reindex(c, old);
}

const IdSet& SoloIndex::groups(int size, int type) const {
  static const IdSet kEmpty;
  if (size < 0 || static_cast<size_t>(size) >= by_size_.size() || type < 0 ||
      static_cast<size_t>(type) >= by_size_[size].size())
    return kEmpty;
  return by_size_[size][type];
}

// ---- Packing ----

// Packing pays when the pair together beats one of them alone by pack_gain and
// the running job keeps enough of its speed not to be held back by a job that
// ranks below it.
bool GandivaPolicy::PackPays(const PairRates& r) const {
  return r.mine + r.partner >= opt_.pack_gain && r.partner >= opt_.pack_min_partner_rate;
}

// The partner types worth trying for (type, GPUs), best first: measured pairs
// that pay, by their summed rate, then pairs not measured yet that fit in
// memory and have no trial under way. Rebuilt only when what is known changes
// (a new type, a measurement, a trial), so a pass costs a few lookups per job.
const std::vector<GandivaPolicy::Candidate>& GandivaPolicy::Candidates(const Cluster& c, int type,
                                                                       int n) {
  auto [it, added] = candidates_.try_emplace({type, n});
  if (!added) return it->second;
  std::vector<std::pair<double, int>> paying;
  std::vector<Candidate>& out = it->second;
  for (const auto& [kind, example] : examples_) {
    if (kind.second != n) continue;
    PairKey key{type, kind.first, n};
    if (auto known = learned_.find(key); known != learned_.end()) {
      if (PackPays(known->second))
        paying.push_back({-(known->second.mine + known->second.partner), kind.first});
    } else if (!trying_.count(key) && c.PairFitsMemory(examples_.at({type, n}), example)) {
      out.push_back({kind.first, true});
    }
  }
  std::sort(paying.begin(), paying.end());
  std::vector<Candidate> ranked;
  for (const auto& [minus_sum, partner] : paying) ranked.push_back({partner, false});
  out.insert(out.begin(), ranked.begin(), ranked.end());
  return out;
}

// The solo group to pack waiting job p onto, from the candidates in order;
// *trial if its pair has not been measured. -1 if none.
int GandivaPolicy::PackPartner(Cluster& c, JobId p, bool* trial) {
  const int n = c.info(p).num_gpus, type = c.info(p).job_type;
  if (type < 0) return -1;
  const uint64_t mask = JobMask(c, p, kAllGpuTypes);
  for (const Candidate& cand : Candidates(c, type, n)) {
    for (int g : solo_.groups(n, cand.partner)) {
      if (!((mask >> c.topology().gpu_type_of(c.group(g).gpus[0])) & 1)) continue;
      *trial = cand.trial;
      return g;
    }
  }
  return -1;
}

// Packs waiting jobs, in priority order, onto running ones while partners last.
void GandivaPolicy::PackWaiting(Cluster& c) {
  if (opt_.gandiva_max_share < 2) return;
  std::vector<JobId> waiting;
  int scanned = 0;
  for (auto it = pending_.begin(); it != pending_.end() && ++scanned <= kPackScan; ++it) {
    const JobInfo& info = c.info(std::get<2>(*it));
    if (info.job_type >= 0 && !Candidates(c, info.job_type, info.num_gpus).empty())
      waiting.push_back(info.id);
  }
  for (JobId j : waiting) PackOne(c, j);
}

bool GandivaPolicy::PackOne(Cluster& c, JobId p) {
  bool trial = false;
  int g = PackPartner(c, p, &trial);
  if (g < 0) return false;
  JobId resident = c.group(g).members[0];
  std::vector<GpuId> gpus(c.group(g).gpus.begin(), c.group(g).gpus.end());
  if (!c.SetShareMode(g, ShareMode::kPack).ok()) return false;
  if (!StartOn(c, p, gpus)) {
    (void)c.SetShareMode(g, ShareMode::kSlice);
    return false;
  }
  ++stats_.packs;
  if (trial) {
    trials_[g] = {resident, p, c.Now(), false};
    trying_.insert({c.info(p).job_type, c.info(resident).job_type, c.info(p).num_gpus});
    candidates_.clear();
    review_ = true;
  }
  return true;
}

// A guest packed on arrival whose rate its node cannot measure (a live job
// of a kind never timed alone: LiveCluster's ReadRate) would hold its trial
// packed and undecided. After an interval of that, the pair takes turns
// (slice mode: each runs alone in its slices) until the guest is timed, then
// packs again and the trial starts over. True while that is under way. The
// simulator measures every running job: never there.
bool GandivaPolicy::TimeGuestAlone(Cluster& c, int g, PackTrial& t) {
  if (t.timing_alone) {
    if (!c.RateMeasured(t.guest)) return true;
    if (!c.SetShareMode(g, ShareMode::kPack).ok()) return true;
    t.timing_alone = false;
    t.since = c.Now();
    return true;
  }
  if (c.Now() - t.since < opt_.gandiva_interval || c.RateMeasured(t.guest) ||
      c.MeasuredRate(t.guest) <= 0)  // stalled: moving or restarting, not unmeasurable
    return false;
  if (c.SetShareMode(g, ShareMode::kSlice).ok()) t.timing_alone = true;
  return true;
}

// After an interval packed, a trial pair's measured rates decide: the pair of
// types is remembered either way; a pack that does not pay is undone by
// suspending the guest (the job that was waiting).
void GandivaPolicy::ReviewPackTrials(Cluster& c) {
  for (auto it = trials_.begin(); it != trials_.end();) {
    PackTrial& t = it->second;
    GroupView v = c.group(it->first);
    const int n = c.info(t.guest).num_gpus;
    PairKey key{c.info(t.guest).job_type, c.info(t.resident).job_type, n};
    const ShareMode mode = t.timing_alone ? ShareMode::kSlice : ShareMode::kPack;
    bool intact = v.members.size() == 2 && v.mode == mode && c.group_of(t.guest) == it->first &&
                  c.group_of(t.resident) == it->first;
    if (!intact) {  // a member finished or was preempted: measure another time
      trying_.erase(key);
      candidates_.clear();
      it = trials_.erase(it);
      continue;
    }
    if (TimeGuestAlone(c, it->first, t)) {
      review_ = true;
      ++it;
      continue;
    }
    double guest = c.MeasuredRate(t.guest), resident = c.MeasuredRate(t.resident);
    // Not measured long enough, a member stalled, or a rate only assumed (a
    // live guest whose kind its node never timed alone): what is learned
    // here decides every later pair of these kinds.
    if (c.Now() - t.since < opt_.gandiva_interval || guest <= 0 || resident <= 0 ||
        !c.RateMeasured(t.guest) || !c.RateMeasured(t.resident)) {
      review_ = true;
      ++it;
      continue;
    }
    learned_[key] = {guest, resident};
    learned_[{std::get<1>(key), std::get<0>(key), n}] = {resident, guest};
    trying_.erase(key);
    candidates_.clear();
    JobId undo = PackPays(learned_[key]) ? -1 : t.guest;
    stats_.pack_trials.push_back(
        {std::get<0>(key), std::get<1>(key), n, guest, resident, undo < 0});
    it = trials_.erase(it);
    if (undo >= 0) {
      SuspendJob(c, undo, /*taker=*/-1);  // it leaves; nobody needs its device
      ++stats_.unpacks;
    }
  }
}

}  // namespace gandiva::sched
