// The controller's threads: one time-slicing loop per device (with swap and
// pre-wake), the heartbeat that keeps parked jobs' leases alive, and the
// process monitor (pidfd + epoll) that notices exits and crashes.
#include <sys/epoll.h>
#include <sys/wait.h>

#include <algorithm>

#include "controller.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "gandiva/common/units.h"

namespace gandiva::controller {

using runtime::ControlBlock;

namespace {
// While waiting for a job to park, look up at least this often (exits, API changes).
constexpr uint64_t kParkPollNs = 5 * kMs;
}  // namespace

void Controller::CompletePendingSwitch(Device& dev) {
  if (!dev.pending_switch) return;
  SwitchRecord& s = *dev.pending_switch;
  auto it = jobs_.find(s.to);
  if (it == jobs_.end() || it->second->ended) {
    dev.pending_switch.reset();
    return;
  }
  const uint64_t resumed = it->second->cb()->resumed_at_ns.load(std::memory_order_acquire);
  if (resumed < s.at_ns) return;  // not running yet
  s.handover_ns = resumed - s.at_ns;
  dev.switches.push_back(s);
  ++dev.switch_count;
  if (dev.switches.size() > options_.max_switch_records) dev.switches.pop_front();
  GD_LOG(kDebug, "%s: job %llu -> job %llu in %.3f ms", dev.info.name.c_str(),
         static_cast<unsigned long long>(s.from), static_cast<unsigned long long>(s.to),
         s.handover_ns / 1e6);
  dev.pending_switch.reset();
}

void Controller::DeviceLoop(Device* dev) {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // Jobs that were asked to suspend and have parked.
    for (uint64_t id : dev->slicer.Stopping()) {
      Job& job = *jobs_.at(id);
      ControlBlock* cb = job.cb();
      if (cb->phase.load(std::memory_order_acquire) != runtime::kPhaseParked) continue;
      // Asked to leave the device's memory: parked only once the shim has copied it out.
      if (cb->swap_request.load() == runtime::kSwapOut &&
          cb->swap_state.load(std::memory_order_acquire) == runtime::kSwapResident)
        continue;
      if (cb->swap_request.load() == runtime::kSwapOut) {
        cb->swap_request.store(runtime::kSwapNone);
        if (cb->swap_state.load() == runtime::kSwapSwappedOut) {
          ++job.swaps;
        } else {
          GD_LOG(kWarn, "job %llu could not swap out; its memory stays on %s",
                 static_cast<unsigned long long>(id), dev->info.name.c_str());
        }
      }
      const uint64_t parked_at = cb->parked_at_ns.load(std::memory_order_relaxed);
      if (job.running_since_ns) {
        job.device_time_ns +=
            parked_at > job.running_since_ns ? parked_at - job.running_since_ns : 0;
        job.running_since_ns = 0;
      }
      dev->slicer.OnParked(id, parked_at);
      dev->last_parked_job = id;
      dev->last_parked_at_ns = parked_at;
    }
    CompletePendingSwitch(*dev);

    const uint64_t now = MonotonicNowNs();
    for (const SliceAction& a : dev->slicer.Tick(now)) {
      Job& job = *jobs_.at(a.job);
      if (a.kind == SliceAction::kSuspend) {
        const bool swap_out = MustSwapOut(*dev, job);
        if (swap_out) job.cb()->swap_request.store(runtime::kSwapOut);
        runtime::RequestSuspend(job.cb());
        // The job next in line gets ready while this one finishes its iteration.
        if (!swap_out && job.running_since_ns != 0) PreWakeNext(*dev, job);
        continue;
      }
      CompletePendingSwitch(*dev);
      // A job swapped out comes back into device memory before it runs (the shim does it).
      if (job.cb()->swap_state.load() == runtime::kSwapSwappedOut)
        job.cb()->swap_request.store(runtime::kSwapIn);
      runtime::RequestResume(job.cb());
      ++job.slices;
      job.running_since_ns = now;
      if (dev->last_parked_job != 0 && dev->last_parked_job != a.job)
        dev->pending_switch =
            SwitchRecord{dev->info.name, dev->last_parked_job, a.job, dev->last_parked_at_ns, 0};
      dev->last_parked_job = 0;
    }

    // Sleep until a stopping job parks, a slice ends, or someone wakes us.
    std::vector<uint64_t> stopping = dev->slicer.Stopping();
    if (!stopping.empty()) {
      ControlBlock* cb = jobs_.at(stopping.front())->cb();
      const uint32_t phase = cb->phase.load(std::memory_order_acquire);
      lock.unlock();
      if (phase != runtime::kPhaseParked) runtime::FutexWait(&cb->phase, phase, kParkPollNs);
      lock.lock();
      continue;
    }
    uint64_t deadline = dev->slicer.NextDeadline();
    if (dev->pending_switch) deadline = std::min(deadline, MonotonicNowNs() + kParkPollNs);
    if (deadline == UINT64_MAX) {
      dev->wake.wait_for(lock, std::chrono::seconds(1));
    } else {
      const uint64_t t = MonotonicNowNs();
      if (deadline > t) dev->wake.wait_for(lock, std::chrono::nanoseconds(deadline - t));
    }
  }
}

void Controller::PreWakeNext(const Device& dev, const Job& outgoing) {
  // Worth a spinning core only when the outgoing job will park soon: within
  // about one of its iterations, and short ones at that.
  constexpr uint64_t kMaxSpinNs = 2 * kMs;
  const uint64_t next = dev.slicer.NextWaiting();
  if (next == 0) return;
  const uint64_t iteration = outgoing.cb()->profile.ewma_ns.load(std::memory_order_relaxed);
  const uint64_t spin = iteration + iteration / 2 + 50'000;
  if (iteration == 0 || spin > kMaxSpinNs) return;
  runtime::PreWake(jobs_.at(next)->cb(), spin);
}

uint64_t Controller::ResidentBytes(const Device& dev) const {
  uint64_t resident = 0;
  for (const auto& [id, job] : jobs_)
    if (!job->ended && job->device == dev.info.name) resident += job->cb()->device_bytes.load();
  return resident;
}

bool Controller::MustSwapOut(const Device& dev, const Job& outgoing) {
  // Jobs time-sliced on one device keep their memory there while parked, as long
  // as it fits. When it does not, the job leaving the device makes room for the
  // one coming next (its memory goes to host, at the same device addresses).
  if (dev.info.memory_bytes == 0 || outgoing.pid <= 0) return false;
  if (outgoing.cb()->device_bytes.load() == 0) return false;  // nothing to move (a CPU job)
  const uint64_t resident = ResidentBytes(dev);
  if (resident == 0) return false;  // not a GPU job (or no tracked memory)
  const uint64_t next = dev.slicer.NextWaiting();
  const uint64_t incoming = next ? jobs_.at(next)->cb()->swapped_bytes.load() : 0;
  return resident + incoming > dev.info.memory_bytes;
}

void Controller::HeartbeatLoop() {
  const auto period = std::chrono::milliseconds(std::max<uint64_t>(10, options_.lease_ms / 4));
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const uint64_t now = MonotonicNowNs();
    for (auto& [id, job] : jobs_)
      if (!job->ended && job->cb()) runtime::Heartbeat(job->cb(), now);
    heartbeat_wake_.wait_for(lock, period);
  }
}

void Controller::MonitorLoop() {
  epoll_event events[16];
  while (!stopping_) {
    int n = epoll_wait(epoll_fd_, events, 16, 1000);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == 0) continue;  // stop event
      std::lock_guard lock(mu_);
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second->ended) continue;
      Job& job = *it->second;
      // A clean exit detaches (phase exited); anything else is a crash.
      bool clean = job.cb()->phase.load() == runtime::kPhaseExited;
      int code = -1;
      if (job.spawned) {  // our child: its exit status is ours to collect
        int status = 0;
        if (waitpid(job.pid, &status, WNOHANG) == job.pid) {
          code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          clean = clean && code == 0;
        }
      }
      if (job.migrated) {
        EndJob(job, false, 0);
        GD_LOG(kInfo, "job %llu (%s) left for another node", static_cast<unsigned long long>(id),
               job.name.c_str());
        continue;
      }
      EndJob(job, !clean, code);
      if (clean) {
        GD_LOG(kInfo, "job %llu (%s) exited", static_cast<unsigned long long>(id),
               job.name.c_str());
      } else {
        GD_LOG(kWarn, "job %llu (%s) died without detaching", static_cast<unsigned long long>(id),
               job.name.c_str());
      }
    }
  }
}

}  // namespace gandiva::controller
