// Files that gandivad touches for a job of another user, touched as that user.
//
// gandivad runs as root, and some of a job's files are gandivad's to make: a
// gang's checkpoint directory (one folder per rank) and its manifest. They go
// where the user said (`gandiva checkpoint --to DIR`), a path the user
// controls: done as root, a link planted there would have root create or
// truncate any file on the node. So each such operation runs in a short-lived
// child process that has taken the user's uid, gid and groups: the kernel
// checks it as it would the user's own, and what it creates is the user's. An
// opened file comes back to gandivad as a descriptor (SCM_RIGHTS), so the
// bytes are still read and written by gandivad, within its own limits.
//
// The child does nothing but system calls between fork and _exit, so it is
// safe in a daemon with threads. A uid < 0 means "gandivad's own user": the
// operation runs in gandivad itself.
#ifndef GANDIVA_NODE_JOBS_AS_USER_H_
#define GANDIVA_NODE_JOBS_AS_USER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/common/users.h"  // CredentialsOf: who the user is
#include "gandiva/status.h"

namespace gandiva::controller {

// open(2) of `path` as user `uid` (flags get O_CLOEXEC). The error is the
// one the user would have got ("permission denied" for a file not theirs).
StatusOr<UniqueFd> OpenAsUser(int64_t uid, const std::string& path, int flags, mode_t mode = 0600);

// What user `uid` finds at each of `paths` (stat(2) as them, following
// links as they could): 'd' a directory, 'f' anything else, 0 nothing, or
// nothing they may reach. At most 4096 paths.
StatusOr<std::vector<char>> StatAsUser(int64_t uid, const std::vector<std::string>& paths);

// mkdir -p of `path` as user `uid`: the missing directories are made `mode`
// and are the user's; existing ones are left as they are.
Status MakeDirsAsUser(int64_t uid, const std::string& path, mode_t mode = 0700);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_AS_USER_H_
