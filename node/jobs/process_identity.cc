// Process start times and the boot id; see process_identity.h.
#include "jobs/process_identity.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace gandiva::controller {

UniqueFd OpenPidfd(int pid) {
  return UniqueFd(pid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, pid, 0)) : -1);
}

std::optional<uint64_t> ProcessStartTicks(int pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!in || !std::getline(in, stat)) return std::nullopt;
  // "PID (COMM) STATE ..." where COMM may hold spaces and parentheses: the
  // fields are counted from the last ')'. starttime is field 22, the 20th after it.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 0; i < 20; ++i)
    if (!(fields >> field)) return std::nullopt;
  char* end = nullptr;
  const unsigned long long ticks = std::strtoull(field.c_str(), &end, 10);
  if (end == field.c_str() || *end != '\0') return std::nullopt;
  return ticks;
}

namespace {

// The "Uid:" line of /proc/PID/status: real, effective, saved, filesystem.
std::optional<std::vector<int64_t>> ProcessUids(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Uid:", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    std::vector<int64_t> uids;
    for (int64_t uid; fields >> uid;) uids.push_back(uid);
    if (uids.size() != 4) return std::nullopt;
    return uids;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> ProcessRealUid(int pid) {
  const std::optional<std::vector<int64_t>> uids = ProcessUids(pid);
  if (!uids) return std::nullopt;
  return (*uids)[0];
}

StatusOr<UniqueFd> OpenProcessOf(int pid, int64_t uid) {
  const std::string which = "process " + std::to_string(pid);
  UniqueFd held = OpenPidfd(pid);
  if (!held.valid()) return NotFound(which + " is not running");
  if (uid < 0) return held;
  const std::optional<std::vector<int64_t>> uids = ProcessUids(pid);
  // Still the process the pidfd holds (EPERM: alive, another user's, and
  // gandivad not root): a pid reused after the pidfd's own ended fails here.
  const bool alive =
      syscall(SYS_pidfd_send_signal, held.get(), 0, nullptr, 0) == 0 || errno == EPERM;
  if (!uids || !alive) return NotFound(which + " is not running");
  const int64_t real = (*uids)[0], saved = (*uids)[2];
  if (real == uid || saved == uid) return held;
  return PermissionDenied(which + " is uid " + std::to_string(real) + "'s, not uid " +
                          std::to_string(uid) + "'s: a job's process must be one its user " +
                          "could signal itself");
}

Status CheckUserMaySignal(int pid, int64_t uid) { return OpenProcessOf(pid, uid).status(); }

bool SignalProcess(const UniqueFd& pidfd, int sig) {
  return pidfd.valid() && syscall(SYS_pidfd_send_signal, pidfd.get(), sig, nullptr, 0) == 0;
}

std::string BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

}  // namespace gandiva::controller
