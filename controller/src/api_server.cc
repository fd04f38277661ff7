// ROUTER-socket request loop; see api_server.h.
#include "api_server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <zmq.hpp>

#include "common/log.h"
#include "controller.h"
#include "gandiva/client.h"
#include "gandiva/protocol/codec.h"

namespace gandiva::controller {

struct ApiServer::Impl {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::router};
  std::vector<std::string> ipc_paths;
};

ApiServer::ApiServer(Controller* controller, std::vector<std::string> endpoints)
    : controller_(controller), endpoints_(std::move(endpoints)), impl_(std::make_unique<Impl>()) {}

ApiServer::~ApiServer() {
  for (const auto& p : impl_->ipc_paths) unlink(p.c_str());
}

Status ApiServer::Bind() {
  try {
    impl_->sock.set(zmq::sockopt::linger, 0);
    // A client that vanished must not make us block on its reply.
    impl_->sock.set(zmq::sockopt::router_mandatory, false);
    for (const auto& ep : endpoints_) {
      if (ep.rfind("ipc://", 0) == 0) {
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
        impl_->sock.bind(ep);
        chmod(path.c_str(), 0600);
        impl_->ipc_paths.push_back(path);
      } else {
        impl_->sock.bind(ep);
      }
      GD_LOG(kInfo, "API listening on %s", ep.c_str());
    }
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot bind the API endpoint: ") + e.what());
  }
  return Status::Ok();
}

std::string ApiServer::Serve(const protocol::Request& request) {
  try {
    auto result = controller_->Handle(request);
    return result.ok() ? protocol::EncodeOkReply(*result) : protocol::EncodeErrorReply(result.status());
  } catch (const std::exception& e) {
    // A handler bug must not take the daemon down, and the client still gets its reply.
    GD_LOG(kError, "internal error while serving a request: %s", e.what());
    return protocol::EncodeErrorReply(Internal(e.what()));
  }
}

void ApiServer::Run(const std::atomic<bool>& stop) {
  zmq::pollitem_t items[] = {{static_cast<void*>(impl_->sock), 0, ZMQ_POLLIN, 0}};
  while (!stop.load()) {
    try {
      zmq::poll(items, 1, std::chrono::milliseconds(100));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      // A REQ client sends [identity, empty delimiter, body]; anything else is malformed.
      std::vector<zmq::message_t> frames;
      do {
        frames.emplace_back();
        if (!impl_->sock.recv(frames.back(), zmq::recv_flags::dontwait)) break;
      } while (frames.back().more());
      if (frames.empty()) continue;
      std::string reply;
      if (frames.size() != 3 || frames[1].size() != 0) {
        ++malformed_;
        reply = protocol::EncodeErrorReply(InvalidArgument("expected one request frame"));
      } else {
        auto request = protocol::DecodeRequest(frames[2].to_string_view());
        if (!request.ok()) {
          ++malformed_;
          GD_LOG(kWarn, "malformed request (%llu so far): %s",
                 static_cast<unsigned long long>(malformed_), request.status().ToString().c_str());
          reply = protocol::EncodeErrorReply(request.status());
        } else {
          reply = Serve(*request);
        }
      }
      impl_->sock.send(frames[0], zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      impl_->sock.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      impl_->sock.send(zmq::buffer(reply), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      GD_LOG(kWarn, "API socket error: %s", e.what());
    }
  }
}

}  // namespace gandiva::controller
