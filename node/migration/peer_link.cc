// A DEALER socket with CURVE; see peer_link.h.
#include "migration/peer_link.h"

#include <zmq.hpp>

#include "gandiva/protocol/zmq_socket.h"

namespace gandiva::controller {

struct PeerLink::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
};

PeerLink::PeerLink(std::string endpoint, protocol::CurveClientKeys keys, int timeout_ms)
    : endpoint_(std::move(endpoint)), timeout_ms_(timeout_ms), impl_(std::make_unique<Impl>()) {
  protocol::ConfigureClientSocket(impl_->sock, timeout_ms, keys);
  impl_->sock.connect(endpoint_);
}

PeerLink::~PeerLink() = default;

StatusOr<protocol::Json> PeerLink::Call(protocol::MessageType type, const protocol::Json& fields) {
  protocol::Json reply;
  try {
    // A DEALER sends [empty delimiter, request] and gets [empty delimiter, reply].
    const std::string req = protocol::EncodeRequest(type, fields);
    if (!impl_->sock.send(zmq::message_t(), zmq::send_flags::sndmore) ||
        !impl_->sock.send(zmq::buffer(req), zmq::send_flags::none))
      return Unavailable("peer " + endpoint_ + " does not take requests");
    zmq::message_t delimiter, body;
    if (!impl_->sock.recv(delimiter) || !delimiter.more() || !impl_->sock.recv(body))
      return Unavailable("no reply from peer " + endpoint_ + " within " +
                         std::to_string(timeout_ms_) +
                         " ms (down, unreachable, or it does not accept this node's key)");
    GD_ASSIGN_OR_RETURN(reply, protocol::DecodeReply(body.to_string_view()));
  } catch (const zmq::error_t& e) {
    return Unavailable("peer " + endpoint_ + ": " + e.what());
  }
  // A peer's reply is read by key: check it has the schema's fields and types first.
  // Fields this node does not know (a newer peer) are allowed.
  if (Status s = protocol::ValidateReply(type, reply, protocol::UnknownFields::kAllow); !s.ok())
    return Status(s.code(), "peer " + endpoint_ + ": " + s.message());
  return reply;
}

}  // namespace gandiva::controller
