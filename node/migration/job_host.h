// What the migrator needs of the rest of the node: the jobs it moves and the
// holds that keep them parked. Node implements it over its job table and
// device loops; the migrator's unit tests use a fake.
//
// Thread-safety: every method may be called from any migration worker or the
// API thread, with no lock of the migrator held.
#ifndef GANDIVA_NODE_MIGRATION_JOB_HOST_H_
#define GANDIVA_NODE_MIGRATION_JOB_HOST_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gandiva/contract/control_block.h"
#include "gandiva/status.h"
#include "jobs/migration_stage.h"

namespace gandiva::controller {

// A live job as a migration sees it.
struct MovableJob {
  uint64_t id = 0;
  std::string name;
  std::vector<std::string> command;
  std::string cwd;
  std::map<std::string, std::string> env;
  double weight = 1.0;
  int pid = 0;
  std::shared_ptr<runtime::ControlBlock> cb;  // stays mapped while this lives
  std::string managed_by;                     // "" unless another system owns its processes
  int64_t owner_uid = -1;                     // the user it was registered for; -1: gandivad's
  // Registered from a container (its block is a file in STATE/blocks): its
  // command, cwd and environment are the container's (docs/containers.md).
  bool in_container = false;
};

// A job arriving by migration, to be started here and held warm.
struct ArrivingJob {
  std::string name;
  std::vector<std::string> command;
  std::string cwd;
  std::map<std::string, std::string> env;
  std::string device;  // empty: the least loaded
  std::optional<double> weight;
  std::string migrated_from;  // "node/job"
  // The user it ran as on its source, and runs as here (checked by the
  // destination: a user of this node, never root); -1: gandivad's own.
  int64_t owner_uid = -1;
};

struct Arrival {
  uint64_t job = 0;
  std::shared_ptr<runtime::ControlBlock> cb;
  std::string log;  // where its output goes
};

class JobHost {
 public:
  virtual ~JobHost() = default;
  // The job if it is live; the API's errors otherwise (NotFound, FailedPrecondition).
  virtual StatusOr<MovableJob> LiveJob(int64_t job) = 0;
  // Holds the job parked (it parks at its next boundary) or lets it queue again.
  virtual void SetHeld(uint64_t job, bool held) = 0;
  virtual bool IsHeld(uint64_t job) = 0;
  // The job is leaving for `to` ("node/job" there), where its state has
  // loaded: its coming exit is the move, not a failure. Recorded on disk
  // (departure committed) so that a restarted node still sends migrate_start.
  virtual void MarkMigrated(uint64_t job, const std::string& to) = 0;
  // The destination answered migrate_start: the hand-over is done (on disk too).
  virtual void MarkHandedOver(uint64_t job) = 0;
  // Ends the source's record of a job that has moved.
  virtual void EndMigrated(uint64_t job) = 0;
  // Registers and starts an arriving job (arrival warming), held at its first
  // boundary; should this node go away before the state is in, the copy exits.
  virtual StatusOr<Arrival> StartArrival(const ArrivingJob& job) = 0;
  // The arriving job's state has loaded and its commit succeeded: recorded on
  // disk (arrival loaded) before the copy may outlive this node (the caller
  // then clears exit_if_orphaned), so that a restarted node holds it until
  // its source's migrate_start. FailedPrecondition unless it was warming.
  virtual Status MarkLoaded(uint64_t job) = 0;
  // Its source's migrate_start came: recorded (arrival started) before the
  // caller releases it.
  virtual void MarkStarted(uint64_t job) = 0;
  // Where the job stands as a migration's copy; kNone if it did not arrive by
  // one, or is unknown.
  virtual ArrivalStage ArrivalStageOf(uint64_t job) = 0;
  // Ends a job's process at once (SIGKILL); NotFound if the job is unknown.
  virtual Status KillJob(uint64_t job) = 0;
  // Asks the parked job to checkpoint to / restore from `target` (see
  // runtime::RequestTransfer), continuing its processes first if the node had
  // stopped them; NotFound if the job is not live.
  virtual Status RequestTransfer(uint64_t job, runtime::Request kind,
                                 const std::string& target) = 0;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_JOB_HOST_H_
