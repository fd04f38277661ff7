// Chunk tags (gandiva/sealed/chunk_tag.h): GMAC with the chunk's place as the
// nonce, pinned by a tag computed elsewhere (Python's `cryptography`); the
// same bytes give the same tag on both sides, and another place, key or byte
// gives another.
#include "gandiva/sealed/chunk_tag.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_hex.h"

namespace gandiva::sealed {
namespace {

BulkKey TagTestKey() {
  BulkKey key;
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i);
  return key;
}

std::vector<uint8_t> Chunk() {
  std::string text;
  for (int i = 0; i < 100; ++i) text += "chunk";
  return {text.begin(), text.end()};
}

TEST(ChunkTagTest, IsGmacWithThePlaceAsNonce) {
  // AES-256-GCM, key 00..1f, nonce LE32(1) || LE64(2), the chunk as associated data.
  ChunkTagger tagger(TagTestKey());
  auto tag = tagger.Of({1, 2}, Chunk());
  ASSERT_TRUE(tag.ok()) << tag.status().ToString();
  const auto expected = testing::FromHex("570d09a6c5307f7b65897660059e602e");
  EXPECT_EQ(std::vector<uint8_t>(tag->begin(), tag->end()), expected);
}

TEST(ChunkTagTest, BothSidesAgreeAndEveryInputCounts) {
  const BulkKey key = TagTestKey();
  ChunkTagger receiver(key), sender(key);
  const auto chunk = Chunk();
  const ChunkTag tag = *receiver.Of({0, 7}, chunk);
  EXPECT_EQ(*sender.Of({0, 7}, chunk), tag);
  EXPECT_EQ(*receiver.Of({0, 7}, chunk), tag) << "keyed once, any number of tags";
  EXPECT_NE(*sender.Of({0, 8}, chunk), tag) << "another index";
  EXPECT_NE(*sender.Of({1, 7}, chunk), tag) << "another section";
  auto changed = chunk;
  changed[250] ^= 1;
  EXPECT_NE(*sender.Of({0, 7}, changed), tag) << "another byte";
  BulkKey other = key;
  other[5] ^= 1;
  EXPECT_NE(*ChunkTagger(other).Of({0, 7}, chunk), tag) << "another key";
  EXPECT_TRUE(sender.Of({0, 0}, {}).ok()) << "an empty chunk has a tag too";
  ChunkTagger moved = std::move(sender);
  EXPECT_EQ(*moved.Of({0, 7}, chunk), tag);
}

}  // namespace
}  // namespace gandiva::sealed
