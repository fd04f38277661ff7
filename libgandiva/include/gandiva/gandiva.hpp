// C++ layer over the job-side C API (gandiva.h).
#ifndef GANDIVA_GANDIVA_HPP_
#define GANDIVA_GANDIVA_HPP_

#include "gandiva/gandiva.h"

namespace gandiva {

// Marks an iteration boundary; see gd_boundary().
inline void Boundary() { gd_boundary(); }
inline bool Managed() { return gd_managed() != 0; }
inline uint64_t JobId() { return gd_job_id(); }

inline gd_iteration_stats IterationStats() {
  gd_iteration_stats s{};
  gd_get_iteration_stats(&s);
  return s;
}

// Marks a boundary when the scope ends: `for (...) { gandiva::Iteration it; step(); }`.
class Iteration {
 public:
  Iteration() = default;
  ~Iteration() { gd_boundary(); }
  Iteration(const Iteration&) = delete;
  Iteration& operator=(const Iteration&) = delete;
};

}  // namespace gandiva

#endif  // GANDIVA_GANDIVA_HPP_
