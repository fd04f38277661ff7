// Jobs that show no iteration boundary; see boundary_watch.h.
#include "jobs/boundary_watch.h"

#include "gandiva/contract/control_block.h"

namespace gandiva::controller {

std::string NoBoundaryWarning(const Job& job, uint64_t now_ns, uint64_t wait_ns) {
  const runtime::ControlBlock* cb = job.cb();
  if (wait_ns == 0 || job.ended || !cb || job.pid == 0) return "";
  // The first boundary moves the job out of "starting" for good.
  if (cb->phase.load(std::memory_order_acquire) != runtime::kPhaseStarting) return "";
  if (now_ns < job.registered_ns + wait_ns) return "";
  const uint64_t waited_s = (now_ns - job.registered_ns) / 1000000000ull;
  return "no iteration boundaries seen: none in the " + std::to_string(waited_s) +
         " s since it registered, so gandiva cannot time-slice, park, checkpoint or measure it "
         "(it runs on unmanaged). A PyTorch script marks one at each optimizer step by itself "
         "(unless GANDIVA_AUTO_TORCH=0, python -S or -I, or it uses no torch.optim optimizer); "
         "any other loop calls gandiva.step() once per iteration (docs/python.md)";
}

std::string BoundaryWatch::Note(const Job& job, uint64_t now_ns) {
  std::string warning = NoBoundaryWarning(job, now_ns, wait_ns_);
  if (warning.empty()) return "";
  seen_.insert(job.id);
  return warned_.count(job.id) ? "" : warning;
}

void BoundaryWatch::EndBeat() {
  warned_.swap(seen_);
  seen_.clear();
}

}  // namespace gandiva::controller
