// Checkpoint and migration, the controller's side: hold the job parked at a
// boundary, have it write its state (to a file, or through a Unix socket to us),
// stream that to the destination controller, which has already started and
// warmed the job and feeds the stream to it. Nothing is lost on failure: the
// source keeps its job parked until the destination reports the state loaded,
// and resumes it if anything fails before then.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "controller.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/environment.h"
#include "peer_link.h"
#include "process_spawn.h"
#include "unix_socket.h"

namespace gandiva::controller {

using protocol::MessageType;
using runtime::ControlBlock;
using Json = protocol::Json;

namespace {
constexpr size_t kChunkBytes = 4 << 20;  // one frame on the wire
constexpr int kWindow = 4;               // chunks in flight to the destination
}  // namespace

StatusOr<std::map<std::string, Peer>> ReadPeers(const std::string& file) {
  std::ifstream in(file);
  if (!in) return NotFound("cannot read peers file " + file);
  std::map<std::string, Peer> peers;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    // '#' is also a Z85 character: only a line that starts with it is a comment.
    if (auto first = line.find_first_not_of(" \t");
        first != std::string::npos && line[first] == '#')
      continue;
    std::istringstream words(line);
    Peer p;
    std::string key;
    if (!(words >> p.name)) continue;
    if (!(words >> p.endpoint >> key) || p.endpoint.rfind("tcp://", 0) != 0)
      return InvalidArgument(file + ":" + std::to_string(n) +
                             ": expected NAME tcp://HOST:PORT PUBLIC_KEY");
    auto pub = protocol::ReadCurvePublicKey(key);
    if (!pub.ok())
      return InvalidArgument(file + ":" + std::to_string(n) + ": " + pub.status().message());
    p.public_key = *pub;
    peers[p.name] = p;
  }
  return peers;
}

std::string Controller::TransferSocketPath(const char* role, uint64_t job) {
  std::lock_guard lock(mu_);
  return options_.state_dir + "/xfer-" + role + "-" + std::to_string(job) + "-" +
         std::to_string(++transfer_seq_) + ".sock";
}

void Controller::StartWorker(std::function<void()> work) {
  std::lock_guard lock(mu_);
  workers_.emplace_back(std::move(work));
}

void Controller::UpdateOperation(uint64_t job, const std::function<void(Operation&)>& update) {
  std::lock_guard lock(mu_);
  Job* j = FindJob(job);
  if (j && j->operation) update(*j->operation);
}

void Controller::FinishOperation(uint64_t job, const Status& result) {
  UpdateOperation(job, [&](Operation& op) {
    op.state = result.ok() ? "done" : "failed";
    op.step = "";
    op.error = result.ok() ? "" : result.ToString();
    op.finished_ns = MonotonicNowNs();
  });
}

StatusOr<uint64_t> Controller::HoldAndPark(uint64_t id, uint64_t timeout_ns) {
  ControlBlock* cb = nullptr;
  const uint64_t asked = MonotonicNowNs();
  {
    std::lock_guard lock(mu_);
    Job* job = FindJob(id);
    if (!job || job->ended) return FailedPrecondition("job " + std::to_string(id) + " has ended");
    SetHeld(*job, true);
    cb = job->cb();
  }
  const uint64_t deadline = asked + timeout_ns;
  for (;;) {
    const uint32_t phase = cb->phase.load(std::memory_order_acquire);
    if (phase == runtime::kPhaseParked) break;
    if (phase == runtime::kPhaseExited) return FailedPrecondition("the job exited");
    if (stopping_) return Unavailable("the controller is stopping");
    const uint64_t now = MonotonicNowNs();
    if (now >= deadline) return DeadlineExceeded("the job reached no iteration boundary in time");
    runtime::FutexWait(&cb->phase, phase, std::min<uint64_t>(deadline - now, 100 * kMs));
  }
  // Downtime starts when the job stopped training for us, not earlier if it was queued.
  return std::max(cb->parked_at_ns.load(std::memory_order_relaxed), asked);
}

void Controller::ReleaseHold(uint64_t id) {
  std::lock_guard lock(mu_);
  Job* job = FindJob(id);
  if (!job || job->ended) return;
  SetHeld(*job, false);
}

// ------------------------------------------------------------ checkpoint

StatusOr<Json> Controller::Checkpoint(const Json& req) {
  const std::string dir = req.at("dir").get<std::string>();
  if (dir.empty() || dir[0] != '/')
    return InvalidArgument("checkpoint dir must be an absolute path");
  if (dir.size() > runtime::kTransferTargetSize - 32)
    return InvalidArgument("checkpoint dir path too long");
  std::lock_guard lock(mu_);
  GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
  if (job->operation && job->operation->state == "running")
    return FailedPrecondition("job " + std::to_string(job->id) +
                              " is busy: " + job->operation->kind);
  job->operation =
      Operation{"checkpoint", "running", "parking", "", dir, 0, 0, 0, MonotonicNowNs(), 0};
  const uint64_t id = job->id;
  workers_.emplace_back([this, id, dir] { RunCheckpoint(id, dir); });
  return Json::object();
}

void Controller::RunCheckpoint(uint64_t id, std::string dir) {
  auto finish = [&](const Status& s, uint64_t bytes) {
    UpdateOperation(id, [&](Operation& op) { op.bytes = bytes; });
    FinishOperation(id, s);
    if (s.ok())
      GD_LOG(kInfo, "job %llu checkpointed to %s (%llu bytes)", (unsigned long long)id, dir.c_str(),
             (unsigned long long)bytes);
    else
      GD_LOG(kWarn, "checkpoint of job %llu failed: %s", (unsigned long long)id,
             s.ToString().c_str());
  };
  auto parked = HoldAndPark(id, 120'000 * kMs);
  if (!parked.ok()) {
    ReleaseHold(id);
    return finish(parked.status(), 0);
  }
  ControlBlock* cb;
  {
    std::lock_guard lock(mu_);
    cb = FindJob(id)->cb();
    FindJob(id)->operation->step = "writing";
  }
  const std::string target = "file:" + dir + "/state.gdck";
  runtime::RequestTransfer(cb, runtime::kRequestCheckpoint, target.c_str());
  auto state = runtime::WaitForTransfer(cb, 600'000 * kMs);
  Status s = state == runtime::kTransferDone ? Status::Ok()
             : state == runtime::kTransferFailed
                 ? Internal(std::string(cb->transfer_error))
                 : DeadlineExceeded("the job did not finish its checkpoint");
  ReleaseHold(id);
  finish(s, cb->transfer_bytes.load());
}

// ------------------------------------------------------------ migration, source side

StatusOr<Json> Controller::Migrate(const Json& req) {
  const std::string to = req.at("to").get<std::string>();
  std::lock_guard lock(mu_);
  GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
  auto peer = options_.peers.find(to);
  if (peer == options_.peers.end()) return NotFound("no peer node '" + to + "' (see --peers)");
  if (options_.node_keys.secret_key.empty())
    return FailedPrecondition("this node has no key (--key): it cannot authenticate to peers");
  if (job->pid <= 0)
    return FailedPrecondition("job " + std::to_string(job->id) + " has no process yet");
  if (job->operation && job->operation->state == "running")
    return FailedPrecondition("job " + std::to_string(job->id) +
                              " is busy: " + job->operation->kind);
  job->operation =
      Operation{"migrate", "running", "preparing", "", to, 0, 0, 0, MonotonicNowNs(), 0};
  const uint64_t id = job->id;
  const std::string device = req.value("device", "");
  workers_.emplace_back([this, id, p = peer->second, device] { RunMigration(id, p, device); });
  return Json::object();
}

void Controller::RunMigration(uint64_t id, Peer peer, std::string device) {
  uint64_t remote = 0;
  Status s = MigrateOut(id, peer, device, &remote);  // sets op.to_job as soon as it is known
  FinishOperation(id, s);
  if (s.ok()) {
    GD_LOG(kInfo, "job %llu migrated to %s as job %llu", (unsigned long long)id, peer.name.c_str(),
           (unsigned long long)remote);
  } else {
    GD_LOG(kWarn, "migration of job %llu to %s failed: %s", (unsigned long long)id,
           peer.name.c_str(), s.ToString().c_str());
  }
}

Status Controller::MigrateOut(uint64_t id, const Peer& peer, const std::string& device,
                              uint64_t* remote_job) {
  const protocol::CurveClientKeys keys{options_.node_keys, peer.public_key};
  auto step = [&](const char* what) {
    UpdateOperation(id, [&](Operation& op) { op.step = what; });
  };
  Json prepare;
  ControlBlock* cb = nullptr;
  int pid = 0;
  {
    std::lock_guard lock(mu_);
    Job* job = FindJob(id);
    if (!job || job->ended) return FailedPrecondition("the job ended");
    Json env = Json::object();
    for (const auto& [k, v] : job->env) env[k] = v;
    prepare = {{"name", job->name}, {"command", job->command}, {"cwd", job->cwd},
               {"env", env},        {"weight", job->weight},   {"source_node", options_.node},
               {"source_job", id}};
    if (!device.empty()) prepare["device"] = device;
    cb = job->cb();
    pid = job->pid;
  }

  // 1. The destination starts the job and lets it warm up to its first boundary.
  PeerLink link(peer.endpoint, keys, options_.peer_timeout_ms);
  auto prepared = link.Call(MessageType::kMigratePrepare, prepare);
  if (!prepared.ok())
    return Status(prepared.status().code(), peer.name + ": " + prepared.status().message());
  const uint64_t rid = (*prepared)["job"].get<uint64_t>();
  *remote_job = rid;
  UpdateOperation(id, [&](Operation& op) { op.to_job = rid; });
  bool source_held = false;
  auto abort = [&](const Status& why) {
    PeerLink fresh(peer.endpoint, keys, 3000);  // the old link may be the broken part
    auto r = fresh.Call(MessageType::kMigrateAbort, {{"job", rid}});
    if (!r.ok())
      GD_LOG(kWarn, "could not tell %s to drop job %llu: %s", peer.name.c_str(),
             (unsigned long long)rid, r.status().ToString().c_str());
    if (source_held) ReleaseHold(id);  // the job trains on here, from where it stopped
    return why;
  };
  step("warming");
  for (const uint64_t deadline = MonotonicNowNs() + 180'000 * kMs;;) {
    auto jobs = link.Call(MessageType::kListJobs, {{"job", rid}});
    if (!jobs.ok()) return abort(jobs.status());
    const std::string state = (*jobs)["jobs"][0]["state"].get<std::string>();
    if (state == "suspended") break;
    if (state == "exited" || state == "failed")
      return abort(
          FailedPrecondition("the job's copy on " + peer.name + " " + state + " while starting"));
    if (stopping_ || MonotonicNowNs() > deadline)
      return abort(DeadlineExceeded("the destination did not warm up"));
    usleep(20'000);
  }

  // 2. Park the source at a boundary: downtime starts here.
  step("parking");
  source_held = true;
  auto parked = HoldAndPark(id, 120'000 * kMs);
  if (!parked.ok()) return abort(parked.status());
  const uint64_t t0 = *parked;

  // 3. The source writes its state to us; we stream it on.
  step("streaming");
  auto listener = UnixListener::Listen(TransferSocketPath("out", id));
  if (!listener.ok()) return abort(listener.status());
  const std::string target = "unix:" + (*listener)->path();
  runtime::RequestTransfer(cb, runtime::kRequestCheckpoint, target.c_str());
  auto begun = link.Call(MessageType::kMigrateBegin, {{"job", rid}});
  if (!begun.ok()) return abort(begun.status());
  auto conn = (*listener)->Accept(30'000);
  if (!conn.ok()) return abort(conn.status());
  std::string buf;
  uint64_t seq = 0, bytes = 0;
  for (bool eof = false; !eof;) {
    buf.resize(kChunkBytes);
    size_t filled = 0;
    while (filled < kChunkBytes) {
      auto n = ReadSome(conn->get(), buf.data() + filled, kChunkBytes - filled, 30'000);
      if (!n.ok()) return abort(n.status());
      if (*n == 0) {
        eof = true;
        break;
      }
      filled += *n;
    }
    if (filled == 0) break;
    buf.resize(filled);
    if (options_.fault == "corrupt-chunk" && seq == 0) buf[filled / 2] ^= 0x40;  // test-only
    if (Status st = link.Send(MessageType::kMigrateChunk, {{"job", rid}, {"seq", seq}}, buf);
        !st.ok())
      return abort(st);
    ++seq;
    bytes += filled;
    while (link.outstanding() >= kWindow || (eof && link.outstanding() > 0)) {
      auto ack = link.Receive();
      if (!ack.ok()) return abort(ack.status());
    }
  }
  while (link.outstanding() > 0) {
    auto ack = link.Receive();
    if (!ack.ok()) return abort(ack.status());
  }
  auto written = runtime::WaitForTransfer(cb, 30'000 * kMs);
  if (written != runtime::kTransferDone)
    return abort(Internal("the job could not write its state: " + std::string(cb->transfer_error)));
  UpdateOperation(id, [&](Operation& op) { op.bytes = bytes; });

  // 4. The destination verifies every chunk and loads the state into the warm job.
  step("restoring");
  auto committed = link.Call(MessageType::kMigrateCommit, {{"job", rid}});
  if (!committed.ok())
    return abort(
        Status(committed.status().code(), peer.name + ": " + committed.status().message()));

  // 5. The state is safe there: end the source, then let the destination run.
  //    Never both running: the source is gone before the copy starts.
  step("switching");
  {
    std::lock_guard lock(mu_);
    Job* job = FindJob(id);
    job->migrated = true;  // before the kill, so its exit reads as the move it is
    job->held = false;
  }
  // SIGKILL takes a parked, held process with it before it could run another
  // instruction of training, so the destination may start at once; the source's
  // teardown (~0.1 s for a large job) is off the downtime.
  kill(pid, SIGKILL);
  auto started = link.Call(MessageType::kMigrateStart, {{"job", rid}});
  const double downtime_ms = (MonotonicNowNs() - t0) / 1e6;
  {
    std::lock_guard lock(mu_);
    Job* job = FindJob(id);
    if (!job->ended) EndJob(*job, false, 0);
  }
  if (!started.ok())
    return Status(started.status().code(),
                  "the state is on " + peer.name + " (job " + std::to_string(rid) +
                      ", parked) but it did not start: " + started.status().message());
  UpdateOperation(id, [&](Operation& op) { op.downtime_ms = downtime_ms; });
  return Status::Ok();
}

// ------------------------------------------------------------ migration, destination side

StatusOr<Json> Controller::MigratePrepare(const Json& req) {
  std::lock_guard lock(mu_);
  Json reg = {{"command", req.at("command")},
              {"name", req.at("name")},
              {"cwd", req.at("cwd")},
              {"env", req.at("env")}};
  if (req.contains("device")) reg["device"] = req["device"];
  if (req.contains("weight")) reg["weight"] = req["weight"];
  GD_ASSIGN_OR_RETURN(Json registered, RegisterJob(reg));
  Job* job = FindJob(registered["job"].get<uint64_t>());
  // Held: it parks at its first boundary (warm) and stays there until the state is in;
  // should this controller die meanwhile, the copy exits rather than train from scratch.
  SetHeld(*job, true);
  job->cb()->exit_if_orphaned.store(1);
  job->migrated_from = req.at("source_node").get<std::string>() + "/" +
                       std::to_string(req.at("source_job").get<uint64_t>());
  std::map<std::string, std::string> env = job->env;
  env.erase("GANDIVA_RESTORE");
  env[runtime::kEnvControlBlock] = job->block->name();
  env[runtime::kEnvJobId] = std::to_string(job->id);
  env[runtime::kEnvEndpoint] = options_.endpoint;
  const std::string log_path = options_.state_dir + "/job-" + std::to_string(job->id) + ".log";
  auto pid = SpawnProcess(job->command, env, job->cwd, log_path);
  if (!pid.ok()) {
    EndJob(*job, true, 127);
    return pid.status();
  }
  job->pid = *pid;
  job->spawned = true;
  GD_RETURN_IF_ERROR(WatchProcess(*job));
  GD_LOG(kInfo, "job %llu arriving from %s: started pid %d (log %s)", (unsigned long long)job->id,
         job->migrated_from.c_str(), job->pid, log_path.c_str());
  return Json{{"job", job->id}, {"log", log_path}};
}

StatusOr<Json> Controller::MigrateBegin(const Json& req) {
  ControlBlock* cb = nullptr;
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
    if (job->migrated_from.empty() || !job->held)
      return FailedPrecondition("job is not arriving by migration");
    if (job->cb()->phase.load() != runtime::kPhaseParked)
      return FailedPrecondition("job is not warm yet");
    if (job->incoming_fd >= 0) return FailedPrecondition("job is already receiving state");
    cb = job->cb();
    id = job->id;
  }
  GD_ASSIGN_OR_RETURN(auto listener, UnixListener::Listen(TransferSocketPath("in", id)));
  const std::string target = "unix:" + listener->path();
  runtime::RequestTransfer(cb, runtime::kRequestRestore, target.c_str());
  GD_ASSIGN_OR_RETURN(UniqueFd conn, listener->Accept(10'000));
  std::lock_guard lock(mu_);
  Job* job = FindJob(id);
  if (!job || job->ended) return FailedPrecondition("the job ended");
  job->incoming_fd = conn.Release();
  job->incoming_seq = 0;
  return Json::object();
}

StatusOr<Json> Controller::MigrateChunk(const Json& req, std::string_view payload) {
  int fd = -1;
  {
    std::lock_guard lock(mu_);
    GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
    if (job->incoming_fd < 0) return FailedPrecondition("job is not receiving state");
    const uint64_t seq = req.at("seq").get<uint64_t>();
    if (seq != job->incoming_seq)
      return InvalidArgument("chunk " + std::to_string(seq) + " out of order; expected " +
                             std::to_string(job->incoming_seq));
    ++job->incoming_seq;
    fd = job->incoming_fd;
  }
  // The API thread is the only writer of this fd; the job reads it as fast as it can.
  GD_RETURN_IF_ERROR(WriteAll(fd, payload.data(), payload.size(), 30'000));
  return Json::object();
}

StatusOr<Json> Controller::MigrateCommit(const Json& req) {
  ControlBlock* cb = nullptr;
  {
    std::lock_guard lock(mu_);
    GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
    if (job->incoming_fd < 0) return FailedPrecondition("job is not receiving state");
    shutdown(job->incoming_fd, SHUT_WR);  // end of stream
    close(job->incoming_fd);
    job->incoming_fd = -1;
    cb = job->cb();
  }
  const auto state = runtime::WaitForTransfer(cb, 120'000 * kMs);
  if (state == runtime::kTransferDone) return Json{{"bytes", cb->transfer_bytes.load()}};
  if (state == runtime::kTransferFailed)
    return DataLoss("the job could not load the state: " + std::string(cb->transfer_error));
  return DeadlineExceeded("the job did not finish loading its state");
}

StatusOr<Json> Controller::MigrateStart(const Json& req) {
  ControlBlock* cb = nullptr;
  {
    std::lock_guard lock(mu_);
    GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
    if (job->migrated_from.empty()) return FailedPrecondition("job did not arrive by migration");
    SetHeld(*job, false);
    cb = job->cb();
    cb->exit_if_orphaned.store(0);  // it holds the job's state now: it is the job
  }
  // Reply once it runs (or has queued behind the device's other jobs).
  runtime::WaitForPhase(cb, runtime::kPhaseRunning, 2'000 * kMs);
  return Json{{"state", cb->phase.load() == runtime::kPhaseRunning ? "running" : "queued"}};
}

StatusOr<Json> Controller::MigrateAbort(const Json& req) {
  std::lock_guard lock(mu_);
  Job* job = FindJob(req.at("job").get<uint64_t>());
  if (!job) return NotFound("no job " + req.at("job").dump());
  if (job->incoming_fd >= 0) {
    close(job->incoming_fd);
    job->incoming_fd = -1;
  }
  if (!job->ended && job->pid > 0) kill(job->pid, SIGKILL);
  GD_LOG(kInfo, "migration of job %llu aborted by its source", (unsigned long long)job->id);
  return Json::object();
}

}  // namespace gandiva::controller
