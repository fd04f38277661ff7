// Chunks whose CRC32C follows their data (kFrameChunkCrcAfter): what a
// migration's source writes where its sink computes the checksum as it seals
// the chunk (sealed_io.cc), instead of in a read of its own before the header.
// They load bitwise, streamed or mapped; a changed byte of data or checksum,
// and a stream cut inside the checksum, are refused; the writer sends them
// only to a reader that takes them, and, where the reader holds chunks,
// only after a large chunk that it held was found changed.
#include <gtest/gtest.h>

#include <cstring>

#include "crc32c.h"
#include "format.h"
#include "fresh_state.h"
#include "held_chunks.h"
#include "stream.h"
#include "test_state.h"

namespace gandiva::checkpoint {
namespace {

// A sink that sums as it writes, as the sealed one does (there the sum is
// taken piece by piece as the cipher seals; here in one call: the bytes on
// the stream are the same).
class SummingSink : public MemorySink {
 public:
  explicit SummingSink(HeldChunks* held = nullptr, bool sums = true) : held_(held), sums_(sums) {}
  HeldChunks* held() override { return held_; }
  bool SumsAsItWrites() override { return sums_; }
  StatusOr<uint32_t> WriteChunkCrcAfter(std::span<const uint8_t> header, const uint8_t* p,
                                        size_t n) override {
    const uint32_t crc = Crc32c(p, n);
    struct iovec iov[3] = {{const_cast<uint8_t*>(header.data()), header.size()},
                           {const_cast<uint8_t*>(p), n},
                           {const_cast<uint32_t*>(&crc), sizeof crc}};
    GD_RETURN_IF_ERROR(WriteV(iov, 3));
    return crc;
  }

 private:
  HeldChunks* held_;
  bool sums_;
};

// A socket-like source (nothing mapped), with the reader's fresh state if any.
class StreamedSource : public MemorySource {
 public:
  StreamedSource(std::span<const uint8_t> bytes, std::unique_ptr<FreshState> fresh = nullptr)
      : MemorySource(bytes), fresh_(std::move(fresh)) {}
  std::span<const uint8_t> Mapped() const override { return {}; }
  std::unique_ptr<FreshState> TakeFresh() override { return std::move(fresh_); }

 private:
  std::unique_ptr<FreshState> fresh_;
};

struct Frame {
  size_t offset;  // of the header
  FrameHeader header;
};

std::vector<Frame> Frames(const std::vector<uint8_t>& bytes) {
  std::vector<Frame> out;
  for (size_t off = kPreambleSize; off + sizeof(FrameHeader) <= bytes.size();) {
    FrameHeader h;
    std::memcpy(&h, bytes.data() + off, sizeof(h));
    out.push_back({off, h});
    off += sizeof(h) + h.length;
  }
  return out;
}

// The chunk frames' types, in order ("3" plain, "6" same, "7" checksum after).
std::string ChunkTypes(const std::vector<uint8_t>& bytes) {
  std::string out;
  for (const Frame& f : Frames(bytes))
    if (f.header.type == kFrameChunk || f.header.type == kFrameChunkSame ||
        f.header.type == kFrameChunkCrcAfter)
      out += static_cast<char>('0' + f.header.type);
  return out;
}

class CrcAfterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Add("step", 8, 1);                   // one small chunk, buffered
    Add("weights", (9u << 20) + 77, 2);  // written straight: 4, 4, 1 MiB + 77 B
  }
  void Add(const std::string& name, size_t size, uint32_t seed) {
    states_.push_back(RandomState(name, size, seed));
  }
  std::vector<std::shared_ptr<const StateEntry>> Entries() {
    std::vector<std::shared_ptr<const StateEntry>> out;
    for (auto& s : states_) {
      TestState* st = s.get();
      out.push_back(std::make_shared<StateEntry>(StateEntry{
          st->name, [st](SectionWriter& w) { return w.Write(st->data.data(), st->data.size()); },
          [st](SectionReader& r) {
            st->loaded.resize(r.size());
            const size_t got = r.Read(st->loaded.data(), st->loaded.size());
            return got == st->loaded.size() ? Status::Ok() : DataLoss("short read");
          },
          /*check=*/nullptr}));
    }
    return out;
  }
  std::vector<uint8_t> Write(Sink* sink) {
    uint64_t bytes = 0;
    Status s = WriteStream(sink, Entries(), {}, &bytes);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return static_cast<MemorySink*>(sink)->bytes();
  }
  Status Load(const std::vector<uint8_t>& bytes, bool streamed, RestoreCheck check,
              std::unique_ptr<FreshState> fresh = nullptr) {
    for (auto& s : states_) s->loaded.clear();
    MemorySource mapped(bytes);
    StreamedSource socket(bytes, std::move(fresh));
    Source* source = streamed ? static_cast<Source*>(&socket) : &mapped;
    auto stream = ReadStream(source, check);
    if (!stream.ok()) return stream.status();
    return LoadStream(*stream, Entries());
  }

  std::vector<std::shared_ptr<TestState>> states_;
};

constexpr RestoreCheck kChecks[] = {RestoreCheck::kBeforeLoading, RestoreCheck::kWhileLoading};

TEST_F(CrcAfterTest, LargeChunksCarryTheirChecksumAfterAndLoadBitwise) {
  SummingSink sink;
  const auto bytes = Write(&sink);
  // The buffered step is a plain chunk; the three written straight carry it after.
  EXPECT_EQ(ChunkTypes(bytes), "3777");
  for (const Frame& f : Frames(bytes))
    if (f.header.type == kFrameChunkCrcAfter) {
      EXPECT_EQ(f.header.payload_crc, 0u);
    }
  for (bool streamed : {false, true}) {
    for (RestoreCheck check : kChecks) {
      Status s = Load(bytes, streamed, check);
      ASSERT_TRUE(s.ok()) << s.ToString();
      for (const auto& st : states_) EXPECT_EQ(st->loaded, st->data) << st->name;
    }
  }
}

TEST_F(CrcAfterTest, ASinkThatDoesNotSumGetsPlainChunks) {
  SummingSink sink(nullptr, /*sums=*/false);
  EXPECT_EQ(ChunkTypes(Write(&sink)), "3333");
}

TEST_F(CrcAfterTest, AChangedByteOfDataOrChecksumIsRefused) {
  SummingSink sink;
  const auto good = Write(&sink);
  // Frames: header, step begin, step, step end, weights begin, weights' first chunk...
  const Frame chunk = Frames(good)[5];
  ASSERT_EQ(chunk.header.type, kFrameChunkCrcAfter);
  const size_t data = chunk.offset + sizeof(FrameHeader);
  const size_t trailer = data + chunk.header.length - kCrcAfterBytes;
  for (size_t at : {data, data + 123456, trailer - 1, trailer, trailer + 3}) {
    auto bad = good;
    bad[at] ^= 0x20;
    for (bool streamed : {false, true}) {
      for (RestoreCheck check : kChecks) {
        Status s = Load(bad, streamed, check);
        EXPECT_EQ(s.code(), StatusCode::kDataLoss) << at << " " << streamed;
        EXPECT_NE(s.message().find("CRC32C"), std::string::npos) << s.ToString();
      }
    }
  }
}

TEST_F(CrcAfterTest, AStreamCutInsideTheChecksumIsRefused) {
  SummingSink sink;
  const auto good = Write(&sink);
  const Frame chunk = Frames(good)[5];
  const size_t trailer = chunk.offset + sizeof(FrameHeader) + chunk.header.length - kCrcAfterBytes;
  std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(trailer + 2));
  for (bool streamed : {false, true}) {
    Status s = Load(cut, streamed, RestoreCheck::kBeforeLoading);
    EXPECT_EQ(s.code(), StatusCode::kDataLoss);
    EXPECT_NE(s.message().find("inside the checksum after chunk"), std::string::npos)
        << s.ToString();
  }
}

TEST_F(CrcAfterTest, AFrameTooShortForItsChecksumIsRefused) {
  SummingSink sink;
  auto bytes = Write(&sink);
  const Frame chunk = Frames(bytes)[5];
  FrameHeader h = chunk.header;
  h.length = 3;
  h.header_crc = Crc32c(&h, offsetof(FrameHeader, header_crc));
  std::memcpy(bytes.data() + chunk.offset, &h, sizeof h);
  Status s = Load(bytes, /*streamed=*/true, RestoreCheck::kBeforeLoading);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("too short for its checksum"), std::string::npos) << s.ToString();
}

// The reader holds its fresh state: a frozen run, then a trained run, then
// a frozen run again, each of large chunks. The first chunk of a section and
// every chunk after a held one are checked before they are sent (and a held
// one named); after a changed one the next is sent with its checksum after;
// one of those that was held after all is sent whole, and the next checked.
TEST_F(CrcAfterTest, WithHeldChunksOnlyAChunkAfterAChangedOneIsSentUnchecked) {
  states_.clear();
  Add("step", 8, 1);
  Add("model", 36u << 20, 3);  // nine chunks of 4 MiB
  const auto train = [this] {
    states_[0]->data[0] ^= 0x01;
    for (size_t c : {3u, 4u, 5u}) states_[1]->data[(c << 22) + 4097] ^= 0x01;
  };
  for (RestoreCheck check : kChecks) {
    // The reader's copy holds the state as it started.
    auto fresh = FreshState::Capture(Entries(), {});
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    auto held = HeldChunks::Parse((*fresh)->Manifest());
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    ASSERT_TRUE(held->takes_crc_after());
    train();  // the step and chunks 3, 4, 5 of the model changed, one bit each
    SummingSink sink(&*held);
    const auto bytes = Write(&sink);
    // step: plain. model: 0-2 named; 3 checked first, changed; 4, 5 after;
    // 6 after too (held after all: sent whole); 7, 8 named.
    EXPECT_EQ(ChunkTypes(bytes), "3" "666" "377" "7" "66");
    EXPECT_EQ(held->bytes_held(), 5u << 22);
    Status s = Load(bytes, /*streamed=*/true, check, std::move(*fresh));
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const auto& st : states_) EXPECT_EQ(st->loaded, st->data) << st->name;
    train();  // back as it started, for the next round
  }
}

// An older reader's list (version 1, or none at all) takes plain chunks only;
// a version 2 list of nothing still takes chunks with their checksum after.
TEST_F(CrcAfterTest, OnlyAReaderThatSaysSoGetsThem) {
  auto fresh = FreshState::Capture(Entries(), {});
  ASSERT_TRUE(fresh.ok());
  std::vector<uint8_t> v1 = (*fresh)->Manifest();
  ASSERT_EQ(v1[6], '2');
  v1[6] = '1';
  auto old = HeldChunks::Parse(v1);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_FALSE(old->takes_crc_after());
  EXPECT_EQ(old->chunks(), 4u) << "a version 1 list still holds what it lists";
  auto none = HeldChunks::Parse({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->takes_crc_after());
  auto empty_v2 = HeldChunks::Parse(EncodeHeldChunks(sealed::BulkKey{}, {}));
  ASSERT_TRUE(empty_v2.ok());
  EXPECT_TRUE(empty_v2->takes_crc_after());

  states_[1]->data[5] ^= 1;  // changed: sent, not named
  SummingSink to_old(&*old, old->takes_crc_after());
  EXPECT_EQ(ChunkTypes(Write(&to_old)), "6366");
  SummingSink to_new(&*empty_v2, empty_v2->takes_crc_after());
  EXPECT_EQ(ChunkTypes(Write(&to_new)), "3777");
}

}  // namespace
}  // namespace gandiva::checkpoint
