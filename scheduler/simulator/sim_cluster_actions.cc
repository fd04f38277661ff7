// The cluster actions policies take on the simulated cluster (Start, Suspend,
// Migrate, Resize, SetShareMode), the GPU groups they form, and the
// allocation invariants they keep.
#include <algorithm>
#include <bit>
#include <iterator>

#include "gandiva/scheduler/sim_cluster.h"

namespace gandiva::sched {
namespace {

// *out: in, sorted. False if a GPU appears twice.
bool SortedDistinct(std::span<const GpuId> in, std::vector<GpuId>* out) {
  out->assign(in.begin(), in.end());
  std::sort(out->begin(), out->end());
  return std::adjacent_find(out->begin(), out->end()) == out->end();
}

}  // namespace

void SimCluster::LogAction(uint64_t what, int64_t subject, std::span<const GpuId> gpus) {
  uint64_t& h = result_.actions_digest;
  auto add = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ULL;  // FNV-1a
    }
  };
  add(std::bit_cast<uint64_t>(now_));
  add(what);
  add(static_cast<uint64_t>(subject));
  add(gpus.size());
  for (GpuId x : gpus) add(static_cast<uint64_t>(x));
}

Status SimCluster::CheckRunning(JobId j) const {
  if (j < 0 || j >= num_jobs() || jobs_[j].state != JobState::kRunning)
    return FailedPrecondition("job " + std::to_string(j) + " is not running");
  return Status::Ok();
}

int SimCluster::NewGroup(std::span<const GpuId> gpus) {
  int g;
  if (!free_groups_.empty()) {
    g = free_groups_.back();
    free_groups_.pop_back();
  } else {
    g = static_cast<int>(groups_.size());
    groups_.emplace_back();
  }
  Group& gr = groups_[g];
  gr.gpus.assign(gpus.begin(), gpus.end());
  gr.members.clear();
  gr.mode = ShareMode::kSlice;
  for (GpuId x : gpus) gpu_group_[x] = g;
  free_.Take(gpus);
  allocated_now_ += gpus.size();
  return g;
}

void SimCluster::LeaveGroup(JobId j) {
  Job& job = jobs_[j];
  int g = job.group;
  Group& gr = groups_[g];
  gr.members.erase(std::find(gr.members.begin(), gr.members.end(), j));
  job.group = kNoGroup;
  job.gpus.clear();
  if (gr.members.empty()) {
    free_.Release(gr.gpus);
    for (GpuId x : gr.gpus) gpu_group_[x] = kNoGroup;
    allocated_now_ -= gr.gpus.size();
    gr.gpus.clear();
    free_groups_.push_back(g);
  } else {
    RecomputeGroup(g);
  }
}

Status SimCluster::Start(JobId j, std::span<const GpuId> gpus_in) {
  if (j < 0 || j >= num_jobs()) return InvalidArgument("no job " + std::to_string(j));
  Job& job = jobs_[j];
  if (job.state != JobState::kPending)
    return FailedPrecondition("job " + std::to_string(j) + " is not pending");
  if (static_cast<int>(gpus_in.size()) != job.info.num_gpus)
    return InvalidArgument("job " + std::to_string(j) + " needs " +
                           std::to_string(job.info.num_gpus) + " GPUs, got " +
                           std::to_string(gpus_in.size()));
  std::vector<GpuId> gpus;
  if (!SortedDistinct(gpus_in, &gpus)) return InvalidArgument("duplicate GPU");
  for (GpuId x : gpus) {
    if (x < 0 || x >= topo_.num_gpus()) return InvalidArgument("no GPU " + std::to_string(x));
    if (job.info.gpu_type >= 0 && topo_.gpu_type_of(x) != job.info.gpu_type)
      return InvalidArgument("job " + std::to_string(j) + " requires GPU type " +
                             topo_.gpu_types()[job.info.gpu_type].name);
  }
  int g = gpu_group_[gpus[0]];
  if (g == kNoGroup) {
    for (GpuId x : gpus)
      if (gpu_group_[x] != kNoGroup)
        return FailedPrecondition("GPUs partly busy: a job joins a whole group or free GPUs");
    g = NewGroup(gpus);
  } else {
    if (groups_[g].gpus != gpus) return FailedPrecondition("GPUs are not exactly one group's GPUs");
    if (groups_[g].mode == ShareMode::kPack && groups_[g].members.size() >= 2)
      return FailedPrecondition("a packed group holds at most two jobs");
  }
  Advance(job);
  job.state = JobState::kRunning;
  job.group = g;
  job.gpus = gpus;
  job.base_rate = ComputeBaseRate(job, gpus);
  if (job.resume_stall > 0) job.stall_until = std::max(job.stall_until, now_ + job.resume_stall);
  job.resume_stall = 0;
  if (job.first_start < 0) job.first_start = now_;
  groups_[g].members.push_back(j);
  RecomputeGroup(g);
  LogAction(1, j, gpus);
  return Status::Ok();
}

Status SimCluster::Suspend(JobId j, Preemption how) {
  GD_RETURN_IF_ERROR(CheckRunning(j));
  Job& job = jobs_[j];
  if (how == Preemption::kStop && !job.info.restartable)
    return FailedPrecondition("job " + std::to_string(j) +
                              " cannot restart: it can only be parked");
  Advance(job);
  LeaveGroup(j);
  job.state = JobState::kPending;
  job.pending_since = now_;
  // Where it starts again does not change the price: the model keeps no
  // parked memory on GPUs.
  job.resume_stall = how == Preemption::kPark
                         ? config_.park_seconds.value_or(config_.preempt_seconds)
                         : config_.preempt_seconds;
  job.rate = 0;
  ++job.preemptions;
  ++result_.preemptions;
  Reschedule(j);
  LogAction(how == Preemption::kPark ? 2 : 3, j, {});
  return Status::Ok();
}

Status SimCluster::Migrate(JobId j, std::span<const GpuId> gpus_in) {
  GD_RETURN_IF_ERROR(CheckRunning(j));
  Job& job = jobs_[j];
  if (gpus_in.size() != job.gpus.size())
    return InvalidArgument("migration keeps the job's GPU count");
  std::vector<GpuId> gpus;
  if (!SortedDistinct(gpus_in, &gpus)) return InvalidArgument("duplicate GPU");
  for (GpuId x : gpus)
    if (x < 0 || x >= topo_.num_gpus() || gpu_group_[x] != kNoGroup ||
        (job.info.gpu_type >= 0 && topo_.gpu_type_of(x) != job.info.gpu_type))
      return FailedPrecondition("migration target GPUs must be free and of the job's type");
  Advance(job);
  LeaveGroup(j);
  int g = NewGroup(gpus);
  job.group = g;
  job.gpus = gpus;
  job.base_rate = ComputeBaseRate(job, gpus);
  double cost = config_.migrate_fixed_seconds +
                config_.state_gb_per_gpu * gpus.size() / config_.migrate_gb_per_second;
  job.stall_until = std::max(job.stall_until, now_ + cost);
  ++job.migrations;
  ++result_.migrations;
  groups_[g].members.push_back(j);
  RecomputeGroup(g);
  LogAction(4, j, gpus);
  return Status::Ok();
}

Status SimCluster::Resize(JobId j, std::span<const GpuId> gpus_in) {
  GD_RETURN_IF_ERROR(CheckRunning(j));
  Job& job = jobs_[j];
  int g = job.group;
  if (groups_[g].members.size() != 1)
    return FailedPrecondition("only a job alone on its GPUs can grow or shrink");
  std::vector<GpuId> gpus;
  if (!SortedDistinct(gpus_in, &gpus) || gpus.empty())
    return InvalidArgument("resize needs distinct GPUs");
  std::vector<GpuId> added, dropped;
  for (GpuId x : gpus) {
    if (x < 0 || x >= topo_.num_gpus()) return InvalidArgument("no GPU " + std::to_string(x));
    if (gpu_group_[x] == kNoGroup)
      added.push_back(x);
    else if (gpu_group_[x] != g)
      return FailedPrecondition("resize target GPU is busy");
  }
  std::set_difference(job.gpus.begin(), job.gpus.end(), gpus.begin(), gpus.end(),
                      std::back_inserter(dropped));
  Advance(job);
  free_.Take(added);
  free_.Release(dropped);
  for (GpuId x : added) gpu_group_[x] = g;
  for (GpuId x : dropped) gpu_group_[x] = kNoGroup;
  allocated_now_ += static_cast<double>(added.size()) - static_cast<double>(dropped.size());
  groups_[g].gpus = gpus;
  job.gpus = gpus;
  job.base_rate = ComputeBaseRate(job, gpus);
  // Changing a job's GPU count restarts it from a checkpoint.
  job.stall_until = std::max(job.stall_until, now_ + config_.migrate_fixed_seconds);
  ++result_.resizes;
  RecomputeGroup(g);
  LogAction(5, j, gpus);
  return Status::Ok();
}

Status SimCluster::SetShareMode(int g, ShareMode mode) {
  if (g < 0 || g >= static_cast<int>(groups_.size()) || groups_[g].members.empty())
    return InvalidArgument("no group " + std::to_string(g));
  if (mode == ShareMode::kPack && groups_[g].members.size() > 2)
    return FailedPrecondition("a packed group holds at most two jobs");
  if (groups_[g].mode == mode) return Status::Ok();
  groups_[g].mode = mode;
  RecomputeGroup(g);
  LogAction(mode == ShareMode::kPack ? 6 : 7, g, {});
  return Status::Ok();
}

Status SimCluster::CheckInvariants() const {
  int busy = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const Group& gr = groups_[g];
    if (gr.members.empty()) continue;
    if (gr.mode == ShareMode::kPack && gr.members.size() > 2)
      return Internal("packed group over two jobs");
    for (GpuId x : gr.gpus) {
      if (gpu_group_[x] != static_cast<int>(g))
        return Internal("GPU " + std::to_string(x) + " in two groups");
      if (free_.IsFree(x)) return Internal("busy GPU " + std::to_string(x) + " listed free");
    }
    busy += gr.gpus.size();
    for (JobId m : gr.members) {
      const Job& job = jobs_[m];
      if (job.state != JobState::kRunning || job.group != static_cast<int>(g) ||
          job.gpus != gr.gpus)
        return Internal("job " + std::to_string(m) + " disagrees with its group");
    }
  }
  int free_count = 0;
  for (GpuId x = 0; x < topo_.num_gpus(); ++x) {
    if (gpu_group_[x] == kNoGroup) {
      if (!free_.IsFree(x)) return Internal("idle GPU " + std::to_string(x) + " not listed free");
      ++free_count;
    }
  }
  if (busy + free_count != topo_.num_gpus() || free_count != free_.total_free() ||
      busy != allocated_now_)
    return Internal("GPU counts disagree (over-allocation)");
  return Status::Ok();
}

}  // namespace gandiva::sched
