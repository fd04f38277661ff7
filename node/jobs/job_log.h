// Launched jobs' output files, size-capped, and reads of them by absolute offset.
//
// A job writes its stdout and stderr straight into files in the state directory
// (no pipe through gandivad: a job keeps running, and writing, when the daemon
// stops or dies). gandivad keeps each file under its cap: once one grows past it,
// its newest cap bytes move to FILE.1 (replacing the older one) and FILE starts
// over, so the newest output is kept: at most 2 x cap bytes, and what the job
// writes between two checks (every 250 ms, and at each read). Bytes are
// addressed by absolute offset (bytes written since the job started), which stay
// valid across these rotations: a reader that fell behind is told where the
// oldest kept byte is. A job's writes between the copy and the truncation (the
// time of one fstat) would be lost, and they are counted as dropped.
//
// Thread-safety: JobLogs has one lock (a leaf): rotations and reads of a file
// never interleave. The keeper thread caps every file periodically.
#ifndef GANDIVA_NODE_JOBS_JOB_LOG_H_
#define GANDIVA_NODE_JOBS_JOB_LOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "gandiva/status.h"

namespace gandiva::controller {

inline constexpr uint64_t kDefaultLogCapBytes = 64ull << 20;  // per stream (plus one .1 file)
inline constexpr size_t kMaxLogReadBytes = 1 << 20;

struct LogRead {
  std::string data;          // valid UTF-8 (bad bytes read as U+FFFD)
  uint64_t offset = 0;       // where data starts: past the asked offset if those were dropped
  uint64_t next_offset = 0;  // where to read on from
  uint64_t end_offset = 0;   // all written so far
};

// One output file and its rotated predecessor.
class CappedLog {
 public:
  CappedLog(std::string path, uint64_t cap) : path_(std::move(path)), cap_(cap) {}
  const std::string& path() const { return path_; }
  // If the file is larger than the cap, rotates it (see above).
  Status Cap();
  // Up to `max_bytes` from absolute `offset`, crossing from FILE.1 into FILE.
  StatusOr<LogRead> Read(uint64_t offset, size_t max_bytes) const;

 private:
  std::string path_;
  uint64_t cap_;
  uint64_t base_ = 0;       // absolute offset of FILE's first byte
  uint64_t old_first_ = 0;  // and of FILE.1's
  uint64_t old_size_ = 0;   // FILE.1's size (0: none yet)
};

// `bytes` as valid UTF-8, each invalid byte replaced by U+FFFD. With `hold_tail`,
// an incomplete sequence at the very end is left out (more bytes may complete
// it); *used says how many input bytes the result covers.
std::string ToValidUtf8(std::string_view bytes, bool hold_tail, size_t* used);

class JobLogs {
 public:
  explicit JobLogs(uint64_t cap_bytes) : cap_(cap_bytes) {}
  ~JobLogs() { Stop(); }
  void Start();
  void Stop();

  void Add(uint64_t job, const std::string& stdout_path, const std::string& stderr_path);
  // NotFound when the job has no log files here (not launched by this daemon).
  StatusOr<LogRead> Read(uint64_t job, bool stderr_stream, uint64_t offset, size_t max_bytes);
  void CapAll();

 private:
  struct Pair {
    CappedLog out, err;
  };
  const uint64_t cap_;
  std::mutex mu_;
  std::map<uint64_t, Pair> logs_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread keeper_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_JOB_LOG_H_
