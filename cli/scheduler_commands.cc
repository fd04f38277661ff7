// `gandiva scheduler`, `submit`, `queue`, `cancel`: the cluster scheduler's
// commands (docs/scheduler.md). `logs` and `wait` take --scheduler to mean a
// scheduler's job id (job_commands.cc).
#include "scheduler_commands.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "commands.h"
#include "gandiva/scheduler/live_daemon.h"
#include "table.h"

namespace gandiva::cli {

using protocol::Json;
using protocol::MessageType;

int SchedulerCommand(const Args& args) { return sched::RunSchedulerDaemon(args); }

int SubmitCommand(const Args& args) {
  NodeCommand c("gandiva submit", {"gpus", "ranks", "name", "user", "vc", "kind", "cwd"},
                {"restartable"});
  c.TalkToScheduler();
  if (!c.Parse(args, /*stop_at_positional=*/true)) return kExitUsage;
  const auto& cmd = c.flags().positionals();
  if (cmd.empty())
    return c.UsageError(
        "usage: gandiva submit [--gpus N] [--ranks N] [--name N] [--user U] [--vc VC] "
        "[--kind K] [--restartable] [--cwd DIR] -- CMD...");
  auto gpus = c.flags().GetInt("gpus", 1);
  auto ranks = c.flags().GetInt("ranks", 1);
  if (!gpus.ok() || !ranks.ok()) return c.UsageError("--gpus and --ranks take a number");
#ifdef GANDIVA_BUILD_PYTHON_DIR
  if (std::filesystem::exists(GANDIVA_BUILD_PYTHON_DIR))
    PrependEnv("PYTHONPATH", GANDIVA_BUILD_PYTHON_DIR, ':');
#endif
  std::error_code ec;
  const auto cwd = std::filesystem::absolute(c.flags().Get("cwd", "."), ec).lexically_normal();
  const char* user = std::getenv("USER");
  Json req = {{"command", cmd},
              {"cwd", cwd.string()},
              {"env", CurrentEnvironment()},
              {"gpus", *gpus},
              {"ranks", *ranks},
              {"user", c.flags().Get("user", user ? user : "")},
              {"restartable", c.flags().Has("restartable")}};
  if (c.flags().Has("name")) req["name"] = c.flags().Get("name");
  if (c.flags().Has("vc")) req["vc"] = c.flags().Get("vc");
  if (c.flags().Has("kind")) req["kind"] = c.flags().Get("kind");
  auto r = c.Call(MessageType::kSubmit, req);
  if (!r) return kExitFailed;
  if (c.json())
    std::printf("%s\n", r->dump().c_str());
  else
    std::printf("%llu\n", static_cast<unsigned long long>((*r)["job"].get<uint64_t>()));
  return kExitOk;
}

int QueueCommand(const Args& args) {
  NodeCommand c("gandiva queue", {"job"}, {"all"});
  c.TalkToScheduler();
  if (!c.Parse(args)) return kExitUsage;
  Json req = {{"all", c.flags().Has("all")}};
  if (c.flags().Has("job")) {
    const auto job = ParseJobId(c.flags().Get("job"));
    if (!job) return c.UsageError("--job takes a job id");
    req["job"] = *job;
  }
  auto r = c.Call(MessageType::kQueue, req);
  if (!r) return kExitFailed;
  if (c.json()) {
    std::printf("%s\n", r->dump().c_str());
    return kExitOk;
  }
  Table t({"JOB", "NAME", "USER", "STATE", "WHERE", "ATTEMPT", "ATTAINED_S", "RATE", "DETAIL"});
  for (const Json& j : (*r)["jobs"]) {
    const std::string where = j["node"].get<std::string>().empty()
                                  ? "-"
                                  : j["node"].get<std::string>() + ":" +
                                        j["device"].get<std::string>() + "/" +
                                        std::to_string(j["node_job"].get<uint64_t>());
    t.Add({std::to_string(j["id"].get<uint64_t>()), j["name"].get<std::string>(),
           j["user"].get<std::string>(), j["state"].get<std::string>(), where,
           std::to_string(j["attempt"].get<uint64_t>()), Fixed(j["attained_s"].get<double>(), 1),
           j["rate"].is_null() ? "-" : Fixed(j["rate"].get<double>(), 2),
           j["detail"].get<std::string>()});
  }
  std::printf("policy %s, nodes:", (*r)["policy"].get<std::string>().c_str());
  for (const Json& n : (*r)["nodes"])
    std::printf(" %s(%s)", n["name"].get<std::string>().c_str(), n["up"] ? "up" : "down");
  std::printf("\n");
  t.Print();
  return kExitOk;
}

int CancelCommand(const Args& args) {
  NodeCommand c("gandiva cancel");
  c.TalkToScheduler();
  if (!c.Parse(args)) return kExitUsage;
  const auto& pos = c.flags().positionals();
  const auto job = pos.size() == 1 ? ParseJobId(pos[0]) : std::nullopt;
  if (!job) return c.UsageError("usage: gandiva cancel JOB");
  auto r = c.Call(MessageType::kCancel, {{"job", *job}});
  if (!r) return kExitFailed;
  if (c.json()) std::printf("%s\n", r->dump().c_str());
  return kExitOk;
}

int WaitForSchedulerJob(NodeCommand& c, int64_t job, double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    auto r = c.Call(MessageType::kQueue, {{"job", job}});
    if (!r) return kExitFailed;
    const Json& j = (*r)["jobs"][0];
    const std::string state = j["state"].get<std::string>();
    if (state == "finished") return kExitOk;
    if (state == "failed" || state == "cancelled") {
      std::fprintf(stderr, "gandiva wait: job %lld %s: %s\n", static_cast<long long>(job),
                   state.c_str(), j["detail"].get<std::string>().c_str());
      if (state == "cancelled") return 130;
      const int code = j["exit_code"].get<int>();
      return code > 0 && code < 256 ? code : kExitFailed;
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (timeout_s > 0 && waited > timeout_s) return 124;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace gandiva::cli
