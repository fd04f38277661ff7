// `gandiva scheduler`: flags, the API server and the scheduling loop; see
// gandiva/scheduler/live_daemon.h and docs/scheduler.md.
#include <grp.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>
#include <vector>

#include "gandiva/common/flags.h"
#include "gandiva/common/log.h"
#include "gandiva/protocol/api_server.h"
#include "gandiva/protocol/client.h"
#include "gandiva/protocol/server_flags.h"
#include "gandiva/scheduler/live_daemon.h"
#include "gandiva/scheduler/policy_flags.h"
#include "live/scheduler_service.h"

namespace gandiva::sched {
namespace {

constexpr const char* kUsage = R"(usage: gandiva scheduler --nodes FILE --state-dir DIR [flags]

  --nodes FILE        the gandivad nodes: lines "NAME ENDPOINT [PUBLIC_KEY_OR_FILE]"
                      (a tcp:// endpoint needs the node's key and this scheduler's --key)
  --state-dir DIR     its database (DIR/scheduler.db, SQLite) and the jobs' checkpoints
  --policy P          fifo, las, gandiva (default), reserve-pack, sjf-predicted, philly
  --endpoint EP       its API (default $GANDIVA_SCHEDULER or scheduler.sock beside gandivad's)
  --tcp EP            also serve its API on TCP, e.g. tcp://0.0.0.0:7080; CURVE-authenticated:
                      needs --key and --authorized-keys
  --key FILE          its key pair (`gandiva keygen`): calls tcp:// nodes, serves --tcp
  --authorized-keys FILE  public keys (one per line) of the clients --tcp accepts
  --shared-socket     its local socket serves every user of the machine: each submits jobs
                      that run as them on the nodes, and cancels and reads only their own
  --admin-group NAME  members act on every job (with root and the scheduler's user)
  --pass-ms N         how often it polls the nodes and runs the policy (default 500)
  --checkpoint-every S  checkpoint restartable jobs every S seconds (default 0: never)
  --node-dead-after S   a node silent this long loses its jobs to the queue (default 5)
  --stop-parked-after S  a restartable job suspended this long is checkpointed and stopped,
                      freeing its node; it restarts from the checkpoint (default 0: stays parked)
  --validate N        run each new job for its first N iterations in a short slice (weight
                      0.25, beside the device's jobs) before it queues, so that a job that
                      crashes at start fails in seconds (default 0: queue at once)
  --validate-timeout S  a validation run that reports no iterations passes after S seconds
                      without failing (default 120)
  --max-retries N     how often a job whose run failed through no fault of its own (node lost,
                      daemon gone, device error, killed from outside) runs again (default 3);
                      the job's own errors (syntax, import, arguments, out of memory) never do
  --retry-backoff S   the wait before the first retry, doubling for each next one up to
                      600 s (default 10)
  --log LEVEL         error, warn, info (default) or debug
)";

Status ParseOptions(const Flags& flags, live::SchedulerOptions* o,
                    protocol::ApiServerOptions* api) {
  if (!flags.Has("nodes") || !flags.Has("state-dir"))
    return InvalidArgument("--nodes and --state-dir are required");
  o->nodes_file = flags.Get("nodes");
  o->state_dir = flags.Get("state-dir");
  o->policy = flags.Get("policy", "gandiva");
  api->local_endpoint = flags.Get("endpoint", DefaultSchedulerEndpoint());
  GD_RETURN_IF_ERROR(protocol::ApplyServerTcpFlags(flags, api));
  if (flags.Has("key")) o->keys = api->server_keys;
  api->shared_local = flags.Has("shared-socket");
  if (flags.Has("admin-group")) {
    const std::string name = flags.Get("admin-group");
    group grp{};
    group* found = nullptr;
    std::vector<char> buf(16384);
    if (getgrnam_r(name.c_str(), &grp, buf.data(), buf.size(), &found) != 0 || !found)
      return InvalidArgument("--admin-group: no group '" + name + "' on this machine");
    o->admin_group = found->gr_gid;
  }
  GD_ASSIGN_OR_RETURN(long long pass_ms, flags.GetInt("pass-ms", 500));
  if (pass_ms < 10 || pass_ms > 60000) return InvalidArgument("--pass-ms must be 10..60000");
  o->pass_every_s = pass_ms / 1000.0;
  GD_ASSIGN_OR_RETURN(o->checkpoint_every_s, flags.GetDouble("checkpoint-every", 0));
  GD_ASSIGN_OR_RETURN(o->node_dead_after_s, flags.GetDouble("node-dead-after", 5));
  GD_ASSIGN_OR_RETURN(o->stop_parked_after_s, flags.GetDouble("stop-parked-after", 0));
  if (o->checkpoint_every_s < 0 || o->node_dead_after_s <= 0 || o->stop_parked_after_s < 0)
    return InvalidArgument(
        "--checkpoint-every, --node-dead-after and --stop-parked-after must be positive");
  GD_ASSIGN_OR_RETURN(long long validate, flags.GetInt("validate", 0));
  if (validate < 0 || validate > 1000000) return InvalidArgument("--validate must be 0..1000000");
  o->validate_iterations = static_cast<int>(validate);
  GD_ASSIGN_OR_RETURN(o->validate_timeout_s, flags.GetDouble("validate-timeout", 120));
  if (!(o->validate_timeout_s > 0)) return InvalidArgument("--validate-timeout must be positive");
  GD_ASSIGN_OR_RETURN(long long retries, flags.GetInt("max-retries", 3));
  if (retries < 0 || retries > 100) return InvalidArgument("--max-retries must be 0..100");
  o->retry.max_retries = static_cast<int>(retries);
  GD_ASSIGN_OR_RETURN(o->retry.backoff_s, flags.GetDouble("retry-backoff", 10));
  if (!(o->retry.backoff_s >= 0 && o->retry.backoff_s <= o->retry.max_backoff_s))
    return InvalidArgument("--retry-backoff must be 0..600 seconds");
  GD_RETURN_IF_ERROR(ApplyPolicyFlags(flags, &o->policy_options));
  return Status::Ok();
}

}  // namespace

int RunSchedulerDaemon(const std::vector<std::string>& args) {
  log::SetTag("gandiva-scheduler");
  std::set<std::string> valued = {"nodes",
                                  "state-dir",
                                  "policy",
                                  "endpoint",
                                  "tcp",
                                  "key",
                                  "authorized-keys",
                                  "admin-group",
                                  "pass-ms",
                                  "checkpoint-every",
                                  "node-dead-after",
                                  "stop-parked-after",
                                  "validate",
                                  "validate-timeout",
                                  "max-retries",
                                  "retry-backoff",
                                  "log"};
  std::set<std::string> boolean = {"help", "shared-socket"};
  valued.merge(PolicyValuedFlags());
  boolean.merge(PolicyBooleanFlags());
  Flags flags(std::move(valued), std::move(boolean));
  if (Status s = flags.Parse(args); !s.ok()) {
    std::fprintf(stderr, "gandiva scheduler: %s (see --help)\n", s.message().c_str());
    return 2;
  }
  if (flags.Has("help")) {
    std::fputs(kUsage, stdout);
    std::fputs(kPolicyFlagsUsage, stdout);
    std::fputs(
        "  (the policy options of `gandiva sim`; a job grows or shrinks only if it is\n"
        "   --restartable: it restarts from a checkpoint on its new devices)\n",
        stdout);
    return 0;
  }
  if (flags.Has("log") && !log::SetLevelByName(flags.Get("log").c_str())) {
    std::fprintf(stderr, "gandiva scheduler: --log must be error, warn, info or debug\n");
    return 2;
  }
  live::SchedulerOptions options;
  protocol::ApiServerOptions api;
  if (Status s = ParseOptions(flags, &options, &api); !s.ok()) {
    std::fprintf(stderr, "gandiva scheduler: %s\n", s.message().c_str());
    return 2;
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto service = live::SchedulerService::Create(options);
  if (!service.ok()) {
    std::fprintf(stderr, "gandiva scheduler: %s\n", service.status().message().c_str());
    return 1;
  }
  protocol::Dispatcher dispatcher;
  (*service)->Register(dispatcher);
  protocol::ApiServer server(
      [&dispatcher](protocol::Call call, protocol::Reply reply) {
        dispatcher.Dispatch(std::move(call), std::move(reply));
      },
      api);
  if (Status s = server.Bind(); !s.ok()) {
    std::fprintf(stderr, "gandiva scheduler: %s\n", s.message().c_str());
    return 1;
  }
  GD_LOG(kInfo, "scheduler up on %s%s%s: %s", api.local_endpoint.c_str(),
         api.tcp_endpoint.empty() ? "" : " and ", api.tcp_endpoint.c_str(),
         (*service)->Describe().c_str());
  std::atomic<bool> stop{false};
  std::thread api_thread([&] { server.Run(stop); });
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    GD_LOG(kInfo, "signal %d: stopping (jobs keep running on their nodes)", sig);
    stop.store(true);
  });
  (*service)->Run(stop);
  api_thread.join();
  signal_thread.join();
  return 0;
}

}  // namespace gandiva::sched
