// Gandiva's introspection rounds: judge pack trials by measurement, move
// spread gangs together when GPUs free up, grow jobs onto idle
// GPUs and keep the growth only if it measurably helps (see gandiva_policy.h).
#include "policies/gandiva_policy.h"

namespace gandiva::sched {

bool GandivaPolicy::IsSpread(const Cluster& c, std::span<const GpuId> gpus) const {
  int machines = 0, last = -1;
  for (GpuId g : gpus) {  // sorted, so a machine's GPUs are adjacent
    int m = c.topology().machine_of(g);
    if (m != last) ++machines, last = m;
  }
  return machines > c.topology().MinMachines(static_cast<int>(gpus.size()));
}

bool GandivaPolicy::NeedsIntrospection(const Cluster& c) const {
  if (review_ || !trials_.empty() || undecided_grows_ > 0) return true;
  return c.free_gpus().total_free() > 0 && opt_.gandiva_migrate && !spread_.empty();
}

void GandivaPolicy::Introspect(Cluster& c) {
  review_ = false;
  ReviewPackTrials(c);
  if (opt_.gandiva_migrate && c.free_gpus().total_free() > 0) RestoreLocality(c);
  ReviewGrowth(c);
  if (pending_.empty() && opt_.gandiva_grow) GrowIdle(c);
}

// A gang spread over more machines than it needs runs slower: move it onto
// consolidated free GPUs, moving single-GPU jobs aside if that makes some.
void GandivaPolicy::RestoreLocality(Cluster& c) {
  std::vector<JobId> spread(spread_.begin(), spread_.end());
  for (JobId j : spread) {
    if (c.state(j) != JobState::kRunning || c.group(c.group_of(j)).members.size() != 1) continue;
    const int n = c.info(j).num_gpus;
    const uint64_t mask = JobMask(c, j, kAllGpuTypes);
    auto gpus = FindConsolidated(c.free_gpus(), n, mask);
    if (!gpus && FreeOfTypes(c.free_gpus(), mask) >= n) gpus = Consolidate(c, j);
    if (gpus && c.Migrate(j, *gpus).ok()) Placed(c, j);
  }
}

void GandivaPolicy::ReviewGrowth(Cluster& c) {
  std::vector<JobId> done;
  for (auto& [j, gr] : grown_) {
    if (gr.decided || c.Now() - gr.since < opt_.gandiva_interval) continue;
    // Judged on a measurement of the grown run, however long it takes to
    // start and be timed (a pending job takes the extra GPUs back meanwhile).
    if (!c.RateMeasured(j)) continue;
    double gain = gr.rate_before > 0 ? c.MeasuredRate(j) / gr.rate_before : 0;
    auto key = std::make_pair(c.info(j).job_type, c.info(j).num_gpus);
    if (gain >= opt_.grow_gain) {
      gr.decided = true;
      --undecided_grows_;
      grow_learned_[key] = true;
    } else {
      grow_learned_[key] = false;
      done.push_back(j);
    }
  }
  for (JobId j : done) Shrink(c, j);
}

// Nothing waits: double jobs alone on their GPUs onto idle GPUs of the same
// machine, keeping 10% of the cluster idle for arrivals.
void GandivaPolicy::GrowIdle(Cluster& c) {
  const int total = c.topology().num_gpus();
  for (int n : {1, 2, 4}) {
    std::vector<int> groups;
    for (int g : share_.groups(n, 1)) {
      if (groups.size() >= 64) break;  // bounded work per round
      groups.push_back(g);
    }
    for (int g : groups) {
      if (c.free_gpus().total_free() * 10 < total) return;
      JobId j = c.group(g).members[0];
      // Only a measured speed can show whether growing paid.
      if (grown_.count(j) || spread_.count(j) || !c.RateMeasured(j) || c.MeasuredRate(j) <= 0)
        continue;
      auto known = grow_learned_.find({c.info(j).job_type, n});
      if (known != grow_learned_.end() && !known->second) continue;
      int m = c.topology().machine_of(c.gpus(j)[0]);
      if (c.free_gpus().free_on(m) < n) continue;
      std::vector<GpuId> original(c.gpus(j).begin(), c.gpus(j).end());
      std::vector<GpuId> bigger = original;
      auto extra = FreeOnMachine(c.free_gpus(), m, n);
      bigger.insert(bigger.end(), extra.begin(), extra.end());
      double before = c.MeasuredRate(j);
      if (!c.Resize(j, bigger).ok()) continue;
      ++stats_.grows;
      Placed(c, j);
      grown_[j] = {original, c.Now(), before, known != grow_learned_.end()};
      if (!grown_[j].decided) ++undecided_grows_;
    }
  }
}

void GandivaPolicy::Shrink(Cluster& c, JobId j) {
  auto it = grown_.find(j);
  if (it == grown_.end()) return;
  if (c.state(j) == JobState::kRunning && c.Resize(j, it->second.original).ok()) {
    ++stats_.shrinks;
    Placed(c, j);
  }
  ForgetGrowth(it);
}

void GandivaPolicy::ForgetGrowth(std::map<JobId, Grow>::iterator it) {
  if (!it->second.decided) --undecided_grows_;
  grown_.erase(it);
}

void GandivaPolicy::ShrinkAll(Cluster& c) {
  std::vector<JobId> all;
  for (const auto& [j, gr] : grown_) all.push_back(j);
  for (JobId j : all) Shrink(c, j);
}

}  // namespace gandiva::sched
