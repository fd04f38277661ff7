// The sealed bulk connection over TCP; see bulk_channel.h.
#include "migration/bulk_channel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>  // tcp_info with tcpi_bytes_received (glibc's lacks it)
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "gandiva/common/clock.h"
#include "gandiva/common/log.h"
#include "gandiva/common/units.h"

namespace gandiva::controller {

namespace {

constexpr int kHelloTimeoutMs = 2000;  // a connection that says nothing in time is not our source

using sealed::kAborted;
using sealed::WaitFor;

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

StatusOr<addrinfo*> Resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int r = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (r != 0 || !found) return Unavailable("cannot resolve '" + host + "': " + gai_strerror(r));
  return found;
}

}  // namespace

std::string HostOfTcpEndpoint(const std::string& endpoint) {
  if (endpoint.rfind("tcp://", 0) != 0) return "";
  const std::string rest = endpoint.substr(6);
  const size_t colon = rest.rfind(':');
  std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host;
}

// ------------------------------------------------------------------ destination

StatusOr<std::unique_ptr<BulkListener>> BulkListener::Listen(const std::string& host) {
  const std::string bind_host = host == "*" ? "0.0.0.0" : host;
  GD_ASSIGN_OR_RETURN(addrinfo * found, Resolve(bind_host, 0, true));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  UniqueFd fd(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Internal(Errno("socket"));
  if (bind(fd.get(), found->ai_addr, found->ai_addrlen) != 0)
    return Internal("cannot bind the bulk channel to " + bind_host + ": " + std::strerror(errno));
  if (listen(fd.get(), 4) != 0) return Internal(Errno("listen"));
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return Internal(Errno("getsockname"));
  const int port = addr.ss_family == AF_INET6
                       ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                       : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return std::unique_ptr<BulkListener>(new BulkListener(std::move(fd), port));
}

StatusOr<std::unique_ptr<SealedReader>> BulkListener::Accept(const BulkKey& key, uint64_t job,
                                                             int timeout_ms,
                                                             const CancelledFn& cancelled) {
  const uint64_t deadline = MonotonicNowNs() + static_cast<uint64_t>(timeout_ms) * kMs;
  for (;;) {
    GD_ASSIGN_OR_RETURN(bool ready, WaitFor(fd_.get(), POLLIN, deadline, cancelled));
    if (!ready)
      return DeadlineExceeded("the source did not open the bulk connection within " +
                              std::to_string(timeout_ms) + " ms");
    UniqueFd conn(accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;  // it went away again
    // The hello decides whether this is our source; anything else is dropped.
    auto reader = std::make_unique<SealedReader>(std::move(conn), key, 0);
    auto hello = reader->NextFrame(kHelloTimeoutMs, cancelled);
    uint64_t named = 0;
    Status heard = hello.status();
    if (heard.ok() &&
        (hello->flags != sealed::kSealedHello || hello->payload.size() != sizeof named))
      heard = DataLoss("not a hello");
    if (heard.ok()) std::memcpy(&named, hello->payload.data(), sizeof named);
    if (heard.ok() && named == job) return reader;
    if (heard.message() == kAborted) return heard;
    GD_LOG(kWarn, "dropped a bulk connection that is not job %llu's source: %s",
           (unsigned long long)job, heard.ok() ? "it names another job" : heard.message().c_str());
  }
}

// ------------------------------------------------------------------ source

StatusOr<std::unique_ptr<SealedWriter>> ConnectBulk(const std::string& host, int port,
                                                    const BulkKey& key, uint64_t job,
                                                    int timeout_ms) {
  GD_ASSIGN_OR_RETURN(addrinfo * found, Resolve(host, port, false));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(found, freeaddrinfo);
  UniqueFd fd(socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Internal(Errno("socket"));
  const std::string where = host + ":" + std::to_string(port);
  if (connect(fd.get(), found->ai_addr, found->ai_addrlen) != 0 && errno != EINPROGRESS)
    return Unavailable("cannot open the bulk connection to " + where + ": " + std::strerror(errno));
  const uint64_t deadline = MonotonicNowNs() + static_cast<uint64_t>(timeout_ms) * kMs;
  GD_ASSIGN_OR_RETURN(bool connected, WaitFor(fd.get(), POLLOUT, deadline, nullptr));
  int error = 0;
  socklen_t len = sizeof error;
  getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
  if (!connected || error != 0)
    return Unavailable("cannot open the bulk connection to " + where + ": " +
                       (connected ? std::strerror(error) : "timed out"));
  // Back to blocking: the job that takes it over writes with its own waits.
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  auto writer = std::make_unique<SealedWriter>(std::move(fd), key, 0, timeout_ms);
  uint8_t hello[sizeof job];
  std::memcpy(hello, &job, sizeof job);
  GD_RETURN_IF_ERROR(writer->WriteFrame(sealed::kSealedHello, hello));
  return writer;
}

uint64_t BytesReceived(int fd) {
  tcp_info info{};
  socklen_t size = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &size) != 0 ||
      size < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
    return 0;
  return info.tcpi_bytes_received;
}

}  // namespace gandiva::controller
