// Who may do what to the scheduler's jobs, with its local socket open to
// every user of the machine (`gandiva scheduler --shared-socket`).
//
// Everyone may read the queue. A user submits jobs for themselves: the
// kernel names them (SO_PEERCRED), their uid is recorded with the job, and its
// runs run as them on the nodes, never as the scheduler's or gandivad's user.
// A user cancels and reads the output of their own jobs only. Admins (root,
// the scheduler's own user, members of --admin-group, operators on the TCP
// endpoint with an --authorized-keys key, calls inside the scheduler) do
// everything, and may submit for another user by naming its uid.
#ifndef GANDIVA_SCHEDULER_LIVE_ACCESS_H_
#define GANDIVA_SCHEDULER_LIVE_ACCESS_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "gandiva/protocol/dispatcher.h"
#include "gandiva/status.h"

namespace gandiva::sched::live {

class SchedulerAccess {
 public:
  explicit SchedulerAccess(std::optional<gid_t> admin_group = std::nullopt)
      : admin_group_(admin_group) {}

  bool IsAdmin(const protocol::Caller& caller) const;
  // The uid a submit's runs run as: a user's own (one who names another is
  // refused), an admin's named `uid` (never 0: a scheduler's job never runs as
  // root by name), else an admin's own, or -1 (the nodes' gandivad's user) for
  // root, the scheduler's user and callers the kernel does not name.
  StatusOr<int64_t> SubmitUid(const protocol::Caller& caller, const protocol::Json& req) const;
  // Ok, or permission_denied: `what` ("cancel") of job `job`, which runs as `owner`.
  Status MayActOn(const protocol::Caller& caller, int64_t job, int64_t owner,
                  const std::string& what) const;

 private:
  std::optional<gid_t> admin_group_;
};

}  // namespace gandiva::sched::live

#endif  // GANDIVA_SCHEDULER_LIVE_ACCESS_H_
