// The recorder: ring pool, writer thread, size bound. See trace_recorder.h.
#include "trace/trace_recorder.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"

namespace gandiva::shim::trace {

constinit std::atomic<bool> g_on{false};
thread_local Ring* t_ring __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

// Everything the writer owns; the rings are shared with their threads.
struct Recorder {
  std::mutex mu;  // Start/Stop only
  int fd = -1;
  std::string path;
  uint64_t max_bytes = 0;
  // Written by the writer thread (then Stop); atomic so that CurrentStats may read them.
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> written{0};
  std::atomic<uint64_t> dropped_by_writer{0};  // records past the size bound
  std::atomic<bool> truncated{false};
  pthread_t writer{};
  bool writer_running = false;
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> wake{0};
  uint64_t start_ns = 0;
};

Recorder g_rec;
Ring g_rings[kMaxRings];
TraceRecord* g_pool = nullptr;
std::atomic<int> g_claimed{0};
std::atomic<uint64_t> g_unrecorded_threads{0};
std::atomic<uint64_t> g_start_ns{0};
thread_local bool t_claimed __attribute__((tls_model("initial-exec"))) = false;

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void StopRecording(const char* why) {
  if (g_rec.truncated) return;
  g_rec.truncated = true;
  g_on.store(false, std::memory_order_relaxed);
  GD_LOG(kWarn, "shim: trace %s: %s at %llu bytes; recording stopped", g_rec.path.c_str(), why,
         static_cast<unsigned long long>(g_rec.bytes.load()));
}

// Writes records [from, to) of one ring, as far as the size bound allows (room is
// kept for the kEnd record). Writer thread (or Stop, after the writer ended).
void WriteSpan(Ring& r, uint64_t from, uint64_t to) {
  uint64_t n = to - from;
  if (!g_rec.truncated) {
    const uint64_t room = g_rec.max_bytes - g_rec.bytes - sizeof(TraceRecord);
    if (n * sizeof(TraceRecord) > room) {
      const uint64_t fit = room / sizeof(TraceRecord);
      g_rec.dropped_by_writer += n - fit;
      n = fit;
      StopRecording("the trace reached GANDIVA_SHIM_TRACE_MAX_BYTES");
    }
  } else {
    g_rec.dropped_by_writer += n;
    n = 0;
  }
  uint64_t at = from;
  while (at < from + n) {
    const uint64_t slot = at % kRingRecords;
    const uint64_t run = std::min<uint64_t>(from + n - at, kRingRecords - slot);
    if (!WriteAll(g_rec.fd, &r.records[slot], run * sizeof(TraceRecord))) {
      g_rec.dropped_by_writer += from + n - at;
      StopRecording("cannot write the trace file");
      break;
    }
    g_rec.bytes += run * sizeof(TraceRecord);
    g_rec.written += run;
    at += run;
  }
}

void DrainAll() {
  const int n = std::min(g_claimed.load(std::memory_order_acquire), kMaxRings);
  for (int i = 0; i < n; ++i) {
    Ring& r = g_rings[i];
    const uint64_t head = r.head.load(std::memory_order_acquire);
    const uint64_t tail = r.tail.load(std::memory_order_relaxed);
    if (head == tail) continue;
    WriteSpan(r, tail, head);
    r.tail.store(head, std::memory_order_release);
  }
}

void* WriterMain(void*) {
  while (!g_rec.stop.load(std::memory_order_acquire)) {
    const uint32_t seen = g_rec.wake.load(std::memory_order_acquire);
    DrainAll();
    runtime::FutexWait(&g_rec.wake, seen, 2'000'000);  // 2 ms, or a half-full ring
  }
  return nullptr;
}

uint64_t DroppedTotal() {
  uint64_t d = g_rec.dropped_by_writer + g_unrecorded_threads.load(std::memory_order_relaxed);
  const int n = std::min(g_claimed.load(std::memory_order_acquire), kMaxRings);
  for (int i = 0; i < n; ++i) d += g_rings[i].dropped.load(std::memory_order_relaxed);
  return d;
}

void StopAtExit() { Stop(); }

// The child of a fork has no writer thread: it records nothing (its parent's trace
// stays the parent's).
void InForkChild() { g_on.store(false, std::memory_order_relaxed); }

}  // namespace

uint64_t NowNs() { return MonotonicNowNs() - g_start_ns.load(std::memory_order_relaxed); }

void WakeWriter() {
  g_rec.wake.fetch_add(1, std::memory_order_release);
  runtime::FutexWakeAll(&g_rec.wake);
}

Ring* ClaimRing() {
  if (t_claimed) return t_ring;
  if (!g_pool) return nullptr;
  t_claimed = true;
  const int i = g_claimed.fetch_add(1, std::memory_order_acq_rel);
  if (i >= kMaxRings) {
    g_unrecorded_threads.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  Ring& r = g_rings[i];
  r.index = static_cast<uint16_t>(i);
  r.records = g_pool + static_cast<size_t>(i) * kRingRecords;
  t_ring = &r;
  return t_ring;
}

bool Start(const Options& o) {
  std::lock_guard<std::mutex> lock(g_rec.mu);
  if (g_rec.fd >= 0) return true;  // already recording
  if (!g_pool) {
    const size_t bytes = sizeof(TraceRecord) * kRingRecords * kMaxRings;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      GD_LOG(kError, "shim: trace %s: cannot map the per-thread buffers", o.path.c_str());
      return false;
    }
    g_pool = static_cast<TraceRecord*>(p);
    static std::once_flag atfork;
    std::call_once(atfork, [] { pthread_atfork(nullptr, nullptr, &InForkChild); });
  }
  const int fd = ::open(o.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    GD_LOG(kError, "shim: cannot open the trace file %s: %s", o.path.c_str(), std::strerror(errno));
    return false;
  }
  TraceHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.record_bytes = sizeof(TraceRecord);
  h.hooks = static_cast<uint32_t>(o.hooks);
  const uint64_t names_bytes = uint64_t{kHookNameBytes} * h.hooks;
  // Records start on a 64-byte boundary.
  h.header_bytes = static_cast<uint32_t>((sizeof(TraceHeader) + names_bytes + 63) / 64 * 64);
  timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  h.start_realtime_ns = static_cast<uint64_t>(rt.tv_sec) * 1'000'000'000ull + rt.tv_nsec;
  h.start_monotonic_ns = MonotonicNowNs();
  h.pid = static_cast<uint32_t>(getpid());
  std::strncpy(h.command, o.command.c_str(), sizeof(h.command) - 1);
  std::strncpy(h.settings, o.settings.c_str(), sizeof(h.settings) - 1);
  std::string head(h.header_bytes, '\0');
  std::memcpy(head.data(), &h, sizeof(h));
  for (int i = 0; i < o.hooks; ++i)
    std::strncpy(head.data() + sizeof(h) + uint64_t{kHookNameBytes} * i, o.hook_names[i],
                 kHookNameBytes - 1);
  const uint64_t max_bytes =
      std::max<uint64_t>(o.max_bytes, head.size() + 16 * sizeof(TraceRecord));
  if (!WriteAll(fd, head.data(), head.size())) {
    GD_LOG(kError, "shim: cannot write the trace file %s", o.path.c_str());
    ::close(fd);
    return false;
  }
  // Rings claimed in an earlier recording of this process start empty.
  const int claimed = std::min(g_claimed.load(std::memory_order_acquire), kMaxRings);
  for (int i = 0; i < claimed; ++i) {
    g_rings[i].tail.store(g_rings[i].head.load(std::memory_order_acquire),
                          std::memory_order_release);
    g_rings[i].dropped.store(0, std::memory_order_relaxed);
  }
  g_rec.fd = fd;
  g_rec.path = o.path;
  g_rec.max_bytes = max_bytes;
  g_rec.bytes = head.size();
  g_rec.written = 0;
  g_rec.dropped_by_writer = 0;
  g_rec.truncated = false;
  g_rec.stop.store(false);
  g_unrecorded_threads.store(0);
  g_start_ns.store(h.start_monotonic_ns, std::memory_order_relaxed);
  if (pthread_create(&g_rec.writer, nullptr, &WriterMain, nullptr) != 0) {
    GD_LOG(kError, "shim: trace %s: cannot start the writer thread", o.path.c_str());
    ::close(fd);
    g_rec.fd = -1;
    return false;
  }
  g_rec.writer_running = true;
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(&StopAtExit); });
  g_on.store(true, std::memory_order_release);
  return true;
}

void Stop() {
  std::lock_guard<std::mutex> lock(g_rec.mu);
  if (g_rec.fd < 0) return;
  g_on.store(false, std::memory_order_relaxed);
  if (g_rec.writer_running) {
    g_rec.stop.store(true, std::memory_order_release);
    WakeWriter();
    pthread_join(g_rec.writer, nullptr);
    g_rec.writer_running = false;
  }
  DrainAll();  // what was appended while the writer stopped
  TraceRecord end{};
  end.t_ns = NowNs();
  end.hook = kNoHook;
  end.kind = kEnd;
  end.flags = g_rec.truncated ? kFlagTruncated : 0;
  end.arg[0] = g_rec.written;
  end.arg[1] = DroppedTotal();
  end.arg[2] = static_cast<uint64_t>(std::min(g_claimed.load(), kMaxRings));
  if (WriteAll(g_rec.fd, &end, sizeof(end))) g_rec.bytes += sizeof(end);
  ::close(g_rec.fd);
  g_rec.fd = -1;
}

Stats CurrentStats() {
  std::lock_guard<std::mutex> lock(g_rec.mu);
  Stats s;
  s.records_written = g_rec.written;
  s.records_dropped = DroppedTotal();
  s.bytes_written = g_rec.bytes;
  s.threads = std::min(g_claimed.load(), kMaxRings);
  s.truncated = g_rec.truncated;
  return s;
}

}  // namespace gandiva::shim::trace
