// How two gandivad open the TCP connection that carries one migration's state
// in sealed frames (gandiva/sealed/sealed_channel.h). The destination
// listens on a fresh port of the address its API serves TCP on and tells the
// source the port (migrate_begin's reply); the source connects and sends the
// hello (frame 0, naming the destination's job). The destination takes the
// first connection whose hello opens under the migration's key and names its
// job; any other is closed and does not disturb the migration. Each side then
// hands its end to its job, which writes or reads the state itself.
//
// Thread-safety: each object is used by one thread; `cancelled` callbacks may
// read state other threads set.
#ifndef GANDIVA_NODE_MIGRATION_BULK_CHANNEL_H_
#define GANDIVA_NODE_MIGRATION_BULK_CHANNEL_H_

#include <memory>
#include <string>

#include "gandiva/common/unique_fd.h"
#include "gandiva/sealed/sealed_channel.h"
#include "gandiva/status.h"

namespace gandiva::controller {

using sealed::BulkKey;
using sealed::CancelledFn;
using sealed::SealedReader;
using sealed::SealedWriter;

class BulkListener {
 public:
  // Listens on `host` (an address of this node, "0.0.0.0" for all), a port the kernel picks.
  static StatusOr<std::unique_ptr<BulkListener>> Listen(const std::string& host);
  int port() const { return port_; }
  // Waits up to timeout_ms for the source of `job`'s migration, keyed `key`;
  // its reader is past the hello.
  StatusOr<std::unique_ptr<SealedReader>> Accept(const BulkKey& key, uint64_t job, int timeout_ms,
                                                 const CancelledFn& cancelled);

 private:
  BulkListener(UniqueFd fd, int port) : fd_(std::move(fd)), port_(port) {}
  UniqueFd fd_;
  int port_;
};

// Connects to host:port and sends the hello for the destination's `job`.
StatusOr<std::unique_ptr<SealedWriter>> ConnectBulk(const std::string& host, int port,
                                                    const BulkKey& key, uint64_t job,
                                                    int timeout_ms);

// The bytes the kernel has taken in on the TCP connection `fd` so far (its
// TCP_INFO), whoever reads them: a destination sees its stream arrive while
// the job, holding the same connection, reads it. 0 if the kernel does not say.
uint64_t BytesReceived(int fd);

// "tcp://HOST:PORT" -> HOST ("*" and "0.0.0.0" stay as they are); empty if not TCP.
std::string HostOfTcpEndpoint(const std::string& endpoint);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_BULK_CHANNEL_H_
