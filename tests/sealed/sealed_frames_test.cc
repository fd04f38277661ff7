// Sealed frames (gandiva/sealed/sealed_frames.h): the wire layout pinned by a
// frame sealed elsewhere (Python's `cryptography`, from the layout in
// docs/migration.md), and the frames that must not open: a flipped bit of the
// tag, the ciphertext or the header (the associated data), a frame out of
// sequence or relabelled with the number due, one cut short or sealed under
// another key; and a stream cut short on a socket.
#include "gandiva/sealed/sealed_frames.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gandiva/sealed/sealed_channel.h"
#include "test_hex.h"

namespace gandiva::sealed {
namespace {

using testing::FromHex;

BulkKey CountingKey() {
  BulkKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i);
  return key;
}

std::vector<uint8_t> SealOne(const BulkKey& key, uint64_t seq, const std::string& text,
                             uint32_t flags = kSealedData) {
  FrameSealer sealer(key, seq);
  std::vector<uint8_t> frame(kSealedHeaderBytes + text.size() + kSealedTagBytes);
  EXPECT_TRUE(
      sealer.Seal(flags, {reinterpret_cast<const uint8_t*>(text.data()), text.size()}, frame.data())
          .ok());
  EXPECT_EQ(sealer.next_seq(), seq + 1);
  return frame;
}

// Opens a whole frame with an opener expecting `seq`.
Status OpenOne(const BulkKey& key, uint64_t seq, std::vector<uint8_t>& frame) {
  FrameOpener opener(key, seq);
  if (frame.size() < kSealedHeaderBytes + kSealedTagBytes) return DataLoss("shorter than a frame");
  GD_ASSIGN_OR_RETURN(SealedHeader header, opener.CheckHeader(frame.data()));
  if (frame.size() != kSealedHeaderBytes + header.length + kSealedTagBytes)
    return DataLoss("the header's length is not the frame's");
  return opener.Open(frame.data(), frame.data() + kSealedHeaderBytes,
                     frame.data() + kSealedHeaderBytes + header.length);
}

TEST(SealedFramesTest, TheWireLayoutIsAsDocumented) {
  // Header <seq, length, flags> as associated data, nonce LE64(seq) || 0^32.
  const std::vector<uint8_t> expected = FromHex(
      "05000000000000001400000002000000"          // header: seq 5, 20 bytes, data
      "810ac3a55ad132f9c7ef3c686c1a04d45794a6db"  // ciphertext
      "c0db9f5c42f7ee1a1182e6eec26469e7");        // tag
  std::vector<uint8_t> frame = SealOne(CountingKey(), 5, "gandiva sealed frame");
  EXPECT_EQ(frame, expected);
  ASSERT_TRUE(OpenOne(CountingKey(), 5, frame).ok());
  EXPECT_EQ(std::string(frame.begin() + kSealedHeaderBytes, frame.end() - kSealedTagBytes),
            "gandiva sealed frame");
  EXPECT_EQ(FrameNonce(5), (std::array<uint8_t, 12>{5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(SealedFramesTest, SealsInPlace) {
  const BulkKey key = CountingKey();
  const std::string text(1000, 'x');
  std::vector<uint8_t> frame(kSealedHeaderBytes + text.size() + kSealedTagBytes);
  std::memcpy(frame.data() + kSealedHeaderBytes, text.data(), text.size());
  FrameSealer sealer(key, 9);
  ASSERT_TRUE(
      sealer.Seal(kSealedData, {frame.data() + kSealedHeaderBytes, text.size()}, frame.data())
          .ok());
  EXPECT_EQ(frame, SealOne(key, 9, text));
}

TEST(SealedFramesTest, ChangedFramesDoNotOpen) {
  const BulkKey key = CountingKey();
  const std::vector<uint8_t> good = SealOne(key, 3, "the state of a job, sealed");
  const size_t body = kSealedHeaderBytes, tag = good.size() - kSealedTagBytes;
  auto fails = [&](const char* what, std::vector<uint8_t> frame, uint64_t due = 3,
                   const BulkKey& k = CountingKey()) {
    Status s = OpenOne(k, due, frame);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << what << ": " << s.ToString();
  };
  for (size_t at : {tag, good.size() - 1}) {
    auto f = good;
    f[at] ^= 1;
    fails("flipped tag", f);
  }
  for (size_t at : {body, tag - 1}) {
    auto f = good;
    f[at] ^= 0x40;
    fails("flipped ciphertext", f);
  }
  auto flags = good;
  flags[12] ^= kSealedLast;  // the header is the associated data
  fails("flipped flags", flags);
  fails("opened where frame 4 is due", good, 4);
  auto relabelled = good;  // the number due, but sealed as frame 3
  relabelled[0] = 4;
  fails("relabelled", relabelled, 4);
  auto shorter = good;  // one byte less, the header says so
  shorter.erase(shorter.begin() + body);
  shorter[8] -= 1;
  fails("truncated, header adjusted", shorter);
  auto truncated = good;
  truncated.resize(tag);
  fails("truncated tag", truncated);
  BulkKey other = key;
  other[0] ^= 1;
  fails("another key", good, 3, other);
  // Still opens untouched: none of the above was a false alarm.
  auto copy = good;
  EXPECT_TRUE(OpenOne(key, 3, copy).ok());
}

TEST(SealedFramesTest, AFailedOpenLeavesNoPlaintext) {
  auto frame = SealOne(CountingKey(), 0, "secret");
  frame.back() ^= 1;
  EXPECT_EQ(OpenOne(CountingKey(), 0, frame).code(), StatusCode::kDataLoss);
  EXPECT_EQ(std::string(frame.begin() + kSealedHeaderBytes, frame.end() - kSealedTagBytes),
            std::string(6, '\0'));
}

TEST(SealedFramesTest, AnOverlongHeaderIsRefusedBeforeItsBody) {
  FrameOpener opener(CountingKey(), 0);
  SealedHeader header{0, kMaxSealedPayload + 1, kSealedData};
  uint8_t bytes[kSealedHeaderBytes];
  std::memcpy(bytes, &header, sizeof bytes);
  EXPECT_EQ(opener.CheckHeader(bytes).status().code(), StatusCode::kDataLoss);
  FrameSealer sealer(CountingKey());
  std::vector<uint8_t> big(kMaxSealedPayload + 1);
  EXPECT_EQ(sealer.Seal(kSealedData, big, big.data()).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sealer.next_seq(), 0u);
}

// A stream that stops before its last frame is refused, not taken as complete.
TEST(SealedFramesTest, AStreamCutShortIsDataLoss) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd a(fds[0]), b(fds[1]);
  const BulkKey key = CountingKey();
  {
    SealedWriter writer(std::move(a), key, 0, 5000);
    const std::string text(3000, 's');
    ASSERT_TRUE(
        writer.WriteFrame(kSealedData, {reinterpret_cast<const uint8_t*>(text.data()), text.size()})
            .ok());
    // Half of the next frame, then the connection closes (the writer's end).
    auto next = SealOne(key, 1, text);
    ASSERT_EQ(send(writer.fd(), next.data(), next.size() / 2, MSG_NOSIGNAL),
              static_cast<ssize_t>(next.size() / 2));
  }
  SealedReader reader(std::move(b), key, 0);
  std::vector<uint8_t> out(8192);
  auto first = reader.Read(out.data(), out.size(), 5000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, 3000u);
  auto rest = reader.Read(out.data(), out.size(), 5000);
  EXPECT_EQ(rest.status().code(), StatusCode::kDataLoss) << rest.status().ToString();
  EXPECT_FALSE(reader.done());
}

TEST(SealedFramesTest, AWholeStreamRoundTrips) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd a(fds[0]), b(fds[1]);
  const BulkKey key = CountingKey();
  // Larger than the socket's buffer: written on a thread while read here. Several
  // whole frames in one write take the seal-ahead path (sealed_channel.cc).
  std::vector<uint8_t> state(5 * kFramePayload + 12345);
  for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  Status written;
  std::thread writer([&] {
    SealedWriter w(std::move(a), key, 1, 5000);
    written = w.Write(state.data(), 100);
    if (written.ok()) written = w.Write(state.data() + 100, state.size() - 100);
    if (written.ok()) written = w.Finish();
  });
  SealedReader reader(std::move(b), key, 1);
  std::vector<uint8_t> got(state.size());
  size_t off = 0;
  for (;;) {
    auto n = reader.Read(got.data() + off, std::max<size_t>(got.size() - off, 1), 5000);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    if (*n == 0) break;
    off += *n;
  }
  writer.join();
  ASSERT_TRUE(written.ok()) << written.ToString();
  EXPECT_TRUE(reader.done());
  EXPECT_EQ(off, state.size());
  EXPECT_EQ(got, state);
}

}  // namespace
}  // namespace gandiva::sealed
