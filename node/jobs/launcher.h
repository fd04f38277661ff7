// Starts one process for gandivad: argv, working directory, environment,
// stdout and stderr appended to files, optionally placed in a cgroup. gandivad
// is its parent (it reaps it); the caller watches the returned pidfd. Used for
// launched jobs and for a migration's destination; a gang starts one per rank.
//
// A command that cannot start is reported here, with its errno, and no process
// is left behind: posix_spawn (glibc >= 2.24) reports exec's errno back to the
// parent, and a command name is looked up in the job's own PATH first. A job
// of another user (spec.uid) is started by fork and exec instead, as
// posix_spawn cannot change credentials: the child takes the user's groups,
// gid and uid before its chdir and exec, runs only system calls on memory
// prepared before the fork, and reports exec's errno the same way (a
// close-on-exec pipe).
#ifndef GANDIVA_NODE_JOBS_LAUNCHER_H_
#define GANDIVA_NODE_JOBS_LAUNCHER_H_

#include <map>
#include <string>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva::controller {

struct LaunchSpec {
  std::vector<std::string> argv;           // argv[0]: a path, or a name looked up in env's PATH
  std::string cwd;                         // absolute; "" keeps gandivad's
  std::map<std::string, std::string> env;  // the whole environment
  std::string stdout_path;                 // created 0600: must not exist (nor be a link)
  std::string stderr_path;                 // may be stdout_path
  std::string cgroup_dir;                  // "": none; else it joins this cgroup once started
  // The user it runs as (uid, gid and groups from the user database), and
  // whose permissions reach its cwd and command; -1: gandivad's own.
  int64_t uid = -1;
};

struct StartedProcess {
  int pid = 0;
  UniqueFd pidfd;
};

// The process, running; or why it could not start: NotFound (no such command:
// exit code 127 by shell convention) or FailedPrecondition (not executable,
// exec format error, ...: 126), with the errno's words; Internal for the
// node's own failures (log files, cgroup).
StatusOr<StartedProcess> StartProcess(const LaunchSpec& spec);

// The exit code a start error stands for: 127 not found, 126 otherwise.
int ExitCodeOfStartError(const Status& error);

// Where `name` is found along `path` (a PATH value, relative entries taken from
// `cwd`): the first existing entry that is not a directory; "" if none. Pure
// lookup, as execvp does it.
std::string FindInPath(const std::string& name, const std::string& path, const std::string& cwd);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_LAUNCHER_H_
