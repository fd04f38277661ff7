// Checkpoint and migration, the node's side: checkpoint a job to a directory;
// migrate one to a peer (the source side, MigrationSource); take one in from a
// peer (the destination side, ArrivalSession). All long work runs on worker
// threads; no request handler here waits on a job, a peer or the disk.
//
// Thread-safety: mu_ guards the operations, the arrivals and the workers. It is
// a leaf: the migrator never calls the JobHost, a peer or a session while
// holding it. Operations run on their own threads and reach the rest of the
// node only through the JobHost.
#ifndef GANDIVA_NODE_MIGRATION_MIGRATOR_H_
#define GANDIVA_NODE_MIGRATION_MIGRATOR_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gandiva/common/units.h"
#include "gandiva/protocol/dispatcher.h"
#include "migration/job_host.h"
#include "migration/operation.h"
#include "migration/peer.h"
#include "migration/workers.h"

namespace gandiva::controller {

using protocol::Call;
using protocol::Dispatcher;
using protocol::Json;
using protocol::Reply;

class ArrivalSession;

// How long each wait of a checkpoint or migration may last (shorter in tests).
struct MigrationTimeouts {
  uint64_t park_ns = 120'000 * kMs;        // the job reaches a boundary
  uint64_t warm_ns = 180'000 * kMs;        // the destination's copy warms up
  uint64_t warm_poll_ns = 20 * kMs;        // how often the source asks
  uint64_t checkpoint_ns = 600'000 * kMs;  // the job writes a checkpoint file
  int stream_ms = 30'000;                  // the job connects, or sends more state
  uint64_t written_ns = 30'000 * kMs;      // the job reports its state written
  int receive_accept_ms = 10'000;          // destination: the job connects
  int receive_write_ms = 30'000;           // destination: the job takes a chunk
  uint64_t load_ns = 120'000 * kMs;        // destination: the job loads the state
  uint64_t start_ns = 2'000 * kMs;         // destination: the job runs
  // Destination: a copy whose state has not loaded is dropped when its source
  // sends no step this long. Longer than a source may legitimately pause
  // between two steps (warm_ns + park_ns, before migrate_begin).
  uint64_t arrival_silence_ns = 600'000 * kMs;
  // Source: once the state has loaded there and the job here has ended,
  // migrate_start is sent this often, for this long, until the peer answers
  // (StartUntilAnswered). A restarted node starts over.
  uint64_t start_retry_poll_ns = 1'000 * kMs;
  uint64_t start_retry_ns = 300'000 * kMs;
};

struct MigratorOptions {
  std::string node;
  std::string state_dir;  // transfer sockets
  std::map<std::string, PeerInfo> peers;
  // Where arriving state is received: the address the API serves TCP on.
  std::string bulk_host = "127.0.0.1";
  bool has_key = false;  // the node can authenticate to peers
  // Connects to a peer (ConnectPeer, wrapped in a FaultInjectionPeer in fault tests).
  std::function<std::unique_ptr<Peer>(const PeerInfo&)> connect;
  MigrationTimeouts timeouts;
};

class Migrator {
 public:
  Migrator(JobHost* host, MigratorOptions options);
  ~Migrator();
  Migrator(const Migrator&) = delete;
  Migrator& operator=(const Migrator&) = delete;

  // Registers checkpoint, migrate and the migrate_* steps a source sends here.
  void RegisterHandlers(Dispatcher& dispatcher);
  // Running operations give up (each releases its job), arrivals are dropped,
  // and every worker is joined.
  void Stop();

  // The job's latest checkpoint or migration, if any.
  std::optional<Operation> OperationOf(uint64_t job) const;
  // Whether a checkpoint or migration of the job is running.
  bool Busy(uint64_t job) const;
  // Why `resume` may not release the job (OK if it may): a checkpoint or
  // migration of it is running, or it is a migration's copy not handed over.
  Status MayResume(uint64_t job) const;

  StatusOr<Json> Checkpoint(const Json& req);
  StatusOr<Json> Migrate(const Json& req);
  // The destination's steps; each replies when its work is done.
  void MigratePrepare(Call call, Reply reply);
  void MigrateStep(Call call, Reply reply);  // begin, commit, start
  StatusOr<Json> MigrateAbort(const Json& req);

  // A restarted node's part in migrations it was in (node_readopt.cc):
  // a copy here whose state had loaded waits, held, for its source's
  // migrate_start; a job this node had moved to `to` ("node/job") whose
  // migrate_start was not answered has it sent again (an operation of the job).
  void AdoptLoadedArrival(uint64_t job, std::shared_ptr<runtime::ControlBlock> cb,
                          std::string migrated_from);
  void ResumeHandOver(uint64_t job, const std::string& to);

 private:
  // Starts an operation on the job unless one is running.
  Status BeginOperation(uint64_t job, OperationKind kind, OperationStep step, std::string target);
  void Update(uint64_t job, const std::function<void(Operation&)>& update);
  // Marks the job's operation done, or failed with the status's message.
  void Finish(uint64_t job, const Status& result);
  void RunCheckpoint(uint64_t job, std::string dir);
  void RunMigration(uint64_t job, PeerInfo peer, std::string device);
  void RunHandOver(uint64_t job, PeerInfo peer, uint64_t remote_job);
  std::string TransferSocketPath(const char* role, uint64_t job);
  std::shared_ptr<ArrivalSession> FindArrival(uint64_t job) const;

  JobHost* host_;
  MigratorOptions options_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;
  std::map<uint64_t, Operation> operations_;
  std::map<uint64_t, std::shared_ptr<ArrivalSession>> arrivals_;  // by the arriving job's id
  std::vector<std::shared_ptr<ArrivalSession>> sessions_;         // all not yet reaped
  uint64_t transfer_seq_ = 0;
  Workers workers_;  // checkpoints and migrations out
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_MIGRATOR_H_
