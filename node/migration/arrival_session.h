// The destination side of one migration, as an explicit state machine:
//
//   preparing -> warm -> receiving -> loading -> loaded -> running
//                  (any) -> failed | aborted
//
// preparing: start the job's command here, held at its first boundary
// (migrate_prepare); receiving: the warm job reads the stream from a Unix
// socket we write each chunk into (migrate_begin, migrate_chunk); loading: end
// of stream, the job verifies and loads it (migrate_commit); running: released
// (migrate_start). The source sends the steps one after another, chunks
// pipelined; they run in order on the session's own thread and each request's
// reply goes out when its step is done. So the source's flow control (a window
// of chunks, each acknowledged once written) is unchanged, and the API thread
// never waits for the job.
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
#include "migration/job_host.h"
#include "migration/migrator.h"

namespace gandiva::controller {

using protocol::Call;
using protocol::Json;
using protocol::Reply;

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

  // socket_path: a fresh path for the Unix socket the job reads its state from.
  ArrivalSession(JobHost* host, const MigrationTimeouts& timeouts,
                 std::function<std::string(uint64_t job)> socket_path);
  ~ArrivalSession();  // cancels and joins

  // Queues one step (a migrate_prepare, _begin, _chunk, _commit or _start
  // request); `reply` is completed when it has run.
  void Post(Call call, Reply reply);
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
  StatusOr<Json> Begin();
  StatusOr<Json> Chunk(const Json& req, std::string_view payload);
  StatusOr<Json> Commit();
  StatusOr<Json> Start();
  // Whether the session is in `state`; FailedPrecondition with `why` if not.
  Status Expect(State state, const char* why) const;
  void SetState(State state);

  JobHost* host_;
  const MigrationTimeouts timeouts_;
  std::function<std::string(uint64_t)> socket_path_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Step> queue_;
  State state_ = State::kPreparing;
  bool cancelled_ = false;
  bool finished_ = false;
  // Session thread only.
  uint64_t job_ = 0;
  std::shared_ptr<runtime::ControlBlock> cb_;
  UniqueFd incoming_;  // the socket the job reads its state from
  uint64_t next_seq_ = 0;
  std::thread thread_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_ARRIVAL_SESSION_H_
