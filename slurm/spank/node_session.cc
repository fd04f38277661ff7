// See node_session.h.
#include "node_session.h"

#include <unistd.h>

#include <filesystem>

#include "gandiva/common/private_files.h"
#include "gandiva/contract/environment.h"
#include "gandiva/protocol/client.h"
#include "gandiva/protocol/enums.h"

namespace gandiva::slurm {

using protocol::Json;
using protocol::MessageType;

namespace {

// What gandivad adds to a step's environment: the GPUs it chose and MPS's
// directories. Anything else in a reply (LD_PRELOAD, PATH) is not handed on.
bool IsNodeAddedVariable(const std::string& name) { return name.rfind("CUDA_", 0) == 0; }

// slurmstepd (root) hands what answers at the endpoint to the job's tasks: a
// local socket is trusted only in a directory that root alone (this process's
// user) could have made and may write, as is every directory above it. A
// missing one is no gandivad: the call says so.
Status CheckLocalEndpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) != 0) return Status::Ok();
  const std::string dir = std::filesystem::path(endpoint.substr(6)).parent_path().string();
  Status trusted = CheckPrivateDir(dir, geteuid());
  if (trusted.ok() || trusted.code() == StatusCode::kNotFound) return Status::Ok();
  return PermissionDenied("not trusting the socket at " + endpoint + ": " + trusted.message());
}

}  // namespace

StatusOr<Registered> NodeSession::Register(const StepJob& step) const {
  GD_RETURN_IF_ERROR(CheckLocalEndpoint(endpoint_));
  Json fields = {{"name", step.name}, {"command", step.command}, {"cwd", step.cwd},
                 {"env", step.env},   {"weight", step.weight},   {"managed_by", "slurm"}};
  if (step.ranks > 1) fields["ranks"] = step.ranks;
  if (step.device) fields["device"] = *step.device;
  if (step.uid >= 0) fields["uid"] = step.uid;
  ApiClient client(endpoint_, timeout_ms_);
  GD_ASSIGN_OR_RETURN(Json reply, client.Call(MessageType::kRegisterJob, fields));
  Registered r;
  r.job = reply["job"].get<int64_t>();
  r.device = reply["device"].get<std::string>();
  r.gpu = protocol::EnumFromJson<protocol::DeviceKind>(reply["device_kind"]) ==
          protocol::DeviceKind::kGpu;
  r.env = {{runtime::kEnvControlBlock, reply["control_block"].get<std::string>()},
           {runtime::kEnvJobId, std::to_string(r.job)},
           {runtime::kEnvEndpoint, endpoint_}};
  if (const int64_t ranks = reply["ranks"].get<int64_t>(); ranks > 1)
    r.env.emplace_back(runtime::kEnvRanks, std::to_string(ranks));
  for (const auto& [k, v] : reply["env"].items())
    if (v.is_string() && IsNodeAddedVariable(k)) r.env.emplace_back(k, v.get<std::string>());
  return r;
}

Status NodeSession::Started(int64_t job, pid_t pid) const {
  ApiClient client(endpoint_, timeout_ms_);
  return client.Call(MessageType::kJobStarted, {{"job", job}, {"pid", pid}}).status();
}

Status NodeSession::Exited(int64_t job, int exit_code, int signal) const {
  ApiClient client(endpoint_, timeout_ms_);
  return client
      .Call(MessageType::kJobExited, {{"job", job}, {"exit_code", exit_code}, {"signal", signal}})
      .status();
}

}  // namespace gandiva::slurm
