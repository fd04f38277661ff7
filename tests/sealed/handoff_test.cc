// The handoff of the bulk connection (gandiva/sealed/sealed_channel.h): what
// gandivad sends, the job takes, descriptor included; a message that is cut
// short, has another magic, or comes without a descriptor is refused, and a
// silent socket times out.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "gandiva/sealed/sealed_channel.h"

namespace gandiva::sealed {
namespace {

struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    daemon.Reset(fds[0]);
    job.Reset(fds[1]);
  }
  UniqueFd daemon, job;
};

// `bytes` with `fds` attached (SCM_RIGHTS), as SendHandoff sends its message.
bool SendWithDescriptors(int socket, const std::vector<char>& bytes, std::vector<int> fds) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  return sendmsg(socket, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

TEST(HandoffTest, TheJobGetsTheConnectionKeyAndNumber) {
  Pair p;
  int conn[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, conn), 0);
  UniqueFd mine(conn[0]), theirs(conn[1]);
  BulkKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(200 - i);
  ASSERT_TRUE(SendHandoff(p.daemon.get(), theirs.get(), key, 42, kHandoffCutMidway).ok());
  auto h = ReceiveHandoff(p.job.get(), 5000);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->key, key);
  EXPECT_EQ(h->next_seq, 42u);
  EXPECT_EQ(h->flags, kHandoffCutMidway);
  // The same socket: what goes in one end comes out of the received descriptor.
  struct stat a, b;
  ASSERT_EQ(fstat(theirs.get(), &a), 0);
  ASSERT_EQ(fstat(h->connection.get(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_TRUE(fcntl(h->connection.get(), F_GETFD) & FD_CLOEXEC);
}

TEST(HandoffTest, MalformedMessagesAreRefused) {
  for (size_t size : {size_t{0}, size_t{8}, size_t{55}}) {
    Pair p;
    std::vector<char> bytes(size, 0);
    if (size >= 8) std::memcpy(bytes.data(), "GDSEAL01", 8);
    ASSERT_EQ(write(p.daemon.get(), bytes.data(), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
    p.daemon.Reset();  // the end of the message: a short one is all there is
    EXPECT_EQ(ReceiveHandoff(p.job.get(), 5000).status().code(), StatusCode::kDataLoss) << size;
  }
  {
    Pair p;  // the right size, no descriptor
    std::vector<char> bytes(56, 0);
    std::memcpy(bytes.data(), "GDSEAL01", 8);
    ASSERT_EQ(write(p.daemon.get(), bytes.data(), bytes.size()), 56);
    EXPECT_EQ(ReceiveHandoff(p.job.get(), 5000).status().code(), StatusCode::kDataLoss);
  }
  {
    Pair p;  // a descriptor, another magic: the descriptor is closed, not leaked
    std::vector<char> bytes(56, 0);
    std::memcpy(bytes.data(), "GDSEAL02", 8);
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
    ASSERT_TRUE(SendWithDescriptors(p.daemon.get(), bytes, {write_end.get()}));
    write_end.Reset();
    EXPECT_EQ(ReceiveHandoff(p.job.get(), 5000).status().code(), StatusCode::kDataLoss);
    char c;
    EXPECT_EQ(read(read_end.get(), &c, 1), 0) << "the pipe's last write end is closed";
  }
  for (size_t count : {size_t{2}, size_t{3}}) {
    Pair p;  // a well-formed message with more than one descriptor: none is kept
    std::vector<char> bytes(56, 0);
    std::memcpy(bytes.data(), "GDSEAL01", 8);
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
    ASSERT_TRUE(
        SendWithDescriptors(p.daemon.get(), bytes, std::vector<int>(count, write_end.get())));
    write_end.Reset();
    EXPECT_EQ(ReceiveHandoff(p.job.get(), 5000).status().code(), StatusCode::kDataLoss) << count;
    char c;
    EXPECT_EQ(read(read_end.get(), &c, 1), 0) << count << " descriptors: one was left open";
  }
}

TEST(HandoffTest, NothingHandedOverTimesOut) {
  Pair p;
  EXPECT_EQ(ReceiveHandoff(p.job.get(), 50).status().code(), StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace gandiva::sealed
