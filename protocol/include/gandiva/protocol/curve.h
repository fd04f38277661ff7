// CURVE keys for authenticated TCP endpoints (ZeroMQ CurveZMQ). A node has a
// key pair; a node's TCP endpoint accepts only clients whose public keys it was
// given (its authorized-keys file); a client must know the node's public key.
//
// Files (Z85 text, as `gandiva keygen` writes them):
//   NAME.key   "public <z85>\nsecret <z85>\n"   (mode 0600)
//   NAME.pub   "<z85>\n"
//   authorized keys (--authorized-keys: operators; --peer-keys: other nodes):
//              one Z85 public key per line, optionally followed by a name
//              ("<z85> alice", "<z85> node-b") that logs and errors show;
//              '#' starts a comment.
#ifndef GANDIVA_PROTOCOL_CURVE_H_
#define GANDIVA_PROTOCOL_CURVE_H_

#include <functional>
#include <map>
#include <set>
#include <string>

#include "gandiva/status.h"

namespace gandiva::protocol {

struct CurveKeyPair {
  std::string public_key;  // 40 Z85 characters
  std::string secret_key;
};

// What a client needs to talk to an authenticated endpoint.
struct CurveClientKeys {
  CurveKeyPair client;
  std::string server_public_key;
  bool enabled() const { return !server_public_key.empty(); }
};

StatusOr<CurveKeyPair> GenerateCurveKeyPair();
// Writes DIR/NAME.key (0600) and DIR/NAME.pub; refuses to overwrite.
Status WriteCurveKeyPair(const std::string& dir, const std::string& name, const CurveKeyPair& keys);
StatusOr<CurveKeyPair> ReadCurveKeyPair(const std::string& key_file);
// A public key given either as 40 Z85 characters or as a file holding one.
StatusOr<std::string> ReadCurvePublicKey(const std::string& key_or_file);
// A client's keys for a tcp:// endpoint: its own key pair file and the
// server's public key (or a file holding it), as --key and --server-key give them.
StatusOr<CurveClientKeys> ReadCurveClientKeys(const std::string& key_file,
                                              const std::string& server_key_or_file);
// Public key (Z85) -> its name (the line's second word, or "key <first 8>").
using AuthorizedKeys = std::map<std::string, std::string>;
StatusOr<AuthorizedKeys> ReadAuthorizedKeys(const std::string& file);
// Calls `fn(line, where)` for each line of a file that lists keys (authorized keys,
// peers) and is not a comment; `where` is "FILE:N" for error messages. NotFound
// (naming `what`) when the file cannot be read; stops at the first error of `fn`.
Status ForEachKeyFileLine(
    const std::string& file, const std::string& what,
    const std::function<Status(const std::string& line, const std::string& where)>& fn);
bool IsZ85Key(const std::string& text);

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_CURVE_H_
