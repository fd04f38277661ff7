// The API dispatch: a decoded request goes to the handler registered for its
// type, and the handler's result becomes the one reply the client gets.
//
// A handler answers through a Reply, at once on the API thread or later from a
// worker (a migration step that waits on a job or a peer): the API thread never
// waits. Handlers that answer at once are registered with OnSync.
//
// Thread-safety: handlers are registered before the server starts; Dispatch is
// then read-only and may run on any thread. A Reply may be completed from any thread.
#ifndef GANDIVA_PROTOCOL_DISPATCHER_H_
#define GANDIVA_PROTOCOL_DISPATCHER_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gandiva/protocol/codec.h"
#include "gandiva/status.h"

namespace gandiva::protocol {

// One request, as a handler gets it.
// Who sent a request. On the local Unix socket the kernel says which user
// (SO_PEERCRED, which ZeroMQ hands over as the message's Peer-Address); on
// the TCP endpoint the caller holds an authorized CURVE key: an operator's
// tool, the scheduler or a peer node, trusted with every job.
struct Caller {
  bool in_process = true;  // made inside the daemon itself (its metrics page, tests)
  bool remote = false;     // the CURVE-authenticated TCP endpoint
  // remote: the key is a peer node's (--peer-keys), which may only migrate
  // jobs here, not an operator's (--authorized-keys); key_name names it.
  bool peer_node = false;
  std::string key_name;
  int64_t uid = -1;  // local: the connecting process's user; -1: not known
  int64_t gid = -1;
  int64_t pid = -1;
};

// "HOST:UID:GID:PID", what ZeroMQ reports for a Unix-socket peer; nullopt otherwise.
std::optional<Caller> CallerFromPeerAddress(std::string_view peer_address);

struct Call {
  Request request;
  Caller caller;  // a call made in-process (tests, the metrics page) has none: uid -1
  const Json& body() const { return request.body; }
};

// Sends the reply to one request. Copyable; the first completion wins and later
// ones are ignored. If every copy is dropped unanswered, the client gets an
// internal error rather than no reply at all.
class Reply {
 public:
  using Send = std::function<void(const StatusOr<Json>&)>;
  explicit Reply(Send send);
  void operator()(const StatusOr<Json>& result) const;
  bool done() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// A request's optional "env" object as a map; every value must be a string.
StatusOr<std::map<std::string, std::string>> EnvFromRequest(const Json& req);

class Dispatcher {
 public:
  using Handler = std::function<void(Call call, Reply reply)>;
  using SyncHandler = std::function<StatusOr<Json>(const Call& call)>;

  void On(MessageType type, Handler handler);
  void OnSync(MessageType type, SyncHandler handler);
  // Runs the type's handler. An unknown type, or a handler that throws (a bug),
  // gets an error reply; the daemon carries on.
  void Dispatch(Call call, Reply reply) const;

 private:
  std::map<MessageType, Handler> handlers_;
};

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_DISPATCHER_H_
