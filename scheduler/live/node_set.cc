// See node_set.h.
#include "live/node_set.h"

#include <sstream>

#include "gandiva/protocol/codec.h"

namespace gandiva::sched::live {

StatusOr<std::vector<NodeAddress>> ReadNodesFile(const std::string& file) {
  std::vector<NodeAddress> nodes;
  GD_RETURN_IF_ERROR(protocol::ForEachKeyFileLine(
      file, "nodes file", [&](const std::string& line, const std::string& where) {
        std::istringstream words(line);
        NodeAddress n;
        std::string key;
        if (!(words >> n.name)) return Status::Ok();  // a blank line
        if (!(words >> n.endpoint))
          return InvalidArgument(where + ": expected NAME ENDPOINT [PUBLIC_KEY]");
        const bool tcp = n.endpoint.rfind("tcp://", 0) == 0;
        if (!tcp && n.endpoint.rfind("ipc://", 0) != 0)
          return InvalidArgument(where + ": the endpoint must be tcp://HOST:PORT or ipc://PATH");
        if (words >> key) {
          auto pub = protocol::ReadCurvePublicKey(key);
          if (!pub.ok()) return InvalidArgument(where + ": " + pub.status().message());
          n.public_key = *pub;
        } else if (tcp) {
          return InvalidArgument(where + ": a tcp:// node needs its public key");
        }
        for (const NodeAddress& other : nodes)
          if (other.name == n.name) return InvalidArgument(where + ": node '" + n.name + "' twice");
        nodes.push_back(std::move(n));
        return Status::Ok();
      }));
  if (nodes.empty()) return InvalidArgument(file + ": lists no nodes");
  return nodes;
}

NodeSet::NodeSet(std::vector<NodeAddress> nodes, std::optional<protocol::CurveKeyPair> client_keys,
                 int timeout_ms) {
  for (NodeAddress& a : nodes) {
    auto client = std::make_unique<ApiClient>(a.endpoint, timeout_ms);
    if (!a.public_key.empty() && client_keys) client->SetCurve({*client_keys, a.public_key});
    nodes_.push_back({std::move(a), std::move(client)});
  }
}

NodeSet::~NodeSet() = default;

int NodeApi::Find(const std::string& name) const {
  for (int i = 0; i < size(); ++i)
    if (address(i).name == name) return i;
  return -1;
}

StatusOr<protocol::Json> NodeSet::Call(int node, protocol::MessageType type,
                                       const protocol::Json& fields) const {
  const std::string& name = nodes_[node].address.name;
  auto reply = nodes_[node].client->Call(type, fields);
  if (!reply.ok()) return Status(reply.status().code(), name + ": " + reply.status().message());
  if (Status s = protocol::ValidateReply(type, *reply, protocol::UnknownFields::kAllow); !s.ok())
    return Status(s.code(), name + ": " + s.message() + " (a gandivad of another version?)");
  return reply;
}

}  // namespace gandiva::sched::live
