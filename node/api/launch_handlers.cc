// The handlers of jobs gandivad starts itself: launch, and read_log for their
// output. launch answers once the process runs or failed to start (posix_spawn
// returns at exec), so the API thread waits on nothing but one spawn.
#include "api/node_handlers.h"
#include "jobs/container_peer.h"
#include "node.h"

namespace gandiva::controller {

using protocol::MessageType;

namespace {

StatusOr<Json> Launch(Node& node, const Call& call) {
  const Json& req = call.body();
  // gandivad starts a launched job in its own namespaces: a command, cwd and
  // restore directory named from inside a container mean other files there.
  GD_ASSIGN_OR_RETURN(const bool in_container, InContainer(call.caller.pid));
  if (in_container)
    return FailedPrecondition(
        "launch from inside a container would start the job outside it: run it in the "
        "container with `gandiva run` (without --detach), docs/containers.md");
  LaunchJob l;
  l.job.command = req.at("command").get<std::vector<std::string>>();
  l.job.cwd = req.at("cwd").get<std::string>();
  l.job.name = req.value("name", "");
  GD_RETURN_IF_ERROR(DevicesFromRequest(req, l.job));
  l.job.weight = req.value("weight", 1.0);
  GD_ASSIGN_OR_RETURN(l.job.ranks, RanksFromRequest(req));
  GD_ASSIGN_OR_RETURN(l.job.env, protocol::EnvFromRequest(req));
  if (req.contains("env") && l.job.env.empty())
    return InvalidArgument("env must not be empty: leave it out to use gandivad's");
  l.user = req.value("user", "");
  // Filled in for a caller who is not an admin (access.h): their own.
  l.job.owner_uid = req.value("uid", int64_t{-1});
  if (req.contains("uid") && (l.job.owner_uid < 0 || l.job.owner_uid > 0xfffffffe))
    return InvalidArgument("uid must be a user id, not " + req["uid"].dump());
  l.restore = req.value("restore", "");
  const int64_t limit = req.value("memory_limit_bytes", int64_t{0});
  if (limit < 0) return InvalidArgument("memory_limit_bytes must be positive");
  l.memory_limit_bytes = static_cast<uint64_t>(limit);
  GD_ASSIGN_OR_RETURN(Job job, node.Launch(std::move(l)));
  return Json{{"job", job.id},
              {"name", job.name},
              {"device", job.device},
              {"devices", job.devices},
              {"pid", job.pid},
              {"stdout_log", job.stdout_log},
              {"stderr_log", job.stderr_log},
              {"memory_limit", job.memory_limit}};
}

StatusOr<Json> ReadLog(Node& node, const Json& req) {
  const int64_t id = req.at("job").get<int64_t>();
  if (id <= 0) return NotFound("no job " + std::to_string(id));
  GD_ASSIGN_OR_RETURN(Job job, node.jobs().Find(static_cast<uint64_t>(id)));
  const std::string stream = req.value("stream", "stdout");
  if (stream != "stdout" && stream != "stderr")
    return InvalidArgument("stream must be stdout or stderr, not '" + stream + "'");
  const int64_t offset = req.value("offset", int64_t{0});
  const int64_t max_bytes = req.value("max_bytes", static_cast<int64_t>(kMaxLogReadBytes));
  if (offset < 0 || max_bytes <= 0) return InvalidArgument("offset must be >= 0 and max_bytes > 0");
  GD_ASSIGN_OR_RETURN(LogRead r,
                      node.logs().Read(job.id, stream == "stderr", static_cast<uint64_t>(offset),
                                       static_cast<size_t>(max_bytes)));
  return Json{{"data", std::move(r.data)},
              {"offset", r.offset},
              {"next_offset", r.next_offset},
              {"end_offset", r.end_offset},
              {"ended", job.ended}};
}

}  // namespace

void RegisterLaunchHandlers(Dispatcher& d, Node& node) {
  d.OnSync(MessageType::kLaunch, [&node](const Call& c) { return Launch(node, c); });
  d.OnSync(MessageType::kReadLog, [&node](const Call& c) { return ReadLog(node, c.body()); });
}

}  // namespace gandiva::controller
