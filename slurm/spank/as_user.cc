// See as_user.h.
#include "as_user.h"

#include <grp.h>
#include <pwd.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gandiva::slurm {

namespace {

// The raw calls: per thread (glibc's wrappers of setgroups would change every
// thread of slurmstepd).
int SetThreadGroups(const std::vector<gid_t>& groups) {
  return static_cast<int>(syscall(SYS_setgroups, groups.size(), groups.data()));
}
uid_t ThreadFsUid() { return static_cast<uid_t>(syscall(SYS_setfsuid, static_cast<uid_t>(-1))); }
gid_t ThreadFsGid() { return static_cast<gid_t>(syscall(SYS_setfsgid, static_cast<gid_t>(-1))); }

std::vector<gid_t> ThreadGroups() {
  const int n = getgroups(0, nullptr);
  std::vector<gid_t> groups(n > 0 ? static_cast<size_t>(n) : 0);
  if (n > 0 && getgroups(n, groups.data()) != n) groups.clear();
  return groups;
}

// The user's groups (their primary one first), as login would give them.
std::vector<gid_t> GroupsOf(uid_t uid, gid_t gid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || !found) return {gid};
  int n = 64;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<size_t>(n));
    if (getgrouplist(found->pw_name, gid, groups.data(), &n) < 0) return {gid};
  }
  groups.resize(static_cast<size_t>(n));
  return groups;
}

}  // namespace

StatusOr<std::unique_ptr<FilesAsUser>> FilesAsUser::Enter(uid_t uid, gid_t gid) {
  std::unique_ptr<FilesAsUser> scope(new FilesAsUser(ThreadFsUid(), ThreadFsGid(), ThreadGroups()));
  if (SetThreadGroups(GroupsOf(uid, gid)) != 0)
    return PermissionDenied(std::string("cannot take the job's groups: ") + std::strerror(errno));
  syscall(SYS_setfsgid, gid);
  syscall(SYS_setfsuid, uid);
  // setfsuid says nothing of failure: ask what is set now.
  if (ThreadFsUid() != uid || ThreadFsGid() != gid) {
    scope->Leave();
    return PermissionDenied("cannot act as uid " + std::to_string(uid) + " on files");
  }
  return scope;
}

void FilesAsUser::Leave() {
  // The user id first: back to root, the capabilities to set the rest return.
  syscall(SYS_setfsuid, old_uid_);
  syscall(SYS_setfsgid, old_gid_);
  SetThreadGroups(old_groups_);
}

FilesAsUser::~FilesAsUser() { Leave(); }

}  // namespace gandiva::slurm
