// Job, operation and device records as reply fields; see node_handlers.h.
#include "api/node_handlers.h"
#include "gandiva/common/clock.h"
#include "gandiva/contract/environment.h"
#include "gandiva/contract/profiler.h"

namespace gandiva::controller {

using runtime::ControlBlock;

Json OperationToJson(const std::optional<Operation>& op) {
  if (!op) return nullptr;
  return Json{{"kind", op->kind},
              {"state", op->state},
              {"step", OperationStepName(op->step)},
              {"error", op->error},
              {"target", op->target},
              {"bytes", op->bytes},
              {"downtime_ms", op->downtime_ms},
              {"to_job", op->to_job},
              {"start_tries", op->start_tries},
              {"duration_s", op->finished_ns ? (op->finished_ns - op->started_ns) / 1e9 : 0.0}};
}

namespace {
Json ShareDecisionToJson(const std::optional<ShareDecision>& d) {
  if (!d) return nullptr;
  auto number = [](const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); };
  return Json{{"mode", d->chosen},
              {"reason", d->reason},
              {"jobs", d->jobs},
              {"slice_rate", number(d->slice_rate)},
              {"pack_rate", number(d->pack_rate)},
              {"window_s", d->window_s},
              {"alone_estimated", d->alone_estimated},
              {"at_s", d->at_ns / 1e9}};
}
protocol::BoundarySource BoundarySourceOf(uint32_t source) {
  return source == 2   ? protocol::BoundarySource::kInferred
         : source == 1 ? protocol::BoundarySource::kExplicit
                       : protocol::BoundarySource::kNone;
}
// A variable of the job's environment, or "".
std::string EnvOf(const Job& job, const char* name) {
  auto it = job.env.find(name);
  return it == job.env.end() ? std::string() : it->second;
}
protocol::SwapState SwapStateOf(uint32_t state) {
  return state == runtime::kSwapSwappedOut ? protocol::SwapState::kSwappedOut
         : state == runtime::kSwapFailed   ? protocol::SwapState::kSwapFailed
                                           : protocol::SwapState::kResident;
}
}  // namespace

Json JobToJson(const Job& job, bool held, const DeviceUsage& usage,
               const std::optional<Operation>& operation) {
  // An ended job read back from the job table after a restart has no block
  // left: its iteration figures are those frozen at its end, the rest zero.
  static ControlBlock kNoBlock;
  const ControlBlock* cb = job.cb() ? job.cb() : &kNoBlock;
  const auto stats =
      job.cb() || !job.final_stats ? runtime::ReadIterationStats(cb->profile) : *job.final_stats;
  const uint64_t now = MonotonicNowNs();
  const uint64_t end = job.ended ? job.ended_ns : now;
  return Json{{"id", job.id},
              {"name", job.name},
              {"device", job.device},
              {"devices", job.devices},
              {"state", job.State()},
              {"held", held},
              {"weight", job.weight},
              {"pid", job.pid},
              {"command", job.command},
              {"iterations", stats.iterations},
              {"mean_ms", stats.mean_ms},
              {"ewma_ms", stats.ewma_ms},
              {"p50_ms", stats.p50_ms},
              {"p99_ms", stats.p99_ms},
              {"iterations_per_s", stats.iterations_per_s},
              {"alone_ms", usage.alone_ns ? Json(*usage.alone_ns / 1e6) : Json(nullptr)},
              {"rate_vs_alone",
               usage.rate_vs_alone && !job.ended ? Json(*usage.rate_vs_alone) : Json(nullptr)},
              {"slices", usage.slices},
              {"swaps", usage.swaps},
              {"swapped_bytes", cb->swapped_bytes.load()},
              {"parks", job.cb() ? cb->park_count.load() : job.final_parks},
              {"device_time_s", usage.DeviceTimeAt(now) / 1e9},
              {"wall_time_s", (end - job.registered_ns) / 1e9},
              {"device_bytes", cb->device_bytes.load()},
              {"device_allocations", cb->device_allocations.load()},
              {"auto_boundaries", cb->auto_boundaries.load()},
              {"boundary_source", BoundarySourceOf(cb->boundary_source.load())},
              {"swap_state", SwapStateOf(cb->swap_state.load())},
              {"fail_open", cb->fail_open.load() != 0},
              {"exit_code", job.exit_code},
              {"exit_reason", job.end.reason},
              {"exit_signal", job.end.signal},
              {"exit_detail", job.end.detail},
              {"launched", job.launched},
              {"user", job.user},
              {"stdout_log", job.stdout_log},
              {"stderr_log", job.stderr_log},
              {"memory_limit", job.memory_limit},
              {"gpu_memory_bytes", job.GpuMemoryCap()},
              {"migrated_from", job.migrated_from},
              {"managed_by", job.managed_by},
              {"pod_namespace", EnvOf(job, runtime::kEnvPodNamespace)},
              {"pod", EnvOf(job, runtime::kEnvPodName)},
              {"container", EnvOf(job, runtime::kEnvContainerName)},
              {"operation", OperationToJson(operation)}};
}

Json DeviceToJson(const DeviceSnapshot& d) {
  return Json{{"name", d.info.name},
              {"kind", d.info.kind},
              {"model", d.info.model},
              {"memory_bytes", d.info.memory_bytes},
              {"resident_bytes", d.resident_bytes},
              {"capacity", d.capacity},
              {"slice_ms", d.slice_ms},
              {"slice_now_ms", d.slice_now_ms},
              {"jobs", d.jobs},
              {"running", d.running},
              {"switches", d.switch_count},
              {"mean_handover_ms", d.mean_handover_ms},
              {"share_mode", d.share_mode},
              {"packing", d.packing},
              {"share_phase", d.share_phase},
              {"share_decision", ShareDecisionToJson(d.share_decision)},
              {"mps", d.mps}};
}

}  // namespace gandiva::controller
