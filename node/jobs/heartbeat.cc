// The lease heartbeat thread; see heartbeat.h.
#include "jobs/heartbeat.h"

#include "gandiva/common/clock.h"

namespace gandiva::controller {

void Heartbeat::Start() {
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!stopping_) {
      lock.unlock();
      beat_(MonotonicNowNs());
      lock.lock();
      wake_.wait_for(lock, period_, [this] { return stopping_; });
    }
  });
}

void Heartbeat::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace gandiva::controller
