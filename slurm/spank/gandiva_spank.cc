// gandiva_spank.so: the SPANK plugin that puts a Slurm step under its node's
// gandivad. Glue only: the rules are in step_options.*, the calls to gandivad
// in node_session.*; docs/slurm.md has the operator's set-up.
//
//   srun/sbatch --gandiva[=WEIGHT]        the step's task is a gandiva job on the
//                                         node, time-sliced with the other jobs on
//                                         its device at iteration boundaries (a
//                                         step of several tasks per node runs
//                                         unmanaged, saying why)
//   srun/sbatch --gandiva-checkpoint=DIR  on SIGTERM (preemption, scancel) the job
//                                         saves its state to DIR at its next
//                                         boundary; a restarted job restores it
//
// Where it runs (spank.h): the options are checked in srun/sbatch (local and
// allocator contexts) so that a wrong flag fails the submission, not the job.
// In slurmstepd, init_post_opt (as root, before the tasks exist) registers the
// step and sets the tasks' environment; task_init (in each task, before exec)
// prints what the plugin has to say into the job's own output;
// task_post_fork and exit (root again) report the process and its end.
// Nothing here throws into Slurm, and a step whose gandivad is missing runs
// as it would without the plugin, saying so in one line.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

// spank.h declares the callbacks outside its own extern "C" block.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "as_user.h"
#include "gandiva/contract/environment.h"
#include "gandiva/contract/python_startup.h"
#include "node_session.h"
#include "step_options.h"

#define GANDIVA_SPANK_EXPORT extern "C" __attribute__((visibility("default")))

// What the Slurm plugin loader looks up (SPANK_PLUGIN, spelled out: in C++ a
// namespace-scope const has internal linkage).
GANDIVA_SPANK_EXPORT const char plugin_name[] = "gandiva";
GANDIVA_SPANK_EXPORT const char plugin_type[] = "spank";
GANDIVA_SPANK_EXPORT const unsigned int plugin_version = SLURM_VERSION_NUMBER;
GANDIVA_SPANK_EXPORT const unsigned int spank_plugin_version = 1;

namespace gandiva::slurm {
namespace {

// One process's state: srun or sbatch, or one step's slurmstepd (its tasks are
// forked from it after init_post_opt and inherit what was set by then).
PluginArgs g_args;
std::string g_config_error;  // plugstack.conf's arguments were wrong: --gandiva is refused
bool g_gandiva = false;
std::optional<double> g_weight;
std::string g_checkpoint_dir;
std::vector<std::string> g_notes;      // lines for the job's output (task 0's stderr)
int64_t g_job = 0;                     // the step's gandiva job, 0 when unmanaged
int g_task0_status = -1;               // wait status of local task 0, -1 until it ended
std::optional<NodeSession> g_session;  // the step's gandivad, once --gandiva registered it

int OnGandivaOption(int, const char* optarg, int remote) {
  if (!g_config_error.empty()) {
    slurm_error("--gandiva: the gandiva plugin is misconfigured (%s)", g_config_error.c_str());
    return -1;
  }
  auto weight = ParseWeight(optarg);
  if (!weight.ok()) {
    slurm_error("--gandiva: %s", weight.status().message().c_str());
    return -1;
  }
  g_gandiva = true;
  g_weight = *weight;
  return 0;
}

int OnCheckpointOption(int, const char* optarg, int remote) {
  g_checkpoint_dir = optarg ? optarg : "";
  // Checked where the user submits, as the user; slurmstepd runs as root here,
  // so on the node the job's runtime checks it again as the job's user (and
  // the plugin looks into it as that user, SetUpCheckpoint).
  if (!remote) {
    if (Status s = CheckCheckpointDir(g_checkpoint_dir); !s.ok()) {
      slurm_error("--gandiva-checkpoint: %s", s.message().c_str());
      return -1;
    }
  }
  return 0;
}

spank_option g_options[] = {
    {const_cast<char*>("gandiva"), const_cast<char*>("[weight]"),
     const_cast<char*>("Run the step's tasks as one gandiva job on each node, time-sliced with "
                       "the other jobs on its device at iteration boundaries; WEIGHT (0 < w <= "
                       "16) is its share, default its shard count or 1."),
     2, 0, OnGandivaOption},
    {const_cast<char*>("gandiva-checkpoint"), const_cast<char*>("dir"),
     const_cast<char*>("On SIGTERM (preemption, scancel) save the job's state to DIR (absolute) "
                       "at its next iteration boundary; a job started again restores it."),
     1, 0, OnCheckpointOption},
    SPANK_OPTIONS_TABLE_END};

std::string JobEnv(spank_t sp, const char* name) {
  char buf[4096];
  return spank_getenv(sp, name, buf, sizeof(buf)) == ESPANK_SUCCESS ? std::string(buf) : "";
}

void SetJobEnv(spank_t sp, const std::string& name, const std::string& value) {
  if (spank_setenv(sp, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS)
    g_notes.push_back("gandiva: cannot set " + name + " in the job's environment");
}

// The node's Slurm name: SLURMD_NODENAME, else the host name.
std::string NodeName(spank_t sp) {
  std::string node = JobEnv(sp, "SLURMD_NODENAME");
  if (node.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    node = host;
  }
  return node;
}

// The shim beside this plugin, as `cmake --install` puts both in <prefix>/lib.
std::string DefaultShim() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&DefaultShim), &info) || !info.dli_fname) return "";
  const auto shim = std::filesystem::path(info.dli_fname).parent_path() / "libgandiva_shim.so";
  std::error_code ec;
  return std::filesystem::exists(shim, ec) ? shim.string() : "";
}

// gandiva's Python start-up hook first on the job's PYTHONPATH (python_startup.h): an
// unmodified PyTorch script's optimizer steps mark its boundaries (GANDIVA_AUTO_TORCH=0: not).
void AddPythonStartupHook(spank_t sp) {
  Dl_info info{};
  const std::string plugin =
      dladdr(reinterpret_cast<void*>(&AddPythonStartupHook), &info) && info.dli_fname
          ? info.dli_fname
          : "";
  std::map<std::string, std::string> env;
  for (const char* name : {gandiva::runtime::kEnvAutoTorch, gandiva::runtime::kEnvPythonPath})
    if (std::string value = JobEnv(sp, name); !value.empty()) env[name] = value;
  gandiva::runtime::AddStartupHook(env, gandiva::runtime::FindStartupHookDir(plugin));
  if (auto path = env.find(gandiva::runtime::kEnvPythonPath); path != env.end())
    SetJobEnv(sp, path->first, path->second);
}

StepJob DescribeStep(spank_t sp, uint32_t job_id, uint32_t step_id) {
  StepJob step;
  step.name = "slurm-" + std::to_string(job_id) + "." +
              (step_id == SLURM_BATCH_SCRIPT ? std::string("batch") : std::to_string(step_id));
  int argc = 0;
  char** argv = nullptr;
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS)
    for (int i = 0; i < argc; ++i) step.command.emplace_back(argv[i]);
  if (step.command.empty()) step.command.emplace_back("slurm-step");
  char** env = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &env) == ESPANK_SUCCESS && env)
    for (char** e = env; *e; ++e)
      if (const char* eq = std::strchr(*e, '=')) step.env[std::string(*e, eq - *e)] = eq + 1;
  step.cwd = JobEnv(sp, "PWD");
  if (step.cwd.empty()) step.cwd = "/";
  uint32_t tasks = 1;
  if (spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &tasks) == ESPANK_SUCCESS && tasks > 0)
    step.ranks = static_cast<int>(tasks);
  step.weight = StepWeight(g_weight, step.env.count("SLURM_SHARDS_ON_NODE")
                                         ? step.env["SLURM_SHARDS_ON_NODE"].c_str()
                                         : nullptr);
  std::string gpus = JobEnv(sp, "SLURM_STEP_GPUS");
  if (gpus.empty()) gpus = JobEnv(sp, "SLURM_JOB_GPUS");
  step.device = DeviceOfSlurmGpus(gpus.c_str());
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) == ESPANK_SUCCESS) step.uid = uid;
  return step;
}

// --gandiva-checkpoint: SIGTERM saves to DIR; a restarted job restores from it.
void SetUpCheckpoint(spank_t sp, int ranks) {
  if (ranks > 1) {
    g_notes.push_back("gandiva: --gandiva-checkpoint is not supported yet for a step of " +
                      std::to_string(ranks) +
                      " tasks on one node; SIGTERM ends it without a checkpoint");
    return;
  }
  SetJobEnv(sp, checkpoint::kEnvCheckpointOnTerm, g_checkpoint_dir);
  uint32_t restarts = 0;
  spank_get_item(sp, S_SLURM_RESTART_COUNT, &restarts);
  // The directory is the user's to name: look into it as the user, never as
  // slurmstepd's root (which could read or remove what the user may not).
  uid_t uid = 0;
  gid_t gid = 0;
  StatusOr<std::unique_ptr<FilesAsUser>> as_user =
      spank_get_item(sp, S_JOB_UID, &uid) == ESPANK_SUCCESS &&
              spank_get_item(sp, S_JOB_GID, &gid) == ESPANK_SUCCESS
          ? FilesAsUser::Enter(uid, gid)
          : StatusOr<std::unique_ptr<FilesAsUser>>(Internal("Slurm did not say the job's user"));
  if (!as_user.ok()) {
    g_notes.push_back("gandiva: " + as_user.status().message() + ": not looking into " +
                      g_checkpoint_dir + " for a checkpoint to restore");
    return;
  }
  const RestorePlan plan = PlanRestore(g_checkpoint_dir, restarts);
  as_user->reset();  // root again
  if (plan.restore) SetJobEnv(sp, checkpoint::kEnvRestore, g_checkpoint_dir);
  if (!plan.message.empty()) g_notes.push_back(plan.message);
}

// Registers the step on the device of its Slurm GPU, else, where the node's
// gandivad has no such device (one with CPU devices only, or fewer GPUs than
// gres.conf names), on gandivad's choice, saying so: the step is still sliced
// with the node's other jobs, rather than running unmanaged beside them.
StatusOr<Registered> RegisterOnADevice(const NodeSession& session, const std::string& node,
                                       StepJob& step) {
  auto registered = session.Register(step);
  if (registered.ok() || !step.device || registered.status().code() != StatusCode::kNotFound)
    return registered;
  const std::string slurm_device = *step.device;
  step.device.reset();
  registered = session.Register(step);
  if (registered.ok())
    g_notes.push_back("gandiva: " + node + "'s gandivad has no " + slurm_device +
                      ", the GPU Slurm gave " + step.name +
                      "; it is sliced on gandivad's choice, " + registered->device +
                      (registered->gpu ? " (Slurm's gres.conf and gandivad's GPUs disagree)" : ""));
  return registered;
}

// --gandiva: the step becomes a job of the node's gandivad.
void RegisterStep(spank_t sp, StepJob step) {
  const std::string node = NodeName(sp);
  if (step.ranks > 1) {
    // gandivad ends a gang when its one reported process ends (its launcher,
    // for torchrun); a Slurm step has no such process, and reporting task 0
    // would kill the other ranks when it ends first. Until gandivad can watch
    // a gang's ranks without a launcher, such a step runs unmanaged.
    g_notes.push_back("gandiva: " + step.name + " has " + std::to_string(step.ranks) +
                      " tasks on " + node +
                      "; a gang without a launcher process is not supported yet: it runs "
                      "unmanaged (one task per node, or torchrun as the one task, is managed)");
    return;
  }
  const NodeSession& session =
      g_session.emplace(ExpandNodeName(g_args.endpoint, node), g_args.timeout_ms);
  auto registered = RegisterOnADevice(session, node, step);
  if (!registered.ok()) {
    g_notes.push_back("gandiva: " +
                      std::string(registered.status().code() == StatusCode::kUnavailable
                                      ? "no gandivad answered"
                                      : "gandivad refused the step") +
                      " at " + session.endpoint() + " on " + node + " (" +
                      registered.status().message() + "): it runs unmanaged, without time slicing");
    return;
  }
  g_job = registered->job;
  for (const auto& [k, v] : registered->env) SetJobEnv(sp, k, v);
  AddPythonStartupHook(sp);
  if (registered->gpu) {
    const std::string shim = g_args.shim.empty() ? DefaultShim() : g_args.shim;
    if (shim.empty()) {
      g_notes.push_back(
          "gandiva: the CUDA shim is not installed beside the plugin; the job runs "
          "without it (no swap, no inferred boundaries)");
    } else {
      const std::string preload = JobEnv(sp, "LD_PRELOAD");
      SetJobEnv(sp, "LD_PRELOAD", preload.empty() ? shim : shim + ":" + preload);
    }
  }
  char weight[32];
  std::snprintf(weight, sizeof(weight), "%g", step.weight);
  g_notes.push_back("gandiva: " + step.name + " is job " + std::to_string(g_job) + " on " + node +
                    "'s " + registered->device + " (weight " + weight + ")");
}

int TaskId(spank_t sp) {
  int id = -1;
  return spank_get_item(sp, S_TASK_ID, &id) == ESPANK_SUCCESS ? id : -1;
}

}  // namespace
}  // namespace gandiva::slurm

using namespace gandiva::slurm;  // NOLINT: the callbacks below are the plugin's C interface

GANDIVA_SPANK_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  auto args = ParsePluginArgs(std::vector<std::string>(av, av + ac));
  if (args.ok()) {
    g_args = *args;
  } else {
    g_config_error = "plugstack.conf: " + args.status().message();
    slurm_error("gandiva: %s", g_config_error.c_str());
  }
  for (spank_option& o : g_options)
    if (o.name && spank_option_register(sp, &o) != ESPANK_SUCCESS)
      slurm_error("gandiva: cannot register --%s", o.name);
  return 0;
}

GANDIVA_SPANK_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  if (!spank_remote(sp) || (!g_gandiva && g_checkpoint_dir.empty())) return 0;
  uint32_t job_id = 0, step_id = 0;
  spank_get_item(sp, S_JOB_ID, &job_id);
  spank_get_item(sp, S_JOB_STEPID, &step_id);
  if (step_id == SLURM_EXTERN_CONT) return 0;
  // A step inside a batch script that is already a gandiva job: its processes
  // inherit that job's environment and take part in it.
  if (!JobEnv(sp, gandiva::runtime::kEnvControlBlock).empty()) return 0;
  StepJob step = DescribeStep(sp, job_id, step_id);
  if (!g_checkpoint_dir.empty()) SetUpCheckpoint(sp, step.ranks);
  if (g_gandiva) RegisterStep(sp, std::move(step));
  return 0;
}

GANDIVA_SPANK_EXPORT int slurm_spank_task_init(spank_t sp, int, char**) {
  const int task = TaskId(sp);
  if (task == 0)
    for (const std::string& note : g_notes) std::fprintf(stderr, "%s\n", note.c_str());
  std::fflush(stderr);
  return 0;
}

GANDIVA_SPANK_EXPORT int slurm_spank_task_post_fork(spank_t sp, int, char**) {
  if (!g_job || TaskId(sp) != 0) return 0;
  pid_t pid = 0;
  if (spank_get_item(sp, S_TASK_PID, &pid) != ESPANK_SUCCESS) return 0;
  if (gandiva::Status s = g_session->Started(g_job, pid); !s.ok())
    slurm_error("gandiva: job %lld: cannot report its process to gandivad: %s",
                static_cast<long long>(g_job), s.message().c_str());
  return 0;
}

GANDIVA_SPANK_EXPORT int slurm_spank_task_exit(spank_t sp, int, char**) {
  if (!g_job || TaskId(sp) != 0) return 0;
  int status = 0;
  if (spank_get_item(sp, S_TASK_EXIT_STATUS, &status) == ESPANK_SUCCESS) g_task0_status = status;
  return 0;
}

GANDIVA_SPANK_EXPORT int slurm_spank_exit(spank_t sp, int, char**) {
  if (!spank_remote(sp) || !g_job) return 0;
  const int status = g_task0_status < 0 ? 0 : g_task0_status;
  const int signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  const int code = signal ? 128 + signal : WEXITSTATUS(status);
  // gandivad may be gone (it notices the process's end by itself then).
  if (gandiva::Status s = g_session->Exited(g_job, code, signal); !s.ok())
    slurm_debug("gandiva: job %lld: cannot report its exit: %s", static_cast<long long>(g_job),
                s.message().c_str());
  g_job = 0;
  return 0;
}
