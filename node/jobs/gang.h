// A gang: one job of several processes (the ranks of a torch.distributed job),
// presented to the rest of gandivad as one job.
//
// The job's own control block (the "leader", the one the device loop, the
// heartbeat and the migrator see) is attached by no process. Each rank has its
// own block, "<leader>.r<k>", which the rank's runtime picks by its LOCAL_RANK
// (or RANK). The gang's thread carries what the node asks of the leader over to
// the ranks, and reports back on the leader what the ranks do together:
//  - a suspend parks every rank at the same iteration (gang_park.h), and the
//    leader reads "parked" only then; a resume releases every rank;
//  - a checkpoint or restore on the leader becomes one per rank, all at that
//    iteration (gang_transfer.h);
//  - the heartbeat and the controller's going away reach every rank;
//  - the leader's profile is rank 0's, its state the gang's.
// So the device loop, the slicer and the migrator treat a gang as one job and
// need no change. A rank that dies (or never registers) fails the gang: every
// other rank and the launcher are killed, and error() says why.
//
// Thread-safety: the gang's thread is the only writer of the ranks' controller
// fields and of the leader's job fields; the node calls the public methods from
// its own threads (they take mu_ or touch atomics only). The gang never calls
// into the node, so it is a leaf in the node's lock order.
#ifndef GANDIVA_NODE_JOBS_GANG_H_
#define GANDIVA_NODE_JOBS_GANG_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/contract/shared_control_block.h"
#include "gandiva/status.h"
#include "jobs/gang_park.h"

namespace gandiva::controller {

class Gang {
 public:
  // Creates the ranks' blocks beside `leader` and marks it a gang's leader.
  // owner_uid (>= 0: a job of another user than gandivad's): the ranks' blocks
  // are that user's, the leader's stays gandivad's (no process attaches to it,
  // and what it asks is what root does), and a pid a rank reports is taken only
  // if that user could signal the process itself.
  static StatusOr<std::unique_ptr<Gang>> Create(std::shared_ptr<runtime::SharedControlBlock> leader,
                                                uint32_t ranks, uint64_t register_timeout_ns,
                                                int64_t owner_uid = -1);
  // Takes back a gang that a gandivad before this one ran (node_readopt.cc): the
  // ranks' blocks beside `leader`, opened again. NotFound if one is gone.
  static StatusOr<std::unique_ptr<Gang>> Adopt(std::shared_ptr<runtime::SharedControlBlock> leader,
                                               uint32_t ranks, uint64_t register_timeout_ns,
                                               int64_t owner_uid = -1);
  ~Gang();
  Gang(const Gang&) = delete;
  Gang& operator=(const Gang&) = delete;

  void Start();
  // The process that launched the ranks (torchrun): signalled when the gang
  // fails. Its pid was checked by the caller (the job's reported process).
  void SetLauncher(int pid);
  // The job ended: the thread stops, the ranks' names are removed, and any rank
  // still alive is killed (a failed or migrated gang must not run on). Does not wait.
  void Finish();
  // The controller goes away: every rank resumes for good (fail-open), then the thread stops.
  void ReleaseForever();
  // The controller goes away, to be started again: the thread stops, every rank
  // resumes and keeps its block, so that the next one can Adopt the gang.
  void ReleaseUntilAdopted();
  // Waits for the thread (after Finish or ReleaseForever).
  void Join();
  // Kills every rank process (SIGKILL) and the launcher (SIGTERM), through the
  // pidfds taken when each registered: never a pid read from a rank's block now.
  void KillAll();

  uint32_t size() const { return static_cast<uint32_t>(ranks_.size()); }
  // Why the gang failed ("rank 1 (pid 4242) was killed by signal 9"), or "".
  std::string error() const;
  // Every rank detached cleanly (the job exited).
  bool AllExited() const;
  const std::string& rank_block_name(uint32_t k) const { return ranks_[k]->name(); }

 private:
  Gang(std::shared_ptr<runtime::SharedControlBlock> leader,
       std::vector<std::unique_ptr<runtime::SharedControlBlock>> ranks, uint64_t timeout_ns,
       int64_t owner_uid);
  void Loop();
  void Forward();     // heartbeat, controller_gone, exit_if_orphaned: leader -> ranks
  void WatchRanks();  // registrations, deaths, the registration deadline
  void Drive();       // the leader's request, carried out on the ranks
  void Suspend();     // one tick of parking the gang
  void Resume();
  void StartTransfer(uint32_t kind);
  void FinishTransfer();
  void MirrorProfile();
  void Fail(const std::string& why);
  std::vector<RankView> Views() const;
  runtime::ControlBlock* rank(size_t k) const { return ranks_[k]->get(); }

  std::shared_ptr<runtime::SharedControlBlock> leader_block_;
  runtime::ControlBlock* leader_;
  std::vector<std::unique_ptr<runtime::SharedControlBlock>> ranks_;
  const uint64_t register_timeout_ns_;
  const uint64_t register_deadline_ns_;
  const int64_t owner_uid_;
  std::vector<UniqueFd> pidfds_;  // per rank, once registered (the gang thread's)
  std::vector<bool> gone_;        // per rank: its process ended
  std::vector<int> pids_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> killed_{false};
  std::atomic<bool> release_{false};
  std::thread thread_;

  // The gang thread's own state.
  bool resumed_ = false;   // the ranks were last told to run
  bool settled_ = false;   // parked at one count; the leader says parked
  uint64_t target_ = 0;    // the park target last stored in every rank
  uint64_t mirrored_ = 0;  // rank 0 iterations copied into the leader's ring
  std::thread transfer_;
  std::atomic<bool> transfer_done_{false};
  uint32_t transfer_kind_ = 0;
  Status transfer_status_;
  uint64_t transfer_bytes_ = 0;
  uint64_t transfer_started_ns_ = 0;

  mutable std::mutex mu_;  // guards error_, kill_fds_, launcher_
  std::string error_;
  std::vector<UniqueFd> kill_fds_;  // per rank: a copy of pidfds_[k], for KillAll
  UniqueFd launcher_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_GANG_H_
