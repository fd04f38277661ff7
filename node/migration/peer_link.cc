// DEALER socket with CURVE; see peer_link.h.
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

Status PeerLink::Send(protocol::MessageType type, const protocol::Json& fields,
                      std::string_view payload) {
  try {
    const std::string req = protocol::EncodeRequest(type, fields);
    auto more = zmq::send_flags::sndmore;
    if (!impl_->sock.send(zmq::message_t(), more) ||
        !impl_->sock.send(zmq::buffer(req), payload.empty() ? zmq::send_flags::none : more) ||
        (!payload.empty() && !impl_->sock.send(zmq::buffer(payload.data(), payload.size()))))
      return Unavailable("peer " + endpoint_ + " does not take requests");
    ++outstanding_;
    return Status::Ok();
  } catch (const zmq::error_t& e) {
    return Unavailable("peer " + endpoint_ + ": " + e.what());
  }
}

StatusOr<protocol::Json> PeerLink::Receive() {
  try {
    zmq::message_t delimiter, body;
    if (!impl_->sock.recv(delimiter) || !delimiter.more() || !impl_->sock.recv(body))
      return Unavailable("no reply from peer " + endpoint_ + " within " +
                         std::to_string(timeout_ms_) +
                         " ms (down, unreachable, or it does not accept this node's key)");
    --outstanding_;
    return protocol::DecodeReply(body.to_string_view());
  } catch (const zmq::error_t& e) {
    return Unavailable("peer " + endpoint_ + ": " + e.what());
  }
}

StatusOr<protocol::Json> PeerLink::Call(protocol::MessageType type, const protocol::Json& fields,
                                        std::string_view payload) {
  GD_RETURN_IF_ERROR(Send(type, fields, payload));
  GD_ASSIGN_OR_RETURN(protocol::Json reply, Receive());
  // A peer's reply is read by key: check it has the schema's fields and types first.
  // Fields this node does not know (a newer peer) are allowed.
  if (Status s = protocol::ValidateReply(type, reply, protocol::UnknownFields::kAllow); !s.ok())
    return Status(s.code(), "peer " + endpoint_ + ": " + s.message());
  return reply;
}

}  // namespace gandiva::controller
