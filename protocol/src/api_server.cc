// ROUTER-socket request loop over the local and the TCP endpoint, with replies
// that workers complete later through an outbox; see api_server.h.
#include "gandiva/protocol/api_server.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <zmq.hpp>

#include "gandiva/common/log.h"
#include "gandiva/common/private_files.h"
#include "gandiva/common/unique_fd.h"
#include "gandiva/protocol/client.h"
#include "zap_authenticator.h"

namespace gandiva::protocol {

// Replies waiting for the API thread to send them. Shared with the Replies
// (which may outlive the server): pushing wakes the poll loop through an eventfd.
class ApiServer::Outbox {
 public:
  struct Message {
    int socket;            // index into the server's sockets
    std::string identity;  // the client's ROUTER routing id
    std::string reply;
  };
  Outbox() : event_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  int fd() const { return event_.get(); }
  void Push(Message m) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(m));
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(event_.get(), &one, sizeof one);
  }
  std::deque<Message> Take() {
    uint64_t count;
    [[maybe_unused]] ssize_t n = read(event_.get(), &count, sizeof count);
    std::lock_guard lock(mu_);
    return std::exchange(queue_, {});
  }

 private:
  UniqueFd event_;
  std::mutex mu_;
  std::deque<Message> queue_;
};

struct ApiServer::Impl {
  // Two I/O threads: the local endpoint's own, and the TCP endpoint's, so that
  // decrypting a migration's chunks (CURVE) never delays a local `gandiva ps`.
  zmq::context_t ctx{2};
  zmq::socket_t local{ctx, zmq::socket_type::router};
  std::optional<zmq::socket_t> remote;
  std::unique_ptr<ZapAuthenticator> zap;
  std::string ipc_path;
  std::shared_ptr<Outbox> outbox = std::make_shared<Outbox>();
  zmq::socket_t& socket(int index) { return index == 0 ? local : *remote; }
};

ApiServer::ApiServer(Handler handler, ApiServerOptions options)
    : handler_(std::move(handler)), options_(std::move(options)), impl_(std::make_unique<Impl>()) {}

ApiServer::~ApiServer() {
  if (!impl_->ipc_path.empty()) unlink(impl_->ipc_path.c_str());
}

namespace {
// The largest frame a client may send: a migration chunk (4 MiB) with room to
// spare. A peer that declares a larger frame is disconnected before ZeroMQ
// allocates for it (a mangled length would otherwise ask malloc for exabytes).
constexpr int64_t kMaxMessageBytes = 16 << 20;

// The socket's directory: made if missing (owner-only, or open to every user's
// search for --shared-socket); if it exists, it must be ours (or root's) and
// writable by no one else, or another user could swap the socket clients trust
// (and stand in for gandivad). An existing directory is never chmod'ed.
Status CheckSocketDir(const std::filesystem::path& dir, bool shared) {
  auto opened = OpenPrivateDir(dir.string(), shared ? 0755 : 0700, geteuid());
  if (!opened.ok())
    return Status(opened.status().code(),
                  "the API socket's directory: " + opened.status().message());
  struct stat st {};
  if (shared && (fstat(opened->get(), &st) != 0 || (st.st_mode & S_IXOTH) == 0))
    return FailedPrecondition("--shared-socket: other users cannot reach the socket in " +
                              dir.string() +
                              " (not searchable by them), and gandivad does not change "
                              "the mode of a directory it did not make: make it 0755, or "
                              "choose an endpoint in a new directory");
  return Status::Ok();
}
}  // namespace

Status ApiServer::Bind() {
  const std::string& ep = options_.local_endpoint;
  if (ep.rfind("ipc://", 0) != 0)
    return InvalidArgument("the local endpoint must be ipc://, not " + ep);
  try {
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::absolute(ep.substr(6), ec);
    GD_RETURN_IF_ERROR(CheckSocketDir(path.parent_path(), options_.shared_local));
    if (std::filesystem::exists(path)) {
      ApiClient probe(ep, 500);
      if (probe.Call(protocol::MessageType::kHello).ok())
        return AlreadyExists("a gandivad is already running at " + ep);
      unlink(path.c_str());
    }
    impl_->local.set(zmq::sockopt::linger, 0);
    impl_->local.set(zmq::sockopt::affinity, uint64_t{1});  // I/O thread 1
    impl_->local.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);
    impl_->local.bind(ep);
    // Shared: every local user may connect, and acts only on their own jobs (the
    // daemon checks each call against the caller's uid).
    chmod(path.c_str(), options_.shared_local ? 0666 : 0600);
    impl_->ipc_path = path;
    GD_LOG(kInfo, "API listening on %s (%s)", ep.c_str(),
           options_.shared_local ? "every local user, each on their own jobs" : "owner only");

    if (!options_.tcp_endpoint.empty()) {
      if (options_.server_keys.secret_key.empty())
        return InvalidArgument("a TCP endpoint needs the node's key (--key)");
      impl_->zap = std::make_unique<ZapAuthenticator>(impl_->ctx, options_.authorized_keys,
                                                      options_.peer_keys);
      impl_->remote.emplace(impl_->ctx, zmq::socket_type::router);
      zmq::socket_t& r = *impl_->remote;
      r.set(zmq::sockopt::linger, 0);
      r.set(zmq::sockopt::affinity, uint64_t{2});  // I/O thread 2
      r.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);
      r.set(zmq::sockopt::curve_server, 1);
      r.set(zmq::sockopt::curve_secretkey, options_.server_keys.secret_key);
      r.set(zmq::sockopt::zap_domain, "gandiva");
      // Chunks of migrating state arrive here: keep a few in flight, not a backlog.
      r.set(zmq::sockopt::rcvhwm, 64);
      r.bind(options_.tcp_endpoint);
      GD_LOG(kInfo, "API listening on %s (CURVE, %zu operator key(s), %zu peer key(s))",
             options_.tcp_endpoint.c_str(), options_.authorized_keys.size(),
             options_.peer_keys.size());
    }
  } catch (const zmq::error_t& e) {
    return Unavailable(std::string("cannot bind the API endpoint: ") + e.what());
  }
  return Status::Ok();
}

void ApiServer::ServeOne(int socket_index) {
  zmq::socket_t& sock = impl_->socket(socket_index);
  // A REQ or DEALER client sends [identity, empty delimiter, request].
  std::vector<zmq::message_t> frames;
  do {
    frames.emplace_back();
    if (!sock.recv(frames.back(), zmq::recv_flags::dontwait)) {
      frames.pop_back();
      break;
    }
  } while (frames.back().more());
  if (frames.empty()) return;
  auto send = [outbox = impl_->outbox, socket_index,
               identity = frames[0].to_string()](const StatusOr<Json>& result) {
    outbox->Push({socket_index, identity,
                  result.ok() ? protocol::EncodeOkReply(*result)
                              : protocol::EncodeErrorReply(result.status())});
  };
  if (frames.size() != 3 || frames[1].size() != 0) {
    ++malformed_;
    return send(InvalidArgument("expected one request frame"));
  }
  auto request = protocol::DecodeRequest(frames[2].to_string_view());
  if (!request.ok()) {
    ++malformed_;
    GD_LOG(kWarn, "malformed request (%llu so far): %s",
           static_cast<unsigned long long>(malformed_), request.status().ToString().c_str());
    return send(request.status());
  }
  // Every reply is checked against its schema in messages.def before it leaves: a
  // handler that builds a field the schema does not have is a bug, reported as one
  // here rather than tripping up whoever reads the reply by key.
  Reply reply([send, type = request->type](const StatusOr<Json>& result) {
    if (result.ok()) {
      if (Status s = protocol::ValidateReply(type, *result); !s.ok()) {
        GD_LOG(kError, "reply outside its schema: %s", s.ToString().c_str());
        return send(Internal("gandivad built a reply its schema does not allow: " + s.message()));
      }
    }
    send(result);
  });
  Caller caller;
  caller.in_process = false;
  if (socket_index == 0) {
    const char* peer = frames[2].gets("Peer-Address");
    if (auto c = CallerFromPeerAddress(peer ? peer : ""))
      caller = *c;  // else: uid -1, trusted with nothing
  } else {
    caller.remote = true;
    // The ZAP handler's user id for the connection: "operator:NAME" or "peer:NAME".
    const char* user = frames[2].gets("User-Id");
    const std::string id = user ? user : "";
    caller.peer_node = id.rfind("operator:", 0) != 0;  // anything else: no operator's rights
    caller.key_name = id.substr(id.find(':') + 1);
  }
  handler_(Call{std::move(*request), caller}, std::move(reply));
}

void ApiServer::SendQueued() {
  for (Outbox::Message& m : impl_->outbox->Take()) {
    zmq::socket_t& sock = impl_->socket(m.socket);
    sock.send(zmq::buffer(m.identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    sock.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    sock.send(zmq::buffer(m.reply), zmq::send_flags::dontwait);
  }
}

void ApiServer::Run(const std::atomic<bool>& stop) {
  std::vector<zmq::pollitem_t> items = {{nullptr, impl_->outbox->fd(), ZMQ_POLLIN, 0},
                                        {impl_->local.handle(), 0, ZMQ_POLLIN, 0}};
  if (impl_->remote) items.push_back({impl_->remote->handle(), 0, ZMQ_POLLIN, 0});
  while (!stop.load()) {
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
      for (size_t i = 1; i < items.size(); ++i)
        if (items[i].revents & ZMQ_POLLIN) ServeOne(static_cast<int>(i - 1));
      SendQueued();  // replies given at once, and any a worker completed meanwhile
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      GD_LOG(kWarn, "API socket error: %s", e.what());
    }
  }
}

}  // namespace gandiva::protocol
