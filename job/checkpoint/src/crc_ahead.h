// The writer's CRC32C of the next chunk, computed on a thread of its own while
// the current chunk is written (sealed and sent, for a migration): a frame's
// header carries its payload's checksum, so without this every chunk's
// checksum pass sits between two writes, in series (~0.1 s per GiB here, a
// sixth of a migration's stream). Only large writes use it, which hand the
// writer a run of whole chunks that stay put until the write returns.
// Without a thread (gandiva/common/helper_thread.h) the writer computes each
// inline.
//
// Thread-safety: Start and Of are called by the writing thread only.
#ifndef GANDIVA_CHECKPOINT_CRC_AHEAD_H_
#define GANDIVA_CHECKPOINT_CRC_AHEAD_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace gandiva::checkpoint {

class CrcAhead {
 public:
  CrcAhead() = default;
  ~CrcAhead();  // waits for a checksum under way, then ends the thread
  CrcAhead(const CrcAhead&) = delete;
  CrcAhead& operator=(const CrcAhead&) = delete;

  // Begins the CRC32C of [p, p + n), which the caller keeps unchanged until Of
  // returns it or Settle (starts the thread on first use).
  void Start(const uint8_t* p, size_t n);
  // The CRC32C of [p, p + n): the one begun for it, or computed here.
  uint32_t Of(const uint8_t* p, size_t n);
  // Drops a checksum not begun yet and waits for one under way: nothing reads
  // the caller's bytes after this returns.
  void Settle();

 private:
  struct Span {
    const uint8_t* p = nullptr;
    size_t n = 0;
    bool Is(const uint8_t* q, size_t m) const { return p == q && n == m; }
  };
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  Span queued_;  // begun, not taken by the thread yet (guarded by mu_, as all below)
  Span busy_;    // the thread is on it
  Span result_;  // crc_ is its checksum
  uint32_t crc_ = 0;
  bool stop_ = false;
  bool no_thread_ = false;  // the thread could not be started: all inline
  std::thread thread_;
};

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_CRC_AHEAD_H_
