// posix_spawn, so a multi-threaded daemon never runs code between fork and exec.
#include "migration/process_spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>

#include <cstring>

namespace gandiva::controller {

StatusOr<int> SpawnProcess(const std::vector<std::string>& command,
                           const std::map<std::string, std::string>& env, const std::string& cwd,
                           const std::string& log_path) {
  if (command.empty()) return InvalidArgument("empty command");
  std::vector<char*> argv, envp;
  std::vector<std::string> env_strings;
  for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);  // the daemon blocks SIGTERM; the job must not
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return NotFound("cannot start '" + command[0] + "': " + std::strerror(rc));
  return static_cast<int>(pid);
}

}  // namespace gandiva::controller
