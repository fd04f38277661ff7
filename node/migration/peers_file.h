// The peers file: which nodes this one may migrate jobs to. Apart from the
// peer protocol (peer.h) so that its parser builds alone, for the fuzzer too.
#ifndef GANDIVA_NODE_MIGRATION_PEERS_FILE_H_
#define GANDIVA_NODE_MIGRATION_PEERS_FILE_H_

#include <map>
#include <string>

#include "gandiva/status.h"

namespace gandiva::controller {

// A node this one may migrate jobs to: its TCP endpoint and public key.
struct PeerInfo {
  std::string name;
  std::string endpoint;
  std::string public_key;
};

// Reads a peers file: one "NAME tcp://HOST:PORT PUBLIC_KEY_OR_FILE" per line.
StatusOr<std::map<std::string, PeerInfo>> ReadPeers(const std::string& file);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_PEERS_FILE_H_
