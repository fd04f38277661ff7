// The C API (gandiva.h) over JobRuntime, and gd_checkpoint, which writes the
// registered state with this job's id in the stream's header.
#include <string>

#include "gandiva/checkpoint/state_transfer.h"
#include "gandiva/common/log.h"
#include "gandiva/gandiva.h"
#include "gandiva/runtime/job_runtime.h"

using gandiva::runtime::JobRuntime;

extern "C" {

int gd_attach(void) { return JobRuntime::Get().managed() ? 1 : 0; }

void gd_boundary(void) { JobRuntime::Get().Boundary(); }

int gd_managed(void) { return JobRuntime::Get().managed() ? 1 : 0; }

uint64_t gd_job_id(void) { return JobRuntime::Get().job_id(); }

int gd_get_iteration_stats(gd_iteration_stats* out) {
  if (!out) return -1;
  const JobRuntime& rt = JobRuntime::Get();
  auto s = rt.Stats();
  out->iterations = s.iterations;
  out->mean_ms = s.mean_ms;
  out->ewma_ms = s.ewma_ms;
  out->p50_ms = s.p50_ms;
  out->p99_ms = s.p99_ms;
  out->iterations_per_s = s.iterations_per_s;
  out->parks = rt.control_block()->park_count.load(std::memory_order_relaxed);
  return 0;
}

void gd_detach(void) { JobRuntime::Get().Detach(); }

int gd_checkpoint(const char* dir) {
  if (!dir || !*dir) return -1;
  const std::string target =
      std::string("file:") + dir + "/" + gandiva::checkpoint::kCheckpointFileName;
  uint64_t bytes = 0;
  gandiva::Status s = gandiva::checkpoint::SaveState(target, JobRuntime::Get().job_id(), &bytes);
  if (!s.ok()) {
    GD_LOG(kError, "gd_checkpoint(%s): %s", dir, s.ToString().c_str());
    return -1;
  }
  GD_LOG(kDebug, "checkpoint of %llu bytes written to %s", static_cast<unsigned long long>(bytes),
         target.c_str());
  return 0;
}

}  // extern "C"
