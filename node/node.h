// gandivad's components, wired together: the job table, one device loop per
// device, the process monitor, the heartbeat, the migrator and the API
// dispatch. Node owns them, starts and stops them, and carries out what spans
// several of them (registering a job, ending it, moving it between devices,
// holding it), which is also what the migrator asks of it as its JobHost.
//
// Threads: the API thread (ApiServer) calls Handle; one thread per device loop
// (a loop slices one device, or several once a job spans them: JoinDevices);
// the heartbeat; the process monitor; migration workers and arrival sessions.
// Locks, in the order they may be taken: Node::mu_ (serializes changes that
// touch the job table and a device loop together, so that an exit, a move and
// a hold of the same job never interleave) -> JobTable's lock -> a DeviceLoop's
// lock. devices_mu_ guards only the map from device names to loops (a leaf). The migrator's lock is
// a leaf apart from these: it never calls out while holding it. No lock is held while waiting on a
// job, a peer or the disk.
#ifndef GANDIVA_NODE_NODE_H_
#define GANDIVA_NODE_NODE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "api/access.h"
#include "devices/device_loop.h"
#include "devices/devices.h"
#include "devices/mps_daemon.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/protocol/dispatcher.h"
#include "gandiva/status.h"
#include "jobs/boundary_watch.h"
#include "jobs/gang.h"
#include "jobs/heartbeat.h"
#include "jobs/job_log.h"
#include "jobs/job_store.h"
#include "jobs/job_table.h"
#include "jobs/launcher.h"
#include "jobs/memory_cgroups.h"
#include "jobs/process_freezer.h"
#include "jobs/process_monitor.h"
#include "migration/job_host.h"
#include "migration/migrator.h"
#include "migration/peer.h"

namespace gandiva::controller {

using protocol::Call;
using protocol::Dispatcher;
using protocol::Reply;

struct NodeOptions {
  std::string node = "node";
  std::vector<DeviceInfo> devices;
  uint64_t slice_ms = 100;
  // The share of a device's time that swapping jobs' memory at hand-overs may
  // cost; slices lengthen to keep it so (DeviceLoop::SetSwitchShare). 0: never.
  double switch_share = 0.02;
  uint64_t lease_ms = 3000;  // a parked job resumes itself after this long without heartbeat
  std::string endpoint;      // reported by hello
  size_t max_switch_records = 100000;
  std::string state_dir;  // sockets for state transfer, logs of spawned jobs
  uint64_t job_log_cap_bytes = kDefaultLogCapBytes;  // per output stream of a launched job
  protocol::CurveKeyPair node_keys;                  // this node's identity towards peers
  std::map<std::string, PeerInfo> peers;             // nodes jobs may migrate to
  std::string bulk_host = "127.0.0.1";               // arriving state: --tcp's address
  PeerFault fault = PeerFault::kNone;                // test-only fault injection (--fault)
  int peer_timeout_ms = 20000;                       // a peer silent this long has failed
  MigrationTimeouts timeouts;
  uint64_t rank_timeout_ms = 60000;  // a gang's rank that has not registered by then fails it
  bool freeze_parked = true;         // stop parked jobs' processes (ProcessFreezer)
  // --release driver: a parked GPU job releases its device memory through the driver's
  // checkpoint API instead of the shim's swap (GANDIVA_SHIM_RELEASE in its environment).
  bool release_through_driver = false;
  size_t max_jobs = 256;             // live jobs at once; more are refused (resource_exhausted)
  size_t max_jobs_per_user = 64;     // live jobs of one user (owner uid) at once; 0: no limit
  std::optional<gid_t> admin_group;  // --admin-group: its members act on every job
  // A job that has marked no iteration boundary this long after it registered
  // is reported (jobs/boundary_watch.h); 0: never.
  uint64_t boundary_wait_ms = kDefaultBoundaryWaitS * 1000;
};

inline constexpr uint32_t kMaxRanks = 64;

inline constexpr uint64_t kMinSliceMs = 50;
inline constexpr uint64_t kMaxSliceMs = 250;

// A job being registered (register_job, or one arriving by migration).
struct NewJob {
  std::string name;
  std::string device;  // empty: the least loaded
  // Several devices: the job spans them, sliced on all at once (device unused).
  std::vector<std::string> devices;
  double weight = 1.0;
  std::vector<std::string> command;
  std::string cwd;
  std::map<std::string, std::string> env;
  bool held = false;  // stays parked at its first boundary until released
  std::string migrated_from;
  uint32_t ranks = 1;      // processes of a gang, each with its own control block
  int64_t owner_uid = -1;  // the user its processes run as, when not gandivad's (-1)
  std::string managed_by;  // who owns its processes, when not gandiva ("slurm")
  // Registered from a container (another mount namespace, jobs/container_peer.h):
  // its control block is a file in the blocks directory, not in /dev/shm.
  bool in_container = false;
};

// A job gandivad starts itself (launch): the job, and what only a launch has.
struct LaunchJob {
  NewJob job;                       // its command, cwd (absolute) and whole environment
  std::string user;                 // who asked
  std::string restore;              // a checkpoint directory, or ""
  uint64_t memory_limit_bytes = 0;  // 0: none
};

class Node final : public JobHost {
 public:
  explicit Node(NodeOptions options);
  ~Node() override;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // Starts every component. With a state directory: takes it (one gandivad
  // each), opens its job table (STATE/jobs.db) and re-adopts the jobs listed
  // there that still run (node_readopt.cc).
  Status Start();
  // Resumes every parked job and stops all threads. With a state directory the
  // jobs stay adoptable: they run on, and a gandivad started again on the
  // directory manages them again. Without one they are released for good.
  void Stop();

  // Serves one API request, if its caller may make it (api/access.h); `reply`
  // is completed at once or by a worker.
  void Handle(Call call, Reply reply);

  const NodeOptions& options() const { return options_; }
  JobTable& jobs() { return jobs_; }
  const Migrator& migrator() const { return migrator_; }
  // The loop that slices the device (shared by devices joined for a job across them).
  DeviceLoop* FindDevice(const std::string& name) const;
  // The configured device of that name (options_.devices); null if none.
  const DeviceInfo* FindDeviceInfo(const std::string& name) const;
  // Every loop that runs, once each.
  std::vector<DeviceLoop*> Devices() const;
  // The node's devices, in the order they were given.
  std::vector<std::string> DeviceNames() const;
  // MPS on this node's GPUs: "running" or why not, for a device; and the
  // variables a job on `devices` must start with: on GPUs, the GPUs it may
  // see (CUDA_VISIBLE_DEVICES, in its order) and MPS's directories.
  std::string MpsStatus(const DeviceLoop& device) const;
  std::map<std::string, std::string> JobEnvironment(const std::vector<std::string>& devices) const;

  // What spans the job table and the device loops.
  StatusOr<Job> Register(NewJob job);
  // Where the control blocks of jobs in containers are (containers mount it):
  // STATE/blocks; "" without a state directory.
  const std::string& blocks_dir() const { return blocks_dir_; }
  // Registers the job and starts its process (node_launch.cc). A command that
  // cannot start gets its error, and the job is recorded as failed_to_start.
  StatusOr<Job> Launch(LaunchJob launch);
  JobLogs& logs() { return logs_; }
  // Whether launches' memory limits are enforced here, in words.
  const std::string& MemoryLimits() const { return cgroups_.status(); }
  // The process of `job` is `pid`; it is watched from now on. NotFound (and
  // the job ended, failed) if the process is gone already.
  Status SetProcess(uint64_t job, int pid, bool spawned);
  // The same for a process this daemon started (spawned), with its pidfd.
  Status SetSpawnedProcess(uint64_t job, StartedProcess process);
  void EndJob(uint64_t job, bool failed, int exit_code, ProcessEnd end);
  void EndCutShort(uint64_t job);
  Status AssignDevice(uint64_t job, const std::string& device);
  Status SetWeight(uint64_t job, double weight);
  // Whether the job is held (the device loop's slicer is the one record of it).
  bool JobHeld(const Job& job) const;
  // Suspends or resumes the job for its user: held, and kept in the job table on
  // disk so that it stays suspended across a restart (an operation's hold is not).
  void SetUserHeld(uint64_t job, bool held);
  // The job's device figures, live or frozen at its end.
  DeviceUsage UsageOf(const Job& job) const;
  // Why the job's gang failed, or "" (also for a job of one process).
  std::string GangErrorOf(const Job& job);

  // JobHost, for the migrator.
  StatusOr<MovableJob> LiveJob(int64_t job) override;
  void SetHeld(uint64_t job, bool held) override;
  bool IsHeld(uint64_t job) override;
  void MarkMigrated(uint64_t job, const std::string& to) override;
  void MarkHandedOver(uint64_t job) override;
  void EndMigrated(uint64_t job) override;
  StatusOr<Arrival> StartArrival(const ArrivingJob& job) override;
  Status MarkLoaded(uint64_t job) override;
  void MarkStarted(uint64_t job) override;
  ArrivalStage ArrivalStageOf(uint64_t job) override;
  Status KillJob(uint64_t job) override;
  Status RequestTransfer(uint64_t job, runtime::Request kind, const std::string& target) override;
  // Continues the job's processes if they were stopped while it is parked,
  // and keeps them running until it next runs: a signal for it is acted on.
  void Awaken(const Job& job);

 private:
  void OnProcessExit(uint64_t job);
  void EndJobLocked(uint64_t job, bool failed, int exit_code, ProcessEnd end);  // mu_ held
  // Starts the registered job's process with `env` (gandiva's variables added),
  // output to its log files; on a start error the job ends, failed_to_start.
  Status StartJobProcess(const Job& job, std::map<std::string, std::string> env,
                         const std::string& cgroup_dir);
  std::string PickDevice(const std::string& wanted) const;
  // `count` devices: `first` (if given) and the least loaded others.
  std::vector<std::string> PickDevices(size_t count, const std::string& first) const;
  // The job's devices, checked (known, distinct), and the loop that slices them
  // all, joining their loops into one if they are apart (mu_ held). See device_loop.h.
  StatusOr<DeviceLoop*> LoopFor(const std::vector<std::string>& devices);
  StatusOr<DeviceLoop*> JoinDevices(const std::vector<std::string>& devices);
  // The mask of `devices` among the loop's device indices.
  static uint64_t MaskOn(const DeviceLoop& loop, const std::vector<std::string>& devices);
  // The directory of control blocks of jobs in containers: STATE/blocks.
  Status OpenBlocksDir();
  // The job table on disk (node_readopt.cc).
  Status OpenStore();
  void Readopt();
  bool ReadoptOne(StoredJob stored, bool same_boot);  // false: recorded as ended
  void FlushUsage();

  const NodeOptions options_;
  std::mutex mu_;
  UniqueFd state_lock_;              // flock on STATE/gandivad.lock while this node runs
  std::string blocks_dir_;           // STATE/blocks, or "" without a state directory
  std::unique_ptr<JobStore> store_;  // null without a state directory; outlives jobs_'s use
  JobTable jobs_;
  std::unique_ptr<ProcessFreezer> freezer_;  // outlives the device loops that use it
  // Every loop made, one per device at first; a loop whose devices were joined
  // into another's is stopped and kept (a caller may still hold it), empty.
  std::vector<std::unique_ptr<DeviceLoop>> loops_;
  mutable std::shared_mutex devices_mu_;
  std::map<std::string, DeviceLoop*> devices_;       // by device name; under devices_mu_
  std::map<uint64_t, std::unique_ptr<Gang>> gangs_;  // jobs of several processes; under mu_
  ProcessMonitor monitor_;
  JobLogs logs_;
  MemoryCgroups cgroups_;         // probed by Start
  BoundaryWatch boundary_watch_;  // used by heartbeat_'s thread only
  Heartbeat heartbeat_;
  Heartbeat usage_flush_;  // device figures to the store, once a second
  Migrator migrator_;
  MpsDaemon mps_;
  Dispatcher dispatcher_;
  AccessPolicy access_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_NODE_H_
