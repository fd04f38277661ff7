// `gandiva`: the command-line tool for the node controller and the simulator.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"

namespace {

constexpr const char* kUsage = R"(usage: gandiva COMMAND [flags]

node controller:
  daemon [flags]                      run gandivad (see `gandiva daemon --help`)
  run [--device D | --devices D1,D2] [--weight W] [--name N] [--gpu-memory SIZE] -- CMD...
                                      run CMD as a job under the controller; returns its exit code
  run --detach [--memory-mib N] [flags] -- CMD...
                                      gandivad starts CMD itself (launch); prints the job id
  logs JOB [--follow] [--stderr]      a launched job's output (--follow: until it ended)
  wait JOB [--timeout-s S]            waits for a job to end; exits with its exit code
                                      (128+N: signal N, 127/126: failed to start, 255: lost)
  ps [--json] [--all]                 jobs with live iteration statistics
  devices [--json]                    devices, their slices and jobs
  suspend JOB | resume JOB | kill JOB [--signal N]
  slice --device D --ms N             set a device's time slice (50..250 ms)
  weight JOB W                        set a job's share of its device (slice x W)
  share DEVICE pack|slice|auto [--capacity N] [--window-ms N]
                                      a device's jobs run at once, take turns, or the
                                      measured better of the two (see docs/api.md)
  assign JOB --device D               move a job to another device of the node
  switches [--device D] [--json]      recorded hand-overs between jobs
  top [--interval MS] [--count N]     live view
  checkpoint JOB --to DIR             the job writes its state to DIR at its next boundary
  run --restore DIR -- CMD...         start CMD from the state in DIR
  migrate JOB --to NODE[:DEVICE]      move a running job to a peer node (see docs/migration.md)
  keygen --out DIR [--name N]         a CURVE key pair for authenticated TCP endpoints
  cdi generate [--output FILE]        the CDI spec (gandiva.io/gpu) that brings gandiva into
                                      containers (see docs/kubernetes.md)
cluster scheduler (docs/scheduler.md; endpoint $GANDIVA_SCHEDULER or the local socket):
  scheduler --nodes FILE --state-dir DIR [--policy P]
                                      run the scheduler over gandivad nodes (see --help)
  submit [--gpus N] [--ranks N] [--name N] [--vc VC] [--kind K] [--restartable] -- CMD...
                                      queue a job; prints its id
  queue [--all] [--job JOB] [--json]  the scheduler's jobs and where they run
  cancel JOB                          end a job (a running one is killed)
  logs JOB --scheduler [--follow]     a scheduler job's output, from its node
  wait JOB --scheduler                waits for it to end (0: finished, 130: cancelled)
  sim --trace FILE --policy P ...     replay a cluster trace (see `gandiva sim --help`)

Every node command takes --endpoint EP (default $GANDIVA_ENDPOINT or the local socket);
a tcp:// endpoint also needs --key FILE (yours) and --server-key KEY_OR_FILE (the node's).
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace gandiva::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  const Args args(argv + 2, argv + argc);
  if (cmd == "daemon") return DaemonCommand(args);
  if (cmd == "run") return RunCommand(args);
  if (cmd == "ps") return PsCommand(args);
  if (cmd == "devices") return DevicesCommand(args);
  if (cmd == "suspend" || cmd == "resume" || cmd == "kill") return JobActionCommand(cmd, args);
  if (cmd == "slice") return SliceCommand(args);
  if (cmd == "weight") return WeightCommand(args);
  if (cmd == "share") return ShareCommand(args);
  if (cmd == "assign") return AssignCommand(args);
  if (cmd == "switches") return SwitchesCommand(args);
  if (cmd == "top") return TopCommand(args);
  if (cmd == "sim") return SimCommand(args);
  if (cmd == "keygen") return KeygenCommand(args);
  if (cmd == "checkpoint") return CheckpointCommand(args);
  if (cmd == "migrate") return MigrateCommand(args);
  if (cmd == "logs") return LogsCommand(args);
  if (cmd == "wait") return WaitCommand(args);
  if (cmd == "scheduler") return SchedulerCommand(args);
  if (cmd == "submit") return SubmitCommand(args);
  if (cmd == "queue") return QueueCommand(args);
  if (cmd == "cancel") return CancelCommand(args);
  if (cmd == "cdi") return CdiCommand(args);
  std::fprintf(stderr, "gandiva: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
