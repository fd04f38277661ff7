// The source side of one migration, as an explicit state machine:
//
//   preparing -> warming -> parking -> streaming -> restoring -> switching -> done
//
// preparing: the peer starts the job's command (migrate_prepare); warming: wait
// until that copy has parked at its first boundary; parking: hold the source
// at its next boundary (downtime starts); streaming: we open the bulk
// connection to the peer and hand it to the source job, which writes its state
// into it (to the warm copy, which reads it); restoring: the copy verifies and
// loads it (migrate_commit);
// switching: record the move (on disk), end the source, then let the copy run
// (migrate_start, sent again until the peer answers: StartUntilAnswered).
// A failure before switching aborts the peer's copy and releases the source,
// which trains on from where it parked: nothing is lost. From switching on the
// copy is the job (jobs/migration_stage.h).
//
// Thread-safety: one MigrationSource runs on one worker thread.
#ifndef GANDIVA_NODE_MIGRATION_MIGRATION_SOURCE_H_
#define GANDIVA_NODE_MIGRATION_MIGRATION_SOURCE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "migration/job_host.h"
#include "migration/migrator.h"
#include "migration/operation.h"
#include "migration/peer.h"

namespace gandiva::controller {

// Holds the job parked and waits until it parks; returns when it parked (not
// earlier than now). The caller releases the hold when it is done, or failed.
StatusOr<uint64_t> HoldAndPark(JobHost& host, const MovableJob& job, uint64_t timeout_ns,
                               const std::atomic<bool>& stopping);

// migrate_start of the peer's `remote_job`, sent again every
// timeouts.start_retry_poll_ns while no answer comes (lost on the way, or the
// peer restarting), for at most timeouts.start_retry_ns or until `stopping`.
// Any answer ends it, a refusal too: the state is there, and the job's process
// here has ended. `tries`: how many were sent.
Status StartUntilAnswered(Peer& peer, uint64_t remote_job, const MigrationTimeouts& timeouts,
                          const std::atomic<bool>& stopping, uint32_t* tries);
// What a hand-over whose migrate_start failed reports: where the state is.
Status StartFailed(const std::string& peer, uint64_t remote_job, uint32_t tries, const Status& why);

class MigrationSource {
 public:
  enum class State { kPreparing, kWarming, kParking, kStreaming, kRestoring, kSwitching, kDone };

  struct Context {
    JobHost* host;
    std::unique_ptr<Peer> peer;
    std::string node;  // this node's name, for the peer
    const MigrationTimeouts* timeouts;
    const std::atomic<bool>* stopping;
    // A fresh path for the Unix socket on which the job takes the bulk connection.
    std::function<std::string()> socket_path;
    // Records progress in the job's operation (step, to_job, bytes, downtime).
    std::function<void(const std::function<void(Operation&)>&)> update;
  };

  MigrationSource(Context context, uint64_t job, std::string device);
  // Runs the migration to its end; the operation's result.
  Status Run();

 private:
  StatusOr<State> RunStep(State state);
  StatusOr<State> Prepare();
  StatusOr<State> Warm();
  StatusOr<State> Park();
  StatusOr<State> Stream();
  // Why the source job's write failed, asking the destination first.
  Status WriteFailed();
  StatusOr<State> Restore();
  StatusOr<State> Switch();
  // A failure in `state`: the peer drops its copy, the source trains on.
  Status Fail(State state, const Status& why);

  Context ctx_;
  const uint64_t job_;
  const std::string device_;
  MovableJob source_;
  uint64_t remote_job_ = 0;
  bool held_ = false;
  uint64_t parked_at_ns_ = 0;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_MIGRATION_SOURCE_H_
