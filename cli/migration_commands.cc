// gandiva keygen, checkpoint and migrate. checkpoint and migrate run in the
// daemon's background; these commands follow them until they end.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "gandiva/protocol/curve.h"
#include "node_client.h"
#include "table.h"

namespace gandiva::cli {

using protocol::EnumFromJson;
using protocol::Json;
using protocol::MessageType;
using protocol::OperationState;

int KeygenCommand(const Args& args) {
  Flags flags({"out", "name"}, {});
  if (Status s = flags.Parse(args); !s.ok() || !flags.Has("out")) {
    std::fprintf(stderr, "gandiva keygen: %s\nusage: gandiva keygen --out DIR [--name NAME]\n",
                 s.ok() ? "--out is required" : s.message().c_str());
    return kExitUsage;
  }
  char host[64] = "node";
  gethostname(host, sizeof host - 1);
  const std::string name = flags.Get("name", host);
  auto keys = protocol::GenerateCurveKeyPair();
  if (!keys.ok()) {
    std::fprintf(stderr, "gandiva keygen: %s\n", keys.status().message().c_str());
    return kExitFailed;
  }
  if (Status s = protocol::WriteCurveKeyPair(flags.Get("out"), name, *keys); !s.ok()) {
    std::fprintf(stderr, "gandiva keygen: %s\n", s.message().c_str());
    return kExitFailed;
  }
  std::printf("%s/%s.key (secret, keep it private)\n%s/%s.pub  %s\n", flags.Get("out").c_str(),
              name.c_str(), flags.Get("out").c_str(), name.c_str(), keys->public_key.c_str());
  return kExitOk;
}

namespace {

// Polls the job until its operation ends; prints progress steps; returns it.
std::optional<Json> FollowOperation(NodeCommand& c, int64_t job, int timeout_s) {
  std::string last_step;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    auto reply = c.Call(MessageType::kListJobs, {{"job", job}});
    if (!reply) return std::nullopt;
    const Json& op = (*reply)["jobs"][0]["operation"];
    if (op.is_object()) {
      if (!c.json() && op["step"] != last_step && !op["step"].get<std::string>().empty()) {
        last_step = op["step"].get<std::string>();
        std::fprintf(stderr, "  %s...\n", last_step.c_str());
      }
      if (EnumFromJson<OperationState>(op["state"]) != OperationState::kRunning) return op;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "gandiva: gave up following job %lld after %d s\n",
               static_cast<long long>(job), timeout_s);
  return std::nullopt;
}

int Finish(NodeCommand& c, const Json& op, const std::string& done_line) {
  const bool done = EnumFromJson<OperationState>(op["state"]) == OperationState::kDone;
  if (c.json()) {
    std::printf("%s\n", op.dump(2).c_str());
  } else if (done) {
    std::printf("%s\n", done_line.c_str());
  }
  if (!done) {
    std::fprintf(stderr, "gandiva %s: failed: %s\n", op["kind"].get<std::string>().c_str(),
                 op["error"].get<std::string>().c_str());
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

int CheckpointCommand(const Args& args) {
  NodeCommand c("gandiva checkpoint", {"to", "timeout"}, {"no-wait"});
  if (!c.Parse(args)) return kExitUsage;
  if (c.flags().positionals().size() != 1 || !c.flags().Has("to"))
    return c.UsageError("usage: gandiva checkpoint JOB --to DIR");
  auto id = ParseJobId(c.flags().positionals()[0]);
  if (!id) return c.UsageError("'" + c.flags().positionals()[0] + "' is not a job id");
  std::error_code ec;
  const std::string dir =
      std::filesystem::absolute(c.flags().Get("to"), ec).lexically_normal().string();
  if (!c.Call(MessageType::kCheckpoint, {{"job", *id}, {"dir", dir}})) return kExitFailed;
  if (c.flags().Has("no-wait")) return kExitOk;
  auto timeout = c.flags().GetInt("timeout", 600);
  auto op = FollowOperation(c, *id, timeout.ok() ? static_cast<int>(*timeout) : 600);
  if (!op) return kExitFailed;
  return Finish(c, *op,
                "job " + std::to_string(*id) + " checkpointed to " + dir + " (" +
                    Bytes((*op)["bytes"].get<double>()) + ")");
}

int MigrateCommand(const Args& args) {
  NodeCommand c("gandiva migrate", {"to", "timeout"}, {"no-wait"});
  if (!c.Parse(args)) return kExitUsage;
  if (c.flags().positionals().size() != 1 || !c.flags().Has("to"))
    return c.UsageError("usage: gandiva migrate JOB --to NODE[:DEVICE]");
  auto id = ParseJobId(c.flags().positionals()[0]);
  if (!id) return c.UsageError("'" + c.flags().positionals()[0] + "' is not a job id");
  std::string to = c.flags().Get("to"), device;
  if (auto colon = to.find(':'); colon != std::string::npos) {
    device = to.substr(colon + 1);
    to = to.substr(0, colon);
  }
  Json fields = {{"job", *id}, {"to", to}};
  if (!device.empty()) fields["device"] = device;
  if (!c.Call(MessageType::kMigrate, fields)) return kExitFailed;
  if (c.flags().Has("no-wait")) return kExitOk;
  auto timeout = c.flags().GetInt("timeout", 600);
  auto op = FollowOperation(c, *id, timeout.ok() ? static_cast<int>(*timeout) : 600);
  if (!op) return kExitFailed;
  // migrate_start had no answer at first (lost, or the peer restarting): sent again.
  const uint64_t tries = op->value("start_tries", uint64_t{1});
  const std::string again = tries > 1
                                ? " (migrate_start had no answer " + std::to_string(tries - 1) +
                                      (tries == 2 ? " time" : " times") + " and was sent again)"
                                : "";
  return Finish(c, *op,
                "job " + std::to_string(*id) + " is now job " + (*op)["to_job"].dump() + " on " +
                    to + ": " + Bytes((*op)["bytes"].get<double>()) + " sent, downtime " +
                    Fixed((*op)["downtime_ms"].get<double>(), 1) + " ms" + again);
}

}  // namespace gandiva::cli
