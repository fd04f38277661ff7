// Plain value types shared by the scheduler, its policies and its cluster
// implementations (simulated or live): job and GPU ids, a job's submission.
#ifndef GANDIVA_SCHED_TYPES_H_
#define GANDIVA_SCHED_TYPES_H_

#include <cstdint>
#include <string>

namespace gandiva::sched {

using JobId = int32_t;  // dense, 0..N-1 in submission order
using GpuId = int32_t;  // dense index into Topology::gpus()
inline constexpr int kNoGroup = -1;

// What is known about a job when it is submitted. Nothing here is the future:
// the true duration lives only in the simulator (SimCluster::OracleRemaining).
struct JobInfo {
  JobId id = 0;
  double submit_time = 0;  // seconds since the trace's first submission
  int num_gpus = 1;        // gang size: all GPUs at once or none
  int vc = 0;              // virtual cluster / user group, interned
  int user = 0;            // interned; 0 when the trace has none
  int job_type = -1;       // PerfModel type index (model + batch size); -1 unknown
  int gpu_type = -1;       // required Topology GPU type, -1 = any
  // It can be checkpointed and restarted from the checkpoint (every trace
  // job can; a live job only if submitted --restartable).
  bool restartable = true;
};

// How a running job is preempted (Cluster::Suspend); the policy chooses.
enum class Preemption : uint8_t {
  // Suspended at an iteration boundary with its memory kept on its node:
  // it resumes there in about a slice.
  kPark,
  // Checkpointed and stopped: its node gets its memory back, and it restarts
  // from the checkpoint on any GPUs, paying a restore.
  kStop,
};

enum class JobState : uint8_t {
  kNotSubmitted,  // simulation has not reached its submit time yet
  kPending,       // queued, or suspended back into the queue
  kRunning,       // holds GPUs (possibly sharing them, possibly stalled)
  kFinished,
};

// How the jobs that share one set of GPUs (a group) share it.
enum class ShareMode : uint8_t {
  kSlice,  // take turns (suspend/resume at iteration boundaries)
  kPack,   // run at the same time; speed from the co-location table
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_TYPES_H_
