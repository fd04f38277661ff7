// The node controller's core: the job table, one time-slicing loop per device,
// the heartbeat that keeps parked jobs' leases alive, exit detection, and the
// API handlers. Transport-free: ApiServer feeds it decoded requests.
//
// Threads: the API thread calls Handle(); one DeviceLoop thread per device; a
// heartbeat thread; a process-monitor thread (pidfd + epoll). All shared state
// is guarded by mu_. Nothing blocks on a job while holding mu_.
#ifndef GANDIVA_CONTROLLER_CONTROLLER_H_
#define GANDIVA_CONTROLLER_CONTROLLER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "devices.h"
#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/status.h"
#include "job.h"
#include "slicer.h"

namespace gandiva::controller {

// A node this one may migrate jobs to: its TCP endpoint and public key.
struct Peer {
  std::string name;
  std::string endpoint;
  std::string public_key;
};

// Reads a peers file: one "NAME tcp://HOST:PORT PUBLIC_KEY_OR_FILE" per line.
StatusOr<std::map<std::string, Peer>> ReadPeers(const std::string& file);

struct ControllerOptions {
  std::string node = "node";
  std::vector<DeviceInfo> devices;
  uint64_t slice_ms = 100;
  uint64_t lease_ms = 3000;  // a parked job resumes itself after this long without heartbeat
  std::string endpoint;      // reported by hello
  size_t max_switch_records = 100000;
  std::string state_dir;              // sockets for state transfer, logs of spawned jobs
  protocol::CurveKeyPair node_keys;   // this node's identity towards peers
  std::map<std::string, Peer> peers;  // nodes jobs may migrate to
  std::string fault;                  // test-only fault injection, e.g. "corrupt-chunk"
  int peer_timeout_ms = 20000;        // a peer silent this long has failed
};

inline constexpr uint64_t kMinSliceMs = 50;
inline constexpr uint64_t kMaxSliceMs = 250;

// One hand-over on a device: `from` parked at at_ns, `to` started running
// handover_ns later.
struct SwitchRecord {
  std::string device;
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t at_ns = 0;
  uint64_t handover_ns = 0;
};

class Controller {
 public:
  explicit Controller(ControllerOptions options);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  Status Start();
  // Resumes every parked job for good (they run on unmanaged), stops all threads.
  void Stop();

  // Serves one API request; the reply's fields or an error for the client.
  StatusOr<protocol::Json> Handle(const protocol::Request& request);

 private:
  struct Device {
    DeviceInfo info;
    Slicer slicer;
    std::condition_variable wake;
    std::thread thread;
    std::deque<SwitchRecord> switches;
    uint64_t switch_count = 0;
    // The last park seen, and a resume that followed it whose start is not yet known.
    uint64_t last_parked_job = 0;
    uint64_t last_parked_at_ns = 0;
    std::optional<SwitchRecord> pending_switch;
    Device(DeviceInfo i, uint64_t slice_ns) : info(std::move(i)), slicer(slice_ns, info.capacity) {}
  };

  using Json = protocol::Json;
  StatusOr<Json> Hello();
  StatusOr<Json> ListDevices();
  StatusOr<Json> ListJobs(const Json& req);
  StatusOr<Json> RegisterJob(const Json& req);
  StatusOr<Json> JobStarted(const Json& req);
  StatusOr<Json> JobExited(const Json& req);
  StatusOr<Json> Suspend(const Json& req);
  StatusOr<Json> Resume(const Json& req);
  StatusOr<Json> Kill(const Json& req);
  StatusOr<Json> SetSlice(const Json& req);
  StatusOr<Json> SetWeight(const Json& req);
  StatusOr<Json> AssignDevice(const Json& req);
  StatusOr<Json> ListSwitches(const Json& req);
  // Checkpoint and migration (controller_migration.cc). Those that wait on a
  // job take mu_ themselves and never hold it while waiting.
  StatusOr<Json> Checkpoint(const Json& req);
  StatusOr<Json> Migrate(const Json& req);
  StatusOr<Json> MigratePrepare(const Json& req);
  StatusOr<Json> MigrateBegin(const Json& req);
  StatusOr<Json> MigrateChunk(const Json& req, std::string_view payload);
  StatusOr<Json> MigrateCommit(const Json& req);
  StatusOr<Json> MigrateStart(const Json& req);
  StatusOr<Json> MigrateAbort(const Json& req);
  void RunCheckpoint(uint64_t job, std::string dir);
  void RunMigration(uint64_t job, Peer peer, std::string device);
  Status MigrateOut(uint64_t job, const Peer& peer, const std::string& device,
                    uint64_t* remote_job);
  // Holds the job parked (slicer hold) and waits for it; returns when it parked.
  StatusOr<uint64_t> HoldAndPark(uint64_t job, uint64_t timeout_ns);
  void ReleaseHold(uint64_t job);
  void UpdateOperation(uint64_t job, const std::function<void(Operation&)>& update);
  // Marks the job's operation done, or failed with the status's message.
  void FinishOperation(uint64_t job, const Status& result);
  std::string TransferSocketPath(const char* role, uint64_t job);
  void StartWorker(std::function<void()> work);

  // All below: mu_ held.
  StatusOr<Job*> LiveJob(const Json& req);
  Job* FindJob(uint64_t id);
  Device* FindDevice(const std::string& name);
  Json JobToJson(const Job& job) const;
  // Holds a job parked (a user's suspend, a checkpoint, a migration) or lets
  // it queue for its device again.
  void SetHeld(Job& job, bool held);
  void EndJob(Job& job, bool failed, int exit_code);
  // Watches the job's process (pidfd) so its exit is noticed; ends the job if it is gone.
  Status WatchProcess(Job& job);
  void CompletePendingSwitch(Device& dev);
  uint64_t ResidentBytes(const Device& dev) const;
  // Lets the job next in line spin-wait for its resume (see runtime::PreWake).
  void PreWakeNext(const Device& dev, const Job& outgoing);
  // Whether `outgoing`, being suspended, must take its memory off the device.
  bool MustSwapOut(const Device& dev, const Job& outgoing);

  void DeviceLoop(Device* dev);
  void HeartbeatLoop();
  void MonitorLoop();

  ControllerOptions options_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Device>> devices_;
  std::map<uint64_t, std::unique_ptr<Job>> jobs_;
  uint64_t next_job_id_ = 1;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  std::condition_variable heartbeat_wake_;
  std::thread heartbeat_thread_;
  std::thread monitor_thread_;
  std::vector<std::thread> workers_;  // checkpoint and migration operations
  uint64_t transfer_seq_ = 0;
  int epoll_fd_ = -1;
  int stop_event_fd_ = -1;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_CONTROLLER_CONTROLLER_H_
