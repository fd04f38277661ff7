// A job as the node knows it: identity, placement, its control block, how it
// ended. Plain data; the JobTable owns the records and their lock.
#ifndef GANDIVA_NODE_JOBS_JOB_H_
#define GANDIVA_NODE_JOBS_JOB_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gandiva/contract/profiler.h"
#include "gandiva/contract/shared_control_block.h"
#include "gandiva/protocol/enums.h"
#include "jobs/migration_stage.h"

namespace gandiva::controller {

// The job's state as the API reports it: the schema's enum (messages.def), whose
// wire names are protocol::ToString's. Live states are read off the control block
// (what the job itself says); exited, failed and migrated are terminal.
using protocol::JobState;

// The job's state read off a control block it has not left.
JobState LiveJobState(const runtime::ControlBlock* cb);

// What the device loops measure of a job. A device loop owns these figures
// while the job is on its device; the job table keeps them once it has left.
struct DeviceUsage {
  uint64_t slices = 0;            // times the job was resumed to run a slice
  uint64_t swaps = 0;             // times its device memory was swapped out to make room
  uint64_t device_time_ns = 0;    // sum of its slices, resume to park
  uint64_t running_since_ns = 0;  // resume time of the current slice; 0 when not running
  // Sharing (devices/alone_rate.h), filled in when read: its iteration time
  // alone on the device, and its throughput now against that; unknown yet: nullopt.
  std::optional<uint64_t> alone_ns;
  std::optional<double> rate_vs_alone;
  // device_time_ns with the current slice counted up to `now`.
  uint64_t DeviceTimeAt(uint64_t now) const {
    return device_time_ns +
           (running_since_ns && now > running_since_ns ? now - running_since_ns : 0);
  }
};

// How a job's process ended: the reason, and the signal or the words that go with it.
struct ProcessEnd {
  protocol::ExitReason reason = protocol::ExitReason::kNone;
  int signal = 0;      // killed: by this signal
  std::string detail;  // "exited with code 3", "killed by signal 9 (Killed)", ...
};

// The end a wait(2) status describes, and the exit code that goes with it
// (the status for an exit, 128+N for signal N).
ProcessEnd EndFromWaitStatus(int wait_status, int* exit_code);
// The end `gandiva run` reports: exit code, and the signal if one killed it (0: none).
ProcessEnd EndFromReport(int exit_code, int signal);
// A job's devices as one text, "cpu0,cpu1" (GANDIVA_DEVICES, logs, errors).
std::string DeviceListText(const std::vector<std::string>& devices);

// One job's record. Copyable: readers get snapshots, never pointers into the table.
struct Job {
  uint64_t id = 0;
  std::string name;
  std::string device;                // the first of `devices`
  std::vector<std::string> devices;  // all it spans: one, or several sliced as one
  double weight = 1.0;
  std::vector<std::string> command;
  std::string cwd;
  std::map<std::string, std::string> env;
  // Its device-memory cap, from env (GANDIVA_GPU_MEMORY_BYTES, which the CUDA shim
  // enforces); 0: none, or not a byte count (the shim then runs it uncapped too).
  uint64_t GpuMemoryCap() const;
  bool spawned = false;  // started by this daemon (a migration's destination): we reap it
  int pid = 0;
  uint64_t process_start = 0;  // its start time (process_identity.h): tells it from a pid reuse
  std::shared_ptr<runtime::SharedControlBlock> block;

  int64_t owner_uid = -1;  // the user it was registered for (may act on it); -1: gandivad's own
  bool launched = false;   // started by the launch request (gandivad is its parent)
  std::string user;        // who launched it, as they said
  std::string stdout_log;  // its output files, when this daemon started it
  std::string stderr_log;
  std::string memory_limit;  // "", "enforced: ..." or "not enforced: why"
  std::string cgroup_dir;    // its own cgroup, removed once it ended

  bool ended = false;
  bool failed = false;
  int exit_code = -1;  // -1: not known
  ProcessEnd end;      // how the process ended, in the schema's terms
  uint64_t registered_ns = 0;
  uint64_t ended_ns = 0;
  DeviceUsage usage_at_end;  // its device figures, frozen when it ended
  // Its own figures (from its control block) at its end: what is shown once the
  // block is gone, for a record read back after a restart. nullopt while live.
  std::optional<runtime::IterationStats> final_stats;
  uint64_t final_parks = 0;
  // Copies the control block's figures into final_stats and final_parks.
  void FreezeFigures();

  uint32_t ranks = 1;      // processes in the job: > 1 for a gang (node/jobs/gang.h)
  std::string gang_error;  // why the gang failed (a rank died, never registered), or ""

  // Its migration out, if any (jobs/migration_stage.h): moved to another node
  // ("node/job" there) once committed; this copy is gone.
  DepartureStage departure = DepartureStage::kNone;
  std::string migrated_to;
  bool migrated() const { return departure != DepartureStage::kNone; }
  // Its migration in, if it arrived by one ("node/job" it came from).
  ArrivalStage arrival = ArrivalStage::kNone;
  std::string migrated_from;
  // Who owns its processes when not gandiva ("slurm"): they start and end there,
  // so gandiva never migrates the job (a second copy would run elsewhere).
  std::string managed_by;

  runtime::ControlBlock* cb() const { return block ? block->get() : nullptr; }
  // The control block, kept mapped for as long as the returned pointer lives.
  std::shared_ptr<runtime::ControlBlock> SharedCb() const {
    return block ? std::shared_ptr<runtime::ControlBlock>(block, block->get()) : nullptr;
  }
  JobState State() const;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_JOB_H_
