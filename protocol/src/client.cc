// ApiClient over a ZeroMQ REQ socket. A REQ socket that timed out is stuck in its
// send/receive cycle, so each call uses a fresh socket (connect over ipc/loopback is cheap).
#include "gandiva/protocol/client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <zmq.hpp>

#include "gandiva/protocol/zmq_socket.h"

namespace gandiva {

namespace {

// In this user's runtime directory, which only they (or root) may write to.
// Never /tmp: another user could make /tmp/gandiva-<uid> first and serve a
// gandivad of their own there (handing its environment to the jobs, or to
// Slurm's steps through the plugin).
std::string LocalSocket(const char* file) {
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && *x)
    return std::string("ipc://") + x + "/gandiva/" + file;
  if (geteuid() == 0) return std::string("ipc:///run/gandiva/") + file;
  return "ipc:///run/user/" + std::to_string(geteuid()) + "/gandiva/" + file;
}

}  // namespace

std::string DefaultEndpoint() {
  if (const char* e = std::getenv("GANDIVA_ENDPOINT"); e && *e) return e;
  return LocalSocket("gandivad.sock");
}

std::string DefaultSchedulerEndpoint() {
  if (const char* e = std::getenv("GANDIVA_SCHEDULER"); e && *e) return e;
  return LocalSocket("scheduler.sock");
}

struct ApiClient::Impl {
  zmq::context_t ctx{1};
};

ApiClient::ApiClient(std::string endpoint, int timeout_ms)
    : endpoint_(std::move(endpoint)), timeout_ms_(timeout_ms), impl_(std::make_unique<Impl>()) {}

ApiClient::~ApiClient() = default;

StatusOr<std::string> ApiClient::CallRaw(const std::string& bytes) {
  if (endpoint_.rfind("ipc://", 0) == 0) {
    struct stat st;
    const std::string path = endpoint_.substr(6);
    if (stat(path.c_str(), &st) != 0)
      return Unavailable("no gandivad running (no socket at " + path +
                         "); start one with `gandiva daemon`");
  }
  try {
    zmq::socket_t sock(impl_->ctx, zmq::socket_type::req);
    ConfigureClientSocket(sock, timeout_ms_, curve_);
    sock.connect(endpoint_);
    if (!sock.send(zmq::buffer(bytes), zmq::send_flags::none))
      return Unavailable("gandivad at " + endpoint_ + " does not accept requests");
    zmq::message_t reply;
    if (!sock.recv(reply, zmq::recv_flags::none))
      return Unavailable("no reply from gandivad at " + endpoint_ + " within " +
                         std::to_string(timeout_ms_) + " ms" +
                         (endpoint_.rfind("tcp://", 0) == 0
                              ? " (not running, or it does not accept this client's key)"
                              : ""));
    return reply.to_string();
  } catch (const zmq::error_t& e) {
    return Unavailable("cannot talk to gandivad at " + endpoint_ + ": " + e.what());
  }
}

StatusOr<protocol::Json> ApiClient::Call(protocol::MessageType type, const protocol::Json& fields) {
  GD_ASSIGN_OR_RETURN(std::string reply, CallRaw(protocol::EncodeRequest(type, fields)));
  return protocol::DecodeReply(reply);
}

}  // namespace gandiva
