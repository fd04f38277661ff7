// Sealing a write's frames on helper threads (sealed/src/seal_ahead.h): any
// number of sealers puts the same bytes on the wire as one sealer in order,
// the frames take the sealer's numbers (and the next write the ones after),
// and an error from sending ends the write without reusing a number.
#include "seal_ahead.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace gandiva::sealed {
namespace {

constexpr size_t kPayload = 1000;

BulkKey TestKey() {
  BulkKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(3 * i + 1);
  return key;
}

std::vector<uint8_t> State(size_t frames) {
  std::vector<uint8_t> state(frames * kPayload);
  for (size_t i = 0; i < state.size(); ++i) state[i] = static_cast<uint8_t>(i * 7 + (i >> 8));
  return state;
}

// The frames one sealer seals in order from `first`, end to end.
std::vector<uint8_t> InOrder(const std::vector<uint8_t>& state, uint64_t first) {
  FrameSealer sealer(TestKey(), first);
  const size_t wire = kSealedHeaderBytes + kPayload + kSealedTagBytes;
  std::vector<uint8_t> out(state.size() / kPayload * wire);
  for (size_t i = 0; i * kPayload < state.size(); ++i)
    EXPECT_TRUE(
        sealer.Seal(kSealedData, {state.data() + i * kPayload, kPayload}, &out[i * wire]).ok());
  return out;
}

TEST(SealAheadTest, AnyNumberOfSealersPutsTheSameBytesOnTheWire) {
  const auto state = State(23);
  for (int sealers : {1, 2, 3, 5}) {
    SCOPED_TRACE(sealers);
    FrameSealer sealer(TestKey(), 10);
    SealAhead ahead(&sealer, TestKey(), sealers);
    for (int write = 0; write < 2; ++write) {  // the second write numbers on
      std::vector<uint8_t> wire;
      Status result;
      ASSERT_TRUE(ahead.Run(
          state.data(), 23, kPayload,
          [&](std::span<uint8_t> frame) {
            wire.insert(wire.end(), frame.begin(), frame.end());
            return Status::Ok();
          },
          &result));
      ASSERT_TRUE(result.ok()) << result.ToString();
      EXPECT_EQ(wire, InOrder(state, 10 + 23 * write));
      EXPECT_EQ(sealer.next_seq(), 10u + 23 * (write + 1));
    }
  }
}

TEST(SealAheadTest, ASendErrorEndsTheWriteAndNoNumberIsUsedTwice) {
  const auto state = State(40);
  FrameSealer sealer(TestKey(), 0);
  SealAhead ahead(&sealer, TestKey(), 3);
  size_t sent = 0;
  Status result;
  ASSERT_TRUE(ahead.Run(
      state.data(), 40, kPayload,
      [&](std::span<uint8_t>) {
        return ++sent == 5 ? Unavailable("the peer went away") : Status::Ok();
      },
      &result));
  EXPECT_EQ(result.code(), StatusCode::kUnavailable);
  EXPECT_EQ(sent, 5u);
  EXPECT_EQ(sealer.next_seq(), 40u) << "past every frame the helpers may have sealed";
}

}  // namespace
}  // namespace gandiva::sealed
