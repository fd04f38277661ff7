// LiveCluster: topology, bookkeeping and what a policy reads (live_cluster.h).
// The node calls behind the actions are in live_cluster_actions.cc, polling
// the nodes in reconcile.cc.
#include "live/live_cluster.h"

#include <algorithm>
#include <map>

#include "gandiva/common/flags.h"
#include "gandiva/common/log.h"

namespace gandiva::sched::live {

using protocol::MessageType;

namespace {

// Ids come in increasing (submissions, and a restart's in id order): an append.
void InsertInOrder(std::vector<JobId>& ids, JobId id) {
  if (ids.empty() || ids.back() < id) {
    ids.push_back(id);
  } else {
    auto at = std::lower_bound(ids.begin(), ids.end(), id);
    if (at == ids.end() || *at != id) ids.insert(at, id);
  }
}

}  // namespace

StatusOr<LiveTopology> DiscoverTopology(NodeApi& nodes) {
  LiveTopology out;
  std::vector<GpuType> types;
  std::map<std::string, int> type_of_model;
  std::vector<Machine> machines;
  for (int n = 0; n < nodes.size(); ++n) {
    auto reply = nodes.Call(n, MessageType::kListDevices);
    if (!reply.ok()) {
      out.missing.push_back(reply.status().message());
      continue;
    }
    const auto& devices = (*reply)["devices"];
    if (devices.empty()) {
      out.missing.push_back(nodes.address(n).name + ": has no devices");
      continue;
    }
    // A machine has one GPU type: its first device's model names it.
    const std::string model =
        devices[0]["kind"].get<std::string>() + ":" + devices[0]["model"].get<std::string>();
    auto [it, added] = type_of_model.emplace(model, static_cast<int>(types.size()));
    if (added) types.push_back({model, "p100", 0, true});
    Machine m;
    m.name = nodes.address(n).name;
    m.gpu_type = it->second;
    m.num_gpus = std::min<int>(static_cast<int>(devices.size()), 64);
    machines.push_back(m);
    for (int d = 0; d < m.num_gpus; ++d)
      out.devices.push_back(
          {n, devices[d]["name"].get<std::string>(), devices[d].value("memory_bytes", int64_t{0})});
  }
  if (machines.empty())
    return Unavailable("no node answered: " +
                       (out.missing.empty() ? std::string("(none listed)") : out.missing[0]));
  out.topology = Topology::Build(std::move(types), std::move(machines));
  return out;
}

LiveCluster::LiveCluster(NodeApi* nodes, JobStore* store, LiveTopology topo,
                         LiveClusterOptions options, double epoch)
    : nodes_(nodes),
      store_(store),
      topology_(std::move(topo.topology)),
      devices_(std::move(topo.devices)),
      free_(topology_),
      options_(std::move(options)),
      epoch_(epoch),
      members_(topology_.num_gpus()),
      group_gpus_(topology_.num_gpus()),
      modes_(topology_.num_gpus(), ShareMode::kSlice),
      gpu_group_(topology_.num_gpus(), kNoGroup),
      node_up_(nodes->size(), false),
      node_last_seen_(nodes->size(), 0) {
  for (int n = 0; n < nodes_->size(); ++n) node_index_[nodes_->address(n).name] = n;
  // Nodes start up if they have devices here; Refresh confirms it.
  for (const LiveDevice& d : devices_) node_up_[d.node] = true;
  const double now = wall();
  for (int n = 0; n < nodes_->size(); ++n) node_last_seen_[n] = now;
}

double LiveCluster::Now() const { return wall() - epoch_; }

JobState LiveCluster::state(JobId job) const {
  switch (jobs_[job].record.state) {
    case LiveJobState::kValidating:  // not the policy's yet: it waits, as far as it can tell
    case LiveJobState::kQueued:
    case LiveJobState::kSuspended:
      return JobState::kPending;
    case LiveJobState::kStarting:
    case LiveJobState::kRunning:
      return JobState::kRunning;
    default:
      return JobState::kFinished;
  }
}

std::span<const GpuId> LiveCluster::gpus(JobId job) const { return jobs_[job].gpus; }

int LiveCluster::group_of(JobId job) const {
  const auto& g = jobs_[job].gpus;
  return g.empty() ? kNoGroup : gpu_group_[g.front()];
}

GroupView LiveCluster::group(int group) const {
  return {group_gpus_[group], members_[group], modes_[group]};
}

int LiveCluster::group_of_gpu(GpuId gpu) const { return gpu_group_[gpu]; }

double LiveCluster::Attained(JobId job) const {
  const Job& j = jobs_[job];
  // The current run's devices: a job resizing counts its old run's until it relaunches.
  return j.record.attained + j.device_time_s * RunDevices(j);
}

double LiveCluster::RunTime(JobId job) const {
  const Job& j = jobs_[job];
  return j.record.run_time + j.wall_time_s;
}

double LiveCluster::MeasuredRate(JobId job) const {
  const Job& j = jobs_[job];
  if (j.gpus.empty() || Moving(j) || j.resizing) return 0;
  // Until the node has learned the job's speed alone, take it as running alone.
  return j.rate.value_or(1.0);
}

bool LiveCluster::RateMeasured(JobId job) const {
  const Job& j = jobs_[job];
  return !j.gpus.empty() && !Moving(j) && !j.resizing && j.rate.has_value();
}

std::string LiveCluster::KindName(int job_type) const {
  for (const auto& [kind, type] : kind_types_)
    if (type == job_type) return kind;
  return "?";
}

bool LiveCluster::PairFitsMemory(JobId a, JobId b) const {
  const Job& ja = jobs_[a];
  const Job& jb = jobs_[b];
  const int64_t a_bytes = DeviceBytes(ja), b_bytes = DeviceBytes(jb);
  if (a_bytes == 0 || b_bytes == 0) return true;
  const std::vector<GpuId>& on = ja.gpus.empty() ? jb.gpus : ja.gpus;
  if (on.empty()) return true;
  const int64_t memory = devices_[on[0]].memory_bytes;
  return memory == 0 || a_bytes + b_bytes <= memory;
}

// A job about to start has not been measured; the jobs of its kind before it
// were (the preempting newcomer is usually such a job).
int64_t LiveCluster::DeviceBytes(const Job& j) const {
  if (j.device_bytes > 0 || j.info.job_type < 0) return j.device_bytes;
  const auto it = kind_device_bytes_.find(j.info.job_type);
  return it == kind_device_bytes_.end() ? 0 : it->second;
}

void LiveCluster::WakeAt(double t) {
  if (next_wake_ < 0 || t < next_wake_) next_wake_ = t;
}

void LiveCluster::Place(JobId job, std::span<const GpuId> gpus) {
  int group = gpu_group_[gpus.front()];
  if (group == kNoGroup) {  // a new group on free devices
    group = gpus.front();
    for (GpuId g : gpus)
      if (free_.IsFree(g)) free_.Take(std::span<const GpuId>(&g, 1));
    for (GpuId g : gpus) gpu_group_[g] = group;
    group_gpus_[group].assign(gpus.begin(), gpus.end());
    modes_[group] = ShareMode::kSlice;
  }
  members_[group].push_back(job);
  jobs_[job].gpus.assign(gpus.begin(), gpus.end());
}

void LiveCluster::Unplace(JobId job) {
  const int group = group_of(job);
  if (group == kNoGroup) return;
  auto& m = members_[group];
  m.erase(std::remove(m.begin(), m.end(), job), m.end());
  if (m.empty()) {
    for (GpuId g : group_gpus_[group]) {
      gpu_group_[g] = kNoGroup;
      // A device of a node that is down stays taken: nothing may be placed there.
      if (node_up_[devices_[g].node]) free_.Release(std::span<const GpuId>(&g, 1));
    }
    group_gpus_[group].clear();
  }
  jobs_[job].gpus.clear();
}

// Only the run columns: the submitted fields never change here (UpdateRun).
Status LiveCluster::Persist(JobId job) {
  Status s = store_->UpdateRun(jobs_[job].record);
  if (!s.ok())
    GD_LOG(kError, "job %d: could not record its state: %s", job + 1, s.ToString().c_str());
  return s;
}

void LiveCluster::KillBestEffort(int node, int64_t node_job) {
  auto r = nodes_->Call(node, protocol::MessageType::kKill, {{"job", node_job}, {"signal", 9}});
  if (!r.ok())
    GD_LOG(kWarn, "could not kill job %lld on %s: %s", static_cast<long long>(node_job),
           nodes_->address(node).name.c_str(), r.status().ToString().c_str());
}

int LiveCluster::NodeIndex(const std::string& name) const {
  auto it = node_index_.find(name);
  return it == node_index_.end() ? -1 : it->second;
}

std::vector<GpuId> LiveCluster::GpusOf(const std::string& node, const std::string& devices) const {
  std::vector<GpuId> out;
  for (const std::string& name : SplitList(devices)) {
    GpuId found = -1;
    for (GpuId g = 0; g < static_cast<GpuId>(devices_.size()) && found < 0; ++g)
      if (devices_[g].name == name && nodes_->address(devices_[g].node).name == node) found = g;
    if (found < 0) return {};
    out.push_back(found);
  }
  return out;
}

void LiveCluster::KeepRunService(JobId job) {
  Job& j = jobs_[job];
  j.record.attained = Attained(job);  // before the record's device changes (RunDevices)
  j.record.run_time = RunTime(job);
  j.device_time_s = j.wall_time_s = 0;
}

int LiveCluster::RunDevices(const Job& j) {
  const std::string& d = j.record.device;
  return d.empty() ? j.info.num_gpus : 1 + static_cast<int>(std::count(d.begin(), d.end(), ','));
}

size_t LiveCluster::JobsOnDevice(GpuId gpu) const {
  return gpu_group_[gpu] == kNoGroup ? 0 : members_[gpu_group_[gpu]].size();
}

std::string LiveCluster::DeviceText(std::span<const GpuId> gpus) const {
  std::string text;
  for (GpuId g : gpus) text += (text.empty() ? "" : ",") + devices_[g].name;
  return text;
}

Status LiveCluster::CheckPlacement(JobId job, std::span<const GpuId> gpus) const {
  if (gpus.size() != static_cast<size_t>(jobs_[job].info.num_gpus))
    return InvalidArgument("job " + std::to_string(job + 1) + " takes " +
                           std::to_string(jobs_[job].info.num_gpus) + " device(s), not " +
                           std::to_string(gpus.size()));
  return CheckDevices(gpus);
}

Status LiveCluster::CheckDevices(std::span<const GpuId> gpus) const {
  if (gpus.empty()) return InvalidArgument("no devices");
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] < 0 || gpus[i] >= topology_.num_gpus()) return InvalidArgument("no such device");
    if (devices_[gpus[i]].node != devices_[gpus[0]].node)
      return InvalidArgument("a live job's devices must be on one node");
    if (std::find(gpus.begin(), gpus.begin() + i, gpus[i]) != gpus.begin() + i)
      return InvalidArgument("a device is given twice");
  }
  if (!node_up_[devices_[gpus[0]].node]) return Unavailable("the devices' node is down");
  return Status::Ok();
}

std::string LiveCluster::LaunchName(const Job& job) const {
  return job.record.name + ".s" + std::to_string(job.record.id) + ".a" +
         std::to_string(job.record.attempt);
}

JobId LiveCluster::Admit(const JobRecord& record) {
  const JobId id = static_cast<JobId>(record.id - 1);
  if (static_cast<size_t>(id) >= jobs_.size()) jobs_.resize(id + 1);
  Job& j = jobs_[id];
  j.record = record;
  j.info.id = id;
  j.info.submit_time = record.submit_time - epoch_;
  j.info.num_gpus = record.gpus;
  j.info.restartable = record.restartable;
  if (!record.kind.empty())
    j.info.job_type =
        kind_types_.try_emplace(record.kind, static_cast<int>(kind_types_.size())).first->second;
  j.pending_since = record.submit_time - epoch_;
  if (record.state == LiveJobState::kQueued) waiting_.push_back(id);
  if (!IsEnded(record.state)) InsertInOrder(live_, id);
  if (record.state == LiveJobState::kValidating) InsertInOrder(validating_, id);
  return id;
}

StatusOr<std::vector<JobId>> LiveCluster::Recover() {
  GD_ASSIGN_OR_RETURN(auto records, store_->List(/*include_ended=*/true));
  const NodeReports reports = PollNodes();
  const protocol::Json kNoJobs = protocol::Json::array();
  std::vector<JobId> arrived;
  for (const JobRecord& r : records) {
    const JobId id = Admit(r);  // a queued one waits for TakeArrivals
    const int n = NodeIndex(r.node);
    const bool answered = n >= 0 && reports[n].ok();
    const protocol::Json& node_jobs = answered ? (*reports[n])["jobs"] : kNoJobs;
    switch (r.state) {
      case LiveJobState::kValidating:
        AdoptValidation(id, node_jobs, answered);
        break;
      case LiveJobState::kStarting:
      case LiveJobState::kRunning:
      case LiveJobState::kSuspended: {
        // The policy hears of it as it would have: running, or parked and
        // waiting, or queued again (then through TakeArrivals).
        jobs_[id].offered = true;
        if (r.move)
          AdoptMove(id);
        else
          AdoptOrRequeue(id, node_jobs, answered);
        if (jobs_[id].record.state == LiveJobState::kQueued) {
          jobs_[id].offered = false;
          waiting_.push_back(id);
        }
        if (jobs_[id].record.state == LiveJobState::kSuspended) arrived.push_back(id);
        break;
      }
      default:
        break;
    }
  }
  return arrived;
}

StatusOr<bool> LiveCluster::Cancel(JobId job) {
  if (job < 0 || job >= num_jobs() || jobs_[job].record.id == 0)
    return NotFound("no job " + std::to_string(job + 1));
  Job& j = jobs_[job];
  switch (j.record.state) {
    case LiveJobState::kQueued: {
      // The policy is told only if it knew the job (not while it waits to retry).
      const bool offered = j.offered;
      j.offered = false;
      Finish(job, LiveJobState::kCancelled, -1, "cancelled before it started");
      return offered;
    }
    case LiveJobState::kValidating:
      if (j.record.node.empty()) {
        Finish(job, LiveJobState::kCancelled, -1, "cancelled before its validation run");
        return false;
      }
      break;
    case LiveJobState::kFinished:
    case LiveJobState::kFailed:
    case LiveJobState::kCancelled:
      return FailedPrecondition("job " + std::to_string(job + 1) + " has ended already");
    default:
      break;
  }
  j.record.cancel_requested = true;
  GD_RETURN_IF_ERROR(Persist(job));
  // SIGKILL: it ends whether it runs or is parked (and stopped) on its node.
  const int n = NodeIndex(j.record.node);
  if (n >= 0 && j.record.node_job > 0) KillBestEffort(n, j.record.node_job);
  return false;
}

}  // namespace gandiva::sched::live
