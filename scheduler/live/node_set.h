// The gandivad nodes a live scheduler drives: read from a nodes file in the
// form of gandivad's --peers ("NAME ENDPOINT [PUBLIC_KEY_OR_FILE]"; a tcp://
// endpoint needs the node's public key, an ipc:// one, on the scheduler's own
// machine, does not), one API client each. A call to a node that does not answer
// fails with unavailable naming the node; it never stops the scheduler.
//
// Thread-safety: fixed once made; Call may run on several threads at once (each
// call opens its own socket on a shared ZeroMQ context).
#ifndef GANDIVA_SCHEDULER_LIVE_NODE_SET_H_
#define GANDIVA_SCHEDULER_LIVE_NODE_SET_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gandiva/protocol/client.h"
#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/curve.h"
#include "gandiva/status.h"

namespace gandiva::sched::live {

struct NodeAddress {
  std::string name;
  std::string endpoint;    // ipc:///... or tcp://host:port
  std::string public_key;  // the node's CURVE key; required for tcp://
};

// Errors: not_found (no such file), invalid_argument naming FILE:LINE, and an
// empty file (a scheduler with no nodes has nothing to run jobs on).
StatusOr<std::vector<NodeAddress>> ReadNodesFile(const std::string& file);

// The nodes as the live cluster sees them: an API call to node i. NodeSet is
// the real one; a benchmark answers from a simulated cluster instead.
class NodeApi {
 public:
  virtual ~NodeApi() = default;
  virtual int size() const = 0;
  virtual const NodeAddress& address(int node) const = 0;
  // One call; the reply is checked against the schema. Errors name the node.
  virtual StatusOr<protocol::Json> Call(
      int node, protocol::MessageType type,
      const protocol::Json& fields = protocol::Json::object()) const = 0;
  // The index of the node called `name`, or -1.
  int Find(const std::string& name) const;
};

class NodeSet final : public NodeApi {
 public:
  // `client_keys`: the scheduler's own key pair, for tcp:// nodes (nullopt: ipc only).
  NodeSet(std::vector<NodeAddress> nodes, std::optional<protocol::CurveKeyPair> client_keys,
          int timeout_ms);
  ~NodeSet() override;

  int size() const override { return static_cast<int>(nodes_.size()); }
  const NodeAddress& address(int node) const override { return nodes_[node].address; }
  StatusOr<protocol::Json> Call(
      int node, protocol::MessageType type,
      const protocol::Json& fields = protocol::Json::object()) const override;

 private:
  struct Node {
    NodeAddress address;
    std::unique_ptr<ApiClient> client;
  };
  std::vector<Node> nodes_;
};

}  // namespace gandiva::sched::live

#endif  // GANDIVA_SCHEDULER_LIVE_NODE_SET_H_
