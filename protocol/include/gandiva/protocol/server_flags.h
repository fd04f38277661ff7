// The flags by which a daemon (gandivad, gandiva scheduler) serves its API on
// a CURVE TCP endpoint beside its Unix socket: --tcp ADDR, --key FILE (its
// own key pair), --authorized-keys FILE (operators' keys: the scheduler, admins'
// CLIs), --peer-keys FILE (other nodes' keys, which may only migrate jobs to
// this one). One reading of them, so both daemons refuse the same mistakes the
// same way.
#ifndef GANDIVA_PROTOCOL_SERVER_FLAGS_H_
#define GANDIVA_PROTOCOL_SERVER_FLAGS_H_

#include "gandiva/common/flags.h"
#include "gandiva/protocol/api_server.h"
#include "gandiva/status.h"

namespace gandiva::protocol {

// Fills api's tcp_endpoint, server_keys, authorized_keys and peer_keys from
// the flags. invalid_argument for --tcp without --key and a keys file (a TCP
// endpoint never serves unauthenticated clients), a key in both files, or an
// address that is not tcp://; the key files' own errors otherwise.
Status ApplyServerTcpFlags(const Flags& flags, ApiServerOptions* api);

}  // namespace gandiva::protocol

#endif  // GANDIVA_PROTOCOL_SERVER_FLAGS_H_
