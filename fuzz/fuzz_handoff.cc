// libFuzzer harness: the handoff of a migration's bulk connection to a job
// (gandiva/sealed/sealed_channel.h ReceiveHandoff), the one message a job
// takes from its "sealed:PATH" Unix socket. The first byte says how many
// descriptors come with the rest (bits 0-1: 0 to 3, all a pipe's write end);
// the rest is the message. A handoff that is taken must be well formed (its
// first 56 bytes: the socket is a stream, what follows is not read); and
// whatever happens, no descriptor that came with it may stay open except the
// connection taken (the pipe's read end then sees its end once we close ours).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gandiva/sealed/sealed_channel.h"

namespace {

using namespace gandiva;
using namespace gandiva::sealed;

// Sends `size` bytes with `count` copies of `fd` attached.
bool Send(int socket, const uint8_t* data, size_t size, int fd, size_t count) {
  uint8_t none = 0;
  iovec iov{size > 0 ? const_cast<uint8_t*>(data) : &none, size > 0 ? size : 1};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    for (size_t i = 0; i < count; ++i) std::memcpy(CMSG_DATA(c) + i * sizeof fd, &fd, sizeof fd);
  }
  return sendmsg(socket, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(iov.iov_len);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 1024) return 0;
  const size_t count = data[0] & 3;
  int sockets[2], pipe_fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0 ||
      pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0)
    std::abort();
  UniqueFd daemon(sockets[0]), job(sockets[1]), read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  // An empty message is sent as nothing at all (a closed socket).
  if (size > 1 || count > 0)
    if (!Send(daemon.get(), data + 1, size - 1, write_end.get(), count)) std::abort();
  daemon.Reset();
  write_end.Reset();

  StatusOr<Handoff> h = ReceiveHandoff(job.get(), 1000);
  if (h.ok()) {
    // A stream socket has no message boundaries: the first 56 bytes are the message.
    if (size - 1 < 56 || count != 1 || std::memcmp(data + 1, "GDSEAL01", 8) != 0 ||
        std::memcmp(h->key.data(), data + 9, h->key.size()) != 0)
      std::abort();  // taken, but not the message SendHandoff writes
    h->connection.Reset();
  } else if (h.status().code() != StatusCode::kDataLoss) {
    std::abort();
  }
  char c;
  if (read(read_end.get(), &c, 1) != 0) std::abort();  // a descriptor was left open
  return 0;
}
