// The discrete-event engine: fluid job progress, lazy finish events
// (invalidated by a per-job version), and time-bucketed utilisation.
#include "gandiva/scheduler/sim_cluster.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace gandiva::sched {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

StatusOr<std::vector<SimJobSpec>> BuildJobs(const Trace& trace, const Topology& topo,
                                            const PerfModel& perf, uint64_t seed) {
  std::vector<SimJobSpec> out;
  out.reserve(trace.jobs.size());
  std::map<std::string, int> vcs, users;
  auto intern = [](std::map<std::string, int>& m, const std::string& s) {
    if (s.empty()) return 0;
    return m.emplace(s, static_cast<int>(m.size()) + 1).first->second;
  };
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const TraceJob& t = trace.jobs[i];
    SimJobSpec s;
    s.info.id = static_cast<JobId>(i);
    s.info.submit_time = t.submit_time;
    s.info.num_gpus = t.num_gpus;
    s.info.vc = intern(vcs, t.vc);
    s.info.user = intern(users, t.user);
    s.duration = t.duration;
    if (t.num_gpus > topo.num_gpus())
      return InvalidArgument("job " + std::to_string(i) + " needs " + std::to_string(t.num_gpus) +
                             " GPUs; the cluster has " + std::to_string(topo.num_gpus()));
    if (!t.job_type.empty() && !perf.type_names().empty()) {
      s.info.job_type = perf.FindType(t.job_type);
      if (s.info.job_type < 0)
        return InvalidArgument("job " + std::to_string(i) + ": unknown job type '" + t.job_type +
                               "'");
    } else {
      s.info.job_type = perf.AssignType(seed, i, t.num_gpus);
    }
    if (!t.gpu_type.empty()) {
      const auto& types = topo.gpu_types();
      for (size_t k = 0; k < types.size(); ++k)
        if (types[k].name == t.gpu_type) s.info.gpu_type = static_cast<int>(k);
      if (s.info.gpu_type < 0)
        return InvalidArgument("job " + std::to_string(i) + ": no GPUs of type '" + t.gpu_type +
                               "'");
    }
    out.push_back(s);
  }
  return out;
}

SimCluster::SimCluster(Topology topo, const PerfModel* perf, std::span<const SimJobSpec> jobs,
                       SimConfig config)
    : topo_(std::move(topo)), perf_(perf), config_(std::move(config)), free_(topo_) {
  ref_class_ = std::max(0, PerfModel::ClassIndex(config_.ref_perf_class));
  for (const auto& t : topo_.gpu_types())
    type_class_.push_back(std::max(0, PerfModel::ClassIndex(t.perf_class)));
  gpu_group_.assign(topo_.num_gpus(), kNoGroup);
  jobs_.resize(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& j = jobs_[i];
    j.info = jobs[i].info;
    j.info.id = static_cast<JobId>(i);
    j.work = jobs[i].duration;
  }
  contribution_.assign(jobs_.size(), 0.0);
  double span = jobs_.empty() ? 0 : jobs_.back().info.submit_time;
  bucket_seconds_ = std::max(1.0, span / std::max(1, config_.max_util_points / 2));
}

std::span<const GpuId> SimCluster::gpus(JobId j) const { return jobs_[j].gpus; }

GroupView SimCluster::group(int g) const {
  const Group& gr = groups_[g];
  return {gr.gpus, gr.members, gr.mode};
}

double SimCluster::Attained(JobId j) const {
  const Job& job = jobs_[j];
  if (job.state != JobState::kRunning) return job.attained;
  double t0 = std::max(job.last_update, job.stall_until);
  return job.attained + (now_ > t0 ? (now_ - t0) * job.time_share * job.gpus.size() : 0);
}

double SimCluster::RunTime(JobId j) const {
  const Job& job = jobs_[j];
  return job.run_time + (job.state == JobState::kRunning ? now_ - job.last_update : 0);
}

double SimCluster::MeasuredRate(JobId j) const { return RateMeasured(j) ? jobs_[j].rate : 0; }

// The simulator knows every rate; a stalled job's 0 is its rate too, but not
// one that says how fast it runs where it is.
bool SimCluster::RateMeasured(JobId j) const {
  const Job& job = jobs_[j];
  return job.state == JobState::kRunning && now_ >= job.stall_until;
}

bool SimCluster::PairFitsMemory(JobId a, JobId b) const {
  int n = jobs_[a].info.num_gpus;
  return perf_->PackedFactor(ref_class_, jobs_[a].info.job_type, jobs_[b].info.job_type, n) > 0 &&
         perf_->PackedFactor(ref_class_, jobs_[b].info.job_type, jobs_[a].info.job_type, n) > 0;
}

std::optional<double> SimCluster::OracleRemaining(JobId j) const {
  const Job& job = jobs_[j];
  double done = job.done;
  if (job.state == JobState::kRunning) {
    double t0 = std::max(job.last_update, job.stall_until);
    if (now_ > t0) done += job.rate * (now_ - t0);
  }
  return std::max(0.0, job.work - done);
}

void SimCluster::Push(double t, EventKind kind, JobId j, uint32_t version) {
  events_.push({t, kind, j, version});
}

void SimCluster::WakeAt(double t) {
  t = std::max(t, now_);
  if (wakes_.insert(t).second) Push(t, kWake, -1, 0);
}

void SimCluster::Advance(Job& job) {
  if (job.state == JobState::kRunning) {
    double t0 = std::max(job.last_update, job.stall_until);
    if (now_ > t0) {
      job.done = std::min(job.work, job.done + job.rate * (now_ - t0));
      job.attained += (now_ - t0) * job.time_share * job.gpus.size();
    }
    job.run_time += now_ - job.last_update;
  }
  job.last_update = now_;
}

void SimCluster::SetContribution(JobId j, double value) {
  effective_now_ += value - contribution_[j];
  contribution_[j] = value;
}

double SimCluster::ComputeBaseRate(const Job& job, std::span<const GpuId> gpus) const {
  int n = static_cast<int>(gpus.size());
  // Locality: machines used beyond the minimum cost the spread factor once.
  int machines = 0, last = -1;
  double speed = kInf;
  for (GpuId g : gpus) {  // gpus are sorted, so machines come in runs
    int m = topo_.machine_of(g);
    if (m != last) ++machines, last = m;
    speed = std::min(speed, perf_->ClassSpeed(type_class_[topo_.gpu_type_of(g)], ref_class_,
                                              job.info.job_type, job.info.num_gpus));
  }
  double rate = speed;
  if (machines > topo_.MinMachines(n)) rate *= config_.spread_factor;
  if (n != job.info.num_gpus)
    rate *= perf_->ScaleFactor(type_class_[topo_.gpu_type_of(gpus[0])], job.info.job_type,
                               job.info.num_gpus, n);
  return rate;
}

double SimCluster::PackedFactor(const Job& job, const Group& group) const {
  JobId partner = group.members[0] == job.info.id ? group.members[1] : group.members[0];
  int cls = type_class_[topo_.gpu_type_of(group.gpus[0])];
  return perf_->PackedFactor(cls, job.info.job_type, jobs_[partner].info.job_type,
                             job.info.num_gpus);
}

void SimCluster::Reschedule(JobId j) {
  Job& job = jobs_[j];
  ++job.version;
  if (job.state != JobState::kRunning) {
    SetContribution(j, 0);
    return;
  }
  double begin = std::max(now_, job.stall_until);
  if (job.stall_until > now_) {
    Push(job.stall_until, kStallEnd, j, job.version);
    SetContribution(j, 0);
  } else {
    SetContribution(j, job.rate * job.info.num_gpus);
  }
  if (job.rate > 0) Push(begin + (job.work - job.done) / job.rate, kFinish, j, job.version);
}

void SimCluster::RecomputeGroup(int g) {
  Group& gr = groups_[g];
  size_t k = gr.members.size();
  for (JobId m : gr.members) Advance(jobs_[m]);
  for (JobId m : gr.members) {
    Job& job = jobs_[m];
    double share = 1, time_share = 1;
    if (k > 1 && gr.mode == ShareMode::kPack) {
      share = PackedFactor(job, gr);
    } else if (k > 1) {
      time_share = 1.0 / k;
      share = time_share * std::max(0.0, 1.0 - config_.switch_seconds / config_.slice_seconds);
    }
    job.time_share = time_share;
    job.rate = job.base_rate * share;
    Reschedule(m);
  }
}

void SimCluster::AccumulateUtil(double t) {
  if (t <= util_last_) return;
  result_.allocated_gpu_seconds += (t - util_last_) * allocated_now_;
  result_.effective_gpu_seconds += (t - util_last_) * effective_now_;
  while (util_last_ < t) {
    size_t b = static_cast<size_t>(util_last_ / bucket_seconds_);
    while ((b + 1) * bucket_seconds_ <= util_last_) ++b;  // rounding at a bucket edge
    double end = std::min(t, (b + 1) * bucket_seconds_);
    if (b >= util_.size()) util_.resize(b + 1);
    util_[b].allocated += (end - util_last_) * allocated_now_;
    util_[b].effective += (end - util_last_) * effective_now_;
    util_last_ = end;
    if (static_cast<int>(util_.size()) > config_.max_util_points) {
      // Coarsen: merge bucket pairs so memory stays bounded whatever the span.
      std::vector<UtilPoint> merged((util_.size() + 1) / 2);
      for (size_t i = 0; i < util_.size(); ++i) {
        merged[i / 2].allocated += util_[i].allocated;
        merged[i / 2].effective += util_[i].effective;
      }
      util_ = std::move(merged);
      bucket_seconds_ *= 2;
    }
  }
}

void SimCluster::DropStaleEvents() {
  while (!events_.empty() && events_.top().kind < kArrival) {
    const Event& top = events_.top();
    const Job& job = jobs_[top.job];
    if (top.version == job.version && job.state == JobState::kRunning) break;
    events_.pop();
  }
}

void SimCluster::FinishesAndStallEnds(Policy& policy) {
  while (!events_.empty() && events_.top().time <= now_ && events_.top().kind < kArrival) {
    Event ev = events_.top();
    events_.pop();
    Job& job = jobs_[ev.job];
    if (ev.version != job.version || job.state != JobState::kRunning) continue;
    ++result_.events;
    if (ev.kind == kStallEnd) {
      SetContribution(ev.job, job.rate * job.info.num_gpus);
      continue;
    }
    Advance(job);
    job.done = job.work;
    LeaveGroup(ev.job);
    job.state = JobState::kFinished;
    job.rate = 0;
    job.finish = now_;
    Reschedule(ev.job);
    --unfinished_;
    policy.OnFinish(*this, ev.job);
  }
}

void SimCluster::Arrivals(Policy& policy) {
  while (next_arrival_ < jobs_.size() && jobs_[next_arrival_].info.submit_time <= now_) {
    Job& job = jobs_[next_arrival_];
    job.state = JobState::kPending;
    job.pending_since = now_;
    job.last_update = now_;
    ++result_.events;
    policy.OnArrival(*this, static_cast<JobId>(next_arrival_++));
    if (next_arrival_ == jobs_.size()) {
      result_.window_seconds = now_ - jobs_.front().info.submit_time;
      result_.window_allocated_gpu_seconds = result_.allocated_gpu_seconds;
      result_.window_effective_gpu_seconds = result_.effective_gpu_seconds;
    }
  }
}

void SimCluster::Wakes() {
  while (!events_.empty() && events_.top().time <= now_ && events_.top().kind == kWake) {
    wakes_.erase(events_.top().time);
    events_.pop();
    ++result_.events;
  }
}

StatusOr<SimResult> SimCluster::Run(Policy& policy) {
  next_arrival_ = 0;
  unfinished_ = num_jobs();
  while (true) {
    // Drop finish/stall events made stale by a rate change, so they do not
    // cost an empty instant.
    DropStaleEvents();
    double t_heap = events_.empty() ? kInf : events_.top().time;
    double t_arr = next_arrival_ < jobs_.size() ? jobs_[next_arrival_].info.submit_time : kInf;
    double t = std::min(t_heap, t_arr);
    if (t == kInf) break;
    if (t > config_.max_sim_seconds)
      return DeadlineExceeded("simulated time passed max_sim_seconds");
    AccumulateUtil(t);
    now_ = std::max(now_, t);
    // Finishes and stall ends first (they free GPUs), then arrivals, then wake-ups.
    FinishesAndStallEnds(policy);
    Arrivals(policy);
    Wakes();
    ++result_.schedule_calls;
    policy.Schedule(*this);
    if (config_.check_invariants) GD_RETURN_IF_ERROR(CheckInvariants());
  }
  if (unfinished_ > 0)
    return FailedPrecondition(std::string("policy ") + policy.name() + " left " +
                              std::to_string(unfinished_) +
                              " jobs unfinished with nothing left to happen");
  return TakeResult(policy);
}

SimResult SimCluster::TakeResult(const Policy& policy) {
  // Close the utilisation series at the makespan.
  SimResult r = std::move(result_);
  r.total_gpus = topo_.num_gpus();
  r.util_bucket_seconds = bucket_seconds_;
  double end_time = now_;
  r.util.resize(util_.size());
  for (size_t i = 0; i < util_.size(); ++i) {
    double start = i * bucket_seconds_;
    double width = std::min(bucket_seconds_, end_time - start);
    r.util[i].time = start;
    if (width <= 0 || r.total_gpus == 0) continue;
    r.util[i].allocated = util_[i].allocated / (width * r.total_gpus);
    r.util[i].effective = util_[i].effective / (width * r.total_gpus);
  }
  r.jobs.reserve(jobs_.size());
  for (const Job& j : jobs_) {
    JobRecord rec;
    rec.submit = j.info.submit_time;
    rec.first_start = j.first_start;
    rec.finish = j.finish;
    rec.duration = j.work;
    rec.num_gpus = j.info.num_gpus;
    rec.preemptions = j.preemptions;
    rec.migrations = j.migrations;
    r.jobs.push_back(rec);
  }
  r.policy = policy.stats();
  return r;
}

}  // namespace gandiva::sched
