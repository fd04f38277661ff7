// gandivad's API endpoints: a ZeroMQ ROUTER socket on a local Unix socket
// (owner-only, or open to every local user with shared_local; each call says
// who made it, from the kernel's peer credentials) and optionally one on TCP that requires
// CURVE authentication with an authorized client key. Every request gets
// exactly one reply; malformed requests get an error reply and are counted;
// none stops the server.
//
// Replies may come later than the request: a handler that hands its work to a
// worker keeps the request's Reply, and completing it from the worker queues
// the reply (with the client's routing id) in an outbox whose eventfd is in the
// server's poll set, so the one API thread sends it and never waits itself.
// This keeps the wire protocol as it is: a peer pipelining migration chunks
// still gets one acknowledgement per chunk, in order, once it is written.
//
// Thread-safety: Bind and Run on one thread (the API thread), which alone
// touches the ZeroMQ sockets; Replies may complete on any thread.
#ifndef GANDIVA_PROTOCOL_API_SERVER_H_
#define GANDIVA_PROTOCOL_API_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/protocol/dispatcher.h"
#include "gandiva/status.h"

namespace gandiva::protocol {

struct ApiServerOptions {
  std::string local_endpoint;  // ipc://...
  std::string tcp_endpoint;    // tcp://host:port, or empty
  CurveKeyPair server_keys;    // required with tcp_endpoint
  // The client keys the TCP endpoint accepts, by role: an operator's (the
  // scheduler's, an admin's CLI) may do everything; a peer node's may only
  // migrate jobs to this one (Caller::peer_node).
  AuthorizedKeys authorized_keys;
  AuthorizedKeys peer_keys;
  bool shared_local = false;  // the local socket open to every user (0666), not owner-only
};

class ApiServer {
 public:
  using Handler = std::function<void(Call call, Reply reply)>;
  ApiServer(Handler handler, ApiServerOptions options);
  ~ApiServer();

  // Binds the endpoints. For the ipc:// endpoint it creates the directory
  // (0700), refuses if a live daemon answers there, removes a stale socket,
  // and makes the socket owner-only.
  Status Bind();
  // Serves until `stop` becomes true (checked at least every 100 ms).
  void Run(const std::atomic<bool>& stop);
  uint64_t malformed_requests() const { return malformed_; }

 private:
  struct Impl;
  class Outbox;
  void ServeOne(int socket_index);
  void SendQueued();
  Handler handler_;
  ApiServerOptions options_;
  std::unique_ptr<Impl> impl_;
  uint64_t malformed_ = 0;
};

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_API_SERVER_H_
