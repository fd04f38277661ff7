// What tells one process from another that later gets its pid: its start time
// (clock ticks after boot, /proc/PID/stat), and which boot this is. A gandivad
// started again checks both before it takes a recorded pid as its job's.
#ifndef GANDIVA_NODE_JOBS_PROCESS_IDENTITY_H_
#define GANDIVA_NODE_JOBS_PROCESS_IDENTITY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva::controller {

// A pidfd for process `pid` (invalid if there is none): it stays that
// process's even if the pid is reused later.
UniqueFd OpenPidfd(int pid);
// When process `pid` started, in clock ticks after boot; nullopt if there is none.
std::optional<uint64_t> ProcessStartTicks(int pid);
// The real user id of process `pid`; nullopt if there is none.
std::optional<int64_t> ProcessRealUid(int pid);
// This boot's id (/proc/sys/kernel/random/boot_id); "" if it cannot be read.
std::string BootId();
// Ok if user `uid` may signal process `pid` itself, by kill(2)'s rule for a
// user: the process's real or saved user id is `uid`. Read while a pidfd holds
// the process, so that a pid freed and reused meanwhile cannot pass; otherwise
// PermissionDenied naming whose it is, or NotFound. gandivad, as root, takes a
// pid from a user only if this holds: it acts on no process the user could not.
Status CheckUserMaySignal(int pid, int64_t uid);
// The same check, keeping the pidfd it held: signals sent through it reach
// that process or none. uid < 0 (a job of gandivad's own user) checks nothing
// but that the process runs.
StatusOr<UniqueFd> OpenProcessOf(int pid, int64_t uid);
// Sends `sig` through a pidfd (never by pid, which may have been reused);
// false if the process is gone (or the pidfd is invalid).
bool SignalProcess(const UniqueFd& pidfd, int sig);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_PROCESS_IDENTITY_H_
