// A job as the node controller knows it: identity, placement, its control block,
// and what the controller has measured of it.
#ifndef GANDIVA_CONTROLLER_JOB_H_
#define GANDIVA_CONTROLLER_JOB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gandiva/contract/shared_control_block.h"

namespace gandiva::controller {

// The job's state as the API reports it. Live states are read off the control
// block (what the job itself says); exited and failed are terminal.
enum class JobState { kStarting, kRunning, kSuspending, kSuspended, kExited, kFailed, kMigrated };
const char* JobStateName(JobState state);

// A checkpoint or migration of the job, run by a worker thread; shown in list_jobs.
struct Operation {
  std::string kind;   // "checkpoint", "migrate"
  std::string state;  // "running", "done", "failed"
  std::string step;   // what it is doing now, e.g. "warming", "streaming"
  std::string error;
  std::string target;  // checkpoint dir, or destination node
  uint64_t bytes = 0;
  double downtime_ms = 0;  // migrate: source parked -> destination running
  uint64_t to_job = 0;
  uint64_t started_ns = 0, finished_ns = 0;
};

struct Job {
  uint64_t id = 0;
  std::string name;
  std::string device;
  double weight = 1.0;
  std::vector<std::string> command;
  std::string cwd;
  std::map<std::string, std::string> env;
  bool spawned = false;  // started by this daemon (a migration's destination): we reap it
  int pid = 0;
  int pidfd = -1;
  bool held = false;  // suspended by a user: stays parked until resumed
  std::unique_ptr<runtime::SharedControlBlock> block;

  bool ended = false;
  bool failed = false;
  int exit_code = -1;  // -1: not known
  uint64_t registered_ns = 0;
  uint64_t ended_ns = 0;

  std::optional<Operation> operation;  // the latest checkpoint or migration
  bool migrated = false;               // moved to another node; this copy is gone
  std::string migrated_from;           // "node/job" when it arrived by migration
  int incoming_fd = -1;                // destination: the socket the job reads state from
  uint64_t incoming_seq = 0;

  // Measured by the device loop.
  uint64_t slices = 0;            // times the job was resumed to run a slice
  uint64_t swaps = 0;             // times its device memory was swapped out to make room
  uint64_t device_time_ns = 0;    // sum of its slices, resume to park
  uint64_t running_since_ns = 0;  // resume time of the current slice; 0 when not running

  runtime::ControlBlock* cb() const { return block ? block->get() : nullptr; }
  JobState State() const;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_CONTROLLER_JOB_H_
