// Directories gandiva keeps its files in, checked for owner and mode before
// use, and files opened in them without following a link.
//
// gandivad runs as root on shared nodes, where any local user may be hostile: a
// directory another user owns or may write to lets them swap the socket clients
// trust, or plant a link where root writes (a job's log, a checkpoint) and have
// root write through it. So a directory holding such files must be owned by the
// user writing them (or by root) and writable by no one else, and so must every
// directory above it, unless that one is sticky (as /tmp is: no one else may
// rename or remove our entries in it). Existing directories are checked, never
// chmod'ed: changing the mode of a directory someone else made (their squatted
// /tmp/x) would hand them a checked-looking directory they still control.
#ifndef GANDIVA_COMMON_PRIVATE_FILES_H_
#define GANDIVA_COMMON_PRIVATE_FILES_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <string>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva {

// Whether `st` (of `path`, for the message) is a directory that only `owner`
// (or root) may write to. `leaf`: the directory holding the files, which must
// not be writable by others even if sticky; an ancestor may be sticky and
// world-writable. PermissionDenied, naming the owner and mode, if not.
Status CheckDirStat(const struct stat& st, const std::string& path, uid_t owner, bool leaf);

// Opens the directory `path` (absolute), creating what is missing of it:
// missing ancestors 0755, the directory itself `create_mode` (e.g. 0700). Each
// existing one is checked as CheckDirStat says and left as it is (no chmod);
// the directory itself must not be a symbolic link. The returned descriptor
// (O_DIRECTORY) is for openat: what is created through it lands in the
// directory that was checked, whatever is renamed afterwards.
StatusOr<UniqueFd> OpenPrivateDir(const std::string& path, mode_t create_mode, uid_t owner);

// Checks the existing directory `path` (absolute) and every one above it as
// OpenPrivateDir does, making nothing: for a client about to trust what it
// finds there (a socket). NotFound if some part of it does not exist.
Status CheckPrivateDir(const std::string& path, uid_t owner);

// Creates the file `name` (no '/') in the directory `dir_fd`: never an existing
// one, never through a link (O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC added to
// `flags`). `what` names it in errors.
StatusOr<UniqueFd> CreateFileAt(int dir_fd, const std::string& name, int flags, mode_t mode,
                                const std::string& what);

// Creates the file at `path` likewise (its directory checked by the caller).
StatusOr<UniqueFd> CreateFileNoFollow(const std::string& path, int flags, mode_t mode);

// Opens an existing regular file without following a link at its last
// component (O_NOFOLLOW | O_CLOEXEC added to `flags`): a link, a FIFO or a
// device there is refused rather than read or written.
StatusOr<UniqueFd> OpenRegularNoFollow(const std::string& path, int flags);

}  // namespace gandiva

#endif  // GANDIVA_COMMON_PRIVATE_FILES_H_
