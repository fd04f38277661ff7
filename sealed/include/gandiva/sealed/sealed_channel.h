// A migration's state, sealed (sealed_frames.h), on the TCP connection that
// joins the source job to the destination job, and how each gandivad hands
// that connection to its job.
//
// The gandivads open the connection and check each other's hello (frame 0);
// then each passes its end to its job over the Unix socket of the transfer
// target "sealed:PATH" (a Handoff: the key, the next frame number, and the
// socket itself as SCM_RIGHTS). The source job writes its checkpoint stream
// straight into sealed frames on it, the destination job reads and opens them:
// the state crosses no daemon, and every byte is copied and touched only by the
// two jobs (their serialisation, the cipher, the kernel's TCP copy).
//
// Thread-safety: a writer or reader is used by one thread.
#ifndef GANDIVA_SEALED_SEALED_CHANNEL_H_
#define GANDIVA_SEALED_SEALED_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/sealed/sealed_frames.h"
#include "gandiva/status.h"

namespace gandiva::sealed {

// Payload per data frame: small enough that a frame is sealed and sent, or
// received and opened, while still in the core's 1 MiB L2 cache, large enough
// that per-frame costs vanish. 1 GiB over loopback on the 2-vCPU VM (median
// of 5, transfer_floor): 1 MiB frames 361-428 ms, 512 KiB 296-336 ms, 384 and
// 768 KiB the same as 512, 128 KiB 480-490 ms (plain TCP 190).
inline constexpr size_t kFramePayload = 512u << 10;

// Whether a wait should give up (the migration was aborted, the node stops).
using CancelledFn = std::function<bool()>;
inline constexpr char kAborted[] = "the migration was aborted";

// Waits until `events` (poll's) are ready on fd: true, or false at
// deadline_ns (CLOCK_MONOTONIC). Unavailable(kAborted) once `cancelled` says so.
StatusOr<bool> WaitFor(int fd, short events, uint64_t deadline_ns, const CancelledFn& cancelled);

// Handoff flags, test-only (gandivad --fault): flip a bit of the first data
// frame after sealing it, as a device on the path could (authentication
// catches it), or before (the checkpoint stream's checksums catch it); or cut
// the connection after the first data frame, as a network could.
inline constexpr uint32_t kHandoffTamperSealed = 1;
inline constexpr uint32_t kHandoffCorruptPlain = 2;
inline constexpr uint32_t kHandoffCutMidway = 4;

struct Handoff {
  UniqueFd connection;  // the TCP connection to the peer job
  BulkKey key{};
  uint64_t next_seq = 0;
  uint32_t flags = 0;
};

// gandivad: passes `connection` (kept open by the caller too) to the job on `unix_fd`.
Status SendHandoff(int unix_fd, int connection, const BulkKey& key, uint64_t next_seq,
                   uint32_t flags);
// The job: takes the connection from gandivad, waiting at most timeout_ms.
StatusOr<Handoff> ReceiveHandoff(int unix_fd, int timeout_ms);

// The destination job's one message back to the source job, before the
// stream: what it holds already (checkpoint/src/fresh_state.h). One sealed
// frame numbered from the upper half of the frame numbers, which the stream
// never reaches, so no nonce is used twice under the key; at most
// kMaxSealedPayload bytes.
inline constexpr uint64_t kReplySeq = uint64_t{1} << 63;
Status SendReply(int fd, const BulkKey& key, std::span<const uint8_t> payload, int timeout_ms);
StatusOr<std::vector<uint8_t>> ReceiveReply(int fd, const BulkKey& key, int timeout_ms);

class SealAhead;  // seals a large write's frames on helper threads

class SealedWriter {
 public:
  SealedWriter(UniqueFd fd, const BulkKey& key, uint64_t first_seq, int timeout_ms);
  ~SealedWriter();
  // Buffers bytes and sends each full frame.
  Status Write(const void* data, size_t n);
  // Sends one frame of its own (the hello).
  Status WriteFrame(uint32_t flags, std::span<const uint8_t> payload);
  // Sends what is buffered, then the last frame; the stream is complete.
  Status Finish();
  uint64_t next_seq() const { return sealer_.next_seq(); }
  uint64_t bytes() const { return bytes_; }
  int fd() const { return fd_.get(); }
  // Test-only: flip one bit of the next data frame after it is sealed.
  void TamperWithNextFrame() { tamper_ = true; }
  // Applies a handoff's test-only flags.
  void ApplyTestFlags(uint32_t flags) {
    tamper_ = flags & kHandoffTamperSealed;
    corrupt_ = flags & kHandoffCorruptPlain;
    cut_ = flags & kHandoffCutMidway;
  }

 private:
  Status Flush();
  // Seals `payload` (the buffered bytes, or a whole frame of the caller's)
  // into frame_ and sends it; the test-only tamper and cut apply here.
  Status SealAndSend(std::span<const uint8_t> payload);
  // Sends a sealed data frame of `payload` bytes; the test-only tamper and cut
  // apply here.
  Status SendSealed(std::span<uint8_t> frame, size_t payload);
  UniqueFd fd_;
  BulkKey key_;  // for the sealers of a large write's frames (seal_ahead.h)
  FrameSealer sealer_;
  int timeout_ms_;
  std::vector<uint8_t> frame_;  // header, payload being filled, tag
  size_t filled_ = 0;
  uint64_t bytes_ = 0;
  bool tamper_ = false;
  bool corrupt_ = false;
  bool cut_ = false;
  std::unique_ptr<SealAhead> ahead_;  // made on the first large write
};

class SealedReader {
 public:
  SealedReader(UniqueFd fd, const BulkKey& key, uint64_t first_seq);
  // The next opened frame: its flags and payload (valid until the next call).
  // A data frame that fits `into` is received and opened there (no copy out
  // of ours); any other in our buffer. DataLoss for a frame that does not open
  // or a stream cut short; DeadlineExceeded after timeout_ms of silence.
  struct Frame {
    uint32_t flags;
    std::span<const uint8_t> payload;
  };
  StatusOr<Frame> NextFrame(int timeout_ms, const CancelledFn& cancelled = nullptr,
                            std::span<uint8_t> into = {});
  // Stream reading: up to n bytes of data frames; 0 once the last frame opened.
  StatusOr<size_t> Read(void* out, size_t n, int timeout_ms);
  bool done() const { return done_; }
  uint64_t next_seq() const { return opener_.next_seq(); }
  int fd() const { return fd_.get(); }
  // Gives the connection up (to hand it to a job), with the frame number due next.
  UniqueFd Release() { return std::move(fd_); }

 private:
  UniqueFd fd_;
  FrameOpener opener_;
  std::unique_ptr<uint8_t[]> buf_;  // frames that are not received in place
  size_t buf_size_ = 0;
  std::span<const uint8_t> pending_;  // opened, not yet read
  bool done_ = false;
};

}  // namespace gandiva::sealed

#endif  // GANDIVA_SEALED_SEALED_CHANNEL_H_
