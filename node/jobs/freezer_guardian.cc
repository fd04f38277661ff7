// The guardian process that continues stopped jobs when gandivad goes away; see freezer_guardian.h.
#include "jobs/freezer_guardian.h"

#include <errno.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace gandiva::controller {

bool FixedPidSet::Add(int32_t pid) {
  if (Contains(pid)) return true;
  if (size_ == pids_.size()) return false;
  pids_[size_++] = pid;
  return true;
}

void FixedPidSet::Remove(int32_t pid) {
  for (size_t i = 0; i < size_; ++i) {
    if (pids_[i] != pid) continue;
    pids_[i] = pids_[--size_];
    return;
  }
}

bool FixedPidSet::Contains(int32_t pid) const {
  for (size_t i = 0; i < size_; ++i)
    if (pids_[i] == pid) return true;
  return false;
}

void ApplyGuardianRecords(const int32_t* records, size_t count, FixedPidSet& set) {
  for (size_t i = 0; i < count; ++i) {
    if (records[i] > 0) set.Add(records[i]);
    if (records[i] < 0) set.Remove(-records[i]);
  }
}

namespace {

// Records per message: a message is one atomic unit on a SOCK_SEQPACKET socket.
constexpr size_t kRecordsPerMessage = 256;

// The guardian's whole life, in the forked child: async-signal-safe calls only.
[[noreturn]] void GuardianMain(int fd, FixedPidSet& stopped) {
  // Nothing but SIGKILL (or gandivad's end of the socket closing) ends it: a
  // Ctrl-C or a SIGTERM to gandivad's process group must not take it first.
  struct sigaction ignore;
  std::memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM, SIGTSTP,
                  SIGTTIN, SIGTTOU})
    sigaction(sig, &ignore, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  prctl(PR_SET_NAME, "gandivad-guard", 0, 0, 0);
  // Hold none of gandivad's descriptors (its sockets, its listening endpoint).
  if (fd > 0) syscall(SYS_close_range, 0u, static_cast<unsigned>(fd - 1), 0u);
  syscall(SYS_close_range, static_cast<unsigned>(fd + 1), ~0u, 0u);

  int32_t records[kRecordsPerMessage];
  for (;;) {
    const ssize_t n = recv(fd, records, sizeof records, 0);
    if (n > 0) {
      ApplyGuardianRecords(records, static_cast<size_t>(n) / sizeof(int32_t), stopped);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;  // gandivad is gone (or its end closed): continue everything it stopped
  }
  for (int32_t pid : stopped) kill(pid, SIGCONT);
  _exit(0);
}

}  // namespace

StatusOr<std::unique_ptr<FreezerGuardian>> FreezerGuardian::Start() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    return Internal(std::string("socketpair for the freezer guardian: ") + strerror(errno));
  UniqueFd ours(fds[0]), theirs(fds[1]);
  FixedPidSet stopped(kCapacity);  // allocated before fork: the child must not allocate
  const pid_t pid = fork();
  if (pid < 0) return Internal(std::string("fork of the freezer guardian: ") + strerror(errno));
  if (pid == 0) GuardianMain(theirs.get(), stopped);
  return std::unique_ptr<FreezerGuardian>(new FreezerGuardian(std::move(ours), pid));
}

FreezerGuardian::~FreezerGuardian() {
  fd_.Reset();  // end of stream: it continues what it still holds and exits
  if (pid_ > 0)
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
}

bool FreezerGuardian::Send(const std::vector<int32_t>& pids, int sign) {
  int32_t records[kRecordsPerMessage];
  for (size_t at = 0; at < pids.size();) {
    const size_t n = std::min(kRecordsPerMessage, pids.size() - at);
    for (size_t i = 0; i < n; ++i) records[i] = sign * pids[at + i];
    ssize_t sent;
    do {
      sent = send(fd_.get(), records, n * sizeof(int32_t), MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent != static_cast<ssize_t>(n * sizeof(int32_t))) return false;
    at += n;
  }
  return true;
}

}  // namespace gandiva::controller
