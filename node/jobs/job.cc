// Job states and their wire names.
#include "jobs/job.h"

namespace gandiva::controller {

namespace {
constexpr std::pair<JobState, const char*> kJobStateNames[] = {
    {JobState::kStarting, "starting"},     {JobState::kRunning, "running"},
    {JobState::kSuspending, "suspending"}, {JobState::kSuspended, "suspended"},
    {JobState::kExited, "exited"},         {JobState::kFailed, "failed"},
    {JobState::kMigrated, "migrated"},
};
}  // namespace

const char* JobStateName(JobState state) {
  for (const auto& [s, name] : kJobStateNames)
    if (s == state) return name;
  return "?";
}

std::optional<JobState> JobStateFromName(std::string_view name) {
  for (const auto& [s, n] : kJobStateNames)
    if (name == n) return s;
  return std::nullopt;
}

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
