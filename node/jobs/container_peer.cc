// Namespaces of a local caller, read from /proc; see container_peer.h.
#include "jobs/container_peer.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace gandiva::controller {

namespace {

// "mnt:[4026531840]": a namespace's identity, as /proc/PID/ns/KIND links to it.
StatusOr<std::string> NamespaceOf(const std::string& proc_dir, const char* kind) {
  const std::string link = proc_dir + "/ns/" + kind;
  char target[128];
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n < 0) return NotFound("cannot read " + link + ": " + std::strerror(errno));
  return std::string(target, static_cast<size_t>(n));
}

// The last pid of /proc/PID/status's NSpid line: the process's pid in its own
// pid namespace (the line lists it from the reader's namespace inwards); -1 if
// it cannot be read.
int64_t InnermostPid(const std::string& proc_dir) {
  std::ifstream status(proc_dir + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t pid = -1, last = -1;
    while (fields >> pid) last = pid;
    return last;
  }
  return -1;
}

}  // namespace

StatusOr<bool> InContainer(int64_t pid) {
  if (pid <= 0) return false;
  GD_ASSIGN_OR_RETURN(std::string ours, NamespaceOf("/proc/self", "mnt"));
  GD_ASSIGN_OR_RETURN(std::string theirs, NamespaceOf("/proc/" + std::to_string(pid), "mnt"));
  if (ours == theirs) return false;
  // Another mount namespace: whether its /dev/shm is ours (the same file system
  // and directory, seen through its root). None there: not ours either.
  struct stat mine {
  }, its{};
  if (stat("/dev/shm", &mine) != 0)
    return Internal(std::string("cannot stat /dev/shm: ") + std::strerror(errno));
  const std::string their_shm = "/proc/" + std::to_string(pid) + "/root/dev/shm";
  if (stat(their_shm.c_str(), &its) != 0) return true;
  return its.st_dev != mine.st_dev || its.st_ino != mine.st_ino;
}

StatusOr<int> HostPidOf(int64_t caller_pid, int64_t pid) {
  if (caller_pid <= 0) return static_cast<int>(pid);
  GD_ASSIGN_OR_RETURN(std::string ours, NamespaceOf("/proc/self", "pid"));
  GD_ASSIGN_OR_RETURN(std::string theirs,
                      NamespaceOf("/proc/" + std::to_string(caller_pid), "pid"));
  if (ours == theirs) return static_cast<int>(pid);
  // Every process of the caller's namespace: the one it calls `pid`. A process
  // of a namespace nested inside the caller's has another namespace link, and
  // is not taken (its innermost pid is not the caller's name for it).
  DIR* proc = opendir("/proc");
  if (!proc) return Internal(std::string("cannot list /proc: ") + std::strerror(errno));
  int found = -1;
  while (dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long host_pid = std::strtol(e->d_name, &end, 10);
    if (host_pid <= 0 || *end != '\0') continue;
    const std::string dir = std::string("/proc/") + e->d_name;
    auto ns = NamespaceOf(dir, "pid");
    if (!ns.ok() || *ns != theirs) continue;
    if (InnermostPid(dir) == pid) {
      found = static_cast<int>(host_pid);
      break;
    }
  }
  closedir(proc);
  if (found < 0)
    return NotFound("no process " + std::to_string(pid) + " in the caller's pid namespace (" +
                    theirs + ")");
  return found;
}

}  // namespace gandiva::controller
