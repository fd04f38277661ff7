// Job state as derived from the control block.
#include "job.h"

namespace gandiva::controller {

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kStarting:
      return "starting";
    case JobState::kRunning:
      return "running";
    case JobState::kSuspending:
      return "suspending";
    case JobState::kSuspended:
      return "suspended";
    case JobState::kExited:
      return "exited";
    case JobState::kFailed:
      return "failed";
    case JobState::kMigrated:
      return "migrated";
  }
  return "?";
}

JobState Job::State() const {
  if (migrated) return JobState::kMigrated;
  if (ended) return failed ? JobState::kFailed : JobState::kExited;
  const runtime::ControlBlock* c = cb();
  if (!c) return JobState::kStarting;
  switch (c->phase.load(std::memory_order_acquire)) {
    case runtime::kPhaseStarting:
      return JobState::kStarting;
    case runtime::kPhaseParked:
      return JobState::kSuspended;
    case runtime::kPhaseExited:
      return JobState::kExited;
    default:
      return c->request.load(std::memory_order_acquire) == runtime::kRequestSuspend
                 ? JobState::kSuspending
                 : JobState::kRunning;
  }
}

}  // namespace gandiva::controller
