// The peers file; see peers_file.h.
#include "migration/peers_file.h"

#include <sstream>

#include "gandiva/protocol/curve.h"

namespace gandiva::controller {

StatusOr<std::map<std::string, PeerInfo>> ReadPeers(const std::string& file) {
  std::map<std::string, PeerInfo> peers;
  GD_RETURN_IF_ERROR(protocol::ForEachKeyFileLine(
      file, "peers file", [&](const std::string& line, const std::string& where) {
        std::istringstream words(line);
        PeerInfo p;
        std::string key;
        if (!(words >> p.name)) return Status::Ok();  // a blank line
        if (!(words >> p.endpoint >> key) || p.endpoint.rfind("tcp://", 0) != 0)
          return InvalidArgument(where + ": expected NAME tcp://HOST:PORT PUBLIC_KEY");
        auto pub = protocol::ReadCurvePublicKey(key);
        if (!pub.ok()) return InvalidArgument(where + ": " + pub.status().message());
        p.public_key = *pub;
        peers[p.name] = p;
        return Status::Ok();
      }));
  return peers;
}

}  // namespace gandiva::controller
