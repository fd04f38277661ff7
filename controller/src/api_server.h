// gandivad's API endpoint: a ZeroMQ ROUTER socket on a local Unix socket
// (owner-only) and optionally on TCP. Every request gets exactly one reply;
// malformed requests get an error reply and are counted; none stops the server.
#ifndef GANDIVA_CONTROLLER_API_SERVER_H_
#define GANDIVA_CONTROLLER_API_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gandiva/protocol/codec.h"
#include "gandiva/status.h"

namespace gandiva::controller {

class Controller;

class ApiServer {
 public:
  ApiServer(Controller* controller, std::vector<std::string> endpoints);
  ~ApiServer();

  // Binds every endpoint. For ipc:// endpoints it creates the directory (0700),
  // refuses if a live daemon answers there, removes a stale socket, and makes
  // the socket owner-only.
  Status Bind();
  // Serves until `stop` becomes true (checked at least every 100 ms).
  void Run(const std::atomic<bool>& stop);
  uint64_t malformed_requests() const { return malformed_; }

 private:
  std::string Serve(const protocol::Request& request);
  struct Impl;
  Controller* controller_;
  std::vector<std::string> endpoints_;
  std::unique_ptr<Impl> impl_;
  uint64_t malformed_ = 0;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_CONTROLLER_API_SERVER_H_
