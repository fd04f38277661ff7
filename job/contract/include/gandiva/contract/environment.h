// The environment through which gandivad (or `gandiva run`) hands a job to the
// runtime inside it: which control block is the job's, its id, the controller's
// endpoint, and a checkpoint to restore from. Part of the job <-> node contract.
#ifndef GANDIVA_CONTRACT_ENVIRONMENT_H_
#define GANDIVA_CONTRACT_ENVIRONMENT_H_

namespace gandiva::runtime {

inline constexpr const char* kEnvControlBlock = "GANDIVA_CONTROL_BLOCK";  // shm name or file
// Set in a container that mounts gandivad's blocks directory somewhere else than
// where gandivad has it (docs/containers.md): `gandiva run` there takes the
// block gandivad names from this directory instead.
inline constexpr const char* kEnvBlocksDir = "GANDIVA_BLOCKS_DIR";
inline constexpr const char* kEnvJobId = "GANDIVA_JOB_ID";
inline constexpr const char* kEnvEndpoint = "GANDIVA_ENDPOINT";
// A gang of this many processes (`gandiva run --ranks N`): each process takes
// the control block "<GANDIVA_CONTROL_BLOCK>.r<k>", k its LOCAL_RANK (else RANK),
// as set by torchrun or any launcher of torch.distributed jobs.
inline constexpr const char* kEnvRanks = "GANDIVA_RANKS";
inline constexpr const char* kEnvLocalRank = "LOCAL_RANK";
inline constexpr const char* kEnvRank = "RANK";
inline constexpr const char* kRankBlockSuffix = ".r";
// The devices the job was given, comma-separated ("cpu0,cpu1"): one for most
// jobs; several for a job across devices (`gandiva run --devices`), whose
// process k (LOCAL_RANK) uses device k modulo their count.
inline constexpr const char* kEnvDevices = "GANDIVA_DEVICES";
// The job's device-memory cap in bytes (`gandiva run --gpu-memory SIZE`): the CUDA
// shim reports it as the device's memory and refuses allocations beyond it.
inline constexpr const char* kEnvGpuMemoryBytes = "GANDIVA_GPU_MEMORY_BYTES";
// Which Kubernetes pod the job runs in, as the pod's spec hands them down
// (docs/kubernetes.md): gandivad shows them in list_jobs and labels the job's
// metrics with them. What the job says: names to show, never trusted.
inline constexpr const char* kEnvPodNamespace = "GANDIVA_POD_NAMESPACE";
inline constexpr const char* kEnvPodName = "GANDIVA_POD_NAME";
inline constexpr const char* kEnvContainerName = "GANDIVA_CONTAINER_NAME";

}  // namespace gandiva::runtime

namespace gandiva::checkpoint {

// Set by `gandiva run --restore DIR`: the job restores from
// DIR/<kCheckpointFileName> at its first boundary.
inline constexpr const char* kEnvRestore = "GANDIVA_RESTORE";
inline constexpr const char* kCheckpointFileName = "state.gdck";
// A gang's checkpoint: DIR/rank-<k>/<kCheckpointFileName> per rank, all taken at
// the same iteration, and DIR/<kGangManifestName> ("ranks N\niteration I\n").
inline constexpr const char* kRankDirPrefix = "rank-";
// A directory (set by the Slurm plugin's --gandiva-checkpoint, or by hand): on
// SIGTERM the job saves its registered state to DIR/<kCheckpointFileName> at its
// next boundary (at once when parked), then ends by SIGTERM as it would have.
// What a preempted or cancelled job needs to continue from where it stopped.
inline constexpr const char* kEnvCheckpointOnTerm = "GANDIVA_CHECKPOINT_ON_TERM";
inline constexpr const char* kGangManifestName = "gang";
// Set by gandivad on a migration's destination copy: at its first boundary,
// before it parks warm, the job measures its own registered state (its save
// functions into a counter) and reserves that much receive memory, faulted
// in, so the state that arrives after the source stops lands in memory that
// is ready (on fresh memory the page faults and zeroing cost as much as the
// transfer).
inline constexpr const char* kEnvArriving = "GANDIVA_ARRIVING";

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CONTRACT_ENVIRONMENT_H_
