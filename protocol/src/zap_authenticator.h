// The ZeroMQ authentication (ZAP) handler of gandivad's TCP endpoint: accepts a
// CURVE client only if its public key is in the node's authorized keys (an
// operator's) or its peer keys (another node's). Without it, CURVE would admit
// any client that knows the server's key. The user id it gives the connection
// ("operator:NAME", "peer:NAME") comes with every message as its User-Id
// property: the server's access rules read the role from it.
#ifndef GANDIVA_PROTOCOL_ZAP_AUTHENTICATOR_H_
#define GANDIVA_PROTOCOL_ZAP_AUTHENTICATOR_H_

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <zmq.hpp>

namespace gandiva::protocol {

class ZapAuthenticator {
 public:
  // Binds inproc://zeromq.zap.01 in `ctx`; must start before the TCP socket binds.
  ZapAuthenticator(zmq::context_t& ctx, std::map<std::string, std::string> operators,
                   std::map<std::string, std::string> peers);
  ~ZapAuthenticator();
  uint64_t refused() const { return refused_.load(); }

 private:
  void Serve();
  zmq::socket_t sock_;
  std::map<std::string, std::string> operators_, peers_;  // Z85 key -> name
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_ZAP_AUTHENTICATOR_H_
