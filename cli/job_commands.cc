// The commands for jobs gandivad starts itself: `gandiva run --detach` (the
// launch request), `gandiva logs JOB [--follow]` (read_log, from an offset, so
// it works the same over TCP), and `gandiva wait JOB` (the job's exit code).
#include "job_commands.h"

#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "scheduler_commands.h"

namespace gandiva::cli {

using protocol::EnumFromJson;
using protocol::ExitReason;
using protocol::Json;
using protocol::MessageType;

namespace {

constexpr int kExitTimedOut = 124;  // like timeout(1)
constexpr int kExitLost = 255;      // the job ended but its exit status is not known

std::string UserName() {
  if (const char* u = std::getenv("USER"); u && *u) return u;
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return std::to_string(getuid());
}

std::optional<Json> JobRecord(NodeCommand& c, int64_t job) {
  auto reply = c.Call(MessageType::kListJobs, {{"job", job}});
  if (!reply || (*reply)["jobs"].empty()) return std::nullopt;
  return (*reply)["jobs"][0];
}

// The exit status `gandiva wait` returns for an ended job's record.
int WaitStatusOf(const Json& j) {
  const auto reason = EnumFromJson<ExitReason>(j["exit_reason"]).value_or(ExitReason::kLost);
  switch (reason) {
    case ExitReason::kExited:
    case ExitReason::kFailedToStart:  // 127 not found, 126 not executable
      return j["exit_code"].get<int>();
    case ExitReason::kKilled:
      return 128 + j["exit_signal"].get<int>();
    case ExitReason::kMigrated:
      return kExitOk;
    default:
      return kExitLost;
  }
}

}  // namespace

int LaunchDetached(NodeCommand& c, Json fields) {
  fields["user"] = UserName();
  if (c.flags().Has("memory-mib")) {
    auto mib = c.flags().GetInt("memory-mib", 0);
    if (!mib.ok() || *mib <= 0) return c.UsageError("--memory-mib must be a positive number");
    fields["memory_limit_bytes"] = static_cast<int64_t>(*mib) << 20;
  }
  auto reply = c.Call(MessageType::kLaunch, fields);
  if (!reply) return kExitFailed;
  if (c.json()) {
    std::printf("%s\n", reply->dump(2).c_str());
  } else {
    std::printf("%s\n", (*reply)["job"].dump().c_str());
  }
  const std::string memory = (*reply)["memory_limit"].get<std::string>();
  if (memory.rfind("not enforced", 0) == 0)
    std::fprintf(stderr, "gandiva run: memory limit %s\n", memory.c_str());
  return kExitOk;
}

int LogsCommand(const Args& args) {
  NodeCommand c("gandiva logs", {"interval-ms"}, {"follow", "stderr", "scheduler"});
  if (!c.Parse(args)) return kExitUsage;
  const auto& pos = c.flags().positionals();
  const auto job = pos.size() == 1 ? ParseJobId(pos[0]) : std::nullopt;
  if (!job) return c.UsageError("usage: gandiva logs JOB [--follow] [--stderr]");
  auto interval = c.flags().GetInt("interval-ms", 200);
  if (!interval.ok() || *interval < 10) return c.UsageError("--interval-ms must be >= 10");
  const bool follow = c.flags().Has("follow");
  const std::string stream = c.flags().Has("stderr") ? "stderr" : "stdout";
  uint64_t offset = 0;
  for (;;) {
    auto r = c.Call(MessageType::kReadLog, {{"job", *job}, {"stream", stream}, {"offset", offset}});
    if (!r) return kExitFailed;
    if (const uint64_t from = (*r)["offset"].get<uint64_t>(); from > offset)
      std::fprintf(stderr, "[gandiva logs: %llu bytes dropped by the log cap]\n",
                   static_cast<unsigned long long>(from - offset));
    const std::string data = (*r)["data"].get<std::string>();
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    offset = (*r)["next_offset"].get<uint64_t>();
    const bool drained = offset >= (*r)["end_offset"].get<uint64_t>();
    if (drained && (!follow || (*r)["ended"].get<bool>())) return kExitOk;
    if (drained) std::this_thread::sleep_for(std::chrono::milliseconds(*interval));
  }
}

int WaitCommand(const Args& args) {
  NodeCommand c("gandiva wait", {"timeout-s"}, {"scheduler"});
  if (!c.Parse(args)) return kExitUsage;
  const auto& pos = c.flags().positionals();
  const auto job = pos.size() == 1 ? ParseJobId(pos[0]) : std::nullopt;
  if (!job) return c.UsageError("usage: gandiva wait JOB [--timeout-s S]");
  auto timeout = c.flags().GetInt("timeout-s", 0);
  if (!timeout.ok() || *timeout < 0) return c.UsageError("--timeout-s must be >= 0");
  if (c.flags().Has("scheduler"))
    return WaitForSchedulerJob(c, *job, static_cast<double>(*timeout));
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed_s = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::optional<double> lost_since;
  for (;;) {
    auto j = JobRecord(c, *job);
    if (!j) return kExitFailed;
    // Ended once its process has: its exit reason says how.
    const auto state = EnumFromJson<protocol::JobState>((*j)["state"]);
    if (state && protocol::HasEnded(*state) && (*j)["exit_reason"] != "none") {
      const bool lost = (*j)["exit_reason"] == "lost";
      // A `gandiva run` job's exit status follows its end by a moment (job_exited).
      if (!lost_since && lost) lost_since = elapsed_s();
      if (!lost || elapsed_s() - *lost_since > 2.0) {
        if (*state != protocol::JobState::kExited || lost)
          std::fprintf(stderr, "gandiva wait: job %lld %s: %s\n", static_cast<long long>(*job),
                       (*j)["exit_reason"].get<std::string>().c_str(),
                       (*j)["exit_detail"].get<std::string>().c_str());
        return WaitStatusOf(*j);
      }
    }
    if (*timeout > 0 && elapsed_s() > *timeout) return kExitTimedOut;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace gandiva::cli
