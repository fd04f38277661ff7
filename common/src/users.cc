// See gandiva/common/users.h.
#include "gandiva/common/users.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>

namespace gandiva {

StatusOr<UserCredentials> CredentialsOf(int64_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (uid < 0 || uid > 0xfffffffe ||
      getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &found) != 0 || !found)
    return NotFound("uid " + std::to_string(uid) + " is no user of this machine");
  UserCredentials c{pw.pw_uid, pw.pw_gid, {}, pw.pw_name};
  int n = 64;
  c.groups.resize(n);
  if (getgrouplist(pw.pw_name, pw.pw_gid, c.groups.data(), &n) < 0) {
    c.groups.resize(n);  // n: how many there are
    if (getgrouplist(pw.pw_name, pw.pw_gid, c.groups.data(), &n) < 0) n = 0;
  }
  c.groups.resize(n);
  return c;
}

bool InGroup(int64_t uid, int64_t gid, gid_t group) {
  if (gid == static_cast<int64_t>(group)) return true;
  auto user = CredentialsOf(uid);
  return user.ok() &&
         std::find(user->groups.begin(), user->groups.end(), group) != user->groups.end();
}

std::string DescribeUser(int64_t uid) {
  auto user = CredentialsOf(uid);
  if (user.ok()) return user->name + " (uid " + std::to_string(uid) + ")";
  return "uid " + std::to_string(uid);
}

}  // namespace gandiva
