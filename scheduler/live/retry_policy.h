// When a job whose run failed through no fault of its own (exit_class.h:
// infrastructure, preempted) runs again: at most max_retries times, each after
// a wait that doubles from backoff_s up to max_backoff_s. The wait keeps a job
// that brings down whatever runs it (a bad input that hangs a node, a
// mis-classified error) from cycling through the cluster; the limit ends it.
#ifndef GANDIVA_SCHEDULER_LIVE_RETRY_POLICY_H_
#define GANDIVA_SCHEDULER_LIVE_RETRY_POLICY_H_

#include <algorithm>
#include <cmath>

namespace gandiva::sched::live {

struct RetryOptions {
  int max_retries = 3;
  double backoff_s = 10;
  double max_backoff_s = 600;
};

// The wait before retry number `retry` (1, 2, ...): backoff_s, then twice
// that, ..., never above max_backoff_s.
inline double RetryDelay(const RetryOptions& o, int retry) {
  return std::min(o.max_backoff_s, o.backoff_s * std::ldexp(1.0, std::max(0, retry - 1)));
}

}  // namespace gandiva::sched::live

#endif  // GANDIVA_SCHEDULER_LIVE_RETRY_POLICY_H_
