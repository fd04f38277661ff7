// The cluster scheduler's side of `gandiva wait --scheduler`, shared with
// job_commands.cc.
#ifndef GANDIVA_CLI_SCHEDULER_COMMANDS_H_
#define GANDIVA_CLI_SCHEDULER_COMMANDS_H_

#include "node_client.h"

namespace gandiva::cli {

// Polls the scheduler until job `job` ended; exits 0 when it finished, its exit
// code (or 1) when it failed, 130 when cancelled, 124 after timeout_s (> 0).
int WaitForSchedulerJob(NodeCommand& c, int64_t job, double timeout_s);

}  // namespace gandiva::cli

#endif  // GANDIVA_CLI_SCHEDULER_COMMANDS_H_
