// See node_session.h.
#include "node_session.h"

#include "gandiva/contract/environment.h"
#include "gandiva/protocol/client.h"
#include "gandiva/protocol/enums.h"

namespace gandiva::slurm {

using protocol::Json;
using protocol::MessageType;

StatusOr<Registered> NodeSession::Register(const StepJob& step) const {
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
    if (v.is_string()) r.env.emplace_back(k, v.get<std::string>());
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
