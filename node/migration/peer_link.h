// A persistent, authenticated (CURVE) connection from one gandivad to a
// peer's TCP endpoint, for a migration's steps: one request at a time, each
// answered in turn. The state itself goes on the bulk connection
// (bulk_channel.h).
#ifndef GANDIVA_NODE_MIGRATION_PEER_LINK_H_
#define GANDIVA_NODE_MIGRATION_PEER_LINK_H_

#include <memory>
#include <string>

#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/status.h"

namespace gandiva::controller {

class PeerLink {
 public:
  PeerLink(std::string endpoint, protocol::CurveClientKeys keys, int timeout_ms);
  ~PeerLink();

  // Sends one request and returns its reply, checked against the schema.
  StatusOr<protocol::Json> Call(protocol::MessageType type, const protocol::Json& fields);

 private:
  struct Impl;
  std::string endpoint_;
  int timeout_ms_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_PEER_LINK_H_
