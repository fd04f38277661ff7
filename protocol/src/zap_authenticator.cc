// ZAP (RFC 27) request handling: CURVE clients by key, NULL (the owner-only
// local socket) always, anything else refused.
#include "zap_authenticator.h"

#include <vector>

#include "gandiva/common/log.h"

namespace gandiva::protocol {

ZapAuthenticator::ZapAuthenticator(zmq::context_t& ctx,
                                   std::map<std::string, std::string> operators,
                                   std::map<std::string, std::string> peers)
    : sock_(ctx, zmq::socket_type::rep),
      operators_(std::move(operators)),
      peers_(std::move(peers)) {
  sock_.set(zmq::sockopt::linger, 0);
  sock_.bind("inproc://zeromq.zap.01");
  thread_ = std::thread([this] { Serve(); });
}

ZapAuthenticator::~ZapAuthenticator() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void ZapAuthenticator::Serve() {
  zmq::pollitem_t items[] = {{static_cast<void*>(sock_), 0, ZMQ_POLLIN, 0}};
  while (!stop_.load()) {
    try {
      zmq::poll(items, 1, std::chrono::milliseconds(100));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      // version, request id, domain, address, identity, mechanism, credentials...
      std::vector<zmq::message_t> frames;
      do {
        frames.emplace_back();
        if (!sock_.recv(frames.back(), zmq::recv_flags::none)) break;
      } while (frames.back().more());
      std::string request_id = frames.size() > 1 ? frames[1].to_string() : "";
      std::string address = frames.size() > 3 ? frames[3].to_string() : "";
      std::string mechanism = frames.size() > 5 ? frames[5].to_string() : "";
      bool ok = false;
      std::string user;
      if (mechanism == "CURVE" && frames.size() > 6 && frames[6].size() == 32) {
        char z85[41];
        zmq_z85_encode(z85, static_cast<const uint8_t*>(frames[6].data()), 32);
        user = z85;
        if (auto op = operators_.find(z85); op != operators_.end())
          user = "operator:" + op->second;
        else if (auto peer = peers_.find(z85); peer != peers_.end())
          user = "peer:" + peer->second;
        ok = user != z85;
      } else if (mechanism == "NULL") {
        ok = true;  // only the local Unix socket runs without CURVE
      }
      if (!ok) {
        refused_.fetch_add(1);
        GD_LOG(kWarn, "refused a %s client from %s%s", mechanism.c_str(), address.c_str(),
               user.empty() ? "" : (" with unknown key " + user).c_str());
      }
      sock_.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
      sock_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
      sock_.send(zmq::buffer(std::string(ok ? "200" : "400")), zmq::send_flags::sndmore);
      sock_.send(zmq::buffer(std::string(ok ? "OK" : "unauthorized key")),
                 zmq::send_flags::sndmore);
      sock_.send(zmq::buffer(user), zmq::send_flags::sndmore);
      sock_.send(zmq::message_t(), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
    }
  }
}

}  // namespace gandiva::protocol
