// Making room for a gang that ranks above running jobs: Gandiva clears GPUs on
// the fewest machines, moving single-GPU jobs to free GPUs elsewhere and
// suspending jobs that rank below it there, rather than suspending the
// lowest-ranked jobs wherever they are and running the gang spread over
// machines (see gandiva_policy.h).
#include <algorithm>
#include <array>
#include <functional>

#include "policies/gandiva_policy.h"

namespace gandiva::sched {

// How to clear `share` GPUs on machine m for p: jobs to move (at most
// `move_budget`, the free GPUs elsewhere) and jobs to suspend (all ranked
// below p, lowest first). nullopt if m cannot be cleared that far. Without
// `lists` only the counts are filled: MakeRoom prices every machine, and
// allocating the lists for each was most of a contended replay's time.
std::optional<GandivaPolicy::Room> GandivaPolicy::PlanMachine(const Cluster& c, JobId p, int m,
                                                              int share, int move_budget,
                                                              bool lists) const {
  Room room{m, 0, 0, {}, {}};
  int have = c.free_gpus().free_on(m);
  if (have >= share) return room;
  const Machine& machine = c.topology().machines()[m];
  // A machine holds at most 64 GPUs (FreeIndex), so at most 64 groups.
  std::array<std::pair<int, int>, 64> groups;  // (group, its GPUs on m)
  int num_groups = 0;
  auto on_m = [&](int g) {
    return std::find_if(groups.begin(), groups.begin() + num_groups,
                        [g](auto& e) { return e.first == g; });
  };
  for (GpuId x = machine.first_gpu; x < machine.first_gpu + machine.num_gpus; ++x) {
    int g = c.group_of_gpu(x);
    if (g == kNoGroup) continue;
    auto seen = on_m(g);
    if (seen != groups.begin() + num_groups)
      ++seen->second;
    else
      groups[num_groups++] = {g, 1};
  }
  // (best member's key, group), lowest ranked first once sorted.
  std::array<std::pair<Key, int>, 64> suspendable;
  int num_suspendable = 0;
  for (int i = 0; i < num_groups; ++i) {
    int g = groups[i].first;
    GroupView v = c.group(g);
    JobId first = v.members[0];
    if (have < share && v.gpus.size() == 1 && v.members.size() == 1 &&
        c.info(first).num_gpus == 1 && room.moves < move_budget) {
      ++room.moves;
      if (lists) room.move.push_back(first);
      ++have;
      continue;
    }
    Key best = key_[first];
    for (JobId j : v.members) best = std::min(best, key_[j]);
    // Only jobs of a lower level: within a level, the order is first come first
    // served and suspending a job just below p would only have it come back.
    if (std::get<0>(best) > level_[p]) suspendable[num_suspendable++] = {best, g};
  }
  std::sort(suspendable.begin(), suspendable.begin() + num_suspendable, std::greater<>());
  for (int i = 0; i < num_suspendable && have < share; ++i) {
    int g = suspendable[i].second;
    GroupView v = c.group(g);
    have += on_m(g)->second;
    room.suspended_gpus += static_cast<int>(v.gpus.size());
    if (lists) room.suspend.insert(room.suspend.end(), v.members.begin(), v.members.end());
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
  // Every machine priced (counts only), the k cheapest planned in full.
  for (int m = 0; m < static_cast<int>(machines.size()); ++m) {
    if (machines[m].num_gpus < share || !((mask >> machines[m].gpu_type) & 1)) continue;
    auto room = PlanMachine(c, p, m, share, free_total - c.free_gpus().free_on(m), false);
    if (room) rooms.push_back(std::move(*room));
  }
  if (static_cast<int>(rooms.size()) < k) return std::nullopt;
  std::partial_sort(rooms.begin(), rooms.begin() + k, rooms.end(),
                    [&](const Room& a, const Room& b) {
                      if (a.suspended_gpus != b.suspended_gpus)
                        return a.suspended_gpus < b.suspended_gpus;
                      if (a.moves != b.moves) return a.moves < b.moves;
                      return a.machine < b.machine;
                    });
  rooms.resize(k);
  for (Room& r : rooms)
    r = *PlanMachine(c, p, r.machine, share, free_total - c.free_gpus().free_on(r.machine), true);
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
