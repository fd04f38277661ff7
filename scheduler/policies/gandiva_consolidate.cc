// Gandiva's placement of a gang: consolidated if free GPUs allow; else made
// consolidated by migrating single-GPU jobs off one machine onto free GPUs
// elsewhere (a few seconds each) rather than running the gang spread over
// machines, which slows every step of it (see gandiva_policy.h).
#include <algorithm>

#include "policies/gandiva_policy.h"

namespace gandiva::sched {
namespace {
constexpr int kMachineScan = 64;  // machines considered per gang (bounds a pass's cost)
}  // namespace

std::optional<std::vector<GpuId>> GandivaPolicy::PlaceGang(Cluster& c, JobId p) {
  const int n = c.info(p).num_gpus;
  const uint64_t mask = JobMask(c, p, kAllGpuTypes);
  if (auto gpus = FindConsolidated(c.free_gpus(), n, mask)) return gpus;
  // Free GPUs only shrink during a pass: a size that could not be consolidated
  // earlier in it cannot be now.
  if (opt_.gandiva_migrate && FreeOfTypes(c.free_gpus(), mask) >= n &&
      !cannot_consolidate_.count({n, mask})) {
    if (auto gpus = Consolidate(c, p)) return gpus;
    cannot_consolidate_.insert({n, mask});
  }
  if (!MaySpread(c, p)) return std::nullopt;
  return Place(c, p);
}

// A gang may run spread over more machines than it needs only after waiting
// gandiva_spread_delay for a consolidated placement (arming a wake-up for then).
bool GandivaPolicy::MaySpread(Cluster& c, JobId p) {
  if (c.info(p).num_gpus == 1) return true;
  double allowed_at = c.PendingSince(p) + opt_.gandiva_spread_delay;
  if (c.Now() >= allowed_at) return true;
  c.WakeAt(allowed_at);
  spread_wake_ = std::min(spread_wake_, allowed_at);  // run the pass then
  return false;
}

// A free GPU for single-GPU job v on none of the machines in `avoid`: on the
// fullest machine that has one, so that free GPUs stay together.
std::optional<GpuId> GandivaPolicy::FreeGpuElsewhere(const Cluster& c, JobId v,
                                                     const std::vector<int>& avoid) const {
  const FreeIndex& free = c.free_gpus();
  const uint64_t mask = JobMask(c, v, kAllGpuTypes);
  for (int count = 1; count <= free.max_count(); ++count)
    for (size_t t = 0; t < c.topology().gpu_types().size(); ++t) {
      if (!((mask >> t) & 1)) continue;
      for (int m : free.machines_with(static_cast<int>(t), count))
        if (std::find(avoid.begin(), avoid.end(), m) == avoid.end())
          return FreeOnMachine(free, m, 1)[0];
    }
  return std::nullopt;
}

bool GandivaPolicy::MoveAside(Cluster& c, JobId v, const std::vector<int>& avoid) {
  auto to = FreeGpuElsewhere(c, v, avoid);
  if (!to) return false;
  GpuId dest = *to;
  if (!c.Migrate(v, std::span<const GpuId>(&dest, 1)).ok()) return false;
  Placed(c, v);
  return true;
}

// Single-GPU jobs alone on one GPU of machine m (not grown): they can move.
std::vector<JobId> GandivaPolicy::MovableOn(const Cluster& c, int m) const {
  std::vector<JobId> out;
  const Machine& machine = c.topology().machines()[m];
  for (GpuId x = machine.first_gpu; x < machine.first_gpu + machine.num_gpus; ++x) {
    int g = c.group_of_gpu(x);
    if (g == kNoGroup) continue;
    GroupView v = c.group(g);
    if (v.gpus.size() == 1 && v.members.size() == 1 && c.info(v.members[0]).num_gpus == 1)
      out.push_back(v.members[0]);
  }
  return out;
}

// GPUs for gang p on the fewest machines, made free by moving single-GPU jobs
// to free GPUs elsewhere: the machines scanned from the most free down, so the
// first that can hold their share need the fewest moves. nullopt (nothing
// moved) if the machines scanned cannot hold it.
std::optional<std::vector<GpuId>> GandivaPolicy::Consolidate(Cluster& c, JobId p) {
  const int n = c.info(p).num_gpus;
  const int k = c.topology().MinMachines(n), share = (n + k - 1) / k;
  const FreeIndex& free = c.free_gpus();
  const uint64_t mask = JobMask(c, p, kAllGpuTypes);
  std::vector<int> chosen;
  std::vector<JobId> moves;
  int scanned = 0, chosen_free = 0;
  for (int count = free.max_count(); count >= 0 && static_cast<int>(chosen.size()) < k; --count)
    for (size_t t = 0; t < c.topology().gpu_types().size(); ++t) {
      if (!((mask >> t) & 1)) continue;
      for (int m : free.machines_with(static_cast<int>(t), count)) {
        if (static_cast<int>(chosen.size()) == k || ++scanned > kMachineScan) break;
        if (c.topology().machines()[m].num_gpus < share) continue;
        int need = std::max(0, std::min(share, n - chosen_free) - count);
        std::vector<JobId> movable = need > 0 ? MovableOn(c, m) : std::vector<JobId>{};
        if (static_cast<int>(movable.size()) < need) continue;
        chosen.push_back(m);
        chosen_free += count + need;
        moves.insert(moves.end(), movable.begin(), movable.begin() + need);
      }
    }
  if (static_cast<int>(chosen.size()) < k || chosen_free < n) return std::nullopt;
  int free_elsewhere = free.total_free();
  for (int m : chosen) free_elsewhere -= free.free_on(m);
  if (free_elsewhere < static_cast<int>(moves.size())) return std::nullopt;
  for (JobId v : moves)
    if (!MoveAside(c, v, chosen)) return std::nullopt;
  std::vector<GpuId> gpus;
  for (int m : chosen) {
    auto here = FreeOnMachine(c.free_gpus(), m, n - static_cast<int>(gpus.size()));
    gpus.insert(gpus.end(), here.begin(), here.end());
  }
  if (static_cast<int>(gpus.size()) < n) return std::nullopt;
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

}  // namespace gandiva::sched
