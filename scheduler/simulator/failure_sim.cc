// The failure-handling replay: a small event loop of its own (submissions,
// validation slices, run ends) over a gang-scheduled FIFO cluster, because
// what it measures is attempts and retries, which the policy engine
// (SimCluster) does not have: there a job runs once.
#include "gandiva/scheduler/failure_sim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <queue>
#include <set>

namespace gandiva::sched {
namespace {

// Free GPUs per machine. Jobs go on the fewest machines: the fullest machine
// that holds them whole, else the machines with the most free GPUs.
class GpuPool {
 public:
  using Parts = std::vector<std::pair<int, int>>;  // (machine, GPUs)
  explicit GpuPool(const Topology& topo) {
    for (const auto& m : topo.machines()) free_.push_back(m.num_gpus), total_ += m.num_gpus;
  }
  int free_gpus() const { return total_; }
  Parts Take(int n) {
    Parts parts;
    int best = -1;
    for (size_t m = 0; m < free_.size(); ++m)
      if (free_[m] >= n && (best < 0 || free_[m] < free_[best])) best = static_cast<int>(m);
    if (best >= 0) {
      parts.push_back({best, n});
    } else {
      std::vector<int> order(free_.size());
      for (size_t m = 0; m < order.size(); ++m) order[m] = static_cast<int>(m);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return free_[a] > free_[b]; });
      for (size_t i = 0, left = n; left > 0 && i < order.size(); ++i) {
        const int take = std::min<int>(static_cast<int>(left), free_[order[i]]);
        if (take > 0) parts.push_back({order[i], take}), left -= take;
      }
    }
    for (auto [m, g] : parts) free_[m] -= g, total_ -= g;
    return parts;
  }
  void Give(const Parts& parts) {
    for (auto [m, g] : parts) free_[m] += g, total_ += g;
  }

 private:
  std::vector<int> free_;
  int total_ = 0;
};

struct Job {
  const SimJobSpec* spec = nullptr;
  int reason = -1;        // -1: never fails
  int failures = 0;       // failed tries so far; also the index of the current try's draws
  int infra_retries = 0;  // classify / validate: retries of infrastructure failures
  bool validated = false;
  // The current try (a validation and/or a full run): whether it fails and when.
  bool try_fails = false;
  double try_rtf = 0;
  // The current run or validation slice.
  double run_length = 0, end = 0;
  uint32_t version = 0;
  GpuPool::Parts held;
  double first_start = -1;
  double sliced = 0;  // seconds this job has waited for validation slices
};

enum Kind : uint8_t { kRunEnd = 0, kValidationEnd = 1, kSubmit = 2 };
struct Event {
  double time;
  Kind kind;
  int job;
  uint32_t version;
  bool operator>(const Event& o) const {
    if (time != o.time) return time > o.time;
    if (kind != o.kind) return kind > o.kind;
    return job > o.job;
  }
};

class Replay {
 public:
  Replay(const Topology& topo, const PerfModel& perf, const std::vector<SimJobSpec>& specs,
         const FailureModel& model, const FailureSimConfig& config)
      : perf_(perf), model_(model), config_(config), pool_(topo), jobs_(specs.size()) {
    ref_class_ = std::max(0, PerfModel::ClassIndex(config.ref_perf_class));
    for (size_t i = 0; i < specs.size(); ++i) {
      jobs_[i].spec = &specs[i];
      jobs_[i].reason = model.Fate(static_cast<int64_t>(i)).reason;
      Push(specs[i].info.submit_time, kSubmit, static_cast<int>(i));
    }
    r_.variant = FailureVariantName(config.variant);
    r_.jobs = static_cast<int64_t>(specs.size());
  }

  FailureSimResult Run() {
    while (!events_.empty()) {
      now_ = events_.top().time;
      while (!events_.empty() && events_.top().time <= now_) {
        const Event ev = events_.top();
        events_.pop();
        Job& j = jobs_[ev.job];
        if (ev.kind != kSubmit && ev.version != j.version) continue;  // delayed by a slice
        if (ev.kind == kRunEnd) RunEnded(ev.job);
        if (ev.kind == kValidationEnd) ValidationEnded(ev.job);
        if (ev.kind == kSubmit) Submitted(ev.job);
      }
      StartQueued();
    }
    return Finish();
  }

 private:
  void Push(double t, Kind kind, int job) { events_.push({t, kind, job, jobs_[job].version}); }
  int Gpus(int job) const { return jobs_[job].spec->info.num_gpus; }

  // Draws the current try: the first always fails for a failing job; a retry
  // of a transient failure succeeds with the model's probability.
  void NewTry(int id) {
    Job& j = jobs_[id];
    j.try_fails = false;
    if (j.reason < 0) return;
    const bool transient = model_.reasons()[j.reason].transient;
    j.try_fails = j.failures == 0 || !transient || !model_.RetrySucceeds(id, j.failures);
    j.try_rtf = model_.RunToFailure(id, j.reason, j.failures);
    if (config_.clip_to_duration) j.try_rtf = std::min(j.try_rtf, j.spec->duration);
  }

  void Submitted(int id) {
    Job& j = jobs_[id];
    NewTry(id);
    if (config_.variant == FailureVariant::kValidate && !j.validated) return StartValidation(id);
    queue_.push_back(id);
  }

  // The validation runs one copy of the job on one GPU (the per-GPU batch,
  // as one rank of the gang sees it): iterations at the table's one-GPU speed
  // of its type, or its own size's when one GPU was not measured.
  double ValidationSeconds(int id) const {
    const JobInfo& info = jobs_[id].spec->info;
    double steps = perf_.Alone(ref_class_, info.job_type, 1);
    if (steps <= 0) steps = perf_.Alone(ref_class_, info.job_type, info.num_gpus);
    const double iteration = steps > 0 ? 1 / steps : config_.default_iteration_seconds;
    return config_.validate_startup_seconds + config_.validate_iterations * iteration;
  }

  // Whether the current try fails inside its validation window. Only a failure
  // of the job's own making repeats there: a transient one (a node lost, a
  // storage hiccup) strikes whatever runs at that moment, and is left to the
  // full run.
  bool CaughtInValidation(int id) const {
    const Job& j = jobs_[id];
    return j.try_fails && !model_.reasons()[j.reason].transient &&
           j.try_rtf <= ValidationSeconds(id);
  }

  // A short slice on one GPU: a free one if there is one, else one of a
  // running job's, which waits for it (plus a suspend and resume).
  void StartValidation(int id) {
    Job& j = jobs_[id];
    j.run_length = CaughtInValidation(id) ? j.try_rtf : ValidationSeconds(id);
    ++r_.validations;
    r_.validation_gpu_hours += j.run_length / 3600;
    if (pool_.free_gpus() >= 1) {
      j.held = pool_.Take(1);
    } else {
      j.held.clear();
      ShareWithRunning(1, j.run_length);
    }
    ++j.version;
    Push(now_ + j.run_length, kValidationEnd, id);
  }

  // The smallest running job with at least n GPUs, and of those the one that
  // has waited least for slices (so no one job pays for every validation),
  // else running jobs in id order until they hold n: each is suspended for
  // the slice.
  void ShareWithRunning(int n, double slice) {
    std::vector<int> picked;
    int best = -1;
    for (int r : running_) {
      if (Gpus(r) < n) continue;
      if (best < 0 || Gpus(r) < Gpus(best) ||
          (Gpus(r) == Gpus(best) && jobs_[r].sliced < jobs_[best].sliced))
        best = r;
    }
    if (best >= 0) {
      picked.push_back(best);
    } else {
      int got = 0;
      for (auto it = running_.begin(); it != running_.end() && got < n; ++it)
        picked.push_back(*it), got += Gpus(*it);
    }
    const double delay = slice + config_.switch_seconds;
    double lost = -n * slice;
    for (int r : picked) {
      Job& c = jobs_[r];
      c.end += delay;
      c.sliced += delay;
      ++c.version;
      Push(c.end, kRunEnd, r);
      lost += Gpus(r) * delay;
    }
    r_.slice_overhead_gpu_hours += std::max(0.0, lost) / 3600;
  }

  void ValidationEnded(int id) {
    Job& j = jobs_[id];
    pool_.Give(j.held);
    j.held.clear();
    if (CaughtInValidation(id)) {
      ++r_.caught_in_validation;
      r_.failed_gpu_hours += j.run_length / 3600;
      return Failed(id);
    }
    j.validated = true;
    queue_.push_back(id);
  }

  // First come first served; the head of the queue blocks the rest.
  void StartQueued() {
    while (!queue_.empty() && pool_.free_gpus() >= Gpus(queue_.front())) {
      const int id = queue_.front();
      queue_.pop_front();
      Job& j = jobs_[id];
      j.held = pool_.Take(Gpus(id));
      j.run_length = j.try_fails ? j.try_rtf : j.spec->duration;
      j.end = now_ + j.run_length;
      if (j.first_start < 0) j.first_start = now_;
      ++j.version;
      ++r_.attempts;
      running_.insert(id);
      Push(j.end, kRunEnd, id);
    }
  }

  void RunEnded(int id) {
    Job& j = jobs_[id];
    pool_.Give(j.held);
    j.held.clear();
    running_.erase(id);
    const double gpu_hours = Gpus(id) * j.run_length / 3600;
    r_.total_gpu_hours += gpu_hours;
    if (!j.try_fails) {
      ++r_.succeeded;
      r_.useful_gpu_hours += gpu_hours;
      succeeded_jct_ += now_ - j.spec->info.submit_time;
      if (j.reason < 0) {
        ok_jct_ += now_ - j.spec->info.submit_time;
        ok_wait_ += j.first_start - j.spec->info.submit_time;
        ++ok_jobs_;
      }
      return;
    }
    r_.failed_gpu_hours += gpu_hours;
    Failed(id);
  }

  // After a failed try: retry (when, and whether, by the variant) or report.
  void Failed(int id) {
    Job& j = jobs_[id];
    ++j.failures;
    const FailureReason& why = model_.reasons()[j.reason];
    double delay = -1;  // < 0: report the failure to the user
    if (config_.variant == FailureVariant::kPhilly) {
      const int trials =
          why.transient ? config_.philly_max_trials : model_.PhillyTrials(id, j.reason);
      if (j.failures < trials) delay = 0;
    } else if (why.seen_as == ExitClass::kPreempted) {
      delay = 0;
    } else if (why.seen_as == ExitClass::kInfra && j.infra_retries < config_.retry_limit) {
      delay = std::min(config_.max_backoff_seconds,
                       config_.backoff_seconds * std::ldexp(1.0, j.infra_retries++));
    }
    if (delay < 0) {
      ++r_.failed;
      report_.push_back(now_ - j.spec->info.submit_time);
      return;
    }
    ++r_.retries;
    Push(now_ + delay, kSubmit, id);
  }

  FailureSimResult Finish() {
    r_.makespan = now_;
    r_.total_gpu_hours += r_.validation_gpu_hours + r_.slice_overhead_gpu_hours;
    for (const Job& j : jobs_) r_.failing_jobs += j.reason >= 0;
    if (ok_jobs_ > 0) r_.ok_jct_mean = ok_jct_ / ok_jobs_, r_.ok_wait_mean = ok_wait_ / ok_jobs_;
    if (r_.succeeded > 0) r_.succeeded_jct_mean = succeeded_jct_ / r_.succeeded;
    if (!report_.empty()) {
      std::sort(report_.begin(), report_.end());
      auto at = [&](double q) { return report_[static_cast<size_t>(q * (report_.size() - 1))]; };
      r_.report_p50 = at(0.5);
      r_.report_p90 = at(0.9);
      double sum = 0;
      for (double t : report_) sum += t;
      r_.report_mean = sum / static_cast<double>(report_.size());
    }
    return r_;
  }

  const PerfModel& perf_;
  const FailureModel& model_;
  FailureSimConfig config_;
  int ref_class_ = 1;
  GpuPool pool_;
  std::vector<Job> jobs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::deque<int> queue_;
  std::set<int> running_;
  double now_ = 0;
  FailureSimResult r_;
  std::vector<double> report_;
  double ok_jct_ = 0, ok_wait_ = 0, succeeded_jct_ = 0;
  int64_t ok_jobs_ = 0;
};

}  // namespace

const char* FailureVariantName(FailureVariant v) {
  switch (v) {
    case FailureVariant::kPhilly:
      return "philly";
    case FailureVariant::kClassify:
      return "classify";
    case FailureVariant::kValidate:
      return "validate";
  }
  return "?";
}

StatusOr<FailureVariant> ParseFailureVariant(const std::string& name) {
  for (auto v : {FailureVariant::kPhilly, FailureVariant::kClassify, FailureVariant::kValidate})
    if (name == FailureVariantName(v)) return v;
  return InvalidArgument("unknown variant '" + name + "' (philly, classify or validate)");
}

StatusOr<FailureSimResult> RunFailureSim(const Topology& topo, const PerfModel& perf,
                                         const std::vector<SimJobSpec>& jobs,
                                         const FailureModel& model,
                                         const FailureSimConfig& config) {
  if (config.philly_max_trials < 1 || config.retry_limit < 0 || config.backoff_seconds < 0 ||
      config.max_backoff_seconds < 0 || config.validate_iterations < 0 ||
      config.validate_startup_seconds < 0 || config.switch_seconds < 0 ||
      !(config.default_iteration_seconds > 0))
    return InvalidArgument("failure replay: a count or time is out of range");
  for (const auto& j : jobs)
    if (j.info.num_gpus < 1 || j.info.num_gpus > topo.num_gpus())
      return InvalidArgument("job " + std::to_string(j.info.id) + " needs " +
                             std::to_string(j.info.num_gpus) + " GPUs; the cluster has " +
                             std::to_string(topo.num_gpus()));
  const auto start = std::chrono::steady_clock::now();
  FailureSimResult r = Replay(topo, perf, jobs, model, config).Run();
  if (r.succeeded + r.failed != r.jobs)
    return Internal("failure replay ended with " + std::to_string(r.jobs - r.succeeded - r.failed) +
                    " jobs neither finished nor failed");
  r.sim_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace gandiva::sched
