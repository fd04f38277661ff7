// `gandiva run`: registers a job with gandivad, starts CMD with the job's
// environment (control block, job id, Python package path, the CUDA shim
// preloaded for GPU jobs), reports its pid and its exit, returns its exit code.
// With --detach, gandivad starts CMD itself (launch) and this returns at once.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>

#include "gandiva/common/byte_size.h"
#include "gandiva/common/flags.h"
#include "gandiva/common/log.h"
#include "gandiva/contract/checkpoint_layout.h"
#include "gandiva/contract/environment.h"
#include "gandiva/contract/python_startup.h"
#include "gandiva/contract/shared_control_block.h"
#include "job_commands.h"
#include "node_client.h"

extern char** environ;

namespace gandiva::cli {

using protocol::EnumFromJson;
using protocol::Json;
using protocol::MessageType;

namespace {

pid_t g_child = 0;
void ForwardSignal(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

// The shim to preload: $GANDIVA_SHIM, else the one built beside this tool, else
// the one installed beside it (<prefix>/bin/gandiva -> <prefix>/lib/libgandiva_shim.so).
std::string ShimPath() {
  if (const char* s = std::getenv("GANDIVA_SHIM"); s && *s) return s;
#ifdef GANDIVA_BUILD_SHIM_PATH
  if (std::filesystem::exists(GANDIVA_BUILD_SHIM_PATH)) return GANDIVA_BUILD_SHIM_PATH;
#endif
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const auto installed = exe.parent_path().parent_path() / "lib" / "libgandiva_shim.so";
  if (!ec && std::filesystem::exists(installed, ec)) return installed.string();
  return "";
}

// The register_job request: the command, where it runs and its environment (enough
// to start it again elsewhere when it migrates), and the placement flags.
std::optional<Json> RegisterFields(NodeCommand& c) {
  std::error_code cwd_ec;
  Json fields = {{"command", c.flags().positionals()},
                 {"cwd", std::filesystem::current_path(cwd_ec).string()},
                 {"env", CurrentEnvironment()}};
  if (c.flags().Has("device")) fields["device"] = c.flags().Get("device");
  if (c.flags().Has("devices")) {
    // A job across devices: "cpu0,cpu1", sliced as one (its ranks one per device).
    if (c.flags().Has("device")) {
      c.UsageError("--device or --devices, not both");
      return std::nullopt;
    }
    const std::string list = c.flags().Get("devices");
    const std::vector<std::string> devices = SplitList(list);
    // SplitList drops empty names; here one is a mistake ("cpu0,", "cpu0,,cpu1").
    if (devices.size() != static_cast<size_t>(std::count(list.begin(), list.end(), ',')) + 1) {
      c.UsageError("--devices takes device names separated by commas, e.g. cpu0,cpu1");
      return std::nullopt;
    }
    fields["devices"] = devices;
  }
  if (c.flags().Has("name")) fields["name"] = c.flags().Get("name");
  if (c.flags().Has("ranks")) {
    auto ranks = c.flags().GetInt("ranks", 1);
    if (!ranks.ok()) {
      c.UsageError(ranks.status().message());
      return std::nullopt;
    }
    fields["ranks"] = *ranks;
  }
  if (c.flags().Has("weight")) {
    auto w = c.flags().GetDouble("weight", 1.0);
    if (!w.ok()) {
      c.UsageError(w.status().message());
      return std::nullopt;
    }
    fields["weight"] = *w;
  }
  if (c.flags().Has("gpu-memory")) {
    auto cap = ParseByteSize(c.flags().Get("gpu-memory"));
    if (!cap.ok()) {
      c.UsageError("--gpu-memory: " + cap.status().message());
      return std::nullopt;
    }
    // The shim reads it from the job's environment (and a migration carries it along).
    fields["env"][runtime::kEnvGpuMemoryBytes] = std::to_string(*cap);
  }
  return fields;
}

// gandiva's Python start-up hook first on PYTHONPATH (python_startup.h): an
// unmodified PyTorch script's optimizer steps mark its iteration boundaries.
// Not with GANDIVA_AUTO_TORCH=0. (With --detach gandivad adds it when it launches.)
void AddPythonStartupHook() {
  std::map<std::string, std::string> env;
  for (const char* name : {runtime::kEnvAutoTorch, runtime::kEnvPythonPath})
    if (const char* value = std::getenv(name)) env[name] = value;
  std::string hook = runtime::FindStartupHookDirFromExecutable();
  if (hook.empty()) hook = runtime::FindStartupHookDirOnPath(env[runtime::kEnvPythonPath]);
  runtime::AddStartupHook(env, hook);
  if (auto path = env.find(runtime::kEnvPythonPath); path != env.end())
    setenv(runtime::kEnvPythonPath, path->second.c_str(), 1);
}

// The environment the job starts with: its control block, id, the node's endpoint,
// and the CUDA shim preloaded on a GPU device (or when asked for).
void SetJobEnvironment(NodeCommand& c, const Json& reg, int64_t job) {
  std::string block = reg["control_block"].get<std::string>();
  // In a container (gandivad gave a file in its blocks directory), that
  // directory may be mounted elsewhere: GANDIVA_BLOCKS_DIR says where.
  if (const char* dir = std::getenv(runtime::kEnvBlocksDir);
      dir && *dir && runtime::SharedControlBlock::IsFileName(block))
    block = std::string(dir) + "/" + std::filesystem::path(block).filename().string();
  setenv(runtime::kEnvControlBlock, block.c_str(), 1);
  setenv(runtime::kEnvJobId, std::to_string(job).c_str(), 1);
  setenv(runtime::kEnvEndpoint, c.client().endpoint().c_str(), 1);
  // A gang: each rank takes its own block (by LOCAL_RANK/RANK); a migration
  // restarts the launcher with this environment, so the destination knows too.
  if (const int64_t ranks = reg["ranks"].get<int64_t>(); ranks > 1)
    setenv(runtime::kEnvRanks, std::to_string(ranks).c_str(), 1);
  else
    unsetenv(runtime::kEnvRanks);
  std::string devices;
  for (const Json& d : reg["devices"])
    devices += (devices.empty() ? "" : ",") + d.get<std::string>();
  setenv(runtime::kEnvDevices, devices.c_str(), 1);
  AddPythonStartupHook();
  // What the node adds (MPS's directories on a GPU where MPS runs).
  if (reg.contains("env") && reg["env"].is_object())
    for (const auto& [k, v] : reg["env"].items())
      if (v.is_string()) setenv(k.c_str(), v.get<std::string>().c_str(), 1);
  const bool gpu =
      EnumFromJson<protocol::DeviceKind>(reg["device_kind"]) == protocol::DeviceKind::kGpu;
  const bool capped = c.flags().Has("gpu-memory");
  if (!c.flags().Has("shim") && (!gpu || c.flags().Has("no-shim"))) {
    if (capped)  // only the shim enforces it
      std::fprintf(stderr,
                   "gandiva run: job %lld runs without the CUDA shim: --gpu-memory is not "
                   "enforced\n",
                   static_cast<long long>(job));
    return;
  }
  const std::string shim = ShimPath();
  if (shim.empty()) {
    std::fprintf(stderr, "gandiva run: the CUDA shim is not built; job %lld runs without it%s\n",
                 static_cast<long long>(job), capped ? ", uncapped" : "");
    return;
  }
  PrependEnv("LD_PRELOAD", shim, ':');
}

// Starts the command as our child, forwarding the signals a shell sends us; -1 on failure.
pid_t StartChild(const std::vector<std::string>& cmd) {
  std::vector<char*> argv;
  for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("gandiva run: fork");
    return -1;
  }
  if (pid == 0) {
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "gandiva run: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  g_child = pid;
  signal(SIGINT, ForwardSignal);
  signal(SIGTERM, ForwardSignal);
  signal(SIGHUP, ForwardSignal);
  return pid;
}

// Whether the job left this node by migration (then we say where it went).
bool ReportMigratedAway(NodeCommand& c, int64_t job) {
  auto jobs =
      CheckedReply(MessageType::kListJobs, c.client().Call(MessageType::kListJobs, {{"job", job}}));
  if (!jobs.ok() || (*jobs)["jobs"].empty()) return false;
  const Json& j = (*jobs)["jobs"][0];
  if (EnumFromJson<protocol::JobState>(j["state"]) != protocol::JobState::kMigrated ||
      !j["operation"].is_object())
    return false;
  std::fprintf(stderr, "gandiva run: job %lld migrated to %s as job %s; it continues there\n",
               static_cast<long long>(job), j["operation"]["target"].get<std::string>().c_str(),
               j["operation"]["to_job"].dump().c_str());
  return true;
}

// Why a gang failed (a rank died, one never registered), as gandivad saw it.
void ReportGangError(NodeCommand& c, int64_t job) {
  auto jobs =
      CheckedReply(MessageType::kListJobs, c.client().Call(MessageType::kListJobs, {{"job", job}}));
  if (!jobs.ok() || (*jobs)["jobs"].empty()) return;
  const Json& j = (*jobs)["jobs"][0];
  if (j.contains("gang_error") && !j["gang_error"].get<std::string>().empty())
    std::fprintf(stderr, "gandiva run: job %lld failed: %s\n", static_cast<long long>(job),
                 j["gang_error"].get<std::string>().c_str());
}

// `run --detach`: gandivad starts the job (launch) with this environment, the
// shim preloaded as `run` would (asked for, or a GPU node unless --no-shim).
int RunDetached(NodeCommand& c, Json fields) {
  if (const char* restore = std::getenv(checkpoint::kEnvRestore)) fields["restore"] = restore;
  bool shim = c.flags().Has("shim");
  if (!shim && !c.flags().Has("no-shim")) {
    auto devices = c.Call(MessageType::kListDevices);
    if (!devices) return kExitFailed;
    const std::string wanted = c.flags().Has("devices") ? fields["devices"][0].get<std::string>()
                                                        : c.flags().Get("device");
    for (const Json& d : (*devices)["devices"])
      if ((wanted.empty() || d["name"] == wanted) &&
          EnumFromJson<protocol::DeviceKind>(d["kind"]) == protocol::DeviceKind::kGpu)
        shim = true;
  }
  if (!shim && c.flags().Has("gpu-memory"))  // only the shim enforces it
    std::fprintf(stderr, "gandiva run: no CUDA shim for this job: --gpu-memory is not enforced\n");
  if (shim) {
    const std::string path = ShimPath();
    if (path.empty()) return c.UsageError("the CUDA shim is not built");
    const std::string old = fields["env"].value("LD_PRELOAD", "");
    fields["env"]["LD_PRELOAD"] = old.empty() ? path : path + ":" + old;
  }
  return LaunchDetached(c, std::move(fields));
}

}  // namespace

int RunCommand(const Args& args) {
  NodeCommand c(
      "gandiva run",
      {"device", "devices", "weight", "name", "restore", "memory-mib", "ranks", "gpu-memory"},
      {"shim", "no-shim", "detach"});
  if (!c.Parse(args, /*stop_at_positional=*/true)) return kExitUsage;
  const auto& cmd = c.flags().positionals();
  if (cmd.empty())
    return c.UsageError(
        "usage: gandiva run [--detach [--memory-mib N]] [--device D | --devices D1,D2] "
        "[--weight W] [--name N] "
        "[--ranks N] [--gpu-memory SIZE] [--restore DIR] -- CMD...");
  if (c.flags().Has("shim") && c.flags().Has("no-shim"))
    return c.UsageError("--shim or --no-shim, not both");
  if (c.flags().Has("gpu-memory") && c.flags().Has("no-shim"))
    return c.UsageError("--gpu-memory needs the CUDA shim, which enforces it (not --no-shim)");
  if (c.flags().Has("memory-mib") && !c.flags().Has("detach"))
    return c.UsageError("--memory-mib needs --detach (gandivad starts the job)");

  if (c.flags().Has("restore")) {
    // The job restores at its first boundary; a missing checkpoint is a usage error now, not later.
    std::error_code ec;
    const auto dir = std::filesystem::absolute(c.flags().Get("restore"), ec);
    const auto ranks = c.flags().GetInt("ranks", 1);
    if (Status s = checkpoint::CheckRestoreDir(dir.string(), ranks.ok() ? *ranks : 1); !s.ok())
      return c.UsageError(s.message());
    setenv(checkpoint::kEnvRestore, dir.c_str(), 1);
  }
#ifdef GANDIVA_BUILD_PYTHON_DIR
  if (std::filesystem::exists(GANDIVA_BUILD_PYTHON_DIR))
    PrependEnv("PYTHONPATH", GANDIVA_BUILD_PYTHON_DIR, ':');
#endif
  auto fields = RegisterFields(c);
  if (!fields) return kExitUsage;
  if (c.flags().Has("detach")) return RunDetached(c, std::move(*fields));
  if (c.flags().Has("gpu-memory"))  // the child inherits it
    setenv(runtime::kEnvGpuMemoryBytes,
           (*fields)["env"][runtime::kEnvGpuMemoryBytes].get<std::string>().c_str(), 1);
  auto reg = c.Call(MessageType::kRegisterJob, *fields);
  if (!reg) return kExitFailed;
  const int64_t job = (*reg)["job"].get<int64_t>();
  SetJobEnvironment(c, *reg, job);

  const pid_t pid = StartChild(cmd);
  if (pid < 0) {
    c.Call(MessageType::kJobExited, {{"job", job}, {"exit_code", 127}});
    return kExitFailed;
  }
  // The environment it really runs with (the shim preloaded, ...): a migration restarts it so.
  if (!c.Call(MessageType::kJobStarted,
              {{"job", job}, {"pid", pid}, {"env", CurrentEnvironment()}}))
    std::fprintf(stderr, "gandiva run: job %lld runs without its controller\n",
                 static_cast<long long>(job));

  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  // A job that migrated away was ended here on purpose.
  if (ReportMigratedAway(c, job)) return 0;
  ReportGangError(c, job);
  // The daemon may be gone by now; the exit code is what matters to the caller.
  const int signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (auto told = c.client().Call(MessageType::kJobExited,
                                  {{"job", job}, {"exit_code", code}, {"signal", signal}});
      !told.ok())
    GD_LOG(kDebug, "could not report the exit: %s", told.status().ToString().c_str());
  return code;
}

}  // namespace gandiva::cli
