// What the Slurm plugin reads from its plugstack.conf arguments, from
// `--gandiva[=WEIGHT]` and `--gandiva-checkpoint=DIR`, and from the step's
// Slurm environment; pure functions, so that every rule is tested without a
// Slurm (tests/slurm/step_options_test.cc) and the plugin's callbacks stay glue.
#ifndef GANDIVA_SLURM_SPANK_STEP_OPTIONS_H_
#define GANDIVA_SLURM_SPANK_STEP_OPTIONS_H_

#include <optional>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::slurm {

// The arguments after the plugin's path in plugstack.conf.
struct PluginArgs {
  // gandivad's endpoint on each node; "%n" is replaced by the Slurm node name
  // (several slurmd "nodes" on one machine, each with its own gandivad).
  std::string endpoint = "ipc:///run/gandiva/gandivad.sock";
  // The CUDA shim preloaded into jobs on GPU devices; empty: the one installed
  // beside the plugin (<prefix>/lib/libgandiva_shim.so), if any.
  std::string shim;
  int timeout_ms = 2000;  // for each call to gandivad
};
// "endpoint=URL", "shim=PATH", "timeout_ms=N"; anything else is an error naming it.
StatusOr<PluginArgs> ParsePluginArgs(const std::vector<std::string>& args);

// --gandiva's WEIGHT: absent, empty or "(null)" means "not given"; else a
// number in (0, 16]. "(null)" is how Slurm 22.05 passes `sbatch --gandiva`
// (no WEIGHT) on to an srun inside the job: through the job's environment
// (SLURM_SPANK__SLURM_SPANK_OPTION_gandiva_gandiva), printed from a NULL.
StatusOr<std::optional<double>> ParseWeight(const char* text);
// The weight a step runs with: the one given, else its shards of the GPU
// (SLURM_SHARDS_ON_NODE, which Slurm 22.05's gres/shard sets for a job or step
// holding `--gres=shard:N`, with SLURM_JOB_GPUS/SLURM_STEP_GPUS naming the GPU
// they are of: weights proportional to shard counts, capped at 16), else 1.
double StepWeight(std::optional<double> given, const char* shards_on_node);

// --gandiva-checkpoint's DIR: absolute (the job may start again on another
// node), and a directory it can write, or one it can create.
Status CheckCheckpointDir(const std::string& dir);

// The endpoint with "%n" replaced by the node's name ("%%" is a "%").
std::string ExpandNodeName(const std::string& endpoint, const std::string& node);

// The gandivad device of a step's GPUs (SLURM_STEP_GPUS or SLURM_JOB_GPUS,
// "2" or "2,3"): the first one, "gpu2"; nullopt when unset or malformed (then
// gandivad picks its least loaded device, as it does when it has no such
// device: see RegisterStep in gandiva_spank.cc).
std::optional<std::string> DeviceOfSlurmGpus(const char* gpus);

// What a starting step does with its checkpoint directory: restore from it
// when it holds a complete checkpoint, and say why or why not.
struct RestorePlan {
  bool restore = false;
  std::string message;  // one line for the job's output; empty: nothing to say
};
// restart_count: Slurm's (S_SLURM_RESTART_COUNT), 0 for a first start.
RestorePlan PlanRestore(const std::string& dir, unsigned restart_count);

}  // namespace gandiva::slurm

#endif  // GANDIVA_SLURM_SPANK_STEP_OPTIONS_H_
