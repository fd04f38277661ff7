// libFuzzer harness: the two key-list files gandivad reads at start-up, the
// authorized keys (protocol/curve.h ReadAuthorizedKeys) and the peers file
// (node/migration/peers_file.h ReadPeers). Both read a path, so each run
// writes the input to a per-process temp file and parses it both ways.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "gandiva/protocol/curve.h"
#include "migration/peers_file.h"
#include "temp_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gandiva::fuzz::TempFile file("keys");
  const std::string& path = file.Write(data, size);

  auto keys = gandiva::protocol::ReadAuthorizedKeys(path);
  if (keys.ok()) {
    for (const auto& [key, name] : *keys)  // only real keys get in, each with a name
      if (!gandiva::protocol::IsZ85Key(key) || name.empty() || name.size() > 64) std::abort();
  }

  auto peers = gandiva::controller::ReadPeers(path);
  if (peers.ok()) {
    for (const auto& [name, peer] : *peers)
      if (name != peer.name || peer.endpoint.rfind("tcp://", 0) != 0 ||
          !gandiva::protocol::IsZ85Key(peer.public_key))
        std::abort();
  }
  return 0;
}
