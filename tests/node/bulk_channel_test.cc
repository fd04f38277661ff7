// The migration's sealed bulk connection over real loopback TCP, opened as
// two gandivad open it (BulkListener, ConnectBulk) and written and read as the
// jobs do (SealedWriter, SealedReader): the bytes arrive as sent, and a proxy
// between the two ends that changes the stream after sealing (flips a bit,
// replays, reorders, drops or cuts frames) or a sender with another key is
// caught, each with an error that says what happened. Strangers that connect
// first do not disturb the migration.
#include "migration/bulk_channel.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace gandiva::controller {
namespace {

constexpr uint64_t kJob = 42;
constexpr int kTimeoutMs = 5000;

std::vector<uint8_t> Pattern(size_t n, uint8_t salt) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131) ^ (i >> 9) ^ salt);
  return v;
}

BulkKey Key() {
  auto key = sealed::NewBulkKey();
  EXPECT_TRUE(key.ok());
  return *key;
}

// Everything the receiver took in, or why it stopped.
struct Received {
  Status status;
  std::vector<uint8_t> bytes;
};

Received ReceiveAll(BulkListener& listener, const BulkKey& key) {
  Received r;
  auto source = listener.Accept(key, kJob, kTimeoutMs, nullptr);
  if (!source.ok()) return {source.status(), {}};
  std::vector<uint8_t> piece(300 << 10);  // reads that do not match the frames
  for (;;) {
    auto n = (*source)->Read(piece.data(), piece.size(), kTimeoutMs);
    if (!n.ok()) return {n.status(), r.bytes};
    if (*n == 0) return r;
    r.bytes.insert(r.bytes.end(), piece.begin(), piece.begin() + *n);
  }
}

// Sends `chunks` sealed under `key` to port; returns the first failure.
Status SendAll(int port, const BulkKey& key, const std::vector<std::vector<uint8_t>>& chunks,
               uint64_t job = kJob) {
  GD_ASSIGN_OR_RETURN(auto sender, ConnectBulk("127.0.0.1", port, key, job, kTimeoutMs));
  for (const auto& c : chunks) GD_RETURN_IF_ERROR(sender->Write(c.data(), c.size()));
  return sender->Finish();
}

bool ReadExact(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// A TCP proxy that parses sealed frames (their headers are in the clear) and
// lets `rewrite` change the list of frames it has seen so far before each is
// forwarded: a device on the path, after encryption.
class TamperingProxy {
 public:
  using Frame = std::vector<uint8_t>;
  // Called with every frame read; returns the frames to forward now.
  using Rewrite = std::function<std::vector<Frame>(size_t index, Frame frame)>;

  TamperingProxy(int upstream_port, Rewrite rewrite) : rewrite_(std::move(rewrite)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(listen_fd_, 1);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, upstream_port] { Run(upstream_port); });
  }
  ~TamperingProxy() {
    thread_.join();
    close(listen_fd_);
  }
  int port() const { return port_; }

 private:
  void Run(int upstream_port) {
    const int in = accept(listen_fd_, nullptr, nullptr);
    const int out = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(upstream_port));
    if (in >= 0 && connect(out, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      for (size_t index = 0;; ++index) {
        Frame frame(sealed::kSealedHeaderBytes);
        if (!ReadExact(in, frame.data(), sealed::kSealedHeaderBytes)) break;
        sealed::SealedHeader header;
        std::memcpy(&header, frame.data(), sizeof header);
        frame.resize(sealed::kSealedHeaderBytes + header.length + sealed::kSealedTagBytes);
        if (!ReadExact(in, frame.data() + sealed::kSealedHeaderBytes,
                       header.length + sealed::kSealedTagBytes))
          break;
        for (const Frame& f : rewrite_(index, std::move(frame)))
          if (send(out, f.data(), f.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(f.size()))
            goto done;
      }
    }
  done:
    if (in >= 0) close(in);
    close(out);
  }

  Rewrite rewrite_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

class BulkChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto listener = BulkListener::Listen("127.0.0.1");
    ASSERT_TRUE(listener.ok()) << listener.status().ToString();
    listener_ = std::move(*listener);
    for (uint8_t i = 0; i < 4; ++i) chunks_.push_back(Pattern((1 << 20) + 17 * i, i));
  }
  std::vector<uint8_t> All() const {
    std::vector<uint8_t> all;
    for (const auto& c : chunks_) all.insert(all.end(), c.begin(), c.end());
    return all;
  }
  // Runs the stream through a proxy applying `rewrite`; what the receiver made of it.
  Received ThroughProxy(TamperingProxy::Rewrite rewrite) {
    Received received;
    std::thread receiver([&] { received = ReceiveAll(*listener_, key_); });
    {
      TamperingProxy proxy(listener_->port(), std::move(rewrite));
      (void)SendAll(proxy.port(), key_, chunks_);  // may fail once the receiver gives up
    }
    receiver.join();
    return received;
  }

  BulkKey key_ = Key();
  std::unique_ptr<BulkListener> listener_;
  std::vector<std::vector<uint8_t>> chunks_;
};

TEST_F(BulkChannelTest, TheBytesArriveAsSent) {
  Received received;
  std::thread receiver([&] { received = ReceiveAll(*listener_, key_); });
  EXPECT_TRUE(SendAll(listener_->port(), key_, chunks_).ok());
  receiver.join();
  ASSERT_TRUE(received.status.ok()) << received.status.ToString();
  EXPECT_EQ(received.bytes, All());
}

// A write of many whole frames is sealed on the writer's helper thread, ahead
// of its sending (seal_ahead.h): every byte arrives in order, and a receiver
// that goes away mid-write ends the write with an error instead of a hang.
TEST_F(BulkChannelTest, ALargeWriteSealedAheadArrivesWholeAndEndsWhenThePeerGoesAway) {
  const std::vector<uint8_t> big = Pattern(19 * sealed::kFramePayload + 1234, 7);
  Received received;
  std::thread receiver([&] { received = ReceiveAll(*listener_, key_); });
  EXPECT_TRUE(SendAll(listener_->port(), key_, {big, chunks_[0], big}).ok());
  receiver.join();
  ASSERT_TRUE(received.status.ok()) << received.status.ToString();
  std::vector<uint8_t> want = big;
  want.insert(want.end(), chunks_[0].begin(), chunks_[0].end());
  want.insert(want.end(), big.begin(), big.end());
  EXPECT_EQ(received.bytes, want);

  std::thread quitter([&] {
    auto source = listener_->Accept(key_, kJob, kTimeoutMs, nullptr);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    std::vector<uint8_t> piece(1 << 20);
    ASSERT_TRUE((*source)->Read(piece.data(), piece.size(), kTimeoutMs).ok());
    // Goes away with the rest unread.
  });
  const std::vector<uint8_t> huge = Pattern(64 * sealed::kFramePayload, 9);
  const Status s = SendAll(listener_->port(), key_, {huge});
  quitter.join();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
}

TEST_F(BulkChannelTest, AnUntouchedProxyChangesNothing) {
  Received r = ThroughProxy([](size_t, TamperingProxy::Frame f) {
    return std::vector<TamperingProxy::Frame>{std::move(f)};
  });
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.bytes, All());
}

TEST_F(BulkChannelTest, ABitFlippedAfterSealingIsCaught) {
  Received r = ThroughProxy([](size_t i, TamperingProxy::Frame f) {
    if (i == 2) f[f.size() / 2] ^= 0x01;  // in the ciphertext of data frame 2
    return std::vector<TamperingProxy::Frame>{std::move(f)};
  });
  EXPECT_EQ(r.status.code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status.message().find("bulk frame 2 failed authentication"), std::string::npos)
      << r.status.ToString();
  EXPECT_EQ(r.bytes.size(), sealed::kFramePayload) << "only the frame before it was taken";
}

TEST_F(BulkChannelTest, AFlippedTagOrHeaderIsCaught) {
  Received tag = ThroughProxy([](size_t i, TamperingProxy::Frame f) {
    if (i == 1) f.back() ^= 0x80;
    return std::vector<TamperingProxy::Frame>{std::move(f)};
  });
  EXPECT_EQ(tag.status.code(), StatusCode::kDataLoss) << tag.status.ToString();
  SetUp();
  Received flags = ThroughProxy([](size_t i, TamperingProxy::Frame f) {
    if (i == 1) f[12] ^= sealed::kSealedLast;  // the header's flags: pretend the stream ends here
    return std::vector<TamperingProxy::Frame>{std::move(f)};
  });
  EXPECT_EQ(flags.status.code(), StatusCode::kDataLoss) << flags.status.ToString();
}

TEST_F(BulkChannelTest, AReplayedFrameIsCaught) {
  TamperingProxy::Frame first;
  Received r = ThroughProxy([&](size_t i, TamperingProxy::Frame f) {
    if (i == 1) first = f;
    if (i == 2) return std::vector<TamperingProxy::Frame>{first, std::move(f)};
    return std::vector<TamperingProxy::Frame>{std::move(f)};
  });
  EXPECT_EQ(r.status.code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status.message().find("replayed, reordered or lost"), std::string::npos)
      << r.status.ToString();
}

TEST_F(BulkChannelTest, AReplayedFrameWithARewrittenSequenceNumberDoesNotOpen) {
  // A smarter attacker also rewrites the header in the clear; the nonce is the
  // receiver's count, and the header is authenticated, so it still fails.
  TamperingProxy::Frame first;
  Received r = ThroughProxy([&](size_t i, TamperingProxy::Frame f) {
    if (i == 1) first = f;
    if (i == 2) {
      uint64_t seq = 2;
      std::memcpy(first.data(), &seq, sizeof seq);
      return std::vector<TamperingProxy::Frame>{first};
    }
    return std::vector<TamperingProxy::Frame>{std::move(f)};
  });
  EXPECT_EQ(r.status.code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status.message().find("bulk frame 2 failed authentication"), std::string::npos)
      << r.status.ToString();
}

TEST_F(BulkChannelTest, ReorderedFramesAreCaught) {
  TamperingProxy::Frame held;
  Received r = ThroughProxy([&](size_t i, TamperingProxy::Frame f) {
    if (i == 1) {
      held = std::move(f);
      return std::vector<TamperingProxy::Frame>{};
    }
    if (i == 2) return std::vector<TamperingProxy::Frame>{std::move(f), held};
    return std::vector<TamperingProxy::Frame>{std::move(f)};
  });
  EXPECT_EQ(r.status.code(), StatusCode::kDataLoss) << r.status.ToString();
  EXPECT_TRUE(r.bytes.empty());
}

TEST_F(BulkChannelTest, AStreamCutBeforeItsLastFrameIsCaught) {
  Received r = ThroughProxy([&](size_t, TamperingProxy::Frame f) {
    sealed::SealedHeader header;
    std::memcpy(&header, f.data(), sizeof header);
    if (header.flags == sealed::kSealedLast) return std::vector<TamperingProxy::Frame>{};
    return std::vector<TamperingProxy::Frame>{std::move(f)};
  });
  EXPECT_EQ(r.status.code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status.message().find("before the last frame"), std::string::npos)
      << r.status.ToString();
  EXPECT_EQ(r.bytes, All()) << "every data frame came, but the stream is not called complete";
}

TEST_F(BulkChannelTest, StrangersAndWrongKeysAreDroppedAndTheSourceStillGetsThrough) {
  Received received;
  std::thread receiver([&] { received = ReceiveAll(*listener_, key_); });
  // Another key (not this migration's), another job's hello, then the source.
  // Those two may fail at any point (the receiver drops them), or not at all.
  (void)SendAll(listener_->port(), Key(), chunks_);
  (void)SendAll(listener_->port(), key_, chunks_, kJob + 1);
  EXPECT_TRUE(SendAll(listener_->port(), key_, chunks_).ok());
  receiver.join();
  ASSERT_TRUE(received.status.ok()) << received.status.ToString();
  EXPECT_EQ(received.bytes, All());
}

TEST_F(BulkChannelTest, AHandedOverConnectionCarriesTheStateFromJobToJob) {
  // As the two gandivad do: each hands its end to its "job" over a Unix
  // socket pair; the jobs write and read the state themselves.
  int to_source[2], to_dest[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, to_source), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, to_dest), 0);
  Received received;
  std::thread destination([&] {
    auto source = listener_->Accept(key_, kJob, kTimeoutMs, nullptr);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    ASSERT_TRUE(
        sealed::SendHandoff(to_dest[0], (*source)->fd(), key_, (*source)->next_seq(), 0).ok());
    auto handoff = sealed::ReceiveHandoff(to_dest[1], kTimeoutMs);
    ASSERT_TRUE(handoff.ok()) << handoff.status().ToString();
    SealedReader job(std::move(handoff->connection), handoff->key, handoff->next_seq);
    std::vector<uint8_t> piece(3 << 20);
    for (;;) {
      auto n = job.Read(piece.data(), piece.size(), kTimeoutMs);
      if (!n.ok() || *n == 0) {
        received.status = n.status();
        break;
      }
      received.bytes.insert(received.bytes.end(), piece.begin(), piece.begin() + *n);
    }
  });
  auto bulk = ConnectBulk("127.0.0.1", listener_->port(), key_, kJob, kTimeoutMs);
  ASSERT_TRUE(bulk.ok()) << bulk.status().ToString();
  ASSERT_TRUE(sealed::SendHandoff(to_source[0], (*bulk)->fd(), key_, (*bulk)->next_seq(), 0).ok());
  auto handoff = sealed::ReceiveHandoff(to_source[1], kTimeoutMs);
  ASSERT_TRUE(handoff.ok()) << handoff.status().ToString();
  bulk->reset();  // the daemon's copy goes; the job's stays open
  SealedWriter job(std::move(handoff->connection), handoff->key, handoff->next_seq, kTimeoutMs);
  const std::vector<uint8_t> all = All();
  ASSERT_TRUE(job.Write(all.data(), 100).ok());  // a small write, then a large one
  ASSERT_TRUE(job.Write(all.data() + 100, all.size() - 100).ok());
  ASSERT_TRUE(job.Finish().ok());
  destination.join();
  ASSERT_TRUE(received.status.ok()) << received.status.ToString();
  EXPECT_EQ(received.bytes, all);
  for (int fd : {to_source[0], to_source[1], to_dest[0], to_dest[1]}) close(fd);
}

TEST(SealedFramesTest, AHandoffWithoutAConnectionIsRefused) {
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  ASSERT_EQ(write(pair[0], "not a handoff at all, and no descriptor with it..........", 56), 56);
  auto handoff = sealed::ReceiveHandoff(pair[1], kTimeoutMs);
  EXPECT_EQ(handoff.status().code(), StatusCode::kDataLoss) << handoff.status().ToString();
  close(pair[0]);
  close(pair[1]);
}

// The destination job's one reply (what it holds already) opens only as sent:
// under this key, as the reply's own frame, unmodified.
TEST(SealedFramesTest, TheReplyOpensOnlyAsSent) {
  const BulkKey key = Key();
  const std::vector<uint8_t> list = Pattern(5000, 3);
  const size_t size = sealed::kSealedHeaderBytes + list.size() + sealed::kSealedTagBytes;
  enum { kIntact, kBitFlipped, kOtherKey, kStreamFrame };
  for (int damage : {kIntact, kBitFlipped, kOtherKey, kStreamFrame}) {
    // The frame as it leaves the destination job...
    std::vector<uint8_t> wire(size);
    int out[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, out), 0);
    if (damage == kStreamFrame) {  // frame 1 of the stream where the reply is due
      sealed::FrameSealer sealer(key, 1);
      ASSERT_TRUE(sealer.Seal(sealed::kSealedData, list, wire.data()).ok());
    } else {
      ASSERT_TRUE(
          sealed::SendReply(out[0], damage == kOtherKey ? Key() : key, list, kTimeoutMs).ok());
      ASSERT_EQ(recv(out[1], wire.data(), size, MSG_WAITALL), static_cast<ssize_t>(size));
    }
    if (damage == kBitFlipped) wire[sealed::kSealedHeaderBytes + 100] ^= 0x04;
    // ...and as the source job reads it.
    int in[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, in), 0);
    ASSERT_EQ(write(in[0], wire.data(), size), static_cast<ssize_t>(size));
    auto got = sealed::ReceiveReply(in[1], key, kTimeoutMs);
    if (damage == kIntact) {
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, list);
    } else {
      EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << damage << got.status().ToString();
    }
    for (int fd : {out[0], out[1], in[0], in[1]}) close(fd);
  }
}

TEST(SealedFramesTest, KeysRoundTripAsHexAndBadHexIsRefused) {
  const BulkKey key = Key();
  auto back = sealed::BulkKeyFromHex(sealed::BulkKeyToHex(key));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, key);
  EXPECT_EQ(sealed::BulkKeyFromHex("abc").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sealed::BulkKeyFromHex(std::string(64, 'g')).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(sealed::BulkKeyToHex(Key()), sealed::BulkKeyToHex(key))
      << "each migration gets a fresh key";
}

TEST(SealedFramesTest, HostOfAnEndpoint) {
  EXPECT_EQ(HostOfTcpEndpoint("tcp://10.0.0.2:7070"), "10.0.0.2");
  EXPECT_EQ(HostOfTcpEndpoint("tcp://[::1]:7070"), "::1");
  EXPECT_EQ(HostOfTcpEndpoint("tcp://*:7070"), "*");
  EXPECT_EQ(HostOfTcpEndpoint("ipc:///tmp/x"), "");
}

}  // namespace
}  // namespace gandiva::controller

// What a destination watches to know its source's stream still arrives: the
// kernel's count on the connection, whichever process reads it.
TEST(BytesReceivedTest, CountsWhatTheConnectionTookIn) {
  using gandiva::controller::BytesReceived;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int sender = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(sender, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const int receiver = accept(listener, nullptr, nullptr);
  ASSERT_GE(receiver, 0);
  EXPECT_EQ(BytesReceived(receiver), 0u);
  const std::vector<char> data(5000, 'x');
  ASSERT_EQ(write(sender, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  std::vector<char> got(data.size());
  size_t have = 0;
  while (have < got.size()) {
    const ssize_t n = read(receiver, got.data() + have, got.size() - have);
    ASSERT_GT(n, 0);
    have += static_cast<size_t>(n);
  }
  EXPECT_EQ(BytesReceived(receiver), data.size());
  EXPECT_EQ(BytesReceived(-1), 0u);  // not a connection: the kernel says nothing
  close(sender);
  close(receiver);
  close(listener);
}
