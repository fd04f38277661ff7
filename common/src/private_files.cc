// Checked directories and link-refusing opens; see private_files.h.
#include "gandiva/common/private_files.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace gandiva {

namespace {

std::string ErrnoText(const std::string& what) { return what + ": " + std::strerror(errno); }

// "gd-bob (uid 1001)", or "uid 1001" for a uid with no name.
std::string UserText(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found)
    return std::string(found->pw_name) + " (uid " + std::to_string(uid) + ")";
  return "uid " + std::to_string(uid);
}

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// The components of an absolute path; "." dropped. Refuses ".." (a checked
// directory's parent is not the one the path names).
StatusOr<std::vector<std::string>> Components(const std::string& path) {
  if (path.empty() || path[0] != '/')
    return InvalidArgument("'" + path + "' is not an absolute path");
  std::vector<std::string> parts;
  size_t begin = 1;
  while (begin <= path.size()) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(begin, end - begin);
    begin = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return InvalidArgument("'" + path + "' holds '..'");
    parts.push_back(std::move(part));
  }
  return parts;
}

// Opens `name` in `parent` as a directory, making it with `mode` if missing.
// `follow`: an ancestor may be a link (it lies in a checked directory, so
// someone trusted put it there); the directory itself may not.
StatusOr<UniqueFd> OpenOrMakeDir(int parent, const std::string& name, mode_t mode, bool follow,
                                 bool create, const std::string& path) {
  const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW);
  for (int attempt = 0; attempt < 2; ++attempt) {
    UniqueFd fd(openat(parent, name.c_str(), flags));
    if (fd.valid()) return fd;
    if (errno == ELOOP || (errno == ENOTDIR && !follow)) {
      struct stat st {};
      if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return PermissionDenied(path + " is a symbolic link; gandiva uses a real directory only");
    }
    if (errno == ENOENT && !create) return NotFound(path + " does not exist");
    if (errno != ENOENT) return FailedPrecondition(ErrnoText("cannot open directory " + path));
    if (mkdirat(parent, name.c_str(), mode) == 0) {
      fd.Reset(openat(parent, name.c_str(), flags | O_NOFOLLOW));
      if (!fd.valid()) return FailedPrecondition(ErrnoText("cannot open directory " + path));
      // Ours, just made: the umask must not narrow (or widen) what was asked.
      if (fchmod(fd.get(), mode) != 0) return Internal(ErrnoText("cannot chmod " + path));
      return fd;
    }
    if (errno != EEXIST) return FailedPrecondition(ErrnoText("cannot create directory " + path));
    // Made meanwhile by someone else: open and check it like any existing one.
  }
  return FailedPrecondition("cannot open directory " + path);
}

}  // namespace

Status CheckDirStat(const struct stat& st, const std::string& path, uid_t owner, bool leaf) {
  if (!S_ISDIR(st.st_mode)) return FailedPrecondition(path + " is not a directory");
  if (st.st_uid != owner && st.st_uid != 0)
    return PermissionDenied(path + " belongs to " + UserText(st.st_uid) + ", not to " +
                            UserText(owner) + " or root: it could swap the files kept there");
  const bool others_write = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (others_write && (leaf || !(st.st_mode & S_ISVTX)))
    return PermissionDenied(path + " (mode " + ModeText(st.st_mode) +
                            ") is writable by users other than its owner: they could swap the "
                            "files kept there; make it writable by its owner only");
  return Status::Ok();
}

namespace {

// Opens `path` component by component, each checked; `create`: what is
// missing is made (ancestors 0755, the directory `create_mode`).
StatusOr<UniqueFd> WalkPrivateDir(const std::string& path, mode_t create_mode, uid_t owner,
                                  bool create) {
  GD_ASSIGN_OR_RETURN(std::vector<std::string> parts, Components(path));
  UniqueFd dir(open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return Internal(ErrnoText("cannot open /"));
  std::string walked;
  struct stat st {};
  if (fstat(dir.get(), &st) != 0) return Internal(ErrnoText("cannot stat /"));
  GD_RETURN_IF_ERROR(CheckDirStat(st, "/", owner, parts.empty()));
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool leaf = i + 1 == parts.size();
    walked += "/" + parts[i];
    GD_ASSIGN_OR_RETURN(UniqueFd next, OpenOrMakeDir(dir.get(), parts[i], leaf ? create_mode : 0755,
                                                     /*follow=*/!leaf, create, walked));
    if (fstat(next.get(), &st) != 0) return Internal(ErrnoText("cannot stat " + walked));
    GD_RETURN_IF_ERROR(CheckDirStat(st, walked, owner, leaf));
    dir = std::move(next);
  }
  return dir;
}

}  // namespace

StatusOr<UniqueFd> OpenPrivateDir(const std::string& path, mode_t create_mode, uid_t owner) {
  return WalkPrivateDir(path, create_mode, owner, /*create=*/true);
}

Status CheckPrivateDir(const std::string& path, uid_t owner) {
  return WalkPrivateDir(path, 0, owner, /*create=*/false).status();
}

StatusOr<UniqueFd> CreateFileAt(int dir_fd, const std::string& name, int flags, mode_t mode,
                                const std::string& what) {
  if (name.empty() || name.find('/') != std::string::npos)
    return InvalidArgument("'" + name + "' is not a file name");
  UniqueFd fd(
      openat(dir_fd, name.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (fd.valid()) return fd;
  if (errno == EEXIST)
    return AlreadyExists(what +
                         " exists already (gandiva creates it afresh, never through "
                         "a link or into an existing file)");
  return Unavailable(ErrnoText("cannot create " + what));
}

StatusOr<UniqueFd> CreateFileNoFollow(const std::string& path, int flags, mode_t mode) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  UniqueFd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) return Unavailable(ErrnoText("cannot open directory " + dir));
  return CreateFileAt(dir_fd.get(), name, flags, mode, path);
}

StatusOr<UniqueFd> OpenRegularNoFollow(const std::string& path, int flags) {
  UniqueFd fd(open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ELOOP)
      return PermissionDenied(path + " is a symbolic link; gandiva does not follow it");
    if (errno == ENOENT) return NotFound(ErrnoText("cannot open " + path));
    return Unavailable(ErrnoText("cannot open " + path));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Unavailable(ErrnoText("cannot stat " + path));
  if (!S_ISREG(st.st_mode)) return PermissionDenied(path + " is not a regular file");
  // O_NONBLOCK only kept a FIFO from blocking the open; regular files ignore it,
  // but clear it anyway so that the descriptor behaves as asked.
  const int fl = fcntl(fd.get(), F_GETFL);
  if (fl >= 0) fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

}  // namespace gandiva
