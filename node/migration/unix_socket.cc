// Unix stream sockets with timeouts; see unix_socket.h.
#include "migration/unix_socket.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <memory>

namespace gandiva::controller {

StatusOr<std::unique_ptr<UnixListener>> UnixListener::Listen(const std::string& path,
                                                             int64_t owner_uid) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return InvalidArgument("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Internal(std::string("socket: ") + std::strerror(errno));
  unlink(path.c_str());
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Internal("cannot bind " + path + ": " + std::strerror(errno));
  chmod(path.c_str(), 0600);
  // Made just now, by us, in gandivad's own directory: no link of anyone's is there.
  if (owner_uid >= 0 && static_cast<uid_t>(owner_uid) != geteuid() &&
      lchown(path.c_str(), static_cast<uid_t>(owner_uid), static_cast<gid_t>(-1)) != 0)
    return Internal("cannot give " + path + " to uid " + std::to_string(owner_uid) + ": " +
                    std::strerror(errno));
  if (listen(fd.get(), 1) != 0) return Internal(std::string("listen: ") + std::strerror(errno));
  return std::unique_ptr<UnixListener>(new UnixListener(path, std::move(fd)));
}

UnixListener::~UnixListener() { unlink(path_.c_str()); }

StatusOr<UniqueFd> UnixListener::Accept(int timeout_ms) {
  pollfd p{fd_.get(), POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0)
    return DeadlineExceeded("the job did not connect to " + path_ + " within " +
                            std::to_string(timeout_ms) + " ms");
  if (r < 0) return Internal(std::string("poll: ") + std::strerror(errno));
  UniqueFd conn(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn.valid()) return Internal(std::string("accept: ") + std::strerror(errno));
  return conn;
}

}  // namespace gandiva::controller
