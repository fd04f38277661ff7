// Sealing a large write's frames on threads of their own, ahead of the thread
// that sends them: the sending thread (the source job's, which paces a
// migration's stream: the kernel's send and, on loopback, the peer's receive
// path run on it) then only sends, and the cipher runs on other cores. One
// sealer thread keeps up with the kernel where a core seals faster than the
// link carries; where it does not (OpenSSL's AES-256-GCM seals ~2-6 GB/s per
// core, a 100 Gb/s link carries 12), more sealers share the frames: each frame
// is sealed under its own number whichever thread seals it, so the bytes on
// the wire are the same for any number of sealers. A ring of frame buffers,
// each sealed by a helper and sent by the caller in turn. Without a thread
// (the process may be out of them) Run returns false and the caller seals and
// sends each frame itself.
//
// Thread-safety: Run is called by one thread; the sealer it is given is used
// only by that thread, before and after a Run.
#ifndef GANDIVA_SEALED_SEAL_AHEAD_H_
#define GANDIVA_SEALED_SEAL_AHEAD_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "gandiva/sealed/sealed_frames.h"
#include "gandiva/status.h"

namespace gandiva::sealed {

class SealAhead {
 public:
  // `sealers` threads (at least 1), each with an OpenSSL context of its own
  // under `key`, the key of `sealer`, whose numbers the frames take.
  SealAhead(FrameSealer* sealer, const BulkKey& key, int sealers);
  ~SealAhead();  // ends the threads
  SealAhead(const SealAhead&) = delete;
  SealAhead& operator=(const SealAhead&) = delete;

  // The sealer threads a writer starts with on this machine: one per four
  // cores, at most four (the job is parked while it migrates, but the node's
  // other jobs and the kernel's network path want cores too).
  static int DefaultSealers();

  // Seals `frames` data frames of `frame_payload` bytes each from `p`, in
  // order, and calls send(frame) with each sealed frame (header, ciphertext,
  // tag) on this thread; the first error of either ends it, in *result. The
  // sealer's next number is then past all of them, sent or not (a number is
  // never used twice). False (nothing sealed) when no thread could be had.
  using Send = std::function<Status(std::span<uint8_t> frame)>;
  [[nodiscard]] bool Run(const uint8_t* p, size_t frames, size_t frame_payload, const Send& send,
                         Status* result);

 private:
  void Loop(size_t t);

  FrameSealer* sealer_;
  const BulkKey key_;
  const size_t sealers_;
  // Two frames per sealer in flight, and never fewer than four buffers.
  std::vector<std::vector<uint8_t>> buffers_;
  std::mutex mu_;
  std::condition_variable cv_;
  // The write under way (guarded by mu_, as all below).
  const uint8_t* p_ = nullptr;
  uint64_t first_seq_ = 0;
  size_t frames_ = 0;
  size_t payload_ = 0;
  uint64_t run_ = 0;               // counts Runs: a helper joins each once
  std::vector<size_t> sealed_in_;  // per buffer: 1 + the frame it holds sealed, or 0
  size_t sent_ = 0;                // frames sent so far (their buffers free again)
  size_t helpers_ = 0;             // the threads that share the write
  size_t busy_ = 0;                // helpers still within the write
  bool stop_ = false;
  Status seal_error_;
  bool no_thread_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gandiva::sealed

#endif  // GANDIVA_SEALED_SEAL_AHEAD_H_
