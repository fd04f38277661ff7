// Sealing a large write's frames on a thread of its own, ahead of the thread
// that sends them: the sending thread (the source job's, which paces a
// migration's stream: the kernel's send and, on loopback, the peer's receive
// path run on it) then only sends, and the seal runs on another core. Four
// frame buffers, each sealed by the helper and sent by the caller in turn.
// Without a thread (the process may be out of them) Run returns false and the
// caller seals and sends each frame itself.
//
// Thread-safety: Run is called by one thread; the sealer it is given is used
// by the helper only while Run is under way.
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
  explicit SealAhead(FrameSealer* sealer) : sealer_(sealer) {}
  ~SealAhead();  // ends the thread
  SealAhead(const SealAhead&) = delete;
  SealAhead& operator=(const SealAhead&) = delete;

  // Seals `frames` data frames of `frame_payload` bytes each from `p`, in
  // order, and calls send(frame) with each sealed frame (header, ciphertext,
  // tag) on this thread; the first error of either ends it, in *result.
  // False (nothing sealed) when no thread could be had.
  using Send = std::function<Status(std::span<uint8_t> frame)>;
  [[nodiscard]] bool Run(const uint8_t* p, size_t frames, size_t frame_payload, const Send& send,
                         Status* result);

 private:
  void Loop();

  FrameSealer* sealer_;
  static constexpr size_t kBuffers = 4;
  std::vector<uint8_t> buffers_[kBuffers];
  std::mutex mu_;
  std::condition_variable cv_;
  // The write under way (guarded by mu_, as all below).
  const uint8_t* p_ = nullptr;
  size_t frames_ = 0;
  size_t payload_ = 0;
  size_t sealed_ = 0;  // frames sealed so far
  size_t sent_ = 0;    // frames sent so far (their buffers free again)
  bool busy_ = false;  // the helper is within the write
  bool stop_ = false;
  Status seal_error_;
  bool no_thread_ = false;
  std::thread thread_;
};

}  // namespace gandiva::sealed

#endif  // GANDIVA_SEALED_SEAL_AHEAD_H_
