// NVIDIA MPS (Multi-Process Service) for packing on GPUs: jobs that run at once
// on a GPU share it through one MPS server instead of the driver's time-sliced
// contexts (measured on an H100: a packed ResNet-18 pair 0.66-0.71x of
// back-to-back under MPS, 0.87-0.93x without; issue 11). gandivad starts the
// control daemon (`nvidia-cuda-mps-control -f`, in the foreground, as its child)
// when the node has GPU devices and the binary is on PATH, restarts it if it
// dies, points jobs at it through CUDA_MPS_PIPE_DIRECTORY and
// CUDA_MPS_LOG_DIRECTORY (under the state directory), and stops it (`quit` on
// its control pipe) on shutdown. Otherwise it says why not (Status()).
//
// A small component of its own because nothing here can run without a GPU:
// the tests cover the "why not" paths and the command and environment it builds
// (tests/node/mps_daemon_test.cc); the rest is for a node with a GPU.
#ifndef GANDIVA_NODE_DEVICES_MPS_DAEMON_H_
#define GANDIVA_NODE_DEVICES_MPS_DAEMON_H_

#include <sys/types.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::controller {

inline constexpr const char* kMpsControlBinary = "nvidia-cuda-mps-control";

// What starting MPS takes: the binary and the directories it talks through.
struct MpsPlan {
  std::string binary;    // absolute path of nvidia-cuda-mps-control
  std::string pipe_dir;  // CUDA_MPS_PIPE_DIRECTORY
  std::string log_dir;   // CUDA_MPS_LOG_DIRECTORY
};

// The executable `name` in the colon-separated `path`, or "".
std::string FindOnPath(const std::string& name, const std::string& path);

// Whether and how MPS can run: FailedPrecondition saying why not (no GPU, no
// binary on PATH) or the plan (directories under state_dir/mps).
StatusOr<MpsPlan> PlanMps(bool has_gpu, const std::string& path, const std::string& state_dir);

// The control daemon's command line (foreground, so that gandivad supervises it).
std::vector<std::string> MpsStartCommand(const MpsPlan& plan);
// The environment the control daemon, its `quit`, and every job start with.
std::map<std::string, std::string> MpsEnvironment(const MpsPlan& plan);

class MpsDaemon {
 public:
  MpsDaemon() = default;
  ~MpsDaemon() { Stop(); }
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  // Starts and supervises the control daemon if `plan` is ok; otherwise
  // records why not. Never fails the node: packing then runs without MPS.
  void Start(const StatusOr<MpsPlan>& plan);
  void Stop();
  // "running", or "off: <why>".
  std::string Status() const;
  // What jobs' environments get: the MPS directories while it runs, else nothing.
  std::map<std::string, std::string> JobEnvironment() const;

 private:
  void Supervise();
  pid_t Spawn();

  mutable std::mutex mu_;
  MpsPlan plan_;
  std::string why_not_ = "off: not started";
  pid_t pid_ = 0;
  int restarts_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_DEVICES_MPS_DAEMON_H_
