// The Slurm plugin's calls to its node's gandivad for one step: register the
// step as a job (a gang of its local tasks), report its process once it runs
// and its exit once it ended. Each call opens its own client and closes it, so
// nothing of ZeroMQ lives across slurmstepd's fork of the tasks.
#ifndef GANDIVA_SLURM_SPANK_NODE_SESSION_H_
#define GANDIVA_SLURM_SPANK_NODE_SESSION_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::slurm {

struct StepJob {
  std::string name;                        // "slurm-<job>.<step>"
  std::vector<std::string> command;        // the step's argv
  std::string cwd;                         // where it runs
  std::map<std::string, std::string> env;  // its environment
  double weight = 1;
  int ranks = 1;                      // its tasks on this node
  std::optional<std::string> device;  // the GPU Slurm gave it, else gandivad's choice
  int64_t uid = -1;                   // the user its tasks run as
};

// What gandivad answered: the job, its device, and the variables every task of
// the step gets (its control block, id, endpoint, GANDIVA_RANKS for a gang, and
// what the node adds, e.g. MPS's directories).
struct Registered {
  int64_t job = 0;
  std::string device;
  bool gpu = false;
  std::vector<std::pair<std::string, std::string>> env;
};

class NodeSession {
 public:
  NodeSession(std::string endpoint, int timeout_ms)
      : endpoint_(std::move(endpoint)), timeout_ms_(timeout_ms) {}

  StatusOr<Registered> Register(const StepJob& step) const;
  Status Started(int64_t job, pid_t pid) const;
  // exit_code: 128+N when killed by signal N (then signal is N).
  Status Exited(int64_t job, int exit_code, int signal) const;

  const std::string& endpoint() const { return endpoint_; }

 private:
  std::string endpoint_;
  int timeout_ms_;
};

}  // namespace gandiva::slurm

#endif  // GANDIVA_SLURM_SPANK_NODE_SESSION_H_
