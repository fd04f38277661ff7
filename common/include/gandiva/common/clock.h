// Monotonic time in nanoseconds (CLOCK_MONOTONIC: the same clock in every process
// on the node, so the job's park time and the controller's switch log compare).
// Also the Clock interface that lets controller logic be tested without sleeping.
#ifndef GANDIVA_COMMON_CLOCK_H_
#define GANDIVA_COMMON_CLOCK_H_

#include <time.h>

#include <cstdint>

namespace gandiva {

inline uint64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

class Clock {
 public:
  virtual ~Clock() = default;
  virtual uint64_t NowNs() const = 0;
};

class SystemClock final : public Clock {
 public:
  uint64_t NowNs() const override { return MonotonicNowNs(); }
};

// Tests advance it by hand.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(uint64_t start_ns = 1'000'000'000) : now_(start_ns) {}
  uint64_t NowNs() const override { return now_; }
  void Advance(uint64_t ns) { now_ += ns; }
  void Set(uint64_t ns) { now_ = ns; }

 private:
  uint64_t now_;
};

}  // namespace gandiva

#endif  // GANDIVA_COMMON_CLOCK_H_
