// Who may do what on a node that several users share (gandivad --shared-socket:
// its local socket open to every user, each call carrying the caller's uid).
//
// Reading (hello, list_jobs, list_devices, list_switches) is for everyone. A job
// is acted on (suspend, resume, kill, checkpoint, its output, its start and
// exit reports) by its owner, the uid it was registered for, and by admins.
// Registering or launching a job is for everyone, for themselves: a caller who
// is not an admin registers (and a launched job runs) as its own uid only, and
// reports as its job's process (job_started) only one it could signal itself
// (kill(2)'s rule), so that gandivad never signals or freezes another user's
// process for it, nor runs a command as anyone but its caller. What shapes the
// node or other users' share (slices, share modes, weights, device moves,
// migrations) is for admins.
//
// Admins: callers on the TCP endpoint with an operator's CURVE key
// (--authorized-keys: the scheduler, admins' CLIs), root, gandivad's own user,
// members of --admin-group, and calls made inside gandivad itself. A peer
// node's key (--peer-keys) may read and carry out the destination's part of
// a migration (migrate_prepare .. migrate_abort), nothing else: one node's
// key is not root on the others.
#ifndef GANDIVA_NODE_API_ACCESS_H_
#define GANDIVA_NODE_API_ACCESS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "gandiva/protocol/dispatcher.h"
#include "gandiva/status.h"

namespace gandiva::controller {

enum class Access { kAnyone, kNewJob, kJobOwner, kMigrationPeer, kAdmin };

// What a message needs; a type this table does not name needs an admin.
Access AccessOf(protocol::MessageType type);

class AccessPolicy {
 public:
  explicit AccessPolicy(std::optional<gid_t> admin_group = std::nullopt)
      : admin_group_(admin_group) {}

  bool IsAdmin(const protocol::Caller& caller) const;
  // Ok, or permission_denied saying who may. `owner_of(job)` is the uid a job
  // was registered for (-1: gandivad's own), nullopt for no such job (the
  // handler then says so). A non-admin's register_job gets its uid filled in.
  Status Authorize(protocol::Call& call,
                   const std::function<std::optional<int64_t>(uint64_t job)>& owner_of) const;

 private:
  std::optional<gid_t> admin_group_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_API_ACCESS_H_
