// `gandiva run --detach`'s launch, shared with run_command.cc.
#ifndef GANDIVA_CLI_JOB_COMMANDS_H_
#define GANDIVA_CLI_JOB_COMMANDS_H_

#include "node_client.h"

namespace gandiva::cli {

// Sends launch with `fields` (command, cwd, env, placement, restore) plus the
// user and --memory-mib; prints the job id. The process exit code.
int LaunchDetached(NodeCommand& c, protocol::Json fields);

}  // namespace gandiva::cli

#endif  // GANDIVA_CLI_JOB_COMMANDS_H_
