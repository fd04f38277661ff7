// The shim's driver-call trace (GANDIVA_SHIM_TRACE=FILE): its file format, shared by
// the recorder (trace_recorder.*), the reader (trace_reader.*), `gandiva-shim-trace`
// and the replayer in tests/shim. Independent of CUDA's headers.
//
// File: a TraceHeader, the hook names (kHookNameBytes each, NUL-padded, in the
// recording shim's hooks.def order: a record names its hook by index into this
// table, so a trace stays readable after hooks.def changes), then 64-byte records,
// in chunks per thread (each thread's records in call order; the reader orders all
// of them by start time). The last record is a kEnd record unless the process died
// before the trace was closed. Little-endian (x86-64 and aarch64 hosts).
//
// What each record's arg[] holds depends on what the shim does for the call (the
// hook's policy in hooks.def); see docs/shim.md ("Recording driver calls") and
// RecordFlag below. Records of kind kMark are the shim's decisions at an inferred
// iteration boundary (what it tracks, and what a swap or a checkpoint would move).
#ifndef GANDIVA_SHIM_TRACE_TRACE_FORMAT_H_
#define GANDIVA_SHIM_TRACE_TRACE_FORMAT_H_

#include <cstdint>

namespace gandiva::shim::trace {

inline constexpr char kMagic[8] = {'G', 'D', 'S', 'H', 'T', 'R', 'C', '\0'};
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kHookNameBytes = 48;
inline constexpr uint16_t kNoHook = 0xffff;

struct TraceHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // header + hook names: where the records begin
  uint32_t record_bytes;  // sizeof(TraceRecord)
  uint32_t hooks;         // hook names that follow the header
  uint64_t start_realtime_ns;
  uint64_t start_monotonic_ns;  // records' t_ns count from here
  uint32_t pid;
  uint32_t reserved;
  char command[64];  // the recorded program (argv[0]'s base name and first argument)
  // The settings that change the shim's decisions, "NAME=value;..." (the replayer
  // sets them again): GANDIVA_SHIM_VMM, GANDIVA_SHIM_VMM_MIN_BYTES,
  // GANDIVA_GPU_MEMORY_BYTES, GANDIVA_SHIM_CHECKPOINT.
  char settings[384];
};
static_assert(sizeof(TraceHeader) == 496);

enum RecordKind : uint8_t {
  kCall = 1,  // a hooked driver call, written when it returned
  kMark = 2,  // the shim's state at an inferred iteration boundary (after that sync's kCall)
  kEnd = 3,   // the trace's last record
};

enum RecordFlag : uint8_t {
  kFlagBoundary = 1 << 0,     // Sync: this thread's detector took the sync for a boundary
  kFlagDrove = 1 << 1,        // Sync: ...and it drove the job's boundary (gate, profile)
  kFlagWrapped = 1 << 2,      // cuGetProcAddress: the shim answered with its wrapper
  kFlagServingPark = 1 << 3,  // made by the thread serving a park (a checkpoint's copies)
  kFlagTruncated = 1 << 4,    // kEnd: the trace reached its size limit; recording stopped
};

struct TraceRecord {
  uint64_t t_ns;    // call start, ns since start_monotonic_ns
  uint32_t dur_ns;  // time in the call (saturates at 4.29 s)
  uint16_t hook;    // index into the hook names; kNoHook for kMark and kEnd
  uint16_t thread;  // the recording thread, numbered in order of its first recorded call
  int32_t result;   // the CUresult the program got
  uint16_t aux;     // cuGetProcAddress: the CUDA version asked for; TrackPitch: element size
  uint8_t kind;     // RecordKind
  uint8_t flags;    // RecordFlag bits
  // The arguments that matter, by policy (docs/shim.md has the table):
  //   Launch/LaunchEx  function or graph, grid, block (x | y << 21 | z << 42), stream, shared bytes
  //   ProcAddress      the symbol's first 32 bytes (NUL-padded), flags
  //   Sync             first three arguments, then the thread's boundaries so far, its period
  //   Mem*, Track*     the address or handle (the result for allocations), sizes, ...,
  //                    arg[4] = resident device bytes tracked after the call
  //   others           the first five arguments (pointers by address)
  //   kMark            resident device bytes, swap-out bytes (VMM-backed, resident),
  //                    checkpoint bytes (tracked allocations), live allocations,
  //                    made-after-first-boundary << 32 | freed-after-first-boundary
  //   kEnd             records written, records dropped, threads recorded
  uint64_t arg[5];
};
static_assert(sizeof(TraceRecord) == 64);

// Launch geometry in one word (21 bits per dimension, as the driver's limits allow).
constexpr uint64_t PackDim3(uint64_t x, uint64_t y, uint64_t z) {
  constexpr uint64_t kMask = (1u << 21) - 1;
  return (x & kMask) | (y & kMask) << 21 | (z & kMask) << 42;
}
constexpr uint32_t Dim3At(uint64_t packed, int i) {
  return static_cast<uint32_t>(packed >> (21 * i) & ((1u << 21) - 1));
}

}  // namespace gandiva::shim::trace

#endif  // GANDIVA_SHIM_TRACE_TRACE_FORMAT_H_
