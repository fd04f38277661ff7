// Gandiva's introspective policy, ordered by attained service.
//
// Which job runs: Tiresias-style 2D-LAS priority (a job's level rises with the
// GPU-seconds it has received; first come first served within a level). The
// best pending job starts on free GPUs, else suspends lower-priority jobs
// (Gandiva's suspend-resume) to make room, else waits.
// Where it runs: a gang goes on the fewest machines; if free GPUs are
// scattered, single-GPU jobs are migrated aside to make such a placement, and
// a gang that preempts clears one machine (moving and suspending jobs there)
// rather than taking scattered GPUs. A gang accepts a spread placement only
// after waiting gandiva_spread_delay.
// How the GPUs are used (the introspection): a job that must wait is packed
// onto a GPU set with a running job when that pair of job types measured
// faster together than one alone (an untried pair is tried, measured after one
// interval, and undone if it is slower); spread gangs are moved together when
// GPUs free up; jobs grow onto idle GPUs when nothing waits and keep the
// growth only if it pays.
// Files: gandiva_policy.cc (events, priority, the scheduling pass),
// gandiva_consolidate.cc and gandiva_room.cc (gang placement), gandiva_packing.cc
// (packing and its index), gandiva_introspect.cc (locality, grow and shrink).
#ifndef GANDIVA_SRC_SCHED_GANDIVA_POLICY_H_
#define GANDIVA_SRC_SCHED_GANDIVA_POLICY_H_

#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <vector>

#include "policies/policy_base.h"

namespace gandiva::sched {

// Running jobs alone on their GPU set (not grown), by (GPU count, job type):
// the candidates a waiting job can be packed with.
class SoloIndex {
 public:
  void OnPlaced(const Cluster& c, JobId j);  // after Start/Migrate/Resize of j
  void OnLeft(const Cluster& c, JobId j);    // after j finished/was suspended
  // Groups of `size` GPUs whose one member is of job type `type`.
  const IdSet& groups(int size, int type) const;

 private:
  void Reindex(const Cluster& c, int g);
  std::vector<int> job_group_;
  std::vector<std::pair<int, int>> key_;  // group -> (size, type) it is filed under, size 0 if not
  std::vector<std::vector<IdSet>> by_size_;  // [size][type] -> groups
};

class GandivaPolicy : public PolicyBase {
 public:
  using PolicyBase::PolicyBase;
  const char* name() const override { return "gandiva"; }
  void OnArrival(Cluster& c, JobId j) override;
  void OnFinish(Cluster& c, JobId j) override;
  void Schedule(Cluster& c) override;

 private:
  // (service level, submit time, id): smaller runs first.
  using Key = std::tuple<int, double, JobId>;
  // A pack of a waiting job (guest) onto a running one (resident) whose pair
  // of types has not been measured yet.
  struct PackTrial {
    JobId resident, guest;
    double since;
    // Sliced for now, so that the guest's node times it alone: a live guest
    // of a kind never timed alone has no measurable rate while packed.
    bool timing_alone = false;
  };
  struct Grow {
    std::vector<GpuId> original;
    double since;
    double rate_before;
    bool decided;
  };
  // Measured rates of a packed pair (type, partner, GPUs): mine and partner's.
  using PairKey = std::tuple<int, int, int>;
  struct PairRates {
    double mine = 0, partner = 0;
  };

  // ---- Priority (gandiva_policy.cc) ----
  Key KeyOf(const Cluster& c, JobId j) const;
  void Refile(Cluster& c, JobId j);  // after a state or level change
  // Makes room for j in the per-job tables (an arrival, or the finish of a
  // job that never arrived here: one running when a live scheduler restarted).
  void Know(JobId j);
  void Demote(Cluster& c);
  void PushCrossing(Cluster& c, JobId j);
  void GuardStarving(Cluster& c);

  // ---- The pass (gandiva_policy.cc) ----
  void SchedulePending(Cluster& c);
  bool StartOrPreemptFor(Cluster& c, JobId p);
  std::vector<JobId> VictimsFor(Cluster& c, JobId p);
  bool StartOn(Cluster& c, JobId j, std::span<const GpuId> gpus);
  // Preempts j so that `taker` (-1: none) gets its GPUs (PreemptionFor).
  void SuspendJob(Cluster& c, JobId j, JobId taker);
  void Placed(Cluster& c, JobId j);  // index updates after j moved or started

  // ---- Placement (gandiva_consolidate.cc) ----
  std::optional<std::vector<GpuId>> PlaceGang(Cluster& c, JobId p);
  std::optional<std::vector<GpuId>> Consolidate(Cluster& c, JobId p);
  bool MaySpread(Cluster& c, JobId p);
  std::optional<GpuId> FreeGpuElsewhere(const Cluster& c, JobId v,
                                        const std::vector<int>& avoid) const;
  // Migrates single-GPU job v to FreeGpuElsewhere; false if none or it failed.
  bool MoveAside(Cluster& c, JobId v, const std::vector<int>& avoid);
  std::vector<JobId> MovableOn(const Cluster& c, int m) const;

  // ---- Making room by suspending and moving (gandiva_room.cc) ----
  struct Room {
    int machine;
    int suspended_gpus;                // GPUs of the jobs suspended (the cost)
    int moves;                         // jobs moved
    std::vector<JobId> suspend, move;  // filled only when asked for (`lists`)
  };
  std::optional<Room> PlanMachine(const Cluster& c, JobId p, int m, int share, int move_budget,
                                  bool lists) const;
  std::optional<std::vector<GpuId>> MakeRoom(Cluster& c, JobId p);

  // ---- Packing (gandiva_packing.cc) ----
  void PackWaiting(Cluster& c);
  bool PackOne(Cluster& c, JobId p);
  int PackPartner(Cluster& c, JobId p, bool* trial);
  bool PackPays(const PairRates& r) const;
  struct Candidate {
    int partner;  // job type
    bool trial;   // not measured yet
  };
  const std::vector<Candidate>& Candidates(const Cluster& c, int type, int n);
  void ReviewPackTrials(Cluster& c);
  bool TimeGuestAlone(Cluster& c, int group, PackTrial& trial);

  // ---- Introspection (gandiva_introspect.cc) ----
  bool NeedsIntrospection(const Cluster& c) const;
  void Introspect(Cluster& c);
  void RestoreLocality(Cluster& c);
  void ReviewGrowth(Cluster& c);
  void GrowIdle(Cluster& c);
  void Shrink(Cluster& c, JobId j);
  void ForgetGrowth(std::map<JobId, Grow>::iterator it);  // erases it, keeping the count
  void ShrinkAll(Cluster& c);
  bool IsSpread(const Cluster& c, std::span<const GpuId> gpus) const;

  std::set<Key> pending_, running_;
  std::vector<Key> key_;                        // the key each job is filed under
  std::vector<char> where_;                     // 0 nowhere, 1 pending_, 2 running_
  std::vector<std::set<Key>::iterator> filed_;  // where_ != 0: its entry there
  std::vector<int> level_;
  std::vector<uint32_t> epoch_;
  using Crossing = std::tuple<double, JobId, uint32_t>;
  std::priority_queue<Crossing, std::vector<Crossing>, std::greater<>> crossings_;

  ShareIndex share_;  // groups by size and members: solo ones can grow
  SoloIndex solo_;    // packing candidates
  std::set<JobId> spread_;
  std::map<JobId, Grow> grown_;
  int undecided_grows_ = 0;          // grown_ entries not yet decided (introspection must look)
  std::map<int, PackTrial> trials_;  // group -> trial under way
  std::set<PairKey> trying_;         // pairs of types with a trial under way
  std::map<PairKey, PairRates> learned_;           // measured packed rates, both orders
  std::map<std::pair<int, int>, JobId> examples_;  // (type, GPUs) -> a job of that kind
  std::map<std::pair<int, int>, std::vector<Candidate>> candidates_;  // cache of Candidates()
  std::map<std::pair<int, int>, bool> grow_learned_;  // (type, GPUs) -> growing pays
  double next_introspect_ = 0;
  bool dirty_ = false;  // something changed since the last pass
  double spread_wake_ = std::numeric_limits<double>::infinity();  // a gang may spread then
  std::set<std::pair<int, uint64_t>> cannot_consolidate_;         // (GPUs, type mask), this pass
  std::set<std::tuple<int, uint64_t, int>> no_room_;  // (GPUs, type mask, level), this pass
  bool review_ = false;  // introspection has something to look at next round
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_GANDIVA_POLICY_H_
