// Making room for a gang that ranks above running jobs: Gandiva clears GPUs on
// the fewest machines, moving single-GPU jobs to free GPUs elsewhere and
// suspending jobs that rank below it there, rather than suspending the
// lowest-ranked jobs wherever they are and running the gang spread over
// machines (see gandiva_policy.h).
#include <algorithm>

#include "policies/gandiva_policy.h"

namespace gandiva::sched {

// How to clear `share` GPUs on machine m for p: jobs to move (at most
// `move_budget`, the free GPUs elsewhere) and jobs to suspend (all ranked
// below p, lowest first). nullopt if m cannot be cleared that far.
std::optional<GandivaPolicy::Room> GandivaPolicy::PlanMachine(const Cluster& c, JobId p, int m,
                                                              int share, int move_budget) const {
  Room room{m, 0, {}, {}};
  int have = c.free_gpus().free_on(m);
  if (have >= share) return room;
  const Machine& machine = c.topology().machines()[m];
  std::vector<std::pair<int, int>> groups;  // (group, its GPUs on m)
  for (GpuId x = machine.first_gpu; x < machine.first_gpu + machine.num_gpus; ++x) {
    int g = c.group_of_gpu(x);
    if (g == kNoGroup) continue;
    auto seen = std::find_if(groups.begin(), groups.end(), [g](auto& e) { return e.first == g; });
    if (seen != groups.end())
      ++seen->second;
    else
      groups.push_back({g, 1});
  }
  std::vector<std::pair<Key, int>> suspendable;  // (best member's key, group), lowest ranked first
  for (const auto& [g, on_m] : groups) {
    GroupView v = c.group(g);
    JobId first = v.members[0];
    if (have < share && v.gpus.size() == 1 && v.members.size() == 1 &&
        c.info(first).num_gpus == 1 && static_cast<int>(room.move.size()) < move_budget) {
      room.move.push_back(first);
      ++have;
      continue;
    }
    Key best = key_[first];
    for (JobId j : v.members) best = std::min(best, key_[j]);
    // Only jobs of a lower level: within a level, the order is first come first
    // served and suspending a job just below p would only have it come back.
    if (std::get<0>(best) > level_[p]) suspendable.push_back({best, g});
  }
  std::sort(suspendable.rbegin(), suspendable.rend());
  for (const auto& [key, g] : suspendable) {
    if (have >= share) break;
    GroupView v = c.group(g);
    have +=
        std::find_if(groups.begin(), groups.end(), [g](auto& e) { return e.first == g; })->second;
    room.suspended_gpus += static_cast<int>(v.gpus.size());
    room.suspend.insert(room.suspend.end(), v.members.begin(), v.members.end());
  }
  if (have < share) return std::nullopt;
  return room;
}

// Clears GPUs for p on the fewest machines at the least cost (GPUs suspended,
// then jobs moved) and returns them; nullopt (nothing done) if no set of
// machines can be cleared.
std::optional<std::vector<GpuId>> GandivaPolicy::MakeRoom(Cluster& c, JobId p) {
  const int n = c.info(p).num_gpus;
  const int k = c.topology().MinMachines(n), share = (n + k - 1) / k;
  const uint64_t mask = JobMask(c, p, kAllGpuTypes);
  const int free_total = c.free_gpus().total_free();
  std::vector<Room> rooms;
  const auto& machines = c.topology().machines();
  for (int m = 0; m < static_cast<int>(machines.size()); ++m) {
    if (machines[m].num_gpus < share || !((mask >> machines[m].gpu_type) & 1)) continue;
    auto room = PlanMachine(c, p, m, share, free_total - c.free_gpus().free_on(m));
    if (room) rooms.push_back(std::move(*room));
  }
  if (static_cast<int>(rooms.size()) < k) return std::nullopt;
  std::partial_sort(rooms.begin(), rooms.begin() + k, rooms.end(),
                    [&](const Room& a, const Room& b) {
                      if (a.suspended_gpus != b.suspended_gpus)
                        return a.suspended_gpus < b.suspended_gpus;
                      if (a.move.size() != b.move.size()) return a.move.size() < b.move.size();
                      return a.machine < b.machine;
                    });
  rooms.resize(k);
  std::vector<int> chosen;
  size_t moves = 0;
  int free_outside = free_total;
  for (const Room& r : rooms) {
    chosen.push_back(r.machine);
    moves += r.move.size();
    free_outside -= c.free_gpus().free_on(r.machine);
  }
  if (static_cast<int>(moves) > free_outside) return std::nullopt;
  for (const Room& r : rooms)
    for (JobId v : r.suspend)
      if (c.state(v) == JobState::kRunning) SuspendJob(c, v, p);
  for (const Room& r : rooms)
    for (JobId v : r.move)
      if (!MoveAside(c, v, chosen)) return std::nullopt;
  std::vector<GpuId> gpus;
  for (int m : chosen) {
    auto here = FreeOnMachine(c.free_gpus(), m, std::min(share, n - static_cast<int>(gpus.size())));
    gpus.insert(gpus.end(), here.begin(), here.end());
  }
  if (static_cast<int>(gpus.size()) < n) return std::nullopt;
  std::sort(gpus.begin(), gpus.end());
  return gpus;
}

}  // namespace gandiva::sched
