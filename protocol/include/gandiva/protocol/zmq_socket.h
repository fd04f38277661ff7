// The one place a ZeroMQ client socket is set up, for the API client and for a
// node's link to its peers: no lingering at close, send and receive time-outs,
// and CURVE client keys when the endpoint requires them.
#ifndef GANDIVA_PROTOCOL_ZMQ_SOCKET_H_
#define GANDIVA_PROTOCOL_ZMQ_SOCKET_H_

#include <zmq.hpp>

#include "gandiva/protocol/curve.h"

namespace gandiva::protocol {

inline void ConfigureClientSocket(zmq::socket_t& socket, int timeout_ms,
                                  const CurveClientKeys& keys) {
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::sndtimeo, timeout_ms);
  socket.set(zmq::sockopt::rcvtimeo, timeout_ms);
  if (keys.enabled()) {
    socket.set(zmq::sockopt::curve_serverkey, keys.server_public_key);
    socket.set(zmq::sockopt::curve_publickey, keys.client.public_key);
    socket.set(zmq::sockopt::curve_secretkey, keys.client.secret_key);
  }
}

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_ZMQ_SOCKET_H_
