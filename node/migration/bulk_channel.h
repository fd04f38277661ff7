// The TCP connection that carries one migration's state in sealed frames
// (sealed_frames.h). The destination listens on a fresh port of the address
// its API serves TCP on and tells the source the port (migrate_begin's reply);
// the source connects and sends the hello, the data frames and the last frame.
// The destination takes the first connection whose hello opens under the
// migration's key and names its job; any other is closed and does not disturb
// the migration.
//
// Thread-safety: each object is used by one thread; `cancelled` callbacks may
// read state other threads set.
#ifndef GANDIVA_NODE_MIGRATION_BULK_CHANNEL_H_
#define GANDIVA_NODE_MIGRATION_BULK_CHANNEL_H_

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"
#include "migration/sealed_frames.h"

namespace gandiva::controller {

// Whether the wait should give up (the migration was aborted, the node stops).
using CancelledFn = std::function<bool()>;

class BulkReceiver {
 public:
  // The next data payload, or an empty span once the last frame has opened
  // (then done() is true). DataLoss for a frame that does not open, a stream
  // cut short, or a peer silent for timeout_ms.
  StatusOr<std::span<const uint8_t>> Next(int timeout_ms, const CancelledFn& cancelled);
  bool done() const { return done_; }
  uint64_t bytes() const { return bytes_; }

 private:
  friend class BulkListener;
  BulkReceiver(UniqueFd fd, const BulkKey& key);
  UniqueFd fd_;
  FrameOpener opener_;
  std::vector<uint8_t> buf_;
  bool done_ = false;
  uint64_t bytes_ = 0;
};

class BulkListener {
 public:
  // Listens on `host` (an address of this node, "0.0.0.0" for all), a port the kernel picks.
  static StatusOr<std::unique_ptr<BulkListener>> Listen(const std::string& host);
  int port() const { return port_; }
  // Waits up to timeout_ms for the source of `job`'s migration, keyed `key`.
  StatusOr<std::unique_ptr<BulkReceiver>> Accept(const BulkKey& key, uint64_t job, int timeout_ms,
                                                 const CancelledFn& cancelled);

 private:
  BulkListener(UniqueFd fd, int port) : fd_(std::move(fd)), port_(port) {}
  UniqueFd fd_;
  int port_;
};

class BulkSender {
 public:
  // Connects to host:port and sends the hello for the destination's `job`.
  static StatusOr<std::unique_ptr<BulkSender>> Connect(const std::string& host, int port,
                                                       const BulkKey& key, uint64_t job,
                                                       int timeout_ms);
  // Seals and sends the next bytes (at most kMaxSealedPayload).
  Status Send(std::span<const uint8_t> bytes);
  // Sends the last frame: the stream is complete.
  Status Finish();
  uint64_t bytes() const { return bytes_; }
  // Test-only (gandivad --fault flip-wire-bit): flip one bit of the next data
  // frame after it is sealed, as a device on the path could.
  void TamperWithNextFrame() { tamper_ = true; }

 private:
  BulkSender(UniqueFd fd, const BulkKey& key, int timeout_ms);
  Status SendFrame(uint32_t flags, std::span<const uint8_t> payload);
  UniqueFd fd_;
  FrameSealer sealer_;
  int timeout_ms_;
  std::vector<uint8_t> buf_;
  uint64_t bytes_ = 0;
  bool tamper_ = false;
};

// "tcp://HOST:PORT" -> HOST ("*" and "0.0.0.0" stay as they are); empty if not TCP.
std::string HostOfTcpEndpoint(const std::string& endpoint);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_BULK_CHANNEL_H_
