// Who may do what on a shared node; see access.h.
#include "api/access.h"

#include <unistd.h>

#include <limits>
#include <string>
#include <vector>

#include "gandiva/common/users.h"
#include "gandiva/protocol/schema.h"
#include "jobs/process_identity.h"

namespace gandiva::controller {

using protocol::Json;
using protocol::MessageType;

Access AccessOf(MessageType type) {
  switch (type) {
    case MessageType::kHello:
    case MessageType::kListDevices:
    case MessageType::kListJobs:
    case MessageType::kListSwitches:
      return Access::kAnyone;
    case MessageType::kRegisterJob:
    case MessageType::kLaunch:  // run as the caller (launcher.h), never as gandivad's user
      return Access::kNewJob;
    case MessageType::kReadLog:
    case MessageType::kJobStarted:
    case MessageType::kJobExited:
    case MessageType::kSuspend:
    case MessageType::kResume:
    case MessageType::kKill:
    case MessageType::kCheckpoint:
      return Access::kJobOwner;
    case MessageType::kMigratePrepare:
    case MessageType::kMigrateBegin:
    case MessageType::kMigrateCommit:
    case MessageType::kMigrateStart:
    case MessageType::kMigrateAbort:
      return Access::kMigrationPeer;
    default:  // launch, set_slice, set_share_mode, set_weight, assign_device, migrate
      return Access::kAdmin;
  }
}

bool AccessPolicy::IsAdmin(const protocol::Caller& c) const {
  if (c.remote) return !c.peer_node;
  if (c.in_process) return true;
  if (c.uid < 0) return false;  // a local caller the kernel did not name: trusted with nothing
  return c.uid == 0 || c.uid == static_cast<int64_t>(geteuid()) ||
         (admin_group_ && InGroup(c.uid, c.gid, *admin_group_));
}

Status AccessPolicy::Authorize(
    protocol::Call& call, const std::function<std::optional<int64_t>(uint64_t)>& owner_of) const {
  const MessageType type = call.request.type;
  const Access access = AccessOf(type);
  if (access == Access::kAnyone || IsAdmin(call.caller)) return Status::Ok();
  const protocol::Caller& c = call.caller;
  const std::string what(protocol::WireName(type));
  if (c.remote) {  // a peer node's key
    if (access == Access::kMigrationPeer) return Status::Ok();
    return PermissionDenied("the key of peer node " + c.key_name + " may only migrate jobs to " +
                            "this node; " + what + " needs an operator's key (--authorized-keys)");
  }
  const std::string who = DescribeUser(c.uid);
  Json& body = call.request.body;
  switch (access) {
    case Access::kNewJob:
      // Its control block is given to the caller's uid (gandivad running as root).
      if (!body.contains("uid")) {
        body["uid"] = c.uid;
        return Status::Ok();
      }
      if (body["uid"].is_number_integer() && body["uid"].get<int64_t>() == c.uid)
        return Status::Ok();
      return PermissionDenied(who + " may " + what + " jobs for itself only, not for uid " +
                              body["uid"].dump());
    case Access::kJobOwner: {
      if (!body.contains("job") || !body["job"].is_number_integer())
        return Status::Ok();  // the handler refuses the request as malformed
      const int64_t id = body["job"].get<int64_t>();
      const auto owner = id > 0 ? owner_of(static_cast<uint64_t>(id)) : std::nullopt;
      if (!owner || (*owner >= 0 && *owner == c.uid)) {
        // The process a user reports as their job's is one they could signal
        // themselves: gandivad never kills or freezes another's for them.
        if (type != MessageType::kJobStarted || !body.contains("pid") ||
            !body["pid"].is_number_integer())
          return Status::Ok();  // the handler refuses a malformed request
        const int64_t pid = body["pid"].get<int64_t>();
        if (pid <= 0 || pid > std::numeric_limits<int>::max())
          return InvalidArgument("pid must be a process id, not " + std::to_string(pid));
        return CheckUserMaySignal(static_cast<int>(pid), c.uid);
      }
      return PermissionDenied(
          "job " + std::to_string(id) + " belongs to " +
          (*owner >= 0 ? DescribeUser(*owner) : std::string("gandivad's user")) + "; " + who +
          " may not " + what + " it");
    }
    default:
      return PermissionDenied(what + " is for the node's admins (root, gandivad's user, " +
                              "--admin-group); " + who + " is not one");
  }
}

}  // namespace gandiva::controller
