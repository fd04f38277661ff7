// The ZeroMQ authentication (ZAP) handler of gandivad's TCP endpoint: accepts a
// CURVE client only if its public key is in the node's authorized keys.
// Without it, CURVE would admit any client that knows the server's key.
#ifndef GANDIVA_PROTOCOL_ZAP_AUTHENTICATOR_H_
#define GANDIVA_PROTOCOL_ZAP_AUTHENTICATOR_H_

#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <zmq.hpp>

namespace gandiva::protocol {

class ZapAuthenticator {
 public:
  // Binds inproc://zeromq.zap.01 in `ctx`; must start before the TCP socket binds.
  ZapAuthenticator(zmq::context_t& ctx, std::set<std::string> authorized_z85);
  ~ZapAuthenticator();
  uint64_t refused() const { return refused_.load(); }

 private:
  void Serve();
  zmq::socket_t sock_;
  std::set<std::string> authorized_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> refused_{0};
  std::thread thread_;
};

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_ZAP_AUTHENTICATOR_H_
