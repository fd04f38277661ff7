// posix_spawn, so a multi-threaded daemon never runs code between fork and exec,
// or fork and exec with nothing but system calls between them for a job of
// another user; see launcher.h.
#include "jobs/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "gandiva/common/private_files.h"
#include "jobs/as_user.h"
#include "jobs/process_identity.h"

namespace gandiva::controller {

namespace {

constexpr const char* kDefaultPath = "/usr/local/bin:/usr/bin:/bin";

// A new file, never an existing one nor a link's target: the caller removed
// an earlier daemon's file of that name, so something there now was planted.
StatusOr<UniqueFd> OpenLog(const std::string& path) {
  auto fd = CreateFileNoFollow(path, O_WRONLY | O_APPEND, 0600);
  if (!fd.ok()) return Internal("cannot open log: " + fd.status().message());
  return fd;
}

Status StartError(const std::string& command, int error) {
  std::string m = "cannot start '" + command + "': " + std::strerror(error);
  return error == ENOENT ? NotFound(std::move(m)) : FailedPrecondition(std::move(m));
}

// exec's argv and envp (null-terminated), made before any fork.
struct ExecArgs {
  explicit ExecArgs(const LaunchSpec& spec) {
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
    for (auto& e : env_strings) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
  std::vector<std::string> env_strings;
  std::vector<char*> argv, envp;
};

// Runs `path` with the file actions and attributes a job needs; the errno on failure.
int Spawn(const std::string& path, const LaunchSpec& spec, int out, int err, pid_t* pid) {
  ExecArgs args(spec);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);  // dup2 clears O_CLOEXEC on the copy
  posix_spawn_file_actions_adddup2(&actions, err, 2);
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, spec.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // the daemon blocks SIGTERM; the job must not
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);  // its own process group: a terminal's ^C is not its
  const int rc =
      posix_spawn(pid, path.c_str(), &actions, &attr, args.argv.data(), args.envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

// The same for a job of another user: fork, become the user, exec. Only
// system calls run in the child, on memory made before the fork; exec's
// errno comes back through a close-on-exec pipe (nothing read: it ran).
int SpawnAsUser(const std::string& path, const LaunchSpec& spec, const UserCredentials& who,
                int out, int err, pid_t* pid) {
  ExecArgs args(spec);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) return errno;
  const pid_t child = fork();
  if (child < 0) {
    const int e = errno;
    close(report[0]);
    close(report[1]);
    return e;
  }
  if (child == 0) {
    sigset_t none;
    sigemptyset(&none);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) sigaction(s, &dfl, nullptr);  // SIGKILL/SIGSTOP: EINVAL
    sigprocmask(SIG_SETMASK, &none, nullptr);
    setpgid(0, 0);  // its own process group, as posix_spawn's jobs
    int e = 0;
    const int null = open("/dev/null", O_RDONLY);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0 ||
        setgroups(who.groups.size(), who.groups.data()) != 0 ||
        setresgid(who.gid, who.gid, who.gid) != 0 || setresuid(who.uid, who.uid, who.uid) != 0 ||
        (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0)) {
      e = errno;
    } else {
      execve(path.c_str(), args.argv.data(), args.envp.data());
      e = errno;
    }
    (void)!write(report[1], &e, sizeof(e));
    _exit(127);
  }
  close(report[1]);
  int e = 0;
  ssize_t n;
  while ((n = read(report[0], &e, sizeof(e))) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (n == static_cast<ssize_t>(sizeof(e))) {  // it never ran: reap it, report why
    waitpid(child, nullptr, 0);
    return e != 0 ? e : EIO;
  }
  *pid = child;
  return 0;
}

// Moves the started process into its cgroup (cgroup v2: write the pid to cgroup.procs).
Status JoinCgroup(const std::string& dir, int pid) {
  std::ofstream procs(dir + "/cgroup.procs");
  procs << pid << std::flush;
  if (!procs) return Internal("cannot move pid " + std::to_string(pid) + " into " + dir);
  return Status::Ok();
}

}  // namespace

std::string FindInPath(const std::string& name, const std::string& path, const std::string& cwd) {
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(begin, end - begin);
    begin = end + 1;
    if (dir.empty()) dir = ".";
    if (dir[0] != '/' && !cwd.empty()) dir = cwd + "/" + dir;
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) return candidate;
  }
  return "";
}

int ExitCodeOfStartError(const Status& error) {
  return error.code() == StatusCode::kNotFound ? 127 : 126;
}

StatusOr<StartedProcess> StartProcess(const LaunchSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArgument("empty command");
  std::string path = spec.argv[0];
  if (path.find('/') == std::string::npos) {
    auto it = spec.env.find("PATH");
    path = FindInPath(path, it == spec.env.end() ? kDefaultPath : it->second, spec.cwd);
    if (path.empty()) return StartError(spec.argv[0], ENOENT);
  }
  GD_ASSIGN_OR_RETURN(UniqueFd out, OpenLog(spec.stdout_path));
  UniqueFd err_file;
  if (spec.stderr_path != spec.stdout_path) {
    GD_ASSIGN_OR_RETURN(err_file, OpenLog(spec.stderr_path));
  }
  const int err = err_file.valid() ? err_file.get() : out.get();
  pid_t pid = 0;
  if (spec.uid >= 0 && static_cast<uid_t>(spec.uid) != geteuid()) {
    GD_ASSIGN_OR_RETURN(UserCredentials who, CredentialsOf(spec.uid));
    // Its output files are gandivad's (in its state directory); the job
    // writes them through the descriptors it is given.
    if (const int rc = SpawnAsUser(path, spec, who, out.get(), err, &pid); rc != 0)
      return StartError(spec.argv[0], rc);
  } else if (const int rc = Spawn(path, spec, out.get(), err, &pid); rc != 0) {
    return StartError(spec.argv[0], rc);
  }
  // Our child, not reaped yet: its pid cannot be reused, so the pidfd is its.
  StartedProcess started{pid, OpenPidfd(pid)};
  Status joined = spec.cgroup_dir.empty() ? Status::Ok() : JoinCgroup(spec.cgroup_dir, pid);
  if (!started.pidfd.valid() || !joined.ok()) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return joined.ok() ? Internal("pidfd_open: " + std::string(std::strerror(errno))) : joined;
  }
  return started;
}

}  // namespace gandiva::controller
