// The destination side of one migration, as an explicit state machine:
//
//   preparing -> warm -> receiving -> loading -> loaded -> running
//                  (any) -> failed | aborted
//
// preparing: start the job's command here, held at its first boundary
// (migrate_prepare); receiving: migrate_begin listens for the bulk connection
// (bulk_channel.h) and the session, right after replying, accepts the
// source's and hands it to the warm job, which reads and opens the sealed
// frames itself; loading: the job verifies and loads the state
// (migrate_commit); loaded: the copy is the job now (its source ends its
// own), recorded on disk before the commit's reply, and held until
// migrate_start; running: released (migrate_start). A gandivad restarted with
// a loaded copy starts a session in loaded (node_readopt.cc). The steps run in order
// on the session's own thread and each request's reply goes out when its step
// is done, so the API thread never waits for the job or the stream.
//
// Between steps the session watches two things. While receiving, a copy that
// rejects the stream (a frame that fails authentication or its checksum, a load
// that fails) has the bulk connection closed at once: the source's job, which
// may still be writing a large state, sees it break instead of waiting out its
// deadline, and its gandivad learns the copy's reason from migrate_commit. And
// a copy whose state has not loaded is dropped (killed, its devices freed) when
// its source sends no step, nor any bytes of its state on the bulk connection,
// for MigrationTimeouts::arrival_silence_ns: a source that died or hangs would
// otherwise hold it here forever. A loaded copy is
// never dropped so: its source may have ended its job, and it is the job now.
//
// Thread-safety: Post and Cancel from any thread; mu_ guards the queue and the
// state; the steps (and the socket to the job) belong to the session thread.
// The session calls the JobHost only without mu_ held.
#ifndef GANDIVA_NODE_MIGRATION_ARRIVAL_SESSION_H_
#define GANDIVA_NODE_MIGRATION_ARRIVAL_SESSION_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "gandiva/common/unique_fd.h"
#include "gandiva/protocol/dispatcher.h"
#include "migration/bulk_channel.h"
#include "migration/job_host.h"
#include "migration/migrator.h"

namespace gandiva::controller {

using protocol::Call;
using protocol::Json;
using protocol::Reply;

// migrate_start's answer for a copy that has been released: running, or queued
// behind its device's other jobs.
Json StartedReply(const runtime::ControlBlock& cb);

class ArrivalSession {
 public:
  enum class State {
    kPreparing,
    kWarm,
    kReceiving,
    kLoading,
    kLoaded,
    kRunning,
    kFailed,
    kAborted
  };

  // bulk_host: the address to receive the state on; socket_path: a fresh path
  // for the Unix socket the job reads its state from.
  ArrivalSession(JobHost* host, const MigrationTimeouts& timeouts, std::string bulk_host,
                 std::function<std::string(uint64_t job)> socket_path);
  // A copy whose state had loaded when this gandivad restarted, held: the
  // session starts loaded, waiting for its source's migrate_start.
  struct Loaded {
    uint64_t job = 0;
    std::shared_ptr<runtime::ControlBlock> cb;
    std::string migrated_from;  // "node/job"
  };
  ArrivalSession(JobHost* host, const MigrationTimeouts& timeouts, Loaded loaded);
  ~ArrivalSession();  // cancels and joins

  // Queues one step (a migrate_prepare, _begin, _commit or _start
  // request); `reply` is completed when it has run.
  void Post(Call call, Reply reply);
  // Why the copy may not be released by a `resume` (OK once migrate_start ran
  // or the session ended): until then the job trains at its source, or its
  // state is not here.
  Status MayResume() const;
  // The source gave up: steps not yet run fail, the session ends.
  void Cancel();
  State state() const;
  // The session thread has finished (running, failed or aborted).
  bool finished() const;

 private:
  struct Step {
    Call call;
    Reply reply;
  };
  void Loop();
  StatusOr<Json> RunStep(const Call& call);
  StatusOr<Json> Prepare(const Json& req);
  StatusOr<Json> Begin(const Json& req);
  // Accepts the source's bulk connection and hands it to the job (after Begin's reply).
  Status Receive();
  StatusOr<Json> Commit();
  StatusOr<Json> Start();
  // Whether the source gave up (Cancel).
  bool Cancelled() const;
  // Between steps: closes the bulk connection of a copy that rejected the
  // stream, drops a copy whose source went silent, notices one that died.
  void Watch();
  // Closes the bulk connection so that its peer sees it break (a reset).
  void CloseConnection();
  // Whether the session is in `state`; FailedPrecondition with `why` if not.
  Status Expect(State state, const char* why) const;
  void SetState(State state);

  JobHost* host_;
  const MigrationTimeouts timeouts_;
  const std::string bulk_host_;
  std::function<std::string(uint64_t)> socket_path_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Step> queue_;
  State state_ = State::kPreparing;
  bool cancelled_ = false;
  bool finished_ = false;
  // Session thread only.
  uint64_t job_ = 0;
  std::string migrated_from_;  // "node/job", for the log
  int64_t owner_uid_ = -1;     // the user the copy runs as; -1: gandivad's
  std::shared_ptr<runtime::ControlBlock> cb_;
  UniqueFd incoming_;  // the Unix connection on which the job takes the bulk connection
  std::unique_ptr<BulkListener> bulk_;  // open from Begin until the source connects
  UniqueFd connection_;                 // the bulk connection, also the job's
  BulkKey bulk_key_{};
  Status received_;            // how the stream's reception ended
  uint64_t last_step_ns_ = 0;  // when the source's latest step ran, or more of its state came
  uint64_t bytes_seen_ = 0;    // of the bulk connection (BytesReceived), at the last look
  std::thread thread_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_ARRIVAL_SESSION_H_
