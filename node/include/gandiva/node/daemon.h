// gandivad's entry point, shared by the `gandivad` binary and `gandiva daemon`:
// flags, devices, the controller, the API server, signals, daemonizing.
#ifndef GANDIVA_CONTROLLER_DAEMON_H_
#define GANDIVA_CONTROLLER_DAEMON_H_

#include <string>
#include <vector>

namespace gandiva::controller {

// Runs the daemon until SIGTERM/SIGINT; returns the process exit code.
int RunDaemon(const std::vector<std::string>& args);

}  // namespace gandiva::controller

#endif  // GANDIVA_CONTROLLER_DAEMON_H_
