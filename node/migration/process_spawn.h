// Starts a job's process from the controller itself (the destination of a
// migration has no `gandiva run` to do it): command, environment, working
// directory, output to a log file.
#ifndef GANDIVA_NODE_MIGRATION_PROCESS_SPAWN_H_
#define GANDIVA_NODE_MIGRATION_PROCESS_SPAWN_H_

#include <map>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::controller {

StatusOr<int> SpawnProcess(const std::vector<std::string>& command,
                           const std::map<std::string, std::string>& env, const std::string& cwd,
                           const std::string& log_path);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_PROCESS_SPAWN_H_
