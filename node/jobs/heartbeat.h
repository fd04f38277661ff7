// The heartbeat that keeps parked jobs' leases alive: a thread that calls
// `beat(now)` every period (a quarter of the lease) until stopped.
//
// Thread-safety: Start and Stop from one thread; mu_ guards only the wake-up.
#ifndef GANDIVA_NODE_JOBS_HEARTBEAT_H_
#define GANDIVA_NODE_JOBS_HEARTBEAT_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace gandiva::controller {

class Heartbeat {
 public:
  Heartbeat(std::chrono::milliseconds period, std::function<void(uint64_t now_ns)> beat)
      : period_(period), beat_(std::move(beat)) {}
  ~Heartbeat() { Stop(); }

  void Start();
  void Stop();

 private:
  std::chrono::milliseconds period_;
  std::function<void(uint64_t)> beat_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_HEARTBEAT_H_
