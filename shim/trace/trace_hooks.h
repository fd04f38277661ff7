// The recorder's side of the hooks (policies.h): what each kind of call writes into
// its TraceRecord (trace_format.h says which argument goes where), and the decision
// records at inferred boundaries. When recording is off a hook pays one relaxed load
// and a branch (and, before the driver is loaded, one more); the call is then made
// exactly as without the recorder.
#ifndef GANDIVA_SHIM_TRACE_TRACE_HOOKS_H_
#define GANDIVA_SHIM_TRACE_TRACE_HOOKS_H_

#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "boundary/job_link.h"
#include "boundary/thread_state.h"
#include "interpose/driver.h"
#include "memory/memory_tracker.h"
#include "trace/trace_recorder.h"

namespace gandiva::shim {

// Starts recording if GANDIVA_SHIM_TRACE names a file (trace_start.cc). Called once,
// when the driver is loaded (the first CUDA call), like attaching the job: processes
// that merely inherit LD_PRELOAD never open the file.
void StartTraceFromEnv();

namespace trace {

// Whether this call is recorded. Before the driver is loaded, loads it first: the
// recorder starts there, and the first CUDA call (cuInit) belongs in the trace.
inline bool Recording() {
  if (__builtin_expect(On(), 0)) return true;
  if (__builtin_expect(g_driver_load_done.load(std::memory_order_relaxed), 1)) return false;
  LoadDriver();
  return On();
}

template <typename T>
inline uint64_t U64(T v) {
  if constexpr (std::is_pointer_v<T>)
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(v));
  else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>)
    return static_cast<uint64_t>(v);
  else
    return 0;
}

// The first five arguments, pointers by address.
template <typename... A>
inline void FillArgs(TraceRecord& rec, A... a) {
  const uint64_t v[] = {U64(a)..., 0};
  for (size_t i = 0; i < sizeof...(A) && i < 5; ++i) rec.arg[i] = v[i];
}

inline void Emit(TraceRecord& rec) {
  if (Ring* ring = ThreadRing()) Append(ring, rec);
}

// Runs `call` (the driver, as the policy makes it); when recording, writes its record:
// `fill(rec)` sets the arguments once the call returned, `then(rec)` runs after the
// record is written (a decision record that follows it). `kTimed`: the call's duration
// is measured (a second clock read); the launch path's calls (launches, copies,
// memsets) record their start only.
template <HookId Id, bool kTimed = true, typename Call, typename Fill, typename Then>
inline CUresult Traced(Call&& call, Fill&& fill, Then&& then) {
  if (__builtin_expect(!Recording(), 1)) return call();
  const uint64_t t0 = NowNs();
  const CUresult r = call();
  TraceRecord rec{};
  if constexpr (kTimed) {
    const uint64_t dur = NowNs() - t0;
    rec.dur_ns = dur > 0xffffffffull ? 0xffffffffu : static_cast<uint32_t>(dur);
  }
  rec.t_ns = t0;
  rec.hook = static_cast<uint16_t>(Id);
  rec.kind = kCall;
  rec.result = static_cast<int32_t>(r);
  if (CurrentThreadSlot()->serving_park) rec.flags |= kFlagServingPark;
  fill(rec);
  Emit(rec);
  then(rec);
  return r;
}

template <HookId Id, bool kTimed = true, typename Call, typename Fill>
inline CUresult Traced(Call&& call, Fill&& fill) {
  return Traced<Id, kTimed>(call, fill, [](const TraceRecord&) {});
}

// Launch geometry: cuLaunchKernel and cuLaunchCooperativeKernel take (f, grid x y z,
// block x y z, shared bytes, stream, ...), cuGraphLaunch (graph, stream).
template <typename F, typename... A>
inline void FillLaunch(TraceRecord& rec, F f, A... a) {
  rec.arg[0] = U64(f);
  if constexpr (sizeof...(A) >= 8) {
    const auto t = std::make_tuple(a...);
    rec.arg[1] = PackDim3(std::get<0>(t), std::get<1>(t), std::get<2>(t));
    rec.arg[2] = PackDim3(std::get<3>(t), std::get<4>(t), std::get<5>(t));
    rec.arg[4] = std::get<6>(t);
    rec.arg[3] = U64(std::get<7>(t));
  } else if constexpr (sizeof...(A) >= 1) {
    rec.arg[3] = U64(std::get<0>(std::make_tuple(a...)));
  }
}

inline void FillLaunchEx(TraceRecord& rec, const CUlaunchConfig* c, CUfunction f) {
  rec.arg[0] = U64(f);
  if (!c) return;
  rec.arg[1] = PackDim3(c->gridDimX, c->gridDimY, c->gridDimZ);
  rec.arg[2] = PackDim3(c->blockDimX, c->blockDimY, c->blockDimZ);
  rec.arg[3] = U64(c->hStream);
  rec.arg[4] = c->sharedMemBytes;
}

// Resident device bytes the shim tracks after a memory call.
inline uint64_t TrackedBytes() { return MemoryTracker::Get().Totals().device_bytes; }

// After a sync the shim saw: its decision, and at a boundary what it would do with
// device memory there (a kMark record).
inline void FillSync(TraceRecord& rec, const ThreadSlot* slot, int decided) {
  rec.arg[3] = slot->detector.boundaries();
  rec.arg[4] = static_cast<uint64_t>(slot->detector.period());
  if (decided & kSyncBoundary) rec.flags |= kFlagBoundary;
  if (decided & kSyncDrove) rec.flags |= kFlagDrove;
}

inline void EmitBoundaryMark(uint64_t t_ns) {
  const MemoryTracker::Decisions d = MemoryTracker::Get().CurrentDecisions();
  TraceRecord mark{};
  mark.t_ns = t_ns;
  mark.hook = kNoHook;
  mark.kind = kMark;
  mark.arg[0] = d.resident_bytes;
  mark.arg[1] = d.swap_out_bytes;
  mark.arg[2] = d.checkpoint_bytes;
  mark.arg[3] = d.allocations;
  mark.arg[4] = (d.made_after << 32) | (d.freed_after & 0xffffffffu);
  Emit(mark);
}

inline void FillSymbol(TraceRecord& rec, const char* symbol) {
  // Its first 32 bytes, NUL-padded (not NUL-terminated when it has 32 or more).
  char s[32] = {};
  if (symbol) std::memcpy(s, symbol, strnlen(symbol, sizeof(s)));
  std::memcpy(rec.arg, s, sizeof(s));
}

}  // namespace trace
}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_TRACE_TRACE_HOOKS_H_
