// A plain HTTP endpoint for Prometheus: GET /metrics answers the text that
// `render` makes; anything else gets 404 or 400. One thread, one connection at
// a time, each with a read deadline (a client that sends nothing holds it for
// at most that long); requests are read up to 8 KiB. Not authenticated: bind it
// to an address only the monitoring can reach (--metrics 127.0.0.1:9400).
#ifndef GANDIVA_NODE_API_METRICS_SERVER_H_
#define GANDIVA_NODE_API_METRICS_SERVER_H_

#include <atomic>
#include <functional>
#include <string>
#include <thread>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva::controller {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  explicit MetricsServer(Render render) : render_(std::move(render)) {}
  ~MetricsServer() { Stop(); }

  // "HOST:PORT" (IPv4; port 0 picks one). Binds and starts serving.
  Status Start(const std::string& address);
  void Stop();
  int port() const { return port_; }

 private:
  void Serve();
  void Answer(int fd);

  Render render_;
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_API_METRICS_SERVER_H_
