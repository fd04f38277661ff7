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

#include "gandiva/common/clock.h"

namespace gandiva::controller {

StatusOr<std::unique_ptr<UnixListener>> UnixListener::Listen(const std::string& path) {
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

StatusOr<size_t> ReadSome(int fd, char* buf, size_t max, int timeout_ms) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r == 0)
      return DeadlineExceeded("no data from the job for " + std::to_string(timeout_ms) + " ms");
    if (r < 0) {
      if (errno == EINTR) continue;
      return Internal(std::string("poll: ") + std::strerror(errno));
    }
    ssize_t n = read(fd, buf, max);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR || errno == EAGAIN) continue;
    return Unavailable(std::string("read from the job: ") + std::strerror(errno));
  }
}

Status WriteAll(int fd, const char* buf, size_t n, int timeout_ms) {
  const uint64_t deadline = MonotonicNowNs() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
  while (n > 0) {
    ssize_t w = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      buf += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR)
      return Unavailable(std::string("write to the job: ") + std::strerror(errno));
    const uint64_t now = MonotonicNowNs();
    if (now >= deadline) return DeadlineExceeded("the job stopped reading its state");
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, static_cast<int>((deadline - now) / 1'000'000) + 1);
  }
  return Status::Ok();
}

}  // namespace gandiva::controller
