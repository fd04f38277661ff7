// The handoff of a migration's bulk connection from gandivad to its job: one
// message on the Unix socket of the job's "sealed:PATH" target, with the
// connection as SCM_RIGHTS; see sealed_channel.h.
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gandiva/common/clock.h"
#include "gandiva/common/units.h"
#include "gandiva/sealed/sealed_channel.h"

namespace gandiva::sealed {

namespace {

constexpr char kHandoffMagic[8] = {'G', 'D', 'S', 'E', 'A', 'L', '0', '1'};

struct HandoffMessage {
  char magic[8];
  uint8_t key[kBulkKeyBytes];
  uint64_t next_seq;
  uint32_t flags;
  uint32_t reserved;
};
static_assert(sizeof(HandoffMessage) == 56);

std::string HandoffErrno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// One handoff message with room for one descriptor.
struct HandoffEnvelope {
  HandoffMessage m{};
  iovec iov{&m, sizeof m};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  HandoffEnvelope() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  HandoffEnvelope(const HandoffEnvelope&) = delete;
  HandoffEnvelope& operator=(const HandoffEnvelope&) = delete;
};

}  // namespace

Status SendHandoff(int unix_fd, int connection, const BulkKey& key, uint64_t next_seq,
                   uint32_t flags) {
  HandoffEnvelope e;
  HandoffMessage& m = e.m;
  std::memcpy(m.magic, kHandoffMagic, sizeof m.magic);
  std::memcpy(m.key, key.data(), key.size());
  m.next_seq = next_seq;
  m.flags = flags;
  msghdr& msg = e.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &connection, sizeof(int));
  ssize_t sent;
  do {
    sent = sendmsg(unix_fd, &msg, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != static_cast<ssize_t>(sizeof m))
    return Unavailable(HandoffErrno("cannot hand the bulk connection to the job"));
  return Status::Ok();
}

StatusOr<Handoff> ReceiveHandoff(int unix_fd, int timeout_ms) {
  const uint64_t deadline = MonotonicNowNs() + static_cast<uint64_t>(timeout_ms) * kMs;
  GD_ASSIGN_OR_RETURN(bool ready, WaitFor(unix_fd, POLLIN, deadline, nullptr));
  if (!ready) return DeadlineExceeded("gandivad handed over no bulk connection");
  HandoffEnvelope e;
  const HandoffMessage& m = e.m;
  msghdr& msg = e.msg;
  ssize_t got;
  do {
    got = recvmsg(unix_fd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  } while (got < 0 && errno == EINTR);
  if (got < 0) return DataLoss(HandoffErrno("cannot take the bulk connection from gandivad"));
  // Every descriptor that arrived is closed unless it is the one connection:
  // a message with two, or one we refuse, must not leave them open in the job.
  std::vector<UniqueFd> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
      continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof fd, sizeof fd);
      fds.emplace_back(fd);
    }
  }
  if (got != static_cast<ssize_t>(sizeof m) || (msg.msg_flags & MSG_CTRUNC) || fds.size() != 1 ||
      std::memcmp(m.magic, kHandoffMagic, sizeof m.magic) != 0)
    return DataLoss("gandivad's handoff of the bulk connection is malformed");
  Handoff h;
  h.connection = std::move(fds[0]);
  std::memcpy(h.key.data(), m.key, h.key.size());
  h.next_seq = m.next_seq;
  h.flags = m.flags;
  return h;
}

}  // namespace gandiva::sealed
