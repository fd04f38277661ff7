// The environment through which gandivad (or `gandiva run`) hands a job to the
// runtime inside it: which control block is the job's, its id, the controller's
// endpoint, and a checkpoint to restore from. Part of the job <-> node contract.
#ifndef GANDIVA_CONTRACT_ENVIRONMENT_H_
#define GANDIVA_CONTRACT_ENVIRONMENT_H_

namespace gandiva::runtime {

inline constexpr const char* kEnvControlBlock = "GANDIVA_CONTROL_BLOCK";  // shm name
inline constexpr const char* kEnvJobId = "GANDIVA_JOB_ID";
inline constexpr const char* kEnvEndpoint = "GANDIVA_ENDPOINT";

}  // namespace gandiva::runtime

namespace gandiva::checkpoint {

// Set by `gandiva run --restore DIR`: the job restores from
// DIR/<kCheckpointFileName> at its first boundary.
inline constexpr const char* kEnvRestore = "GANDIVA_RESTORE";
inline constexpr const char* kCheckpointFileName = "state.gdck";

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CONTRACT_ENVIRONMENT_H_
