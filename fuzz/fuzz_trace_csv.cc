// libFuzzer harness: the job-trace readers (scheduler/trace.h) on arbitrary
// text, through ParseTrace, the in-memory entry point that ReadTrace uses after
// reading the file. The options come from the input's first line when it is
// "#fuzz FORMAT SKIP LOAD MAX" (seeds use it to reach each format directly);
// otherwise the defaults: format from the header line, stop at the first bad row.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "gandiva/scheduler/trace.h"

namespace sched = gandiva::sched;

namespace {

// Consumes a "#fuzz ..." first line from text into options.
void TakeOptions(std::string* text, sched::TraceOptions* options) {
  if (text->rfind("#fuzz ", 0) != 0) return;
  const size_t end = text->find('\n');
  std::istringstream words(text->substr(6, end == std::string::npos ? end : end - 6));
  int format = 0, skip = 0, max_jobs = 0;
  double load = 1.0;
  words >> format >> skip >> load >> max_jobs;
  options->format = static_cast<sched::TraceFormat>(std::abs(format) % 4);
  options->skip_bad_rows = skip != 0;
  // The CLI rejects loads that are not positive; the reader is not asked to.
  if (std::isfinite(load) && load > 0) options->load = load;
  options->max_jobs = max_jobs < 0 ? 0 : max_jobs;
  text->erase(0, end == std::string::npos ? text->size() : end + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  sched::TraceOptions options;
  TakeOptions(&text, &options);
  auto trace = sched::ParseTrace(text, "fuzz.csv", options);
  if (!trace.ok()) return 0;
  // What the simulator relies on: jobs sorted by submit time from 0, sane sizes.
  double last = 0;
  for (const auto& job : trace->jobs) {
    if (!(job.submit_time >= last) || job.num_gpus < 1) std::abort();
    last = job.submit_time;
  }
  if (options.max_jobs > 0 && trace->jobs.size() > static_cast<size_t>(options.max_jobs))
    std::abort();
  return 0;
}
