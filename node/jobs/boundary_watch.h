// Jobs that show no iteration boundary: gandiva can neither slice, park,
// checkpoint nor measure a job until it marks one, so one that has marked none
// a while (--boundary-wait-s, 30 s by default) after it registered is reported
// ("no iteration boundaries seen: ...", with what to do) in its job record
// (boundary_warning: `gandiva ps`, the scheduler's queue, metrics) and once in
// gandivad's log, instead of running on unmanaged in silence.
//
// Thread-safety: NoBoundaryWarning is a pure function; a BoundaryWatch is used
// by one thread (the heartbeat's).
#ifndef GANDIVA_NODE_JOBS_BOUNDARY_WATCH_H_
#define GANDIVA_NODE_JOBS_BOUNDARY_WATCH_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "jobs/job.h"

namespace gandiva::controller {

inline constexpr uint64_t kDefaultBoundaryWaitS = 30;

// The warning for a live job whose process has started and that has marked no
// boundary `wait_ns` or more after it registered; "" otherwise (and at once
// when it marks its first). wait_ns 0: never warns.
std::string NoBoundaryWarning(const Job& job, uint64_t now_ns, uint64_t wait_ns);

class BoundaryWatch {
 public:
  explicit BoundaryWatch(uint64_t wait_ns) : wait_ns_(wait_ns) {}

  // Called for every live job once a beat: the warning of a job that has just
  // come to have one (to log once), else "".
  std::string Note(const Job& job, uint64_t now_ns);
  // After each beat's jobs: forget the jobs that were not warned about in it.
  void EndBeat();

 private:
  uint64_t wait_ns_;
  std::set<uint64_t> warned_;  // as of the previous beat
  std::set<uint64_t> seen_;    // in this beat
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_BOUNDARY_WATCH_H_
