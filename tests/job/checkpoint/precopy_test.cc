// A migration's warm copy as its own pre-copy (fresh_state.h, held_chunks.h):
// chunks the destination holds already are named, not sent; what arrives
// loads bitwise; a "same" frame for a chunk the reader does not hold, a tag
// that differs where the checksums agree, and a malformed list all fail; a
// buffer section is received where it belongs.
#include <gtest/gtest.h>

#include <cstring>

#include "format.h"
#include "fresh_state.h"
#include "held_chunks.h"
#include "stream.h"
#include "test_state.h"

namespace gandiva::checkpoint {
namespace {

// The writer's side of a migration: a sink that knows what the reader holds.
class HeldSink : public MemorySink {
 public:
  explicit HeldSink(HeldChunks held) : held_(std::move(held)) {}
  HeldChunks* held() override { return &held_; }

 private:
  HeldChunks held_;
};

// The reader's side: a socket-like source that brings its own fresh state.
class FreshSource : public MemorySource {
 public:
  FreshSource(std::span<const uint8_t> bytes, std::unique_ptr<FreshState> fresh)
      : MemorySource(bytes), fresh_(std::move(fresh)) {}
  std::span<const uint8_t> Mapped() const override { return {}; }
  std::unique_ptr<FreshState> TakeFresh() override { return std::move(fresh_); }

 private:
  std::unique_ptr<FreshState> fresh_;
};

size_t FramesOfType(const std::vector<uint8_t>& bytes, uint8_t type) {
  size_t n = 0;
  for (size_t off = kPreambleSize; off + sizeof(FrameHeader) <= bytes.size();) {
    FrameHeader h;
    std::memcpy(&h, bytes.data() + off, sizeof(h));
    n += h.type == type;
    off += sizeof(h) + h.length;
  }
  return n;
}

// One buffer section "weights" over `bytes` (as StateRegistry::RegisterBuffer
// makes it): saved from the vector, restored into it.
std::vector<std::shared_ptr<const StateEntry>> BufferSection(std::vector<uint8_t>* bytes) {
  StateEntry e{
      "weights", [bytes](SectionWriter& w) { return w.Write(bytes->data(), bytes->size()); },
      [bytes](SectionReader& r) {
        return r.Read(bytes->data(), bytes->size()) == bytes->size() ? Status::Ok()
                                                                     : DataLoss("short read");
      },
      nullptr, std::span<uint8_t>(*bytes)};
  return {std::make_shared<StateEntry>(std::move(e))};
}

class PrecopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Add("frozen", (9u << 20) + 123, 1);  // chunks of 4, 4 and 1 MiB + 123 B
    Add("trained", 6u << 20, 2);         // chunks of 4 and 2 MiB
    Add("step", 8, 3);                   // one small chunk
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
  std::unique_ptr<FreshState> Capture() {
    auto fresh = FreshState::Capture(Entries(), {});
    EXPECT_TRUE(fresh.ok()) << fresh.status().ToString();
    return fresh.ok() ? std::move(*fresh) : nullptr;
  }
  // What the training since the copy started changed: one byte of the
  // first chunk of "trained", and the step counter.
  void Train() {
    states_[1]->data[1000] ^= 0x5a;
    states_[2]->data[0] += 1;
  }
  std::vector<uint8_t> WriteFor(const FreshState& fresh, uint64_t* held_bytes = nullptr) {
    return WriteFor(fresh, Entries(), held_bytes);
  }
  // What a source with `entries` sends to the copy that holds `fresh`.
  std::vector<uint8_t> WriteFor(const FreshState& fresh,
                                const std::vector<std::shared_ptr<const StateEntry>>& entries,
                                uint64_t* held_bytes = nullptr) {
    auto held = HeldChunks::Parse(fresh.Manifest());
    EXPECT_TRUE(held.ok()) << held.status().ToString();
    HeldSink sink(std::move(*held));
    uint64_t bytes = 0;
    Status s = WriteStream(&sink, entries, {}, &bytes);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (held_bytes) *held_bytes = sink.held()->bytes_held();
    return sink.bytes();
  }
  Status Load(const std::vector<uint8_t>& bytes, std::unique_ptr<FreshState> fresh,
              RestoreCheck check) {
    for (auto& s : states_) s->loaded.clear();
    FreshSource source(bytes, std::move(fresh));
    auto stream = ReadStream(&source, check);
    if (!stream.ok()) return stream.status();
    return LoadStream(*stream, Entries());
  }

  std::vector<std::shared_ptr<TestState>> states_;
};

TEST_F(PrecopyTest, ChunksTheReaderHoldsAreNamedNotSentAndTheStateLoadsBitwise) {
  for (RestoreCheck check : {RestoreCheck::kBeforeLoading, RestoreCheck::kWhileLoading}) {
    states_.clear();
    SetUp();
    std::unique_ptr<FreshState> fresh = Capture();
    ASSERT_NE(fresh, nullptr);
    const uint8_t* frozen_first = fresh->Find("frozen", 0)->bytes;
    const uint8_t* trained_first = fresh->Find("trained", 0)->bytes;
    Train();
    uint64_t held_bytes = 0;
    const auto bytes = WriteFor(*fresh, &held_bytes);
    // frozen's 3 chunks and trained's second are held; trained's first and the step are sent.
    EXPECT_EQ(FramesOfType(bytes, kFrameChunkSame), 4u);
    EXPECT_EQ(FramesOfType(bytes, kFrameChunk), 2u);
    EXPECT_EQ(held_bytes, states_[0]->data.size() + (2u << 20));
    EXPECT_LT(bytes.size(), (4u << 20) + 4096) << "only the changed chunks crossed";

    FreshSource source(bytes, std::move(fresh));
    auto stream = ReadStream(&source, check);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    EXPECT_EQ(stream->sections[0].chunks[0].data(), frozen_first) << "taken where it lies";
    EXPECT_EQ(stream->sections[1].chunks[0].data(), trained_first) << "received in place";
    Status loaded = LoadStream(*stream, Entries());
    ASSERT_TRUE(loaded.ok()) << loaded.ToString();
    for (const auto& s : states_) EXPECT_EQ(s->loaded, s->data) << s->name;
  }
}

// A buffer section (StateRegistry::RegisterBuffer) of a warm copy: its fresh
// chunks are the buffer itself (no copy kept), a changed chunk is received
// straight into the buffer, a held one is where it was, and the load copies
// nothing.
TEST_F(PrecopyTest, ABufferSectionIsReceivedWhereItBelongs) {
  const size_t size = (9u << 20) + 123;  // chunks of 4, 4 and 1 MiB + 123 B
  std::vector<uint8_t> source = RandomState("weights", size, 5)->data;
  std::vector<uint8_t> copy = source;  // the warm copy's own, as it started
  auto fresh = FreshState::Capture(BufferSection(&copy), {});
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ((*fresh)->Find("weights", 0)->bytes, copy.data()) << "the buffer, not a copy";
  EXPECT_EQ((*fresh)->Find("weights", 2)->length, (1u << 20) + 123);
  source[(4u << 20) + 10] ^= 0xff;  // the source trained: chunk 1 changed
  const auto sent = WriteFor(**fresh, BufferSection(&source));
  EXPECT_EQ(FramesOfType(sent, kFrameChunk), 1u);

  FreshSource from(sent, std::move(*fresh));
  auto stream = ReadStream(&from, RestoreCheck::kWhileLoading, BufferSection(&copy));
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const auto& chunks = stream->sections[0].chunks;
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1].data(), copy.data() + (4u << 20)) << "the changed chunk, in place";
  EXPECT_EQ(chunks[0].data(), copy.data()) << "a held chunk, where it was";
  EXPECT_EQ(chunks[2].data(), copy.data() + (8u << 20));
  ASSERT_TRUE(LoadStream(*stream, BufferSection(&copy)).ok());
  EXPECT_EQ(copy, source);

  // A restore that is not a warm copy's (no fresh state) never writes into
  // the buffer before the load.
  std::vector<uint8_t> other = source;
  MemorySink plain;
  uint64_t bytes = 0;
  ASSERT_TRUE(WriteStream(&plain, BufferSection(&source), {}, &bytes).ok());
  FreshSource no_fresh(plain.bytes(), nullptr);
  auto read = ReadStream(&no_fresh, RestoreCheck::kWhileLoading, BufferSection(&other));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  for (const auto& c : read->sections[0].chunks)
    EXPECT_FALSE(c.data() >= other.data() && c.data() < other.data() + other.size());
}

// The parked copy must not change its buffer; if it did, the chunks it
// holds no longer match what it told the source, and the restore fails (the
// copy is discarded) instead of loading them.
TEST_F(PrecopyTest, ABufferChangedAfterItsCopyWasTaggedFailsTheRestore) {
  for (RestoreCheck check : {RestoreCheck::kBeforeLoading, RestoreCheck::kWhileLoading}) {
    std::vector<uint8_t> source = RandomState("weights", 6u << 20, 9)->data;
    std::vector<uint8_t> copy = source;
    auto fresh = FreshState::Capture(BufferSection(&copy), {});
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    const auto sent = WriteFor(**fresh, BufferSection(&source));
    EXPECT_EQ(FramesOfType(sent, kFrameChunkSame), 2u) << "nothing changed at the source";
    copy[100] ^= 1;  // the copy broke its contract

    FreshSource from(sent, std::move(*fresh));
    auto stream = ReadStream(&from, check, BufferSection(&copy));
    Status s = stream.ok() ? LoadStream(*stream, BufferSection(&copy)) : stream.status();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  }
}

// The warm copy loads as the stream arrives (LoadWhileReading, as
// RestoreState does for a migration): held chunks are taken from its fresh
// state, changed ones arrive where the load reads them, a buffer section's
// chunks arrive in the buffer, and a buffer changed after it was tagged
// still fails the restore.
TEST_F(PrecopyTest, LoadedAsItArrivesHeldChunksComeFromTheCopyAndChangedOnesWhereTheLoadReads) {
  std::unique_ptr<FreshState> fresh = Capture();
  ASSERT_NE(fresh, nullptr);
  Train();
  const auto bytes = WriteFor(*fresh);
  ASSERT_EQ(FramesOfType(bytes, kFrameChunkSame), 4u);
  for (auto& st : states_) st->loaded.assign(st->data.size(), 0);  // the job's own memory
  const uint8_t* trained = states_[1]->loaded.data();
  // Reads into the memory prepared above, without asking the size first.
  std::vector<std::shared_ptr<const StateEntry>> entries;
  for (auto& s : states_) {
    TestState* st = s.get();
    entries.push_back(std::make_shared<StateEntry>(
        StateEntry{st->name, nullptr,
                   [st](SectionReader& r) {
                     return r.Read(st->loaded.data(), st->loaded.size()) == st->loaded.size()
                                ? Status::Ok()
                                : DataLoss("short read");
                   },
                   nullptr}));
  }
  FreshSource source(bytes, std::move(fresh));
  auto stream = LoadWhileReading(&source, entries);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  for (const auto& s : states_) EXPECT_EQ(s->loaded, s->data) << s->name;
  EXPECT_EQ(stream->sections[1].chunks[0].data(), trained) << "the changed chunk, where it is read";

  // A buffer section: a changed chunk lands in the buffer, held ones are there.
  std::vector<uint8_t> from = RandomState("weights", (9u << 20) + 123, 5)->data;
  std::vector<uint8_t> copy = from;
  auto buffer_fresh = FreshState::Capture(BufferSection(&copy), {});
  ASSERT_TRUE(buffer_fresh.ok()) << buffer_fresh.status().ToString();
  from[(4u << 20) + 10] ^= 0xff;
  const auto sent = WriteFor(**buffer_fresh, BufferSection(&from));
  FreshSource buffer_source(sent, std::move(*buffer_fresh));
  auto buffer_stream = LoadWhileReading(&buffer_source, BufferSection(&copy));
  ASSERT_TRUE(buffer_stream.ok()) << buffer_stream.status().ToString();
  EXPECT_EQ(copy, from);
  EXPECT_EQ(buffer_stream->sections[0].chunks[1].data(), copy.data() + (4u << 20));

  // The copy changed its buffer after it was tagged: the restore fails.
  std::vector<uint8_t> broken = from;
  auto broken_fresh = FreshState::Capture(BufferSection(&broken), {});
  ASSERT_TRUE(broken_fresh.ok());
  const auto unchanged = WriteFor(**broken_fresh, BufferSection(&from));
  EXPECT_EQ(FramesOfType(unchanged, kFrameChunkSame), 3u);
  broken[(8u << 20) + 5] ^= 1;
  FreshSource broken_source(unchanged, std::move(*broken_fresh));
  auto failed = LoadWhileReading(&broken_source, BufferSection(&broken));
  EXPECT_EQ(failed.status().code(), StatusCode::kDataLoss) << failed.status().ToString();
  EXPECT_NE(failed.status().message().find("its buffer changed since"), std::string::npos)
      << failed.status().ToString();
}

// The memory kept is the stream and a little room, faulted in; not the
// doubled mapping the stream was written into (a 1 GiB state kept 2 GiB).
TEST_F(PrecopyTest, TheKeptMemoryIsTheStreamAndALittleRoom) {
  Add("large", 17u << 20, 4);  // past the first 16 MiB: the mapping doubled to 32
  std::unique_ptr<FreshState> fresh = Capture();
  ASSERT_NE(fresh, nullptr);
  const uint64_t stream = fresh->stream_bytes();
  std::unique_ptr<Slab> memory = fresh->TakeMemory();
  EXPECT_GE(memory->size(), stream);
  EXPECT_LE(memory->size(), stream + stream / 64 + (1u << 20));
}

TEST_F(PrecopyTest, NothingHeldSendsEverything) {
  std::unique_ptr<FreshState> fresh = Capture();
  for (auto& s : states_)
    for (auto& b : s->data) b ^= 0xff;  // every byte trained
  const auto bytes = WriteFor(*fresh);
  EXPECT_EQ(FramesOfType(bytes, kFrameChunkSame), 0u);
  ASSERT_TRUE(Load(bytes, std::move(fresh), RestoreCheck::kWhileLoading).ok());
  for (const auto& s : states_) EXPECT_EQ(s->loaded, s->data) << s->name;
}

TEST_F(PrecopyTest, ASameFrameForAChunkTheReaderDoesNotHoldFailsBeforeAnyLoad) {
  std::unique_ptr<FreshState> told = Capture();
  const auto bytes = WriteFor(*told);  // all held: nothing trained
  ASSERT_EQ(FramesOfType(bytes, kFrameChunkSame), 6u);

  // A reader whose own state differs (another seed for "frozen").
  auto frozen = states_[0]->data;
  states_[0]->data[7] ^= 1;
  std::unique_ptr<FreshState> other = Capture();
  states_[0]->data = frozen;
  Status s = Load(bytes, std::move(other), RestoreCheck::kBeforeLoading);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("its own chunk there differs"), std::string::npos) << s.ToString();
  for (const auto& st : states_) EXPECT_TRUE(st->loaded.empty()) << "nothing was loaded";

  // A reader holding nothing: a file, or a socket without a fresh state.
  s = Load(bytes, nullptr, RestoreCheck::kWhileLoading);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("it holds none there"), std::string::npos) << s.ToString();
  MemorySource file(bytes);
  EXPECT_EQ(ReadStream(&file).status().code(), StatusCode::kDataLoss);
}

TEST_F(PrecopyTest, WhereTheChecksumsAgreeTheTagDecides) {
  const auto key = sealed::NewBulkKey();
  ASSERT_TRUE(key.ok());
  std::vector<uint8_t> chunk(4096, 7);
  const uint32_t crc = 0x12345678;  // Holds compares the CRC it is given
  sealed::ChunkTagger tagger(*key);
  const auto right = tagger.Of({0, 0}, chunk);  // the first chunk of the first section
  ASSERT_TRUE(right.ok());
  sealed::ChunkTag wrong = *right;
  wrong[3] ^= 1;
  for (const auto& [tag, held] : {std::pair{*right, true}, std::pair{wrong, false}}) {
    auto list = HeldChunks::Parse(
        EncodeHeldChunks(*key, {HeldSection{"model", {HeldChunk{4096, crc, tag}}}}));
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    EXPECT_EQ(list->Holds("model", 0, chunk, crc).has_value(), held);
    EXPECT_FALSE(list->Holds("model", 0, chunk, crc + 1).has_value()) << "CRC differs";
    EXPECT_FALSE(list->Holds("model", 1, chunk, crc).has_value()) << "no such place";
    EXPECT_FALSE(list->Holds("other", 0, chunk, crc).has_value()) << "no such section";
  }
  // The tag names the chunk's place: the same bytes held elsewhere do not match it.
  auto moved = HeldChunks::Parse(EncodeHeldChunks(
      *key, {HeldSection{"model", {HeldChunk{4096, crc, *right}, HeldChunk{4096, crc, *right}}}}));
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_TRUE(moved->Holds("model", 0, chunk, crc).has_value());
  EXPECT_FALSE(moved->Holds("model", 1, chunk, crc).has_value()) << "tagged as chunk 0";
}

TEST_F(PrecopyTest, AMalformedListIsRefused) {
  std::unique_ptr<FreshState> fresh = Capture();
  const std::vector<uint8_t> manifest = fresh->Manifest();
  ASSERT_TRUE(HeldChunks::Parse(manifest).ok());
  EXPECT_EQ(HeldChunks::Parse(manifest)->chunks(), 6u);
  EXPECT_EQ(HeldChunks::Parse({})->chunks(), 0u) << "an empty list holds nothing";
  for (size_t n = 1; n < manifest.size(); ++n) {
    auto cut = HeldChunks::Parse(std::span(manifest).first(n));
    EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss) << "cut at " << n;
  }
  auto longer = manifest;
  longer.push_back(0);
  EXPECT_EQ(HeldChunks::Parse(longer).status().code(), StatusCode::kDataLoss);
  auto magic = manifest;
  magic[0] ^= 1;
  EXPECT_EQ(HeldChunks::Parse(magic).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gandiva::checkpoint
