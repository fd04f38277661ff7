// Checkpoint on SIGTERM (GANDIVA_CHECKPOINT_ON_TERM=DIR): what a job preempted
// by a batch system (Slurm's PreemptMode=REQUEUE sends SIGCONT and SIGTERM, then
// SIGKILL after GraceTime) or cancelled needs to continue later from where it
// stopped instead of from its last periodic checkpoint.
//
// The handler does only async-signal-safe things: it raises a flag and wakes a
// parked boundary thread. The boundary thread sees the flag at its next
// boundary (or at once when parked, which is a boundary), saves the registered
// state to DIR/state.gdck (written to a temporary file and renamed, so a
// SIGKILL during the write leaves the previous checkpoint whole), and ends the
// process by SIGTERM, as the signal would have.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "gandiva/checkpoint/state_transfer.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "gandiva/runtime/job_runtime.h"

namespace gandiva::runtime {

std::atomic<bool> JobRuntime::term_requested_{false};

namespace {
// The disposition before ours: another copy of the runtime, or the program's own.
struct sigaction g_previous_term {};
}  // namespace

void JobRuntime::OnTerm(int sig) {
  term_requested_.store(true, std::memory_order_release);
  // The boundary thread may be parked on `request`; gated threads too.
  if (JobRuntime* rt = instance_.load(std::memory_order_acquire)) FutexWakeAll(&rt->cb_->request);
  const auto previous = g_previous_term.sa_handler;
  if (previous != SIG_DFL && previous != SIG_IGN && previous != nullptr) previous(sig);
}

void JobRuntime::InstallTermCheckpoint() {
  const char* dir = std::getenv(checkpoint::kEnvCheckpointOnTerm);
  if (!dir || !*dir) return;
  if (cb_->gang_size > 1) {
    // Each rank would save at its own next boundary: ranks one iteration apart
    // make a checkpoint no restore can use.
    GD_LOG(kWarn, "%s is not supported for a gang's ranks yet; SIGTERM ends this rank as usual",
           checkpoint::kEnvCheckpointOnTerm);
    return;
  }
  std::error_code ec;
  const auto abs = std::filesystem::absolute(dir, ec);
  // What is missing is made owner-only, as the save would (a checkpoint is the
  // user's alone); existing directories are left as they are.
  std::filesystem::path made;
  for (const auto& part : abs) {
    made /= part;
    if (::mkdir(made.c_str(), 0700) != 0 && errno != EEXIST) {
      ec = std::error_code(errno, std::generic_category());
      break;
    }
  }
  if (ec || access(abs.c_str(), W_OK) != 0) {
    GD_LOG(kError, "%s=%s: not a writable directory (%s); SIGTERM will not checkpoint",
           checkpoint::kEnvCheckpointOnTerm, dir, ec ? ec.message().c_str() : std::strerror(errno));
    return;
  }
  term_dir_ = abs.string();
  struct sigaction action {};
  action.sa_handler = &JobRuntime::OnTerm;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a parked thread's futex wait returns
  if (sigaction(SIGTERM, &action, &g_previous_term) != 0) {
    GD_LOG(kError, "cannot handle SIGTERM (%s); it will not checkpoint", std::strerror(errno));
    term_dir_.clear();
  }
}

void JobRuntime::CheckpointAndEndOnTerm() {
  const std::string target = "file:" + term_dir_ + "/" + checkpoint::kCheckpointFileName;
  const uint64_t iterations = cb_->profile.iterations.load(std::memory_order_relaxed);
  const uint64_t start = MonotonicNowNs();
  uint64_t bytes = 0;
  const Status saved = term_dir_.empty() ? FailedPrecondition("no checkpoint directory")
                                         : checkpoint::SaveState(target, cb_->job_id, &bytes);
  const double ms = (MonotonicNowNs() - start) / 1e6;
  if (saved.ok())
    GD_LOG(kInfo, "SIGTERM: saved the state after %llu iterations to %s (%llu bytes, %.1f ms)",
           static_cast<unsigned long long>(iterations), term_dir_.c_str(),
           static_cast<unsigned long long>(bytes), ms);
  else
    GD_LOG(kError,
           "SIGTERM: no checkpoint written to %s: %s; a checkpoint already there stays as it was",
           term_dir_.c_str(), saved.ToString().c_str());
  // End as SIGTERM would have: the default action, from this thread.
  signal(SIGTERM, SIG_DFL);
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &term, nullptr);
  raise(SIGTERM);
  std::_Exit(128 + SIGTERM);
}

}  // namespace gandiva::runtime
