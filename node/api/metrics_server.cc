// See metrics_server.h.
#include "api/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "gandiva/common/log.h"

namespace gandiva::controller {
namespace {

constexpr size_t kMaxRequestBytes = 8192;
constexpr int kReadDeadlineMs = 2000;

void WriteAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away: nothing to tell it
    done += static_cast<size_t>(n);
  }
}

std::string Response(const char* status, const char* type, const std::string& body) {
  return std::string("HTTP/1.0 ") + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
         body;
}

}  // namespace

Status MetricsServer::Start(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos)
    return InvalidArgument("--metrics takes HOST:PORT, not " + address);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  const std::string host = address.substr(0, colon);
  char* end = nullptr;
  const long port = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535 ||
      inet_pton(AF_INET, host.empty() ? "0.0.0.0" : host.c_str(), &sa.sin_addr) != 1)
    return InvalidArgument("--metrics takes IPV4_ADDRESS:PORT, not " + address);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  listener_ = UniqueFd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  setsockopt(listener_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listener_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      listen(listener_.get(), 16) != 0)
    return Unavailable("cannot serve metrics on " + address + ": " + strerror(errno));
  socklen_t len = sizeof sa;
  getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
  thread_ = std::thread([this] { Serve(); });
  GD_LOG(kInfo, "metrics on http://%s:%d/metrics", host.empty() ? "0.0.0.0" : host.c_str(), port_);
  return Status::Ok();
}

void MetricsServer::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void MetricsServer::Serve() {
  while (!stop_.load()) {
    pollfd p{listener_.get(), POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    UniqueFd client(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (client.get() >= 0) Answer(client.get());
  }
}

void MetricsServer::Answer(int fd) {
  std::string request;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kReadDeadlineMs);
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < kMaxRequestBytes) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return;  // silent: dropped
    char buf[1024];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    request.append(buf, static_cast<size_t>(n));
  }
  const size_t line_end = request.find("\r\n");
  const std::string line = request.substr(0, line_end);
  if (line_end == std::string::npos || line.rfind("GET ", 0) != 0) {
    WriteAll(fd, Response("400 Bad Request", "text/plain", "gandivad serves GET /metrics\n"));
    return;
  }
  const std::string path = line.substr(4, line.find(' ', 4) - 4);
  if (path != "/metrics") {
    WriteAll(fd, Response("404 Not Found", "text/plain", "gandivad serves GET /metrics\n"));
    return;
  }
  WriteAll(fd, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", render_()));
}

}  // namespace gandiva::controller
