// Gandiva's placement of a gang: consolidated if free GPUs allow; else made
// consolidated by migrating single-GPU jobs off one machine onto free GPUs
// elsewhere (a few seconds each) rather than running the gang spread over
// machines, which slows every step of it (see gandiva_policy.h).
#include "policies/gandiva_policy.h"

namespace gandiva::sched {
namespace {
constexpr int kMachineScan = 32;  // machines considered per gang (bounds a pass's cost)
}  // namespace

std::optional<std::vector<GpuId>> GandivaPolicy::PlaceGang(Cluster& c, JobId p) {
  const int n = c.info(p).num_gpus;
  const uint64_t mask = JobMask(c, p, kAllGpuTypes);
  if (auto gpus = FindConsolidated(c.free_gpus(), n, mask)) return gpus;
  if (opt_.gandiva_migrate && FreeOfTypes(c.free_gpus(), mask) >= n)
    if (auto gpus = Consolidate(c, p)) return gpus;
  return Place(c, p);
}

// A free GPU for single-GPU job v, not on `avoid`: on the fullest machine that
// has one, so that free GPUs stay together.
std::optional<GpuId> GandivaPolicy::FreeGpuElsewhere(const Cluster& c, JobId v, int avoid) const {
  const FreeIndex& free = c.free_gpus();
  const uint64_t mask = JobMask(c, v, kAllGpuTypes);
  for (int count = 1; count <= free.max_count(); ++count)
    for (size_t t = 0; t < c.topology().gpu_types().size(); ++t) {
      if (!((mask >> t) & 1)) continue;
      for (int m : free.machines_with(static_cast<int>(t), count))
        if (m != avoid) return FreeOnMachine(free, m, 1)[0];
    }
  return std::nullopt;
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

// Picks the machine that needs the fewest moves to hold p, moves those jobs
// away, and returns p's GPUs there; nullopt if no machine scanned can.
std::optional<std::vector<GpuId>> GandivaPolicy::Consolidate(Cluster& c, JobId p) {
  const int n = c.info(p).num_gpus;
  if (n > c.topology().max_gpus_per_machine()) return std::nullopt;  // whole machines only
  const FreeIndex& free = c.free_gpus();
  const uint64_t mask = JobMask(c, p, kAllGpuTypes);
  int scanned = 0;
  for (int count = std::min(n - 1, free.max_count()); count >= 0; --count)
    for (size_t t = 0; t < c.topology().gpu_types().size(); ++t) {
      if (!((mask >> t) & 1)) continue;
      for (int m : free.machines_with(static_cast<int>(t), count)) {
        if (++scanned > kMachineScan) return std::nullopt;
        if (c.topology().machines()[m].num_gpus < n) continue;
        std::vector<JobId> movable = MovableOn(c, m);
        const int need = n - count;
        if (static_cast<int>(movable.size()) < need || free.total_free() - count < need) continue;
        for (int i = 0; i < need; ++i) {
          auto to = FreeGpuElsewhere(c, movable[i], m);
          if (!to) return std::nullopt;
          GpuId dest = *to;
          if (!c.Migrate(movable[i], std::span<const GpuId>(&dest, 1)).ok()) return std::nullopt;
          Placed(c, movable[i]);
        }
        if (c.free_gpus().free_on(m) >= n) return FreeOnMachine(c.free_gpus(), m, n);
        return std::nullopt;
      }
    }
  return std::nullopt;
}

}  // namespace gandiva::sched
