// Why a job's run ended badly, from what its node reports (how it ended, its
// exit code or signal) and the tail of its output: the job's own fault (a
// user error), the infrastructure's (its node or daemon went away, the device
// failed), or someone outside the scheduler ended it (preempted). Only the
// last two are worth running again: Philly (Jeon et al., ATC'19) found that
// most failures are user errors, that they fail the same way on every retry,
// and that retrying them wastes GPU time (docs/scheduler.md, "Failures").
//
// A pure function of its input: no I/O, no clock.
#ifndef GANDIVA_SCHEDULER_LIVE_EXIT_CLASS_H_
#define GANDIVA_SCHEDULER_LIVE_EXIT_CLASS_H_

#include <optional>
#include <string>
#include <string_view>

namespace gandiva::sched::live {

enum class FailureClass {
  kNone,            // it did not fail (or has not ended)
  kUser,            // the job's own error: retrying it fails the same way
  kInfrastructure,  // node lost, daemon gone, device error: retried
  kPreempted,       // ended by a signal from outside the scheduler: retried
  // Its end did not reach its node (the node's gandivad restarted meanwhile)
  // and nothing in its output says what happened: it may have finished, or
  // may still run unmanaged. Not retried: that could run it twice.
  kUnknown,
};
// "", "user", "infrastructure", "preempted", "unknown": stored and shown to users.
const char* FailureClassName(FailureClass c);
std::optional<FailureClass> ParseFailureClass(std::string_view name);
// Infrastructure failures and preemptions: the job itself may well succeed.
bool IsRetryable(FailureClass c);

// How a run ended, as its node's list_jobs reports it.
struct RunEnd {
  std::string reason;  // exit_reason: "exited", "killed", "failed_to_start", "lost"
  int exit_code = 0;
  int signal = 0;           // exit_signal: N when killed by signal N
  std::string detail;       // exit_detail, in words
  bool detached = false;    // it left gandiva's runtime cleanly (the node's state "exited")
  std::string output_tail;  // the end of its stderr then stdout ("" when unread)
};

struct Classified {
  FailureClass failure = FailureClass::kNone;
  std::string cause;  // in a few words: "syntax error", "GPU out of memory", "node lost"
};

// kNone for an exit with code 0, and for a run whose exit status was lost
// but which detached cleanly with no error in its output. Patterns in the output come first (a
// Python traceback names its error whatever the exit code); then the way it ended. A failure
// nothing identifies is the job's own (kUser): retrying an unknown failure is how Philly wasted its
// GPU time.
Classified ClassifyRunEnd(const RunEnd& end);

}  // namespace gandiva::sched::live

#endif  // GANDIVA_SCHEDULER_LIVE_EXIT_CLASS_H_
