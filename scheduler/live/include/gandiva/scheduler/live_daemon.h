// The live cluster scheduler daemon (`gandiva scheduler`): the interface of
// gandiva_sched_live. Everything else of the live scheduler is private to it.
#ifndef GANDIVA_SCHEDULER_LIVE_DAEMON_H_
#define GANDIVA_SCHEDULER_LIVE_DAEMON_H_

#include <string>
#include <vector>

namespace gandiva::sched {

// Runs the scheduler with these command-line arguments until SIGTERM/SIGINT;
// returns the exit code (2: a wrong flag, 1: could not start).
int RunSchedulerDaemon(const std::vector<std::string>& args);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHEDULER_LIVE_DAEMON_H_
