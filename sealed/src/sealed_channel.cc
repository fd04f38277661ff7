// Sealed frames on a socket: the writer, the reader and the destination's one
// reply; see sealed_channel.h (the handoff of the socket is in handoff.cc).
#include "gandiva/sealed/sealed_channel.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>

#include "gandiva/common/clock.h"
#include "gandiva/common/units.h"
#include "seal_ahead.h"

namespace gandiva::sealed {

namespace {

constexpr int kPollSliceMs = 100;  // how often a wait looks at `cancelled`

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// A reader that waits is woken once this much of what it still needs has
// arrived (SO_RCVLOWAT), not at every segment. On loopback the sender's core
// runs the receive path and pays each wake-up (in a VM, an inter-processor
// interrupt): with the default of one byte, ~17 % of a 1 GiB migration's
// source thread went to waking its reader. 128 KiB took the downtime from
// 296-301 ms to 270-284 (bench_migration, alternating); 256 KiB was slower
// than none (the window then outruns the receive buffer).
constexpr size_t kWakeLowWater = 128 << 10;

Status ReadExact(int fd, uint8_t* buf, size_t n, int timeout_ms, const CancelledFn& cancelled) {
  const uint64_t deadline = MonotonicNowNs() + static_cast<uint64_t>(timeout_ms) * kMs;
  while (n > 0) {
    const ssize_t r = recv(fd, buf, n, MSG_DONTWAIT);
    if (r > 0) {
      buf += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0) return DataLoss("the peer closed the bulk connection before the last frame");
    if (errno != EAGAIN && errno != EINTR) return DataLoss(Errno("bulk connection"));
    // Never more than the rest of this read, which the sender is sending: a
    // peer that stops short still wakes the reader (closed, or an error).
    const int low = static_cast<int>(std::min(n, kWakeLowWater));
    setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &low, sizeof low);
    GD_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLIN, deadline, cancelled));
    if (!ready)
      return DeadlineExceeded("no state from the peer for " + std::to_string(timeout_ms) + " ms");
  }
  return Status::Ok();
}

Status SendAll(int fd, const uint8_t* buf, size_t n, int timeout_ms) {
  const uint64_t deadline = MonotonicNowNs() + static_cast<uint64_t>(timeout_ms) * kMs;
  while (n > 0) {
    const ssize_t w = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      buf += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR)
      return Unavailable(Errno("the bulk connection"));
    GD_ASSIGN_OR_RETURN(bool ready, WaitFor(fd, POLLOUT, deadline, nullptr));
    if (!ready)
      return DeadlineExceeded("the peer took no state for " + std::to_string(timeout_ms) + " ms");
  }
  return Status::Ok();
}

// One whole frame, sealed into a buffer of its own, sent.
Status SendFrame(int fd, FrameSealer& sealer, uint32_t flags, std::span<const uint8_t> payload,
                 int timeout_ms) {
  std::vector<uint8_t> frame(kSealedHeaderBytes + payload.size() + kSealedTagBytes);
  GD_RETURN_IF_ERROR(sealer.Seal(flags, payload, frame.data()));
  return SendAll(fd, frame.data(), frame.size(), timeout_ms);
}

// The next frame: its header, checked; its body into the memory `place` gives
// for that header (StatusOr<uint8_t*>); its tag; then opened there.
template <typename Place>
StatusOr<SealedHeader> ReceiveFrame(int fd, FrameOpener& opener, int timeout_ms,
                                    const CancelledFn& cancelled, Place&& place) {
  uint8_t header_bytes[kSealedHeaderBytes];
  GD_RETURN_IF_ERROR(ReadExact(fd, header_bytes, sizeof header_bytes, timeout_ms, cancelled));
  GD_ASSIGN_OR_RETURN(SealedHeader header, opener.CheckHeader(header_bytes));
  GD_ASSIGN_OR_RETURN(uint8_t * body, place(header));
  uint8_t tag[kSealedTagBytes];
  GD_RETURN_IF_ERROR(ReadExact(fd, body, header.length, timeout_ms, cancelled));
  GD_RETURN_IF_ERROR(ReadExact(fd, tag, sizeof tag, timeout_ms, cancelled));
  GD_RETURN_IF_ERROR(opener.Open(header_bytes, body, tag));
  return header;
}

}  // namespace

StatusOr<bool> WaitFor(int fd, short events, uint64_t deadline_ns, const CancelledFn& cancelled) {
  for (;;) {
    const uint64_t now = MonotonicNowNs();
    if (now >= deadline_ns) return false;
    if (cancelled && cancelled()) return Unavailable(kAborted);
    const int slice =
        static_cast<int>(std::min<uint64_t>((deadline_ns - now) / kMs + 1, kPollSliceMs));
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, slice);
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return Internal(Errno("poll"));
  }
}

// ------------------------------------------------------------------ reply

Status SendReply(int fd, const BulkKey& key, std::span<const uint8_t> payload, int timeout_ms) {
  FrameSealer sealer(key, kReplySeq);
  return SendFrame(fd, sealer, kSealedData, payload, timeout_ms);
}

StatusOr<std::vector<uint8_t>> ReceiveReply(int fd, const BulkKey& key, int timeout_ms) {
  FrameOpener opener(key, kReplySeq);
  std::vector<uint8_t> body;
  GD_ASSIGN_OR_RETURN(SealedHeader header,
                      ReceiveFrame(fd, opener, timeout_ms, nullptr,
                                   [&](const SealedHeader& h) -> StatusOr<uint8_t*> {
                                     body.resize(h.length);
                                     return body.data();
                                   }));
  if (header.flags != kSealedData) return DataLoss("the peer's reply is not a data frame");
  return body;
}

// ------------------------------------------------------------------ writer

SealedWriter::SealedWriter(UniqueFd fd, const BulkKey& key, uint64_t first_seq, int timeout_ms)
    : fd_(std::move(fd)), key_(key), sealer_(key, first_seq), timeout_ms_(timeout_ms) {}
SealedWriter::~SealedWriter() = default;

Status SealedWriter::WriteFrame(uint32_t flags, std::span<const uint8_t> payload) {
  return SendFrame(fd_.get(), sealer_, flags, payload, timeout_ms_);
}

// Seals the buffered payload in place and sends it.
Status SealedWriter::Flush() {
  if (filled_ == 0) return Status::Ok();
  uint8_t* payload = frame_.data() + kSealedHeaderBytes;
  if (corrupt_) {
    payload[filled_ / 2] ^= 0x40;
    corrupt_ = false;
  }
  const size_t n = std::exchange(filled_, 0);
  return SealAndSend({payload, n});
}

Status SealedWriter::SealAndSend(std::span<const uint8_t> payload) {
  GD_RETURN_IF_ERROR(sealer_.Seal(kSealedData, payload, frame_.data()));
  return SendSealed({frame_.data(), kSealedHeaderBytes + payload.size() + kSealedTagBytes},
                    payload.size());
}

Status SealedWriter::SendSealed(std::span<uint8_t> frame, size_t payload) {
  if (tamper_) {
    frame[kSealedHeaderBytes + payload / 2] ^= 0x10;
    tamper_ = false;
  }
  bytes_ += payload;
  GD_RETURN_IF_ERROR(SendAll(fd_.get(), frame.data(), frame.size(), timeout_ms_));
  if (cut_) {
    shutdown(fd_.get(), SHUT_RDWR);
    cut_ = false;
  }
  return Status::Ok();
}

Status SealedWriter::Write(const void* data, size_t n) {
  // The frame buffer on first use: a writer that only sends a hello
  // (gandivad's) never faults in a megabyte of zeros.
  if (frame_.empty()) frame_.resize(kSealedHeaderBytes + kFramePayload + kSealedTagBytes);
  const auto* p = static_cast<const uint8_t*>(data);
  // Whole frames of a large write are sealed straight from the caller's bytes:
  // one pass over them instead of a copy and a pass. Two or more are sealed on
  // helper threads (seal_ahead.h), ahead of their sending here.
  if (n >= kFramePayload && !corrupt_) {
    GD_RETURN_IF_ERROR(Flush());
    const size_t frames = n / kFramePayload;
    if (frames >= 2) {
      if (!ahead_)
        ahead_ = std::make_unique<SealAhead>(&sealer_, key_, SealAhead::DefaultSealers());
      Status s;
      const auto send = [this](std::span<uint8_t> frame) {
        return SendSealed(frame, frame.size() - kSealedHeaderBytes - kSealedTagBytes);
      };
      if (ahead_->Run(p, frames, kFramePayload, send, &s)) {
        GD_RETURN_IF_ERROR(s);
        p += frames * kFramePayload;
        n -= frames * kFramePayload;
      }
    }
    for (; n >= kFramePayload; p += kFramePayload, n -= kFramePayload)
      GD_RETURN_IF_ERROR(SealAndSend({p, kFramePayload}));
  }
  while (n > 0) {
    const size_t take = std::min(n, kFramePayload - filled_);
    std::memcpy(frame_.data() + kSealedHeaderBytes + filled_, p, take);
    filled_ += take;
    p += take;
    n -= take;
    if (filled_ == kFramePayload) GD_RETURN_IF_ERROR(Flush());
  }
  return Status::Ok();
}

Status SealedWriter::Finish() {
  GD_RETURN_IF_ERROR(Flush());
  GD_RETURN_IF_ERROR(WriteFrame(kSealedLast, {}));
  shutdown(fd_.get(), SHUT_WR);
  return Status::Ok();
}

// ------------------------------------------------------------------ reader

SealedReader::SealedReader(UniqueFd fd, const BulkKey& key, uint64_t first_seq)
    : fd_(std::move(fd)), opener_(key, first_seq) {}

StatusOr<SealedReader::Frame> SealedReader::NextFrame(int timeout_ms, const CancelledFn& cancelled,
                                                      std::span<uint8_t> into) {
  if (done_) return DataLoss("read past the last frame");
  uint8_t* body = nullptr;
  auto place = [&](const SealedHeader& header) -> StatusOr<uint8_t*> {
    if (header.flags == kSealedData && header.length <= into.size()) return body = into.data();
    // Grown to the largest frame received here, uninitialised: a reader that
    // only takes a hello (gandivad's) never pays for a frame buffer; faulting
    // in 8 MiB of zeros up front took up to 24 ms of a migration's downtime here.
    if (header.length > buf_size_) {
      buf_.reset(new (std::nothrow) uint8_t[header.length]);
      buf_size_ = buf_ ? header.length : 0;
      if (!buf_) return ResourceExhausted("no memory for a bulk frame");
    }
    return body = buf_.get();
  };
  GD_ASSIGN_OR_RETURN(SealedHeader header,
                      ReceiveFrame(fd_.get(), opener_, timeout_ms, cancelled, place));
  if (header.flags == kSealedLast) {
    if (header.length != 0) return DataLoss("the last frame carries data");
    done_ = true;
  }
  return Frame{header.flags, std::span<const uint8_t>(body, header.length)};
}

StatusOr<size_t> SealedReader::Read(void* out, size_t n, int timeout_ms) {
  while (pending_.empty()) {
    if (done_) return size_t{0};
    // A data frame that fits is received and opened straight in the caller's
    // buffer: no copy out of ours.
    GD_ASSIGN_OR_RETURN(Frame frame,
                        NextFrame(timeout_ms, nullptr, {static_cast<uint8_t*>(out), n}));
    if (done_) return size_t{0};
    if (frame.flags != kSealedData)
      return DataLoss("bulk frame " + std::to_string(opener_.next_seq() - 1) +
                      " is not a data frame");
    if (!frame.payload.empty() && frame.payload.data() == out) return frame.payload.size();
    pending_ = frame.payload;  // in our buffer (or empty: read on)
  }
  const size_t take = std::min(n, pending_.size());
  std::memcpy(out, pending_.data(), take);
  pending_ = pending_.subspan(take);
  return take;
}

}  // namespace gandiva::sealed
