// The Unix stream socket on which a job takes a migration's bulk connection
// from the controller (a "sealed:" transfer target): the controller listens,
// the job connects.
#ifndef GANDIVA_NODE_MIGRATION_UNIX_SOCKET_H_
#define GANDIVA_NODE_MIGRATION_UNIX_SOCKET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva::controller {

// Listens on `path` (owner-only: the job's user's, owner_uid, so that a job of
// another user than gandivad's may connect; -1: gandivad's); removes the path
// when destroyed.
class UnixListener {
 public:
  static StatusOr<std::unique_ptr<UnixListener>> Listen(const std::string& path,
                                                        int64_t owner_uid = -1);
  ~UnixListener();
  // Waits up to timeout_ms for one connection.
  StatusOr<UniqueFd> Accept(int timeout_ms);
  const std::string& path() const { return path_; }

 private:
  UnixListener(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  UniqueFd fd_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_MIGRATION_UNIX_SOCKET_H_
