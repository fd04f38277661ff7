// Node: the jobs gandivad starts itself, launched or arriving by migration; see node.h.
#include <unistd.h>

#include <filesystem>

#include "gandiva/common/log.h"
#include "gandiva/contract/checkpoint_layout.h"
#include "gandiva/contract/environment.h"
#include "gandiva/contract/python_startup.h"
#include "jobs/as_user.h"
#include "node.h"

extern char** environ;

namespace gandiva::controller {

namespace {

namespace fs = std::filesystem;

std::map<std::string, std::string> DaemonEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (auto eq = kv.find('='); eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// What a launch must get right before anything is registered.
Status CheckLaunch(const LaunchJob& l) {
  if (l.job.command.empty() || l.job.command[0].empty())
    return InvalidArgument("launch needs a non-empty command");
  std::error_code ec;
  if (l.job.cwd.empty() || l.job.cwd[0] != '/')
    return InvalidArgument("cwd must be an absolute path, not '" + l.job.cwd + "'");
  if (!fs::is_directory(l.job.cwd, ec))
    return InvalidArgument("cwd " + l.job.cwd + " is not a directory");
  if (!l.restore.empty()) {
    if (l.restore[0] != '/')
      return InvalidArgument("restore must be an absolute path, not '" + l.restore + "'");
    // Looked at as the job's user, who restores it: root finds nothing for
    // them in a directory they may not reach (and tells them nothing of it).
    const std::vector<std::string> paths = checkpoint::RestoreDirPaths(l.restore, l.job.ranks);
    GD_ASSIGN_OR_RETURN(std::vector<char> kinds, StatAsUser(l.job.owner_uid, paths));
    auto kind = [&](const std::string& path) -> char {
      for (size_t k = 0; k < paths.size(); ++k)
        if (paths[k] == path) return kinds[k];
      return 0;
    };
    if (Status s = checkpoint::CheckRestoreDir(l.restore, l.job.ranks, kind); !s.ok())
      return InvalidArgument("restore: " + s.message());
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Job> Node::Launch(LaunchJob l) {
  GD_RETURN_IF_ERROR(CheckLaunch(l));
  std::map<std::string, std::string> env =
      l.job.env.empty() ? DaemonEnvironment() : std::move(l.job.env);
  l.job.env = {};
  GD_ASSIGN_OR_RETURN(Job job, Register(std::move(l.job)));
  std::string cgroup, memory_limit;
  if (l.memory_limit_bytes > 0) {
    memory_limit = cgroups_.status();  // "not enforced: why" unless the cgroup is made below
    if (cgroups_.enforced()) {
      auto dir = cgroups_.CreateForJob(job.id, l.memory_limit_bytes);
      if (!dir.ok()) {
        EndJob(job.id, true, -1, {protocol::ExitReason::kFailedToStart, 0, dir.status().message()});
        return dir.status();
      }
      cgroup = *dir;
      memory_limit =
          "enforced: memory.max " + std::to_string(l.memory_limit_bytes) + " bytes in " + cgroup;
    }
  }
  GD_RETURN_IF_ERROR(jobs_.UpdateLive(job.id, [&](Job& j) {
    j.launched = true;
    j.user = l.user;
    j.memory_limit = memory_limit;
    j.cgroup_dir = cgroup;
    return Status::Ok();
  }));
  env.erase(checkpoint::kEnvRestore);
  if (!l.restore.empty()) env[checkpoint::kEnvRestore] = l.restore;
  GD_RETURN_IF_ERROR(StartJobProcess(job, std::move(env), cgroup));
  GD_ASSIGN_OR_RETURN(job, jobs_.Find(job.id));
  GD_LOG(kInfo, "job %llu (%s) launched: pid %d, output in %s", (unsigned long long)job.id,
         job.name.c_str(), job.pid, job.stdout_log.c_str());
  return job;
}

Status Node::StartJobProcess(const Job& job, std::map<std::string, std::string> env,
                             const std::string& cgroup_dir) {
  for (const auto& [k, v] : JobEnvironment(job.devices)) env[k] = v;       // on GPUs: which, MPS
  if (job.ranks > 1) env[runtime::kEnvRanks] = std::to_string(job.ranks);  // a gang
  env[runtime::kEnvDevices] = DeviceListText(job.devices);
  env[runtime::kEnvControlBlock] = job.block->name();
  env[runtime::kEnvJobId] = std::to_string(job.id);
  env[runtime::kEnvEndpoint] = options_.endpoint;
  // An unmodified PyTorch script's optimizer steps as its boundaries (GANDIVA_AUTO_TORCH=0: not).
  runtime::AddStartupHook(env, runtime::FindStartupHookDirFromExecutable());
  const std::string logs = options_.state_dir + "/job-" + std::to_string(job.id);
  LaunchSpec spec{job.command,      job.cwd,    env,          logs + ".stdout",
                  logs + ".stderr", cgroup_dir, job.owner_uid};
  GD_RETURN_IF_ERROR(jobs_.UpdateLive(job.id, [&](Job& j) {
    j.env = env;  // as it really runs: a migration starts it so again
    j.stdout_log = spec.stdout_path;
    j.stderr_log = spec.stderr_path;
    return Status::Ok();
  }));
  // Job ids start at 1 again with each daemon: drop an earlier daemon's files of this id.
  for (const std::string& path : {spec.stdout_path, spec.stderr_path}) {
    unlink(path.c_str());
    unlink((path + ".1").c_str());
  }
  logs_.Add(job.id, spec.stdout_path, spec.stderr_path);
  auto started = StartProcess(spec);
  if (!started.ok()) {
    const Status& error = started.status();
    EndJob(job.id, true, ExitCodeOfStartError(error),
           {protocol::ExitReason::kFailedToStart, 0, error.message()});
    GD_LOG(kWarn, "job %llu: %s", (unsigned long long)job.id, error.message().c_str());
    return Status(error.code(), "job " + std::to_string(job.id) + ": " + error.message());
  }
  return SetSpawnedProcess(job.id, std::move(*started));
}

}  // namespace gandiva::controller
