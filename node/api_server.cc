// ROUTER-socket request loop over the local and the TCP endpoint; see api_server.h.
#include "api_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <zmq.hpp>

#include "controller.h"
#include "gandiva/common/log.h"
#include "gandiva/protocol/client.h"
#include "zap_authenticator.h"

namespace gandiva::controller {

struct ApiServer::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t local{ctx, zmq::socket_type::router};
  std::optional<zmq::socket_t> remote;
  std::unique_ptr<ZapAuthenticator> zap;
  std::string ipc_path;
};

ApiServer::ApiServer(Controller* controller, ApiServerOptions options)
    : controller_(controller), options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

ApiServer::~ApiServer() {
  if (!impl_->ipc_path.empty()) unlink(impl_->ipc_path.c_str());
}

Status ApiServer::Bind() {
  const std::string& ep = options_.local_endpoint;
  if (ep.rfind("ipc://", 0) != 0)
    return InvalidArgument("the local endpoint must be ipc://, not " + ep);
  try {
    const std::filesystem::path path = ep.substr(6);
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    chmod(path.parent_path().c_str(), 0700);
    if (std::filesystem::exists(path)) {
      ApiClient probe(ep, 500);
      if (probe.Call(protocol::MessageType::kHello).ok())
        return AlreadyExists("a gandivad is already running at " + ep);
      unlink(path.c_str());
    }
    impl_->local.set(zmq::sockopt::linger, 0);
    impl_->local.bind(ep);
    chmod(path.c_str(), 0600);
    impl_->ipc_path = path;
    GD_LOG(kInfo, "API listening on %s (owner only)", ep.c_str());

    if (!options_.tcp_endpoint.empty()) {
      if (options_.server_keys.secret_key.empty())
        return InvalidArgument("a TCP endpoint needs the node's key (--key)");
      impl_->zap = std::make_unique<ZapAuthenticator>(impl_->ctx, options_.authorized_keys);
      impl_->remote.emplace(impl_->ctx, zmq::socket_type::router);
      zmq::socket_t& r = *impl_->remote;
      r.set(zmq::sockopt::linger, 0);
      r.set(zmq::sockopt::curve_server, 1);
      r.set(zmq::sockopt::curve_secretkey, options_.server_keys.secret_key);
      r.set(zmq::sockopt::zap_domain, "gandiva");
      // Chunks of migrating state arrive here: keep a few in flight, not a backlog.
      r.set(zmq::sockopt::rcvhwm, 64);
      r.bind(options_.tcp_endpoint);
      GD_LOG(kInfo, "API listening on %s (CURVE, %zu authorized key(s))",
             options_.tcp_endpoint.c_str(), options_.authorized_keys.size());
    }
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot bind the API endpoint: ") + e.what());
  }
  return Status::Ok();
}

std::string ApiServer::Serve(protocol::Request& request) {
  try {
    auto result = controller_->Handle(request);
    return result.ok() ? protocol::EncodeOkReply(*result)
                       : protocol::EncodeErrorReply(result.status());
  } catch (const std::exception& e) {
    // A handler bug must not take the daemon down, and the client still gets its reply.
    GD_LOG(kError, "internal error while serving a request: %s", e.what());
    return protocol::EncodeErrorReply(Internal(e.what()));
  }
}

void ApiServer::ServeOne(void* socket_handle) {
  zmq::socket_ref sock(zmq::from_handle, socket_handle);
  // A REQ or DEALER client sends [identity, empty delimiter, request, (payload)].
  std::vector<zmq::message_t> frames;
  do {
    frames.emplace_back();
    if (!sock.recv(frames.back(), zmq::recv_flags::dontwait)) {
      frames.pop_back();
      break;
    }
  } while (frames.back().more());
  if (frames.empty()) return;
  std::string reply;
  if (frames.size() < 3 || frames.size() > 4 || frames[1].size() != 0) {
    ++malformed_;
    reply = protocol::EncodeErrorReply(
        InvalidArgument("expected one request frame and at most one payload"));
  } else {
    auto request = protocol::DecodeRequest(frames[2].to_string_view());
    if (!request.ok()) {
      ++malformed_;
      GD_LOG(kWarn, "malformed request (%llu so far): %s",
             static_cast<unsigned long long>(malformed_), request.status().ToString().c_str());
      reply = protocol::EncodeErrorReply(request.status());
    } else {
      if (frames.size() == 4) request->payload = frames[3].to_string_view();  // no copy
      reply = Serve(*request);
    }
  }
  sock.send(frames[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  sock.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  sock.send(zmq::buffer(reply), zmq::send_flags::dontwait);
}

void ApiServer::Run(const std::atomic<bool>& stop) {
  std::vector<zmq::pollitem_t> items = {{impl_->local.handle(), 0, ZMQ_POLLIN, 0}};
  if (impl_->remote) items.push_back({impl_->remote->handle(), 0, ZMQ_POLLIN, 0});
  while (!stop.load()) {
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
      for (auto& item : items)
        if (item.revents & ZMQ_POLLIN) ServeOne(item.socket);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      GD_LOG(kWarn, "API socket error: %s", e.what());
    }
  }
}

}  // namespace gandiva::controller
