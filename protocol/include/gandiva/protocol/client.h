// A client for gandivad's API (the CLI, the Python package and the cluster
// scheduler use it). One request, one reply, with a timeout; never throws.
#ifndef GANDIVA_CLIENT_H_
#define GANDIVA_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>

#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/status.h"

namespace gandiva {

// The local endpoint when none is given: $GANDIVA_ENDPOINT, else
// ipc://$XDG_RUNTIME_DIR/gandiva/gandivad.sock, else for root
// ipc:///run/gandiva/gandivad.sock, else ipc:///run/user/<uid>/gandiva/gandivad.sock
// (systemd's runtime directory of the user). Never under /tmp.
std::string DefaultEndpoint();
// The cluster scheduler's, likewise: $GANDIVA_SCHEDULER, else scheduler.sock in
// the same directory.
std::string DefaultSchedulerEndpoint();

class ApiClient {
 public:
  // endpoint: "ipc:///path" or "tcp://host:port". timeout_ms bounds each call.
  explicit ApiClient(std::string endpoint, int timeout_ms = 5000);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  // Authenticates with CURVE (required by TCP endpoints).
  void SetCurve(protocol::CurveClientKeys keys) { curve_ = std::move(keys); }

  // Sends one request; returns the reply's fields or the daemon's error.
  // Unavailable when no daemon answers at the endpoint.
  StatusOr<protocol::Json> Call(protocol::MessageType type,
                                const protocol::Json& fields = protocol::Json::object());
  // Sends raw bytes as a request (for tests of malformed input) and returns the raw reply.
  StatusOr<std::string> CallRaw(const std::string& bytes);

  const std::string& endpoint() const { return endpoint_; }

 private:
  struct Impl;
  std::string endpoint_;
  int timeout_ms_;
  protocol::CurveClientKeys curve_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gandiva

#endif  // GANDIVA_CLIENT_H_
