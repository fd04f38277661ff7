#include "gandiva/protocol/server_flags.h"

#include "gandiva/protocol/curve.h"

namespace gandiva::protocol {

Status ApplyServerTcpFlags(const Flags& flags, ApiServerOptions* api) {
  if (flags.Has("key")) {
    GD_ASSIGN_OR_RETURN(api->server_keys, ReadCurveKeyPair(flags.Get("key")));
  }
  if (flags.Has("authorized-keys")) {
    GD_ASSIGN_OR_RETURN(api->authorized_keys, ReadAuthorizedKeys(flags.Get("authorized-keys")));
  }
  if (flags.Has("peer-keys")) {
    GD_ASSIGN_OR_RETURN(api->peer_keys, ReadAuthorizedKeys(flags.Get("peer-keys")));
  }
  for (const auto& [key, name] : api->peer_keys)
    if (api->authorized_keys.count(key))
      return InvalidArgument("key " + key.substr(0, 8) + "… (" + name +
                             ") is in both --authorized-keys and --peer-keys: a key has one role");
  if (!flags.Has("tcp")) return Status::Ok();
  if (!flags.Has("key") || (!flags.Has("authorized-keys") && !flags.Has("peer-keys")))
    return InvalidArgument(
        "--tcp needs --key and --authorized-keys (operators) or --peer-keys (other nodes): "
        "TCP clients must authenticate");
  api->tcp_endpoint = flags.Get("tcp");
  if (api->tcp_endpoint.rfind("tcp://", 0) != 0)
    return InvalidArgument("--tcp must be tcp://HOST:PORT, got \"" + api->tcp_endpoint + "\"");
  return Status::Ok();
}

}  // namespace gandiva::protocol
