// A persistent, authenticated connection from one gandivad to a peer's TCP
// endpoint, for migration: requests may be pipelined (a window of chunks in
// flight, replies arrive in order), so the next chunk is on the wire while
// the peer writes the previous one into its job.
#ifndef GANDIVA_NODE_MIGRATION_PEER_LINK_H_
#define GANDIVA_NODE_MIGRATION_PEER_LINK_H_

#include <memory>
#include <string>
#include <string_view>

#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/status.h"

namespace gandiva::controller {

class PeerLink {
 public:
  PeerLink(std::string endpoint, protocol::CurveClientKeys keys, int timeout_ms);
  ~PeerLink();

  // Queues one request (with an optional payload frame) without waiting.
  Status Send(protocol::MessageType type, const protocol::Json& fields,
              std::string_view payload = {});
  // The reply to the oldest request not yet answered.
  StatusOr<protocol::Json> Receive();
  StatusOr<protocol::Json> Call(protocol::MessageType type, const protocol::Json& fields,
                                std::string_view payload = {});
  int outstanding() const { return outstanding_; }

 private:
  struct Impl;
  std::string endpoint_;
  int timeout_ms_;
  int outstanding_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_PEER_LINK_H_
