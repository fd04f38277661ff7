// A job's state, from its record and its control block.
#include "jobs/job.h"

#include <sys/wait.h>

#include <charconv>
#include <cstring>

#include "gandiva/contract/environment.h"

namespace gandiva::controller {

JobState LiveJobState(const runtime::ControlBlock* c) {
  if (!c) return JobState::kStarting;
  switch (c->phase.load(std::memory_order_acquire)) {
    case runtime::kPhaseStarting:
      return JobState::kStarting;
    case runtime::kPhaseParked:
      return JobState::kSuspended;
    case runtime::kPhaseExited:  // "exited" waits for its process to end: then its code is known
      return JobState::kDetached;
    default:
      return c->request.load(std::memory_order_acquire) == runtime::kRequestSuspend
                 ? JobState::kSuspending
                 : JobState::kRunning;
  }
}

JobState Job::State() const {
  if (migrated()) return JobState::kMigrated;
  if (ended) return failed ? JobState::kFailed : JobState::kExited;
  return LiveJobState(cb());
}

void Job::FreezeFigures() {
  if (!cb()) return;
  final_stats = runtime::ReadIterationStats(cb()->profile);
  final_parks = cb()->park_count.load();
}

uint64_t Job::GpuMemoryCap() const {
  auto it = env.find(runtime::kEnvGpuMemoryBytes);
  if (it == env.end() || it->second.empty()) return 0;
  // As the shim reads it: decimal digits and nothing else, or no cap.
  const std::string& text = it->second;
  uint64_t bytes = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), bytes);
  if (error != std::errc() || end != text.data() + text.size()) return 0;
  return bytes;
}

std::string DeviceListText(const std::vector<std::string>& devices) {
  std::string text;
  for (const std::string& d : devices) text += (text.empty() ? "" : ",") + d;
  return text;
}

ProcessEnd EndFromReport(int exit_code, int signal) {
  if (signal > 0)
    return {protocol::ExitReason::kKilled, signal,
            "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")"};
  return {protocol::ExitReason::kExited, 0, "exited with code " + std::to_string(exit_code)};
}

ProcessEnd EndFromWaitStatus(int wait_status, int* exit_code) {
  if (WIFSIGNALED(wait_status)) {
    *exit_code = 128 + WTERMSIG(wait_status);
    return EndFromReport(*exit_code, WTERMSIG(wait_status));
  }
  *exit_code = WEXITSTATUS(wait_status);
  return EndFromReport(*exit_code, 0);
}

}  // namespace gandiva::controller
