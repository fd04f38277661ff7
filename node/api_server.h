// gandivad's API endpoints: a ZeroMQ ROUTER socket on a local Unix socket
// (owner-only, no authentication) and optionally one on TCP that requires
// CURVE authentication with an authorized client key. Every request gets
// exactly one reply; malformed requests get an error reply and are counted;
// none stops the server.
#ifndef GANDIVA_CONTROLLER_API_SERVER_H_
#define GANDIVA_CONTROLLER_API_SERVER_H_

#include <atomic>
#include <memory>
#include <set>
#include <string>

#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/status.h"

namespace gandiva::controller {

class Controller;

struct ApiServerOptions {
  std::string local_endpoint;             // ipc://...
  std::string tcp_endpoint;               // tcp://host:port, or empty
  protocol::CurveKeyPair server_keys;     // required with tcp_endpoint
  std::set<std::string> authorized_keys;  // client public keys the TCP endpoint accepts
};

class ApiServer {
 public:
  ApiServer(Controller* controller, ApiServerOptions options);
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
  std::string Serve(protocol::Request& request);
  void ServeOne(void* socket);
  Controller* controller_;
  ApiServerOptions options_;
  std::unique_ptr<Impl> impl_;
  uint64_t malformed_ = 0;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_CONTROLLER_API_SERVER_H_
