// See access.h.
#include "live/access.h"

#include <unistd.h>

#include "gandiva/common/users.h"

namespace gandiva::sched::live {

bool SchedulerAccess::IsAdmin(const protocol::Caller& c) const {
  if (c.remote) return !c.peer_node;  // an operator's key
  if (c.in_process) return true;
  if (c.uid < 0) return false;  // a local caller the kernel did not name
  return c.uid == 0 || c.uid == static_cast<int64_t>(geteuid()) ||
         (admin_group_ && InGroup(c.uid, c.gid, *admin_group_));
}

StatusOr<int64_t> SchedulerAccess::SubmitUid(const protocol::Caller& c,
                                             const protocol::Json& req) const {
  const bool named = req.contains("uid");
  const int64_t uid = named ? req["uid"].get<int64_t>() : -1;
  if (named && (uid <= 0 || uid > 0xfffffffe))
    return PermissionDenied("uid " + std::to_string(uid) +
                            ": the scheduler's jobs run as their submitter, never as root "
                            "(leave uid out to run as the nodes' gandivad user)");
  if (IsAdmin(c)) {
    if (named) return uid;
    const bool own_user =
        c.remote || c.in_process || c.uid == 0 || c.uid == static_cast<int64_t>(geteuid());
    return own_user ? -1 : c.uid;
  }
  if (c.uid < 0) return PermissionDenied("the kernel did not name this caller");
  if (named && uid != c.uid)
    return PermissionDenied(DescribeUser(c.uid) + " may submit jobs for itself only, not for " +
                            DescribeUser(uid));
  return c.uid;
}

Status SchedulerAccess::MayActOn(const protocol::Caller& c, int64_t job, int64_t owner,
                                 const std::string& what) const {
  if (IsAdmin(c) || (owner >= 0 && owner == c.uid)) return Status::Ok();
  return PermissionDenied(
      "job " + std::to_string(job) + " belongs to " +
      (owner >= 0 ? DescribeUser(owner) : std::string("the scheduler's admins")) + "; " +
      DescribeUser(c.uid) + " may not " + what + " it");
}

}  // namespace gandiva::sched::live
