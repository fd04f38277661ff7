// The recorder behind GANDIVA_SHIM_TRACE: per-thread rings of TraceRecords, drained
// into the trace file by one writer thread, off the calling threads' path.
//
// Hot path (Append): the owning thread writes 64 bytes into its own ring and
// publishes its head with one release store; no lock, no allocation, nothing that
// throws. The rings come from one pool mapped at Start. When a ring passes half full
// the thread wakes the writer (one futex syscall per half ring); a ring the writer
// has not drained in time drops records and counts them (the kEnd record says how
// many; the replayer refuses such a trace). Threads beyond kMaxRings are not recorded
// (counted as dropped too).
//
// Size bound: the file never passes max_bytes. When the next chunk would, the writer
// writes what fits, turns recording off, logs it, and ends the trace (kEnd with
// kFlagTruncated).
//
// Life: Start (once, from the first CUDA call) -> recording -> Stop (at exit, or by a
// test/bench): the writer drains every ring, writes kEnd and closes the file. A forked
// child does not record (its parent's writer thread is not in it).
#ifndef GANDIVA_SHIM_TRACE_TRACE_RECORDER_H_
#define GANDIVA_SHIM_TRACE_TRACE_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "trace/trace_format.h"

namespace gandiva::shim::trace {

// Per thread: 256 KiB, small enough to stay in a core's cache while the writer keeps
// up (at 50,000 calls/s a ring holds 80 ms of them).
inline constexpr uint32_t kRingRecords = 4096;
inline constexpr int kMaxRings = 256;

struct alignas(64) Ring {
  std::atomic<uint64_t> head{0};  // records appended (owner thread)
  uint64_t dropped_local = 0;     // owner thread only; published into `dropped`
  std::atomic<uint64_t> dropped{0};
  uint16_t index = 0;
  TraceRecord* records = nullptr;
  alignas(64) std::atomic<uint64_t> tail{0};  // records taken (writer)
};

struct Options {
  std::string path;
  uint64_t max_bytes = 64ull << 20;
  const char* const* hook_names = nullptr;
  int hooks = 0;
  std::string command;
  std::string settings;
};

// Recording on: one relaxed load, the only cost when it is off.
extern constinit std::atomic<bool> g_on;
inline bool On() { return g_on.load(std::memory_order_relaxed); }

// Opens the file, writes the header, maps the rings, starts the writer. Returns false
// (and logs why) if recording cannot start; then nothing is recorded.
bool Start(const Options& options);
// Drains, writes kEnd, closes. Idempotent; registered with atexit by Start.
void Stop();
// The calling thread's ring (nullptr if none is left or recording is off). Claimed
// once per thread; lock-free.
Ring* ClaimRing();
// The calling thread's ring, claimed on its first record.
extern thread_local Ring* t_ring __attribute__((tls_model("initial-exec")));
inline Ring* ThreadRing() {
  Ring* r = t_ring;
  return __builtin_expect(r != nullptr, 1) ? r : ClaimRing();
}
// Nanoseconds since the trace started (CLOCK_MONOTONIC).
uint64_t NowNs();
// Wakes the writer (a ring is half full).
void WakeWriter();

inline void Append(Ring* ring, TraceRecord& rec) {
  const uint64_t h = ring->head.load(std::memory_order_relaxed);
  if (__builtin_expect(h - ring->tail.load(std::memory_order_acquire) >= kRingRecords, 0)) {
    ring->dropped.store(++ring->dropped_local, std::memory_order_relaxed);
    return;
  }
  rec.thread = ring->index;
  ring->records[h % kRingRecords] = rec;
  ring->head.store(h + 1, std::memory_order_release);
  if (__builtin_expect((h + 1) % (kRingRecords / 2) == 0, 0)) WakeWriter();
}

// What the recorder did, for tests and the bench.
struct Stats {
  uint64_t records_written = 0;
  uint64_t records_dropped = 0;
  uint64_t bytes_written = 0;
  int threads = 0;
  bool truncated = false;
};
Stats CurrentStats();

}  // namespace gandiva::shim::trace

#endif  // GANDIVA_SHIM_TRACE_TRACE_RECORDER_H_
