// Operations run as a job's user in a child process; see as_user.h.
#include "jobs/as_user.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace gandiva::controller {

namespace {

// What the child reports: 0 or an errno, and for an open the descriptor.
struct Outcome {
  int error = 0;
  UniqueFd fd;
};

void SendOutcome(int sock, int error, int fd) {
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&error, sizeof(error)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  (void)sendmsg(sock, &msg, MSG_NOSIGNAL);
}

StatusOr<Outcome> ReceiveOutcome(int sock) {
  Outcome out;
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&out.error, sizeof(out.error)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n != sizeof(out.error)) return Internal("the helper acting as the job's user died");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
      out.fd = UniqueFd(fd);
    }
  return out;
}

// Runs `act` (system calls only: it runs between fork and _exit) in a child
// that has become the user; it returns an errno (0: done) and may set *fd.
template <typename Act>
StatusOr<Outcome> InChildAs(const UserCredentials& who, const Act& act) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return Internal(std::string("socketpair: ") + std::strerror(errno));
  UniqueFd ours(pair[0]), theirs(pair[1]);
  const pid_t child = fork();
  if (child < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    int fd = -1;
    int error = 0;
    if (setgroups(who.groups.size(), who.groups.data()) != 0 ||
        setresgid(who.gid, who.gid, who.gid) != 0 || setresuid(who.uid, who.uid, who.uid) != 0)
      error = errno ? errno : EPERM;
    else
      error = act(&fd);
    SendOutcome(theirs.get(), error, fd);
    _exit(0);
  }
  theirs.Reset();
  StatusOr<Outcome> out = ReceiveOutcome(ours.get());
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return out;
}

}  // namespace

StatusOr<UniqueFd> OpenAsUser(int64_t uid, const std::string& path, int flags, mode_t mode) {
  if (uid < 0 || static_cast<uid_t>(uid) == geteuid()) {
    UniqueFd fd(open(path.c_str(), flags | O_CLOEXEC, mode));
    if (!fd.valid()) return PermissionDenied("cannot open " + path + ": " + std::strerror(errno));
    return fd;
  }
  GD_ASSIGN_OR_RETURN(UserCredentials who, CredentialsOf(uid));
  const char* p = path.c_str();
  GD_ASSIGN_OR_RETURN(Outcome out, InChildAs(who, [p, flags, mode](int* fd) {
                        *fd = open(p, flags | O_CLOEXEC, mode);
                        return *fd < 0 ? errno : 0;
                      }));
  if (out.error != 0 || !out.fd.valid())
    return PermissionDenied("cannot open " + path + " as uid " + std::to_string(uid) + ": " +
                            std::strerror(out.error ? out.error : EBADF));
  return std::move(out.fd);
}

StatusOr<std::vector<char>> StatAsUser(int64_t uid, const std::vector<std::string>& paths) {
  if (paths.size() > 4096) return InvalidArgument("too many paths to look at");
  std::vector<const char*> names;
  for (const std::string& p : paths) names.push_back(p.c_str());
  // One byte a path into a pipe, whose read end comes back (4096 bytes fit
  // in its buffer: the child never blocks).
  auto look = [&names](int* fd) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return errno;
    for (const char* name : names) {
      struct stat st;
      const char kind = stat(name, &st) != 0 ? 0 : S_ISDIR(st.st_mode) ? 'd' : 'f';
      if (write(pipe_fds[1], &kind, 1) != 1) return errno ? errno : EIO;
    }
    close(pipe_fds[1]);
    *fd = pipe_fds[0];
    return 0;
  };
  UniqueFd answers;
  if (uid < 0 || static_cast<uid_t>(uid) == geteuid()) {
    int fd = -1;
    if (const int error = look(&fd); error != 0)
      return Internal(std::string("cannot look: ") + std::strerror(error));
    answers = UniqueFd(fd);
  } else {
    GD_ASSIGN_OR_RETURN(UserCredentials who, CredentialsOf(uid));
    GD_ASSIGN_OR_RETURN(Outcome out, InChildAs(who, look));
    if (out.error != 0 || !out.fd.valid())
      return Internal("cannot look as uid " + std::to_string(uid) + ": " +
                      std::strerror(out.error ? out.error : EBADF));
    answers = std::move(out.fd);
  }
  std::vector<char> kinds(paths.size());
  size_t got = 0;
  while (got < kinds.size()) {
    const ssize_t n = read(answers.get(), kinds.data() + got, kinds.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Internal("the helper looking as the job's user said too little");
    got += static_cast<size_t>(n);
  }
  return kinds;
}

Status MakeDirsAsUser(int64_t uid, const std::string& path, mode_t mode) {
  // Every prefix ending before a '/', then the path itself, made in order.
  std::vector<std::string> prefixes;
  for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1))
    prefixes.push_back(path.substr(0, at));
  prefixes.push_back(path);
  std::vector<const char*> dirs;
  for (const std::string& d : prefixes) dirs.push_back(d.c_str());
  auto make_all = [&dirs, mode](int*) {
    for (const char* d : dirs)
      if (mkdir(d, mode) != 0 && errno != EEXIST) return errno;
    struct stat st;
    if (stat(dirs.back(), &st) != 0) return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  };
  int error = 0;
  if (uid < 0 || static_cast<uid_t>(uid) == geteuid()) {
    int unused = -1;
    error = make_all(&unused);
  } else {
    GD_ASSIGN_OR_RETURN(UserCredentials who, CredentialsOf(uid));
    GD_ASSIGN_OR_RETURN(Outcome out, InChildAs(who, make_all));
    error = out.error;
  }
  if (error != 0)
    return PermissionDenied("cannot create " + path +
                            (uid >= 0 ? " as uid " + std::to_string(uid) : std::string()) + ": " +
                            std::strerror(error));
  return Status::Ok();
}

}  // namespace gandiva::controller
