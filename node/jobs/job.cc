// A job's state, from its record and its control block.
#include "jobs/job.h"

namespace gandiva::controller {

JobState LiveJobState(const runtime::ControlBlock* c) {
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

JobState Job::State() const {
  if (migrated) return JobState::kMigrated;
  if (ended) return failed ? JobState::kFailed : JobState::kExited;
  return LiveJobState(cb());
}

}  // namespace gandiva::controller
