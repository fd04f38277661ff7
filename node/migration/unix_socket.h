// Unix stream sockets through which a job hands its checkpoint stream to the
// controller (and takes one from it): the controller listens, the job connects.
#ifndef GANDIVA_NODE_MIGRATION_UNIX_SOCKET_H_
#define GANDIVA_NODE_MIGRATION_UNIX_SOCKET_H_

#include <memory>
#include <string>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva::controller {

// Listens on `path` (owner-only); removes the path when destroyed.
class UnixListener {
 public:
  static StatusOr<std::unique_ptr<UnixListener>> Listen(const std::string& path);
  ~UnixListener();
  // Waits up to timeout_ms for one connection.
  StatusOr<UniqueFd> Accept(int timeout_ms);
  const std::string& path() const { return path_; }

 private:
  UnixListener(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  UniqueFd fd_;
};

// Reads up to `max` bytes, waiting at most timeout_ms; 0 bytes means end of stream.
StatusOr<size_t> ReadSome(int fd, char* buf, size_t max, int timeout_ms);
// Writes all bytes (no SIGPIPE), waiting at most timeout_ms in total.
Status WriteAll(int fd, const char* buf, size_t n, int timeout_ms);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_UNIX_SOCKET_H_
