// pidfd + epoll exit monitor; see process_monitor.h.
#include "jobs/process_monitor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "jobs/process_identity.h"

namespace gandiva::controller {

namespace {
constexpr uint64_t kStopEvent = 0;  // job ids start at 1
}

ProcessMonitor::ProcessMonitor(std::function<void(uint64_t job)> on_exit)
    : on_exit_(std::move(on_exit)) {}

ProcessMonitor::~ProcessMonitor() { Stop(); }

Status ProcessMonitor::Start() {
  epoll_.Reset(epoll_create1(EPOLL_CLOEXEC));
  stop_event_.Reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll_.valid() || !stop_event_.valid()) return Internal("cannot create epoll/eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kStopEvent;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, stop_event_.get(), &ev);
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void ProcessMonitor::Stop() {
  if (!thread_.joinable() || stopping_.exchange(true)) return;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(stop_event_.get(), &one, sizeof one);
  thread_.join();
}

StatusOr<UniqueFd> ProcessMonitor::Watch(uint64_t job, int pid) {
  UniqueFd fd = OpenPidfd(pid);
  if (!fd.valid()) return NotFound("process " + std::to_string(pid) + " is not running");
  WatchFd(job, fd.get());
  return fd;
}

void ProcessMonitor::WatchFd(uint64_t job, int pidfd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = job;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, pidfd, &ev);
}

void ProcessMonitor::Unwatch(int pidfd) {
  if (pidfd >= 0 && epoll_.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, pidfd, nullptr);
}

void ProcessMonitor::Loop() {
  epoll_event events[16];
  while (!stopping_) {
    const int n = epoll_wait(epoll_.get(), events, 16, 1000);
    for (int i = 0; i < n; ++i)
      if (events[i].data.u64 != kStopEvent) on_exit_(events[i].data.u64);
  }
}

}  // namespace gandiva::controller
