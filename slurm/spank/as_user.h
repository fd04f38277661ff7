// Acting as the job's user on files, from slurmstepd (root): the plugin looks
// into the user's checkpoint directory (removes killed saves, reads the
// checkpoint's header) with the user's own permissions, so that a directory
// the user points at (a link to /etc, a root-only tree) gives them nothing
// root could read or remove.
//
// Only this thread's filesystem identity changes (fsuid, fsgid and the
// supplementary groups, through the raw system calls: glibc would apply
// setgroups to every thread of slurmstepd); the process stays root otherwise,
// and the destructor gives root's back.
#ifndef GANDIVA_SLURM_AS_USER_H_
#define GANDIVA_SLURM_AS_USER_H_

#include <sys/types.h>

#include <memory>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::slurm {

class FilesAsUser {
 public:
  // This thread's file accesses as `uid`:`gid` with the user's groups, until
  // the returned object is destroyed; an error (and nothing changed) if that
  // cannot be done.
  static StatusOr<std::unique_ptr<FilesAsUser>> Enter(uid_t uid, gid_t gid);
  ~FilesAsUser();
  FilesAsUser(const FilesAsUser&) = delete;
  FilesAsUser& operator=(const FilesAsUser&) = delete;

 private:
  FilesAsUser(uid_t uid, gid_t gid, std::vector<gid_t> groups)
      : old_uid_(uid), old_gid_(gid), old_groups_(std::move(groups)) {}
  void Leave();
  uid_t old_uid_;
  gid_t old_gid_;
  std::vector<gid_t> old_groups_;
};

}  // namespace gandiva::slurm

#endif  // GANDIVA_SLURM_AS_USER_H_
