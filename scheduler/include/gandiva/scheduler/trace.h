// Job traces: the Philly CSV, the Tiresias CSV and a documented generic CSV
// (docs/simulator.md) that any trace can be converted to.
#ifndef GANDIVA_SCHED_TRACE_H_
#define GANDIVA_SCHED_TRACE_H_

#include <string>
#include <vector>

#include "gandiva/scheduler/types.h"
#include "gandiva/status.h"

namespace gandiva::sched {

struct TraceJob {
  double submit_time = 0;  // seconds; rebased so the first job is at 0
  double duration = 0;     // seconds alone on consolidated GPUs (the work)
  int num_gpus = 1;
  std::string vc;        // may be empty
  std::string user;      // may be empty
  std::string job_type;  // co-location table model name, may be empty
  std::string gpu_type;  // required GPU type name, may be empty
};

enum class TraceFormat { kAuto, kPhilly, kTiresias, kGeneric };

struct TraceOptions {
  TraceFormat format = TraceFormat::kAuto;  // auto: from the header line
  bool skip_bad_rows = false;               // else the first bad row is an invalid_argument error
  double load = 1.0;                        // arrival-rate multiplier: submit times divided by it
  int max_jobs = 0;                         // keep only the first N jobs by submit time (0 = all)
};

struct Trace {
  std::vector<TraceJob> jobs;  // sorted by submit time (stable)
  int skipped_rows = 0;
  std::string format;  // "philly", "tiresias" or "generic"
};

// Errors: not_found (cannot open), invalid_argument ("FILE:LINE: why").
StatusOr<Trace> ReadTrace(const std::string& path, const TraceOptions& options = {});
// The same, from text in memory (`name` is used in error messages).
StatusOr<Trace> ParseTrace(const std::string& text, const std::string& name,
                           const TraceOptions& options = {});
// Parses "YYYY-MM-DD HH:MM:SS" as seconds since the epoch (UTC); false if malformed.
bool ParseDateTime(std::string_view s, double* seconds);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_TRACE_H_
