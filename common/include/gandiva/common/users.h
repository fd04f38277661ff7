// Users and groups as the user database (passwd, group; NSS) knows them: who
// a uid is, its groups, whether it is in a group. One lookup for the daemons'
// admin checks (gandivad's --admin-group, the scheduler's) and for gandivad's
// acting as a job's user (node/jobs/as_user.h).
#ifndef GANDIVA_COMMON_USERS_H_
#define GANDIVA_COMMON_USERS_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva {

// Who user `uid` is to the kernel: its name, uid, primary gid and every group
// it is in (getgrouplist). NotFound for a uid that is no user here.
struct UserCredentials {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;
  std::string name;
};
StatusOr<UserCredentials> CredentialsOf(int64_t uid);

// Whether the caller (its uid, and the gid its process runs with) is in
// `group`: its gid, or a group of its user. False for a uid that is no user.
bool InGroup(int64_t uid, int64_t gid, gid_t group);

// "alice (uid 1001)", or "uid 1001" for a uid that is no user: for messages.
std::string DescribeUser(int64_t uid);

}  // namespace gandiva

#endif  // GANDIVA_COMMON_USERS_H_
