// Daemon start-up and shutdown; see daemon.h.
#include "gandiva/node/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "api/metrics.h"
#include "api/metrics_server.h"
#include "devices/devices.h"
#include "gandiva/common/flags.h"
#include "gandiva/common/log.h"
#include "gandiva/common/private_files.h"
#include "gandiva/protocol/api_server.h"
#include "gandiva/protocol/client.h"
#include "gandiva/protocol/server_flags.h"
#include "migration/bulk_channel.h"
#include "node.h"

namespace gandiva::controller {

using protocol::ApiServer;
using protocol::ApiServerOptions;
using protocol::Call;
using protocol::Json;
using protocol::Reply;
namespace {

constexpr const char* kUsage = R"(usage: gandivad [flags]   (also: gandiva daemon [flags])

  --devices SPEC     devices to time-slice, e.g. cpu:1 or gpu:2,cpu:1
                     (default: the GPUs NVML finds, else cpu:1)
  --device-memory-mib N  memory of each --devices device; caps what each GPU found by NVML
                     reports; when jobs sliced on a device do not fit together, the one leaving
                     swaps out
  --slice-ms N       time slice, 50..250 ms (default 100)
  --switch-share PCT  most of a device's time that swapping jobs' memory at hand-overs may
                     cost: slices lengthen to keep it so, 0..50 (default 2; 0: never)
  --lease-ms N       a parked job resumes itself after N ms without a heartbeat (default 3000)
  --freeze-parked on|off  stop a parked job's processes (SIGSTOP) until it runs again (default on)
  --release swap|driver  how a parked GPU job gives its device memory back when it must: the
                     shim's swap (default) or the driver's checkpoint API (driver >= 570)
  --endpoint EP      local API endpoint (default $GANDIVA_ENDPOINT or an owner-only Unix socket)
  --tcp EP           also serve on TCP, e.g. tcp://0.0.0.0:7070; CURVE-authenticated:
                     needs --key and --authorized-keys or --peer-keys
  --key FILE         this node's key pair (`gandiva keygen`): serves TCP, authenticates to peers
  --authorized-keys FILE  operators' public keys (lines "KEY [NAME]": the scheduler, admins'
                     CLIs): they may do everything here
  --peer-keys FILE   other nodes' public keys (lines "KEY [NAME]"): they may only migrate
                     jobs to this node
  --peers FILE       nodes jobs may migrate to: lines "NAME tcp://HOST:PORT PUBLIC_KEY_OR_FILE"
  --state-dir DIR    transfer sockets and logs of jobs started here (default: the endpoint's dir)
  --job-log-cap-kib N  cap of each output file of a job gandivad launched (default 65536);
                     past it the file moves to FILE.1 and starts over: the newest output stays
  --peer-timeout-ms N  a peer silent this long during a migration has failed (default 20000)
  --warm-copy-timeout-ms N  a job migrating here whose state has not loaded is dropped (its copy
                     killed, its devices freed) when its source sends no step, and no
                     bytes of its state, this long (default 600000; the job trains on at
                     its source)
  --rank-timeout-ms N  a gang's rank that has not registered this long after the job fails it
                     (default 60000)
  --boundary-wait-s N  a job that has marked no iteration boundary N s after it registered is
                     reported ("no iteration boundaries seen") in ps, queue, metrics and
                     this log (default 30; 0: never)
  --max-jobs N       live jobs at once on this node; more are refused (default 256)
  --max-jobs-per-user N  live jobs of one user at once (jobs registered for a uid);
                     default 64, 0: no limit
  --shared-socket    the local socket serves every user of the node, each acting on their
                     own jobs only (run gandivad as root); default: owner only
  --admin-group NAME  members act on every job and on the node (with root and gandivad's user)
  --metrics ADDR:PORT  serve Prometheus metrics at http://ADDR:PORT/metrics (plain HTTP,
                     unauthenticated: bind an address only the monitoring reaches)
  --node NAME        node name (default: the host name)
  --log LEVEL        error, warn, info (default) or debug
  --daemonize        detach into the background once the API is up; prints the pid
)";

// Transfer sockets are bound in the state directory, and a Unix socket path
// holds at most 108 bytes: their names need the rest.
constexpr size_t kMaxStateDirBytes = 70;

// A short state directory for a deep one: in this user's runtime directory
// ($XDG_RUNTIME_DIR, else /run for root), named after the endpoint so that the
// same endpoint finds its job table there again at each start. Never /tmp:
// another user could make that name first and have root write into it.
StatusOr<std::string> ShortStateDir(const std::string& deep, const std::string& endpoint) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : endpoint) h = (h ^ c) * 0x100000001b3ull;
  char name[32];
  std::snprintf(name, sizeof(name), "gandivad-%016llx", static_cast<unsigned long long>(h));
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  std::string base = runtime && *runtime ? runtime : geteuid() == 0 ? "/run/gandiva" : "";
  const std::string why = "--state-dir " + deep + " is " + std::to_string(deep.size()) +
                          " bytes long; the sockets made in it need one of at most " +
                          std::to_string(kMaxStateDirBytes);
  if (base.empty() || base[0] != '/' || base.size() + 1 + std::strlen(name) > kMaxStateDirBytes)
    return InvalidArgument(why + ", and there is no short runtime directory ($XDG_RUNTIME_DIR) " +
                           "to use instead: give a shorter --state-dir");
  GD_LOG(kInfo, "%s: using %s/%s instead", why.c_str(), base.c_str(), name);
  return base + "/" + name;
}

// GPUs named by --devices that NVML does not find on this node: gandivad serves them
// (tests run jobs on the CPU stand-in for the driver that way), but a user who meant
// real GPUs is told at start, not by jobs that fail to find one.
void WarnOfGpusNvmlDoesNotFind(const std::vector<DeviceInfo>& devices) {
  size_t named = 0;
  for (const DeviceInfo& d : devices) named += d.kind == protocol::DeviceKind::kGpu;
  if (named == 0) return;
  const size_t found = DiscoverGpus().size();
  if (found >= named) return;
  GD_LOG(kWarn,
         "--devices names %zu GPU(s) but NVML finds %zu on this node: jobs placed on the "
         "others run against whatever libcuda.so.1 they load (none, or a stand-in), and their "
         "memory is what --device-memory-mib says",
         named, found);
}

Status ParseOptions(const Flags& flags, NodeOptions* opts, ApiServerOptions* api) {
  GD_ASSIGN_OR_RETURN(long long slice, flags.GetInt("slice-ms", 100));
  if (slice < static_cast<long long>(kMinSliceMs) || slice > static_cast<long long>(kMaxSliceMs))
    return InvalidArgument("--slice-ms must be 50..250");
  GD_ASSIGN_OR_RETURN(long long lease, flags.GetInt("lease-ms", 3000));
  if (lease < 100 || lease > 600000) return InvalidArgument("--lease-ms must be 100..600000");
  opts->slice_ms = static_cast<uint64_t>(slice);
  GD_ASSIGN_OR_RETURN(double share, flags.GetDouble("switch-share", 2));
  if (!(share >= 0 && share <= 50)) return InvalidArgument("--switch-share must be 0..50 (%)");
  opts->switch_share = share / 100;
  opts->lease_ms = static_cast<uint64_t>(lease);
  GD_ASSIGN_OR_RETURN(long long rank_timeout, flags.GetInt("rank-timeout-ms", 60000));
  if (rank_timeout < 100) return InvalidArgument("--rank-timeout-ms must be at least 100");
  opts->rank_timeout_ms = static_cast<uint64_t>(rank_timeout);
  GD_ASSIGN_OR_RETURN(
      long long boundary_wait,
      flags.GetInt("boundary-wait-s", static_cast<long long>(kDefaultBoundaryWaitS)));
  if (boundary_wait < 0 || boundary_wait > 86400)
    return InvalidArgument("--boundary-wait-s must be 0..86400 (0: never)");
  opts->boundary_wait_ms = static_cast<uint64_t>(boundary_wait) * 1000;
  const std::string freeze = flags.Get("freeze-parked", "on");
  if (freeze != "on" && freeze != "off")
    return InvalidArgument("--freeze-parked must be on or off");
  opts->freeze_parked = freeze == "on";
  const std::string release = flags.Get("release", "swap");
  if (release != "swap" && release != "driver")
    return InvalidArgument("--release must be swap or driver");
  opts->release_through_driver = release == "driver";
  GD_ASSIGN_OR_RETURN(long long max_jobs, flags.GetInt("max-jobs", 256));
  if (max_jobs < 1 || max_jobs > 100000) return InvalidArgument("--max-jobs must be 1..100000");
  opts->max_jobs = static_cast<size_t>(max_jobs);
  GD_ASSIGN_OR_RETURN(long long per_user, flags.GetInt("max-jobs-per-user", 64));
  if (per_user < 0 || per_user > 100000)
    return InvalidArgument("--max-jobs-per-user must be 0..100000 (0: no limit)");
  opts->max_jobs_per_user = static_cast<size_t>(per_user);
  api->shared_local = flags.Has("shared-socket");
  if (flags.Has("admin-group")) {
    const std::string name = flags.Get("admin-group");
    group g{};
    group* found = nullptr;
    std::vector<char> buf(16384);
    if (getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &found) != 0 || !found)
      return InvalidArgument("--admin-group: no group '" + name + "' on this node");
    opts->admin_group = found->gr_gid;
  }
  GD_ASSIGN_OR_RETURN(long long memory_mib, flags.GetInt("device-memory-mib", 0));
  if (memory_mib < 0) return InvalidArgument("--device-memory-mib must be positive");
  const uint64_t memory_cap = static_cast<uint64_t>(memory_mib) << 20;
  if (flags.Has("devices")) {
    GD_ASSIGN_OR_RETURN(opts->devices,
                        ParseDeviceSpec(flags.Get("devices"), getenv("CUDA_VISIBLE_DEVICES")));
    for (auto& d : opts->devices) d.memory_bytes = memory_cap;
    WarnOfGpusNvmlDoesNotFind(opts->devices);
  } else {
    opts->devices = DiscoverGpus();
    if (opts->devices.empty()) {
      GD_ASSIGN_OR_RETURN(opts->devices, ParseDeviceSpec("cpu:1"));
    }
    // A GPU found by NVML reports its own memory; the flag caps it (part of a large
    // GPU for gandiva's jobs, the rest left to other work), never raises it.
    for (auto& d : opts->devices)
      if (memory_cap != 0 && (d.memory_bytes == 0 || d.memory_bytes > memory_cap))
        d.memory_bytes = memory_cap;
  }
  char host[64] = "node";
  gethostname(host, sizeof host - 1);
  opts->node = flags.Get("node", host);
  for (char c : opts->node)
    if (!isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      return InvalidArgument("--node may hold only letters, digits, '-' and '_'");
  opts->endpoint = flags.Get("endpoint", DefaultEndpoint());
  if (opts->endpoint.rfind("ipc://", 0) != 0)
    return InvalidArgument("--endpoint must be ipc://PATH");
  api->local_endpoint = opts->endpoint;
  GD_RETURN_IF_ERROR(protocol::ApplyServerTcpFlags(flags, api));
  if (flags.Has("key")) opts->node_keys = api->server_keys;  // it authenticates to peers too
  // Arriving state comes in on a port of the same address the API serves TCP on.
  if (!api->tcp_endpoint.empty()) opts->bulk_host = HostOfTcpEndpoint(api->tcp_endpoint);
  if (flags.Has("peers")) {
    GD_ASSIGN_OR_RETURN(opts->peers, ReadPeers(flags.Get("peers")));
  }
  GD_ASSIGN_OR_RETURN(opts->fault, ParsePeerFault(flags.Get("fault", "")));
  GD_ASSIGN_OR_RETURN(long long peer_timeout, flags.GetInt("peer-timeout-ms", 20000));
  if (peer_timeout < 100 || peer_timeout > 600000)
    return InvalidArgument("--peer-timeout-ms must be 100..600000");
  opts->peer_timeout_ms = static_cast<int>(peer_timeout);
  GD_ASSIGN_OR_RETURN(long long warm_copy, flags.GetInt("warm-copy-timeout-ms", 600000));
  if (warm_copy < 100 || warm_copy > 86400000)
    return InvalidArgument("--warm-copy-timeout-ms must be 100..86400000");
  opts->timeouts.arrival_silence_ns = static_cast<uint64_t>(warm_copy) * kMs;
  GD_ASSIGN_OR_RETURN(long long log_cap_kib,
                      flags.GetInt("job-log-cap-kib", kDefaultLogCapBytes >> 10));
  if (log_cap_kib < 1 || log_cap_kib > (1ll << 30))
    return InvalidArgument("--job-log-cap-kib must be 1..1073741824");
  opts->job_log_cap_bytes = static_cast<uint64_t>(log_cap_kib) << 10;
  std::string state_dir =
      flags.Get("state-dir", std::filesystem::path(opts->endpoint.substr(6)).parent_path());
  std::error_code ec;
  state_dir = std::filesystem::absolute(state_dir, ec).lexically_normal().string();
  if (state_dir.size() > 1 && state_dir.back() == '/') state_dir.pop_back();
  if (state_dir.size() > kMaxStateDirBytes) {
    GD_ASSIGN_OR_RETURN(state_dir, ShortStateDir(state_dir, opts->endpoint));
  }
  // Root writes job logs and binds transfer sockets there: a directory another
  // user owns or may write to is refused, not chmod'ed (they would keep it). It
  // is the shared socket's directory too by default, which users must reach.
  const bool holds_shared_socket =
      api->shared_local &&
      std::filesystem::path(opts->endpoint.substr(6)).parent_path() == state_dir;
  auto checked = OpenPrivateDir(state_dir, holds_shared_socket ? 0755 : 0700, geteuid());
  if (!checked.ok())
    return Status(checked.status().code(), "--state-dir: " + checked.status().message());
  opts->state_dir = state_dir;
  return Status::Ok();
}

// Checks the command line and sets the log level; an exit code if the daemon must not start.
std::optional<int> CheckCommandLine(Flags& flags, const std::vector<std::string>& args) {
  if (Status s = flags.Parse(args); !s.ok()) {
    std::fprintf(stderr, "gandivad: %s\n%s", s.message().c_str(), kUsage);
    return 2;
  }
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!flags.positionals().empty()) {
    std::fprintf(stderr, "gandivad: unexpected argument '%s'\n%s", flags.positionals()[0].c_str(),
                 kUsage);
    return 2;
  }
  if (flags.Has("log") && !log::SetLevelByName(flags.Get("log").c_str())) {
    std::fprintf(stderr, "gandivad: --log must be error, warn, info or debug\n");
    return 2;
  }
  return std::nullopt;
}

// Detaches into the background before any thread exists. In the child it
// returns nullopt and sets *ready_fd, to be written once the API is up; the
// parent waits for that and returns its exit code.
std::optional<int> Daemonize(int* ready_fd) {
  int ready_pipe[2] = {-1, -1};
  if (pipe(ready_pipe) != 0) return 1;
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid > 0) {
    close(ready_pipe[1]);
    char ok = 0;
    const bool up = read(ready_pipe[0], &ok, 1) == 1 && ok == 'y';
    if (up) std::printf("%d\n", pid);
    return up ? 0 : 1;
  }
  close(ready_pipe[0]);
  setsid();
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, 0);
  *ready_fd = ready_pipe[1];
  return std::nullopt;
}

// Runs the node and its API until a stop signal; signals go to one thread that
// asks everything to stop.
// The Prometheus metrics (--metrics): list_jobs and list_devices, asked of the
// node's own dispatcher (its synchronous handlers answer on this thread).
std::string NodeMetrics(Node& node) {
  Json replies[2];
  const protocol::MessageType types[2] = {protocol::MessageType::kListJobs,
                                          protocol::MessageType::kListDevices};
  for (int i = 0; i < 2; ++i) {
    Call call;
    call.request.type = types[i];
    call.request.body = Json::object();
    node.Handle(std::move(call), Reply([&replies, i](const StatusOr<Json>& r) {
                  if (r.ok()) replies[i] = *r;
                }));
  }
  return RenderMetrics(node.options().node, replies[0], replies[1]);
}

int Serve(const NodeOptions& opts, const ApiServerOptions& api_options,
          const std::string& metrics_address, int ready_fd) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Node node(opts);
  ApiServer server(
      [&node](Call call, Reply reply) { node.Handle(std::move(call), std::move(reply)); },
      api_options);
  auto failed = [](const Status& s) {
    if (!s.ok()) GD_LOG(kError, "%s", s.message().c_str());
    return !s.ok();
  };
  if (failed(server.Bind()) || failed(node.Start())) return 1;
  MetricsServer metrics([&node] { return NodeMetrics(node); });
  if (!metrics_address.empty() && failed(metrics.Start(metrics_address))) return 1;
  std::string names;
  for (const auto& d : opts.devices) names += (names.empty() ? "" : ",") + d.name;
  GD_LOG(kInfo, "node %s up: devices %s, slice %llu ms, lease %llu ms", opts.node.c_str(),
         names.c_str(), static_cast<unsigned long long>(opts.slice_ms),
         static_cast<unsigned long long>(opts.lease_ms));
  if (ready_fd >= 0) {
    ssize_t ignored = write(ready_fd, "y", 1);
    (void)ignored;
    close(ready_fd);
  }
  std::atomic<bool> stop{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    GD_LOG(kInfo, "signal %d: stopping", sig);
    stop.store(true);
  });
  server.Run(stop);
  metrics.Stop();
  node.Stop();  // resumes every parked job first
  signal_thread.join();
  GD_LOG(kInfo, "stopped");
  return 0;
}

}  // namespace

int RunDaemon(const std::vector<std::string>& args) {
  log::SetTag("gandivad");
  Flags flags({"devices",
               "slice-ms",
               "switch-share",
               "lease-ms",
               "endpoint",
               "tcp",
               "node",
               "log",
               "key",
               "authorized-keys",
               "peer-keys",
               "peers",
               "state-dir",
               "fault",
               "peer-timeout-ms",
               "warm-copy-timeout-ms",
               "device-memory-mib",
               "job-log-cap-kib",
               "rank-timeout-ms",
               "boundary-wait-s",
               "freeze-parked",
               "release",
               "metrics",
               "max-jobs",
               "admin-group",
               "max-jobs-per-user"},
              {"daemonize", "help", "shared-socket"});
  if (auto code = CheckCommandLine(flags, args)) return *code;

  // Migration moves state in 4 MiB chunks that ZeroMQ and CURVE allocate and
  // free per message. Past glibc's mmap threshold each would be a fresh mapping,
  // page-faulted in and unmapped again (about a third of a GiB-sized transfer's
  // CPU here); keep them in the heap and reuse warm memory instead.
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);

  NodeOptions opts;
  ApiServerOptions api_options;
  if (Status s = ParseOptions(flags, &opts, &api_options); !s.ok()) {
    std::fprintf(stderr, "gandivad: %s\n", s.message().c_str());
    return 2;
  }
  int ready_fd = -1;
  if (flags.Has("daemonize"))
    if (auto parent_exit = Daemonize(&ready_fd)) return *parent_exit;
  return Serve(opts, api_options, flags.Get("metrics"), ready_fd);
}

}  // namespace gandiva::controller
