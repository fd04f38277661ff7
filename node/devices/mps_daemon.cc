// The MPS control daemon, started and supervised by gandivad; see mps_daemon.h.
#include "devices/mps_daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "gandiva/common/log.h"

extern char** environ;

namespace gandiva::controller {

namespace {
constexpr int kMaxRestarts = 5;

// fork + exec with `env` added to ours; stdin from /dev/null or a pipe holding
// `input`. Everything the child needs is built before fork (gandivad has threads).
pid_t SpawnWith(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                const std::string& input) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    if (!env.count(kv.substr(0, kv.find('=')))) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : env_strings) envp.push_back(const_cast<char*>(e.c_str()));
  args.push_back(nullptr);
  envp.push_back(nullptr);
  int fds[2] = {-1, -1};
  if (!input.empty() && pipe2(fds, O_CLOEXEC) != 0) return -1;
  const int devnull = input.empty() ? open("/dev/null", O_RDONLY | O_CLOEXEC) : -1;
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(input.empty() ? devnull : fds[0], 0);  // dup2 clears close-on-exec on fd 0
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  if (devnull >= 0) close(devnull);
  if (!input.empty()) {
    close(fds[0]);
    if (pid > 0) {
      ssize_t ignored = write(fds[1], input.data(), input.size());
      (void)ignored;
    }
    close(fds[1]);
  }
  return pid;
}
}  // namespace

std::string FindOnPath(const std::string& name, const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    const std::string dir = path.substr(start, colon - start);
    start = colon + 1;
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

StatusOr<MpsPlan> PlanMps(bool has_gpu, const std::string& path, const std::string& state_dir) {
  if (!has_gpu) return FailedPrecondition("no GPU device on this node");
  MpsPlan plan;
  plan.binary = FindOnPath(kMpsControlBinary, path);
  if (plan.binary.empty())
    return FailedPrecondition(std::string("no ") + kMpsControlBinary + " on PATH");
  if (state_dir.empty()) return FailedPrecondition("no state directory for MPS pipes");
  plan.pipe_dir = state_dir + "/mps/pipe";
  plan.log_dir = state_dir + "/mps/log";
  return plan;
}

std::vector<std::string> MpsStartCommand(const MpsPlan& plan) { return {plan.binary, "-f"}; }

std::map<std::string, std::string> MpsEnvironment(const MpsPlan& plan) {
  return {{"CUDA_MPS_PIPE_DIRECTORY", plan.pipe_dir}, {"CUDA_MPS_LOG_DIRECTORY", plan.log_dir}};
}

void MpsDaemon::Start(const StatusOr<MpsPlan>& plan) {
  std::lock_guard lock(mu_);
  if (!plan.ok()) {
    why_not_ = "off: " + plan.status().message();
    GD_LOG(kInfo, "MPS %s", why_not_.c_str());
    return;
  }
  plan_ = *plan;
  std::error_code ec;
  std::filesystem::create_directories(plan_.pipe_dir, ec);
  std::filesystem::create_directories(plan_.log_dir, ec);
  if (ec) {
    why_not_ = "off: cannot create " + plan_.pipe_dir + ": " + ec.message();
    return;
  }
  pid_ = Spawn();
  if (pid_ <= 0) {
    why_not_ = "off: cannot start " + plan_.binary;
    return;
  }
  why_not_.clear();
  GD_LOG(kInfo, "MPS control daemon started (pid %d, pipes in %s)", pid_, plan_.pipe_dir.c_str());
  thread_ = std::thread([this] { Supervise(); });
}

pid_t MpsDaemon::Spawn() { return SpawnWith(MpsStartCommand(plan_), MpsEnvironment(plan_), ""); }

// Waits on the control daemon; restarts it when it dies (a few times, then gives up).
void MpsDaemon::Supervise() {
  std::unique_lock lock(mu_);
  while (true) {
    const pid_t pid = pid_;
    lock.unlock();
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    lock.lock();
    pid_ = 0;
    if (stopping_) return;
    if (++restarts_ > kMaxRestarts) {
      why_not_ = "off: the control daemon kept dying (see " + plan_.log_dir + ")";
      GD_LOG(kError, "MPS %s", why_not_.c_str());
      return;
    }
    GD_LOG(kWarn, "MPS control daemon exited (status %d); restarting", status);
    const int backoff_ms = 200 * restarts_;
    lock.unlock();  // Status() answers meanwhile
    std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
    lock.lock();
    if (stopping_) return;
    pid_ = Spawn();
    if (pid_ <= 0) {
      why_not_ = "off: cannot restart " + plan_.binary;
      return;
    }
  }
}

void MpsDaemon::Stop() {
  pid_t pid;
  {
    std::lock_guard lock(mu_);
    if (stopping_.exchange(true)) return;
    pid = pid_;
  }
  if (pid > 0) {
    // The documented way down: `quit` on its control pipe; then a signal if it lingers.
    const pid_t quit = SpawnWith({plan_.binary}, MpsEnvironment(plan_), "quit\n");
    if (quit > 0) waitpid(quit, nullptr, 0);
    for (int i = 0; i < 50 && kill(pid, 0) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::lock_guard lock(mu_);
    if (pid_ > 0) kill(pid_, SIGTERM);
  }
  if (thread_.joinable()) thread_.join();
}

std::string MpsDaemon::Status() const {
  std::lock_guard lock(mu_);
  return why_not_.empty() ? "running" : why_not_;
}

std::map<std::string, std::string> MpsDaemon::JobEnvironment() const {
  std::lock_guard lock(mu_);
  return why_not_.empty() ? MpsEnvironment(plan_) : std::map<std::string, std::string>{};
}

}  // namespace gandiva::controller
